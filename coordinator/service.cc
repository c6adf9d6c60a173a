#include "coordinator/service.h"

#include <fcntl.h>
#include <google/protobuf/util/json_util.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "core/html_report.h"
#include "core/placement.h"
#include "core/report.h"
#include "core/safe_path.h"
#include "spdlog/spdlog.h"

extern char** environ;

namespace ringmaster {
namespace fs = std::filesystem;
namespace {

bool AllowedEnvName(const std::string& name, bool allow_faults) {
  if (absl::StartsWith(name, "NCCL_") && name.size() > 5) {
    for (char c : name) {
      if (!(std::isupper(static_cast<unsigned char>(c)) ||
            std::isdigit(static_cast<unsigned char>(c)) || c == '_'))
        return false;
    }
    return true;
  }
  return allow_faults && name == "RINGMASTER_FAULT";
}

// The launcher's environment: the coordinator's own, the job's allowlisted
// variables, and the job's worker token (never on a command line).
std::vector<std::string> LaunchEnv(const v1::Job& job) {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) env.emplace_back(*e);
  for (const auto& [k, v] : job.env()) SetEnvEntry(&env, k, v);
  SetEnvEntry(&env, "RINGMASTER_TOKEN", job.worker_token());
  return env;
}

}  // namespace

absl::StatusOr<std::string> LoadOrCreateAdminToken(const std::string& dir) {
  const std::string path = (fs::path(dir) / "admin.token").string();
  std::ifstream in(path);
  if (in) {
    std::string token;
    std::getline(in, token);
    token = std::string(absl::StripAsciiWhitespace(token));
    if (token.size() < 32)
      return absl::DataLossError(path + ": token shorter than 32 characters");
    return token;
  }
  const std::string token = NewToken();
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    return absl::PermissionDeniedError(
        absl::StrFormat("%s: cannot create: %s", path, std::strerror(errno)));
  }
  std::string line = token + "\n";
  bool ok = write(fd, line.data(), line.size()) ==
                static_cast<ssize_t>(line.size()) &&
            fsync(fd) == 0;
  close(fd);
  if (!ok) return absl::InternalError(path + ": cannot write the token");
  return token;
}

absl::StatusOr<std::map<std::string, std::string>> LoadUsersFile(
    const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(path + ": cannot read the users file");
  std::map<std::string, std::string> tokens;  // token -> user
  std::string line;
  int lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    absl::string_view text = absl::StripAsciiWhitespace(line);
    if (text.empty() || text[0] == '#') continue;
    std::vector<std::string> parts =
        absl::StrSplit(text, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    if (parts.size() != 2 || parts[1].size() < 16) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s:%d: expected \"NAME TOKEN\" with a token of at least 16 "
          "characters",
          path, lineno));
    }
    tokens[parts[1]] = parts[0];
  }
  return tokens;
}

