#include "cli/run_command.h"

#include <signal.h>
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
#include <thread>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "cli/progress_display.h"
#include "coordinator/job_manager.h"
#include "coordinator/launcher.h"
#include "coordinator/server.h"
#include "coordinator/store.h"
#include "coordinator/supervisor.h"
#include "core/names.h"
#include "core/nccl_tuning.h"
#include "core/plan.h"
#include "core/report.h"
#include "core/sweep.h"
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
    return p;
  } catch (const std::exception& e) {
    return absl::InternalError(std::string("unreadable probe output: ") +
                               e.what());
  }
}

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
};

// Ctrl-C, SIGTERM and SIGHUP cancel the running job and end the run after
// it. The job's processes live in a session of their own (the launcher's
// setsid), so the terminal's SIGINT never reaches them, and a run that
// simply died left mpirun and its ranks running until their reports to the
// gone coordinator gave up (60 s; spinning in MPI meanwhile). A watcher
// thread takes the signals, blocked in every other thread (children get
// them back: coordinator/launcher.cc); a second signal ends the run at
// once. SIGPIPE is ignored: a closed standard output (`run | head`) must
// not kill the run with its ranks either; the run goes on and keeps every
// result in its folder.
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
      // The second one: its default action, now.
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

// Launches one job (the plan's cases under one variant) and follows it to
// its end.
// With `tuning`, the job is an NCCL tuning probe: nothing is printed or
// written but the launcher log, and NCCL's choices are collected there.
JobOutcome RunJob(JobContext& ctx, std::vector<v1::Case> cases,
                  const v1::Variant* variant, NcclChoices* tuning = nullptr,
                  std::mutex* tuning_mu = nullptr) {
  JobOutcome result_of_job;
  const RunOptions& options = ctx.options;
  JobManager& manager = ctx.manager;
  const int np = ctx.np;
  const std::string& worker = ctx.worker;
  const std::string& worker_backend = ctx.worker_backend;
  const std::string& address = ctx.address;
  const v1::Plan* plan = &ctx.plan;
  std::vector<std::unique_ptr<ScopedEnv>> variant_env;
  if (variant) {
    for (const auto& [k, v] : variant->env())
      variant_env.push_back(std::make_unique<ScopedEnv>(k, v));
  }
  auto job = manager.CreateJob(*plan, cases, np, ctx.command_line);
  if (!job.ok()) {
    Error(std::string(job.status().message()));
    result_of_job.internal_error = true;
    return result_of_job;
  }
  const std::string job_id = job->job_id();
  std::error_code ec;
  fs::path job_dir = fs::path(options.out_dir) / job_id;
  fs::create_directories(job_dir, ec);
  if (ec) {
    Error(job_dir.string() + ": " + ec.message());
    result_of_job.internal_error = true;
    return result_of_job;
  }

  std::ofstream jsonl_file, csv_file;
  if (!tuning) {
    jsonl_file.open(job_dir / "results.jsonl");
    csv_file.open(job_dir / "results.csv");
  }
  ConsoleReporter console(std::cout);
  JsonLinesReporter jsonl(jsonl_file);
  CsvReporter csv(csv_file);
  std::vector<Reporter*> reporters;
  if (!tuning) reporters = {&console, &jsonl, &csv};

  std::cerr << absl::StrFormat(
      "ringmaster: job %s: %splan %s (%d cases) on %d %s rank(s)%s; "
      "coordinator %s\n",
      job_id, tuning ? "NCCL tuning probe of " : "", ctx.plan_path,
      cases.size(), np, worker_backend == "cuda" ? "GPU" : "host",
      variant ? ", variant " + variant->name() : "", address);

  // 3. Launch.
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) env.emplace_back(*e);
  // The job's worker token travels in the environment, never in argv.
  SetEnvEntry(&env, "RINGMASTER_TOKEN", manager.WorkerToken(job_id));
  MpirunLaunch launch;
  launch.mpirun = options.mpirun;
  launch.hostfile = options.hostfile;
  launch.mpirun_args = options.mpirun_args;
  launch.worker = worker;
  launch.address = address;
  launch.backend = worker_backend;
  launch.env = std::move(env);
  launch.log_path = (job_dir / "launcher.log").string();
  launch.echo = !options.quiet;
  if (tuning) {
    launch.line_hook = [tuning, tuning_mu](std::string_view line) {
      auto choice = ParseNcclTuningLine(line);
      if (!choice) return false;
      std::lock_guard<std::mutex> lock(*tuning_mu);
      (*tuning)[{choice->function, choice->bytes}] = *choice;
      return true;  // one line per call: kept out of the log
    };
  }
  WatchLimits limits;
  limits.deadline_s =
      options.timeout_s > 0 ? options.timeout_s : DefaultDeadlineSeconds(cases);
  limits.registration_timeout_s = options.registration_timeout_s;
  limits.heartbeat_timeout_s = options.heartbeat_timeout_s;
  limits.op_timeout_s = options.op_timeout_s;
  const absl::Time start = absl::Now();
  auto launched =
      JobSupervisor::LaunchMpirun(&manager, job_id, std::move(launch), limits);
  if (!launched.ok()) {
    Error(std::string(launched.status().message()));
    v1::Failure f;
    f.set_reason(v1::WORKER_EXIT);
    f.set_rank(-1);
    f.set_detail(std::string(launched.status().message()));
    manager.Finish(job_id, v1::JOB_FAILED, f);
    result_of_job.failed = true;
    return result_of_job;
  }
  JobSupervisor& supervisor = **launched;

  // 4. Watch: results as they arrive; the supervisor decides the end.
  std::vector<v1::Result> results;
  bool begun = false;
  absl::Time last_output = absl::Now();
  // A live bar on a terminal, plain progress lines otherwise; none --quiet.
  std::optional<ProgressDisplay> progress;
  if (!options.quiet) {
    progress.emplace(std::cerr, isatty(STDERR_FILENO) == 1,
                     static_cast<int64_t>(cases.size()), start);
  }

  auto begin = [&] {
    if (begun) return;
    begun = true;
    RunContext rctx;
    rctx.job_id = job_id;
    rctx.plan_name =
        plan->name() + (variant ? " [" + variant->name() + "]" : "");
    rctx.nranks = np;
    rctx.backend = worker_backend == "cuda" ? "cuda (NCCL)" : "host (MPI)";
    for (const auto& r : manager.Ranks(job_id))
      rctx.provenance.add_hosts(r.fingerprint.host());
    if (!results.empty()) rctx.provenance = results.front().provenance();
    for (Reporter* rep : reporters) rep->Begin(rctx);
  };
  auto drain = [&](absl::Duration wait) {
    bool any = false;
    while (auto ev = manager.NextEvent(any ? absl::ZeroDuration() : wait)) {
      any = true;
      if (ev->type != JobEvent::Type::kResult || ev->job_id != job_id) continue;
      results.push_back(ev->result);
      if (progress) progress->Clear();
      begin();
      for (Reporter* rep : reporters) rep->Report(ev->result);
      std::cout.flush();
      NoteClosedStdout(options.out_dir);
      last_output = absl::Now();
      if (progress) {
        progress->Update(static_cast<int64_t>(results.size()),
                         ev->result.case_().spec_name(), last_output);
      }
    }
  };

  std::optional<Outcome> outcome;
  bool cancel_sent = false;
  while (!(outcome = supervisor.Poll())) {
    drain(absl::Milliseconds(100));
    if (const int sig = g_stop_signal.load(); sig != 0 && !cancel_sent) {
      cancel_sent = true;
      if (progress) progress->Clear();
      std::cerr << absl::StrFormat(
          "ringmaster: %s: cancelling job %s (its processes get SIGTERM, "
          "then SIGKILL); the results so far are kept. Again to exit at "
          "once.\n",
          strsignal(sig), job_id);
      (void)manager.RequestCancel(job_id);
    }
    absl::Time now = absl::Now();
    if (progress) {
      // Between results: the ranks' heartbeats say which case runs.
      int64_t slowest = INT64_MAX;
      for (const RankStatus& r : manager.Ranks(job_id))
        slowest = std::min(slowest, r.progress_seq);
      const int64_t done =
          std::max<int64_t>(static_cast<int64_t>(results.size()),
                            slowest == INT64_MAX ? 0 : slowest + 1);
      progress->Update(done,
                       done < static_cast<int64_t>(cases.size())
                           ? cases[done].spec_name()
                           : "",
                       now);
      last_output = now;  // the bar or its lines say it is still running
    }
    if (now - last_output > absl::Seconds(10)) {
      int64_t slowest = INT64_MAX;
      for (const RankStatus& r : manager.Ranks(job_id))
        slowest = std::min(slowest, r.progress_seq);
      std::cerr << absl::StrFormat(
          "ringmaster: still running (%d/%d cases done, %.0f s)\n", slowest + 1,
          cases.size(), absl::ToDoubleSeconds(now - start));
      last_output = now;
    }
  }

  // 5. Reap: nothing of the job may outlive it.
  supervisor.Reap(&*outcome);
  drain(absl::ZeroDuration());  // results that arrived while reaping
  if (progress) progress->Finish();
  std::optional<v1::Failure> failure;
  if (outcome->state != v1::JOB_SUCCEEDED) failure = outcome->failure;

  RunSummary summary = Summarize(results);
  summary.succeeded = !failure.has_value();
  summary.cancelled = outcome->state == v1::JOB_CANCELLED;
  if (summary.cancelled) {
    summary.failure = absl::StrFormat(
        "stopped by %s after %d of %d cases",
        g_stop_signal != 0 ? strsignal(g_stop_signal.load()) : "request",
        results.size(), cases.size());
  } else if (failure) {
    summary.failure = DescribeFailure(*failure);
  }
  begin();
  for (Reporter* rep : reporters) rep->End(summary);
  manager.Finish(job_id, failure ? v1::JOB_FAILED : v1::JOB_SUCCEEDED,
                 failure ? *failure : v1::Failure());
  // A tuning probe keeps no results: its folder holds the launcher's log.
  std::cerr << absl::StrFormat(
      "ringmaster: job %s %s in %.1f s; %s in %s\n", job_id,
      summary.cancelled ? "CANCELLED"
      : failure         ? "FAILED"
                        : "SUCCEEDED",
      absl::ToDoubleSeconds(absl::Now() - start),
      tuning ? "NCCL's tuning log" : "results", job_dir.string());
  if (failure && !summary.cancelled)
    std::cerr << "ringmaster: failure: " << summary.failure << "\n";
  result_of_job.results = std::move(results);
  result_of_job.failed = failure.has_value();
  return result_of_job;
}

}  // namespace

