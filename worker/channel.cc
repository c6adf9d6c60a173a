#include "worker/channel.h"

#include <cstdlib>
#include <fstream>
#include <sstream>

namespace ringmaster {

TlsFiles TlsFiles::FromEnv() {
  auto get = [](const char* name) {
    const char* v = std::getenv(name);
    return std::string(v ? v : "");
  };
  return {get("RINGMASTER_TLS_CA"), get("RINGMASTER_TLS_CERT"),
          get("RINGMASTER_TLS_KEY")};
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

absl::StatusOr<std::shared_ptr<grpc::Channel>> MakeCoordinatorChannel(
    const std::string& address, const TlsFiles& tls) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 10000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5000);
  args.SetMaxReceiveMessageSize(64 << 20);
  // Reconnect quickly after a coordinator restart. (Not
  // GRPC_ARG_MIN_RECONNECT_BACKOFF_MS: it is also the connect timeout, and
  // a short one fails first calls on a loaded machine.)
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
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
