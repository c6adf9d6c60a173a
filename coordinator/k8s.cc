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

constexpr char kTlsVolume[] = "ringmaster-tls";
constexpr char kTlsDir[] = "/etc/ringmaster/tls";

void EmitTlsEnv(YAML::Emitter& out, const K8sSpec& s) {
  if (s.tls_ca_secret.empty()) return;
  out << YAML::BeginMap << YAML::Key << "name" << YAML::Value
      << "RINGMASTER_TLS_CA" << YAML::Key << "value" << YAML::Value
      << YAML::DoubleQuoted << std::string(kTlsDir) + "/ca.crt" << YAML::EndMap;
}

// The CA Secret's mount in a container, and its volume in the pod.
void EmitTlsMount(YAML::Emitter& out, const K8sSpec& s) {
  if (s.tls_ca_secret.empty()) return;
  out << YAML::Key << "volumeMounts" << YAML::Value << YAML::BeginSeq
      << YAML::BeginMap << YAML::Key << "name" << YAML::Value << kTlsVolume
      << YAML::Key << "mountPath" << YAML::Value << kTlsDir << YAML::Key
      << "readOnly" << YAML::Value << true << YAML::EndMap << YAML::EndSeq;
}
void EmitTlsVolume(YAML::Emitter& out, const K8sSpec& s) {
  if (s.tls_ca_secret.empty()) return;
  out << YAML::Key << "volumes" << YAML::Value << YAML::BeginSeq
      << YAML::BeginMap << YAML::Key << "name" << YAML::Value << kTlsVolume
      << YAML::Key << "secret" << YAML::Value << YAML::BeginMap << YAML::Key
      << "secretName" << YAML::Value << s.tls_ca_secret << YAML::EndMap
      << YAML::EndMap << YAML::EndSeq;
}

// NCCL_* variables, the TLS CA path and the token (from its Secret).
void EmitEnvEntries(YAML::Emitter& out, const K8sSpec& s, bool with_token) {
  for (const auto& [k, v] : s.nccl_env) {
    out << YAML::BeginMap << YAML::Key << "name" << YAML::Value << k
        << YAML::Key << "value" << YAML::Value << YAML::DoubleQuoted << v
        << YAML::EndMap;
  }
  EmitTlsEnv(out, s);
  if (with_token) {
    out << YAML::BeginMap << YAML::Key << "name" << YAML::Value
        << "RINGMASTER_TOKEN" << YAML::Key << "valueFrom" << YAML::Value
        << YAML::BeginMap << YAML::Key << "secretKeyRef" << YAML::Value
        << YAML::BeginMap << YAML::Key << "name" << YAML::Value
        << s.token_secret << YAML::Key << "key" << YAML::Value << "token"
        << YAML::EndMap << YAML::EndMap << YAML::EndMap;
  }
}

void EmitEnv(YAML::Emitter& out, const K8sSpec& s, bool with_token) {
  out << YAML::Key << "env" << YAML::Value << YAML::BeginSeq;
  EmitEnvEntries(out, s, with_token);
  out << YAML::EndSeq;
}

absl::Status Validate(const K8sSpec& s) {
  if (!Dns1123Label(s.name)) {
    return absl::InvalidArgumentError(
        "name: expected a DNS-1123 label (a-z, 0-9, '-', at most 63), got " +
        s.name);
  }
  if (!s.namespace_.empty() && !Dns1123Label(s.namespace_))
    return absl::InvalidArgumentError("namespace: not a DNS-1123 label");
  if (!Dns1123Label(s.token_secret))
    return absl::InvalidArgumentError("token secret: not a DNS-1123 name");
  if (!s.tls_ca_secret.empty() && !Dns1123Label(s.tls_ca_secret))
    return absl::InvalidArgumentError("TLS CA secret: not a DNS-1123 name");
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
  return absl::OkStatus();
}

void EmitMetadata(YAML::Emitter& out, const K8sSpec& s,
                  const std::string& name) {
  out << YAML::Key << "metadata" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "name" << YAML::Value << name;
  if (!s.namespace_.empty())
    out << YAML::Key << "namespace" << YAML::Value << s.namespace_;
  out << YAML::Key << "labels" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "app.kubernetes.io/name" << YAML::Value << "ringmaster";
  if (!s.job_id.empty())
    out << YAML::Key << "ringmaster.io/job" << YAML::Value << YAML::DoubleQuoted
        << s.job_id;
  out << YAML::EndMap << YAML::EndMap;
}

