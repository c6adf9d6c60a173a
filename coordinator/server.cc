#include "coordinator/server.h"

#include <grpcpp/ext/health_check_service_server_builder_option.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <list>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "comm/grpc_channel.h"
#include "coordinator/store.h"
#include "coordinator/supervisor.h"
#include "core/plan.h"
#include "core/sweep.h"
#include "ringmaster/v1/coordinator.grpc.pb.h"
#include "spdlog/spdlog.h"

namespace ringmaster {
namespace {

// Constant-time comparison so a token cannot be guessed byte by byte.
bool SameToken(std::string_view a, std::string_view b) {
  if (a.size() != b.size() || a.empty()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= a[i] ^ b[i];
  return diff == 0;
}

v1::JobUpdate ToUpdate(const JobSnapshot& s) {
  v1::JobUpdate u;
  *u.mutable_job() = s.job;
  u.set_cases(s.cases);
  u.set_last_case(s.last_case.spec_name());
  u.set_last_size_bytes(s.last_case.size_bytes());
  u.set_last_seq(s.last_case.seq());
  for (const RankStatus& r : s.ranks) {
    v1::RankProgress* p = u.add_ranks();
    p->set_rank(r.rank);
    p->set_registered(r.registered);
    p->set_host(r.host);
    p->set_pid(r.pid);
    p->set_progress_seq(r.progress_seq);
    p->set_entered_seq(r.entered_seq);
    p->set_final(r.final);
  }
  return u;
}

class WatchHub;

// One WatchJob stream: the hub's thread offers a fresh snapshot whenever
// the job changed and no write is in flight; the stream ends after the
// terminal state is written.
class WatchReactor : public grpc::ServerWriteReactor<v1::JobUpdate> {
 public:
  WatchReactor(JobManager* manager, std::string job_id)
      : manager_(manager), job_id_(std::move(job_id)) {}

  void Tick() {
    std::lock_guard<std::mutex> lock(mu_);
    if (writing_ || finished_) return;
    if (cancelled_) {
      FinishLocked(grpc::Status::CANCELLED);
      return;
    }
    auto snap = manager_->Snapshot(job_id_);
    if (!snap.ok()) {
      FinishLocked(ToGrpc(snap.status()));
      return;
    }
    if (sent_any_ && snap->version == last_version_) return;
    sent_any_ = true;
    last_version_ = snap->version;
    update_ = ToUpdate(*snap);
    terminal_ = TerminalState(snap->job.state());
    writing_ = true;
    StartWrite(&update_);
  }
  bool done() const { return done_.load(); }

  void OnWriteDone(bool ok) override {
    std::lock_guard<std::mutex> lock(mu_);
    writing_ = false;
    if (!ok) {
      FinishLocked(grpc::Status::CANCELLED);
    } else if (terminal_) {
      FinishLocked(grpc::Status::OK);
    }
  }
  void OnCancel() override {
    std::lock_guard<std::mutex> lock(mu_);
    cancelled_ = true;
    if (!writing_) FinishLocked(grpc::Status::CANCELLED);
  }
  void OnDone() override { done_.store(true); }  // the hub deletes it

 private:
  void FinishLocked(const grpc::Status& s) {
    if (finished_) return;
    finished_ = true;
    Finish(s);
  }
  JobManager* manager_;
  std::string job_id_;
  std::mutex mu_;
  bool writing_ = false, finished_ = false, cancelled_ = false;
  bool sent_any_ = false, terminal_ = false;
  uint64_t last_version_ = 0;
  v1::JobUpdate update_;
  std::atomic<bool> done_{false};
};

// Owns the watch streams and ticks them from one thread (5 Hz).
class WatchHub {
 public:
  WatchHub() : thread_([this] { Loop(); }) {}
  ~WatchHub() {
    StopThread();
    for (WatchReactor* r : reactors_) delete r;  // all done after Wait()
  }
  // Joins the ticking thread (which may be returning from a reactor's
  // Finish, which reads the server): before the server is deleted.
  void StopThread() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }
  void Add(WatchReactor* r) {
    std::lock_guard<std::mutex> lock(mu_);
    reactors_.push_back(r);
  }
  size_t size() {
    std::lock_guard<std::mutex> lock(mu_);
    return reactors_.size();
  }

 private:
  void Loop() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!stop_) {
      for (auto it = reactors_.begin(); it != reactors_.end();) {
        if ((*it)->done()) {
          delete *it;
          it = reactors_.erase(it);
        } else {
          (*it)->Tick();
          ++it;
        }
      }
      cv_.wait_for(lock, std::chrono::milliseconds(200));
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::list<WatchReactor*> reactors_;
  std::thread thread_;
};

// Threads for handlers that wait on the store: a report is acknowledged
// only once committed, and gRPC's callback threads (a handful) must not all
// sit in commits while heartbeats queue behind them. Many waiters here also
// make the store's group commits larger (one fsync for all of them).
// Hand-written: a fixed pool over one queue, drained before it stops.
class BlockingPool {
 public:
  explicit BlockingPool(int threads) {
    for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { Loop(); });
  }
  ~BlockingPool() { Stop(); }
  // Runs what is queued, then joins the threads; once only.
  void Stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& t : threads_) {
      if (t.joinable()) t.join();
    }
  }
  void Run(std::function<void()> fn) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back(std::move(fn));
    }
    cv_.notify_one();
  }

 private:
  void Loop() {
    for (;;) {
      std::function<void()> fn;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
        if (queue_.empty()) return;  // stopping, and nothing left
        fn = std::move(queue_.front());
        queue_.pop_front();
      }
      fn();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

// Node reports with results, stored together: one thread takes every
// report queued while it stored the last ones and hands them to the job
// manager as one batch (one transaction); each report's answer goes to its
// callback. The reports' heartbeats were taken before they were queued. One
// writer instead of a thread per report waiting on the store: at cluster scale
// the waits' context switches cost more than the commits.
class ReportBatcher {
 public:
  using Done = std::function<void(absl::StatusOr<v1::NodeReportResponse>)>;
  explicit ReportBatcher(JobManager* manager)
      : manager_(manager), thread_([this] { Loop(); }) {}
  ~ReportBatcher() { Stop(); }
  // Answers what is queued, then joins the thread; once only.
  void Stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }
  // `cancel`: the answer to the request's heartbeats said stop.
  void Submit(std::shared_ptr<v1::NodeReportRequest> req, bool cancel,
              Done done) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back({std::move(req), cancel, std::move(done)});
    }
    cv_.notify_one();
  }

 private:
  struct Item {
    std::shared_ptr<v1::NodeReportRequest> req;
    bool cancel = false;
    Done done;
  };
  // At most this many reports in one transaction, so the first of a long
  // queue is not held for all of them.
  static constexpr size_t kMaxBatch = 512;
  // Transactions start at most this often: reports that arrive meanwhile
  // share the next one (one fsync, fewer and fuller pages written), for at
  // most this much more latency.
  static constexpr std::chrono::milliseconds kLinger{4};

  void Loop() {
    LowerThisThreadPriority(kBackgroundNice);
    std::vector<Item> batch;
    std::vector<v1::NodeReportRequest*> reqs;
    auto last = std::chrono::steady_clock::now() - kLinger;
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
        cv_.wait_until(lock, last + kLinger,
                       [this] { return stop_ || queue_.size() >= kMaxBatch; });
        last = std::chrono::steady_clock::now();
        if (queue_.empty()) return;  // stopping, and nothing left
        const size_t take = std::min(queue_.size(), kMaxBatch);
        batch.assign(std::make_move_iterator(queue_.begin()),
                     std::make_move_iterator(queue_.begin() + take));
        queue_.erase(queue_.begin(), queue_.begin() + take);
      }
      reqs.clear();
      for (const Item& item : batch) reqs.push_back(item.req.get());
      auto answers = manager_->NodeReports(reqs);
      for (size_t i = 0; i < batch.size(); ++i) {
        // The heartbeats' cancel holds for the reports' answer too.
        if (answers[i].ok() && batch[i].cancel) answers[i]->set_cancel(true);
        batch[i].done(std::move(answers[i]));
      }
      batch.clear();
    }
  }

  JobManager* manager_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Item> queue_;
  bool stop_ = false;
  std::thread thread_;  // last: starts once the rest is built
};

