#include "cli/service_commands.h"

#include <signal.h>
#include <sys/resource.h>

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>
#include <thread>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "cli/run_command.h"
#include "comm/grpc_channel.h"
#include "coordinator/k8s.h"
#include "coordinator/launcher.h"
#include "coordinator/slurm.h"
#include "coordinator/supervisor.h"
#include "core/names.h"
#include "core/placement.h"
#include "core/plan.h"
#include "core/report.h"
#include "core/sweep.h"
#include "core/units.h"
#include "nlohmann/json.hpp"
#include "ringmaster/v1/coordinator.grpc.pb.h"
#include "spdlog/spdlog.h"

namespace ringmaster {
namespace {

std::string StateName(v1::JobState s) {
  std::string name = v1::JobState_Name(s);
  return name.rfind("JOB_", 0) == 0 ? name.substr(4) : name;
}

int ExitCodeFor(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK:
      return kExitOk;
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return kExitUnavailable;
    case grpc::StatusCode::UNAUTHENTICATED:
    case grpc::StatusCode::PERMISSION_DENIED:
      return kExitAuth;
    case grpc::StatusCode::NOT_FOUND:
      return kExitNotFound;
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return kExitBusy;
    case grpc::StatusCode::INVALID_ARGUMENT:
    case grpc::StatusCode::FAILED_PRECONDITION:
      return kExitUsage;
    default:
      return kExitInternal;
  }
}

const char* CodeName(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::UNAVAILABLE:
      return "unavailable";
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return "deadline exceeded";
    case grpc::StatusCode::UNAUTHENTICATED:
      return "authentication failed";
    case grpc::StatusCode::PERMISSION_DENIED:
      return "permission denied";
    case grpc::StatusCode::NOT_FOUND:
      return "not found";
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return "resource exhausted";
    case grpc::StatusCode::INVALID_ARGUMENT:
      return "invalid argument";
    case grpc::StatusCode::FAILED_PRECONDITION:
      return "failed precondition";
    default:
      return "error";
  }
}

int Fail(const grpc::Status& s, const std::string& what) {
  Error(absl::StrFormat("%s: %s: %s", what, CodeName(s.error_code()),
                        s.error_message()));
  return ExitCodeFor(s.error_code());
}

// A connected client: stub plus the token.
struct Client {
  std::unique_ptr<v1::Coordinator::Stub> stub;
  std::string token;
  double timeout_s = 10;
  void Prepare(grpc::ClientContext* ctx, bool deadline = true) const {
    if (deadline) {
      ctx->set_deadline(
          std::chrono::system_clock::now() +
          std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000)));
    }
    ctx->AddMetadata("authorization", "Bearer " + token);
  }
};

std::optional<Client> Connect(const ClientOptions& o, int* exit_code) {
  std::string token_file = o.token_file;
  if (token_file.empty()) {
    if (const char* f = std::getenv("RINGMASTER_TOKEN_FILE")) token_file = f;
  }
  if (token_file.empty()) token_file = "ringmaster-data/admin.token";
  Client c;
  if (const char* t = std::getenv("RINGMASTER_USER_TOKEN"); t && *t) {
    c.token = t;
  } else {
    auto text = ReadSmallFile(token_file);
    if (!text.ok()) {
      Error(absl::StrFormat(
          "%s: cannot read the token file (pass --token-file, or set "
          "RINGMASTER_TOKEN_FILE)",
          token_file));
      *exit_code = kExitAuth;
      return std::nullopt;
    }
    std::string value = *text;
    while (!value.empty() && (value.back() == '\n' || value.back() == '\r' ||
                              value.back() == ' '))
      value.pop_back();
    c.token = value;
  }
  TlsFiles tls{o.tls_ca, o.tls_cert, o.tls_key};
  auto channel = MakeCoordinatorChannel(o.coordinator, tls);
  if (!channel.ok()) {
    Error(std::string(channel.status().message()));
    *exit_code = kExitUsage;
    return std::nullopt;
  }
  c.stub = v1::Coordinator::NewStub(*channel);
  c.timeout_s = o.timeout_s;
  return c;
}

