#include "worker/node_relay.h"

#include <grpcpp/grpcpp.h>
#include <signal.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstdlib>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "comm/grpc_channel.h"
#include "core/placement.h"
#include "ringmaster/v1/coordinator.grpc.pb.h"
#include "spdlog/spdlog.h"
#include "worker/bootstrap.h"

namespace ringmaster {
namespace {

std::optional<int> EnvInt(const char* name) {
  absl::StatusOr<int> v = IntFromEnv(name);
  return v.ok() ? std::optional<int>(*v) : std::nullopt;
}

// A local call waiting for the coordinator's answer.
template <typename Req, typename Resp>
struct Waiting {
  grpc::ServerUnaryReactor* reactor;
  const Req* req;
  Resp* resp;
};

class Relay final : public NodeRelay, public v1::Coordinator::CallbackService {
 public:
  Relay(std::shared_ptr<grpc::Channel> up, std::string token,
        std::string job_id, NodePlace place)
      : token_(std::move(token)),
        job_id_(std::move(job_id)),
        place_(std::move(place)),
        up_(v1::Coordinator::NewStub(std::move(up))) {}

  absl::Status Listen(const std::string& address) {
    grpc::ServerBuilder builder;
    builder.AddListeningPort(address, grpc::InsecureServerCredentials());
    builder.RegisterService(this);
    server_ = builder.BuildAndStart();
    if (!server_) {
      return absl::UnavailableError("node relay: cannot listen on " + address);
    }
    loop_ = std::thread([this] { Loop(); });
    return absl::OkStatus();
  }

  ~Relay() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (loop_.joinable()) loop_.join();
    // Local calls still waiting are told to retry (they go nowhere now).
    FailWaiting(absl::UnavailableError("the node leader is stopping"));
    if (server_) server_->Shutdown(std::chrono::system_clock::now());
    if (stream_) {
      stream_ctx_->TryCancel();
      stream_->Finish().IgnoreError();
    }
  }

  void WaitForNode(absl::Duration timeout) override {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, absl::ToChronoSeconds(timeout), [&] {
      if (locals_.size() < static_cast<size_t>(place_.local_size)) return false;
      for (const auto& [rank, l] : locals_)
        if (!l.ended) return false;
      return true;
    });
  }

  // --- the node's ranks' calls ----------------------------------------------
  grpc::ServerUnaryReactor* Register(grpc::CallbackServerContext* ctx,
                                     const v1::RegisterRequest* req,
                                     v1::RegisterResponse* resp) override {
    grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
    if (!Allowed(*ctx, req->job_id(), reactor)) return reactor;
    {
      std::lock_guard<std::mutex> lock(mu_);
      Local& l = locals_[req->rank()];
      l.pid = req->fingerprint().pid();
      if (registers_.empty()) first_register_ = absl::Now();
      registers_.push_back({reactor, req, resp});
    }
    cv_.notify_all();
    return reactor;
  }
  grpc::ServerUnaryReactor* Rendezvous(grpc::CallbackServerContext* ctx,
                                       const v1::RendezvousRequest* req,
                                       v1::RendezvousResponse* resp) override {
    grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
    if (!Allowed(*ctx, req->job_id(), reactor)) return reactor;
    {
      std::lock_guard<std::mutex> lock(mu_);
      meets_.push_back({reactor, req, resp});
    }
    cv_.notify_all();
    return reactor;
  }
  grpc::ServerUnaryReactor* Heartbeat(grpc::CallbackServerContext* ctx,
                                      const v1::HeartbeatRequest* req,
                                      v1::HeartbeatResponse* resp) override {
    grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
    if (!Allowed(*ctx, req->job_id(), reactor)) return reactor;
    {
      std::lock_guard<std::mutex> lock(mu_);
      Local& l = locals_[req->rank()];
      l.heartbeat = *req;
      l.heard = absl::Now();
      resp->set_cancel(cancel_);
    }
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }
  grpc::ServerUnaryReactor* ReportResults(
      grpc::CallbackServerContext* ctx, const v1::ReportResultsRequest* req,
      v1::ReportResultsResponse* resp) override {
    grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
    if (!Allowed(*ctx, req->job_id(), reactor)) return reactor;
    {
      std::lock_guard<std::mutex> lock(mu_);
      reports_.push_back({reactor, req, resp});
    }
    cv_.notify_all();
    return reactor;
  }

