// Following one job attempt to its end: the launcher, the ranks'
// heartbeats and progress, the deadline, cancellation, and the reaping of
// every process when it is over.
//
// `ringmaster run` (embedded) and `ringmaster serve` (the scheduler) drive
// the same class: they call Poll() until it returns an outcome, then Reap()
// and JobManager::Finish (or Requeue). Decisions come from outside the job:
// heartbeat leases, a stalled progress counter (rank_hung), the launcher's
// exit and the local ranks' pids.
#ifndef RINGMASTER_COORDINATOR_SUPERVISOR_H_
#define RINGMASTER_COORDINATOR_SUPERVISOR_H_

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "coordinator/job_manager.h"
#include "coordinator/k8s.h"
#include "coordinator/launcher.h"
#include "coordinator/slurm.h"
#include "core/mutex.h"

namespace ringmaster {

struct WatchLimits {
  double deadline_s = 600;             // wall clock of the attempt
  double registration_timeout_s = 60;  // every rank registered by then
  double heartbeat_timeout_s = 15;     // lease of a rank
  double op_timeout_s = 60;            // no rank made progress: rank_hung
  double grace_s = 2;                  // SIGTERM -> SIGKILL
};

struct MpirunLaunch {
  std::string mpirun = "mpirun";
  std::string hostfile;
  std::vector<std::string> mpirun_args;
  std::string worker;   // ringmaster-worker
  std::string address;  // the coordinator, as workers reach it
  std::string backend;  // host or cuda
  // The launcher's whole environment (NAME=value); the allowlisted part is
  // forwarded to the ranks. Must hold RINGMASTER_TOKEN.
  std::vector<std::string> env;
  std::string log_path;  // launcher.log; empty: none
  bool echo = false;     // launcher lines on stderr, prefixed "  | "
  // Set on mpirun before it starts: its local ranks inherit them.
  std::vector<ResourceLimit> rlimits;
  // Sees every launcher line first; returns true to keep it out of the log.
  std::function<bool(std::string_view)> line_hook;
};

// A Slurm launch: the attempt is one sbatch job (coordinator/slurm.h).
struct SlurmLaunch {
  SlurmSpec spec;  // job_id, worker, coordinator, backend filled by caller
  std::string script_path;  // where the generated script is written
  // sbatch's environment (exported to the ranks): must hold
  // RINGMASTER_TOKEN; SLURM_CONF when the cluster needs it.
  std::vector<std::string> env;
  double poll_interval_s = 1;  // squeue at most this often
  // Set on sbatch: Slurm gives the job the submitting process's limits
  // (PropagateResourceLimits, ALL by default).
  std::vector<ResourceLimit> rlimits;
};

// A Kubernetes launch: the attempt is a Secret (the worker token) plus an
// Indexed Job and headless Service, or an MPIJob (coordinator/k8s.h),
// applied with kubectl from a 0600 file and deleted on cancel.
struct K8sLaunch {
  K8sSpec spec;               // name, job_id, coordinator, token filled
  std::string style = "job";  // job (Indexed Job) or mpijob
  std::string manifest_path;  // where the manifests are written (0600)
  std::string kubectl = "kubectl";
  std::vector<std::string> env;  // kubectl's environment (KUBECONFIG...)
  double poll_interval_s = 2;    // kubectl get at most this often
};

// What started an attempt's ranks, as the supervisor sees it.
class LaunchHandle {
 public:
  virtual ~LaunchHandle() = default;
  // The launcher's end once it is over: 0 clean, anything else failed.
  virtual std::optional<int> Poll() = 0;
  virtual std::string DescribeEnd(int status) = 0;
  // Ends whatever is left (SIGTERM, then SIGKILL after `grace`); returns
  // how many processes needed SIGKILL.
  virtual int Terminate(absl::Duration grace) = 0;
  virtual bool Running() = 0;
  virtual void Finish() {}  // after the end: drain output readers
  // After the end: give back what the launch holds (Kubernetes objects;
  // all of them when the job was cancelled).
  virtual void Release(bool cancelled) {}
  virtual void Detach() {}  // leave it running (coordinator stopping)
};

struct Outcome {
  v1::JobState state = v1::JOB_SUCCEEDED;
  v1::Failure failure;  // reason unset on success
};

// A deadline generous enough for every case's sampling limits.
double DefaultDeadlineSeconds(const std::vector<v1::Case>& cases);

// Infrastructure failures may be retried; deterministic ones never.
bool RetryableFailure(const v1::Failure& failure);

// "worker_exit rank 1 on host: detail".
std::string DescribeFailure(const v1::Failure& failure);

class JobSupervisor {
 public:
  // Launches the job's current attempt through mpirun and marks it
  // LAUNCHING.
  static absl::StatusOr<std::unique_ptr<JobSupervisor>> LaunchMpirun(
      JobManager* manager, const std::string& job_id, MpirunLaunch launch,
      WatchLimits limits);
  // Submits the job's current attempt as a Slurm batch job.
  static absl::StatusOr<std::unique_ptr<JobSupervisor>> LaunchSlurm(
      JobManager* manager, const std::string& job_id, SlurmLaunch launch,
      WatchLimits limits);
  // Applies the job's current attempt to a Kubernetes cluster.
  static absl::StatusOr<std::unique_ptr<JobSupervisor>> LaunchK8s(
      JobManager* manager, const std::string& job_id, K8sLaunch launch,
      WatchLimits limits);
  // Follows an attempt whose ranks were started by other means (the
  // external launcher), or by a coordinator that is gone (`adopted`; its
  // launcher, mpirun's session `orphan_sid` or Slurm job `orphan_slurm`,
  // is ended at the end).
  static std::unique_ptr<JobSupervisor> Follow(JobManager* manager,
                                               const std::string& job_id,
                                               WatchLimits limits, bool adopted,
                                               int orphan_sid,
                                               int64_t orphan_slurm = 0);
  ~JobSupervisor();

