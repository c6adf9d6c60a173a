// Sample statistics and the rule that decides when to stop sampling.
//
// Samples are seconds per operation. Pure functions; thread-compatible.
#ifndef RINGMASTER_CORE_STATS_H_
#define RINGMASTER_CORE_STATS_H_

#include <span>
#include <string>
#include <vector>

#include "ringmaster/v1/plan.pb.h"
#include "ringmaster/v1/result.pb.h"

namespace ringmaster {

struct SampleSummary {
  int n = 0;
  double median = 0;
  double mean = 0;
  double min = 0;
  double max = 0;
  double p95 = 0;              // linear interpolation between order statistics
  double stddev = 0;           // sample standard deviation (n - 1)
  double ci95_half_width = 0;  // t(0.975, n-1) * stddev / sqrt(n)
  // Distribution-free 95% CI of the median: [x(j), x(n+1-j)] with j the
  // largest rank such that P(Binomial(n, 1/2) < j) <= 2.5%. Both 0 when
  // n < 6 (no j >= 1 exists).
  double median_ci_low = 0;
  double median_ci_high = 0;
};

// The rank j (1-based) of the lower bound above; 0 when n < 6.
int MedianCiRank(int n);

// Summarizes `samples`; all fields are 0 when it is empty. The CI is 0 for
// fewer than two samples.
SampleSummary Summarize(std::span<const double> samples);

// Two-sided 95% critical value of Student's t with `df` degrees of freedom
// (table for df <= 30, Cornish-Fisher expansion beyond). Hand-written: no
// statistics library is among our dependencies.
double StudentT975(int df);

// Quantile q in [0, 1] of `samples` by linear interpolation (type 7).
double Quantile(std::vector<double> samples, double q);
// Quantile 0.5; 0 for no samples.
double Median(std::vector<double> samples);

// Decides when a case has enough samples (Timing's fields).
// When sampling stops: the measurement loop (worker/measure.h) asks after
// each batch of samples. Pluggable: a kind chooses its criterion.
class StoppingCriterion {
 public:
  virtual ~StoppingCriterion() = default;
  // Why sampling stops now ("ci_target", "max_samples", "steps", ...), or
  // "" to go on. `sampled_s` is the summed duration of all samples.
  virtual std::string StopReason(std::span<const double> samples,
                                 double sampled_s) const = 0;
  // Whether the summary met the criterion's precision target.
  virtual bool TargetMet(const SampleSummary& s) const = 0;
  // Operations per sample, given one operation takes `op_s`.
  virtual int ItersPerSample(double op_s) const = 0;
};

// A fixed number of samples of one operation each (training steps):
// stops with "steps" once `samples` are in; no precision target.
class FixedSampleCount : public StoppingCriterion {
 public:
  explicit FixedSampleCount(int samples) : samples_(samples) {}
  std::string StopReason(std::span<const double> samples,
                         double /*sampled_s*/) const override {
    return static_cast<int>(samples.size()) >= samples_ ? "steps" : "";
  }
  bool TargetMet(const SampleSummary&) const override { return false; }
  int ItersPerSample(double) const override { return 1; }

 private:
  int samples_;
};

// Nccl-tests-style adaptive sampling by the plan's Timing: samples until the
// 95% confidence interval is tight enough, or a limit is hit.
class StoppingRule : public StoppingCriterion {
 public:
  explicit StoppingRule(const v1::Timing& timing) : timing_(timing) {}

  // True once min_samples are in and either the relative CI half-width is
  // within target_ci, max_samples is reached, `sampled_s` (the summed
  // duration of all samples) exceeds max_time_s, or (futility, from
  // kFutilityMinSamples on) the CI is not on course to reach the target
  // within max_samples and max_time: the samples needed, n * (ci /
  // target)^2 for a CI shrinking as 1/sqrt(n), exceed what is left.
  bool ShouldStop(std::span<const double> samples, double sampled_s) const;

  // Why ShouldStop would stop now: "ci_target", "max_samples", "max_time",
  // "futility", or "" when it would not.
  std::string StopReason(std::span<const double> samples,
                         double sampled_s) const override;

  static constexpr int kFutilityMinSamples = 20;

  // True when the relative CI half-width is within target_ci: of the mean
  // (half-width / mean), or with timing.ci_on_median of the median
  // ((high - low) / 2 / median, which needs 6+ samples).
  bool TargetMet(const SampleSummary& s) const override;

  // Ops per sample so one sample lasts about sample_target_s, given one op
  // takes `op_s`; clamped to [1, max_iters_per_sample].
  int ItersPerSample(double op_s) const override;

 private:
  v1::Timing timing_;
};

// Copies a summary into the result schema's Stats.
v1::Stats ToProto(const SampleSummary& s, int iters_per_sample,
                  int warmup_iters, bool ci_target_met);

// Stores `samples` in stats->samples_s: all of them up to
// kMaxStoredSamples, beyond that that many evenly spaced ones.
inline constexpr int kMaxStoredSamples = 1000;
void StoreSamples(std::span<const double> samples, v1::Stats* stats);

}  // namespace ringmaster

#endif  // RINGMASTER_CORE_STATS_H_
