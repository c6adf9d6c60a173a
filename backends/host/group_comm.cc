#include "backends/host/group_comm.h"

#include <algorithm>
#include <cstring>
#include <utility>

namespace ringmaster {

GroupComm::GroupComm(HostComm& comm, std::vector<int> members)
    : comm_(comm), members_(std::move(members)) {
  index_ = static_cast<int>(
      std::find(members_.begin(), members_.end(), comm_.rank()) -
      members_.begin());
}

absl::Status GroupComm::AllGather(const float* mine, float* all, int64_t per) {
  const int64_t bytes = per * static_cast<int64_t>(sizeof(float));
  std::memmove(all + index_ * per, mine, bytes);
  std::vector<SendOp> sends;
  std::vector<RecvOp> recvs;
  for (int j = 0; j < size(); ++j) {
    if (j == index_) continue;
    sends.push_back({members_[j], all + index_ * per, bytes});
    recvs.push_back({members_[j], all + j * per, bytes});
  }
  if (sends.empty()) return absl::OkStatus();
  return comm_.Exchange(sends, recvs);
}

absl::Status GroupComm::ReduceScatterSum(const float* all, float* mine,
                                         int64_t per) {
  const int64_t bytes = per * static_cast<int64_t>(sizeof(float));
  scratch_.resize(static_cast<size_t>(size() * per));
  std::vector<SendOp> sends;
  std::vector<RecvOp> recvs;
  for (int j = 0; j < size(); ++j) {
    if (j == index_) continue;
    sends.push_back({members_[j], all + j * per, bytes});
    recvs.push_back({members_[j], scratch_.data() + j * per, bytes});
  }
  if (!sends.empty()) {
    if (absl::Status s = comm_.Exchange(sends, recvs); !s.ok()) return s;
  }
  std::memcpy(scratch_.data() + index_ * per, all + index_ * per, bytes);
  // Member order, the same on every member.
  std::fill(mine, mine + per, 0.0f);
  for (int j = 0; j < size(); ++j) {
    const float* block = scratch_.data() + j * per;
    for (int64_t i = 0; i < per; ++i) mine[i] += block[i];
  }
  return absl::OkStatus();
}

absl::Status GroupComm::AllReduceSum(float* data, int64_t count) {
  if (size() == 1) return absl::OkStatus();
  const int64_t per = (count + size() - 1) / size();
  std::vector<float> padded(static_cast<size_t>(per * size()), 0.0f);
  std::copy(data, data + count, padded.begin());
  block_.resize(static_cast<size_t>(per));
  if (absl::Status s = ReduceScatterSum(padded.data(), block_.data(), per);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = AllGather(block_.data(), padded.data(), per); !s.ok())
    return s;
  std::copy(padded.begin(), padded.begin() + count, data);
  return absl::OkStatus();
}

}  // namespace ringmaster
