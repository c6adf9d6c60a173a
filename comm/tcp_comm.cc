#include "comm/tcp_comm.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "comm/elements.h"
#include "core/names.h"

namespace ringmaster {
namespace {

constexpr uint64_t kHelloMagic = 0x31304350544d52ull;  // "RMTCP01"
constexpr int kChannels = 2;         // 0: blocking calls, 1: StartAllReduce
constexpr int64_t kMaxIo = 4 << 20;  // bytes per send()/recv() call

struct Hello {
  uint64_t magic;
  uint64_t session;
  int32_t rank;
  int32_t channel;
};

std::string Errno(const char* what) {
  return absl::StrFormat("%s: %s", what, std::strerror(errno));
}

// "ip:port", "host:port" or "[v6]:port".
absl::Status SplitAddress(const std::string& address, std::string* host,
                          std::string* port) {
  auto colon = address.rfind(':');
  if (colon == std::string::npos || colon + 1 == address.size()) {
    return absl::InvalidArgumentError("expected HOST:PORT, got \"" + address +
                                      "\"");
  }
  *host = address.substr(0, colon);
  *port = address.substr(colon + 1);
  if (host->size() >= 2 && host->front() == '[' && host->back() == ']')
    *host = host->substr(1, host->size() - 2);
  return absl::OkStatus();
}

void Tune(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

absl::Status SetNonBlocking(int fd) {
  int flags = fcntl(fd, F_GETFL, 0);
  if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0)
    return absl::InternalError(Errno("fcntl(O_NONBLOCK)"));
  return absl::OkStatus();
}

// Dials `address` until it answers or `deadline` passes.
absl::StatusOr<int> Dial(const std::string& address, absl::Time deadline) {
  std::string host, port;
  if (auto s = SplitAddress(address, &host, &port); !s.ok()) return s;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  std::string last = "no address";
  while (true) {
    addrinfo* res = nullptr;
    int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &res);
    if (rc == 0) {
      for (addrinfo* a = res; a != nullptr; a = a->ai_next) {
        int fd =
            socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) {
          last = Errno("socket");
          continue;
        }
        if (connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
          freeaddrinfo(res);
          Tune(fd);
          return fd;
        }
        last = Errno("connect");
        close(fd);
      }
      freeaddrinfo(res);
    } else {
      last = gai_strerror(rc);
    }
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(
          absl::StrFormat("could not reach %s: %s", address, last));
    }
    absl::SleepFor(absl::Milliseconds(50));
  }
}

// Blocking write/read of a whole small buffer (the hello), with a deadline.
absl::Status WriteAll(int fd, const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return absl::UnavailableError(Errno("send"));
    p += w;
    n -= static_cast<size_t>(w);
  }
  return absl::OkStatus();
}

absl::Status ReadAll(int fd, void* data, size_t n, absl::Time deadline) {
  char* p = static_cast<char*>(data);
  while (n > 0) {
    pollfd pfd{fd, POLLIN, 0};
    int wait_ms = static_cast<int>(std::max<int64_t>(
        0, absl::ToInt64Milliseconds(deadline - absl::Now())));
    int rc = poll(&pfd, 1, wait_ms);
    if (rc < 0 && errno == EINTR) continue;
    if (rc <= 0) return absl::DeadlineExceededError("no hello in time");
    ssize_t r = recv(fd, p, n, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return absl::UnavailableError("connection closed during hello");
    p += r;
    n -= static_cast<size_t>(r);
  }
  return absl::OkStatus();
}

}  // namespace

// ---------------------------------------------------------------- listener

absl::StatusOr<TcpListener> TcpListener::Open(const std::string& bind_address,
                                              int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICHOST;
  addrinfo* res = nullptr;
  std::string port_text = std::to_string(port);
  int rc = getaddrinfo(bind_address.c_str(), port_text.c_str(), &hints, &res);
  if (rc != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "bind address \"%s\": %s", bind_address, gai_strerror(rc)));
  }
  int fd =
      socket(res->ai_family, res->ai_socktype | SOCK_CLOEXEC, res->ai_protocol);
  if (fd < 0) {
    freeaddrinfo(res);
    return absl::InternalError(Errno("socket"));
  }
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(fd, res->ai_addr, res->ai_addrlen) != 0 ||
      listen(fd, SOMAXCONN) != 0) {
    std::string err = Errno("bind/listen");
    freeaddrinfo(res);
    close(fd);
    return absl::UnavailableError(
        absl::StrFormat("listen on %s:%d: %s", bind_address, port, err));
  }
  freeaddrinfo(res);
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  int bound = addr.ss_family == AF_INET6
                  ? ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port)
                  : ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
  return TcpListener(fd, bound);
}

