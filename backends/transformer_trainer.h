// What runs one transformer training step for the transformer kind
// (worker/kinds/transformer.cc): the block stack of core/transformer.h
// split over dp x tp ranks (ParallelLayout), on the host (float32,
// OpenBLAS, MPI or TCP) or a GPU.
#ifndef RINGMASTER_BACKENDS_TRANSFORMER_TRAINER_H_
#define RINGMASTER_BACKENDS_TRANSFORMER_TRAINER_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ringmaster/v1/plan.pb.h"

namespace ringmaster {

// One step on this rank; times in seconds.
struct TransformerStepTiming {
  double step_s = 0;     // start of forward to end of the optimizer
  double compute_s = 0;  // forward, backward and optimizer work
  // Time the step waited for communication, by parallelism: tensor
  // parallel (all-reduces, or all-gathers and reduce-scatters with sp,
  // and sp's norm-gain all-reduces), parameter all-gathers (zero 3 before
  // each layer's forward and backward; zero 1 after the update), gradient
  // reduce-scatters (zero 1 and 3) and gradient all-reduces (dp). With
  // blocking communication this includes waiting for slower peers.
  double tp_s = 0;
  double gather_s = 0;
  double reduce_scatter_s = 0;
  double allreduce_s = 0;
  // This rank's share of the global loss (the loss of the step's forward):
  // the sum over every rank of the case is the global loss.
  double loss_part = 0;
  int64_t peak_memory_bytes = 0;  // this rank's peak (device or buffers)
};

class TransformerTrainer {
 public:
  virtual ~TransformerTrainer() = default;
  // Builds this rank's part of the model (deterministic weights, as
  // core/transformer.h's reference) and data for `c` (c.transformer(),
  // its parallel layout over the trainer's ranks, c.dtype() resolved).
  // Unimplemented for what it cannot run. Collective.
  virtual absl::Status Prepare(const v1::Case& c) = 0;
  // One step; collective over the trainer's ranks.
  virtual absl::StatusOr<TransformerStepTiming> Step() = 0;
  // The precision this backend trains in when a plan names none.
  virtual v1::DataType DefaultDtype() const = 0;
  virtual std::string Describe() const = 0;  // e.g. "cpu (libopenblas...)"
  // The device's datasheet dense peak for `dtype` in FLOP/s, for MFU; 0
  // where none is known (CPUs).
  virtual double PeakFlops(v1::DataType dtype) const { return 0; }
  // The dense matrix-product rate this device sustains in `dtype`
  // (FLOP/s), measured once per trainer on products of its own; 0 where
  // not measured. Outside Prepare/Step, so not collective.
  virtual double MeasuredGemmFlops(v1::DataType dtype) { return 0; }
};

}  // namespace ringmaster

#endif  // RINGMASTER_BACKENDS_TRANSFORMER_TRAINER_H_