absl::StatusOr<std::unique_ptr<CoordinatorService>> CoordinatorService::Start(
    ServiceOptions options) {
  // spdlog's registry is a function-local static inside libspdlog: create
  // it here, before the gRPC and scheduler threads that log, so that each
  // of them starts after it exists. (Debian's libspdlog is not built for
  // ThreadSanitizer, whose R1 run saw the first log line's construction of
  // it on one handler thread and a read on another as a race.)
  spdlog::default_logger();
  const std::map<std::string, LauncherKind> launchers = {
      {"mpirun", LauncherKind::kMpirun},
      {"slurm", LauncherKind::kSlurm},
      {"k8s", LauncherKind::kK8s},
      {"external", LauncherKind::kExternal}};
  const auto launcher = launchers.find(options.launcher);
  if (launcher == launchers.end()) {
    return absl::InvalidArgumentError(
        "launcher: expected mpirun, slurm, k8s or external, got " +
        options.launcher);
  }
  if (options.launcher == "k8s") {
    if (options.k8s_image.empty())
      return absl::InvalidArgumentError("--launcher k8s needs --k8s-image");
    if (options.k8s_style != "job" && options.k8s_style != "mpijob") {
      return absl::InvalidArgumentError(
          "--k8s-style: expected job or mpijob, got " + options.k8s_style);
    }
  }
  std::error_code ec;
  fs::create_directories(options.data_dir, ec);
  if (ec) {
    return absl::PermissionDeniedError(absl::StrFormat(
        "%s: cannot create: %s", options.data_dir, ec.message()));
  }
  fs::permissions(options.data_dir, fs::perms::owner_all,
                  fs::perm_options::replace, ec);
  std::unique_ptr<CoordinatorService> svc(new CoordinatorService());
  auto token = LoadOrCreateAdminToken(options.data_dir);
  if (!token.ok()) return token.status();
  svc->admin_token_ = *token;
  auto store =
      Store::Open((fs::path(options.data_dir) / "ringmaster.db").string());
  if (!store.ok()) return store.status();
  svc->store_ = std::move(*store);
  JobManager::Options mo;
  mo.events = false;
  mo.heartbeat_interval_ms = options.heartbeat_interval_ms;
  svc->manager_ = std::make_unique<JobManager>(svc->store_.get(), mo);

  // Take over what a previous coordinator left.
  auto jobs = svc->store_->AllJobs();
  if (!jobs.ok()) return jobs.status();
  svc->options_ = options;
  svc->launcher_ = launcher->second;
  for (const v1::Job& job : *jobs) {
    svc->manager_->Adopt(job);
    if (job.state() == v1::JOB_RUNNING || job.state() == v1::JOB_LAUNCHING) {
      WatchLimits limits = svc->LimitsFor(job);
      svc->running_[job.job_id()] = JobSupervisor::Follow(
          svc->manager_.get(), job.job_id(), limits,
          /*adopted=*/true, job.launcher_sid(), job.slurm_job_id());
      ++svc->adopted_;
    }
  }

  ServerOptions so = options.server;
  so.admin_token = svc->admin_token_;
  CoordinatorService* raw = svc.get();
  so.submit = [raw](const v1::SubmitPlanRequest& req, const Caller& caller) {
    return raw->Submit(req, caller);
  };
  auto server = CoordinatorServer::Start(svc->manager_.get(), so);
  if (!server.ok()) return server.status();
  svc->server_ = std::move(*server);
  if (svc->options_.worker_address.empty()) {
    svc->options_.worker_address =
        absl::StrFormat("127.0.0.1:%d", svc->server_->port());
  }
  svc->scheduler_ = std::thread([raw] { raw->SchedulerLoop(); });
  return svc;
}

CoordinatorService::~CoordinatorService() { Shutdown(); }

void CoordinatorService::CancelAll(absl::Duration wait) {
  const std::vector<v1::JobState> open = {v1::JOB_QUEUED, v1::JOB_LAUNCHING,
                                          v1::JOB_RUNNING};
  for (const v1::Job& j : manager_->ListJobs(open, "", 100000))
    manager_->RequestCancel(j.job_id()).IgnoreError();
  cv_.notify_all();
  const absl::Time give_up = absl::Now() + wait;
  while (absl::Now() < give_up && !manager_->ListJobs(open, "", 1).empty())
    absl::SleepFor(absl::Milliseconds(50));
}

void CoordinatorService::Shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) return;
    stop_ = true;
  }
  cv_.notify_all();
  if (scheduler_.joinable()) scheduler_.join();
  if (server_) server_->Shutdown();
  std::list<Reaping> reaping;
  {
    std::lock_guard<std::mutex> lock(mu_);
    reaping.swap(reaping_);
  }
  for (auto& r : reaping) r.done.wait();  // processes being ended finish
  std::lock_guard<std::mutex> lock(mu_);
  // Supervisors are dropped without reaping: a later coordinator adopts
  // the jobs (mpirun sessions keep running without us).
  for (auto& [id, sup] : running_) sup->Abandon();
  running_.clear();
}