TcpListener::TcpListener(TcpListener&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), port_(other.port_) {}

TcpListener& TcpListener::operator=(TcpListener&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    port_ = other.port_;
  }
  return *this;
}

TcpListener::~TcpListener() {
  if (fd_ >= 0) close(fd_);
}

int TcpListener::Release() { return std::exchange(fd_, -1); }

// -------------------------------------------------------------------- mesh

struct TcpMesh {
  int world_rank = 0;
  std::vector<TcpPeer> peers;
  std::vector<int> fds[kChannels];  // by world rank; -1 for self
  std::vector<unsigned char> scratch[kChannels];

  // StartAllReduce's thread: runs queued operations in order on channel 1.
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::function<void()>> queue;
  bool stop = false;
  std::thread worker;

  ~TcpMesh() {
    {
      std::lock_guard<std::mutex> lock(mu);
      stop = true;
    }
    cv.notify_all();
    if (worker.joinable()) worker.join();
    for (auto& channel : fds)
      for (int fd : channel)
        if (fd >= 0) close(fd);
  }

  void Post(std::function<void()> fn) {
    std::lock_guard<std::mutex> lock(mu);
    if (!worker.joinable()) {
      worker = std::thread([this] {
        std::unique_lock<std::mutex> lock(mu);
        while (true) {
          cv.wait(lock, [&] { return stop || !queue.empty(); });
          if (queue.empty()) return;  // stopping with nothing left
          auto next = std::move(queue.front());
          queue.pop_front();
          lock.unlock();
          next();
          lock.lock();
        }
      });
    }
    queue.push_back(std::move(fn));
    cv.notify_all();
  }
};

namespace {

// A non-blocking call that did not move data this time.
bool WouldBlock() {
  return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
}

// `n` bytes of the queue's first message moved; drops it once done.
template <typename Queue>
void Consume(Queue* queue, ssize_t n) {
  auto& [ptr, left] = queue->front();
  ptr += n;
  left -= n;
  if (left == 0) queue->pop_front();
}

// One channel of a communicator: what the algorithms below run on.
struct Link {
  TcpMesh* mesh;
  int channel;
  const std::vector<int>* members;
  int rank;

  int size() const { return static_cast<int>(members->size()); }
  int World(int r) const { return (*members)[r]; }
  std::string Describe(int r) const {
    return absl::StrFormat("rank %d (%s)", World(r),
                           mesh->peers[World(r)].host);
  }
  unsigned char* Scratch(int64_t bytes) const {
    auto& s = mesh->scratch[channel];
    if (static_cast<int64_t>(s.size()) < bytes)
      s.resize(static_cast<size_t>(bytes));
    return s.data();
  }

