#include "coordinator/k8s.h"

#include <yaml-cpp/yaml.h>

#include <cmath>

#include "absl/strings/match.h"
#include "absl/strings/str_format.h"

namespace ringmaster {
namespace {

bool Dns1123Label(const std::string& s) {
  if (s.empty() || s.size() > 63) return false;
  for (char c : s) {
    if (!(std::islower(static_cast<unsigned char>(c)) ||
          std::isdigit(static_cast<unsigned char>(c)) || c == '-'))
      return false;
  }
  return s.front() != '-' && s.back() != '-';
}

void EmitEnv(YAML::Emitter& out, const K8sSpec& s, bool with_token) {
  out << YAML::Key << "env" << YAML::Value << YAML::BeginSeq;
  for (const auto& [k, v] : s.nccl_env) {
    out << YAML::BeginMap << YAML::Key << "name" << YAML::Value << k
        << YAML::Key << "value" << YAML::Value << YAML::DoubleQuoted << v
        << YAML::EndMap;
  }
  if (with_token) {
    out << YAML::BeginMap << YAML::Key << "name" << YAML::Value
        << "RINGMASTER_TOKEN" << YAML::Key << "valueFrom" << YAML::Value
        << YAML::BeginMap << YAML::Key << "secretKeyRef" << YAML::Value
        << YAML::BeginMap << YAML::Key << "name" << YAML::Value
        << s.token_secret << YAML::Key << "key" << YAML::Value << "token"
        << YAML::EndMap << YAML::EndMap << YAML::EndMap;
  }
  out << YAML::EndSeq;
}

}  // namespace

absl::StatusOr<std::string> BuildMpiJobManifest(const K8sSpec& s) {
  if (!Dns1123Label(s.name)) {
    return absl::InvalidArgumentError(
        "name: expected a DNS-1123 label (a-z, 0-9, '-', at most 63), got " +
        s.name);
  }
  if (!s.namespace_.empty() && !Dns1123Label(s.namespace_))
    return absl::InvalidArgumentError("namespace: not a DNS-1123 label");
  if (!Dns1123Label(s.token_secret))
    return absl::InvalidArgumentError("token secret: not a DNS-1123 name");
  if (s.image.empty()) return absl::InvalidArgumentError("image: required");
  if (s.coordinator.empty() || s.job_id.empty()) {
    return absl::InvalidArgumentError(
        "coordinator and job: required (submit the plan first; the pods "
        "register with that job)");
  }
  if (s.nranks < 1 || s.ranks_per_pod < 1 || s.nranks % s.ranks_per_pod) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%d ranks do not fill worker pods of %d ranks each",
                        s.nranks, s.ranks_per_pod));
  }
  for (const auto& [k, v] : s.nccl_env) {
    if (!absl::StartsWith(k, "NCCL_"))
      return absl::InvalidArgumentError("env." + k + ": only NCCL_* pass");
  }
  const int pods = s.nranks / s.ranks_per_pod;
  // mpirun in the launcher pod: argv as a list, never a shell string.
  std::vector<std::string> command = {
      "mpirun",   "--allow-run-as-root",
      "-np",      std::to_string(s.nranks),
      "--map-by", absl::StrFormat("ppr:%d:node", s.ranks_per_pod),
      "-x",       "RINGMASTER_TOKEN"};
  for (const auto& [k, v] : s.nccl_env) {
    command.push_back("-x");
    command.push_back(k);
  }
  for (const std::string& a :
       {std::string("ringmaster-worker"), std::string("run"),
        std::string("--coordinator"), s.coordinator, std::string("--job"),
        s.job_id, std::string("--backend"), s.backend}) {
    command.push_back(a);
  }

  YAML::Emitter out;
  out << YAML::BeginMap;
  out << YAML::Key << "apiVersion" << YAML::Value << "kubeflow.org/v2beta1";
  out << YAML::Key << "kind" << YAML::Value << "MPIJob";
  out << YAML::Key << "metadata" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "name" << YAML::Value << s.name;
  if (!s.namespace_.empty())
    out << YAML::Key << "namespace" << YAML::Value << s.namespace_;
  out << YAML::Key << "labels" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "app.kubernetes.io/name" << YAML::Value << "ringmaster";
  if (!s.job_id.empty())
    out << YAML::Key << "ringmaster.io/job" << YAML::Value << YAML::DoubleQuoted
        << s.job_id;
  out << YAML::EndMap << YAML::EndMap;
  out << YAML::Key << "spec" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "slotsPerWorker" << YAML::Value << s.ranks_per_pod;
  out << YAML::Key << "mpiImplementation" << YAML::Value << "OpenMPI";
  out << YAML::Key << "runPolicy" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "cleanPodPolicy" << YAML::Value << "Running";
  out << YAML::Key << "backoffLimit" << YAML::Value << 0;
  out << YAML::Key << "activeDeadlineSeconds" << YAML::Value
      << static_cast<long>(std::ceil(s.deadline_s));
  out << YAML::EndMap;
  out << YAML::Key << "mpiReplicaSpecs" << YAML::Value << YAML::BeginMap;
  for (const bool launcher : {true, false}) {
    out << YAML::Key << (launcher ? "Launcher" : "Worker") << YAML::Value
        << YAML::BeginMap;
    out << YAML::Key << "replicas" << YAML::Value << (launcher ? 1 : pods);
    out << YAML::Key << "restartPolicy" << YAML::Value << "Never";
    out << YAML::Key << "template" << YAML::Value << YAML::BeginMap;
    out << YAML::Key << "metadata" << YAML::Value << YAML::BeginMap << YAML::Key
        << "labels" << YAML::Value << YAML::BeginMap << YAML::Key
        << "app.kubernetes.io/name" << YAML::Value << "ringmaster" << YAML::Key
        << "app.kubernetes.io/component" << YAML::Value
        << (launcher ? "launcher" : "worker") << YAML::EndMap << YAML::EndMap;
    out << YAML::Key << "spec" << YAML::Value << YAML::BeginMap;
    out << YAML::Key << "containers" << YAML::Value << YAML::BeginSeq;
    out << YAML::BeginMap;
    out << YAML::Key << "name" << YAML::Value
        << (launcher ? "launcher" : "worker");
    out << YAML::Key << "image" << YAML::Value << s.image;
    if (launcher) {
      out << YAML::Key << "command" << YAML::Value << YAML::BeginSeq;
      // Quoted: "16" must stay a string (Kubernetes wants strings here).
      for (const auto& a : command) out << YAML::DoubleQuoted << a;
      out << YAML::EndSeq;
    }
    EmitEnv(out, s, /*with_token=*/launcher);
    if (!launcher && s.gpus_per_pod > 0) {
      out << YAML::Key << "resources" << YAML::Value << YAML::BeginMap
          << YAML::Key << "limits" << YAML::Value << YAML::BeginMap << YAML::Key
          << "nvidia.com/gpu" << YAML::Value << s.gpus_per_pod << YAML::EndMap
          << YAML::EndMap;
    }
    out << YAML::EndMap << YAML::EndSeq;
    out << YAML::EndMap << YAML::EndMap << YAML::EndMap;
  }
  out << YAML::EndMap << YAML::EndMap << YAML::EndMap;
  if (!out.good())
    return absl::InternalError(std::string("yaml: ") + out.GetLastError());
  return std::string(out.c_str()) + "\n";
}

}  // namespace ringmaster
