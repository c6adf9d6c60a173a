// The seam between the case runner and what moves the bytes.
//
// A CollectiveBackend measures one collective configuration at a time on
// this rank; a Control is the out-of-band channel ranks use to agree on
// sample counts and to combine figures (MPI in production, a fake in tests).
// Both are used from one thread (the worker's main thread).
#ifndef RINGMASTER_BACKENDS_BACKEND_H_
#define RINGMASTER_BACKENDS_BACKEND_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ringmaster/v1/plan.pb.h"

namespace ringmaster {

// One collective configuration. Plain data for the hot path.
struct CollectiveConfig {
  v1::Collective collective = v1::ALL_REDUCE;
  v1::DataType dtype = v1::FLOAT32;
  v1::ReduceOp op = v1::SUM;
  int64_t count = 0;  // elements per rank buffer
  bool in_place = false;
  int root = 0;
};

// What a backend reports about itself for provenance and fingerprints.
struct BackendInfo {
  std::string name;  // "host (MPI)" or "cuda (NCCL)"
  std::string gpu_model;
  std::string gpu_bus_id;
  std::string driver_version;
  std::string cuda_runtime_version;
  std::string nccl_version;
};

class CollectiveBackend {
 public:
  virtual ~CollectiveBackend() = default;

  virtual BackendInfo Info() const = 0;

  // Allocates (or reuses) buffers for `config` and fills them with data.
  // Unimplemented for configurations the backend cannot run.
  virtual absl::Status Prepare(const CollectiveConfig& config) = 0;

  // Runs `windows` windows of `iters` operations back to back, with no host
  // synchronization between windows, and returns each window's seconds on
  // this rank (device time on GPUs). With `graph`, a window is one replay of
  // `iters` operations captured into a CUDA graph (captured once per
  // Prepare and count; Unimplemented where there are no graphs).
  // REQUIRES: Prepare() OK.
  virtual absl::StatusOr<std::vector<double>> TimeWindows(int iters,
                                                          int windows,
                                                          bool graph) = 0;

  // Seconds for `iters` pipelined operations (one window).
  absl::StatusOr<double> TimeOps(int iters) {
    auto w = TimeWindows(iters, 1, false);
    if (!w.ok()) return w.status();
    return (*w)[0];
  }

  // Runs `iters` operations back to back, each timed on its own (events
  // around each op on GPUs); seconds per operation. REQUIRES: Prepare() OK.
  virtual absl::StatusOr<std::vector<double>> TimeEachOp(int iters) = 0;

  // Refills the buffers with the verification pattern, runs one operation
  // and returns how many elements of this rank's output are wrong.
  virtual absl::StatusOr<int64_t> Verify() = 0;
};

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

#endif  // RINGMASTER_BACKENDS_BACKEND_H_
