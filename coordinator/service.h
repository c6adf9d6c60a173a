// `ringmaster serve`: the coordinator as a long-running service.
//
// Owns the durable store (DIR/ringmaster.db), the admin token
// (DIR/admin.token, mode 0600), the gRPC server and the scheduler thread
// that admits queued jobs, launches them (mpirun, or "external": ranks
// started by other means register with the job's worker token), follows
// them with a JobSupervisor, retries infrastructure failures within the
// job's attempt budget and records every attempt. On start it takes over
// the jobs a previous coordinator left: queued ones queue again, launched
// ones wait for their workers to come back within the heartbeat lease and
// otherwise fail with coordinator_restart (their launcher session reaped).
#ifndef RINGMASTER_COORDINATOR_SERVICE_H_
#define RINGMASTER_COORDINATOR_SERVICE_H_

#include <filesystem>
#include <future>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "coordinator/job_manager.h"
#include "coordinator/server.h"
#include "coordinator/store.h"
#include "coordinator/supervisor.h"
#include "core/mutex.h"

namespace ringmaster {

struct ServiceOptions {
  std::string data_dir = "ringmaster-data";
  // Finished jobs submitted with an output name are exported to
  // RESULTS_ROOT/OUTPUT/JOB_ID/ (results.jsonl, report.html, job.json);
  // nothing is ever written outside it. Empty: DATA_DIR/results.
  std::string results_root;
  ServerOptions server;             // address, user tokens, TLS, limits
  std::string launcher = "mpirun";  // mpirun, slurm, k8s or external
  std::string mpirun = "mpirun";
  std::string hostfile;
  std::vector<std::string> mpirun_args;
  std::string worker;  // ringmaster-worker (mpirun, slurm)
  // Slurm launcher: partition, ranks per node (0: all on one node), GPUs
  // per node (0: none requested), extra sbatch options, squeue period.
  std::string slurm_partition;
  int slurm_ranks_per_node = 0;
  int slurm_gpus_per_node = 0;
  std::vector<std::string> slurm_args;
  double slurm_poll_s = 1;
  // Kubernetes launcher: style (job = Indexed Job + headless Service with
  // coordinator bootstrap, mpijob = kubeflow MPIJob), worker image,
  // namespace, ranks and GPUs per pod, kubectl, poll period.
  std::string k8s_style = "job";
  std::string k8s_image;
  std::string k8s_namespace;
  int k8s_ranks_per_pod = 0;  // 0: the plan's ranks_per_node, else 1
  int k8s_gpus_per_pod = 0;
  std::string k8s_tls_ca_secret;  // the CA the pods trust (key ca.crt)
  std::string kubectl = "kubectl";
  double k8s_poll_s = 2;
  std::string worker_address;  // how ranks reach us; empty: the listener
  int max_running = 1;         // jobs launched at once (admission)
  int max_queued = 256;        // jobs waiting; more: RESOURCE_EXHAUSTED
  int user_quota = 64;         // a user's unfinished jobs
  int max_ranks = 1024;        // ranks per job
  int max_attempts = 1;        // attempts for infrastructure failures
  double heartbeat_timeout_s = 15;
  double registration_timeout_s = 60;
  double op_timeout_s = 60;
  double grace_s = 2;
  int heartbeat_interval_ms = 1000;
  bool allow_fault_injection = false;  // RINGMASTER_FAULT in submitted env
  // Limits on the launcher and the ranks it starts (mpirun: its local
  // ranks; Slurm: propagated from sbatch). None by default: an address
  // space limit breaks CUDA, which reserves far more than it uses.
  std::vector<ResourceLimit> worker_rlimits;
};

class CoordinatorService {
 public:
  static absl::StatusOr<std::unique_ptr<CoordinatorService>> Start(
      ServiceOptions options);
  ~CoordinatorService();

  int port() const { return server_->port(); }
  const std::string& admin_token() const { return admin_token_; }
  JobManager* manager() { return manager_.get(); }
  // How many jobs were taken over from the store at start.
  int adopted() const { return adopted_; }
  // Stops the scheduler and the server. Running jobs are left to a later
  // coordinator on the same data dir (their workers keep retrying).
  void Shutdown();
  // Cancels every job that is not over and waits up to `wait` for their
  // ends (their processes get SIGTERM, then SIGKILL); for a stop that must
  // leave nothing running (`serve --on-stop cancel`).
  void CancelAll(absl::Duration wait);

 private:
  CoordinatorService() = default;
  absl::StatusOr<v1::SubmitPlanResponse> Submit(
      const v1::SubmitPlanRequest& request, const Caller& caller);
  void SchedulerLoop();
  void LaunchQueued();
  absl::StatusOr<std::unique_ptr<JobSupervisor>> Launch(
      const v1::Job& job, const std::string& id, const WatchLimits& limits);
  absl::StatusOr<std::unique_ptr<JobSupervisor>> LaunchOnK8s(
      const v1::Job& job, const std::string& id, const WatchLimits& limits,
      const std::filesystem::path& dir);
  absl::StatusOr<std::unique_ptr<JobSupervisor>> LaunchOnSlurm(
      const v1::Job& job, const std::string& id, const WatchLimits& limits,
      const std::filesystem::path& dir);
  absl::StatusOr<std::unique_ptr<JobSupervisor>> LaunchWithMpirun(
      const v1::Job& job, const std::string& id, const WatchLimits& limits,
      const std::filesystem::path& dir);
  void PollRunning();
  // Exports a finished job that has an output name (see results_root);
  // failures are logged, never change the job.
  void ExportJob(const std::string& job_id);
  WatchLimits LimitsFor(const v1::Job& job) const;

  ServiceOptions options_;
  // options_.launcher, parsed once.
  enum class LauncherKind { kMpirun, kSlurm, kK8s, kExternal };
  LauncherKind launcher_ = LauncherKind::kMpirun;
  std::string admin_token_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<JobManager> manager_;
  std::unique_ptr<CoordinatorServer> server_;
  Mutex submit_mu_;  // admission is decided one submission at a time
  int reserved_ ABSL_GUARDED_BY(submit_mu_) = 0;  // admitted, not stored yet
  std::map<std::string, int> reserved_by_user_ ABSL_GUARDED_BY(submit_mu_);
  std::mutex mu_;
  std::map<std::string, std::unique_ptr<JobSupervisor>> running_;
  struct Reaping {
    std::unique_ptr<JobSupervisor> sup;
    std::future<void> done;
  };
  std::list<Reaping> reaping_;  // attempts whose processes are being ended
  bool stop_ = false;
  std::condition_variable cv_;
  std::thread scheduler_;
  int adopted_ = 0;
};

// Reads DIR/admin.token, creating it (32 random bytes, hex, mode 0600) when
// missing.
absl::StatusOr<std::string> LoadOrCreateAdminToken(const std::string& dir);

// Reads a users file: one "NAME TOKEN" per line, '#' comments.
absl::StatusOr<std::map<std::string, std::string>> LoadUsersFile(
    const std::string& path);

}  // namespace ringmaster

#endif  // RINGMASTER_COORDINATOR_SERVICE_H_
