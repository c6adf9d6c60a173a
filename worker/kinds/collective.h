// Collectives (bench: collective): all-reduce, all-gather, reduce-scatter,
// broadcast, reduce, all-to-all and send/recv on a CollectiveBackend, timed
// pipelined, per operation or as CUDA-graph replays, verified, with
// nccl-tests' algbw/busbw and each rank's median.
#ifndef RINGMASTER_WORKER_KINDS_COLLECTIVE_H_
#define RINGMASTER_WORKER_KINDS_COLLECTIVE_H_

#include "backends/backend.h"
#include "ringmaster/v1/result.pb.h"

namespace ringmaster {

// Every rank of `control` calls it with the same case. The result on rank
// 0 is complete (status, stats, bandwidth, wrong count, per-rank medians);
// other ranks get the same status and stats. The time of one sample is
// the slowest rank's (max over ranks).
v1::Result RunCase(const v1::Case& c, CollectiveBackend& backend,
                   Control& control);

}  // namespace ringmaster

#endif  // RINGMASTER_WORKER_KINDS_COLLECTIVE_H_
