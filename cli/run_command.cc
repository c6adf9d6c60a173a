#include "cli/run_command.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "cli/progress_display.h"
#include "coordinator/job_manager.h"
#include "coordinator/launcher.h"
#include "coordinator/plan_jobs.h"
#include "coordinator/server.h"
#include "coordinator/store.h"
#include "coordinator/supervisor.h"
#include "core/case_work.h"
#include "core/labels.h"
#include "core/memory_need.h"
#include "core/names.h"
#include "core/nccl_tuning.h"
#include "core/plan.h"
#include "core/report.h"
#include "core/report_card.h"
#include "core/sweep.h"
#include "core/topology.h"
#include "core/units.h"
#include "nlohmann/json.hpp"

extern char** environ;

namespace ringmaster {
namespace fs = std::filesystem;
namespace {

std::string SelfDir() {
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string(".") : exe.parent_path().string();
}

struct Probe {
  int gpus = 0;
  bool cuda_backend = false;
};

// Asks the worker binary what this machine has (the CLI itself links no
// CUDA).
absl::StatusOr<Probe> ProbeMachine(const std::string& worker) {
  // Asked once per run (choosing the default plan, then the launch).
  static std::map<std::string, Probe>* const seen =
      new std::map<std::string, Probe>();
  if (auto it = seen->find(worker); it != seen->end()) return it->second;
  auto probe = RunAndCapture({worker, "probe"}, nullptr, absl::Seconds(60));
  if (!probe.ok()) return probe.status();
  if (probe->exit_code != 0) {
    return absl::InternalError(
        absl::StrFormat("ringmaster-worker probe failed (exit code %d): %s",
                        probe->exit_code, probe->err));
  }
  try {
    auto j = nlohmann::json::parse(probe->out);
    Probe p;
    p.gpus = j.value("gpus", 0);
    p.cuda_backend = j.value("cuda_backend", false);
    (*seen)[worker] = p;
    return p;
  } catch (const std::exception& e) {
    return absl::InternalError(std::string("unreadable probe output: ") +
                               e.what());
  }
}

// Space set aside in the results folder while the run lasts (an allocated
// file), given back when the disk fills: the job's end can then still be
// stored as FAILED, saying why, instead of staying RUNNING.
class DiskReserve {
 public:
  static constexpr off_t kBytes = 4 << 20;
  explicit DiskReserve(const fs::path& dir)
      : path_(dir / ".ringmaster-reserve") {
    const int fd =
        open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) return;
    held_ = posix_fallocate(fd, 0, kBytes) == 0;
    close(fd);
    if (!held_) Release();
  }
  ~DiskReserve() { Release(); }
  DiskReserve(const DiskReserve&) = delete;
  DiskReserve& operator=(const DiskReserve&) = delete;
  void Release() {
    std::error_code ec;
    fs::remove(path_, ec);
    held_ = false;
  }

 private:
  fs::path path_;
  bool held_ = false;
};

// The run's own folder for Open MPI's shared-memory segments (its vader
// transport's backing directory), /dev/shm/ringmaster-run-PID: removed
// when the run ends, however it ends short of SIGKILL; a later run removes
// the folders of runs that are gone.
class ShmFolder {
 public:
  static constexpr const char* kRoot = "/dev/shm";
  static constexpr const char* kPrefix = "ringmaster-run-";

  ShmFolder() {
    std::error_code ec;
    if (!fs::is_directory(kRoot, ec)) return;
    RemoveStale();
    path_ = fs::path(kRoot) / (kPrefix + std::to_string(getpid()));
    if (mkdir(path_.c_str(), 0700) != 0 && errno != EEXIST) path_.clear();
  }
  ~ShmFolder() {
    std::error_code ec;
    if (!path_.empty()) fs::remove_all(path_, ec);
  }
  ShmFolder(const ShmFolder&) = delete;
  ShmFolder& operator=(const ShmFolder&) = delete;
  const fs::path& path() const { return path_; }

 private:
  static void RemoveStale() {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(kRoot, ec)) {
      const std::string name = e.path().filename().string();
      if (name.rfind(kPrefix, 0) != 0) continue;
      int pid = 0;
      if (!absl::SimpleAtoi(name.substr(strlen(kPrefix)), &pid) || pid <= 0)
        continue;
      if (kill(pid, 0) != 0 && errno == ESRCH) fs::remove_all(e.path(), ec);
    }
  }
  fs::path path_;
};

// Everything a job of this run shares with the others.
struct JobContext {
  const RunOptions& options;
  JobManager& manager;
  std::string address;
  std::string worker;
  int np;
  std::string worker_backend;
  std::string plan_path;
  const v1::Plan& plan;
  std::vector<std::string> command_line;
  DiskReserve* reserve;
  const ShmFolder* shm;
};

// Ctrl-C, SIGTERM and SIGHUP cancel the running job and end the run after
// it. The job's processes live in a session of their own (the launcher's
// setsid), so the terminal's SIGINT never reaches them, and a run that
// simply died left mpirun and its ranks running until their reports to the
// gone coordinator gave up (60 s; spinning in MPI meanwhile). A watcher
// thread takes the signals from the start of the run, blocked in every
// other thread (children get them back: coordinator/launcher.cc). The
// first cancels; a second SIGKILLs every process the run started, so the
// run ends within moments and still stores the job as CANCELLED; a third
// takes the signal's default action. SIGPIPE is ignored: a closed standard
// output (`run | head`) must not kill the run with its ranks either; the
// run goes on and keeps every result in its folder.
std::atomic<int> g_stop_signal{0};