// The Secret with the job's worker token, when the spec carries it.
void EmitSecret(YAML::Emitter& out, const K8sSpec& s) {
  if (s.token.empty()) return;
  out << YAML::BeginDoc << YAML::BeginMap;
  out << YAML::Key << "apiVersion" << YAML::Value << "v1";
  out << YAML::Key << "kind" << YAML::Value << "Secret";
  EmitMetadata(out, s, s.token_secret);
  out << YAML::Key << "type" << YAML::Value << "Opaque";
  out << YAML::Key << "stringData" << YAML::Value << YAML::BeginMap << YAML::Key
      << "token" << YAML::Value << YAML::DoubleQuoted << s.token
      << YAML::EndMap;
  out << YAML::EndMap << YAML::EndDoc;
}

void EmitGpuLimit(YAML::Emitter& out, int gpus) {
  if (gpus <= 0) return;
  out << YAML::Key << "resources" << YAML::Value << YAML::BeginMap << YAML::Key
      << "limits" << YAML::Value << YAML::BeginMap << YAML::Key
      << "nvidia.com/gpu" << YAML::Value << gpus << YAML::EndMap
      << YAML::EndMap;
}

absl::StatusOr<std::string> Finish(YAML::Emitter& out) {
  if (!out.good())
    return absl::InternalError(std::string("yaml: ") + out.GetLastError());
  return std::string(out.c_str()) + "\n";
}

}  // namespace

std::string DnsLabel(const std::string& text) {
  std::string out;
  for (char c : text) {
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    out += std::isalnum(static_cast<unsigned char>(c)) ? c : '-';
  }
  while (!out.empty() && out.front() == '-') out.erase(out.begin());
  if (out.size() > 63) out.resize(63);
  while (!out.empty() && out.back() == '-') out.pop_back();
  return out.empty() ? "ringmaster" : out;
}

absl::StatusOr<std::string> BuildMpiJobManifest(const K8sSpec& s) {
  if (absl::Status v = Validate(s); !v.ok()) return v;
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
  EmitSecret(out, s);
  if (!s.token.empty()) out << YAML::BeginDoc;
  out << YAML::BeginMap;
  out << YAML::Key << "apiVersion" << YAML::Value << "kubeflow.org/v2beta1";
  out << YAML::Key << "kind" << YAML::Value << "MPIJob";
  EmitMetadata(out, s, s.name);
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
    out << YAML::Key << "command" << YAML::Value << YAML::BeginSeq;
    if (launcher) {
      // Quoted: "16" must stay a string (Kubernetes wants strings here).
      for (const auto& a : command) out << YAML::DoubleQuoted << a;
    } else {
      // mpi-operator's launcher reaches the workers over ssh with the keys
      // it mounts in /root/.ssh: each worker runs sshd in the foreground
      // (the worker image installs it), and mpirun starts the ranks there.
      out << YAML::DoubleQuoted << "/usr/sbin/sshd" << YAML::DoubleQuoted
          << "-De";
    }
    out << YAML::EndSeq;
    EmitEnv(out, s, /*with_token=*/launcher);
    if (!launcher) EmitGpuLimit(out, s.gpus_per_pod);
    EmitTlsMount(out, s);
    out << YAML::EndMap << YAML::EndSeq;
    EmitTlsVolume(out, s);
    out << YAML::EndMap << YAML::EndMap << YAML::EndMap;
  }
  out << YAML::EndMap << YAML::EndMap << YAML::EndMap;
  return Finish(out);
}

