#include "comm/host_comm.h"

#include <algorithm>

namespace ringmaster {

absl::Status HostComm::Send(const void* data, int64_t bytes, int peer) {
  SendOp op{peer, data, bytes};
  return Exchange({&op, 1}, {});
}

absl::Status HostComm::Recv(void* data, int64_t bytes, int peer) {
  RecvOp op{peer, data, bytes};
  return Exchange({}, {&op, 1});
}

absl::StatusOr<double> CommControl::Max(double value) {
  absl::Status s = comm_.AllReduce(nullptr, &value, 1, v1::FLOAT64, v1::MAX);
  if (!s.ok()) return s;
  return value;
}

absl::StatusOr<int64_t> CommControl::Sum(int64_t value) {
  absl::Status s = comm_.AllReduce(nullptr, &value, 1, v1::INT64, v1::SUM);
  if (!s.ok()) return s;
  return value;
}

absl::Status CommControl::MaxVector(std::vector<double>* values) {
  return comm_.AllReduce(nullptr, values->data(),
                         static_cast<int64_t>(values->size()), v1::FLOAT64,
                         v1::MAX);
}

absl::StatusOr<std::vector<double>> CommControl::AllGather(double value) {
  std::vector<double> out(comm_.size());
  absl::Status s = comm_.AllGather(&value, out.data(), sizeof value);
  if (!s.ok()) return s;
  return out;
}

absl::StatusOr<std::vector<std::string>> CommControl::AllGatherStrings(
    const std::string& value) {
  // Lengths first, then every string padded to the longest.
  const int n = comm_.size();
  int64_t len = static_cast<int64_t>(value.size());
  std::vector<int64_t> lens(n);
  absl::Status s = comm_.AllGather(&len, lens.data(), sizeof len);
  if (!s.ok()) return s;
  const int64_t longest = *std::max_element(lens.begin(), lens.end());
  std::string mine = value;
  mine.resize(static_cast<size_t>(longest), '\0');
  std::string all(static_cast<size_t>(longest * n), '\0');
  s = comm_.AllGather(mine.data(), all.data(), longest);
  if (!s.ok()) return s;
  std::vector<std::string> out(n);
  for (int r = 0; r < n; ++r)
    out[r] = all.substr(static_cast<size_t>(r * longest),
                        static_cast<size_t>(lens[r]));
  return out;
}

absl::Status CommControl::Broadcast(void* data, int64_t bytes, int root) {
  return comm_.Broadcast(data, bytes, root);
}

}  // namespace ringmaster
