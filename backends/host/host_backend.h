// The CPU backend: every collective on host buffers, over a HostComm (MPI,
// or TCP for ranks bootstrapped through the coordinator).
//
// Runs every case without a GPU, which is how CI tests the whole pipeline.
// Buffers follow backends/collective_layout.h and are verified with
// kernels/patterns.h. Faults from core/faults.h can corrupt output on
// purpose for tests.
#ifndef RINGMASTER_BACKENDS_HOST_HOST_BACKEND_H_
#define RINGMASTER_BACKENDS_HOST_HOST_BACKEND_H_

#include <cstdint>
#include <vector>

#include "backends/backend.h"
#include "backends/collective_layout.h"
#include "comm/host_comm.h"
#include "core/faults.h"

namespace ringmaster {

class HostBackend : public CollectiveBackend {
 public:
  // `comm` must outlive the backend. `faults` are applied to this rank.
  HostBackend(HostComm& comm, std::vector<Fault> faults);
  HostBackend(const HostBackend&) = delete;
  HostBackend& operator=(const HostBackend&) = delete;

  BackendInfo Info() const override;
  absl::Status Prepare(const CollectiveConfig& config) override;
  absl::StatusOr<std::vector<double>> TimeWindows(int iters, int windows,
                                                  bool graph) override;
  absl::StatusOr<std::vector<double>> TimeEachOp(int iters) override;
  absl::StatusOr<int64_t> Verify() override;
  absl::StatusOr<std::unique_ptr<CollectiveBackend>> Split(
      bool member, HostComm* member_comm, double* setup_s) override;

 private:
  absl::Status RunOnce();
  absl::Status RunOnceInner();
  void FillInputs();
  unsigned char* In();
  unsigned char* Out();

  HostComm& comm_;
  int rank_ = 0;
  int nranks_ = 1;
  std::vector<Fault> faults_;
  double slow_ = 1;  // a slow fault's factor for this rank
  CollectiveConfig config_;
  CollectiveLayout layout_;
  int64_t elem_ = 4;
  bool prepared_ = false;
  v1::ReduceOp op_ = v1::SUM;        // AVG runs as SUM, then a division
  std::vector<unsigned char> send_;  // or the one in-place buffer
  std::vector<unsigned char> recv_;
};

}  // namespace ringmaster

#endif  // RINGMASTER_BACKENDS_HOST_HOST_BACKEND_H_
