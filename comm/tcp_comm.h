// HostComm over TCP sockets, for ranks started without MPI (Kubernetes
// Indexed Jobs, plain shells, any process manager).
//
// Written by hand: no Debian-packaged library offers collectives over
// plain sockets without an MPI runtime (Gloo is not packaged). Ranks find
// each other through the coordinator (worker/bootstrap.h), then build a full
// mesh: two connections per pair of ranks, one for blocking calls and one
// for StartAllReduce's background thread. Algorithms: ring all-reduce
// (reduce-scatter then all-gather), ring all-gather and reduce-scatter,
// pairwise all-to-all, rank-ordered reduce, direct broadcast, dissemination
// barrier. Every message progresses through poll() on non-blocking sockets,
// so opposite transfers never deadlock.
#ifndef RINGMASTER_COMM_TCP_COMM_H_
#define RINGMASTER_COMM_TCP_COMM_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "comm/host_comm.h"

namespace ringmaster {

// A listening socket, opened before the rendezvous so that its address
// can be published.
class TcpListener {
 public:
  // Binds `bind_address` ("0.0.0.0", an interface's address, "::") on an
  // ephemeral port (or `port`).
  static absl::StatusOr<TcpListener> Open(const std::string& bind_address,
                                          int port = 0);
  TcpListener(TcpListener&& other) noexcept;
  TcpListener& operator=(TcpListener&& other) noexcept;
  ~TcpListener();

  int port() const { return port_; }
  int fd() const { return fd_; }
  int Release();  // gives up ownership of the socket

 private:
  TcpListener(int fd, int port) : fd_(fd), port_(port) {}
  int fd_ = -1;
  int port_ = 0;
};

struct TcpPeer {
  std::string host;     // the rank's host name (ranks per host, messages)
  std::string address;  // where its listener is reached: "ip:port"
};

struct TcpMesh;

class TcpComm : public HostComm {
 public:
  // Connects rank `rank` of `peers.size()` ranks into a mesh: ranks dial
  // the lower ranks and accept the higher ones, each connection opened
  // with a hello carrying `session` (refused if it differs: a stray or
  // stale rank). Fails after `timeout`.
  static absl::StatusOr<std::unique_ptr<TcpComm>> Connect(
      TcpListener listener, int rank, const std::vector<TcpPeer>& peers,
      uint64_t session, absl::Duration timeout);
  ~TcpComm() override;

  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(members_.size()); }
  std::string transport() const override { return "TCP"; }
  absl::StatusOr<int> RanksOnHost() override;
  absl::Status Barrier() override;
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

 private:
  TcpComm(std::shared_ptr<TcpMesh> mesh, std::vector<int> members, int rank);

  std::shared_ptr<TcpMesh> mesh_;
  std::vector<int> members_;  // world rank of each rank of this comm
  int rank_;
};

}  // namespace ringmaster

#endif  // RINGMASTER_COMM_TCP_COMM_H_