 private:
  struct Local {
    int32_t pid = 0;
    absl::Time heard = absl::InfinitePast();
    v1::HeartbeatRequest heartbeat;
    bool ended = false;  // its final report was answered, or it is gone
    bool gone_sent = false;
  };

  // The node's ranks hold the job's worker token, like the coordinator's
  // worker calls.
  bool Allowed(const grpc::CallbackServerContext& ctx,
               const std::string& job_id, grpc::ServerUnaryReactor* reactor) {
    auto it = ctx.client_metadata().find("authorization");
    const bool ok = it != ctx.client_metadata().end() &&
                    std::string(it->second.data(), it->second.size()) ==
                        "Bearer " + token_ &&
                    job_id == job_id_;
    if (!ok) {
      reactor->Finish(grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                                   "not a rank of this node's job"));
    }
    return ok;
  }

  void Prepare(grpc::ClientContext* ctx, absl::Duration deadline) const {
    ctx->set_deadline(absl::ToChronoTime(absl::Now() + deadline));
    ctx->AddMetadata("authorization", "Bearer " + token_);
  }

  // One thread makes every call to the coordinator, one at a time: the
  // registrations once the node's ranks are in (or 2 s after the first),
  // each round of rendezvous polls, and a report whenever results wait or a
  // heartbeat interval has passed.
  void Loop() {
    absl::Time next_beat = absl::Now();
    std::unique_lock<std::mutex> lock(mu_);
    while (!stop_) {
      const absl::Time now = absl::Now();
      const bool register_due =
          !registers_.empty() && (registered_ + registers_.size() >=
                                      static_cast<size_t>(place_.local_size) ||
                                  now - first_register_ >= absl::Seconds(2));
      const bool beat_due = registered_ > 0 && now >= next_beat;
      if (!register_due && meets_.empty() && reports_.empty() && !beat_due) {
        absl::Time wake = registered_ > 0 ? next_beat : absl::InfiniteFuture();
        if (!registers_.empty())
          wake = std::min(wake, first_register_ + absl::Seconds(2));
        cv_.wait_for(lock, absl::ToChronoMilliseconds(std::max(
                               absl::Milliseconds(1),
                               std::min(wake - now, absl::Seconds(1)))));
        continue;
      }
      if (register_due) {
        auto batch = std::move(registers_);
        registers_.clear();
        lock.unlock();
        const bool ok = RegisterBatch(batch);
        lock.lock();
        if (ok) registered_ += batch.size();
        continue;
      }
      if (!meets_.empty()) {
        auto batch = std::move(meets_);
        meets_.clear();
        lock.unlock();
        MeetBatch(batch);
        lock.lock();
        continue;
      }
      auto batch = std::move(reports_);
      reports_.clear();
      v1::NodeReportRequest req = ReportLocked(batch, now);
      lock.unlock();
      Report(batch, std::move(req));
      lock.lock();
      next_beat = absl::Now() + interval_;
    }
  }

  // Whether the coordinator took them (else the ranks retry).
  bool RegisterBatch(
      const std::vector<Waiting<v1::RegisterRequest, v1::RegisterResponse>>&
          batch) {
    v1::RegisterNodeRequest req;
    req.set_job_id(job_id_);
    req.set_node(place_.node);
    for (const auto& w : batch) *req.add_ranks() = *w.req;
    grpc::ClientContext ctx;
    Prepare(&ctx, absl::Seconds(10));
    v1::RegisterNodeResponse resp;
    const absl::Status s =
        FromGrpc(up_->RegisterNode(&ctx, req, &resp), "RegisterNode");
    if (s.ok() && resp.registered().heartbeat_interval_ms() > 0) {
      std::lock_guard<std::mutex> lock(mu_);
      interval_ = absl::Milliseconds(resp.registered().heartbeat_interval_ms());
    }
    for (const auto& w : batch) {
      if (s.ok()) *w.resp = resp.registered();
      w.reactor->Finish(ToGrpc(s));
    }
    return s.ok();
  }

  void MeetBatch(
      const std::vector<Waiting<v1::RendezvousRequest, v1::RendezvousResponse>>&
          batch) {
    v1::RendezvousNodeRequest req;
    req.set_job_id(job_id_);
    req.set_attempt(batch.front().req->attempt());
    req.set_peers(true);  // the ranks build their TCP mesh from it
    for (const auto& w : batch) *req.add_ranks() = *w.req;
    grpc::ClientContext ctx;
    Prepare(&ctx, absl::Seconds(10));
    v1::RendezvousResponse resp;
    const absl::Status s =
        FromGrpc(up_->RendezvousNode(&ctx, req, &resp), "RendezvousNode");
    for (const auto& w : batch) {
      if (s.ok()) *w.resp = resp;
      w.reactor->Finish(ToGrpc(s));
    }
  }

  // The report: heartbeats of the ranks heard from within three intervals
  // (a silent rank is left out and ages at the coordinator), the ranks whose
  // process ended before their final report, and the waiting reports.
  v1::NodeReportRequest ReportLocked(
      const std::vector<
          Waiting<v1::ReportResultsRequest, v1::ReportResultsResponse>>& batch,
      absl::Time now) {
    v1::NodeReportRequest req;
    req.set_job_id(job_id_);
    for (auto& [rank, l] : locals_) {
      if (l.ended) continue;
      if (now - l.heard <= 3 * interval_) *req.add_heartbeats() = l.heartbeat;
      if (l.pid > 0 && !l.gone_sent && kill(l.pid, 0) != 0 && errno == ESRCH) {
        v1::RankGone* g = req.add_gone();
        g->set_rank(rank);
        g->set_detail(absl::StrFormat(
            "process %d is gone (seen by its node leader on %s)", l.pid,
            place_.node));
        l.gone_sent = true;
        l.ended = true;
      }
    }
    for (const auto& w : batch) *req.add_reports() = *w.req;
    return req;
  }

  void Report(const std::vector<Waiting<v1::ReportResultsRequest,
                                        v1::ReportResultsResponse>>& batch,
              v1::NodeReportRequest req) {
    req.set_seq(++seq_);
    req.set_heartbeats_first(!batch.empty());
    v1::NodeReportResponse resp;
    absl::Status s = Exchange(req, &resp);
    if (!s.ok()) s = Exchange(req, &resp);  // once more on a fresh stream
    std::lock_guard<std::mutex> lock(mu_);
    if (s.ok()) cancel_ = resp.cancel();
    for (size_t i = 0; i < batch.size(); ++i) {
      const auto& w = batch[i];
      if (s.ok() && static_cast<int>(i) < resp.reports_size()) {
        *w.resp = resp.reports(static_cast<int>(i));
        if (w.req->final()) locals_[w.req->rank()].ended = true;
        w.reactor->Finish(grpc::Status::OK);
      } else {
        // The rank's client retries a transient failure.
        w.reactor->Finish(ToGrpc(
            s.ok() ? absl::UnavailableError("node report: no answer") : s));
      }
    }
    cv_.notify_all();
  }

  // One message on the node's stream (opened on first use, and again after
  // a failure), and its answer. A message with reports is answered twice:
  // its heartbeats' answer (a cancel there reaches the local ranks at once,
  // not after the reports' commit), then its reports'.
  absl::Status Exchange(const v1::NodeReportRequest& req,
                        v1::NodeReportResponse* resp) {
    if (!stream_) {
      stream_ctx_ = std::make_unique<grpc::ClientContext>();
      stream_ctx_->AddMetadata("authorization", "Bearer " + token_);
      stream_ = up_->NodeSession(stream_ctx_.get());
    }
    bool read = stream_->Write(req) && stream_->Read(resp);
    while (read && resp->reports_follow()) {
      if (resp->cancel()) {
        std::lock_guard<std::mutex> lock(mu_);
        cancel_ = true;
      }
      read = stream_->Read(resp);
    }
    if (read) return absl::OkStatus();
    const grpc::Status end = stream_->Finish();
    stream_.reset();
    stream_ctx_.reset();
    return FromGrpc(end.ok() ? grpc::Status(grpc::StatusCode::UNAVAILABLE,
                                            "the stream ended")
                             : end,
                    "NodeSession");
  }

  void FailWaiting(const absl::Status& s) {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& w : registers_) w.reactor->Finish(ToGrpc(s));
    for (auto& w : meets_) w.reactor->Finish(ToGrpc(s));
    for (auto& w : reports_) w.reactor->Finish(ToGrpc(s));
    registers_.clear();
    meets_.clear();
    reports_.clear();
  }

  const std::string token_;
  const std::string job_id_;
  const NodePlace place_;
  std::unique_ptr<v1::Coordinator::Stub> up_;
  std::unique_ptr<grpc::Server> server_;
  std::thread loop_;
  // The node stream: the loop thread's only.
  std::unique_ptr<grpc::ClientContext> stream_ctx_;
  std::unique_ptr<
      grpc::ClientReaderWriter<v1::NodeReportRequest, v1::NodeReportResponse>>
      stream_;
  int64_t seq_ = 0;

  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  bool cancel_ = false;
  absl::Duration interval_ = absl::Seconds(1);
  size_t registered_ = 0;  // local ranks registered upstream
  absl::Time first_register_ = absl::InfinitePast();
  std::map<int, Local> locals_;
  std::vector<Waiting<v1::RegisterRequest, v1::RegisterResponse>> registers_;
  std::vector<Waiting<v1::RendezvousRequest, v1::RendezvousResponse>> meets_;
  std::vector<Waiting<v1::ReportResultsRequest, v1::ReportResultsResponse>>
      reports_;
};

}  // namespace