// One node leader's NodeSession stream. Reads continue while earlier
// messages are processed: heartbeats are taken and answered at once on
// gRPC's thread, reports by the report batcher after their commit (a
// message with both is answered twice when it asks for heartbeats_first);
// answers are written one at a time in the order they are ready. Deleted
// once gRPC is done with it and the batcher holds none of its messages.
class NodeSessionReactor
    : public grpc::ServerBidiReactor<v1::NodeReportRequest,
                                     v1::NodeReportResponse> {
 public:
  // auth(job_id): whether this stream may speak for the job.
  using Auth = std::function<absl::Status(const std::string&)>;
  // heartbeats(request): takes its heartbeats and gone marks, answers them.
  using Heartbeats = std::function<absl::StatusOr<v1::NodeReportResponse>(
      const v1::NodeReportRequest&)>;
  NodeSessionReactor(Auth auth, Heartbeats heartbeats, ReportBatcher* batcher)
      : auth_(std::move(auth)),
        heartbeats_(std::move(heartbeats)),
        batcher_(batcher) {
    StartRead(&in_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {  // the leader closed its side (or the stream broke)
      std::lock_guard<std::mutex> lock(mu_);
      read_closed_ = true;
      MaybeFinishLocked();
      return;
    }
    auto req = std::make_shared<v1::NodeReportRequest>(std::move(in_));
    in_.Clear();
    absl::Status allowed = absl::OkStatus();
    if (job_id_.empty()) {
      allowed = auth_(req->job_id());
      if (allowed.ok()) job_id_ = req->job_id();
    } else if (req->job_id() != job_id_) {
      allowed = absl::PermissionDeniedError(
          "a node session speaks for one job: " + job_id_);
    }
    if (!allowed.ok()) {
      std::lock_guard<std::mutex> lock(mu_);
      EndLocked(ToGrpc(allowed));
      return;
    }
    StartRead(&in_);
    const int64_t seq = req->seq();
    absl::StatusOr<v1::NodeReportResponse> beat = heartbeats_(*req);
    if (!beat.ok() || req->reports().empty()) {
      Answer(std::move(beat), seq);
      return;
    }
    const bool first = req->heartbeats_first();
    const bool cancel = beat->cancel();
    if (first) {
      beat->set_reports_follow(true);
      Answer(std::move(beat), seq);
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++holds_;
    }
    batcher_->Submit(std::move(req), cancel,
                     [this, seq](absl::StatusOr<v1::NodeReportResponse> resp) {
                       Answer(std::move(resp), seq);
                       Release();
                     });
  }

  void OnWriteDone(bool ok) override {
    std::lock_guard<std::mutex> lock(mu_);
    writing_ = false;
    if (pending_end_) {  // ended while this write was in flight
      Finish(*pending_end_);
      pending_end_.reset();
      return;
    }
    if (!ok) {
      EndLocked(grpc::Status::CANCELLED);
      return;
    }
    WriteNextLocked();
  }

  void OnDone() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
    }
    Release();
  }

 private:
  void Answer(absl::StatusOr<v1::NodeReportResponse> resp, int64_t seq) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!resp.ok()) {
      EndLocked(ToGrpc(resp.status()));
      return;
    }
    if (ended_) return;
    resp->set_seq(seq);
    outbox_.push_back(std::move(*resp));
    WriteNextLocked();
  }
  void WriteNextLocked() {
    if (writing_ || done_ || ended_) return;
    if (outbox_.empty()) {
      MaybeFinishLocked();
      return;
    }
    out_ = std::move(outbox_.front());
    outbox_.pop_front();
    writing_ = true;
    StartWrite(&out_);
  }
  // After the leader closed its side, the stream ends once every answer
  // is written (none pending in the batcher).
  void MaybeFinishLocked() {
    if (read_closed_ && !writing_ && outbox_.empty() && holds_ == 1)
      EndLocked(grpc::Status::OK);
  }
  // Finish, once; after the write in flight, if any.
  void EndLocked(const grpc::Status& s) {
    if (ended_ || done_) return;
    ended_ = true;
    outbox_.clear();
    if (writing_) {
      pending_end_ = s;
    } else {
      Finish(s);
    }
  }
  void Release() {
    bool last = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      last = --holds_ == 0;
      if (!last && !done_) MaybeFinishLocked();
    }
    if (last) delete this;
  }

  Auth auth_;
  Heartbeats heartbeats_;
  ReportBatcher* batcher_;
  v1::NodeReportRequest in_;
  v1::NodeReportResponse out_;
  std::string job_id_;  // set by the first message (gRPC's read thread)
  std::mutex mu_;
  std::deque<v1::NodeReportResponse> outbox_;
  int holds_ = 1;  // gRPC's (until OnDone) and one per batched message
  bool writing_ = false, read_closed_ = false, ended_ = false, done_ = false;
  std::optional<grpc::Status> pending_end_;
};

