// Kubernetes manifests for a plan, in two styles:
//  - an MPIJob (kubeflow.org/v2beta1, the mpi-operator's CRD) whose
//    launcher pod runs mpirun over worker pods;
//  - an Indexed Job (batch/v1) plus a headless Service, whose pods start
//    `ringmaster-worker run --bootstrap`: rank from JOB_COMPLETION_INDEX,
//    peers and the NCCL unique id relayed by the coordinator, no sshd and
//    no mpirun in the image.
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
  // Secret with the coordinator's CA (key "ca.crt"), mounted in every
  // container with RINGMASTER_TLS_CA pointing at it; empty: plaintext.
  std::string tls_ca_secret;
  // When set, a Secret `token_secret` holding it comes first (for the
  // coordinator's own kubectl apply from a 0600 file; never printed).
  std::string token;
};

// A DNS-1123 label from free text: lowercase, [a-z0-9-], at most 63.
std::string DnsLabel(const std::string& text);

// The MPIJob as YAML. InvalidArgument for a name that is not a DNS-1123
// label, ranks that do not fill the pods, or a non-NCCL env name.
absl::StatusOr<std::string> BuildMpiJobManifest(const K8sSpec& spec);

// The headless Service and the Indexed Job, as one YAML stream. Each pod
// runs `ranks_per_pod` ranks (ringmaster-worker --local-ranks): ranks
// INDEX*ranks_per_pod ... INDEX*ranks_per_pod + ranks_per_pod - 1.
absl::StatusOr<std::string> BuildIndexedJobManifest(const K8sSpec& spec);

}  // namespace ringmaster

#endif  // RINGMASTER_COORDINATOR_K8S_H_