void WatchSignals() {
  static std::once_flag once;
  std::call_once(once, [] {
    signal(SIGPIPE, SIG_IGN);
    sigset_t set;
    sigemptyset(&set);
    for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&set, sig);
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
    std::thread([set] {
      int sig = 0;
      if (sigwait(&set, &sig) != 0) return;
      g_stop_signal = sig;
      if (sigwait(&set, &sig) != 0) return;
      std::fprintf(stderr,
                   "ringmaster: %s again: ending every process of the run "
                   "now (once more to exit without storing the job's end)\n",
                   strsignal(sig));
      KillChildSessions();
      if (sigwait(&set, &sig) != 0) return;
      KillChildSessions();
      signal(sig, SIG_DFL);
      pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
      raise(sig);
    }).detach();
  });
}

// Once standard output is closed, says so on standard error (once).
void NoteClosedStdout(const std::string& where) {
  static bool noted = false;
  if (std::cout || noted) return;
  noted = true;
  std::cerr << "ringmaster: standard output is closed; the run goes on and "
               "keeps its results in "
            << where << "\n";
}

struct JobOutcome {
  std::vector<v1::Result> results;
  bool failed = false;
  bool internal_error = false;
};

// Sets NAME=value for the lifetime of the object, then restores the old
// value (the launcher inherits this process's environment).
class ScopedEnv {
 public:
  ScopedEnv(const std::string& name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name.c_str())) old_ = old;
    setenv(name.c_str(), value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (old_) {
      setenv(name_.c_str(), old_->c_str(), 1);
    } else {
      unsetenv(name_.c_str());
    }
  }

 private:
  std::string name_;
  std::optional<std::string> old_;
};

// One job of the run, from creation to its end: its folder and reporters,
// the launch, the watch loop (results as they arrive, progress, Ctrl-C),
// the reaping and the summary. With `tuning`, the job is an NCCL tuning
// probe: nothing is printed or written but the launcher log, and NCCL's
// choices are collected there.
class JobRun {
 public:
  JobRun(JobContext& ctx, const PlannedJob& planned, NcclChoices* tuning,
         std::mutex* tuning_mu)
      : ctx_(ctx),
        planned_(planned),
        cases_(planned.job.cases().begin(), planned.job.cases().end()),
        tuning_(tuning),
        tuning_mu_(tuning_mu) {}

  JobOutcome Run();

 private:
  bool Create();
  bool Launch();
  void Begin();
  void Drain(absl::Duration wait);
  void ShowProgress(absl::Time now);
  void Watch();
  void End();
  std::string CloseResultFiles();
  void DiscardResultFiles();
  void NoteWriteError();

  JobContext& ctx_;
  const PlannedJob& planned_;
  std::vector<v1::Case> cases_;
  NcclChoices* tuning_;
  std::mutex* tuning_mu_;
  JobOutcome outcome_;
  std::string job_id_;
  fs::path job_dir_;
  std::ofstream jsonl_file_, csv_file_;
  std::unique_ptr<ConsoleReporter> console_;
  std::unique_ptr<JsonLinesReporter> jsonl_;
  std::unique_ptr<CsvReporter> csv_;
  std::vector<Reporter*> reporters_;
  std::unique_ptr<JobSupervisor> supervisor_;
  absl::Time start_;
  absl::Time last_output_;
  std::vector<v1::Result> results_;
  bool begun_ = false;
  std::optional<ProgressDisplay> progress_;
  std::optional<Outcome> end_;
  std::string write_error_;  // the first failed result-file write
};

// The job in the store, its folder, and the reporters writing into it.
bool JobRun::Create() {
  v1::Job spec = planned_.job;
  for (const auto& a : ctx_.command_line) spec.add_command_line(a);
  bool duplicate = false;
  auto job = ctx_.manager.CreateJob(std::move(spec), &duplicate);
  if (!job.ok()) {
    Error(std::string(job.status().message()));
    outcome_.internal_error = true;
    return false;
  }
  job_id_ = job->job_id();
  std::error_code ec;
  job_dir_ = fs::path(ctx_.options.out_dir) / job_id_;
  fs::create_directories(job_dir_, ec);
  if (ec) {
    Error(job_dir_.string() + ": " + ec.message());
    outcome_.internal_error = true;
    return false;
  }
  if (!tuning_) {
    // Written as .partial, renamed at the end: a reader never sees half a
    // row under the final names.
    jsonl_file_.open(job_dir_ / "results.jsonl.partial");
    csv_file_.open(job_dir_ / "results.csv.partial");
    console_ = std::make_unique<ConsoleReporter>(std::cout);
    jsonl_ = std::make_unique<JsonLinesReporter>(jsonl_file_);
    csv_ = std::make_unique<CsvReporter>(csv_file_);
    reporters_ = {console_.get(), jsonl_.get(), csv_.get()};
  }
  const v1::Variant* variant = planned_.variant;
  std::cerr << absl::StrFormat(
      "ringmaster: job %s: %splan %s (%d cases) on %d %s rank(s)%s; "
      "coordinator %s\n",
      job_id_, tuning_ ? "NCCL tuning probe of " : "", ctx_.plan_path,
      cases_.size(), ctx_.np, ctx_.worker_backend == "cuda" ? "GPU" : "host",
      variant ? ", variant " + variant->name() : "", ctx_.address);
  return true;
}

