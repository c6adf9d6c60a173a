// The worker's gRPC client of the Coordinator service.
//
// Every call has a deadline; ReportResults retries transient failures
// (UNAVAILABLE, DEADLINE_EXCEEDED) with backoff, relying on the results'
// idempotency keys. Thread-safe: the heartbeat thread and the main thread
// share one client.
#ifndef RINGMASTER_WORKER_COORDINATOR_CLIENT_H_
#define RINGMASTER_WORKER_COORDINATOR_CLIENT_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "ringmaster/v1/coordinator.pb.h"

namespace ringmaster {

class CoordinatorClient {
 public:
  // `address` is host:port; `token` goes in every call's metadata.
  static std::unique_ptr<CoordinatorClient> Create(const std::string& address,
                                                   const std::string& token);
  // The same calls to a node leader's relay (worker/node_relay.h): a local
  // socket, plaintext.
  static std::unique_ptr<CoordinatorClient> CreateLocal(
      const std::string& address, const std::string& token);
  virtual ~CoordinatorClient() = default;

  // Register retries until `wait` has passed (the coordinator may still be
  // starting up).
  virtual absl::StatusOr<v1::RegisterResponse> Register(
      const v1::RegisterRequest& request, absl::Duration wait) = 0;
  // Publishes this rank's listener and polls until every rank has
  // published (or `wait` has passed: DeadlineExceeded naming how many
  // ranks are missing).
  virtual absl::StatusOr<v1::RendezvousResponse> Rendezvous(
      const v1::RendezvousRequest& request, absl::Duration wait) = 0;
  virtual absl::StatusOr<v1::HeartbeatResponse> Heartbeat(
      const v1::HeartbeatRequest& request) = 0;
  virtual absl::StatusOr<v1::ReportResultsResponse> ReportResults(
      const v1::ReportResultsRequest& request) = 0;
};

}  // namespace ringmaster

#endif  // RINGMASTER_WORKER_COORDINATOR_CLIENT_H_