nlohmann::json JobJson(const v1::Job& j) {
  nlohmann::json out;
  out["job_id"] = j.job_id();
  out["state"] = StateName(j.state());
  out["user"] = j.user();
  out["plan"] = j.plan().name();
  out["nranks"] = j.nranks();
  out["attempt"] = j.attempt();
  out["results"] = j.results_received();
  out["created_at"] = j.created_at();
  out["finished_at"] = j.finished_at();
  if (j.state() == v1::JOB_FAILED || j.state() == v1::JOB_CANCELLED) {
    out["failure"] = {{"reason", FailureReasonName(j.failure().reason())},
                      {"rank", j.failure().rank()},
                      {"host", j.failure().host()},
                      {"detail", j.failure().detail()}};
  }
  return out;
}

std::string FailureLine(const v1::Job& j) {
  if (j.state() != v1::JOB_FAILED && j.state() != v1::JOB_CANCELLED) return "";
  if (j.state() == v1::JOB_CANCELLED) return j.failure().detail();
  return DescribeFailure(j.failure());
}

}  // namespace

int ServeCommand(ServeOptions o) {
  // Every worker connection is a descriptor (a node leader's, or a rank's):
  // the soft limit (often 1024) would refuse a large job's; the hard one is
  // the administrator's.
  rlimit nofile{};
  if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 &&
      nofile.rlim_cur < nofile.rlim_max) {
    nofile.rlim_cur = nofile.rlim_max;
    setrlimit(RLIMIT_NOFILE, &nofile);
  }
  for (const std::string& text : o.worker_rlimits) {
    auto limit = ParseResourceLimit(text);
    if (!limit.ok()) {
      Error(std::string(limit.status().message()));
      return kExitUsage;
    }
    o.service.worker_rlimits.push_back(*limit);
  }
  if (!o.users_file.empty()) {
    auto users = LoadUsersFile(o.users_file);
    if (!users.ok()) {
      Error(std::string(users.status().message()));
      return kExitUsage;
    }
    o.service.server.user_tokens = *users;
  }
  auto read = [](const std::string& path, std::string* out) {
    if (path.empty()) return true;
    auto text = ReadSmallFile(path);
    if (!text.ok()) {
      Error(std::string(text.status().message()));
      return false;
    }
    *out = *text;
    return true;
  };
  if (!read(o.tls_cert_file, &o.service.server.tls_cert_pem) ||
      !read(o.tls_key_file, &o.service.server.tls_key_pem) ||
      !read(o.tls_client_ca_file, &o.service.server.tls_client_ca_pem)) {
    return kExitUsage;
  }
  if (o.tls_cert_file.empty() != o.tls_key_file.empty()) {
    Error("--tls-cert and --tls-key go together");
    return kExitUsage;
  }
  if (o.service.worker.empty()) o.service.worker = DefaultWorkerPath();
  // Signals are taken by sigwait below, in this thread only.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  auto svc = CoordinatorService::Start(o.service);
  if (!svc.ok()) {
    Error(std::string(svc.status().message()));
    return svc.status().code() == absl::StatusCode::kInvalidArgument ||
                   svc.status().code() == absl::StatusCode::kPermissionDenied
               ? kExitUsage
               : kExitInternal;
  }
  std::cerr << absl::StrFormat(
      "ringmaster serve: listening on %s (port %d, %s), data in %s, admin "
      "token in %s/admin.token; %d job(s) taken over\n",
      o.service.server.address, (*svc)->port(),
      o.service.server.tls_cert_pem.empty() ? "plaintext loopback" : "TLS",
      o.service.data_dir, o.service.data_dir, (*svc)->adopted());
  int sig = 0;
  sigwait(&set, &sig);
  if (o.on_stop == "cancel") {
    std::cerr << "ringmaster serve: stopping on signal " << sig
              << "; cancelling every unfinished job (again: end their "
                 "processes at once)\n";
    // A second signal: SIGKILL to every launcher's session.
    std::thread([set] {
      int again = 0;
      while (sigwait(&set, &again) == 0) KillChildSessions();
    }).detach();
    (*svc)->CancelAll(absl::Seconds(60));
  } else {
    std::cerr << "ringmaster serve: stopping on signal " << sig
              << "; running jobs are left to the next coordinator\n";
  }
  (*svc)->Shutdown();
  return kExitOk;
}

