// Runs one node benchmark case (bench != collective) on every rank:
// prepare, verify, warm up, sample until the stopping rule says enough,
// and combine the ranks' figures the way nvbandwidth counts them.
#ifndef RINGMASTER_WORKER_BENCH_RUNNER_H_
#define RINGMASTER_WORKER_BENCH_RUNNER_H_

#include <string>
#include <vector>

#include "backends/backend.h"
#include "backends/node_bench.h"
#include "ringmaster/v1/result.pb.h"

namespace ringmaster {

// Every rank calls it with the same case. The result on rank 0 is complete:
// bandwidth (sum over the ranks that moved bytes at once, per sample, then
// the median over samples), per-rank bandwidth, latency or TFLOP/s, the
// path, its ceiling and the percentage of it. Unimplemented from Prepare on
// any rank gives a SKIPPED result with that rank's reason.
v1::Result RunBench(const v1::Case& c, NodeBench& bench, Control& control);

// bench: find_slow, the bad-node finder (core/find_slow.h): pair tests
// chosen as the search goes, each a P2P pair case of `c`'s method,
// direction, traffic, size and timing between two members' ranks (members:
// ranks, or nodes by `hosts[rank]` with the node's first rank). Every rank
// calls it; rank 0's result is complete: the tests, the reference and the
// named members. A confirmed slow member fails the result (BELOW_FLOOR,
// naming its rank and host) so a health check exits non-zero.
v1::Result RunFindSlow(const v1::Case& c, NodeBench& bench, Control& control,
                       const std::vector<std::string>& hosts);

// Agrees across the ranks of `control` on a step that may fail: true when
// every rank's `local` is OK; otherwise fills `result` from the first
// failing rank (SKIPPED with its reason for Unimplemented, FAILED with
// BACKEND_ERROR otherwise). Collective.
bool AllRanksOk(const absl::Status& local, Control& control,
                v1::Result* result);

// SKIPPED result for a case this launch cannot run (e.g. a cuda case on
// host ranks), with `why` as the detail.
v1::Result SkippedBench(const v1::Case& c, int nranks, const std::string& why);

// FAILED result (BACKEND_ERROR) for a case whose backend could not be set up.
v1::Result FailedBench(const v1::Case& c, int nranks, const absl::Status& why);

}  // namespace ringmaster

#endif  // RINGMASTER_WORKER_BENCH_RUNNER_H_