WatchLimits CoordinatorService::LimitsFor(const v1::Job& job) const {
  WatchLimits l;
  l.deadline_s = job.deadline_s() > 0 ? job.deadline_s() : 600;
  l.op_timeout_s =
      job.op_timeout_s() > 0 ? job.op_timeout_s() : options_.op_timeout_s;
  l.heartbeat_timeout_s = options_.heartbeat_timeout_s;
  l.registration_timeout_s = options_.registration_timeout_s;
  l.grace_s = options_.grace_s;
  return l;
}

absl::StatusOr<v1::SubmitPlanResponse> CoordinatorService::Submit(
    const v1::SubmitPlanRequest& req, const Caller& caller) {
  for (const auto& [k, v] : req.env()) {
    if (!AllowedEnvName(k, options_.allow_fault_injection)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "env.%s: not allowed (allowlist: NCCL_*%s)", k.substr(0, 64),
          options_.allow_fault_injection ? ", RINGMASTER_FAULT" : ""));
    }
    if (v.size() > 4096 || v.find('\0') != std::string::npos) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "env.%s: value longer than 4096 bytes or with NUL", k));
    }
  }
  if (req.env_size() > 64)
    return absl::InvalidArgumentError("env: more than 64 variables");
  if (req.request_id().size() > 128)
    return absl::InvalidArgumentError("request_id: longer than 128 characters");
  // A retried submission returns its job, even when the queue is full.
  if (!req.request_id().empty()) {
    if (auto existing = manager_->FindRequest(caller.user, req.request_id())) {
      v1::SubmitPlanResponse resp;
      *resp.mutable_job() = *existing;
      resp.set_duplicate(true);
      if (launcher_ == LauncherKind::kExternal)
        resp.set_worker_token(manager_->WorkerToken(existing->job_id()));
      return resp;
    }
  }
  // Admission before any expensive work, so a full queue answers at once.
  // A slot is reserved until the job is stored (or the plan rejected).
  {
    MutexLock admission(&submit_mu_);
    const int queued =
        static_cast<int>(manager_->JobsInState(v1::JOB_QUEUED).size()) +
        reserved_;
    if (queued >= options_.max_queued) {
      return absl::ResourceExhaustedError(absl::StrFormat(
          "the queue is full (%d jobs waiting); try again later", queued));
    }
    const int mine =
        manager_->CountUnfinished(caller.user) + reserved_by_user_[caller.user];
    if (mine >= options_.user_quota) {
      return absl::ResourceExhaustedError(
          absl::StrFormat("user %s has %d unfinished jobs (quota %d)",
                          caller.user, mine, options_.user_quota));
    }
    ++reserved_;
    ++reserved_by_user_[caller.user];
  }
  struct Release {
    CoordinatorService* svc;
    std::string user;
    ~Release() {
      MutexLock admission(&svc->submit_mu_);
      --svc->reserved_;
      if (--svc->reserved_by_user_[user] == 0)
        svc->reserved_by_user_.erase(user);
    }
  } release{this, caller.user};
  auto job = JobFromSubmit(req);
  if (!job.ok()) return job.status();
  if (job->nranks() > options_.max_ranks) {
    return absl::InvalidArgumentError(
        absl::StrFormat("nranks: %d exceeds this coordinator's limit of %d",
                        job->nranks(), options_.max_ranks));
  }
  job->set_user(caller.user);
  job->set_launcher(options_.launcher);
  job->set_max_attempts(options_.max_attempts);
  bool duplicate = false;
  auto created = manager_->CreateJob(std::move(*job), &duplicate);
  if (!created.ok()) return created.status();
  v1::SubmitPlanResponse resp;
  *resp.mutable_job() = JobSummary(*created);
  resp.set_duplicate(duplicate);
  if (launcher_ == LauncherKind::kExternal)
    resp.set_worker_token(created->worker_token());
  if (!duplicate) {
    spdlog::info("job {} queued: plan {} on {} rank(s) for {}",
                 created->job_id(), created->plan().name(), created->nranks(),
                 caller.user);
  }
  cv_.notify_all();
  return resp;
}

