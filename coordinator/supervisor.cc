#include "coordinator/supervisor.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <fstream>
#include <iostream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "core/names.h"
#include "core/placement.h"

namespace ringmaster {
namespace {

bool ProcessAlive(int pid) {
  return pid > 0 && (kill(pid, 0) == 0 || errno == EPERM);
}

// True when /proc says the process is stopped (SIGSTOP) or traced.
bool ProcessStopped(int pid) {
  std::ifstream stat(absl::StrFormat("/proc/%d/stat", pid));
  std::string text((std::istreambuf_iterator<char>(stat)),
                   std::istreambuf_iterator<char>());
  auto close = text.rfind(')');
  if (close == std::string::npos || close + 2 >= text.size()) return false;
  char state = text[close + 2];
  return state == 'T' || state == 't';
}

v1::Failure MakeFailure(v1::FailureReason reason, int rank,
                        const std::string& host, const std::string& detail) {
  v1::Failure f;
  f.set_reason(reason);
  f.set_rank(rank);
  f.set_host(host);
  f.set_detail(detail);
  return f;
}

Outcome Failed(v1::Failure f) {
  Outcome o;
  o.state = v1::JOB_FAILED;
  o.failure = std::move(f);
  return o;
}

// mpirun in a session of its own.
class MpirunHandle : public LaunchHandle {
 public:
  explicit MpirunHandle(std::unique_ptr<ChildProcess> child)
      : child_(std::move(child)) {}
  std::optional<int> Poll() override { return child_->Poll(); }
  std::string DescribeEnd(int status) override {
    return "mpirun ended with " + DescribeWaitStatus(status);
  }
  int Terminate(absl::Duration grace) override {
    return child_->TerminateSession(grace);
  }
  bool Running() override {
    return !child_->Poll() || !ProcessesInSession(child_->pid()).empty();
  }
  void Finish() override { child_->JoinReaders(); }
  void Detach() override { child_->Detach(); }

 private:
  std::unique_ptr<ChildProcess> child_;
};

bool SlurmStateIsFinal(const std::string& state) {
  return state.empty() || state == "COMPLETED" || state == "FAILED" ||
         state == "CANCELLED" || state == "TIMEOUT" || state == "NODE_FAIL" ||
         state == "OUT_OF_MEMORY" || state == "PREEMPTED" ||
         state == "BOOT_FAIL" || state == "DEADLINE";
}

// One sbatch job, followed with squeue (then scontrol, or sacct where
// accounting is configured) and ended with scancel.
class SlurmHandle : public LaunchHandle {
 public:
  SlurmHandle(long slurm_id, std::vector<std::string> env, double poll_s)
      : id_(slurm_id), env_(std::move(env)), poll_s_(poll_s) {}
  std::optional<int> Poll() override {
    if (end_) return end_;
    if (absl::Now() - last_poll_ < absl::Seconds(poll_s_)) return std::nullopt;
    last_poll_ = absl::Now();
    auto state = QueueState();
    if (!state || !SlurmStateIsFinal(*state)) return std::nullopt;
    auto s =
        RunAndCapture({"scontrol", "show", "job", "-o", std::to_string(id_)},
                      Env(), absl::Seconds(30));
    std::optional<SlurmEnd> end;
    if (s.ok() && s->exit_code == 0) end = ParseScontrolJob(s->out);
    if (!end) {
      auto a = RunAndCapture({"sacct", "-n", "-P", "-X", "-j",
                              std::to_string(id_), "-o", "State,ExitCode"},
                             Env(), absl::Seconds(30));
      if (a.ok() && a->exit_code == 0 && !a->out.empty()) {
        std::vector<std::string> f =
            absl::StrSplit(a->out.substr(0, a->out.find('\n')), '|');
        end = SlurmEnd();
        end->state = f[0].substr(0, f[0].find(' '));
        if (f.size() > 1) {
          (void)absl::SimpleAtoi(f[1].substr(0, f[1].find(':')),
                                 &end->exit_code);
        }
      }
    }
    if (!end) {
      // Neither remembers it: the job is over, its end unknown.
      end = SlurmEnd();
      end->state = "UNKNOWN";
      end->exit_code = -1;
    }
    final_ = *end;
    end_ = end->state == "COMPLETED" && end->exit_code == 0 ? 0 : 1;
    return end_;
  }
  std::string DescribeEnd(int) override {
    return absl::StrFormat("Slurm job %d ended %s (exit code %d, signal %d)",
                           id_, final_.state, final_.exit_code, final_.signal);
  }
  int Terminate(absl::Duration grace) override {
    // scancel: Slurm signals the steps (SIGTERM, then SIGKILL after the
    // cluster's KillWait).
    RunAndCapture({"scancel", std::to_string(id_)}, Env(), absl::Seconds(30))
        .IgnoreError();
    const absl::Time give_up = absl::Now() + grace + absl::Seconds(10);
    while (absl::Now() < give_up && Running())
      absl::SleepFor(absl::Milliseconds(200));
    if (!Running()) return 0;
    RunAndCapture({"scancel", "--signal=KILL", "--full", std::to_string(id_)},
                  Env(), absl::Seconds(30))
        .IgnoreError();
    return 1;
  }
  bool Running() override {
    auto state = QueueState();
    return state && !SlurmStateIsFinal(*state);
  }