class Service final : public v1::Coordinator::CallbackService {
 public:
  Service(JobManager* manager, const ServerOptions& options)
      : manager_(manager), options_(options) {}

  grpc::ServerUnaryReactor* Register(grpc::CallbackServerContext* ctx,
                                     const v1::RegisterRequest* req,
                                     v1::RegisterResponse* resp) override {
    return Respond(ctx, kWorkerCall, req->job_id(), [&](const Caller&) {
      return Assign(manager_->Register(*req), resp);
    });
  }
  grpc::ServerUnaryReactor* Rendezvous(grpc::CallbackServerContext* ctx,
                                       const v1::RendezvousRequest* req,
                                       v1::RendezvousResponse* resp) override {
    return Respond(ctx, kWorkerCall, req->job_id(), [&](const Caller&) {
      return Assign(manager_->Rendezvous(*req), resp);
    });
  }
  grpc::ServerUnaryReactor* Heartbeat(grpc::CallbackServerContext* ctx,
                                      const v1::HeartbeatRequest* req,
                                      v1::HeartbeatResponse* resp) override {
    return Respond(ctx, kWorkerCall, req->job_id(), [&](const Caller&) {
      return Assign(manager_->Heartbeat(*req), resp);
    });
  }
  grpc::ServerUnaryReactor* ReportResults(
      grpc::CallbackServerContext* ctx, const v1::ReportResultsRequest* req,
      v1::ReportResultsResponse* resp) override {
    return RespondFromPool(ctx, req->job_id(), [this, req, resp] {
      return Assign(manager_->ReportResults(*req), resp);
    });
  }
  grpc::ServerUnaryReactor* RegisterNode(
      grpc::CallbackServerContext* ctx, const v1::RegisterNodeRequest* req,
      v1::RegisterNodeResponse* resp) override {
    return Respond(ctx, kWorkerCall, req->job_id(), [&](const Caller&) {
      absl::Status s = Assign(manager_->RegisterNode(*req), resp);
      if (s.ok()) {
        spdlog::info("job {}: node {} registered {} rank(s) in one call",
                     req->job_id(), req->node(), req->ranks_size());
      }
      return s;
    });
  }
  grpc::ServerUnaryReactor* RendezvousNode(
      grpc::CallbackServerContext* ctx, const v1::RendezvousNodeRequest* req,
      v1::RendezvousResponse* resp) override {
    return Respond(ctx, kWorkerCall, req->job_id(), [&](const Caller&) {
      return Assign(manager_->RendezvousNode(*req), resp);
    });
  }
  grpc::ServerUnaryReactor* NodeReport(grpc::CallbackServerContext* ctx,
                                       const v1::NodeReportRequest* req,
                                       v1::NodeReportResponse* resp) override {
    return RespondLater(
        ctx, req->job_id(), [this, req, resp](grpc::ServerUnaryReactor* r) {
          // Heartbeats are taken now; reports after their commit.
          absl::StatusOr<v1::NodeReportResponse> beat =
              manager_->NodeHeartbeats(*req);
          if (!beat.ok() || req->reports().empty()) {
            r->Finish(ToGrpc(Assign(std::move(beat), resp)));
            return;
          }
          // A copy: the batcher stamps the results it stores.
          batcher_.Submit(
              std::make_shared<v1::NodeReportRequest>(*req), beat->cancel(),
              [r, resp](absl::StatusOr<v1::NodeReportResponse> answer) {
                r->Finish(ToGrpc(Assign(std::move(answer), resp)));
              });
        });
  }
  grpc::ServerBidiReactor<v1::NodeReportRequest, v1::NodeReportResponse>*
  NodeSession(grpc::CallbackServerContext* ctx) override {
    return new NodeSessionReactor(
        [this, ctx](const std::string& job_id) {
          return Authenticate(*ctx, kWorkerCall, job_id).status();
        },
        [this](const v1::NodeReportRequest& req) {
          return manager_->NodeHeartbeats(req);
        },
        &batcher_);
  }
  grpc::ServerUnaryReactor* SubmitPlan(grpc::CallbackServerContext* ctx,
                                       const v1::SubmitPlanRequest* req,
                                       v1::SubmitPlanResponse* resp) override {
    return Respond(
        ctx, kUserCall, "", [&](const Caller& caller) -> absl::Status {
          if (options_.submit)
            return Assign(options_.submit(*req, caller), resp);
          auto job = JobFromSubmit(*req);
          if (!job.ok()) return job.status();
          job->set_user(caller.user);
          bool duplicate = false;
          auto created = manager_->CreateJob(std::move(*job), &duplicate);
          if (!created.ok()) return created.status();
          resp->set_duplicate(duplicate);
          *resp->mutable_job() = JobSummary(*created);
          return absl::OkStatus();
        });
  }
  grpc::ServerUnaryReactor* GetJob(grpc::CallbackServerContext* ctx,
                                   const v1::GetJobRequest* req,
                                   v1::GetJobResponse* resp) override {
    return Respond(ctx, kUserCall, "", [&](const Caller& caller) {
      auto job = VisibleJob(caller, req->job_id());
      if (!job.ok()) return job.status();
      *resp->mutable_job() = std::move(*job);
      resp->mutable_job()->clear_worker_token();
      return absl::OkStatus();
    });
  }
  grpc::ServerUnaryReactor* ListJobs(grpc::CallbackServerContext* ctx,
                                     const v1::ListJobsRequest* req,
                                     v1::ListJobsResponse* resp) override {
    return Respond(ctx, kUserCall, "", [&](const Caller& caller) {
      std::vector<v1::JobState> states;
      for (int st : req->states())
        states.push_back(static_cast<v1::JobState>(st));
      std::string user =
          caller.role == Caller::Role::kAdmin ? req->user() : caller.user;
      int limit = req->limit() > 0 ? std::min(req->limit(), 10000) : 100;
      for (auto& j : manager_->ListJobs(states, user, limit))
        *resp->add_jobs() = std::move(j);
      return absl::OkStatus();
    });
  }
  grpc::ServerUnaryReactor* CancelJob(grpc::CallbackServerContext* ctx,
                                      const v1::CancelJobRequest* req,
                                      v1::CancelJobResponse* resp) override {
    return Respond(ctx, kUserCall, "", [&](const Caller& caller) {
      auto job = VisibleJob(caller, req->job_id());
      if (!job.ok()) return job.status();
      absl::Status s = manager_->RequestCancel(req->job_id());
      if (!s.ok()) return s;
      *resp->mutable_job() = JobSummary(*job);
      return absl::OkStatus();
    });
  }
  grpc::ServerWriteReactor<v1::JobUpdate>* WatchJob(
      grpc::CallbackServerContext* ctx,
      const v1::WatchJobRequest* req) override {
    auto caller = Authenticate(*ctx, kUserCall, "");
    absl::Status s = caller.status();
    if (s.ok()) s = VisibleJob(*caller, req->job_id()).status();
    if (!s.ok()) {
      // A reactor that only finishes.
      class Refuse : public grpc::ServerWriteReactor<v1::JobUpdate> {
       public:
        explicit Refuse(const grpc::Status& s) { Finish(s); }
        void OnDone() override { delete this; }
      };
      return new Refuse(ToGrpc(s));
    }
    auto* r = new WatchReactor(manager_, req->job_id());
    r->Tick();  // the current state at once; changes from the hub
    hub_.Add(r);
    return r;
  }
  grpc::ServerUnaryReactor* QueryResults(
      grpc::CallbackServerContext* ctx, const v1::QueryResultsRequest* req,
      v1::QueryResultsResponse* resp) override {
    return Respond(
        ctx, kUserCall, "", [&](const Caller& caller) -> absl::Status {
          auto job = VisibleJob(caller, req->job_id());
          if (!job.ok()) return job.status();
          int limit = req->limit() > 0 ? std::min(req->limit(), 10000) : 10000;
          auto results =
              manager_->QueryResults(req->job_id(), req->after_seq(), limit,
                                     req->status(), req->attempt());
          if (!results.ok()) return results.status();
          for (auto& r : *results) *resp->add_results() = std::move(r);
          return absl::OkStatus();
        });
  }