void CoordinatorService::SchedulerLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    lock.unlock();
    LaunchQueued();
    PollRunning();
    lock.lock();
    cv_.wait_for(lock, std::chrono::milliseconds(50));
  }
}

absl::StatusOr<std::unique_ptr<JobSupervisor>> CoordinatorService::LaunchOnK8s(
    const v1::Job& job, const std::string& id, const WatchLimits& limits,
    const fs::path& dir) {
  K8sLaunch launch;
  K8sSpec& k = launch.spec;
  k.name = DnsLabel(absl::StrFormat("ringmaster-%s-%d", id, job.attempt()));
  k.namespace_ = options_.k8s_namespace;
  k.image = options_.k8s_image;
  k.nranks = job.nranks();
  k.ranks_per_pod = options_.k8s_ranks_per_pod > 0
                        ? options_.k8s_ranks_per_pod
                        : std::max(1, job.plan().ranks_per_node());
  k.gpus_per_pod = options_.k8s_gpus_per_pod;
  k.coordinator = options_.worker_address;
  k.job_id = id;
  k.backend = job.backend().empty() ? "auto" : job.backend();
  k.token_secret = k.name + "-token";
  k.token = job.worker_token();
  k.tls_ca_secret = options_.k8s_tls_ca_secret;
  k.deadline_s = limits.deadline_s + 60;
  // NCCL_* of the coordinator's environment (e.g. NCCL_NVLS_ENABLE=0
  // set on its Deployment) reach every container; the job's own
  // override them.
  k.nccl_env = NcclEnvironment();
  for (const auto& [name, value] : job.env())
    if (absl::StartsWith(name, "NCCL_")) k.nccl_env[name] = value;
  launch.style = options_.k8s_style;
  launch.kubectl = options_.kubectl;
  launch.manifest_path =
      (dir / absl::StrFormat("attempt-%d.k8s.yaml", job.attempt())).string();
  // kubectl runs in the coordinator's environment (KUBECONFIG): the
  // token reaches the pods through the Secret only.
  launch.poll_interval_s = options_.k8s_poll_s;
  auto launched = JobSupervisor::LaunchK8s(manager_.get(), id, launch, limits);
  return launched;
}

absl::StatusOr<std::unique_ptr<JobSupervisor>>
CoordinatorService::LaunchOnSlurm(const v1::Job& job, const std::string& id,
                                  const WatchLimits& limits,
                                  const fs::path& dir) {
  SlurmLaunch launch;
  SlurmSpec& spec = launch.spec;
  spec.job_name = "ringmaster-" + id;
  spec.nranks = job.nranks();
  spec.ranks_per_node = options_.slurm_ranks_per_node > 0
                            ? options_.slurm_ranks_per_node
                            : job.plan().ranks_per_node();
  spec.gpus_per_node = options_.slurm_gpus_per_node;
  spec.partition = options_.slurm_partition;
  spec.time_limit_s = limits.deadline_s + 60;
  spec.output = fs::absolute(dir).string() + "/slurm-%j.out";
  spec.worker = options_.worker;
  spec.coordinator = options_.worker_address;
  spec.job_id = id;
  spec.backend = job.backend().empty() ? "auto" : job.backend();
  spec.extra_sbatch = options_.slurm_args;
  launch.script_path =
      (dir / absl::StrFormat("attempt-%d.sbatch", job.attempt())).string();
  launch.env = LaunchEnv(job);
  launch.poll_interval_s = options_.slurm_poll_s;
  launch.rlimits = options_.worker_rlimits;
  auto launched =
      JobSupervisor::LaunchSlurm(manager_.get(), id, launch, limits);
  return launched;
}