 private:
  // squeue's state of the job: "" when it has left the queue, nullopt when
  // squeue could not answer.
  std::optional<std::string> QueueState() {
    auto q =
        RunAndCapture({"squeue", "-h", "-j", std::to_string(id_), "-o", "%T"},
                      Env(), absl::Seconds(30));
    if (!q.ok()) return std::nullopt;
    if (q->exit_code != 0) {
      // "Invalid job id specified": it has left slurmctld's memory.
      if (q->err.find("Invalid job id") != std::string::npos) return "";
      return std::nullopt;
    }
    return q->out.substr(0, q->out.find('\n'));
  }
  const std::vector<std::string>* Env() const {
    return env_.empty() ? nullptr : &env_;
  }
  long id_;
  std::vector<std::string> env_;
  double poll_s_;
  absl::Time last_poll_ = absl::InfinitePast();
  std::optional<int> end_;
  SlurmEnd final_;
};

// kubectl with the launch's namespace, then `args`.
std::vector<std::string> KubectlArgv(const K8sLaunch& l,
                                     std::vector<std::string> args) {
  std::vector<std::string> argv = {l.kubectl};
  if (!l.spec.namespace_.empty()) {
    argv.push_back("--namespace");
    argv.push_back(l.spec.namespace_);
  }
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

// A Kubernetes attempt, seen through kubectl: over when the Job (or
// MPIJob) has a Complete/Succeeded or Failed condition, or is gone.
class K8sHandle : public LaunchHandle {
 public:
  explicit K8sHandle(K8sLaunch launch) : l_(std::move(launch)) {}
  std::optional<int> Poll() override {
    if (end_) return end_;
    if (absl::Now() - last_poll_ < absl::Seconds(l_.poll_interval_s))
      return std::nullopt;
    last_poll_ = absl::Now();
    auto state = State();
    if (!state) return std::nullopt;  // kubectl did not answer: ask later
    if (*state == "running") return std::nullopt;
    state_ = *state;
    end_ = *state == "succeeded" ? 0 : 1;
    return end_;
  }
  std::string DescribeEnd(int) override {
    return absl::StrFormat("Kubernetes %s %s: %s", Kind(), l_.spec.name,
                           state_);
  }
  int Terminate(absl::Duration grace) override {
    Delete({"--wait=false"}, /*everything=*/true);
    const absl::Time give_up = absl::Now() + grace + absl::Seconds(30);
    while (absl::Now() < give_up && Running())
      absl::SleepFor(absl::Milliseconds(500));
    if (!Running()) return 0;
    Delete({"--grace-period=0", "--force", "--wait=false"}, true);
    return 1;
  }
  void Release(bool cancelled) override {
    // A finished Job stays for its pods' logs (ttlSecondsAfterFinished
    // collects it); the token's Secret goes now.
    if (!deleted_) Delete({"--wait=false"}, /*everything=*/cancelled);
  }
  bool Running() override {
    auto state = State();
    return state && *state == "running";
  }

 private:
  std::string Kind() const { return l_.style == "mpijob" ? "mpijob" : "job"; }
  std::vector<std::string> Base(std::vector<std::string> args) const {
    return KubectlArgv(l_, std::move(args));
  }
  const std::vector<std::string>* Env() const {
    return l_.env.empty() ? nullptr : &l_.env;
  }
  // "running", "succeeded", "failed" or "gone"; nullopt when kubectl fails.
  std::optional<std::string> State() {
    auto r = RunAndCapture(
        Base({"get", Kind(), l_.spec.name, "--ignore-not-found", "-o",
              "jsonpath={range .status.conditions[*]}{.type}={.status} "
              "{end}"}),
        Env(), absl::Seconds(30));
    if (!r.ok() || r->exit_code != 0) return std::nullopt;
    const std::string& c = r->out;
    if (absl::StripAsciiWhitespace(c).empty()) {
      // Found with no conditions yet, or not found at all: tell apart.
      auto found = RunAndCapture(Base({"get", Kind(), l_.spec.name,
                                       "--ignore-not-found", "-o", "name"}),
                                 Env(), absl::Seconds(30));
      if (!found.ok() || found->exit_code != 0) return std::nullopt;
      return absl::StripAsciiWhitespace(found->out).empty() ? "gone"
                                                            : "running";
    }
    if (absl::StrContains(c, "Failed=True")) return "failed";
    if (absl::StrContains(c, "Complete=True") ||
        absl::StrContains(c, "Succeeded=True"))
      return "succeeded";
    return "running";
  }
  void Delete(std::vector<std::string> flags, bool everything) {
    std::vector<std::string> args = {"delete", "--ignore-not-found"};
    args.insert(args.end(), flags.begin(), flags.end());
    if (everything) {
      args.push_back(Kind() + "/" + l_.spec.name);
      if (l_.style != "mpijob") args.push_back("service/" + l_.spec.name);
      deleted_ = true;
    }
    args.push_back("secret/" + l_.spec.token_secret);
    RunAndCapture(Base(args), Env(), absl::Seconds(60)).IgnoreError();
  }

  K8sLaunch l_;
  bool deleted_ = false;
  absl::Time last_poll_ = absl::InfinitePast();
  std::optional<int> end_;
  std::string state_;
};

// When a rank was last heard from (heartbeat or progress); InfinitePast
// when never.
absl::Time LastHeard(const RankStatus& r) {
  return std::max(r.last_seen, r.last_progress);
}

// Whether r is a registered process on `host`, which the coordinator
// (running there) can look at.
bool LocalProcess(const RankStatus& r, const std::string& host) {
  return r.registered && r.host == host && r.pid > 0;
}

}  // namespace

double DefaultDeadlineSeconds(const std::vector<v1::Case>& cases) {
  double t = 120;
  for (const auto& c : cases) t += 3 * c.timing().max_time_s() + 5;
  return t;
}

bool RetryableFailure(const v1::Failure& failure) {
  switch (failure.reason()) {
    case v1::WORKER_EXIT:
    case v1::RANK_HUNG:
    case v1::WORKER_UNREACHABLE:
    case v1::COORDINATOR_RESTART:
      return true;
    default:
      return false;
  }
}

std::string DescribeFailure(const v1::Failure& f) {
  return absl::StrFormat(
      "%s%s%s%s", FailureReasonName(f.reason()),
      f.rank() >= 0 ? absl::StrFormat(" rank %d", f.rank()) : "",
      f.host().empty() ? "" : " on " + f.host(),
      f.detail().empty() ? "" : ": " + f.detail());
}

JobSupervisor::JobSupervisor(JobManager* manager, std::string job_id,
                             WatchLimits limits)
    : manager_(manager),
      job_id_(std::move(job_id)),
      limits_(limits),
      my_host_(HostName()),
      start_(absl::Now()),
      log_(std::make_shared<Log>()) {}

JobSupervisor::~JobSupervisor() {
  if (!reaped_) {
    Outcome ignored;
    Reap(&ignored);
  }
}

absl::StatusOr<std::unique_ptr<JobSupervisor>> JobSupervisor::LaunchMpirun(
    JobManager* manager, const std::string& job_id, MpirunLaunch launch,
    WatchLimits limits) {
  auto job = manager->GetJob(job_id);
  if (!job.ok()) return job.status();
  std::unique_ptr<JobSupervisor> sup(
      new JobSupervisor(manager, job_id, limits));
  MpirunOptions mo;
  mo.mpirun = launch.mpirun;
  mo.np = job->nranks();
  mo.hostfile = launch.hostfile;
  mo.ranks_per_node = job->plan().ranks_per_node();
  mo.allow_run_as_root = geteuid() == 0;
  mo.oversubscribe =
      job->nranks() > static_cast<int>(std::thread::hardware_concurrency());
  const std::string munge_note = AvoidStaleMunge(&launch.env);
  mo.forward_env = ForwardedEnvNames(launch.env);
  mo.extra_args = launch.mpirun_args;
  mo.worker_argv = {launch.worker, "run",  "--coordinator", launch.address,
                    "--job",       job_id, "--backend",     launch.backend};
  const std::vector<std::string> argv = BuildMpirunArgv(mo);
  auto file = std::make_shared<std::ofstream>();
  if (!launch.log_path.empty()) {
    file->open(launch.log_path);
    *file << "# " << absl::StrJoin(argv, " ") << "\n";
    if (!munge_note.empty()) *file << "# " << munge_note << "\n";
  }
  if (!munge_note.empty() && launch.echo)
    std::cerr << "ringmaster: note: " << munge_note << "\n";
  std::shared_ptr<Log> log = sup->log_;
  auto file_mu = std::make_shared<std::mutex>();
  const bool echo = launch.echo;
  auto hook = launch.line_hook;
  auto child = ChildProcess::Spawn(
      argv,
      [log, file, file_mu, echo, hook](std::string_view line, bool is_stderr) {
        if (hook && hook(line)) return;
        {
          std::lock_guard<std::mutex> lock(*file_mu);
          if (file->is_open()) {
            *file << (is_stderr ? "E " : "O ") << line << "\n";
            file->flush();
          }
        }
        if (auto f = ParseMpirunFailureLine(line)) {
          MutexLock lock(&log->mu);
          if (!log->rank_failure) log->rank_failure = f;
        }
        if (echo && !line.empty()) std::cerr << "  | " << line << "\n";
      },
      &launch.env, &launch.rlimits);
  if (!child.ok()) return child.status();
  const pid_t pid = (*child)->pid();
  sup->launcher_ = std::make_unique<MpirunHandle>(std::move(*child));
  absl::Status marked = manager->MarkLaunching(job_id, static_cast<int>(pid));
  if (!marked.ok()) return marked;
  return sup;
}

absl::StatusOr<std::unique_ptr<JobSupervisor>> JobSupervisor::LaunchSlurm(
    JobManager* manager, const std::string& job_id, SlurmLaunch launch,
    WatchLimits limits) {
  auto script = BuildSbatchScript(launch.spec);
  if (!script.ok()) return script.status();
  {
    std::ofstream out(launch.script_path);
    out << *script;
    if (!out) {
      return absl::PermissionDeniedError(launch.script_path +
                                         ": cannot write the sbatch script");
    }
  }
  auto submitted =
      RunAndCapture({"sbatch", "--parsable", launch.script_path}, &launch.env,
                    absl::Seconds(60), &launch.rlimits);
  if (!submitted.ok()) return submitted.status();
  auto slurm_id = ParseSbatchJobId(submitted->out);
  if (submitted->exit_code != 0 || !slurm_id) {
    return absl::UnavailableError(absl::StrFormat(
        "sbatch failed (exit %d): %s", submitted->exit_code,
        submitted->err.empty() ? submitted->out : submitted->err));
  }
  std::unique_ptr<JobSupervisor> sup(
      new JobSupervisor(manager, job_id, limits));
  sup->launcher_ = std::make_unique<SlurmHandle>(*slurm_id, launch.env,
                                                 launch.poll_interval_s);
  absl::Status marked = manager->MarkLaunching(job_id, 0, *slurm_id);
  if (!marked.ok()) return marked;
  return sup;
}

absl::StatusOr<std::unique_ptr<JobSupervisor>> JobSupervisor::LaunchK8s(
    JobManager* manager, const std::string& job_id, K8sLaunch launch,
    WatchLimits limits) {
  auto manifest = launch.style == "mpijob"
                      ? BuildMpiJobManifest(launch.spec)
                      : BuildIndexedJobManifest(launch.spec);
  if (!manifest.ok()) return manifest.status();
  {
    // The file holds the worker token: owner-only from its creation.
    int fd = open(launch.manifest_path.c_str(),
                  O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) {
      return absl::PermissionDeniedError(launch.manifest_path +
                                         ": cannot write the manifests");
    }
    const std::string& text = *manifest;
    bool written = write(fd, text.data(), text.size()) ==
                   static_cast<ssize_t>(text.size());
    close(fd);
    if (!written) {
      return absl::DataLossError(launch.manifest_path +
                                 ": short write of the manifests");
    }
  }
  auto applied = RunAndCapture(
      KubectlArgv(launch, {"apply", "-f", launch.manifest_path}),
      launch.env.empty() ? nullptr : &launch.env, absl::Seconds(60));
  if (!applied.ok()) return applied.status();
  if (applied->exit_code != 0) {
    return absl::UnavailableError(absl::StrFormat(
        "kubectl apply failed (exit %d): %s", applied->exit_code,
        applied->err.empty() ? applied->out : applied->err));
  }
  std::unique_ptr<JobSupervisor> sup(
      new JobSupervisor(manager, job_id, limits));
  sup->launcher_ = std::make_unique<K8sHandle>(std::move(launch));
  absl::Status marked = manager->MarkLaunching(job_id, 0);
  if (!marked.ok()) return marked;
  return sup;
}

std::unique_ptr<JobSupervisor> JobSupervisor::Follow(
    JobManager* manager, const std::string& job_id, WatchLimits limits,
    bool adopted, int orphan_sid, int64_t orphan_slurm) {
  std::unique_ptr<JobSupervisor> sup(
      new JobSupervisor(manager, job_id, limits));
  sup->adopted_ = adopted;
  sup->orphan_sid_ = orphan_sid;
  sup->orphan_slurm_ = orphan_slurm;
  if (!adopted) manager->MarkLaunching(job_id, 0).IgnoreError();
  return sup;
}

std::optional<Outcome> JobSupervisor::Poll() {
  if (launcher_ && !exit_status_) {
    exit_status_ = launcher_->Poll();
    if (exit_status_) exit_seen_ = absl::Now();
  }
  return Decide();
}

std::optional<Outcome> JobSupervisor::Decide() {
  auto snap = manager_->Snapshot(job_id_);
  if (!snap.ok()) {
    return Failed(MakeFailure(v1::WORKER_UNREACHABLE, -1, "",
                              std::string(snap.status().message())));
  }
  const absl::Time now = absl::Now();
  if (snap->cancel_requested) {
    Outcome o;
    o.state = v1::JOB_CANCELLED;
    o.failure.set_detail("cancelled on request");
    o.failure.set_rank(-1);
    return o;
  }
  // Results that cannot be stored end the job (nothing measured is kept
  // once the store refuses it).
  if (snap->store_failure) return Failed(*snap->store_failure);
  // A rank that stopped on a failure says so in its final report.
  for (const RankStatus& r : snap->ranks) {
    if (r.final && r.failure.reason() != v1::FAILURE_REASON_UNSPECIFIED)
      return Failed(r.failure);
  }
  const std::vector<RankStatus>& ranks = snap->ranks;
  bool wait = false;
  if (auto ended = DecideEnd(*snap, now, &wait); ended || wait) return ended;
  if (auto lost = WatchRanks(ranks, now)) return lost;
  // Ranks gone, silent or stalled.
  int registered = 0;
  absl::Time newest_progress = absl::InfinitePast();
  for (const RankStatus& r : ranks) {
    if (r.registered) ++registered;
    newest_progress = std::max(newest_progress, r.last_progress);
  }
  if (registered == static_cast<int>(ranks.size()) && !ranks.empty() &&
      now - newest_progress > absl::Seconds(limits_.op_timeout_s)) {
    if (auto hung = StalledRank(ranks, now, newest_progress)) return hung;
  }
  if (!adopted_ && registered < static_cast<int>(ranks.size()) &&
      now - start_ > absl::Seconds(limits_.registration_timeout_s)) {
    std::vector<int> missing;
    for (const RankStatus& r : ranks) {
      if (!r.registered) missing.push_back(r.rank);
    }
    return Failed(MakeFailure(
        v1::WORKER_UNREACHABLE, missing.empty() ? -1 : missing[0], "",
        absl::StrFormat("rank(s) %s never registered within %.0f s",
                        absl::StrJoin(missing, ", "),
                        limits_.registration_timeout_s)));
  }
  if (now - start_ > absl::Seconds(limits_.deadline_s)) {
    return Failed(
        MakeFailure(v1::DEADLINE, -1, "",
                    absl::StrFormat("job exceeded its %.0f s deadline",
                                    limits_.deadline_s)));
  }
  return std::nullopt;
}

// The end: the launcher exited (mpirun), or every rank reported its end
// (ranks started elsewhere). `*wait`: the launcher just exited before
// every rank's final report came; give late reports a moment to arrive
// before deciding.
std::optional<Outcome> JobSupervisor::DecideEnd(const JobSnapshot& snap,
                                                absl::Time now, bool* wait) {
  const std::vector<RankStatus>& ranks = snap.ranks;
  const bool rank0_final = !ranks.empty() && ranks[0].final;
  const bool all_final = std::all_of(
      ranks.begin(), ranks.end(), [](const RankStatus& r) { return r.final; });
  std::optional<Outcome> ended;
  if (launcher_ && exit_status_) {
    // Give late reports a moment to arrive, then decide; when every rank
    // has sent its final report, none can be late.
    if (!all_final && now - exit_seen_ < absl::Milliseconds(300)) {
      *wait = true;
      return std::nullopt;
    }
    if (*exit_status_ != 0 || !rank0_final) {
      MutexLock lock(&log_->mu);
      if (log_->rank_failure) {
        return Failed(MakeFailure(v1::WORKER_EXIT, log_->rank_failure->rank,
                                  log_->rank_failure->host,
                                  log_->rank_failure->detail));
      }
      return Failed(
          MakeFailure(v1::WORKER_EXIT, -1, my_host_,
                      launcher_->DescribeEnd(*exit_status_) +
                          (rank0_final ? "" : " before the workers finished")));
    }
    ended = Outcome();
  } else if (!launcher_ && all_final) {
    ended = Outcome();
  }
  if (!ended) return std::nullopt;
  if (snap.failed_result) return Failed(*snap.failed_result);
  auto stored = manager_->CountResults(job_id_, snap.job.attempt());
  if (stored.ok() && *stored < snap.cases) {
    return Failed(MakeFailure(
        v1::WORKER_EXIT, -1, "",
        absl::StrFormat("only %d of %d results arrived", *stored, snap.cases)));
  }
  return ended;
}

// Each rank still working: gone (a local process that died), silent past
// the heartbeat timeout, or not back after a coordinator restart.
std::optional<Outcome> JobSupervisor::WatchRanks(
    const std::vector<RankStatus>& ranks, absl::Time now) {
  const bool rank0_final = !ranks.empty() && ranks[0].final;
  for (const RankStatus& r : ranks) {
    if (r.final) continue;
    if (LocalProcess(r, my_host_) && !ProcessAlive(r.pid)) {
      // After rank 0's final report ranks may exit in any order; the
      // launcher's exit status still catches a rank that dies at the end.
      if (rank0_final) continue;
      return Failed(MakeFailure(v1::WORKER_EXIT, r.rank, r.host,
                                absl::StrFormat("process %d is gone", r.pid)));
    }
    if (r.gone && !rank0_final) {
      // Seen by its node leader (a rank on another host).
      return Failed(MakeFailure(v1::WORKER_EXIT, r.rank, r.host, *r.gone));
    }
    const absl::Time seen = LastHeard(r);
    if (seen != absl::InfinitePast() &&
        now - seen > absl::Seconds(limits_.heartbeat_timeout_s)) {
      if (adopted_ && !r.registered) {
        const double silent = absl::ToDoubleSeconds(now - seen);
        return Failed(MakeFailure(
            v1::COORDINATOR_RESTART, r.rank, "",
            absl::StrFormat("rank %d did not come back within %.0f s of the "
                            "coordinator's restart",
                            r.rank, silent)));
      }
      return SilentRank(ranks, r, now);
    }
  }
  return std::nullopt;
}

// The rank to name when `first` (the first in rank order) is silent past
// the heartbeat timeout. Ranks that went quiet together (silent for more
// than half the timeout) share a cause: a stopped local process among
// them is that cause; otherwise, on `first`'s node (several may share a
// host), the lowest rank, usually the node leader whose relay the others'
// heartbeats pass through.
std::optional<Outcome> JobSupervisor::SilentRank(
    const std::vector<RankStatus>& ranks, const RankStatus& first,
    absl::Time now) {
  auto silent_for = [&](const RankStatus& x) {
    const absl::Time seen = LastHeard(x);
    return seen == absl::InfinitePast() ? absl::ZeroDuration() : now - seen;
  };
  const absl::Duration together =
      absl::Seconds(limits_.heartbeat_timeout_s) / 2;
  const RankStatus* blamed = &first;
  const RankStatus* stopped = nullptr;
  for (const RankStatus& x : ranks) {
    if (x.final || silent_for(x) <= together) continue;
    if (!stopped && LocalProcess(x, my_host_) && ProcessAlive(x.pid) &&
        ProcessStopped(x.pid)) {
      stopped = &x;
    }
    if (x.node == first.node && x.rank < blamed->rank) blamed = &x;
  }
  if (stopped) blamed = stopped;
  const RankStatus& r = *blamed;
  const double silent = absl::ToDoubleSeconds(silent_for(r));
  if (LocalProcess(r, my_host_) && ProcessAlive(r.pid)) {
    return Failed(MakeFailure(
        v1::RANK_HUNG, r.rank, r.host,
        absl::StrFormat("no heartbeat for %.0f s from live process %d%s "
                        "(last case finished: %d)",
                        silent, r.pid,
                        ProcessStopped(r.pid) ? " (stopped)" : "",
                        r.progress_seq)));
  }
  return Failed(
      MakeFailure(v1::WORKER_UNREACHABLE, r.rank, r.host,
                  absl::StrFormat("no heartbeat for %.0f s", silent)));
}

// No rank moved for op_timeout: the one furthest behind holds the others
// up (it never entered the case the others wait in).
std::optional<Outcome> JobSupervisor::StalledRank(
    const std::vector<RankStatus>& ranks, absl::Time now,
    absl::Time newest_progress) {
  const RankStatus* culprit = nullptr;
  bool tie = true;
  for (const RankStatus& r : ranks) {
    if (r.final) continue;
    if (!culprit) {
      culprit = &r;
      continue;
    }
    auto key = [](const RankStatus& x) {
      return std::make_pair(x.entered_seq, x.ops);
    };
    if (key(r) != key(*culprit)) tie = false;
    if (key(r) < key(*culprit)) culprit = &r;
  }
  if (culprit) {
    // Ahead of the culprit, the others wait in a case it never entered.
    int64_t furthest = culprit->entered_seq;
    for (const RankStatus& r : ranks) {
      if (!r.final) furthest = std::max(furthest, r.entered_seq);
    }
    const std::string where =
        furthest > culprit->entered_seq
            ? absl::StrFormat(
                  "rank %d last entered case %d (after %d operations) and "
                  "never entered case %d, where the others wait",
                  culprit->rank, culprit->entered_seq, culprit->ops, furthest)
            : absl::StrFormat("rank %d is in case %d after %d operations",
                              culprit->rank, culprit->entered_seq,
                              culprit->ops);
    return Failed(MakeFailure(
        v1::RANK_HUNG, tie && ranks.size() > 1 ? -1 : culprit->rank,
        culprit->host,
        absl::StrFormat("no progress for %.1f s (op timeout %.0f s); %s%s",
                        absl::ToDoubleSeconds(now - newest_progress),
                        limits_.op_timeout_s, where,
                        tie ? "; every rank is at the same point" : "")));
  }
  return std::nullopt;
}

void JobSupervisor::Abandon() {
  reaped_ = true;
  if (launcher_) launcher_->Detach();
}

int JobSupervisor::Reap(Outcome* outcome) {
  reaped_ = true;
  int killed = 0;
  const auto ranks = manager_->Ranks(job_id_);
  if (launcher_) {
    // After a rank's death mpirun usually ends by itself within a moment
    // (and names the rank); otherwise the watchdog ends it now.
    const bool died = outcome->state == v1::JOB_FAILED &&
                      outcome->failure.reason() == v1::WORKER_EXIT;
    for (int i = 0; died && i < 50 && !exit_status_; ++i) {
      absl::SleepFor(absl::Milliseconds(20));
      exit_status_ = launcher_->Poll();
    }
    if (!exit_status_ || launcher_->Running()) {
      killed += launcher_->Terminate(absl::Seconds(limits_.grace_s));
    }
  } else if (orphan_sid_ > 0) {
    killed += TerminateSessionOf(orphan_sid_, absl::Seconds(limits_.grace_s));
  } else if (orphan_slurm_ > 0) {
    SlurmHandle orphan(static_cast<long>(orphan_slurm_), {}, 0);
    killed += orphan.Terminate(absl::Seconds(limits_.grace_s));
  }
  // Ranks on this host still alive: those that said they were done get a
  // moment to exit on their own (tearing NCCL down takes a while; a rank
  // started by Kubernetes or by hand must not end with SIGKILL after a
  // clean run), the others are killed now.
  const absl::Time finish_by = absl::Now() + absl::Seconds(10);
  for (const RankStatus& r : ranks) {
    if (!r.registered || r.host != my_host_) continue;
    const pid_t pid = r.pid;
    if (r.final && r.failure.reason() == v1::FAILURE_REASON_UNSPECIFIED) {
      while (ProcessAlive(pid) && absl::Now() < finish_by)
        absl::SleepFor(absl::Milliseconds(20));
    }
    if (ProcessAlive(pid)) {
      kill(pid, SIGKILL);
      ++killed;
    }
  }
  if (launcher_) {
    launcher_->Finish();
    launcher_->Release(outcome->state == v1::JOB_CANCELLED);
  }
  // mpirun's own account of a dead rank is the most precise one.
  MutexLock lock(&log_->mu);
  v1::Failure& f = outcome->failure;
  if (outcome->state == v1::JOB_FAILED && f.reason() == v1::WORKER_EXIT &&
      log_->rank_failure &&
      (f.rank() < 0 || f.rank() == log_->rank_failure->rank)) {
    f.set_rank(log_->rank_failure->rank);
    f.set_host(log_->rank_failure->host);
    f.set_detail(log_->rank_failure->detail);
  }
  return killed;
}

}  // namespace ringmaster
