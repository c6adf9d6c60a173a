// `ringmaster serve` and its clients: submit, status, watch, results,
// cancel.
#ifndef RINGMASTER_CLI_SERVICE_COMMANDS_H_
#define RINGMASTER_CLI_SERVICE_COMMANDS_H_

#include <map>
#include <string>
#include <vector>

#include "coordinator/service.h"

namespace ringmaster {

// Exit codes of the client commands, beyond run's 0-3 (0 ok, 1 the job
// failed or was cancelled, 2 usage or rejected input, 3 internal).
inline constexpr int kExitUnavailable = 4;  // coordinator unreachable
inline constexpr int kExitAuth = 5;         // token refused or wrong role
inline constexpr int kExitNotFound = 6;     // no such job
inline constexpr int kExitBusy = 7;         // queue full or quota reached
inline constexpr int kExitCancelled = 8;    // the job was CANCELLED

struct ServeOptions {
  ServiceOptions service;
  std::string users_file;
  std::string tls_cert_file, tls_key_file, tls_client_ca_file;
  std::vector<std::string> worker_rlimits;  // NAME=VALUE
  // On SIGINT/SIGTERM: "leave" running jobs to the next coordinator on the
  // same data dir, or "cancel" them (nothing left running).
  std::string on_stop = "leave";
};
int ServeCommand(ServeOptions options);

struct ClientOptions {
  std::string coordinator = "127.0.0.1:7450";
  std::string token_file;  // default: $RINGMASTER_TOKEN_FILE, then
                           // ringmaster-data/admin.token
  std::string tls_ca, tls_cert, tls_key;
  double timeout_s = 10;        // per call
  std::string format = "text";  // or "json"
  bool json = false;            // --json: the older spelling of --format json
  bool Json() const { return json || format == "json"; }
};

struct SubmitOptions {
  std::string plan_path;
  int np = 0;
  std::string backend = "auto";
  std::string request_id;  // default: random
  double timeout_s = 0;
  double op_timeout_s = 0;
  std::vector<std::string> env;  // NAME=value
  std::string output;            // relative to the results root
};
int SubmitCommand(const ClientOptions& client, const SubmitOptions& submit);
int StatusCommand(const ClientOptions& client, const std::string& job_id,
                  int limit);
int WatchCommand(const ClientOptions& client, const std::string& job_id);
int ResultsCommand(const ClientOptions& client, const std::string& job_id,
                   const std::string& format, const std::string& status = "");
int CancelCommand(const ClientOptions& client, const std::string& job_id);

struct LaunchSpecOptions {
  std::string launcher = "slurm";
  std::string plan_path;
  int np = 0;  // 0: the plan's ranks, else 2
  int ranks_per_node = 0;
  int gpus_per_node = 0;
  std::string partition;
  std::string coordinator;  // empty: $RINGMASTER_COORDINATOR at run time
  std::string job_id;       // empty: $RINGMASTER_JOB at run time
  std::string worker;       // default: ringmaster-worker next to this binary
  std::string backend = "auto";
  std::string output = "ringmaster-%j.out";
  // Kubernetes (k8s-mpijob, k8s-job).
  std::string image;
  std::string namespace_;
  std::string token_secret = "ringmaster-worker-token";
  std::string tls_ca_secret;  // the coordinator's CA, key ca.crt
};
// Prints what a launcher would submit for a plan (an sbatch script), for
// users who submit by hand.
int LaunchSpecCommand(const LaunchSpecOptions& options);

}  // namespace ringmaster

#endif  // RINGMASTER_CLI_SERVICE_COMMANDS_H_
