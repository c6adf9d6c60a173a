// How host ranks talk to each other: the seam between the host backend
// (collectives, point-to-point, training) and the transport underneath.
//
// Two transports implement it: MpiComm (ranks started by mpirun, srun or an
// MPIJob) and TcpComm (ranks started by anything, which found each other
// through the coordinator: see worker/bootstrap.h). Every rank of a
// communicator calls collective methods in the same order. Used from one
// thread, except that a Request completes in the background.
#ifndef RINGMASTER_COMM_HOST_COMM_H_
#define RINGMASTER_COMM_HOST_COMM_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "comm/control.h"
#include "ringmaster/v1/plan.pb.h"

namespace ringmaster {

// One message of an Exchange: `bytes` bytes to or from rank `peer`.
struct SendOp {
  int peer;
  const void* data;
  int64_t bytes;
};
struct RecvOp {
  int peer;
  void* data;
  int64_t bytes;
};

class HostComm {
 public:
  // An operation completing in the background.
  class Request {
   public:
    virtual ~Request() = default;
    virtual absl::StatusOr<bool> Test() = 0;  // true once complete
    virtual absl::Status Wait() = 0;
  };

  virtual ~HostComm() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  // "MPI" or "TCP", for results' provenance.
  virtual std::string transport() const = 0;
  // Ranks of this communicator on the caller's host. Collective.
  virtual absl::StatusOr<int> RanksOnHost() = 0;

  virtual absl::Status Barrier() = 0;
  // A barrier for ranks that only wait: it must not busy-poll a core that
  // working ranks on the same host need.
  virtual absl::Status IdleBarrier() { return Barrier(); }
  // All messages progress together, so ranks exchanging with each other
  // cannot deadlock. Between two ranks messages match in program order.
  virtual absl::Status Exchange(std::span<const SendOp> sends,
                                std::span<const RecvOp> recvs) = 0;

  // Collectives with NCCL's buffer conventions. `send == nullptr` means in
  // place: AllReduce and Reduce (root) work on `recv`; AllGather finds this
  // rank's block already at recv + rank * bytes_per_rank; ReduceScatter
  // reads size * count_per_rank elements from `recv` and leaves its block
  // at the start of `recv` (MPI's convention).
  virtual absl::Status AllReduce(const void* send, void* recv, int64_t count,
                                 v1::DataType dtype, v1::ReduceOp op) = 0;
  virtual absl::Status AllGather(const void* send, void* recv,
                                 int64_t bytes_per_rank) = 0;
  virtual absl::Status ReduceScatter(const void* send, void* recv,
                                     int64_t count_per_rank, v1::DataType dtype,
                                     v1::ReduceOp op) = 0;
  virtual absl::Status Broadcast(void* data, int64_t bytes, int root) = 0;
  virtual absl::Status Reduce(const void* send, void* recv, int64_t count,
                              v1::DataType dtype, v1::ReduceOp op,
                              int root) = 0;
  virtual absl::Status AllToAll(const void* send, void* recv,
                                int64_t bytes_per_rank) = 0;
  // Starts an in-place all-reduce of `data`, which must stay valid and
  // untouched until the request completes. Requests complete in the order
  // they were started; no other call may overlap them on this rank except
  // Test/Wait and computation.
  virtual absl::StatusOr<std::unique_ptr<Request>> StartAllReduce(
      void* data, int64_t count, v1::DataType dtype, v1::ReduceOp op) = 0;

  // The first ranks of this communicator as a new one: members (ranks for
  // which `member` is true, which must be a prefix) get a communicator,
  // the others nullptr. Collective over this communicator.
  virtual absl::StatusOr<std::unique_ptr<HostComm>> SplitPrefix(
      bool member) = 0;

  // Ends the whole job now (every rank), with `code` as the exit status
  // where the transport decides it.
  [[noreturn]] virtual void Abort(int code) = 0;

  // Conveniences over Exchange.
  absl::Status Send(const void* data, int64_t bytes, int peer);
  absl::Status Recv(void* data, int64_t bytes, int peer);
};

// Control over a HostComm: agreement on sample counts and figures.
class CommControl : public Control {
 public:
  explicit CommControl(HostComm& comm) : comm_(comm) {}
  int rank() const override { return comm_.rank(); }
  int size() const override { return comm_.size(); }
  absl::Status Barrier() override { return comm_.Barrier(); }
  absl::StatusOr<double> Max(double value) override;
  absl::StatusOr<int64_t> Sum(int64_t value) override;
  absl::Status MaxVector(std::vector<double>* values) override;
  absl::StatusOr<std::vector<double>> AllGather(double value) override;
  absl::StatusOr<std::vector<std::string>> AllGatherStrings(
      const std::string& value) override;
  absl::Status Broadcast(void* data, int64_t bytes, int root) override;

 private:
  HostComm& comm_;
};

}  // namespace ringmaster

#endif  // RINGMASTER_COMM_HOST_COMM_H_
