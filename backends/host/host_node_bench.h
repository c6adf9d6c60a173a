// Node benchmarks on the host backend, so every case runs without GPUs:
// memcpy and STREAM-style triad bandwidth, point-to-point bandwidth
// and ping-pong latency between ranks, and CPU GEMM through OpenBLAS.
#ifndef RINGMASTER_BACKENDS_HOST_HOST_NODE_BENCH_H_
#define RINGMASTER_BACKENDS_HOST_HOST_NODE_BENCH_H_

#include <memory>
#include <string>
#include <vector>

#include "backends/host/blas.h"
#include "backends/node_bench.h"
#include "comm/host_comm.h"
#include "core/faults.h"

namespace ringmaster {

class HostNodeBench : public NodeBench {
 public:
  // `faults`: RINGMASTER_FAULT's corrupt:rank=N flips a received byte (or
  // a computed element) on rank N before verification, to prove it fails.
  HostNodeBench(HostComm& comm, std::vector<Fault> faults);  // `comm` outlives
  absl::StatusOr<BenchSetup> Prepare(const v1::Case& c) override;
  absl::StatusOr<double> TimeOps(int iters) override;
  absl::StatusOr<int64_t> Verify() override;
  double rel_error() const override { return rel_error_; }

 private:
  absl::Status RunOps(int iters);
  absl::Status RunOpsInner(int iters);
  bool Active() const;
  void Fill();

  HostComm& comm_;
  std::vector<Fault> faults_;
  int rank_ = 0;
  int size_ = 1;
  double slow_ = 1;  // a slow fault's factor for this rank
  v1::Case case_;
  std::vector<unsigned char> src_, dst_;
  std::vector<float> a_, b_, c_;  // triad and GEMM operands
  double rel_error_ = 0;
  const Blas* blas_ = nullptr;  // OpenBLAS, loaded on first use
  std::string blas_name_;       // library and threads, for the result's path
};

}  // namespace ringmaster

#endif  // RINGMASTER_BACKENDS_HOST_HOST_NODE_BENCH_H_
