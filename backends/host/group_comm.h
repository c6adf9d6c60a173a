// Collectives over a subset of a HostComm's ranks (a tensor- or
// data-parallel group of a transformer layout), float32 sums, written by
// hand over HostComm::Exchange: the transports offer only prefix splits,
// and the host backend moves kilobytes here, so a direct exchange with
// every member is enough. Every member computes each sum in member order,
// so members get bit-identical results (replicated activations stay
// replicated).
#ifndef RINGMASTER_BACKENDS_HOST_GROUP_COMM_H_
#define RINGMASTER_BACKENDS_HOST_GROUP_COMM_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "comm/host_comm.h"

namespace ringmaster {

class GroupComm {
 public:
  // `members`: ranks of `comm`, increasing, including comm.rank().
  GroupComm(HostComm& comm, std::vector<int> members);

  int size() const { return static_cast<int>(members_.size()); }
  int index() const { return index_; }  // this rank's position in members

  // all[size() x per] from every member's `mine` (per floats).
  absl::Status AllGather(const float* mine, float* all, int64_t per);
  // mine[per] = sum over members of their all[index() x per] block.
  absl::Status ReduceScatterSum(const float* all, float* mine, int64_t per);
  // data[count] = the sum over members, in place.
  absl::Status AllReduceSum(float* data, int64_t count);

 private:
  HostComm& comm_;
  std::vector<int> members_;
  int index_ = 0;
  std::vector<float> scratch_, block_;
};

}  // namespace ringmaster

#endif  // RINGMASTER_BACKENDS_HOST_GROUP_COMM_H_
