// The Coordinator gRPC server: a thin callback-API adapter over JobManager,
// with a bearer token checked on every call.
#ifndef RINGMASTER_COORDINATOR_SERVER_H_
#define RINGMASTER_COORDINATOR_SERVER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "coordinator/job_manager.h"

namespace ringmaster {

class CoordinatorServer {
 public:
  // Listens on `address` ("127.0.0.1:0" picks a free port). Only loopback
  // addresses are accepted: other listeners need TLS, which comes later.
  // `manager` must outlive the server.
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