// mpirun with the worker, under the supervisor's watch.
bool JobRun::Launch() {
  const RunOptions& options = ctx_.options;
  if (const int sig = g_stop_signal.load(); sig != 0) {
    // Stopped between creating the job and launching it.
    v1::Failure f;
    f.set_rank(-1);
    f.set_detail(
        absl::StrFormat("stopped by %s before launch", strsignal(sig)));
    ctx_.manager.Finish(job_id_, v1::JOB_CANCELLED, f);
    outcome_.failed = true;
    return false;
  }
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) env.emplace_back(*e);
  // The job's worker token travels in the environment, never in argv.
  SetEnvEntry(&env, "RINGMASTER_TOKEN", ctx_.manager.WorkerToken(job_id_));
  if (!ctx_.shm->path().empty() &&
      std::getenv("OMPI_MCA_btl_vader_backing_directory") == nullptr) {
    SetEnvEntry(&env, "OMPI_MCA_btl_vader_backing_directory",
                ctx_.shm->path().string());
  }
  MpirunLaunch launch;
  launch.mpirun = options.mpirun;
  launch.hostfile = options.hostfile;
  launch.mpirun_args = options.mpirun_args;
  if (options.oversubscribe) launch.mpirun_args.push_back("--oversubscribe");
  launch.worker = ctx_.worker;
  launch.address = ctx_.address;
  launch.backend = ctx_.worker_backend;
  launch.env = std::move(env);
  launch.log_path = (job_dir_ / "launcher.log").string();
  launch.echo = !options.quiet;
  if (tuning_) {
    launch.line_hook = [tuning = tuning_,
                        mu = tuning_mu_](std::string_view line) {
      auto choice = ParseNcclTuningLine(line);
      if (!choice) return false;
      std::lock_guard<std::mutex> lock(*mu);
      (*tuning)[{choice->function, choice->bytes}] = *choice;
      return true;  // one line per call: kept out of the log
    };
  }
  WatchLimits limits;
  limits.deadline_s = planned_.job.deadline_s();
  limits.registration_timeout_s = options.registration_timeout_s;
  limits.heartbeat_timeout_s = options.heartbeat_timeout_s;
  limits.op_timeout_s = options.op_timeout_s;
  start_ = absl::Now();
  auto launched = JobSupervisor::LaunchMpirun(&ctx_.manager, job_id_,
                                              std::move(launch), limits);
  if (!launched.ok()) {
    Error(std::string(launched.status().message()));
    // Nothing ran: no result file stays, and a full disk (the store could
    // not mark the launch) gives back the reserve so the end is stored.
    DiscardResultFiles();
    const bool disk_full =
        launched.status().code() == absl::StatusCode::kResourceExhausted;
    if (disk_full) ctx_.reserve->Release();
    v1::Failure f;
    f.set_reason(disk_full ? v1::STORE_ERROR : v1::WORKER_EXIT);
    f.set_rank(-1);
    f.set_detail(std::string(launched.status().message()));
    ctx_.manager.Finish(job_id_, v1::JOB_FAILED, f);
    outcome_.failed = true;
    return false;
  }
  supervisor_ = std::move(*launched);
  last_output_ = absl::Now();
  // A live bar on a terminal, plain progress lines otherwise; none --quiet.
  if (!options.quiet) {
    progress_.emplace(std::cerr, isatty(STDERR_FILENO) == 1,
                      EstimatedCaseSeconds(cases_), start_);
  }
  return true;
}

void JobRun::Begin() {
  if (begun_) return;
  begun_ = true;
  RunContext rctx;
  rctx.job_id = job_id_;
  rctx.plan_name =
      ctx_.plan.name() +
      (planned_.variant ? " [" + planned_.variant->name() + "]" : "");
  rctx.nranks = ctx_.np;
  rctx.backend = ctx_.worker_backend == "cuda" ? "cuda (NCCL)" : "host (MPI)";
  for (const auto& r : ctx_.manager.Ranks(job_id_))
    rctx.provenance.add_hosts(r.host);
  if (!results_.empty()) rctx.provenance = results_.front().provenance();
  for (Reporter* rep : reporters_) rep->Begin(rctx);
}

// Reports the results that arrived, waiting up to `wait` for the first.
void JobRun::Drain(absl::Duration wait) {
  bool any = false;
  while (auto ev = ctx_.manager.NextEvent(any ? absl::ZeroDuration() : wait)) {
    any = true;
    if (ev->type != JobEvent::Type::kResult || ev->job_id != job_id_) continue;
    results_.push_back(ev->result);
    if (progress_) progress_->Clear();
    Begin();
    for (Reporter* rep : reporters_) rep->Report(ev->result);
    NoteWriteError();
    std::cout.flush();
    NoteClosedStdout(ctx_.options.out_dir);
    last_output_ = absl::Now();
    if (progress_) {
      progress_->Update(static_cast<int64_t>(results_.size()),
                        ev->result.case_().spec_name(), last_output_);
    }
  }
}

