#include "comm/grpc_channel.h"

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/strings/str_format.h"

namespace ringmaster {

TlsFiles TlsFiles::FromEnv() {
  auto get = [](const char* name) {
    const char* v = std::getenv(name);
    return std::string(v ? v : "");
  };
  return {get("RINGMASTER_TLS_CA"), get("RINGMASTER_TLS_CERT"),
          get("RINGMASTER_TLS_KEY")};
}

absl::Status FromGrpc(const grpc::Status& s, const char* call) {
  if (s.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()),
                      absl::StrFormat("%s: %s", call, s.error_message()));
}

grpc::Status ToGrpc(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()),
                      std::string(s.message()));
}

absl::StatusOr<std::string> ReadSmallFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(path + ": cannot read");
  std::ostringstream out;
  out << in.rdbuf();
  if (out.str().size() > (1 << 20))
    return absl::InvalidArgumentError(path + ": larger than 1 MiB");
  return out.str();
}

namespace {

// Waits before the 2nd..5th attempt: random(0, 0.2 s), then up to 0.4, 0.8
// and 1.6 s (gRPC's jittered exponential backoff). Measured
// (bench/results/cpu/client-retry.txt): a coordinator that comes up 0.7 s
// after `ringmaster status` starts is answered in 1.3-1.6 s; one that stays
// down fails the command after about 3 s.
constexpr char kClientServiceConfig[] = R"json({
  "methodConfig": [{
    "name": [
      {"service": "ringmaster.v1.Coordinator", "method": "SubmitPlan"},
      {"service": "ringmaster.v1.Coordinator", "method": "GetJob"},
      {"service": "ringmaster.v1.Coordinator", "method": "ListJobs"},
      {"service": "ringmaster.v1.Coordinator", "method": "CancelJob"},
      {"service": "ringmaster.v1.Coordinator", "method": "QueryResults"}
    ],
    "retryPolicy": {
      "maxAttempts": 5,
      "initialBackoff": "0.2s",
      "maxBackoff": "2s",
      "backoffMultiplier": 2,
      "retryableStatusCodes": ["UNAVAILABLE"]
    }
  }]
})json";

}  // namespace

void SetCoordinatorChannelArgs(grpc::ChannelArguments* args) {
  args->SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 10000);
  args->SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5000);
  args->SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  args->SetMaxReceiveMessageSize(64 << 20);
  // Reconnect quickly after a coordinator restart. (Not
  // GRPC_ARG_MIN_RECONNECT_BACKOFF_MS: it is also the connect timeout, and
  // a short one fails first calls on a loaded machine.)
  args->SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args->SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
}

absl::StatusOr<std::shared_ptr<grpc::Channel>> MakeCoordinatorChannel(
    const std::string& address, const TlsFiles& tls) {
  grpc::ChannelArguments args;
  SetCoordinatorChannelArgs(&args);
  // The calls that are safe to repeat retry UNAVAILABLE in gRPC itself: a
  // fresh channel whose first connection attempt fails (seen 1 in 30 on a
  // loaded loopback) or a coordinator restarting. SubmitPlan carries a
  // request id, so a repeat cannot create a second job; CancelJob only sets
  // a flag. Register, Heartbeat, Rendezvous and ReportResults are left
  // out: the worker's client decides about those (reports retry for 60 s).
  args.SetInt(GRPC_ARG_ENABLE_RETRIES, 1);
  args.SetServiceConfigJSON(kClientServiceConfig);
  std::shared_ptr<grpc::ChannelCredentials> creds;
  if (tls.ca_file.empty()) {
    creds = grpc::InsecureChannelCredentials();
  } else {
    grpc::SslCredentialsOptions ssl;
    auto ca = ReadSmallFile(tls.ca_file);
    if (!ca.ok()) return ca.status();
    ssl.pem_root_certs = *ca;
    if (!tls.cert_file.empty()) {
      auto cert = ReadSmallFile(tls.cert_file);
      if (!cert.ok()) return cert.status();
      auto key = ReadSmallFile(tls.key_file);
      if (!key.ok()) return key.status();
      ssl.pem_cert_chain = *cert;
      ssl.pem_private_key = *key;
    }
    creds = grpc::SslCredentials(ssl);
  }
  return grpc::CreateCustomChannel(address, creds, args);
}

}  // namespace ringmaster