void Error(const std::string& message) {
  std::cerr << "ringmaster: error: " << message << "\n";
}

std::string DefaultWorkerPath() { return SelfDir() + "/ringmaster-worker"; }

std::string FindDefaultPlan() {
  std::vector<fs::path> candidates;
  if (const char* dir = std::getenv("RINGMASTER_PLANS_DIR"))
    candidates.emplace_back(dir);
  candidates.emplace_back("plans");
  fs::path self = SelfDir();
  candidates.push_back(self / ".." / ".." / "plans");  // build/bin
  candidates.push_back(self / ".." / "share" / "ringmaster" /
                       "plans");  // installed
  for (const auto& dir : candidates) {
    fs::path p = dir / "quickstart.yaml";
    std::error_code ec;
    if (fs::is_regular_file(p, ec)) return fs::weakly_canonical(p, ec).string();
  }
  return "plans/quickstart.yaml";
}

namespace {

// Loads and expands a plan; on error prints the one-line message.
bool LoadAndExpand(const std::string& plan_path, v1::Plan* plan,
                   std::vector<v1::Case>* cases) {
  auto loaded = LoadPlanFile(plan_path);
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

}  // namespace

int ValidateCommand(const std::string& plan_path) {
  v1::Plan plan;
  std::vector<v1::Case> cases;
  if (!LoadAndExpand(plan_path, &plan, &cases)) return kExitUsage;
  // Node benchmarks over rank pairs or ranks expand once the launch size is
  // known; here each stands for all of them.
  int per_rank = 0;
  for (const auto& c : cases) {
    per_rank += c.bench() != v1::BENCH_COLLECTIVE &&
                c.bench() != v1::BENCH_TRAIN && c.src_rank() < 0 &&
                c.dst_rank() < 0 && c.pattern() != v1::ALL_RANKS;
  }
  std::cout << absl::StrFormat(
      "%s: ok: plan \"%s\", %d case specs, %d cases%s\n", plan_path,
      plan.name(), plan.cases_size(), cases.size(),
      per_rank > 0 ? absl::StrFormat(" (%d of them expand per rank or "
                                     "rank pair at launch)",
                                     per_rank)
                   : "");
  return kExitOk;
}

int RunCommand(const RunOptions& options,
               const std::vector<std::string>& command_line) {
  // 1. Validate everything before writing anything.
  std::string plan_path =
      options.plan_path.empty() ? FindDefaultPlan() : options.plan_path;
  v1::Plan plan;
  std::vector<v1::Case> cases;
  if (!LoadAndExpand(plan_path, &plan, &cases)) return kExitUsage;
  std::string worker = SelfDir() + "/ringmaster-worker";
  if (access(worker.c_str(), X_OK) != 0) {
    Error(worker + ": the worker binary is missing or not executable");
    return kExitInternal;
  }
  Probe probe;
  if (options.backend != "host") {
    auto p = ProbeMachine(worker);
    if (!p.ok()) {
      Error(std::string(p.status().message()));
      return kExitInternal;
    }
    probe = *p;
  }
  bool use_gpus = options.backend == "cuda" ||
                  (options.backend == "auto" && probe.gpus > 0);
  if (options.backend == "cuda" && probe.gpus == 0) {
    Error(
        "--backend cuda: no GPU is visible here (use --backend host or auto)");
    return kExitUsage;
  }
  int np = options.np > 0 ? options.np : plan.ranks();
  if (np <= 0) np = use_gpus ? probe.gpus : 2;
  if (use_gpus && options.hostfile.empty() && np > probe.gpus) {
    // Training over the copy engines needs no NCCL: its ranks may share a
    // GPU (a check of the arithmetic, not of speed).
    bool shareable = true;
    for (const v1::CaseSpec& c : plan.cases()) {
      bool nccl_rungs = c.ladder().empty();
      for (int n : c.ladder()) nccl_rungs = nccl_rungs || n != 1;
      if (c.bench() != v1::BENCH_TRAIN ||
          (c.train().comm() != "ce" && nccl_rungs)) {
        shareable = false;
      }
    }
    if (!shareable) {
      Error(absl::StrFormat(
          "--np %d: only %d GPU(s) are visible and NCCL needs one GPU per "
          "rank (use --backend host for CPU ranks)",
          np, probe.gpus));
      return kExitUsage;
    }
    std::fprintf(stderr,
                 "ringmaster: %d ranks share %d GPU(s) (training over the "
                 "copy engines only): its numbers check the arithmetic; its "
                 "times are not measurements\n",
                 np, probe.gpus);
  }
  std::string worker_backend = options.backend == "auto"
                                   ? (use_gpus ? "cuda" : "host")
                                   : options.backend;
  // Node benchmarks expand per rank pair, which needs the launch's size.
  {
    auto expanded = ExpandPlan(plan, 100000, np);
    if (!expanded.ok()) {
      Error(std::string(expanded.status().message()));
      return kExitUsage;
    }
    cases = std::move(*expanded);
  }

  // 2. Durable store and the embedded coordinator (and before any of their
  // threads start, the signal watcher).
  WatchSignals();
  std::error_code ec;
  fs::create_directories(options.out_dir, ec);
  if (ec) {
    Error(options.out_dir + ": cannot create results folder: " + ec.message());
    return kExitInternal;
  }
  auto store =
      Store::Open((fs::path(options.out_dir) / "ringmaster.db").string());
  if (!store.ok()) {
    Error(std::string(store.status().message()));
    return kExitInternal;
  }
  // NCCL's algorithm choices from tuning probes, per variant (a variant's
  // environment changes what NCCL picks), keyed by what NCCL logs. Each
  // variant is probed once, before its first job; later rounds reuse it.
  std::map<std::string, NcclChoices> tuning;
  std::mutex tuning_mu;
  const bool tuning_probe = options.nccl_algorithms && worker_backend == "cuda";
  if (options.nccl_algorithms && !tuning_probe) {
    std::cerr
        << "ringmaster: --nccl-algorithms needs the cuda backend; ignored\n";
  }
  JobManager::Options manager_options;
  if (tuning_probe) {
    manager_options.annotate = [&tuning, &tuning_mu, np](v1::Result* r) {
      auto key = NcclTuningKey(r->case_(), r->nranks() > 0 ? r->nranks() : np);
      if (!key) return;
      std::lock_guard<std::mutex> lock(tuning_mu);
      auto choices = tuning.find(r->case_().variant());
      if (choices == tuning.end()) return;
      auto it = choices->second.find(*key);
      if (it == choices->second.end()) return;
      r->set_nccl_algorithm(it->second.algorithm);
      r->set_nccl_protocol(it->second.protocol);
      r->set_nccl_channels(it->second.channels);
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
      options,   manager, absl::StrFormat("127.0.0.1:%d", (*server)->port()),
      worker,    np,      worker_backend,
      plan_path, plan,    command_line};

  // One job per interconnect variant (or one job when the plan has none),
  // in each of the rounds: variants interleave in time (A B A B ...), so
  // that compare pairs each B run with the A run beside it.
  std::vector<const v1::Variant*> variants;
  for (const auto& v : plan.variants()) variants.push_back(&v);
  if (variants.empty()) variants.push_back(nullptr);
  const int rounds = std::max(options.rounds, 1);
  std::vector<std::pair<int, const v1::Variant*>> jobs;
  for (int round = 0; round < rounds; ++round)
    for (const v1::Variant* v : variants) jobs.emplace_back(round, v);
  std::vector<v1::Result> all;
  bool failed = false, internal = false;
  for (const auto& [round, variant] : jobs) {
    if (g_stop_signal != 0) break;
    if (rounds > 1) {
      std::cerr << absl::StrFormat(
          "ringmaster: round %d of %d%s\n", round + 1, rounds,
          variant ? ", variant " + variant->name() : "");
    }
    std::vector<v1::Case> vcases = cases;
    for (auto& c : vcases) {
      if (variant) {
        c.set_variant(variant->name());
        c.set_ceiling_gbps(variant->ceiling_gbps());
      }
    }
    const std::string variant_name = variant ? variant->name() : "";
    const bool probed = tuning.count(variant_name) > 0;  // added here only
    if (tuning_probe && !probed) {
      // One operation per case with NCCL's tuning log on; the measured jobs
      // of this variant run without it.
      std::vector<v1::Case> probe_cases = vcases;
      for (auto& c : probe_cases) {
        v1::Timing* t = c.mutable_timing();
        t->set_mode(v1::PIPELINED);
        t->set_warmup_iters(1);
        t->set_warmup_max_time_s(0);
        t->set_fixed_iters_per_sample(1);
        t->set_min_samples(1);
        t->set_max_samples(1);
        c.set_verify(false);
      }
      {
        ScopedEnv debug("NCCL_DEBUG", "INFO");
        ScopedEnv subsys("NCCL_DEBUG_SUBSYS", "TUNING");
        NcclChoices* choices;
        {
          std::lock_guard<std::mutex> lock(tuning_mu);
          choices = &tuning[variant_name];  // std::map: the pointer stays
        }
        JobOutcome p =
            RunJob(ctx, std::move(probe_cases), variant, choices, &tuning_mu);
        internal = internal || p.internal_error;
      }
      std::lock_guard<std::mutex> lock(tuning_mu);
      std::cerr << absl::StrFormat(
          "ringmaster: NCCL tuning probe%s: %d choices recorded\n",
          variant ? " of variant " + variant_name : "",
          tuning[variant_name].size());
    }
    JobOutcome outcome = RunJob(ctx, std::move(vcases), variant);
    failed = failed || outcome.failed;
    internal = internal || outcome.internal_error;
    all.insert(all.end(), outcome.results.begin(), outcome.results.end());
  }
  (*server)->Shutdown();
  std::cout << RenderSummaries(all, variants.size() > 1);
  if (rounds > 1) {
    const std::string out = options.out_dir;
    std::cerr << (variants.size() == 2 && variants[0] && variants[1]
                      ? absl::StrFormat(
                            "ringmaster: %d rounds in %s; judge %s against %s "
                            "with: ringmaster compare %s %s --base-variant %s "
                            "--new-variant %s\n",
                            rounds, out, variants[1]->name(),
                            variants[0]->name(), out, out, variants[0]->name(),
                            variants[1]->name())
                      : absl::StrFormat(
                            "ringmaster: %d rounds in %s (%d jobs): a baseline "
                            "for ringmaster compare %s NEW\n",
                            rounds, out, jobs.size(), out));
  }
  if (const int sig = g_stop_signal.load(); sig != 0) {
    std::cerr << absl::StrFormat("ringmaster: stopped by %s\n", strsignal(sig));
    return 128 + sig;
  }
  if (internal) return kExitInternal;
  return failed ? kExitJobFailed : kExitOk;
}

}  // namespace ringmaster
