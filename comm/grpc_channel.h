// The gRPC channel to a coordinator, shared by the worker and the CLI's
// clients: plaintext for loopback, TLS when a CA file is given (plus a
// client certificate for mTLS).
#ifndef RINGMASTER_COMM_GRPC_CHANNEL_H_
#define RINGMASTER_COMM_GRPC_CHANNEL_H_

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace ringmaster {

struct TlsFiles {
  std::string ca_file;    // server CA (PEM); empty: plaintext
  std::string cert_file;  // client certificate for mTLS (optional)
  std::string key_file;
  // From RINGMASTER_TLS_CA / RINGMASTER_TLS_CERT / RINGMASTER_TLS_KEY.
  static TlsFiles FromEnv();
};

absl::StatusOr<std::shared_ptr<grpc::Channel>> MakeCoordinatorChannel(
    const std::string& address, const TlsFiles& tls);

// The arguments of a worker's (or node leader's) channel to the
// coordinator: keepalive, quick reconnects, large answers, no BDP probes
// (the coordinator's messages are small, and each probe costs the
// coordinator a ping to answer, on thousands of connections).
void SetCoordinatorChannelArgs(grpc::ChannelArguments* args);

// A gRPC status as an absl::Status with the same code, its message
// prefixed with the call's name.
absl::Status FromGrpc(const grpc::Status& s, const char* call);

// An absl::Status as a gRPC status with the same code and message.
grpc::Status ToGrpc(const absl::Status& s);

// Reads a whole (small) file.
absl::StatusOr<std::string> ReadSmallFile(const std::string& path);

}  // namespace ringmaster

#endif  // RINGMASTER_COMM_GRPC_CHANNEL_H_