  // Ends the report batcher, the handlers' pool and the watch streams'
  // thread (after the server stopped taking calls, before it is deleted).
  void StopThreads() {
    batcher_.Stop();
    pool_.Stop();
    hub_.StopThread();
  }

 private:
  enum CallKind { kWorkerCall, kUserCall };

  template <typename T, typename M>
  static absl::Status Assign(absl::StatusOr<T> value, M* out) {
    if (!value.ok()) return value.status();
    *out = std::move(*value);
    return absl::OkStatus();
  }

  // The job, when the caller may see it (its owner or an admin).
  absl::StatusOr<v1::Job> VisibleJob(const Caller& caller,
                                     const std::string& job_id) {
    auto job = manager_->GetJob(job_id);
    if (!job.ok()) return job.status();
    if (caller.role != Caller::Role::kAdmin && job->user() != caller.user) {
      return absl::PermissionDeniedError("job " + job_id +
                                         " belongs to another user");
    }
    return job;
  }

  absl::StatusOr<Caller> Authenticate(const grpc::CallbackServerContext& ctx,
                                      CallKind kind,
                                      const std::string& job_id) {
    const auto& md = ctx.client_metadata();
    // The documented header limit, counted as HTTP/2 does (name + value +
    // 32 per entry): gRPC's own limit lets larger header blocks through.
    size_t header_bytes = 0;
    for (const auto& [name, value] : md)
      header_bytes += name.size() + value.size() + 32;
    if (header_bytes > static_cast<size_t>(options_.max_metadata_bytes)) {
      return absl::ResourceExhaustedError(absl::StrFormat(
          "request headers are %d bytes, more than the %d allowed",
          header_bytes, options_.max_metadata_bytes));
    }
    auto it = md.find("authorization");
    if (it == md.end())
      return absl::UnauthenticatedError("missing bearer token");
    std::string_view value(it->second.data(), it->second.size());
    constexpr std::string_view kPrefix = "Bearer ";
    if (value.substr(0, kPrefix.size()) != kPrefix)
      return absl::UnauthenticatedError("malformed authorization header");
    std::string_view token = value.substr(kPrefix.size());
    Caller caller;
    bool known = false;
    if (SameToken(token, options_.admin_token)) {
      caller.role = Caller::Role::kAdmin;
      caller.user = "admin";
      known = true;
    }
    for (const auto& [t, user] : options_.user_tokens) {
      if (SameToken(token, t)) {
        caller.role = Caller::Role::kUser;
        caller.user = user;
        known = true;
      }
    }
    if (!known && kind == kWorkerCall && !job_id.empty() &&
        SameToken(token, manager_->WorkerToken(job_id))) {
      caller.role = Caller::Role::kWorker;
      caller.job_id = job_id;
      known = true;
    }
    if (!known) {
      // A worker token used elsewhere is a wrong role, not a wrong token.
      if (manager_->IsWorkerToken(std::string(token))) {
        return absl::PermissionDeniedError(
            kind == kUserCall ? "a worker token cannot make user calls"
                              : "this worker token belongs to another job");
      }
      return absl::UnauthenticatedError("unknown token");
    }
    if (kind == kWorkerCall && caller.role == Caller::Role::kUser) {
      return absl::PermissionDeniedError(
          "a user token cannot make worker calls");
    }
    return caller;
  }