  absl::Status Exchange(std::span<const SendOp> sends,
                        std::span<const RecvOp> recvs) const;
};

absl::Status Link::Exchange(std::span<const SendOp> sends,
                            std::span<const RecvOp> recvs) const {
  const int n = size();
  // Messages to self are copies, matched in order.
  std::vector<const SendOp*> self_sends;
  std::vector<const RecvOp*> self_recvs;
  struct Pending {
    std::deque<std::pair<const char*, int64_t>> out;
    std::deque<std::pair<char*, int64_t>> in;
  };
  std::vector<Pending> pending(n);
  // Each message to its peer's queue (in order), or to the self list.
  auto sort = [&](const auto& ops, auto* self, auto enqueue,
                  const char* verb) -> absl::Status {
    for (const auto& op : ops) {
      if (op.peer < 0 || op.peer >= n) {
        return absl::InvalidArgumentError(
            absl::StrFormat("%s rank %d of %d", verb, op.peer, n));
      }
      if (op.peer == rank) {
        self->push_back(&op);
      } else if (op.bytes > 0) {
        enqueue(op);
      }
    }
    return absl::OkStatus();
  };
  absl::Status sorted = sort(
      sends, &self_sends,
      [&](const SendOp& op) {
        pending[op.peer].out.emplace_back(static_cast<const char*>(op.data),
                                          op.bytes);
      },
      "send to");
  if (sorted.ok()) {
    sorted = sort(
        recvs, &self_recvs,
        [&](const RecvOp& op) {
          pending[op.peer].in.emplace_back(static_cast<char*>(op.data),
                                           op.bytes);
        },
        "receive from");
  }
  if (!sorted.ok()) return sorted;
  if (self_sends.size() != self_recvs.size())
    return absl::InvalidArgumentError("unmatched message to self");
  for (size_t i = 0; i < self_sends.size(); ++i) {
    if (self_sends[i]->bytes != self_recvs[i]->bytes)
      return absl::InvalidArgumentError("message to self of another size");
    if (self_sends[i]->bytes > 0 && self_recvs[i]->data != self_sends[i]->data)
      std::memmove(self_recvs[i]->data, self_sends[i]->data,
                   static_cast<size_t>(self_sends[i]->bytes));
  }
  std::vector<pollfd> pfds;
  std::vector<int> peer_of;
  while (true) {
    pfds.clear();
    peer_of.clear();
    for (int p = 0; p < n; ++p) {
      short events = 0;
      if (!pending[p].out.empty()) events |= POLLOUT;
      if (!pending[p].in.empty()) events |= POLLIN;
      if (events == 0) continue;
      pfds.push_back(pollfd{mesh->fds[channel][World(p)], events, 0});
      peer_of.push_back(p);
    }
    if (pfds.empty()) return absl::OkStatus();
    int rc = poll(pfds.data(), pfds.size(), 1000);
    if (rc < 0) {
      if (errno == EINTR) continue;
      return absl::InternalError(Errno("poll"));
    }
    for (size_t i = 0; i < pfds.size(); ++i) {
      const int p = peer_of[i];
      const int fd = pfds[i].fd;
      const short re = pfds[i].revents;
      if (re == 0) continue;
      bool progressed = false;
      if ((re & (POLLIN | POLLHUP | POLLERR)) && !pending[p].in.empty()) {
        auto& [ptr, left] = pending[p].in.front();
        ssize_t r =
            recv(fd, ptr, static_cast<size_t>(std::min(left, kMaxIo)), 0);
        if (r == 0) {
          return absl::UnavailableError(absl::StrFormat(
              "TCP: %s closed the connection (it exited or failed)",
              Describe(p)));
        }
        if (r < 0 && !WouldBlock()) {
          return absl::UnavailableError(absl::StrFormat(
              "TCP: receive from %s: %s", Describe(p), std::strerror(errno)));
        }
        if (r > 0) {
          progressed = true;
          Consume(&pending[p].in, r);
        }
      }
      if ((re & (POLLOUT | POLLERR)) && !pending[p].out.empty()) {
        auto& [ptr, left] = pending[p].out.front();
        ssize_t w = send(fd, ptr, static_cast<size_t>(std::min(left, kMaxIo)),
                         MSG_NOSIGNAL);
        if (w < 0 && !WouldBlock()) {
          return absl::UnavailableError(absl::StrFormat(
              "TCP: send to %s: %s", Describe(p), std::strerror(errno)));
        }
        if (w > 0) {
          progressed = true;
          Consume(&pending[p].out, w);
        }
      }
      if (!progressed && (re & (POLLHUP | POLLERR | POLLNVAL))) {
        return absl::UnavailableError(
            absl::StrFormat("TCP: connection to %s failed", Describe(p)));
      }
    }
  }
}

// Block b of `count` elements split over n ranks: [Start(b), Start(b+1)).
int64_t Start(int64_t count, int n, int b) { return count * b / n; }

// Ring reduce-scatter over `buf` (count elements in n blocks): afterwards
// this rank holds the fully reduced block (rank + 1 + shift) mod n.
absl::Status RingReduceScatter(const Link& link, unsigned char* buf,
                               int64_t count, v1::DataType dtype,
                               v1::ReduceOp op, int shift) {
  const int n = link.size();
  const int r = link.rank;
  const int64_t elem = DataTypeSize(dtype);
  const int right = (r + 1) % n, left = (r + n - 1) % n;
  int64_t largest = 0;
  for (int b = 0; b < n; ++b)
    largest = std::max(largest, Start(count, n, b + 1) - Start(count, n, b));
  unsigned char* tmp = link.Scratch(largest * elem);
  for (int s = 0; s < n - 1; ++s) {
    const int sb = ((r - s + shift) % n + n) % n;
    const int rb = ((r - s - 1 + shift) % n + n) % n;
    const int64_t s0 = Start(count, n, sb), s1 = Start(count, n, sb + 1);
    const int64_t r0 = Start(count, n, rb), r1 = Start(count, n, rb + 1);
    SendOp so{right, buf + s0 * elem, (s1 - s0) * elem};
    RecvOp ro{left, tmp, (r1 - r0) * elem};
    if (auto st = link.Exchange({&so, 1}, {&ro, 1}); !st.ok()) return st;
    if (auto st = ReduceInto(dtype, op, tmp, buf + r0 * elem, r1 - r0);
        !st.ok())
      return st;
  }
  return absl::OkStatus();
}

// Ring all-gather of n blocks of `buf` (split as Start() does, `elem` bytes
// each), this rank starting with block (rank + shift) mod n.
absl::Status RingAllGather(const Link& link, unsigned char* buf, int64_t count,
                           int64_t elem, int shift) {
  const int n = link.size();
  const int r = link.rank;
  const int right = (r + 1) % n, left = (r + n - 1) % n;
  for (int s = 0; s < n - 1; ++s) {
    const int sb = ((r - s + shift) % n + n) % n;
    const int rb = ((r - s - 1 + shift) % n + n) % n;
    const int64_t s0 = Start(count, n, sb), s1 = Start(count, n, sb + 1);
    const int64_t r0 = Start(count, n, rb), r1 = Start(count, n, rb + 1);
    SendOp so{right, buf + s0 * elem, (s1 - s0) * elem};
    RecvOp ro{left, buf + r0 * elem, (r1 - r0) * elem};
    if (auto st = link.Exchange({&so, 1}, {&ro, 1}); !st.ok()) return st;
  }
  return absl::OkStatus();
}

absl::Status RingAllReduce(const Link& link, unsigned char* buf, int64_t count,
                           v1::DataType dtype, v1::ReduceOp op) {
  if (link.size() == 1) return absl::OkStatus();
  if (auto s = RingReduceScatter(link, buf, count, dtype, op, 0); !s.ok())
    return s;
  return RingAllGather(link, buf, count, DataTypeSize(dtype), 1);
}

}  // namespace

