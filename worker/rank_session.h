// One rank's whole job: join the launch (MPI, or the coordinator
// bootstrap), register with the coordinator, compare fingerprints with the
// other ranks, make the launch's back end, then run every case of the job
// through its benchmark kind (worker/kinds/kind.h) and stream the results.
//
// The rank session is the CaseEnv kinds see: communicator groups for
// ladder rungs, the back end a case asks for, shared node benchmarks.
#ifndef RINGMASTER_WORKER_RANK_SESSION_H_
#define RINGMASTER_WORKER_RANK_SESSION_H_

#include <string>

namespace ringmaster {

// Exit codes of a rank (besides 0 and 2 for bad arguments).
inline constexpr int kExitCoordinator = 4;  // coordinator unreachable
inline constexpr int kExitMismatch = 5;     // config mismatch across ranks
inline constexpr int kExitFailed = 6;       // a case run or set-up failed

struct RunArgs {
  std::string coordinator;
  std::string job_id;
  std::string backend = "auto";
  int attempt = 1;
  // Coordinator bootstrap (no MPI).
  bool bootstrap = false;
  int rank = -1;        // -1: RINGMASTER_RANK or JOB_COMPLETION_INDEX
  int world_size = -1;  // -1: RINGMASTER_WORLD_SIZE
  std::string bind = "0.0.0.0";
  std::string advertise;  // empty: the address that routes to the coordinator
  int bootstrap_timeout_s = 300;
  int local_ranks = 1;  // ranks this process starts (one per GPU of a pod)
  // Telemetry sampling period (0: off; RINGMASTER_TELEMETRY_MS overrides).
  int telemetry_ms = 100;
  // One rank per node (local rank 0) speaks to the coordinator for the
  // node's ranks (worker/node_relay.h), where the launch says which ranks
  // share a node.
  bool node_leader = false;
};

// Runs this process as one rank of `args.job_id`; returns its exit code.
// Under MPI (not args.bootstrap), `argc`/`argv` go to MPI_Init. A failure
// after the rank knows its peers ends the whole job (the transport's
// abort) and this process, with the code above.
int RunRank(const RunArgs& args, int argc, char** argv);

}  // namespace ringmaster

#endif  // RINGMASTER_WORKER_RANK_SESSION_H_