  template <typename F>
  grpc::ServerUnaryReactor* Respond(grpc::CallbackServerContext* ctx,
                                    CallKind kind, const std::string& job_id,
                                    F&& handler) {
    grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
    auto caller = Authenticate(*ctx, kind, job_id);
    if (!caller.ok()) {
      reactor->Finish(ToGrpc(caller.status()));
      return reactor;
    }
    reactor->Finish(ToGrpc(handler(*caller)));
    return reactor;
  }

  // A worker call answered later, off gRPC's thread: authenticated here,
  // then `start(reactor)` arranges the Finish (request and response live
  // until then).
  template <typename F>
  grpc::ServerUnaryReactor* RespondLater(grpc::CallbackServerContext* ctx,
                                         const std::string& job_id, F start) {
    grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
    auto caller = Authenticate(*ctx, kWorkerCall, job_id);
    if (!caller.ok()) {
      reactor->Finish(ToGrpc(caller.status()));
      return reactor;
    }
    start(reactor);
    return reactor;
  }

  // A worker call whose handler waits on the store, answered from the pool.
  template <typename F>
  grpc::ServerUnaryReactor* RespondFromPool(grpc::CallbackServerContext* ctx,
                                            const std::string& job_id,
                                            F handler) {
    return RespondLater(
        ctx, job_id,
        [this, handler = std::move(handler)](grpc::ServerUnaryReactor* r) {
          pool_.Run([r, handler] { r->Finish(ToGrpc(handler())); });
        });
  }

