// What measures one node's own paths for the node-benchmark kinds
// (worker/kinds/node_bench_kind.h): peer-to-peer copies, latency,
// host<->device, local memory bandwidth and GEMM, on GPUs (CUDA) or the
// host (memcpy, MPI, OpenBLAS).
//
// Every rank calls every method for every case, in the same order, even
// ranks that do not move bytes in that case: preparation exchanges buffer
// handles and sampling is held in step across ranks.
#ifndef RINGMASTER_BACKENDS_NODE_BENCH_H_
#define RINGMASTER_BACKENDS_NODE_BENCH_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ringmaster/v1/plan.pb.h"

namespace ringmaster {

// What Prepare decided for one case on this rank.
struct BenchSetup {
  v1::CopyMethod method = v1::COPY_METHOD_UNSPECIFIED;  // resolved
  bool active = false;         // this rank times work in this case
  int64_t bytes_per_op = 0;    // bytes this rank moves per operation
  double flops_per_op = 0;     // GEMM
  int64_t hops_per_op = 0;     // latency: dependent accesses per operation
  std::string path;            // "nvlink", "pcie", "hbm", "dram", "mpi", ...
  double ceiling_gbps = 0;     // the path's speed of light, 0 = unknown
  std::string ceiling_source;  // how the ceiling was derived
  std::string placement;       // CPU affinity and NUMA node
};

class NodeBench {
 public:
  virtual ~NodeBench() = default;

  // Allocates and fills what `c` needs. Unimplemented (with a reason) when
  // this backend cannot run the case: the result is SKIPPED, not failed.
  virtual absl::StatusOr<BenchSetup> Prepare(const v1::Case& c) = 0;

  // Runs `iters` operations and returns this rank's seconds for them (0 on
  // ranks that are not active). Ranks that move data at once start together.
  // REQUIRES: Prepare() OK.
  virtual absl::StatusOr<double> TimeOps(int iters) = 0;

  // Checks the data of the last operation (refilling first where needed):
  // wrong elements on this rank. GEMM also sets rel_error.
  virtual absl::StatusOr<int64_t> Verify() = 0;

  // GEMM: ||out - ref|| / ||ref|| from the last Verify (0 otherwise).
  virtual double rel_error() const { return 0; }
};

}  // namespace ringmaster

#endif  // RINGMASTER_BACKENDS_NODE_BENCH_H_
