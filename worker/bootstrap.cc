#include "worker/bootstrap.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "comm/mpi_comm.h"
#include "core/placement.h"

namespace ringmaster {
namespace {

// FNV-1a of the job id and attempt: the same in every rank's process, so
// connections from another job or attempt are told apart.
uint64_t Session(const std::string& job_id, int attempt) {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&](unsigned char c) {
    h ^= c;
    h *= 1099511628211ull;
  };
  for (char c : job_id) mix(static_cast<unsigned char>(c));
  for (int i = 0; i < 4; ++i)
    mix(static_cast<unsigned char>(attempt >> (8 * i)));
  return h;
}

}  // namespace

absl::StatusOr<int> IntFromEnv(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0')
    return absl::NotFoundError(std::string(name) + " is not set");
  int out = 0;
  if (!absl::SimpleAtoi(v, &out) || out < 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: expected a non-negative integer, got \"%s\"", name, v));
  }
  return out;
}

absl::StatusOr<int> RankFromEnvironment() {
  auto rank = IntFromEnv("RINGMASTER_RANK");
  if (rank.ok() || !absl::IsNotFound(rank.status())) return rank;
  return IntFromEnv("JOB_COMPLETION_INDEX");
}

absl::StatusOr<int> WorldSizeFromEnvironment() {
  return IntFromEnv("RINGMASTER_WORLD_SIZE");
}

std::string RouteAddressTo(const std::string& coordinator) {
  const std::string hostname = HostName();
  auto colon = coordinator.rfind(':');
  std::string host = coordinator.substr(0, colon);
  std::string port =
      colon == std::string::npos ? "1" : coordinator.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[')
    host = host.substr(1, host.size() - 2);
  addrinfo hints{};
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* res = nullptr;
  if (getaddrinfo(host.c_str(), port.c_str(), &hints, &res) != 0)
    return hostname;
  std::string out = hostname;
  // A UDP "connection" sends nothing; it only asks the kernel for a route.
  int fd = socket(res->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd >= 0 && connect(fd, res->ai_addr, res->ai_addrlen) == 0) {
    sockaddr_storage local{};
    socklen_t len = sizeof local;
    char text[INET6_ADDRSTRLEN] = {};
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0) {
      const void* a =
          local.ss_family == AF_INET6
              ? static_cast<const void*>(
                    &reinterpret_cast<sockaddr_in6*>(&local)->sin6_addr)
              : static_cast<const void*>(
                    &reinterpret_cast<sockaddr_in*>(&local)->sin_addr);
      if (inet_ntop(local.ss_family, a, text, sizeof text) != nullptr)
        out = local.ss_family == AF_INET6 ? "[" + std::string(text) + "]"
                                          : std::string(text);
    }
  }
  if (fd >= 0) close(fd);
  freeaddrinfo(res);
  return out;
}

absl::StatusOr<Bootstrapped> Bootstrap(CoordinatorClient& client,
                                       const BootstrapSpec& spec) {
  auto listener = TcpListener::Open(spec.bind);
  if (!listener.ok()) return listener.status();
  const std::string advertise = spec.advertise_host.empty()
                                    ? RouteAddressTo(spec.coordinator)
                                    : spec.advertise_host;
  v1::RendezvousRequest req;
  req.set_job_id(spec.job_id);
  req.set_rank(spec.rank);
  req.set_attempt(spec.attempt);
  req.set_host(spec.host);
  req.set_address(absl::StrFormat("%s:%d", advertise, listener->port()));
  if (spec.rank == 0) req.set_blob(spec.blob);
  const absl::Time deadline = absl::Now() + spec.timeout;
  auto resp = client.Rendezvous(req, spec.timeout);
  if (!resp.ok()) return resp.status();
  if (resp->peers_size() != spec.world_size) {
    return absl::FailedPreconditionError(
        absl::StrFormat("rendezvous returned %d ranks, expected %d",
                        resp->peers_size(), spec.world_size));
  }
  std::vector<TcpPeer> peers;
  Bootstrapped out;
  for (int r = 0; r < resp->peers_size(); ++r) {
    peers.push_back(TcpPeer{resp->peers(r).host(), resp->peers(r).address()});
    if (r < spec.rank && resp->peers(r).host() == spec.host) ++out.local_rank;
  }
  auto comm =
      TcpComm::Connect(std::move(*listener), spec.rank, peers,
                       Session(spec.job_id, spec.attempt),
                       std::max(deadline - absl::Now(), absl::Seconds(30)));
  if (!comm.ok()) return comm.status();
  out.comm = std::move(*comm);
  out.blob = resp->blob();
  return out;
}

MpiRank StartMpiRank(int* argc, char*** argv) {
  int provided = 0;
  MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MpiRank r;
  r.world = std::make_unique<MpiComm>(MPI_COMM_WORLD);
  r.rank = r.world->rank();
  r.size = r.world->size();
  MPI_Comm node_comm;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, r.rank,
                      MPI_INFO_NULL, &node_comm);
  MPI_Comm_rank(node_comm, &r.local_rank);
  MPI_Comm_free(&node_comm);
  return r;
}

void FinishMpi() { MPI_Finalize(); }

std::string MpiVersion() { return MpiLibraryVersion(); }

}  // namespace ringmaster
