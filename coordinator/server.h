// The Coordinator gRPC server: a thin callback-API adapter over JobManager,
// with tokens and roles checked on every call, the standard health
// service, and optional TLS (required for any non-loopback listener).
#ifndef RINGMASTER_COORDINATOR_SERVER_H_
#define RINGMASTER_COORDINATOR_SERVER_H_

#include <functional>
#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "coordinator/job_manager.h"
#include "coordinator/submit.h"

namespace ringmaster {

// Who is calling, from the bearer token.
struct Caller {
  enum class Role { kAdmin, kUser, kWorker };
  Role role = Role::kUser;
  std::string user;    // user name (admin: "admin")
  std::string job_id;  // kWorker: the job the token belongs to
};

struct ServerOptions {
  std::string address = "127.0.0.1:0";             // port 0 picks a free one
  std::string admin_token;                         // required, never logged
  std::map<std::string, std::string> user_tokens;  // token -> user name
  // PEM text. Cert + key enable TLS; a client CA also requires client
  // certificates signed by it (mTLS).
  std::string tls_cert_pem, tls_key_pem, tls_client_ca_pem;
  int max_message_bytes = 4 << 20;    // larger requests: RESOURCE_EXHAUSTED
  int max_metadata_bytes = 16 << 10;  // larger headers: rejected
  // SubmitPlan: admission, quotas and plan checks (the service's). Empty:
  // the plan is parsed and a job created directly (embedded use).
  std::function<absl::StatusOr<v1::SubmitPlanResponse>(
      const v1::SubmitPlanRequest&, const Caller&)>
      submit;
};

class CoordinatorServer {
 public:
  // Only loopback addresses are accepted without TLS. `manager` must
  // outlive the server.
  static absl::StatusOr<std::unique_ptr<CoordinatorServer>> Start(
      JobManager* manager, const ServerOptions& options);
  // Loopback, one admin token (the embedded coordinator of `run`).
  static absl::StatusOr<std::unique_ptr<CoordinatorServer>> Start(
      JobManager* manager, const std::string& address,
      const std::string& token);
  virtual ~CoordinatorServer() = default;
  virtual int port() const = 0;
  // Stops accepting calls and waits (up to a second) for calls in flight.
  virtual void Shutdown() = 0;
};

// True for 127.0.0.0/8, ::1 and localhost, with or without a port.
bool IsLoopbackAddress(const std::string& address);

}  // namespace ringmaster

#endif  // RINGMASTER_COORDINATOR_SERVER_H_