// Between results the ranks' heartbeats say which case runs.
void JobRun::ShowProgress(absl::Time now) {
  int64_t slowest = INT64_MAX;
  for (const RankStatus& r : ctx_.manager.Ranks(job_id_))
    slowest = std::min(slowest, r.progress_seq);
  if (progress_) {
    const int64_t done =
        std::max<int64_t>(static_cast<int64_t>(results_.size()),
                          slowest == INT64_MAX ? 0 : slowest + 1);
    progress_->Update(done,
                      done < static_cast<int64_t>(cases_.size())
                          ? cases_[done].spec_name()
                          : "",
                      now);
    last_output_ = now;  // the bar or its lines say it is still running
  }
  if (now - last_output_ > absl::Seconds(10)) {
    std::cerr << absl::StrFormat(
        "ringmaster: still running (%d/%d cases done, %.0f s)\n", slowest + 1,
        cases_.size(), absl::ToDoubleSeconds(now - start_));
    last_output_ = now;
  }
}

// Results as they arrive until the supervisor decides the end; a signal
// cancels the job (its processes get SIGTERM, then SIGKILL).
void JobRun::Watch() {
  bool cancel_sent = false;
  while (!(end_ = supervisor_->Poll())) {
    Drain(absl::Milliseconds(100));
    if (const int sig = g_stop_signal.load(); sig != 0 && !cancel_sent) {
      cancel_sent = true;
      if (progress_) progress_->Clear();
      std::cerr << absl::StrFormat(
          "ringmaster: %s: cancelling job %s (its processes get SIGTERM, "
          "then SIGKILL); the results so far are kept. Again to exit at "
          "once.\n",
          strsignal(sig), job_id_);
      (void)ctx_.manager.RequestCancel(job_id_);
    }
    ShowProgress(absl::Now());
  }
  // Nothing of the job may outlive it.
  supervisor_->Reap(&*end_);
  Drain(absl::ZeroDuration());  // results that arrived while reaping
  if (progress_) progress_->Finish();
}

// The summary, the job's final state in the store, the closing line.
void JobRun::End() {
  std::optional<v1::Failure> failure;
  if (end_->state != v1::JOB_SUCCEEDED) failure = end_->failure;
  RunSummary summary = Summarize(results_);
  summary.succeeded = !failure.has_value();
  summary.cancelled = end_->state == v1::JOB_CANCELLED;
  if (summary.cancelled) {
    summary.failure = absl::StrFormat(
        "stopped by %s after %d of %d cases",
        g_stop_signal != 0 ? strsignal(g_stop_signal.load()) : "request",
        results_.size(), cases_.size());
  } else if (failure) {
    summary.failure = DescribeFailure(*failure);
  }
  Begin();
  for (Reporter* rep : reporters_) rep->End(summary);
  if (failure && failure->reason() == v1::STORE_ERROR) ctx_.reserve->Release();
  if (std::string lost = CloseResultFiles(); !lost.empty()) {
    ctx_.reserve->Release();
    if (!failure) {
      failure = v1::Failure();
      failure->set_reason(v1::STORE_ERROR);
      failure->set_rank(-1);
      failure->set_detail(lost);
      summary.failure = DescribeFailure(*failure);
    }
    Error(lost);
  }
  ctx_.manager.Finish(job_id_,
                      summary.cancelled ? v1::JOB_CANCELLED
                      : failure         ? v1::JOB_FAILED
                                        : v1::JOB_SUCCEEDED,
                      failure ? *failure : v1::Failure());
  // A tuning probe keeps no results: its folder holds the launcher's log.
  std::cerr << absl::StrFormat(
      "ringmaster: job %s %s in %.1f s; %s in %s\n", job_id_,
      summary.cancelled ? "CANCELLED"
      : failure         ? "FAILED"
                        : "SUCCEEDED",
      absl::ToDoubleSeconds(absl::Now() - start_),
      tuning_ ? "NCCL's tuning log" : "results", job_dir_.string());
  if (failure && !summary.cancelled)
    std::cerr << "ringmaster: failure: " << summary.failure << "\n";
  outcome_.failed = failure.has_value();
}

// "PATH: no space left on device" (or errno's text) for a failed write.
std::string WriteErrorText(const fs::path& path, int err) {
  return absl::StrFormat("%s: %s", path.string(),
                         err == ENOSPC ? "no space left on device"
                         : err != 0    ? std::strerror(err)
                                       : "write failed");
}

// The first failed write to a result file, with errno while it is fresh.
void JobRun::NoteWriteError() {
  if (tuning_ || !write_error_.empty()) return;
  for (auto [file, name] : {std::pair{&jsonl_file_, "results.jsonl.partial"},
                            std::pair{&csv_file_, "results.csv.partial"}}) {
    if (file->good()) continue;
    write_error_ = WriteErrorText(job_dir_ / name, errno);
    return;
  }
}

// Flushes the result files and gives them their final names; on a write
// error (a full disk) removes them (the store keeps every result) and says
// why, naming the path.
std::string JobRun::CloseResultFiles() {
  if (tuning_) return "";
  std::string lost = write_error_;
  for (auto [file, name] : {std::pair{&jsonl_file_, "results.jsonl"},
                            std::pair{&csv_file_, "results.csv"}}) {
    const fs::path partial = job_dir_ / (std::string(name) + ".partial");
    errno = 0;
    file->flush();
    const int err = errno;
    const bool ok = file->good();
    file->close();
    std::error_code ec;
    if (ok && !file->fail()) {
      fs::rename(partial, job_dir_ / name, ec);
      if (!ec) continue;
    }
    if (lost.empty()) {
      lost = ec ? partial.string() + ": " + ec.message()
                : WriteErrorText(partial, err);
    }
    fs::remove(partial, ec);
  }
  return lost;
}