  JobManager* manager_;
  ServerOptions options_;
  WatchHub hub_;
  BlockingPool pool_{32};
  ReportBatcher batcher_{manager_};
};

class GrpcCoordinatorServer : public CoordinatorServer {
 public:
  GrpcCoordinatorServer(std::unique_ptr<Service> service,
                        std::unique_ptr<grpc::Server> server, int port)
      : service_(std::move(service)), server_(std::move(server)), port_(port) {}
  ~GrpcCoordinatorServer() override { Shutdown(); }
  int port() const override { return port_; }
  void Shutdown() override {
    if (!server_) return;
    server_->Shutdown(std::chrono::system_clock::now() +
                      std::chrono::seconds(1));
    server_->Wait();
    // Every call is answered; a pool thread may still be returning from
    // its Finish, which reads the server.
    service_->StopThreads();
    server_.reset();
  }

 private:
  std::unique_ptr<Service> service_;
  std::unique_ptr<grpc::Server> server_;
  int port_;
};

}  // namespace

bool IsLoopbackAddress(const std::string& address) {
  std::string host = address;
  if (absl::StartsWith(host, "[")) {
    host = host.substr(1, host.find(']') - 1);
  } else if (std::count(host.begin(), host.end(), ':') == 1) {
    host = host.substr(0, host.find(':'));
  }
  return host == "localhost" || host == "::1" || absl::StartsWith(host, "127.");
}

