#include "cli/run_command.h"

#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <mutex>
#include <thread>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "coordinator/job_manager.h"
#include "coordinator/launcher.h"
#include "coordinator/server.h"
#include "coordinator/store.h"
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

std::string Hostname() {
  char buf[256] = {};
  gethostname(buf, sizeof buf - 1);
  return buf;
}

void Error(const std::string& message) {
  std::cerr << "ringmaster: error: " << message << "\n";
}

struct Probe {
  int gpus = 0;
  bool cuda_backend = false;
};

// Asks the worker binary what this machine has (the CLI itself links no
// CUDA).
absl::StatusOr<Probe> ProbeMachine(const std::string& worker) {
  std::mutex mu;
  std::string out;
  auto child = ChildProcess::Spawn({worker, "probe"},
                                   [&](std::string_view line, bool err) {
                                     std::lock_guard<std::mutex> lock(mu);
                                     if (!err)
                                       out.append(line.data(), line.size());
                                   });
  if (!child.ok()) return child.status();
  absl::Time deadline = absl::Now() + absl::Seconds(60);
  std::optional<int> status;
  while (!(status = (*child)->Poll()) && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  if (!status)
    return absl::DeadlineExceededError("ringmaster-worker probe timed out");
  (*child)->JoinReaders();
  if (*status != 0) {
    return absl::InternalError("ringmaster-worker probe failed: " +
                               DescribeWaitStatus(*status));
  }
  std::lock_guard<std::mutex> lock(mu);
  try {
    auto j = nlohmann::json::parse(out);
    Probe p;
    p.gpus = j.value("gpus", 0);
    p.cuda_backend = j.value("cuda_backend", false);
    return p;
  } catch (const std::exception& e) {
    return absl::InternalError(std::string("unreadable probe output: ") +
                               e.what());
  }
}

bool ProcessAlive(int pid) {
  return pid > 0 && (kill(pid, 0) == 0 || errno == EPERM);
}

// A default deadline generous enough for every case's sampling limits.
double DefaultTimeout(const std::vector<v1::Case>& cases) {
  double t = 120;
  for (const auto& c : cases) t += 3 * c.timing().max_time_s() + 5;
  return t;
}

// Mutable state shared between the launcher's reader threads and the loop.
struct LauncherLog {
  std::mutex mu;
  std::ofstream file ABSL_GUARDED_BY(mu);
  std::optional<RankFailure> rank_failure ABSL_GUARDED_BY(mu);
  bool echo = true;
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
};

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
  MpirunOptions mo;
  mo.mpirun = options.mpirun;
  mo.np = np;
  mo.hostfile = options.hostfile;
  mo.allow_run_as_root = geteuid() == 0;
  mo.oversubscribe = np > static_cast<int>(std::thread::hardware_concurrency());
  mo.forward_env = ForwardedEnvNames(env);
  mo.extra_args = options.mpirun_args;
  mo.worker_argv = {worker,  "run",  "--coordinator", address,
                    "--job", job_id, "--backend",     worker_backend};
  LauncherLog log;
  log.echo = !options.quiet;
  {
    std::lock_guard<std::mutex> lock(log.mu);
    log.file.open(job_dir / "launcher.log");
    log.file << "# " << absl::StrJoin(BuildMpirunArgv(mo), " ") << "\n";
  }
  auto launched = ChildProcess::Spawn(
      BuildMpirunArgv(mo),
      [&log, tuning, tuning_mu](std::string_view line, bool is_stderr) {
        if (tuning) {
          if (auto choice = ParseNcclTuningLine(line)) {
            std::lock_guard<std::mutex> lock(*tuning_mu);
            (*tuning)[{choice->function, choice->bytes}] = *choice;
            return;  // one line per call: kept out of the log
          }
        }
        std::lock_guard<std::mutex> lock(log.mu);
        log.file << (is_stderr ? "E " : "O ") << line << "\n";
        log.file.flush();
        if (auto f = ParseMpirunFailureLine(line); f && !log.rank_failure)
          log.rank_failure = f;
        if (log.echo && !line.empty()) std::cerr << "  | " << line << "\n";
      });
  if (!launched.ok()) {
    Error(std::string(launched.status().message()));
    v1::Failure f;
    f.set_reason(v1::WORKER_EXIT);
    f.set_detail(std::string(launched.status().message()));
    manager.Finish(job_id, v1::JOB_FAILED, f);
    result_of_job.failed = true;
    return result_of_job;
  }
  ChildProcess& mpirun = **launched;

  // 4. Watch: results, rank reports, the launcher, heartbeats, deadlines.
  const std::string my_host = Hostname();
  const absl::Time start = absl::Now();
  const double timeout_s =
      options.timeout_s > 0 ? options.timeout_s : DefaultTimeout(cases);
  std::vector<v1::Result> results;
  bool begun = false;
  int registered = 0;
  bool workers_done = false;
  std::optional<v1::Failure> failure;
  std::optional<int> exit_status;
  absl::Time last_output = absl::Now();
  absl::Time exit_seen = absl::InfinitePast();

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
  auto fail = [&](v1::FailureReason reason, int rank, const std::string& host,
                  const std::string& detail) {
    if (failure) return;
    v1::Failure f;
    f.set_reason(reason);
    f.set_rank(rank);
    f.set_host(host);
    f.set_detail(detail);
    failure = f;
  };

  while (true) {
    if (auto ev = manager.NextEvent(absl::Milliseconds(100))) {
      switch (ev->type) {
        case JobEvent::Type::kRegistered:
          ++registered;
          break;
        case JobEvent::Type::kResult:
          results.push_back(ev->result);
          begin();
          for (Reporter* rep : reporters) rep->Report(ev->result);
          last_output = absl::Now();
          break;
        case JobEvent::Type::kRankFinal:
          if (ev->failure.reason() != v1::FAILURE_REASON_UNSPECIFIED) {
            fail(ev->failure.reason(), ev->failure.rank(), ev->failure.host(),
                 ev->failure.detail());
          } else if (ev->rank == 0) {
            workers_done = true;
          }
          break;
        case JobEvent::Type::kTerminal:
          break;
      }
      continue;  // drain events before checking the rest
    }
    if (!exit_status) {
      exit_status = mpirun.Poll();
      if (exit_status) exit_seen = absl::Now();
    }
    if (exit_status) {
      // Give late events a moment to arrive, then decide.
      if (absl::Now() - exit_seen < absl::Milliseconds(300)) continue;
      if (*exit_status != 0 || !workers_done) {
        std::lock_guard<std::mutex> lock(log.mu);
        if (log.rank_failure) {
          fail(v1::WORKER_EXIT, log.rank_failure->rank, log.rank_failure->host,
               log.rank_failure->detail);
        } else {
          fail(v1::WORKER_EXIT, -1, my_host,
               "mpirun ended with " + DescribeWaitStatus(*exit_status) +
                   (workers_done ? "" : " before the workers finished"));
        }
      }
      break;
    }
    if (failure) break;
    // A local rank that vanished without its final report: worker_exit.
    absl::Time now = absl::Now();
    for (const RankStatus& r : manager.Ranks(job_id)) {
      if (!r.registered || r.final) continue;
      if (r.fingerprint.host() == my_host &&
          !ProcessAlive(r.fingerprint.pid())) {
        // After rank 0's final report ranks may exit in any order; mpirun's
        // exit status still catches a rank that dies at the very end.
        if (workers_done) continue;
        fail(v1::WORKER_EXIT, r.rank, r.fingerprint.host(),
             absl::StrFormat("process %d is gone", r.fingerprint.pid()));
      } else if (now - r.last_seen >
                 absl::Seconds(options.heartbeat_timeout_s)) {
        fail(v1::WORKER_UNREACHABLE, r.rank, r.fingerprint.host(),
             absl::StrFormat("no heartbeat for %.0f s",
                             absl::ToDoubleSeconds(now - r.last_seen)));
      }
    }
    if (failure) break;
    if (registered < np &&
        now - start > absl::Seconds(options.registration_timeout_s)) {
      std::vector<int> missing;
      for (const RankStatus& r : manager.Ranks(job_id)) {
        if (!r.registered) missing.push_back(r.rank);
      }
      fail(v1::WORKER_UNREACHABLE, missing.empty() ? -1 : missing[0], "",
           absl::StrFormat("rank(s) %s never registered within %.0f s",
                           absl::StrJoin(missing, ", "),
                           options.registration_timeout_s));
      break;
    }
    if (now - start > absl::Seconds(timeout_s)) {
      fail(v1::DEADLINE, -1, "",
           absl::StrFormat("job exceeded its %.0f s deadline", timeout_s));
      break;
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

  // 5. Reap: nothing of the job may outlive it. mpirun usually ends by
  // itself within a moment of a rank's death (and names the rank).
  for (int i = 0; i < 50 && !exit_status; ++i) {
    absl::SleepFor(absl::Milliseconds(20));
    exit_status = mpirun.Poll();
  }
  if (!exit_status || !ProcessesInSession(mpirun.pid()).empty()) {
    mpirun.TerminateSession(absl::Seconds(2));
  }
  for (const RankStatus& r : manager.Ranks(job_id)) {
    if (r.registered && r.fingerprint.host() == my_host &&
        ProcessAlive(r.fingerprint.pid())) {
      kill(r.fingerprint.pid(), SIGKILL);
    }
  }
  mpirun.JoinReaders();
  {
    // mpirun's own account of a dead rank is the most precise one.
    std::lock_guard<std::mutex> lock(log.mu);
    if (failure && failure->reason() == v1::WORKER_EXIT && log.rank_failure &&
        (failure->rank() < 0 || failure->rank() == log.rank_failure->rank)) {
      failure->set_rank(log.rank_failure->rank);
      failure->set_host(log.rank_failure->host);
      failure->set_detail(log.rank_failure->detail);
    }
  }
  // Results that arrived while reaping.
  while (auto ev = manager.NextEvent(absl::ZeroDuration())) {
    if (ev->type == JobEvent::Type::kResult) {
      results.push_back(ev->result);
      begin();
      for (Reporter* rep : reporters) rep->Report(ev->result);
    }
  }

  RunSummary summary = Summarize(results);
  if (!failure && summary.failed_results > 0) {
    // Wrong data or a rejected case fails the job, with the first reason.
    for (const auto& r : results) {
      if (r.status() == v1::FAILED) {
        failure = r.failure();
        break;
      }
    }
  }
  if (!failure && static_cast<size_t>(summary.results) < cases.size()) {
    fail(v1::WORKER_EXIT, -1, "",
         absl::StrFormat("only %d of %d results arrived", summary.results,
                         cases.size()));
  }
  summary.succeeded = !failure.has_value();
  if (failure) {
    summary.failure = absl::StrFormat(
        "%s%s%s%s", FailureReasonName(failure->reason()),
        failure->rank() >= 0 ? absl::StrFormat(" rank %d", failure->rank())
                             : "",
        failure->host().empty() ? "" : " on " + failure->host(),
        failure->detail().empty() ? "" : ": " + failure->detail());
  }
  begin();
  for (Reporter* rep : reporters) rep->End(summary);
  manager.Finish(job_id, failure ? v1::JOB_FAILED : v1::JOB_SUCCEEDED,
                 failure ? *failure : v1::Failure());
  std::cerr << absl::StrFormat(
      "ringmaster: job %s %s in %.1f s; results in %s\n", job_id,
      failure ? "FAILED" : "SUCCEEDED",
      absl::ToDoubleSeconds(absl::Now() - start), job_dir.string());
  if (failure) std::cerr << "ringmaster: failure: " << summary.failure << "\n";
  result_of_job.results = std::move(results);
  result_of_job.failed = failure.has_value();
  return result_of_job;
}

}  // namespace

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
    Error(absl::StrFormat(
        "--np %d: only %d GPU(s) are visible and NCCL needs one GPU per "
        "rank (use --backend host for CPU ranks)",
        np, probe.gpus));
    return kExitUsage;
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

  // 2. Durable store and the embedded coordinator.
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
  // NCCL's algorithm choices from tuning probes, keyed by what NCCL logs.
  NcclChoices tuning;
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
      auto it = tuning.find(*key);
      if (it == tuning.end()) return;
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
  // The token travels in the environment, never in argv.
  setenv("RINGMASTER_TOKEN", token.c_str(), 1);
  JobContext ctx{
      options,   manager, absl::StrFormat("127.0.0.1:%d", (*server)->port()),
      worker,    np,      worker_backend,
      plan_path, plan,    command_line};

  // One job per interconnect variant (or one job when the plan has none).
  std::vector<const v1::Variant*> variants;
  for (const auto& v : plan.variants()) variants.push_back(&v);
  if (variants.empty()) variants.push_back(nullptr);
  std::vector<v1::Result> all;
  bool failed = false, internal = false;
  for (const v1::Variant* variant : variants) {
    std::vector<v1::Case> vcases = cases;
    for (auto& c : vcases) {
      if (variant) {
        c.set_variant(variant->name());
        c.set_ceiling_gbps(variant->ceiling_gbps());
      }
    }
    if (tuning_probe) {
      // One operation per case with NCCL's tuning log on; the measured job
      // that follows runs without it.
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
        JobOutcome p =
            RunJob(ctx, std::move(probe_cases), variant, &tuning, &tuning_mu);
        internal = internal || p.internal_error;
      }
      std::lock_guard<std::mutex> lock(tuning_mu);
      std::cerr << absl::StrFormat(
          "ringmaster: NCCL tuning probe: %d choices recorded\n",
          tuning.size());
    }
    JobOutcome outcome = RunJob(ctx, std::move(vcases), variant);
    failed = failed || outcome.failed;
    internal = internal || outcome.internal_error;
    all.insert(all.end(), outcome.results.begin(), outcome.results.end());
  }
  (*server)->Shutdown();
  if (variants.size() > 1) {
    std::cout << "\n" << RenderVariantComparison(all);
  }
  if (std::string matrices = RenderBenchMatrices(all); !matrices.empty()) {
    std::cout << "\n" << matrices;
  }
  if (std::string scaling = RenderTrainScaling(all); !scaling.empty()) {
    std::cout << "\n" << scaling;
  }
  if (internal) return kExitInternal;
  return failed ? kExitJobFailed : kExitOk;
}

}  // namespace ringmaster