absl::StatusOr<std::string> BuildIndexedJobManifest(const K8sSpec& s) {
  if (absl::Status v = Validate(s); !v.ok()) return v;
  const int pods = s.nranks / s.ranks_per_pod;
  YAML::Emitter out;
  EmitSecret(out, s);

  // The headless Service: stable DNS names (POD.NAME) for the pods, for
  // people and tools; the ranks themselves meet through the coordinator.
  out << YAML::BeginDoc << YAML::BeginMap;
  out << YAML::Key << "apiVersion" << YAML::Value << "v1";
  out << YAML::Key << "kind" << YAML::Value << "Service";
  EmitMetadata(out, s, s.name);
  out << YAML::Key << "spec" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "clusterIP" << YAML::Value << "None";
  out << YAML::Key << "publishNotReadyAddresses" << YAML::Value << true;
  out << YAML::Key << "selector" << YAML::Value << YAML::BeginMap << YAML::Key
      << "ringmaster.io/job-name" << YAML::Value << s.name << YAML::EndMap;
  out << YAML::EndMap << YAML::EndMap << YAML::EndDoc;

  // Arguments as a list, never a shell string; $(POD_IP) is expanded by
  // the kubelet from the env below.
  std::vector<std::string> args = {
      "run",         "--bootstrap",   "--coordinator",
      s.coordinator, "--job",         s.job_id,
      "--backend",   s.backend,       "--advertise",
      "$(POD_IP)",   "--local-ranks", std::to_string(s.ranks_per_pod)};

  out << YAML::BeginDoc << YAML::BeginMap;
  out << YAML::Key << "apiVersion" << YAML::Value << "batch/v1";
  out << YAML::Key << "kind" << YAML::Value << "Job";
  EmitMetadata(out, s, s.name);
  out << YAML::Key << "spec" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "completionMode" << YAML::Value << "Indexed";
  out << YAML::Key << "completions" << YAML::Value << pods;
  out << YAML::Key << "parallelism" << YAML::Value << pods;
  // One failed pod fails the job: a benchmark is not retried rank by rank
  // (the coordinator retries whole attempts).
  out << YAML::Key << "backoffLimit" << YAML::Value << 0;
  out << YAML::Key << "activeDeadlineSeconds" << YAML::Value
      << static_cast<long>(std::ceil(s.deadline_s));
  // Kept a day after it ends, for its pods' logs.
  out << YAML::Key << "ttlSecondsAfterFinished" << YAML::Value << 86400;
  out << YAML::Key << "template" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "metadata" << YAML::Value << YAML::BeginMap << YAML::Key
      << "labels" << YAML::Value << YAML::BeginMap << YAML::Key
      << "app.kubernetes.io/name" << YAML::Value << "ringmaster" << YAML::Key
      << "app.kubernetes.io/component" << YAML::Value << "worker" << YAML::Key
      << "ringmaster.io/job-name" << YAML::Value << s.name << YAML::EndMap
      << YAML::EndMap;
  out << YAML::Key << "spec" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "subdomain" << YAML::Value << s.name;
  out << YAML::Key << "restartPolicy" << YAML::Value << "Never";
  out << YAML::Key << "containers" << YAML::Value << YAML::BeginSeq;
  out << YAML::BeginMap;
  out << YAML::Key << "name" << YAML::Value << "worker";
  out << YAML::Key << "image" << YAML::Value << s.image;
  out << YAML::Key << "command" << YAML::Value << YAML::BeginSeq
      << YAML::DoubleQuoted << "ringmaster-worker" << YAML::EndSeq;
  out << YAML::Key << "args" << YAML::Value << YAML::BeginSeq;
  for (const auto& a : args) out << YAML::DoubleQuoted << a;
  out << YAML::EndSeq;
  out << YAML::Key << "env" << YAML::Value << YAML::BeginSeq;
  out << YAML::BeginMap << YAML::Key << "name" << YAML::Value
      << "RINGMASTER_WORLD_SIZE" << YAML::Key << "value" << YAML::Value
      << YAML::DoubleQuoted << std::to_string(s.nranks) << YAML::EndMap;
  out << YAML::BeginMap << YAML::Key << "name" << YAML::Value << "POD_IP"
      << YAML::Key << "valueFrom" << YAML::Value << YAML::BeginMap << YAML::Key
      << "fieldRef" << YAML::Value << YAML::BeginMap << YAML::Key << "fieldPath"
      << YAML::Value << "status.podIP" << YAML::EndMap << YAML::EndMap
      << YAML::EndMap;
  EmitEnvEntries(out, s, /*with_token=*/true);
  out << YAML::EndSeq;
  EmitGpuLimit(out, s.gpus_per_pod);
  EmitTlsMount(out, s);
  out << YAML::EndMap << YAML::EndSeq;  // container
  EmitTlsVolume(out, s);
  out << YAML::EndMap << YAML::EndMap;                  // pod spec, template
  out << YAML::EndMap << YAML::EndMap << YAML::EndDoc;  // job spec, job
  return Finish(out);
}

}  // namespace ringmaster