  const std::string& job_id() const { return job_id_; }
  // One look at the job; the outcome once it is decided (then call Reap).
  std::optional<Outcome> Poll();
  // Ends every process of the attempt: the launcher's session (SIGTERM,
  // then SIGKILL after the grace period) and any local rank left. Refines
  // a worker_exit failure with the launcher's account of the dead rank.
  // Returns how many processes needed SIGKILL.
  int Reap(Outcome* outcome);
  // Leaves the attempt's processes running (the coordinator is stopping;
  // a later one adopts the job).
  void Abandon();

 private:
  JobSupervisor(JobManager* manager, std::string job_id, WatchLimits limits);
  std::optional<Outcome> Decide();
  std::optional<Outcome> DecideEnd(const JobSnapshot& snap, absl::Time now,
                                   bool* wait);
  std::optional<Outcome> WatchRanks(const std::vector<RankStatus>& ranks,
                                    absl::Time now);
  std::optional<Outcome> SilentRank(const std::vector<RankStatus>& ranks,
                                    const RankStatus& first, absl::Time now);
  std::optional<Outcome> StalledRank(const std::vector<RankStatus>& ranks,
                                     absl::Time now,
                                     absl::Time newest_progress);

  struct Log {
    Mutex mu;
    std::optional<RankFailure> rank_failure ABSL_GUARDED_BY(mu);
  };

  JobManager* manager_;
  std::string job_id_;
  WatchLimits limits_;
  std::string my_host_;
  absl::Time start_;
  std::unique_ptr<LaunchHandle> launcher_;
  std::shared_ptr<Log> log_;
  bool adopted_ = false;
  int orphan_sid_ = 0;
  int64_t orphan_slurm_ = 0;
  std::optional<int> exit_status_;
  absl::Time exit_seen_ = absl::InfinitePast();
  bool reaped_ = false;
};

}  // namespace ringmaster

#endif  // RINGMASTER_COORDINATOR_SUPERVISOR_H_
