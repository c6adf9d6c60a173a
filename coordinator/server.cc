#include "coordinator/server.h"

#include <grpcpp/grpcpp.h>

#include <chrono>

#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "core/plan.h"
#include "core/sweep.h"
#include "ringmaster/v1/coordinator.grpc.pb.h"

namespace ringmaster {
namespace {

grpc::Status ToGrpc(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()),
                      std::string(s.message()));
}

// Constant-time comparison so the token cannot be guessed byte by byte.
bool SameToken(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= a[i] ^ b[i];
  return diff == 0;
}

class Service final : public v1::Coordinator::CallbackService {
 public:
  Service(JobManager* manager, std::string token)
      : manager_(manager), token_(std::move(token)) {}

  grpc::ServerUnaryReactor* Register(grpc::CallbackServerContext* ctx,
                                     const v1::RegisterRequest* req,
                                     v1::RegisterResponse* resp) override {
    return Respond(ctx, [&] { return Assign(manager_->Register(*req), resp); });
  }
  grpc::ServerUnaryReactor* Heartbeat(grpc::CallbackServerContext* ctx,
                                      const v1::HeartbeatRequest* req,
                                      v1::HeartbeatResponse* resp) override {
    return Respond(ctx,
                   [&] { return Assign(manager_->Heartbeat(*req), resp); });
  }
  grpc::ServerUnaryReactor* ReportResults(
      grpc::CallbackServerContext* ctx, const v1::ReportResultsRequest* req,
      v1::ReportResultsResponse* resp) override {
    return Respond(ctx,
                   [&] { return Assign(manager_->ReportResults(*req), resp); });
  }
  grpc::ServerUnaryReactor* SubmitPlan(grpc::CallbackServerContext* ctx,
                                       const v1::SubmitPlanRequest* req,
                                       v1::SubmitPlanResponse* resp) override {
    return Respond(ctx, [&]() -> absl::Status {
      v1::Plan plan = req->plan();
      if (!req->plan_yaml().empty()) {
        auto parsed = ParsePlanYaml(req->plan_yaml(), "<submitted plan>");
        if (!parsed.ok()) return parsed.status();
        plan = *parsed;
      }
      int nranks = req->nranks() > 0 ? req->nranks()
                                     : (plan.ranks() > 0 ? plan.ranks() : 1);
      auto cases = ExpandPlan(plan, 100000, nranks);
      if (!cases.ok()) return cases.status();
      return Assign(manager_->CreateJob(plan, std::move(*cases), nranks, {}),
                    resp->mutable_job());
    });
  }
  grpc::ServerUnaryReactor* GetJob(grpc::CallbackServerContext* ctx,
                                   const v1::GetJobRequest* req,
                                   v1::GetJobResponse* resp) override {
    return Respond(ctx, [&] {
      return Assign(manager_->GetJob(req->job_id()), resp->mutable_job());
    });
  }
  grpc::ServerUnaryReactor* QueryResults(
      grpc::CallbackServerContext* ctx, const v1::QueryResultsRequest* req,
      v1::QueryResultsResponse* resp) override {
    return Respond(ctx, [&]() -> absl::Status {
      auto results =
          manager_->QueryResults(req->job_id(), req->after_seq(), req->limit());
      if (!results.ok()) return results.status();
      for (auto& r : *results) *resp->add_results() = std::move(r);
      return absl::OkStatus();
    });
  }

 private:
  template <typename T, typename M>
  static absl::Status Assign(absl::StatusOr<T> value, M* out) {
    if (!value.ok()) return value.status();
    *out = std::move(*value);
    return absl::OkStatus();
  }

  template <typename F>
  grpc::ServerUnaryReactor* Respond(grpc::CallbackServerContext* ctx,
                                    F&& handler) {
    grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
    if (!Authorized(*ctx)) {
      reactor->Finish(grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                                   "bad or missing token"));
      return reactor;
    }
    reactor->Finish(ToGrpc(handler()));
    return reactor;
  }

  bool Authorized(const grpc::CallbackServerContext& ctx) const {
    const auto& md = ctx.client_metadata();
    auto it = md.find("authorization");
    if (it == md.end()) return false;
    std::string_view value(it->second.data(), it->second.size());
    constexpr std::string_view kPrefix = "Bearer ";
    if (value.substr(0, kPrefix.size()) != kPrefix) return false;
    return SameToken(value.substr(kPrefix.size()), token_);
  }

  JobManager* manager_;
  std::string token_;
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
  if (!IsLoopbackAddress(address)) {
    return absl::PermissionDeniedError(
        absl::StrFormat("%s is not a loopback address; non-loopback listeners "
                        "need TLS, which is "
                        "not supported yet",
                        address));
  }
  if (token.empty())
    return absl::InvalidArgumentError("an empty token is not allowed");
  auto service = std::make_unique<Service>(manager, token);
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(service.get());
  builder.SetMaxReceiveMessageSize(16 << 20);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || port == 0) {
    return absl::UnavailableError("cannot listen on " + address);
  }
  return std::unique_ptr<CoordinatorServer>(
      new GrpcCoordinatorServer(std::move(service), std::move(server), port));
}

}  // namespace ringmaster
