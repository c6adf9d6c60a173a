// The data-parallel training benchmark's model, data and arithmetic,
// independent of any backend: deterministic inputs and weights,
// GELU, FLOP counts, gradient buckets, scaling efficiency, and a float64
// reference of the whole step for the numerical checks.
//
// Model: L bias-free Linear(H, H) layers each followed by GELU (exact, erf
// form); loss = mean(out^2) over the global batch; SGD or Adam.
#ifndef RINGMASTER_CORE_TRAINING_H_
#define RINGMASTER_CORE_TRAINING_H_

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/train_data.h"

namespace ringmaster {

// A training result with this fraction of its gradient entries zero or
// more (train.grad_zero_fraction) underflowed: its step multiplied zeros,
// which runs faster than training does.
inline constexpr double kGradientsUnderflowed = 0.5;

struct MlpShape {
  int layers = 0;
  int64_t hidden = 0;
  int64_t batch = 0;  // samples in this computation
};

// TrainInput and TrainWeight (the data and initial weights) are in
// kernels/train_data.h, shared with the CUDA kernels.

double Gelu(double x);
double GeluGrad(double x);

// Forward + backward GEMM FLOPs of one step: 6 * B * H^2 * L (forward 2,
// backward 4 per multiply-add pair); forward only: 2 * B * H^2 * L.
double TrainStepFlops(const MlpShape& s);
double ForwardFlops(const MlpShape& s);

// Gradient buckets in the order backward produces them (last layer
// first): consecutive layers while the bucket stays within `cap_bytes`; a
// layer larger than the cap is a bucket of its own (as DDP does).
std::vector<std::vector<int>> GradientBuckets(int layers,
                                              int64_t bytes_per_layer,
                                              int64_t cap_bytes);

// schedule: pipelined. The upper layers (deferred..layers-1) in backward
// order, grouped as GradientBuckets does; then the lower `deferred` layers
// lowest first (their weight gradients are computed after the
// input-gradient chain, in the order the next forward needs them). Every
// bucket holds consecutive layers.
std::vector<std::vector<int>> PipelinedBuckets(int layers, int deferred,
                                               int64_t bytes_per_layer,
                                               int64_t cap_bytes);

// Weak scaling: T(1) / T(n); strong scaling: T(1) / (n * T(n)).
double WeakEfficiency(double t1, double tn);
double StrongEfficiency(double t1, double tn, int n);

// Global loss after each of `steps` optimizer steps (index 0: the loss of
// the first forward, before any update), computed in float64 on the whole
// global batch of `shape.batch` samples (samples 0 .. batch-1). `optimizer`
// is "sgd" or "adam" (beta1 0.9, beta2 0.999, eps 1e-8).
std::vector<double> ReferenceLosses(const MlpShape& shape,
                                    const std::string& optimizer, double lr,
                                    int steps);

}  // namespace ringmaster

#endif  // RINGMASTER_CORE_TRAINING_H_
