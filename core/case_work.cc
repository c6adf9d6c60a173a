#include "core/case_work.h"

#include <algorithm>

#include "core/transformer.h"

namespace ringmaster {
namespace {

constexpr double kBytesPerSecond = 10e9;
constexpr double kFlopsPerSecond = 10e12;
constexpr double kOpOverheadSeconds = 20e-6;
constexpr double kCaseOverheadSeconds = 0.02;

// One operation's time: the bytes it moves and the arithmetic it does.
double OpSeconds(const v1::Case& c) {
  double bytes = static_cast<double>(c.size_bytes());
  double flops = 0;
  if (c.has_gemm()) {
    flops = 2.0 * c.gemm().m() * c.gemm().n() * c.gemm().k();
  }
  if (c.has_train()) {
    const v1::TrainSpec& t = c.train();
    const double weights = static_cast<double>(t.hidden()) * t.hidden();
    // Forward and backward: 6 flops per weight per sample (2 forward).
    flops = (t.inference() ? 2.0 : 6.0) * weights * t.layers() * t.batch();
    bytes = std::max(bytes, weights * t.layers() * 4);
  }
  return kOpOverheadSeconds + bytes / kBytesPerSecond + flops / kFlopsPerSecond;
}

}  // namespace

double EstimatedCaseSeconds(const v1::Case& c) {
  const v1::Timing& t = c.timing();
  if (c.has_transformer()) {
    // Every step of warm-up, the check and the timed run, each the model
    // FLOPs of the global batch over its ranks.
    const v1::TransformerSpec& m = c.transformer();
    const int ranks =
        std::max(1, m.parallel().dp()) * std::max(1, m.parallel().tp());
    const double tokens = static_cast<double>(std::max(1, m.parallel().dp())) *
                          m.micro_batch() * m.seq();
    const double step = kOpOverheadSeconds +
                        TrainFlopsPerToken(ShapeOf(m), m.layers(), m.seq()) *
                            tokens / ranks / kFlopsPerSecond;
    const int steps = std::max(1, t.warmup_iters()) + std::max(1, m.steps()) +
                      (m.check_steps() > 0 ? m.check_steps() + 1 : 0);
    return kCaseOverheadSeconds + step * steps;
  }
  const double op = OpSeconds(c);
  const int per_sample =
      std::max(1, t.fixed_iters_per_sample() > 0 ? t.fixed_iters_per_sample()
                                                 : t.max_iters_per_sample());
  // Adaptive sampling stops between min and max samples: the middle.
  const int samples = std::max(
      1, (std::max(1, t.min_samples()) + std::max(1, t.max_samples())) / 2);
  double sampled = op * per_sample * samples;
  if (t.max_time_s() > 0) sampled = std::min(sampled, t.max_time_s());
  double warmup = op * std::max(0, t.warmup_iters());
  if (t.warmup_max_time_s() > 0)
    warmup = std::min(warmup, t.warmup_max_time_s());
  return kCaseOverheadSeconds + warmup + sampled;
}

std::vector<double> EstimatedCaseSeconds(const std::vector<v1::Case>& cases) {
  std::vector<double> out;
  out.reserve(cases.size());
  for (const v1::Case& c : cases) out.push_back(EstimatedCaseSeconds(c));
  return out;
}

}  // namespace ringmaster