// Closes and removes the result files of a job that never ran.
void JobRun::DiscardResultFiles() {
  if (tuning_) return;
  for (auto [file, name] : {std::pair{&jsonl_file_, "results.jsonl.partial"},
                            std::pair{&csv_file_, "results.csv.partial"}}) {
    file->close();
    std::error_code ec;
    fs::remove(job_dir_ / name, ec);
  }
}

JobOutcome JobRun::Run() {
  std::vector<std::unique_ptr<ScopedEnv>> variant_env;
  if (planned_.variant) {
    for (const auto& [k, v] : planned_.variant->env())
      variant_env.push_back(std::make_unique<ScopedEnv>(k, v));
  }
  if (!Create() || !Launch()) return std::move(outcome_);
  Watch();
  End();
  outcome_.results = std::move(results_);
  return std::move(outcome_);
}

JobOutcome RunJob(JobContext& ctx, const PlannedJob& planned,
                  NcclChoices* tuning = nullptr,
                  std::mutex* tuning_mu = nullptr) {
  JobRun run(ctx, planned, tuning, tuning_mu);
  return run.Run();
}

}  // namespace

void Error(const std::string& message) {
  std::cerr << "ringmaster: error: " << message << "\n";
}

std::string DefaultWorkerPath() { return SelfDir() + "/ringmaster-worker"; }

std::string FindShippedPlan(const std::string& name) {
  std::vector<fs::path> candidates;
  if (const char* dir = std::getenv("RINGMASTER_PLANS_DIR"))
    candidates.emplace_back(dir);
  candidates.emplace_back("plans");
  fs::path self = SelfDir();
  candidates.push_back(self / ".." / ".." / "plans");  // build/bin
  candidates.push_back(self / ".." / "share" / "ringmaster" /
                       "plans");  // installed
  for (const auto& dir : candidates) {
    fs::path p = dir / (name + ".yaml");
    std::error_code ec;
    if (fs::is_regular_file(p, ec)) return fs::weakly_canonical(p, ec).string();
  }
  return "";
}

std::string FindDefaultPlan() {
  const std::string found = FindShippedPlan("quickstart");
  return found.empty() ? "plans/quickstart.yaml" : found;
}

namespace {

// The benchmark kinds `worker` runs beyond the built-in ones (its `kinds`
// subcommand); empty when it cannot say.
std::vector<std::string> WorkerPluginKinds(const std::string& worker) {
  std::vector<std::string> kinds;
  auto listed = RunAndCapture({worker, "kinds"}, nullptr, absl::Seconds(60));
  if (!listed.ok() || listed->exit_code != 0) return kinds;
  for (absl::string_view line : absl::StrSplit(listed->out, '\n')) {
    line = absl::StripAsciiWhitespace(line);
    if (!line.empty() &&
        !ParseBench(std::string_view(line.data(), line.size())))
      kinds.emplace_back(line);
  }
  return kinds;
}

// Loads and expands a plan (with `worker`'s plug-in kinds); on error prints
// the one-line message.
bool LoadAndExpand(const std::string& plan_path, const std::string& worker,
                   v1::Plan* plan, std::vector<v1::Case>* cases) {
  PlanLimits limits;
  limits.plugin_kinds = WorkerPluginKinds(worker);
  auto loaded = LoadPlanFile(plan_path, limits);
  if (!loaded.ok()) {
    Error(std::string(loaded.status().message()));
    return false;
  }
  auto expanded = ExpandPlan(*loaded);
  if (!expanded.ok()) {
    Error(std::string(expanded.status().message()));
    return false;
  }
  *plan = std::move(*loaded);
  *cases = std::move(*expanded);
  return true;
}

// The launch: which worker and back end, how many ranks, and the base job
// (InvalidArgument-style problems print and return the exit code).
struct Launch {
  std::string worker;
  std::string backend;  // host or cuda
  int np = 0;
  v1::Job job;
};

// Cores this process may run on.
int UsableCores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) return CPU_COUNT(&set);
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

// The user asked for more ranks than cores by name: the flag, or Open MPI's
// own setting in the environment.
bool Oversubscribing(const RunOptions& options) {
  if (options.oversubscribe) return true;
  const char* env = std::getenv("OMPI_MCA_rmaps_base_oversubscribe");
  if (env == nullptr) return false;
  const std::string v = absl::AsciiStrToLower(env);
  return v == "1" || v == "true" || v == "yes";
}

int PrepareLaunch(const RunOptions& options, const v1::Plan& plan,
                  Launch* launch) {
  launch->worker =
      options.worker.empty() ? DefaultWorkerPath() : options.worker;
  if (access(launch->worker.c_str(), X_OK) != 0) {
    Error(launch->worker + ": the worker binary is missing or not executable");
    return kExitInternal;
  }
  Probe probe;
  if (options.backend != "host") {
    auto p = ProbeMachine(launch->worker);
    if (!p.ok()) {
      Error(std::string(p.status().message()));
      return kExitInternal;
    }
    probe = *p;
  }
  const bool use_gpus = options.backend == "cuda" ||
                        (options.backend == "auto" && probe.gpus > 0);
  if (options.backend == "cuda" && probe.gpus == 0) {
    Error(
        "--backend cuda: no GPU is visible here (use --backend host or auto)");
    return kExitUsage;
  }
  launch->backend = options.backend == "auto" ? (use_gpus ? "cuda" : "host")
                                              : options.backend;
  JobRequest request;
  request.ranks = options.np;
  request.fallback_ranks = use_gpus ? probe.gpus : 2;
  request.backend = launch->backend;
  request.timeout_s = options.timeout_s;
  auto job = JobFromPlan(plan, request);
  if (!job.ok()) {
    Error(std::string(job.status().message()));
    return kExitUsage;
  }
  launch->job = std::move(*job);
  launch->np = launch->job.nranks();
  if (!use_gpus && options.hostfile.empty() && !Oversubscribing(options) &&
      launch->np > UsableCores()) {
    Error(absl::StrFormat(
        "--np %d: this machine has %d core(s) for host ranks; more ranks "
        "than cores measure sharing (ask for it with --oversubscribe)",
        launch->np, UsableCores()));
    return kExitUsage;
  }
  if (use_gpus && options.hostfile.empty()) {
    auto shared = RanksShareGpus(plan, launch->np, probe.gpus);
    if (!shared.ok()) {
      Error(std::string(shared.status().message()));
      return kExitUsage;
    }
    if (*shared) {
      std::fprintf(stderr,
                   "ringmaster: %d ranks share %d GPU(s) (training over the "
                   "copy engines only): its numbers check the arithmetic; "
                   "its times are not measurements\n",
                   launch->np, probe.gpus);
    }
  }
  return kExitOk;
}

}  // namespace

