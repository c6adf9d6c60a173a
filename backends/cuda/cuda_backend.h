// The GPU backend: NCCL collectives on device buffers, one GPU per rank,
// timed with CUDA events and verified on the device.
#ifndef RINGMASTER_BACKENDS_CUDA_CUDA_BACKEND_H_
#define RINGMASTER_BACKENDS_CUDA_CUDA_BACKEND_H_

#include <memory>
#include <vector>

#include "backends/backend.h"
#include "core/faults.h"

namespace ringmaster {

// GPUs visible to this process; 0 where there is no GPU or no driver
// (cudaGetDeviceCount then reports an insufficient driver, not 0).
int CudaDeviceCount();

// Versions readable without a GPU: NCCL and the CUDA runtime.
BackendInfo CudaLibraryInfo();

// A fresh NCCL unique id (ncclGetUniqueId), as bytes: what rank 0 relays
// through the coordinator in bootstrap mode.
absl::StatusOr<std::string> NewNcclUniqueId();

class CudaBackend : public CollectiveBackend {
 public:
  // Selects GPU `local_rank % CudaDeviceCount()`. The NCCL communicator
  // over all ranks of `control` (unique id broadcast through it, or
  // `relayed_id` from NewNcclUniqueId() when every rank has it already) is
  // created on first need (Prepare, Split), so a launch that runs no
  // collective never creates one; `control` must outlive the backend.
  // Every rank must call Create, and every rank walks the same cases, so
  // the first use is collective too.
  static absl::StatusOr<std::unique_ptr<CudaBackend>> Create(
      Control& control, int local_rank, std::vector<Fault> faults,
      const std::string& relayed_id = "");
  ~CudaBackend() override;

  BackendInfo Info() const override;
  absl::Status Prepare(const CollectiveConfig& config) override;
  absl::StatusOr<std::vector<double>> TimeWindows(int iters, int windows,
                                                  bool graph) override;
  absl::StatusOr<std::vector<double>> TimeEachOp(int iters) override;
  absl::StatusOr<int64_t> Verify() override;

  // ncclCommSplit of this backend's communicator: members get a backend on
  // the same GPU with its own communicator and buffers (`member_comm` is
  // not used: NCCL splits its own).
  absl::StatusOr<std::unique_ptr<CollectiveBackend>> Split(
      bool member, HostComm* member_comm, double* setup_s) override;

  double CommSetupSeconds() const override;

  // Aborts the communicator (unblocks peers' pending operations).
  void Abort();

 private:
  struct Impl;
  explicit CudaBackend(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ringmaster

#endif  // RINGMASTER_BACKENDS_CUDA_CUDA_BACKEND_H_
