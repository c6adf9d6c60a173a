// Kubernetes manifests for a plan: an MPIJob (kubeflow.org/v2beta1, the
// mpi-operator's CRD) whose launcher pod runs mpirun over worker pods.
// (The Indexed-Job style, which bootstraps through the coordinator without
// MPI, needs the coordinator-bootstrap worker mode and comes with it.)
#ifndef RINGMASTER_COORDINATOR_K8S_H_
#define RINGMASTER_COORDINATOR_K8S_H_

#include <map>
#include <string>

#include "absl/status/statusor.h"

namespace ringmaster {

struct K8sSpec {
  std::string name;        // metadata.name (DNS-1123 label)
  std::string namespace_;  // empty: none written (kubectl -n decides)
  std::string image;       // worker image (ringmaster-worker, OpenMPI)
  int nranks = 1;
  int ranks_per_pod = 1;    // = GPUs per worker pod (slotsPerWorker)
  int gpus_per_pod = 0;     // nvidia.com/gpu limit per worker pod
  std::string coordinator;  // address the ranks dial
  std::string job_id;       // Ringmaster job id
  std::string backend = "auto";
  // Secret holding the job's worker token (key "token"): never inline.
  std::string token_secret = "ringmaster-worker-token";
  double deadline_s = 3600;  // runPolicy.activeDeadlineSeconds
  std::map<std::string, std::string> nccl_env;  // NCCL_* for every container
};

// The MPIJob as YAML. InvalidArgument for a name that is not a DNS-1123
// label, ranks that do not fill the pods, or a non-NCCL env name.
absl::StatusOr<std::string> BuildMpiJobManifest(const K8sSpec& spec);

}  // namespace ringmaster

#endif  // RINGMASTER_COORDINATOR_K8S_H_
