// Control over MPI_COMM_WORLD (or a communicator given at construction).
// Used from the worker's main thread only.
#ifndef RINGMASTER_BACKENDS_HOST_MPI_CONTROL_H_
#define RINGMASTER_BACKENDS_HOST_MPI_CONTROL_H_

#define OMPI_SKIP_MPICXX 1
#include <mpi.h>

#include "backends/backend.h"

namespace ringmaster {

class MpiControl : public Control {
 public:
  explicit MpiControl(MPI_Comm comm);
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  absl::Status Barrier() override;
  absl::StatusOr<double> Max(double value) override;
  absl::StatusOr<int64_t> Sum(int64_t value) override;
  absl::Status MaxVector(std::vector<double>* values) override;
  absl::StatusOr<std::vector<double>> AllGather(double value) override;
  absl::StatusOr<std::vector<std::string>> AllGatherStrings(
      const std::string& value) override;
  absl::Status Broadcast(void* data, int64_t bytes, int root) override;

 private:
  MPI_Comm comm_;
  int rank_ = 0;
  int size_ = 1;
};

// Turns an MPI error code into a Status naming the call and the rank.
absl::Status MpiError(int code, const char* call, int rank);

// Ranks of `comm` on the caller's host (MPI_COMM_TYPE_SHARED). Collective.
int RanksOnHost(MPI_Comm comm);

// "Open MPI v4.1.4, ..." as MPI_Get_library_version prints it (first line).
std::string MpiLibraryVersion();

}  // namespace ringmaster

#endif  // RINGMASTER_BACKENDS_HOST_MPI_CONTROL_H_