// ------------------------------------------------------------------ comm

absl::StatusOr<std::unique_ptr<TcpComm>> TcpComm::Connect(
    TcpListener listener, int rank, const std::vector<TcpPeer>& peers,
    uint64_t session, absl::Duration timeout) {
  const int n = static_cast<int>(peers.size());
  if (rank < 0 || rank >= n)
    return absl::InvalidArgumentError(
        absl::StrFormat("rank %d of %d ranks", rank, n));
  auto mesh = std::make_shared<TcpMesh>();
  mesh->world_rank = rank;
  mesh->peers = peers;
  for (auto& channel : mesh->fds) channel.assign(n, -1);
  const absl::Time deadline = absl::Now() + timeout;
  // Dial the lower ranks (their kernels accept into the backlog, so this
  // never waits on their program)...
  for (int peer = 0; peer < rank; ++peer) {
    for (int c = 0; c < kChannels; ++c) {
      auto fd = Dial(peers[peer].address, deadline);
      if (!fd.ok()) {
        return absl::UnavailableError(
            absl::StrFormat("rank %d: dialing rank %d (%s): %s", rank, peer,
                            peers[peer].host, fd.status().message()));
      }
      mesh->fds[c][peer] = *fd;
      Hello hello{kHelloMagic, session, rank, c};
      if (auto s = WriteAll(*fd, &hello, sizeof hello); !s.ok()) return s;
    }
  }
  // ...then take the higher ranks' connections.
  int expected = kChannels * (n - 1 - rank);
  while (expected > 0) {
    pollfd pfd{listener.fd(), POLLIN, 0};
    int wait_ms = static_cast<int>(std::max<int64_t>(
        0, absl::ToInt64Milliseconds(deadline - absl::Now())));
    int rc = poll(&pfd, 1, wait_ms);
    if (rc < 0 && errno == EINTR) continue;
    if (rc <= 0) {
      std::string missing;
      for (int peer = rank + 1; peer < n; ++peer)
        if (mesh->fds[0][peer] < 0 || mesh->fds[1][peer] < 0)
          absl::StrAppend(&missing, missing.empty() ? "" : ", ", peer);
      return absl::DeadlineExceededError(
          absl::StrFormat("rank %d: ranks %s did not connect within %s", rank,
                          missing, absl::FormatDuration(timeout)));
    }
    int fd = accept4(listener.fd(), nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    Hello hello{};
    absl::Status s =
        ReadAll(fd, &hello, sizeof hello,
                std::min(deadline, absl::Now() + absl::Seconds(5)));
    // Anything that is not a rank of this job's attempt is dropped.
    if (!s.ok() || hello.magic != kHelloMagic || hello.session != session ||
        hello.rank <= rank || hello.rank >= n || hello.channel < 0 ||
        hello.channel >= kChannels ||
        mesh->fds[hello.channel][hello.rank] >= 0) {
      close(fd);
      continue;
    }
    Tune(fd);
    mesh->fds[hello.channel][hello.rank] = fd;
    --expected;
  }
  for (auto& channel : mesh->fds)
    for (int fd : channel)
      if (fd >= 0)
        if (auto s = SetNonBlocking(fd); !s.ok()) return s;
  std::vector<int> members(n);
  for (int r = 0; r < n; ++r) members[r] = r;
  return std::unique_ptr<TcpComm>(new TcpComm(mesh, std::move(members), rank));
}

TcpComm::TcpComm(std::shared_ptr<TcpMesh> mesh, std::vector<int> members,
                 int rank)
    : mesh_(std::move(mesh)), members_(std::move(members)), rank_(rank) {}

TcpComm::~TcpComm() = default;

absl::StatusOr<int> TcpComm::RanksOnHost() {
  const std::string& mine = mesh_->peers[members_[rank_]].host;
  int local = 0;
  for (int w : members_) local += mesh_->peers[w].host == mine ? 1 : 0;
  return local;
}

absl::Status TcpComm::Exchange(std::span<const SendOp> sends,
                               std::span<const RecvOp> recvs) {
  return Link{mesh_.get(), 0, &members_, rank_}.Exchange(sends, recvs);
}

absl::Status TcpComm::Barrier() {
  // Dissemination: log2(n) rounds of one byte to rank + k.
  const int n = size();
  Link link{mesh_.get(), 0, &members_, rank_};
  char out = 1, in = 0;
  for (int k = 1; k < n; k *= 2) {
    SendOp s{(rank_ + k) % n, &out, 1};
    RecvOp r{(rank_ - k % n + n) % n, &in, 1};
    if (auto st = link.Exchange({&s, 1}, {&r, 1}); !st.ok()) return st;
  }
  return absl::OkStatus();
}

absl::Status TcpComm::AllReduce(const void* send, void* recv, int64_t count,
                                v1::DataType dtype, v1::ReduceOp op) {
  auto* buf = static_cast<unsigned char*>(recv);
  if (send != nullptr && send != recv)
    std::memcpy(buf, send, static_cast<size_t>(count * DataTypeSize(dtype)));
  return RingAllReduce(Link{mesh_.get(), 0, &members_, rank_}, buf, count,
                       dtype, op);
}

absl::Status TcpComm::AllGather(const void* send, void* recv,
                                int64_t bytes_per_rank) {
  auto* buf = static_cast<unsigned char*>(recv);
  if (send != nullptr)
    std::memcpy(buf + rank_ * bytes_per_rank, send,
                static_cast<size_t>(bytes_per_rank));
  if (size() == 1) return absl::OkStatus();
  // Blocks of equal size: n blocks of bytes_per_rank one-byte elements.
  return RingAllGather(Link{mesh_.get(), 0, &members_, rank_}, buf,
                       bytes_per_rank * size(), 1, 0);
}

absl::Status TcpComm::ReduceScatter(const void* send, void* recv,
                                    int64_t count_per_rank, v1::DataType dtype,
                                    v1::ReduceOp op) {
  const int n = size();
  const int64_t elem = DataTypeSize(dtype);
  const int64_t total = count_per_rank * n;
  auto* out = static_cast<unsigned char*>(recv);
  unsigned char* work = out;
  std::vector<unsigned char> copy;
  if (send != nullptr) {  // the input must survive: reduce in a copy
    copy.assign(static_cast<const unsigned char*>(send),
                static_cast<const unsigned char*>(send) + total * elem);
    work = copy.data();
  }
  if (n > 1) {
    // shift -1: this rank ends with block `rank`.
    if (auto s = RingReduceScatter(Link{mesh_.get(), 0, &members_, rank_}, work,
                                   total, dtype, op, -1);
        !s.ok())
      return s;
  }
  std::memmove(out, work + rank_ * count_per_rank * elem,
               static_cast<size_t>(count_per_rank * elem));
  return absl::OkStatus();
}

absl::Status TcpComm::Broadcast(void* data, int64_t bytes, int root) {
  const int n = size();
  if (root < 0 || root >= n)
    return absl::InvalidArgumentError(absl::StrFormat("root %d", root));
  Link link{mesh_.get(), 0, &members_, rank_};
  if (rank_ != root) {
    RecvOp r{root, data, bytes};
    return link.Exchange({}, {&r, 1});
  }
  std::vector<SendOp> sends;
  for (int p = 0; p < n; ++p)
    if (p != root) sends.push_back(SendOp{p, data, bytes});
  return link.Exchange(sends, {});
}

absl::Status TcpComm::Reduce(const void* send, void* recv, int64_t count,
                             v1::DataType dtype, v1::ReduceOp op, int root) {
  const int n = size();
  if (root < 0 || root >= n)
    return absl::InvalidArgumentError(absl::StrFormat("root %d", root));
  const int64_t bytes = count * DataTypeSize(dtype);
  Link link{mesh_.get(), 0, &members_, rank_};
  if (rank_ != root) {
    SendOp s{root, send ? send : recv, bytes};
    return link.Exchange({&s, 1}, {});
  }
  if (send != nullptr && send != recv)
    std::memcpy(recv, send, static_cast<size_t>(bytes));
  // The other ranks' contributions in rank order: deterministic results.
  unsigned char* tmp = link.Scratch(bytes);
  for (int p = 0; p < n; ++p) {
    if (p == root) continue;
    RecvOp r{p, tmp, bytes};
    if (auto s = link.Exchange({}, {&r, 1}); !s.ok()) return s;
    if (auto s = ReduceInto(dtype, op, tmp, recv, count); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status TcpComm::AllToAll(const void* send, void* recv,
                               int64_t bytes_per_rank) {
  const int n = size();
  const auto* in = static_cast<const unsigned char*>(send);
  auto* out = static_cast<unsigned char*>(recv);
  std::memcpy(out + rank_ * bytes_per_rank, in + rank_ * bytes_per_rank,
              static_cast<size_t>(bytes_per_rank));
  Link link{mesh_.get(), 0, &members_, rank_};
  for (int s = 1; s < n; ++s) {
    const int to = (rank_ + s) % n, from = (rank_ - s + n) % n;
    SendOp so{to, in + to * bytes_per_rank, bytes_per_rank};
    RecvOp ro{from, out + from * bytes_per_rank, bytes_per_rank};
    if (auto st = link.Exchange({&so, 1}, {&ro, 1}); !st.ok()) return st;
  }
  return absl::OkStatus();
}

namespace {

class TcpRequest : public HostComm::Request {
 public:
  struct State {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    absl::Status status;
  };
  explicit TcpRequest(std::shared_ptr<State> state)
      : state_(std::move(state)) {}
  ~TcpRequest() override { Wait().IgnoreError(); }  // the buffer is in use
  absl::StatusOr<bool> Test() override {
    std::lock_guard<std::mutex> lock(state_->mu);
    if (state_->done && !state_->status.ok()) return state_->status;
    return state_->done;
  }
  absl::Status Wait() override {
    std::unique_lock<std::mutex> lock(state_->mu);
    state_->cv.wait(lock, [&] { return state_->done; });
    return state_->status;
  }

 private:
  std::shared_ptr<State> state_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<HostComm::Request>> TcpComm::StartAllReduce(
    void* data, int64_t count, v1::DataType dtype, v1::ReduceOp op) {
  auto state = std::make_shared<TcpRequest::State>();
  // The closure keeps the mesh and the member list alive.
  mesh_->Post([mesh = mesh_, members = members_, rank = rank_, data, count,
               dtype, op, state] {
    absl::Status s =
        RingAllReduce(Link{mesh.get(), 1, &members, rank},
                      static_cast<unsigned char*>(data), count, dtype, op);
    std::lock_guard<std::mutex> lock(state->mu);
    state->done = true;
    state->status = s;
    state->cv.notify_all();
  });
  return std::unique_ptr<Request>(new TcpRequest(state));
}

absl::StatusOr<std::unique_ptr<HostComm>> TcpComm::SplitPrefix(bool member) {
  int64_t members = member ? 1 : 0;
  if (auto s = AllReduce(nullptr, &members, 1, v1::INT64, v1::SUM); !s.ok())
    return s;
  if (member != (rank_ < members)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "rank %d: the members of a split must be the first %d ranks", rank_,
        members));
  }
  if (!member) return std::unique_ptr<HostComm>();
  std::vector<int> sub(members_.begin(), members_.begin() + members);
  return std::unique_ptr<HostComm>(new TcpComm(mesh_, std::move(sub), rank_));
}

void TcpComm::Abort(int code) {
  // Exiting closes every socket: the peers' next call fails at once.
  std::_Exit(code);
}

}  // namespace ringmaster
