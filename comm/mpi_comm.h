// HostComm over an MPI communicator: ranks launched by mpirun, srun or an
// MPIJob. Counts above INT_MAX are refused (MPI's int counts).
#ifndef RINGMASTER_COMM_MPI_COMM_H_
#define RINGMASTER_COMM_MPI_COMM_H_

#define OMPI_SKIP_MPICXX 1
#include <mpi.h>

#include <map>
#include <memory>
#include <string>
#include <utility>

#include "comm/host_comm.h"

namespace ringmaster {

class MpiComm : public HostComm {
 public:
  // Uses `comm` (which must outlive this) without owning it.
  explicit MpiComm(MPI_Comm comm) : MpiComm(comm, /*owned=*/false) {}
  ~MpiComm() override;
  MpiComm(const MpiComm&) = delete;
  MpiComm& operator=(const MpiComm&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string transport() const override { return "MPI"; }
  absl::StatusOr<int> RanksOnHost() override;
  absl::Status Barrier() override;
  absl::Status IdleBarrier() override;  // MPI_Ibarrier, polled every 200 us
  absl::Status Exchange(std::span<const SendOp> sends,
                        std::span<const RecvOp> recvs) override;
  absl::Status AllReduce(const void* send, void* recv, int64_t count,
                         v1::DataType dtype, v1::ReduceOp op) override;
  absl::Status AllGather(const void* send, void* recv,
                         int64_t bytes_per_rank) override;
  absl::Status ReduceScatter(const void* send, void* recv,
                             int64_t count_per_rank, v1::DataType dtype,
                             v1::ReduceOp op) override;
  absl::Status Broadcast(void* data, int64_t bytes, int root) override;
  absl::Status Reduce(const void* send, void* recv, int64_t count,
                      v1::DataType dtype, v1::ReduceOp op, int root) override;
  absl::Status AllToAll(const void* send, void* recv,
                        int64_t bytes_per_rank) override;
  absl::StatusOr<std::unique_ptr<Request>> StartAllReduce(
      void* data, int64_t count, v1::DataType dtype, v1::ReduceOp op) override;
  absl::StatusOr<std::unique_ptr<HostComm>> SplitPrefix(bool member) override;
  [[noreturn]] void Abort(int code) override;

  MPI_Comm comm() const { return comm_; }

 private:
  MpiComm(MPI_Comm comm, bool owned);
  // MPI's type and op for (dtype, op); user-defined ops for 16-bit floats.
  absl::Status Types(v1::DataType dtype, v1::ReduceOp op, MPI_Datatype* type,
                     MPI_Op* mop);

  MPI_Comm comm_;
  bool owned_;
  int rank_ = 0;
  int size_ = 1;
  std::map<std::pair<int, int>, MPI_Op> custom_ops_;
};

// Turns an MPI error code into a Status naming the call and the rank.
absl::Status MpiError(int code, const char* call, int rank);

// "Open MPI v4.1.4, ..." as MPI_Get_library_version prints it (first line).
std::string MpiLibraryVersion();

}  // namespace ringmaster

#endif  // RINGMASTER_COMM_MPI_COMM_H_