namespace {

// What the plan's cases need in memory per rank, against the GPU of
// `topology` (when given) and this machine's host memory for host ranks.
void StateMemoryNeeds(const v1::Plan& plan, const std::vector<v1::Case>& cases,
                      const v1::Topology* topology) {
  const int nranks = plan.ranks() > 0 ? plan.ranks() : 2;
  int64_t largest = 0;
  std::string largest_label;
  std::vector<int64_t> needs;
  for (const auto& c : cases) {
    const int64_t need =
        CaseMemoryBytes(c, c.nranks() > 0 ? c.nranks() : nranks);
    needs.push_back(need);
    if (need > largest) {
      largest = need;
      largest_label =
          absl::StrFormat("%s %s", c.spec_name(), FormatBytes(c.size_bytes()));
      if (c.bench() == v1::BENCH_GEMM || c.bench() == v1::BENCH_TRAIN ||
          c.bench() == v1::BENCH_TRANSFORMER ||
          c.bench() == v1::BENCH_INFERENCE)
        largest_label = c.spec_name() + ": " + BenchLabel(c);
    }
  }
  if (largest == 0) return;
  auto count_over = [&](int64_t available) {
    int n = 0;
    for (int64_t need : needs) n += need > available;
    return n;
  };
  std::cout << absl::StrFormat(
      "memory: the largest case needs %s per rank for its buffers (%s)\n",
      FormatBytes(largest), largest_label);
  const int64_t host = HostMemoryPerRank(nranks);
  if (host > 0) {
    std::cout << absl::StrFormat(
        "  host ranks here: %s available to each of %d: %s\n",
        FormatBytes(host), nranks,
        count_over(host) == 0
            ? std::string("every case fits")
            : absl::StrFormat("%d case(s) do not fit and would be SKIPPED",
                              count_over(host)));
  }
  if (topology == nullptr || topology->node().gpu().hbm_gib() <= 0) {
    std::cout << "  GPU ranks: cannot say without --topology (a GPU's "
                 "memory); each rank checks before allocating\n";
    return;
  }
  const auto gpu = static_cast<int64_t>(topology->node().gpu().hbm_gib() *
                                        (int64_t{1} << 30));
  std::cout << absl::StrFormat(
      "  GPU ranks on %s (%s each): %s\n",
      topology->node().gpu().model().empty() ? topology->id()
                                             : topology->node().gpu().model(),
      FormatBytes(gpu),
      count_over(gpu) == 0
          ? std::string("every case fits")
          : absl::StrFormat("%d case(s) do not fit and would be SKIPPED",
                            count_over(gpu)));
}

}  // namespace

// The expansion, one line per case spec: how many cases, of what, over
// which sizes and rank counts.
void PrintExpansion(const v1::Plan& plan, const std::vector<v1::Case>& cases) {
  struct Spec {
    int cases = 0;
    std::string what;
    int64_t min_size = 0, max_size = 0;
    std::set<int> ranks;
  };
  std::map<std::string, Spec> specs;
  for (const v1::Case& c : cases) {
    Spec& s = specs[c.spec_name()];
    if (s.cases++ == 0) s.what = std::string(BenchName(c.bench()));
    if (c.size_bytes() > 0) {
      s.min_size = s.min_size == 0 ? c.size_bytes()
                                   : std::min(s.min_size, c.size_bytes());
      s.max_size = std::max(s.max_size, c.size_bytes());
    }
    if (c.nranks() > 0) s.ranks.insert(c.nranks());
  }
  std::cout << absl::StrFormat("# %-24s %-12s %7s  %s\n", "case spec", "bench",
                               "cases", "sizes, rungs");
  for (const v1::CaseSpec& spec : plan.cases()) {
    auto it = specs.find(spec.name());
    if (it == specs.end()) continue;
    const Spec& s = it->second;
    std::string detail;
    if (s.max_size > 0) {
      detail = s.min_size == s.max_size
                   ? FormatBytes(s.max_size)
                   : FormatBytes(s.min_size) + " to " + FormatBytes(s.max_size);
    }
    if (!s.ranks.empty()) {
      absl::StrAppend(&detail, detail.empty() ? "" : "; ", "ranks ",
                      absl::StrJoin(s.ranks, ", "));
    }
    std::cout << absl::StrFormat("  %-24s %-12s %7d  %s\n",
                                 Printable(spec.name()), s.what, s.cases,
                                 detail);
  }
}