std::optional<NodePlace> NodePlaceFromEnvironment() {
  NodePlace p;
  std::optional<int> rank = EnvInt("RINGMASTER_LOCAL_RANK"),
                     size = EnvInt("RINGMASTER_LOCAL_SIZE");
  if (!rank || !size) {
    rank = EnvInt("OMPI_COMM_WORLD_LOCAL_RANK");
    size = EnvInt("OMPI_COMM_WORLD_LOCAL_SIZE");
  }
  if (!rank || !size) {
    rank = EnvInt("SLURM_LOCALID");
    size = EnvInt("SLURM_NTASKS_PER_NODE");
  }
  if (!rank || !size || *size < 1 || *rank >= *size) return std::nullopt;
  p.local_rank = *rank;
  p.local_size = *size;
  const char* node = std::getenv("RINGMASTER_NODE");
  p.node = node != nullptr && *node != '\0' ? node : HostName();
  return p;
}

std::string NodeRelayAddress(const std::string& job_id,
                             const NodePlace& place) {
  return absl::StrFormat("unix-abstract:ringmaster-node-%s-%s", job_id,
                         place.node);
}

absl::StatusOr<std::unique_ptr<NodeRelay>> NodeRelay::Start(
    const std::string& coordinator, const std::string& token,
    const std::string& job_id, const NodePlace& place) {
  auto channel = MakeCoordinatorChannel(coordinator, TlsFiles::FromEnv());
  if (!channel.ok()) return channel.status();
  auto relay = std::make_unique<Relay>(*channel, token, job_id, place);
  absl::Status s = relay->Listen(NodeRelayAddress(job_id, place));
  if (!s.ok()) return s;
  spdlog::info("node {}: leader of {} local rank(s), relay {}", place.node,
               place.local_size, NodeRelayAddress(job_id, place));
  return std::unique_ptr<NodeRelay>(std::move(relay));
}

}  // namespace ringmaster
