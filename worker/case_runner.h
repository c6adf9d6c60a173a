// Runs one Case on every rank: prepare, verify, warm up, sample until the
// stopping rule says enough, and combine the ranks' figures.
//
// Every rank calls RunCase with the same case, in the same order; all
// decisions that change the number of operations are taken from values
// that every rank shares (through Control), so ranks never diverge.
#ifndef RINGMASTER_WORKER_CASE_RUNNER_H_
#define RINGMASTER_WORKER_CASE_RUNNER_H_

#include "backends/backend.h"
#include "ringmaster/v1/result.pb.h"

namespace ringmaster {

// The result on rank 0 is complete (status, stats, bandwidth, wrong count,
// per-rank medians); other ranks get the same status and stats. The time
// of one sample is the slowest rank's (max over ranks).
v1::Result RunCase(const v1::Case& c, CollectiveBackend& backend,
                   Control& control);

}  // namespace ringmaster

#endif  // RINGMASTER_WORKER_CASE_RUNNER_H_
