// The node leader: one rank per node (its local rank 0) speaks to the
// coordinator for every rank of the node, over one connection.
//
// The leader runs a relay: a small gRPC server on a socket local to the node
// (an abstract Unix socket, so per network namespace) that serves the node's
// ranks the same worker calls the coordinator does (Register, Rendezvous,
// Heartbeat, ReportResults) and turns them into node calls: one RegisterNode
// once the node's ranks have registered, one RendezvousNode per round of the
// ranks' polls, and on one NodeSession stream a report each heartbeat
// interval with the heartbeats of the ranks heard from lately, the results
// and final marks waiting (sent at once when there are any), and the ranks
// whose process the relay saw end before their final report. A rank's
// report is answered only after the coordinator committed it.
#ifndef RINGMASTER_WORKER_NODE_RELAY_H_
#define RINGMASTER_WORKER_NODE_RELAY_H_

#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace ringmaster {

// Where a rank is on its node: its local rank, the node's rank count and the
// node's name (the relay's socket is named after the job and the node).
struct NodePlace {
  int local_rank = 0;
  int local_size = 1;
  std::string node;
};

// From the launcher: RINGMASTER_LOCAL_RANK / RINGMASTER_LOCAL_SIZE (set
// explicitly), else Open MPI's OMPI_COMM_WORLD_LOCAL_RANK / _LOCAL_SIZE
// (mpirun), else Slurm's SLURM_LOCALID with SLURM_NTASKS_PER_NODE (srun).
// The node is RINGMASTER_NODE, else the host name. nullopt when nothing says.
std::optional<NodePlace> NodePlaceFromEnvironment();

// The local address of a node's relay for a job.
std::string NodeRelayAddress(const std::string& job_id, const NodePlace& place);

class NodeRelay {
 public:
  // Serves `place`'s ranks on NodeRelayAddress and speaks for them to the
  // coordinator at `coordinator` with the job's worker `token`.
  static absl::StatusOr<std::unique_ptr<NodeRelay>> Start(
      const std::string& coordinator, const std::string& token,
      const std::string& job_id, const NodePlace& place);
  virtual ~NodeRelay() = default;

  // Waits until every local rank sent its final report and the coordinator
  // answered it (or its process is gone), up to `timeout`: the leader's
  // process must outlive its node's last report.
  virtual void WaitForNode(absl::Duration timeout) = 0;
};

}  // namespace ringmaster

#endif  // RINGMASTER_WORKER_NODE_RELAY_H_
