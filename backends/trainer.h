// What runs one data-parallel training step for the training kind
// (worker/kinds/train_mlp.h): host (OpenBLAS + MPI) or CUDA (cuBLASLt +
// NCCL).
#ifndef RINGMASTER_BACKENDS_TRAINER_H_
#define RINGMASTER_BACKENDS_TRAINER_H_

#include <time.h>

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ringmaster/v1/plan.pb.h"

namespace ringmaster {

// CLOCK_MONOTONIC in seconds: the clock StepTiming's *_at use.
inline double MonotonicSeconds() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + ts.tv_nsec * 1e-9;
}

// One step on this rank. Times are seconds; *_at are CLOCK_MONOTONIC
// readings (comparable between ranks of one host).
struct StepTiming {
  double step_s = 0;           // start of forward to end of the optimizer
  double compute_s = 0;        // forward + backward + optimizer work
  double backward_end_at = 0;  // this rank's last gradient computed
  double comm_done_at = 0;     // every bucket's all-reduce complete
  double comm_busy_s = 0;      // time with an all-reduce in flight
  // Time the compute thread spent in communication calls before its last
  // gradient (posting buckets, progressing them): on the host, MPI moves
  // and reduces the bytes inside those calls, so it delays backward.
  double comm_in_backward_s = 0;
  double loss = 0;  // this rank's loss (mean over its shard)
  // schedule: pipelined. Steps overlap (the next forward starts while this
  // step's last buckets are reduced): step_s runs from this step's forward
  // to the next one's, and comm_in_backward_s is the time its forward
  // waited for the previous step's updates (communication, or a slower
  // peer: the runner attributes the part explained by the ranks' backward
  // ends to skew).
  bool pipelined = false;
};

class Trainer {
 public:
  virtual ~Trainer() = default;
  // Builds the model (deterministic weights) and this rank's data shard
  // for `c` (c.train()); `batch` samples per rank starting at global
  // sample `first_sample`. Unimplemented for what it cannot run.
  virtual absl::Status Prepare(const v1::Case& c, int64_t batch,
                               int64_t first_sample) = 0;
  // One step; collective over the trainer's ranks.
  virtual absl::StatusOr<StepTiming> Step() = 0;
  // Completes what steps left in flight (schedule: pipelined); collective.
  // RunTrain calls it after every case.
  virtual absl::Status Drain() { return absl::OkStatus(); }
  // Of this rank's gradient entries (after the all-reduce, as the
  // optimizer used them), the fraction exactly zero; called after Drain.
  virtual absl::StatusOr<double> GradientZeroFraction() = 0;
  virtual std::string Describe()
      const = 0;  // e.g. "cpu (libopenblas.so.0, 8 threads)"
};

}  // namespace ringmaster

#endif  // RINGMASTER_BACKENDS_TRAINER_H_
