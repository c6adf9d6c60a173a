// The seam between the case runner and what moves the bytes.
//
// A CollectiveBackend measures one collective configuration at a time on
// this rank, used from one thread (the worker's main thread). Ranks agree
// on sample counts through a Control (comm/control.h).
#ifndef RINGMASTER_BACKENDS_BACKEND_H_
#define RINGMASTER_BACKENDS_BACKEND_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "comm/control.h"
#include "ringmaster/v1/plan.pb.h"

namespace ringmaster {

class HostComm;

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

  // A backend over the first ranks of this one (a ladder rung). Collective
  // over every rank of this backend; members (`member`, a prefix of the
  // ranks) pass their sub-communicator `member_comm` (comm/host_comm.h;
  // nullptr on the others) and get a backend, the others nullptr.
  // `setup_s` (optional) receives the seconds its communicator took.
  virtual absl::StatusOr<std::unique_ptr<CollectiveBackend>> Split(
      bool member, HostComm* member_comm, double* setup_s) = 0;

  // Seconds the communicator's creation took: 0 where there is none to
  // create, or until it exists (it may be created on first use).
  virtual double CommSetupSeconds() const { return 0; }
};

}  // namespace ringmaster

#endif  // RINGMASTER_BACKENDS_BACKEND_H_