absl::StatusOr<std::unique_ptr<JobSupervisor>>
CoordinatorService::LaunchWithMpirun(const v1::Job& job, const std::string& id,
                                     const WatchLimits& limits,
                                     const fs::path& dir) {
  MpirunLaunch launch;
  launch.mpirun = options_.mpirun;
  launch.hostfile = options_.hostfile;
  launch.mpirun_args = options_.mpirun_args;
  launch.worker = options_.worker;
  launch.address = options_.worker_address;
  launch.backend = job.backend().empty() ? "auto" : job.backend();
  launch.env = LaunchEnv(job);
  launch.rlimits = options_.worker_rlimits;
  launch.log_path =
      (dir / absl::StrFormat("attempt-%d.log", job.attempt())).string();
  auto launched =
      JobSupervisor::LaunchMpirun(manager_.get(), id, launch, limits);
  return launched;
}

// The job's launch through the configured launcher (`external`: ranks
// started elsewhere register; the supervisor only follows them).
absl::StatusOr<std::unique_ptr<JobSupervisor>> CoordinatorService::Launch(
    const v1::Job& job, const std::string& id, const WatchLimits& limits) {
  const fs::path dir = fs::path(options_.data_dir) / "jobs" / id;
  std::error_code dir_ec;
  fs::create_directories(dir, dir_ec);
  switch (launcher_) {
    case LauncherKind::kExternal:
      return JobSupervisor::Follow(manager_.get(), id, limits,
                                   /*adopted=*/false, 0);
    case LauncherKind::kK8s:
      return LaunchOnK8s(job, id, limits, dir);
    case LauncherKind::kSlurm:
      return LaunchOnSlurm(job, id, limits, dir);
    case LauncherKind::kMpirun:
      break;
  }
  return LaunchWithMpirun(job, id, limits, dir);
}

void CoordinatorService::LaunchQueued() {
  for (const std::string& id : manager_->JobsInState(v1::JOB_QUEUED)) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (static_cast<int>(running_.size() + reaping_.size()) >=
          options_.max_running)
        return;
    }
    auto snap = manager_->Snapshot(id);
    if (!snap.ok()) continue;
    if (snap->cancel_requested) {
      v1::Failure f;
      f.set_rank(-1);
      f.set_detail("cancelled before launch");
      manager_->Finish(id, v1::JOB_CANCELLED, f);
      continue;
    }
    auto job = manager_->GetJob(id);
    if (!job.ok()) continue;
    auto sup = Launch(*job, id, LimitsFor(*job));
    if (!sup.ok()) {
      v1::Failure f;
      f.set_reason(v1::WORKER_EXIT);
      f.set_rank(-1);
      f.set_detail("launch failed: " + std::string(sup.status().message()));
      manager_->Finish(id, v1::JOB_FAILED, f);
      spdlog::error("job {}: {}", id, f.detail());
      ExportJob(id);
      continue;
    }
    spdlog::info("job {} attempt {} launched ({})", id, job->attempt(),
                 options_.launcher);
    std::lock_guard<std::mutex> lock(mu_);
    running_[id] = std::move(*sup);
  }
}