int SubmitCommand(const ClientOptions& o, const SubmitOptions& s) {
  std::ifstream in(s.plan_path, std::ios::binary);
  if (!in) {
    Error(s.plan_path + ": cannot read the plan");
    return kExitUsage;
  }
  std::stringstream text;
  text << in.rdbuf();
  v1::SubmitPlanRequest req;
  req.set_plan_yaml(text.str());
  req.set_plan_name(s.plan_path);
  req.set_nranks(s.np);
  req.set_backend(s.backend);
  req.set_timeout_s(s.timeout_s);
  req.set_op_timeout_s(s.op_timeout_s);
  req.set_output(s.output);
  std::string request_id = s.request_id;
  if (request_id.empty()) {
    std::random_device rd;
    request_id = absl::StrFormat("%08x%08x", rd(), rd());
  }
  req.set_request_id(request_id);
  for (const std::string& kv : s.env) {
    auto eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) {
      Error("--env " + kv + ": expected NAME=value");
      return kExitUsage;
    }
    (*req.mutable_env())[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  int code = 0;
  auto c = Connect(o, &code);
  if (!c) return code;
  v1::SubmitPlanResponse resp;
  // The channel retries UNAVAILABLE (comm/grpc_channel.cc); the request id
  // makes a repeat return the first job.
  grpc::ClientContext ctx;
  c->Prepare(&ctx);
  grpc::Status st = c->stub->SubmitPlan(&ctx, req, &resp);
  if (!st.ok()) return Fail(st, "submit " + s.plan_path);
  const v1::Job& j = resp.job();
  if (o.Json()) {
    nlohmann::json out = JobJson(j);
    out["duplicate"] = resp.duplicate();
    out["request_id"] = request_id;
    // Only with --launcher external: the ranks you start need it.
    if (!resp.worker_token().empty()) out["worker_token"] = resp.worker_token();
    std::cout << out.dump() << "\n";
  } else {
    std::cerr << absl::StrFormat(
        "ringmaster: %s job %s: plan \"%s\" on %d rank(s), %s\n",
        resp.duplicate() ? "already submitted as" : "queued", j.job_id(),
        Printable(j.plan().name()), j.nranks(), StateName(j.state()));
  }
  std::cout << j.job_id() << "\n";  // the last line: the job id
  return kExitOk;
}

// `status JOB` and `watch`: 0 while running or SUCCEEDED, 1 FAILED,
// kExitCancelled CANCELLED.
int ExitCodeOf(v1::JobState state) {
  if (state == v1::JOB_CANCELLED) return kExitCancelled;
  return state == v1::JOB_FAILED ? kExitJobFailed : kExitOk;
}

int StatusCommand(const ClientOptions& o, const std::string& job_id,
                  int limit) {
  int code = 0;
  auto c = Connect(o, &code);
  if (!c) return code;
  if (!job_id.empty()) {
    grpc::ClientContext ctx;
    c->Prepare(&ctx);
    v1::GetJobRequest req;
    req.set_job_id(job_id);
    v1::GetJobResponse resp;
    grpc::Status st = c->stub->GetJob(&ctx, req, &resp);
    if (!st.ok()) return Fail(st, "status " + job_id);
    const v1::Job& j = resp.job();
    if (o.Json()) {
      nlohmann::json out = JobJson(j);
      out["cases"] = j.cases_size();
      nlohmann::json attempts = nlohmann::json::array();
      for (const auto& a : j.attempts()) {
        attempts.push_back({{"attempt", a.attempt()},
                            {"state", StateName(a.state())},
                            {"started_at", a.started_at()},
                            {"finished_at", a.finished_at()},
                            {"failure", a.failure().detail()}});
      }
      out["attempts"] = attempts;
      std::cout << out.dump() << "\n";
    } else {
      std::cout << absl::StrFormat(
          "job %s: %s\n  plan %s (%d cases) on %d rank(s), user %s, attempt "
          "%d of %d\n  results %d, created %s%s\n",
          j.job_id(), StateName(j.state()), Printable(j.plan().name()),
          j.cases_size(), j.nranks(), Printable(j.user()), j.attempt(),
          j.max_attempts(), j.results_received(), j.created_at(),
          j.finished_at().empty() ? "" : ", finished " + j.finished_at());
      if (std::string f = FailureLine(j); !f.empty())
        std::cout << "  " << Printable(f) << "\n";
    }
    return ExitCodeOf(j.state());
  }
  grpc::ClientContext ctx;
  c->Prepare(&ctx);
  v1::ListJobsRequest req;
  req.set_limit(limit);
  v1::ListJobsResponse resp;
  grpc::Status st = c->stub->ListJobs(&ctx, req, &resp);
  if (!st.ok()) return Fail(st, "status");
  if (o.Json()) {
    for (const auto& j : resp.jobs()) std::cout << JobJson(j).dump() << "\n";
    return kExitOk;
  }
  std::cout << absl::StrFormat("%-24s %-10s %-8s %5s %7s  %-20s %s\n", "JOB",
                               "STATE", "USER", "RANKS", "RESULTS", "CREATED",
                               "PLAN / FAILURE");
  for (const auto& j : resp.jobs()) {
    std::string f = FailureLine(j);
    std::cout << absl::StrFormat("%-24s %-10s %-8s %5d %7d  %-20s %s\n",
                                 j.job_id(), StateName(j.state()),
                                 Printable(j.user()), j.nranks(),
                                 j.results_received(), j.created_at(),
                                 Printable(f.empty() ? j.plan().name() : f));
  }
  return kExitOk;
}

int WatchCommand(const ClientOptions& o, const std::string& job_id) {
  int code = 0;
  auto c = Connect(o, &code);
  if (!c) return code;
  std::string last_line;
  absl::Duration backoff = absl::Milliseconds(200);
  while (true) {
    grpc::ClientContext ctx;
    c->Prepare(&ctx, /*deadline=*/false);
    v1::WatchJobRequest req;
    req.set_job_id(job_id);
    auto reader = c->stub->WatchJob(&ctx, req);
    v1::JobUpdate u;
    bool terminal = false;
    while (reader->Read(&u)) {
      backoff = absl::Milliseconds(200);
      const v1::Job& j = u.job();
      terminal = j.state() == v1::JOB_SUCCEEDED ||
                 j.state() == v1::JOB_FAILED || j.state() == v1::JOB_CANCELLED;
      if (o.Json()) {
        nlohmann::json out = JobJson(j);
        out["cases"] = u.cases();
        nlohmann::json ranks = nlohmann::json::array();
        for (const auto& r : u.ranks()) {
          ranks.push_back({{"rank", r.rank()},
                           {"registered", r.registered()},
                           {"host", r.host()},
                           {"done", r.progress_seq() + 1},
                           {"final", r.final()}});
        }
        out["ranks"] = ranks;
        out["last_case"] = u.last_case();
        out["last_size_bytes"] = u.last_size_bytes();
        std::cout << out.dump() << std::endl;
        continue;
      }
      int64_t slowest = u.ranks_size() > 0 ? INT64_MAX : -1;
      int registered = 0;
      for (const auto& r : u.ranks()) {
        // A rank's final report means it finished every case.
        slowest = std::min<int64_t>(
            slowest, r.final() ? u.cases() - 1 : r.progress_seq());
        registered += r.registered();
      }
      // Heartbeats may lag the results: a stored result's case is done.
      if (j.results_received() > 0)
        slowest = std::max<int64_t>(slowest, u.last_seq());
      slowest = std::min<int64_t>(slowest, u.cases() - 1);
      std::string line = absl::StrFormat(
          "%s  %-9s attempt %d, ranks %d/%d registered, cases %d/%d done, "
          "%d results stored",
          absl::FormatTime("%H:%M:%S", absl::Now(), absl::LocalTimeZone()),
          StateName(j.state()), j.attempt(), registered, j.nranks(),
          slowest + 1, u.cases(), j.results_received());
      if (!u.last_case().empty()) {
        line += absl::StrFormat("; last: %s%s", Printable(u.last_case()),
                                u.last_size_bytes() > 0
                                    ? " " + FormatBytes(u.last_size_bytes())
                                    : "");
      }
      if (std::string f = FailureLine(j); !f.empty())
        line += "\n  " + Printable(f);
      if (line.substr(10) !=
          (last_line.size() > 10 ? last_line.substr(10) : std::string())) {
        std::cout << line << std::endl;
        last_line = line;
      }
    }
    grpc::Status st = reader->Finish();
    if (terminal) {
      return ExitCodeOf(u.job().state());
    }
    if (st.error_code() != grpc::StatusCode::UNAVAILABLE &&
        st.error_code() != grpc::StatusCode::CANCELLED) {
      return Fail(st, "watch " + job_id);
    }
    // The coordinator went away (a restart): follow it when it is back.
    std::cerr << "ringmaster: watch: coordinator unavailable; retrying\n";
    absl::SleepFor(backoff);
    backoff = std::min(backoff * 2, absl::Seconds(2));
  }
}

int ResultsCommand(const ClientOptions& o, const std::string& job_id,
                   const std::string& format, const std::string& status) {
  v1::Status want = v1::STATUS_UNSPECIFIED;
  if (!status.empty() && !v1::Status_Parse(status, &want)) {
    Error("--status " + status + ": expected OK, FAILED or SKIPPED");
    return kExitUsage;
  }
  int code = 0;
  auto c = Connect(o, &code);
  if (!c) return code;
  grpc::ClientContext jctx;
  c->Prepare(&jctx);
  v1::GetJobRequest jreq;
  jreq.set_job_id(job_id);
  v1::GetJobResponse job;
  grpc::Status st = c->stub->GetJob(&jctx, jreq, &job);
  if (!st.ok()) return Fail(st, "results " + job_id);
  std::unique_ptr<Reporter> reporter;
  if (format == "csv") {
    reporter = std::make_unique<CsvReporter>(std::cout);
  } else if (format == "jsonl") {
    reporter = std::make_unique<JsonLinesReporter>(std::cout);
  } else {
    reporter = std::make_unique<ConsoleReporter>(std::cout);
  }
  std::vector<v1::Result> all;
  int64_t after = -1;
  while (true) {
    grpc::ClientContext ctx;
    c->Prepare(&ctx);
    v1::QueryResultsRequest req;
    req.set_job_id(job_id);
    req.set_after_seq(after);
    req.set_limit(1000);
    req.set_status(want);
    v1::QueryResultsResponse resp;
    st = c->stub->QueryResults(&ctx, req, &resp);
    if (!st.ok()) return Fail(st, "results " + job_id);
    if (resp.results_size() == 0) break;
    for (const auto& r : resp.results()) {
      after = std::max<int64_t>(after, r.case_().seq());
      all.push_back(r);
    }
    if (resp.results_size() < 1000) break;
  }
  RunContext ctx;
  ctx.job_id = job_id;
  ctx.plan_name = job.job().plan().name();
  ctx.nranks = job.job().nranks();
  // The backend the ranks ran on ("host (MPI)", "cuda (NCCL)"), as `run`
  // prints it; the job's request ("auto") only when no result says.
  ctx.backend = job.job().backend();
  if (!all.empty()) {
    ctx.provenance = all.front().provenance();
    if (!ctx.provenance.backend().empty())
      ctx.backend = ctx.provenance.backend();
  }
  reporter->Begin(ctx);
  for (const auto& r : all) reporter->Report(r);
  RunSummary summary = Summarize(all);
  summary.succeeded = job.job().state() == v1::JOB_SUCCEEDED;
  summary.failure = FailureLine(job.job());
  reporter->End(summary);
  if (format == "text" || format == "table")
    std::cout << RenderSummaries(all, false);
  return kExitOk;
}

int CancelCommand(const ClientOptions& o, const std::string& job_id) {
  int code = 0;
  auto c = Connect(o, &code);
  if (!c) return code;
  grpc::ClientContext ctx;
  c->Prepare(&ctx);
  v1::CancelJobRequest req;
  req.set_job_id(job_id);
  v1::CancelJobResponse resp;
  grpc::Status st = c->stub->CancelJob(&ctx, req, &resp);
  if (!st.ok()) return Fail(st, "cancel " + job_id);
  // Wait (up to the call timeout plus the reaping) for the end.
  absl::Time give_up = absl::Now() + absl::Seconds(o.timeout_s + 10);
  v1::Job j = resp.job();
  while (absl::Now() < give_up) {
    grpc::ClientContext gctx;
    c->Prepare(&gctx);
    v1::GetJobRequest greq;
    greq.set_job_id(job_id);
    v1::GetJobResponse g;
    if (c->stub->GetJob(&gctx, greq, &g).ok()) {
      j = g.job();
      if (j.state() == v1::JOB_CANCELLED || j.state() == v1::JOB_FAILED ||
          j.state() == v1::JOB_SUCCEEDED)
        break;
    }
    absl::SleepFor(absl::Milliseconds(100));
  }
  if (o.Json()) {
    std::cout << JobJson(j).dump() << "\n";
  } else {
    std::cout << absl::StrFormat("job %s: %s\n", job_id, StateName(j.state()));
  }
  return j.state() == v1::JOB_CANCELLED ? kExitOk : kExitJobFailed;
}

int LaunchSpecCommand(const LaunchSpecOptions& o) {
  auto plan = LoadPlanFile(o.plan_path);
  if (!plan.ok()) {
    Error(std::string(plan.status().message()));
    return kExitUsage;
  }
  const int np = o.np > 0 ? o.np : (plan->ranks() > 0 ? plan->ranks() : 2);
  auto cases = ExpandPlan(*plan, 100000, np);
  if (!cases.ok()) {
    Error(std::string(cases.status().message()));
    return kExitUsage;
  }
  if (o.launcher == "k8s-mpijob" || o.launcher == "k8s-job") {
    // Every missing required option at once.
    std::vector<std::string> missing;
    if (o.coordinator.empty()) missing.push_back("--coordinator");
    if (o.job_id.empty()) missing.push_back("--job");
    if (o.image.empty()) missing.push_back("--image");
    if (!missing.empty()) {
      Error(absl::StrFormat(
          "launch-spec --launcher %s: missing %s (required: the pods register "
          "with that coordinator's job, submitted first with `ringmaster "
          "submit`, and run that image)",
          o.launcher, absl::StrJoin(missing, ", ")));
      return kExitUsage;
    }
    K8sSpec k;
    k.name =
        DnsLabel("ringmaster-" + (o.job_id.empty() ? plan->name() : o.job_id));
    k.namespace_ = o.namespace_;
    k.image = o.image;
    k.nranks = np;
    k.ranks_per_pod = o.ranks_per_node > 0         ? o.ranks_per_node
                      : plan->ranks_per_node() > 0 ? plan->ranks_per_node()
                                                   : np;
    k.gpus_per_pod = o.gpus_per_node;
    k.coordinator = o.coordinator;
    k.job_id = o.job_id;
    k.backend = o.backend;
    k.token_secret = o.token_secret;
    k.tls_ca_secret = o.tls_ca_secret;
    k.deadline_s = DefaultDeadlineSeconds(*cases) + 60;
    // Every NCCL_* variable here reaches every container (NCCL_NVLS_ENABLE
    // included).
    k.nccl_env = NcclEnvironment();
    auto manifest = o.launcher == "k8s-job" ? BuildIndexedJobManifest(k)
                                            : BuildMpiJobManifest(k);
    if (!manifest.ok()) {
      Error(std::string(manifest.status().message()));
      return kExitUsage;
    }
    std::cout << *manifest;
    return kExitOk;
  }
  SlurmSpec spec;
  spec.job_name = "ringmaster-" + plan->name();
  spec.nranks = np;
  spec.ranks_per_node =
      o.ranks_per_node > 0 ? o.ranks_per_node : plan->ranks_per_node();
  spec.gpus_per_node = o.gpus_per_node;
  spec.partition = o.partition;
  spec.time_limit_s = DefaultDeadlineSeconds(*cases) + 60;
  spec.output = o.output;
  spec.worker = o.worker.empty() ? DefaultWorkerPath() : o.worker;
  spec.coordinator = o.coordinator;
  spec.job_id = o.job_id;
  spec.backend = o.backend;
  auto script = BuildSbatchScript(spec);
  if (!script.ok()) {
    Error(std::string(script.status().message()));
    return kExitUsage;
  }
  std::cout << *script;
  return kExitOk;
}

}  // namespace ringmaster
