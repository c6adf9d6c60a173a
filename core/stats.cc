#include "core/stats.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace ringmaster {

double Quantile(std::vector<double> samples, double q) {
  if (samples.empty()) return 0;
  std::sort(samples.begin(), samples.end());
  q = std::clamp(q, 0.0, 1.0);
  double pos = q * static_cast<double>(samples.size() - 1);
  size_t lo = static_cast<size_t>(std::floor(pos));
  size_t hi = std::min(lo + 1, samples.size() - 1);
  double frac = pos - static_cast<double>(lo);
  return samples[lo] + (samples[hi] - samples[lo]) * frac;
}

double StudentT975(int df) {
  static constexpr double kTable[] = {
      0,     12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365,
      2.306, 2.262,  2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
      2.120, 2.110,  2.101, 2.093, 2.086, 2.080, 2.074, 2.069,
      2.064, 2.060,  2.056, 2.052, 2.048, 2.045, 2.042};
  if (df < 1) return INFINITY;
  if (df <= 30) return kTable[df];
  const double z = 1.959963984540054;
  const double v = static_cast<double>(df);
  const double z3 = z * z * z, z5 = z3 * z * z;
  return z + (z3 + z) / (4 * v) + (5 * z5 + 16 * z3 + 3 * z) / (96 * v * v);
}

int MedianCiRank(int n) {
  // Largest j with P(B <= j - 1) <= 0.025 for B ~ Binomial(n, 1/2); the pmf
  // is summed in log space so large n does not underflow. log C(n, i) is
  // built up term by term (lgamma writes the global signgam: not
  // thread-safe).
  int j = 0;
  double cdf = 0;
  double log_choose = 0;  // log C(n, i)
  for (int i = 0; i < n; ++i) {
    if (i > 0) log_choose += std::log(n - i + 1.0) - std::log(i);
    cdf += std::exp(log_choose + n * std::log(0.5));
    if (cdf > 0.025) break;
    j = i + 1;
  }
  return std::min(j, (n + 1) / 2);
}

SampleSummary Summarize(std::span<const double> samples) {
  SampleSummary s;
  s.n = static_cast<int>(samples.size());
  if (samples.empty()) return s;
  std::vector<double> v(samples.begin(), samples.end());
  std::sort(v.begin(), v.end());
  s.min = v.front();
  s.max = v.back();
  s.median = Quantile(v, 0.5);
  s.p95 = Quantile(v, 0.95);
  s.mean = std::accumulate(v.begin(), v.end(), 0.0) / s.n;
  if (s.n >= 2) {
    double ss = 0;
    for (double x : v) ss += (x - s.mean) * (x - s.mean);
    s.stddev = std::sqrt(ss / (s.n - 1));
    s.ci95_half_width = StudentT975(s.n - 1) * s.stddev / std::sqrt(s.n);
  }
  if (int j = MedianCiRank(s.n); j >= 1) {
    s.median_ci_low = v[j - 1];
    s.median_ci_high = v[s.n - j];
  }
  return s;
}

bool StoppingRule::TargetMet(const SampleSummary& s) const {
  if (timing_.ci_on_median()) {
    if (MedianCiRank(s.n) < 1 || s.median <= 0) return false;
    return (s.median_ci_high - s.median_ci_low) / 2 / s.median <=
           timing_.target_ci();
  }
  if (s.n < 2 || s.mean <= 0) return false;
  return s.ci95_half_width / s.mean <= timing_.target_ci();
}

std::string StoppingRule::StopReason(std::span<const double> samples,
                                     double sampled_s) const {
  int n = static_cast<int>(samples.size());
  if (n < timing_.min_samples()) return "";
  SampleSummary s = Summarize(samples);
  if (TargetMet(s)) return "ci_target";
  if (n >= timing_.max_samples()) return "max_samples";
  if (timing_.max_time_s() > 0 && sampled_s >= timing_.max_time_s())
    return "max_time";
  if (n >= kFutilityMinSamples && timing_.target_ci() > 0) {
    double rel = -1;
    if (timing_.ci_on_median()) {
      if (s.median > 0 && s.median_ci_high > 0) {
        rel = (s.median_ci_high - s.median_ci_low) / 2 / s.median;
      }
    } else if (s.mean > 0) {
      rel = s.ci95_half_width / s.mean;
    }
    if (rel > 0) {
      double needed =
          n * (rel / timing_.target_ci()) * (rel / timing_.target_ci());
      double by_count = timing_.max_samples();
      double by_time = timing_.max_time_s() > 0 && sampled_s > 0
                           ? n * timing_.max_time_s() / sampled_s
                           : by_count;
      if (needed > std::min(by_count, by_time)) return "futility";
    }
  }
  return "";
}

bool StoppingRule::ShouldStop(std::span<const double> samples,
                              double sampled_s) const {
  return !StopReason(samples, sampled_s).empty();
}

int StoppingRule::ItersPerSample(double op_s) const {
  int cap = std::max(1, timing_.max_iters_per_sample());
  if (!(op_s > 0)) return cap;
  double iters = std::ceil(timing_.sample_target_s() / op_s);
  if (!(iters >= 1)) return 1;
  return static_cast<int>(std::min<double>(iters, cap));
}

v1::Stats ToProto(const SampleSummary& s, int iters_per_sample,
                  int warmup_iters, bool ci_target_met) {
  v1::Stats p;
  p.set_samples(s.n);
  p.set_iters_per_sample(iters_per_sample);
  p.set_median_s(s.median);
  p.set_mean_s(s.mean);
  p.set_min_s(s.min);
  p.set_max_s(s.max);
  p.set_p95_s(s.p95);
  p.set_stddev_s(s.stddev);
  p.set_ci95_half_width_s(s.ci95_half_width);
  p.set_ci_target_met(ci_target_met);
  p.set_warmup_iters(warmup_iters);
  p.set_median_ci95_low_s(s.median_ci_low);
  p.set_median_ci95_high_s(s.median_ci_high);
  return p;
}

void StoreSamples(std::span<const double> samples, v1::Stats* stats) {
  stats->clear_samples_s();
  const size_t n = samples.size();
  const size_t keep = std::min<size_t>(n, kMaxStoredSamples);
  for (size_t i = 0; i < keep; ++i) stats->add_samples_s(samples[i * n / keep]);
}

double Median(std::vector<double> samples) {
  return samples.empty() ? 0 : Quantile(std::move(samples), 0.5);
}

}  // namespace ringmaster
