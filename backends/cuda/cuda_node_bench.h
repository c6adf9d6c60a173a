// Node benchmarks on GPUs, measured the way nvbandwidth measures them:
// operations queued behind a spin kernel that the host releases once every
// rank has queued its work (so launch cost and rank skew stay out), timed
// with CUDA events, median over samples, data verified after copying.
//
// Peer-to-peer copies between GPUs owned by different ranks of one host use
// CUDA IPC handles exchanged through Control; copy engine = cudaMemcpyAsync,
// SM = a copy kernel; write = the source GPU issues, read = the
// destination GPU issues. GEMM runs through cuBLASLt.
#ifndef RINGMASTER_BACKENDS_CUDA_CUDA_NODE_BENCH_H_
#define RINGMASTER_BACKENDS_CUDA_CUDA_NODE_BENCH_H_

#include <memory>

#include "backends/backend.h"
#include "backends/node_bench.h"

namespace ringmaster {

class CudaNodeBench : public NodeBench {
 public:
  // Uses GPU `device` (already this rank's). Collective over `control`:
  // every rank learns every rank's host and GPU bus id.
  static absl::StatusOr<std::unique_ptr<CudaNodeBench>> Create(Control& control,
                                                               int device);
  ~CudaNodeBench() override;

  absl::StatusOr<BenchSetup> Prepare(const v1::Case& c) override;
  absl::StatusOr<double> TimeOps(int iters) override;
  absl::StatusOr<int64_t> Verify() override;
  double rel_error() const override;

 private:
  struct Impl;
  explicit CudaNodeBench(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ringmaster

#endif  // RINGMASTER_BACKENDS_CUDA_CUDA_NODE_BENCH_H_