int ValidateCommand(const std::string& plan_path, const std::string& worker,
                    const std::string& topology_path, int np) {
  v1::Plan plan;
  std::vector<v1::Case> cases;
  if (!LoadAndExpand(plan_path, worker.empty() ? DefaultWorkerPath() : worker,
                     &plan, &cases)) {
    return kExitUsage;
  }
  std::optional<v1::Topology> topology;
  if (!topology_path.empty()) {
    auto t = LoadTopology(topology_path);
    if (!t.ok()) {
      Error(std::string(t.status().message()));
      return kExitUsage;
    }
    topology = std::move(*t);
  }
  // Counted as a launch of `ranks` ranks runs them: node benchmarks over
  // rank pairs or ranks expand per pair or rank, as the job does.
  const int ranks = np > 0 ? np : (plan.ranks() > 0 ? plan.ranks() : 2);
  auto launched = ExpandPlan(plan, 100000, ranks);
  if (!launched.ok()) {
    Error(plan_path + ": " + std::string(launched.status().message()));
    return kExitUsage;
  }
  std::cout << absl::StrFormat(
      "%s: ok: plan \"%s\", %d case specs, %d cases on %d ranks\n", plan_path,
      plan.name(), plan.cases_size(), launched->size(), ranks);
  PrintExpansion(plan, *launched);
  StateMemoryNeeds(plan, cases, topology ? &*topology : nullptr);
  return kExitOk;
}

namespace {

// NCCL's algorithm choices from tuning probes, per variant (a variant's
// environment changes what NCCL picks), keyed by what NCCL logs. Each
// variant is probed once, before its first job; later rounds reuse it.
struct Tuning {
  std::map<std::string, NcclChoices> choices;
  std::mutex mu;

  // Labels a collective's result with the probed choice, if any.
  void Annotate(v1::Result* r, int np) {
    auto key = NcclTuningKey(r->case_(), r->nranks() > 0 ? r->nranks() : np);
    if (!key) return;
    std::lock_guard<std::mutex> lock(mu);
    auto variant = choices.find(r->case_().variant());
    if (variant == choices.end()) return;
    auto it = variant->second.find(*key);
    if (it == variant->second.end()) return;
    r->set_nccl_algorithm(it->second.algorithm);
    r->set_nccl_protocol(it->second.protocol);
    r->set_nccl_channels(it->second.channels);
  }

  // One operation per case with NCCL's tuning log on, unless the variant
  // was probed already; the measured jobs run without it. True on an
  // internal error.
  bool Probe(JobContext& ctx, const PlannedJob& planned) {
    const std::string name = planned.variant ? planned.variant->name() : "";
    NcclChoices* mine;
    {
      std::lock_guard<std::mutex> lock(mu);
      if (choices.count(name) > 0) return false;
      mine = &choices[name];  // std::map: the pointer stays
    }
    PlannedJob probe = planned;
    std::vector<v1::Case> cases = TuningProbeCases(
        {planned.job.cases().begin(), planned.job.cases().end()});
    probe.job.clear_cases();
    for (auto& c : cases) *probe.job.add_cases() = std::move(c);
    JobOutcome p;
    {
      ScopedEnv debug("NCCL_DEBUG", "INFO");
      ScopedEnv subsys("NCCL_DEBUG_SUBSYS", "TUNING");
      p = RunJob(ctx, probe, mine, &mu);
    }
    std::lock_guard<std::mutex> lock(mu);
    std::cerr << absl::StrFormat(
        "ringmaster: NCCL tuning probe%s: %d choices recorded\n",
        planned.variant ? " of variant " + name : "", mine->size());
    return p.internal_error;
  }
};

// After several rounds: how to judge them.
void SayHowToCompare(const RunOptions& options, const v1::Plan& plan,
                     size_t jobs) {
  const std::string& out = options.out_dir;
  if (plan.variants_size() == 2) {
    const std::string& a = plan.variants(0).name();
    const std::string& b = plan.variants(1).name();
    std::cerr << absl::StrFormat(
        "ringmaster: %d rounds in %s; judge %s against %s with: ringmaster "
        "compare %s %s --base-variant %s --new-variant %s\n",
        options.rounds, out, b, a, out, out, a, b);
    return;
  }
  std::cerr << absl::StrFormat(
      "ringmaster: %d rounds in %s (%d jobs): a baseline for ringmaster "
      "compare %s NEW\n",
      options.rounds, out, jobs, out);
}

// The plan to run: the one named (a path, or the name of a shipped plan
// such as `quickstart`), else by what the machine has: with exactly one
// GPU (and no --np above 1) the server card, otherwise the all-reduce
// quickstart. Says which and why on stderr.
std::string ChoosePlan(const RunOptions& options, const std::string& worker) {
  if (!options.plan_path.empty()) {
    std::error_code ec;
    const std::string& p = options.plan_path;
    if (!fs::exists(p, ec) && p.find('/') == std::string::npos &&
        !absl::EndsWith(p, ".yaml") && !absl::EndsWith(p, ".yml")) {
      const std::string shipped = FindShippedPlan(p);
      if (!shipped.empty()) return shipped;
    }
    return p;
  }
  int gpus = 0;
  if (options.backend != "host") {
    if (auto probe = ProbeMachine(worker); probe.ok()) gpus = probe->gpus;
  }
  if (gpus == 1 && options.np <= 1) {
    const std::string card = FindShippedPlan("server-card");
    if (!card.empty()) {
      std::cerr
          << "ringmaster: plan server-card: one GPU here, so the "
             "default is a card of what this server delivers (`ringmaster "
             "run quickstart` runs the all-reduce sweep)\n";
      return card;
    }
  }
  std::cerr << absl::StrFormat(
      "ringmaster: plan quickstart: %s, so the default is the all-reduce "
      "sweep%s\n",
      gpus > 1 ? absl::StrFormat("%d GPUs here", gpus)
               : (gpus == 1 ? "more ranks than GPUs asked for"
                            : "no GPU here (host ranks)"),
      gpus == 1 || gpus == 0
          ? ""
          : " (`ringmaster run server-card` runs the one-GPU "
            "server card on GPU 0)");
  return FindDefaultPlan();
}

}  // namespace