void CoordinatorService::ExportJob(const std::string& job_id) {
  auto job = manager_->GetJob(job_id);
  if (!job.ok() || job->output().empty()) return;
  const std::string root = options_.results_root.empty()
                               ? options_.data_dir + "/results"
                               : options_.results_root;
  // Checked again here: a job stored by an older coordinator was not.
  auto output = NormalizeOutputName(job->output());
  absl::Status status = output.status();
  if (output.ok()) {
    auto results = manager_->QueryResults(job_id, -1, 0, v1::STATUS_UNSPECIFIED,
                                          job->attempt());
    auto dir = OpenDirBeneath(root, *output + "/" + job_id, /*create=*/true);
    status = !results.ok() ? results.status() : dir.status();
    if (status.ok()) {
      std::string jsonl;
      for (const auto& r : *results) jsonl += ResultToJson(r) + "\n";
      v1::Job record = *job;
      record.clear_worker_token();
      std::string record_json;
      google::protobuf::util::JsonPrintOptions o;
      o.preserve_proto_field_names = true;
      (void)google::protobuf::util::MessageToJsonString(record, &record_json,
                                                        o);
      HtmlReportOptions ho;
      ho.title = "Ringmaster job " + job_id;
      ho.sources = {"coordinator job " + job_id};
      ho.generated_at =
          absl::FormatTime(absl::RFC3339_sec, absl::Now(), absl::UTCTimeZone());
      status = WriteFileAt(*dir, "results.jsonl", jsonl);
      if (status.ok())
        status = WriteFileAt(*dir, "job.json", record_json + "\n");
      if (status.ok())
        status =
            WriteFileAt(*dir, "report.html", RenderHtmlReport(*results, ho));
    }
  }
  if (status.ok()) {
    spdlog::info("job {} exported to {}/{}/{}", job_id, root, *output, job_id);
  } else {
    spdlog::error("job {}: export to the results root refused: {}", job_id,
                  std::string(status.message()));
  }
}

void CoordinatorService::PollRunning() {
  std::vector<std::string> ids;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [id, sup] : running_) ids.push_back(id);
    // Reapers that are done free their admission slot.
    reaping_.remove_if([](Reaping& r) {
      return r.done.wait_for(std::chrono::seconds(0)) ==
             std::future_status::ready;
    });
  }
  for (const std::string& id : ids) {
    JobSupervisor* sup;
    {
      std::lock_guard<std::mutex> lock(mu_);
      sup = running_[id].get();
    }
    std::optional<Outcome> polled = sup->Poll();
    if (!polled) continue;
    const Outcome outcome = *polled;
    auto job = manager_->GetJob(id);
    const bool retry = outcome.state == v1::JOB_FAILED &&
                       RetryableFailure(outcome.failure) && job.ok() &&
                       job->attempt() < job->max_attempts();
    // A dead rank's job ends once mpirun has said which rank and how (it
    // does within a moment); any other verdict is visible at once while
    // the processes are ended in the background. The admission slot stays
    // taken until they are.
    const bool finish_now =
        !retry && outcome.failure.reason() != v1::WORKER_EXIT;
    if (finish_now) manager_->Finish(id, outcome.state, outcome.failure);
    std::lock_guard<std::mutex> lock(mu_);
    std::unique_ptr<JobSupervisor> owned = std::move(running_[id]);
    running_.erase(id);
    JobSupervisor* raw = owned.get();
    Reaping r;
    r.sup = std::move(owned);
    r.done = std::async(std::launch::async, [this, raw, id, decided = outcome,
                                             retry, finish_now] {
      Outcome outcome = decided;
      const absl::Time t0 = absl::Now();
      int killed = raw->Reap(&outcome);
      const double reap_s = absl::ToDoubleSeconds(absl::Now() - t0);
      if (retry) {
        spdlog::warn("job {} attempt failed ({}); retrying", id,
                     DescribeFailure(outcome.failure));
        manager_->Requeue(id, outcome.failure).IgnoreError();
        cv_.notify_all();
        return;
      }
      if (!finish_now) manager_->Finish(id, outcome.state, outcome.failure);
      ExportJob(id);
      spdlog::info(
          "job {} {}{}; processes ended in {:.2f} s{}", id,
          v1::JobState_Name(outcome.state).substr(4),
          outcome.state == v1::JOB_SUCCEEDED
              ? ""
              : ": " + DescribeFailure(outcome.failure),
          reap_s,
          killed > 0 ? absl::StrFormat(" (%d needed SIGKILL)", killed) : "");
      cv_.notify_all();
    });
    reaping_.push_back(std::move(r));
  }
}

}  // namespace ringmaster
