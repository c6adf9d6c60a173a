// The out-of-band channel ranks use to agree on sample counts and to
// combine figures: MPI or TCP in production (CommControl over a HostComm,
// comm/host_comm.h), a fake in tests. Used from one thread.
#ifndef RINGMASTER_COMM_CONTROL_H_
#define RINGMASTER_COMM_CONTROL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace ringmaster {

// Collective control operations over all ranks; every rank must call each
// method in the same order.
class Control {
 public:
  virtual ~Control() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual absl::Status Barrier() = 0;
  virtual absl::StatusOr<double> Max(double value) = 0;
  virtual absl::StatusOr<int64_t> Sum(int64_t value) = 0;
  // Element-wise maximum over ranks, in place.
  virtual absl::Status MaxVector(std::vector<double>* values) = 0;
  // Every rank's value, on every rank, indexed by rank.
  virtual absl::StatusOr<std::vector<double>> AllGather(double value) = 0;
  virtual absl::StatusOr<std::vector<std::string>> AllGatherStrings(
      const std::string& value) = 0;
  // Copies `bytes` bytes from `root`'s `data` into every rank's `data`.
  virtual absl::Status Broadcast(void* data, int64_t bytes, int root) = 0;
};

}  // namespace ringmaster

#endif  // RINGMASTER_COMM_CONTROL_H_