int RunCommand(const RunOptions& options,
               const std::vector<std::string>& command_line) {
  // Before any child or thread: a signal from here on cancels.
  WatchSignals();
  // 1. Validate everything before writing anything.
  const std::string worker =
      options.worker.empty() ? DefaultWorkerPath() : options.worker;
  const std::string plan_path = ChoosePlan(options, worker);
  v1::Plan plan;
  std::vector<v1::Case> cases;
  if (!LoadAndExpand(plan_path, worker, &plan, &cases)) return kExitUsage;
  Launch launch;
  if (int code = PrepareLaunch(options, plan, &launch); code != kExitOk)
    return code;
  const std::string same_variants =
      DropVariantsWithoutEffect(launch.backend, &launch.job);
  if (!same_variants.empty())
    std::cerr << "ringmaster: warning: " << same_variants << "\n";

  if (const int sig = g_stop_signal.load(); sig != 0) {
    std::cerr << absl::StrFormat("ringmaster: stopped by %s before any job\n",
                                 strsignal(sig));
    return 128 + sig;
  }
  // 2. Durable store and the embedded coordinator.
  std::error_code ec;
  fs::create_directories(options.out_dir, ec);
  if (ec) {
    Error(options.out_dir + ": cannot create results folder: " + ec.message());
    return kExitUsage;
  }
  if (access(options.out_dir.c_str(), W_OK | X_OK) != 0) {
    Error(options.out_dir +
          ": results folder is not writable: " + std::strerror(errno));
    return kExitUsage;
  }
  DiskReserve reserve(options.out_dir);
  const ShmFolder shm;
  auto store =
      Store::Open((fs::path(options.out_dir) / "ringmaster.db").string());
  if (!store.ok()) {
    Error(std::string(store.status().message()));
    return kExitInternal;
  }
  Tuning tuning;
  const bool tuning_probe = options.nccl_algorithms && launch.backend == "cuda";
  if (options.nccl_algorithms && !tuning_probe) {
    std::cerr
        << "ringmaster: --nccl-algorithms needs the cuda backend; ignored\n";
  }
  JobManager::Options manager_options;
  if (tuning_probe) {
    manager_options.annotate = [&tuning, np = launch.np](v1::Result* r) {
      tuning.Annotate(r, np);
    };
  }
  JobManager manager(store->get(), manager_options);
  const std::string token = NewToken();
  auto server = CoordinatorServer::Start(&manager, "127.0.0.1:0", token);
  if (!server.ok()) {
    Error(std::string(server.status().message()));
    return kExitInternal;
  }
  JobContext ctx{
      options,   manager,   absl::StrFormat("127.0.0.1:%d", (*server)->port()),
      worker,    launch.np, launch.backend,
      plan_path, plan,      command_line,
      &reserve,  &shm};

  // 3. One job per interconnect variant (or one job when the plan has
  // none), in each of the rounds.
  const int rounds = std::max(options.rounds, 1);
  const std::vector<PlannedJob> jobs = JobsOfRounds(launch.job, rounds);
  const bool several_variants = plan.variants_size() > 1;
  std::vector<v1::Result> all;
  bool failed = false, internal = false;
  for (const PlannedJob& planned : jobs) {
    if (g_stop_signal != 0) break;
    if (rounds > 1) {
      std::cerr << absl::StrFormat(
          "ringmaster: round %d of %d%s\n", planned.round + 1, rounds,
          planned.variant ? ", variant " + planned.variant->name() : "");
    }
    if (tuning_probe) internal = tuning.Probe(ctx, planned) || internal;
    JobOutcome outcome = RunJob(ctx, planned);
    failed = failed || outcome.failed;
    internal = internal || outcome.internal_error;
    all.insert(all.end(), outcome.results.begin(), outcome.results.end());
  }
  (*server)->Shutdown();
  std::cout << RenderSummaries(all, several_variants);
  if (plan.card() == "server") {
    const std::string card = RenderServerCard(all);
    std::cout << (card.empty() ? "\n# server card: nothing was measured on a "
                                 "GPU (no GPU in this launch)\n"
                               : "\n" + card);
  }
  if (!same_variants.empty()) std::cout << "# note: " << same_variants << "\n";
  if (rounds > 1) SayHowToCompare(options, plan, jobs.size());
  if (const int sig = g_stop_signal.load(); sig != 0) {
    std::cerr << absl::StrFormat("ringmaster: stopped by %s\n", strsignal(sig));
    return 128 + sig;
  }
  if (internal) return kExitInternal;
  return failed ? kExitJobFailed : kExitOk;
}

}  // namespace ringmaster