absl::StatusOr<std::unique_ptr<CoordinatorServer>> CoordinatorServer::Start(
    JobManager* manager, const std::string& address, const std::string& token) {
  ServerOptions options;
  options.address = address;
  options.admin_token = token;
  options.max_message_bytes = 16 << 20;
  return Start(manager, options);
}

absl::StatusOr<std::unique_ptr<CoordinatorServer>> CoordinatorServer::Start(
    JobManager* manager, const ServerOptions& options) {
  const bool tls =
      !options.tls_cert_pem.empty() && !options.tls_key_pem.empty();
  if (!tls && !IsLoopbackAddress(options.address)) {
    return absl::PermissionDeniedError(absl::StrFormat(
        "%s is not a loopback address: a non-loopback listener needs TLS "
        "(--tls-cert and --tls-key)",
        options.address));
  }
  if (options.admin_token.size() < 16)
    return absl::InvalidArgumentError("the admin token is missing or short");
  auto service = std::make_unique<Service>(manager, options);
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  int port = 0;
  std::shared_ptr<grpc::ServerCredentials> creds;
  if (tls) {
    grpc::SslServerCredentialsOptions ssl(
        options.tls_client_ca_pem.empty()
            ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
            : GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
    ssl.pem_root_certs = options.tls_client_ca_pem;
    ssl.pem_key_cert_pairs.push_back(
        {options.tls_key_pem, options.tls_cert_pem});
    creds = grpc::SslServerCredentials(ssl);
  } else {
    creds = grpc::InsecureServerCredentials();
  }
  builder.AddListeningPort(options.address, creds, &port);
  builder.RegisterService(service.get());
  builder.SetMaxReceiveMessageSize(options.max_message_bytes);
  builder.AddChannelArgument(GRPC_ARG_MAX_METADATA_SIZE,
                             options.max_metadata_bytes);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder.AddChannelArgument(
      GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 1000);
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, 256);
  // No BDP probes: every message would start one (a ping, a timer), a
  // cost per message on thousands of connections for flow-control windows
  // the coordinator's small messages do not need.
  builder.AddChannelArgument(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || port == 0) {
    return absl::UnavailableError("cannot listen on " + options.address);
  }
  return std::unique_ptr<CoordinatorServer>(
      new GrpcCoordinatorServer(std::move(service), std::move(server), port));
}

}  // namespace ringmaster
