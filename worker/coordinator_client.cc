#include "worker/coordinator_client.h"

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <thread>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "comm/grpc_channel.h"
#include "ringmaster/v1/coordinator.grpc.pb.h"

namespace ringmaster {
namespace {

constexpr absl::Duration kCallDeadline = absl::Seconds(5);
// Long enough to ride out a coordinator restart.
constexpr absl::Duration kReportRetryFor = absl::Seconds(60);

bool Transient(const grpc::Status& s) {
  return s.error_code() == grpc::StatusCode::UNAVAILABLE ||
         s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
}

class GrpcCoordinatorClient : public CoordinatorClient {
 public:
  // `local`: a node relay's socket, which may not be up yet: calls wait for
  // it (up to their deadline) instead of failing at once.
  GrpcCoordinatorClient(std::shared_ptr<grpc::Channel> channel,
                        const std::string& token, bool local = false)
      : token_(token),
        local_(local),
        stub_(v1::Coordinator::NewStub(std::move(channel))) {}

  absl::StatusOr<v1::RegisterResponse> Register(
      const v1::RegisterRequest& request, absl::Duration wait) override {
    absl::Time give_up = absl::Now() + wait;
    absl::Duration backoff = absl::Milliseconds(50);
    while (true) {
      grpc::ClientContext ctx;
      Prepare(&ctx);
      v1::RegisterResponse response;
      grpc::Status s = stub_->Register(&ctx, request, &response);
      if (s.ok()) return response;
      if (!Transient(s) || absl::Now() + backoff > give_up)
        return FromGrpc(s, "Register");
      absl::SleepFor(backoff);
      backoff = std::min(backoff * 2, absl::Seconds(1));
    }
  }

  absl::StatusOr<v1::RendezvousResponse> Rendezvous(
      const v1::RendezvousRequest& request, absl::Duration wait) override {
    const absl::Time give_up = absl::Now() + wait;
    absl::Duration poll = absl::Milliseconds(20);
    int waiting_for = -1;
    std::string missing;
    while (true) {
      grpc::ClientContext ctx;
      Prepare(&ctx);
      v1::RendezvousResponse response;
      grpc::Status s = stub_->Rendezvous(&ctx, request, &response);
      if (s.ok() && response.ready()) return response;
      if (!s.ok() && !Transient(s)) return FromGrpc(s, "Rendezvous");
      if (s.ok()) {
        waiting_for = response.waiting_for();
        missing = absl::StrJoin(response.missing(), ", ");
        if (response.missing_size() < waiting_for) missing += ", ...";
      }
      const absl::Time now = absl::Now();
      if (now >= give_up) {
        if (!s.ok()) return FromGrpc(s, "Rendezvous");
        return absl::DeadlineExceededError(absl::StrFormat(
            "rendezvous: %d rank(s) had not started after %s (rank %s)",
            waiting_for, absl::FormatDuration(wait), missing));
      }
      // The last poll lands on the deadline, not before it.
      absl::SleepFor(std::min(poll, give_up - now));
      poll = std::min(poll * 2, absl::Milliseconds(500));
    }
  }

  absl::StatusOr<v1::HeartbeatResponse> Heartbeat(
      const v1::HeartbeatRequest& request) override {
    grpc::ClientContext ctx;
    Prepare(&ctx);
    v1::HeartbeatResponse response;
    grpc::Status s = stub_->Heartbeat(&ctx, request, &response);
    if (!s.ok()) return FromGrpc(s, "Heartbeat");
    return response;
  }

  absl::StatusOr<v1::ReportResultsResponse> ReportResults(
      const v1::ReportResultsRequest& request) override {
    absl::Duration backoff = absl::Milliseconds(100);
    grpc::Status s;
    const absl::Time give_up = absl::Now() + kReportRetryFor;
    while (true) {
      grpc::ClientContext ctx;
      Prepare(&ctx);
      v1::ReportResultsResponse response;
      s = stub_->ReportResults(&ctx, request, &response);
      if (s.ok()) return response;
      if (!Transient(s) || absl::Now() + backoff > give_up) break;
      absl::SleepFor(backoff);
      backoff = std::min(backoff * 2, absl::Seconds(1));
    }
    return FromGrpc(s, "ReportResults");
  }

 private:
  void Prepare(grpc::ClientContext* ctx) const {
    ctx->set_deadline(std::chrono::system_clock::now() +
                      absl::ToChronoMilliseconds(kCallDeadline));
    ctx->AddMetadata("authorization", "Bearer " + token_);
    if (local_) ctx->set_wait_for_ready(true);
  }

  std::string token_;
  bool local_;
  std::unique_ptr<v1::Coordinator::Stub> stub_;
};

}  // namespace

std::unique_ptr<CoordinatorClient> CoordinatorClient::Create(
    const std::string& address, const std::string& token) {
  auto channel = MakeCoordinatorChannel(address, TlsFiles::FromEnv());
  if (!channel.ok()) {
    // Unreadable TLS files: every call fails with the reason.
    channel = grpc::CreateChannel("unix:/nonexistent",
                                  grpc::InsecureChannelCredentials());
  }
  return std::make_unique<GrpcCoordinatorClient>(*channel, token);
}

std::unique_ptr<CoordinatorClient> CoordinatorClient::CreateLocal(
    const std::string& address, const std::string& token) {
  // The relay starts with its leader, maybe after this rank: reconnect in
  // tens of milliseconds, not gRPC's default second and more.
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 20);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 20);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 200);
  return std::make_unique<GrpcCoordinatorClient>(
      grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(),
                                args),
      token, /*local=*/true);
}

}  // namespace ringmaster
