// Node benchmarks: what one node's own paths deliver (peer-to-peer copies,
// latency, host<->device, local memory bandwidth, GEMM), on a NodeBench of
// the case's back end, counted the way nvbandwidth counts them. Each such
// kind is a NodeBenchKind in a file of its own (p2p.cc, gemm.cc, ...).
#ifndef RINGMASTER_WORKER_KINDS_NODE_BENCH_KIND_H_
#define RINGMASTER_WORKER_KINDS_NODE_BENCH_KIND_H_

#include <cstdint>
#include <string>

#include "backends/node_bench.h"
#include "ringmaster/v1/result.pb.h"
#include "worker/kinds/kind.h"

namespace ringmaster {

// The failure detail of a verification that found `wrong` bad elements
// (first on rank `first_bad`); `rel_error` is GEMM's ||out - ref|| / ||ref||.
using WrongDetail = std::string (*)(int64_t wrong, double rel_error,
                                    int first_bad);

// Every rank calls it with the same case. The result on rank 0 is complete:
// bandwidth (sum over the ranks that moved bytes at once, per sample, then
// the median over samples), per-rank bandwidth, latency or TFLOP/s, the
// path, its ceiling and the percentage of it. Unimplemented from Prepare on
// any rank gives a SKIPPED result with that rank's reason. `detail` words
// a failed verification (default: wrong bytes after the copy).
v1::Result RunBench(const v1::Case& c, NodeBench& bench, Control& control,
                    WrongDetail detail = nullptr);

// A kind measured by RunBench on the node benchmarks of the case's back
// end, over every rank of the launch.
class NodeBenchKind : public BenchmarkKind {
 public:
  v1::Result Run(const v1::Case& c, CaseEnv& env) override;

 protected:
  // How this kind words a failed verification (nullptr: wrong bytes).
  virtual WrongDetail wrong_detail() const { return nullptr; }
  // The node benchmarks to run `c` on: `result` is set instead when this
  // launch cannot (SKIPPED) or the back end failed (FAILED).
  NodeBench* BenchFor(const v1::Case& c, CaseEnv& env, v1::Result* result);
};

}  // namespace ringmaster

#endif  // RINGMASTER_WORKER_KINDS_NODE_BENCH_KIND_H_
