// How a rank joins its launch. Under mpirun, srun or an MPIJob: MPI's world
// communicator (StartMpiRank). Otherwise, the coordinator bootstrap: ranks
// started by anything (a Kubernetes Indexed
// Job, a shell loop, a process manager) find each other through the
// coordinator instead of MPI, then talk over TCP (comm/tcp_comm.h).
//
// Each rank opens a listener, publishes its address with Rendezvous, polls
// until every rank of the attempt has published, and dials the others.
// Rank 0 may publish a blob (the NCCL unique id) that every rank receives.
#ifndef RINGMASTER_WORKER_BOOTSTRAP_H_
#define RINGMASTER_WORKER_BOOTSTRAP_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "comm/host_comm.h"
#include "comm/tcp_comm.h"
#include "worker/coordinator_client.h"

namespace ringmaster {

// The rank from the environment: RINGMASTER_RANK, else JOB_COMPLETION_INDEX
// (Kubernetes Indexed Jobs); NotFound when neither is set.
absl::StatusOr<int> RankFromEnvironment();

// The non-negative integer in environment variable `name`: NotFound when
// unset or empty, InvalidArgument (naming the value) otherwise.
absl::StatusOr<int> IntFromEnv(const char* name);

// The world size from RINGMASTER_WORLD_SIZE; NotFound when unset.
absl::StatusOr<int> WorldSizeFromEnvironment();

// The local address this host uses to reach `coordinator` (HOST:PORT): what
// the other ranks should dial. Falls back to the host name.
std::string RouteAddressTo(const std::string& coordinator);

struct BootstrapSpec {
  std::string job_id;
  int attempt = 1;
  int rank = 0;
  int world_size = 1;
  std::string host;  // this rank's host name
  std::string bind = "0.0.0.0";
  std::string advertise_host;  // empty: RouteAddressTo(coordinator)
  std::string coordinator;
  std::string blob;  // rank 0's is relayed to every rank
  absl::Duration timeout = absl::Minutes(5);
};

struct Bootstrapped {
  std::unique_ptr<TcpComm> comm;
  std::string blob;    // rank 0's
  int local_rank = 0;  // ranks before this one on the same host
};

absl::StatusOr<Bootstrapped> Bootstrap(CoordinatorClient& client,
                                       const BootstrapSpec& spec);

// A rank started by an MPI launcher, after MPI_Init_thread (funneled; MPI
// errors return codes): the world communicator, this rank, the world's
// size and the rank's index among the ranks of its host.
struct MpiRank {
  std::unique_ptr<HostComm> world;
  int rank = 0;
  int size = 1;
  int local_rank = 0;
};
MpiRank StartMpiRank(int* argc, char*** argv);

// MPI_Finalize, once every communicator made from the world is gone.
void FinishMpi();

// The MPI library's version string (for fingerprints).
std::string MpiVersion();

}  // namespace ringmaster

#endif  // RINGMASTER_WORKER_BOOTSTRAP_H_
