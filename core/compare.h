// Noise-aware comparison of two sets of results (`ringmaster compare`).
//
// Results are matched by what they measured (case, sizes, ranks, variant);
// several runs of one case on a side (repeated jobs) are kept apart as runs.
// Per case the metric is the time per operation (or step): lower is better.
// A change needs to be both large (|change of the median| >= threshold) and
// beyond the noise, judged at the level that dominates:
//  - with 3+ base runs, the run-to-run noise: the spread of the base runs'
//    medians (log scale; per metric, floored by the median spread of all
//    metrics), and the new median must lie outside the prediction
//    interval at level alpha (Student's t, runs - 1 degrees of freedom);
//  - with fewer, the samples: Mann-Whitney U p < alpha and the bootstrap 95%
//    CI of the change excluding zero (on a shared machine this over-flags:
//    runs differ more than samples within a run).
// The summary: with 2+ base runs, each run's "machine factor" (the median
// over metrics of its log time against the base mean) and a two-sample t
// test of the new runs' factors against the base runs' (the spread floored
// by the metrics' median run-to-run spread: runs taken back to back miss
// slower drift): "worse" when the factor moved by at least the threshold
// with p < alpha. When the runs interleave in time (an A/B benchmark: base,
// new, base, new, ...), a paired (20%-trimmed) t test over neighbouring
// runs instead, which cancels the drift (a shared machine's speed drifts
// and moves every metric of a run together; only the run level sees that
// as noise). With one base run: the median change over the
// metrics and the Wilcoxon signed-rank test over their changes.
// docs/report.md gives the reasons and the measured false-alarm rate.
#ifndef RINGMASTER_CORE_COMPARE_H_
#define RINGMASTER_CORE_COMPARE_H_

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "ringmaster/v1/result.pb.h"

namespace ringmaster {

enum class Verdict { kSame, kBetter, kWorse, kFailed, kMissing, kAdded };
std::string_view VerdictName(Verdict v);

struct CompareOptions {
  double alpha = 0.01;      // significance level of the U test
  double threshold = 0.05;  // smallest relative change that counts
  int bootstrap = 2000;     // resamples for the change's CI
  uint64_t seed = 1;        // the bootstrap's generator (reproducible)
};

struct MetricComparison {
  std::string key;  // what was measured, readable
  std::string metric = "time";
  int base_results = 0, new_results = 0;
  int base_samples = 0, new_samples = 0;
  double base_median_s = 0, new_median_s = 0;
  double change = 0;               // new median / base median - 1 (+: slower)
  double ci_low = 0, ci_high = 0;  // 95% bootstrap CI of `change`
  double p_value = 1;  // two-sided: run-level t test or Mann-Whitney U
  int base_runs = 0, new_runs = 0;
  double run_noise = 0;  // run-to-run sd of log(median) used (0: samples)
  Verdict verdict = Verdict::kSame;
  std::string note;  // why, for failed/missing/added or no samples
  // log(median) of each run (job id/attempt) on each side, for the summary.
  std::map<std::string, double> base_run_logs, new_run_logs;
};

// The comparison key of a result: everything that identifies the
// measurement, nothing that depends on the run (job id, attempt, seq).
std::string CompareKey(const v1::Result& r);

// Two-sided tail P(|T| >= t) of Student's t with integer df >= 1.
double StudentTwoSidedP(double t, int df);

// Two-sided p-value of the Wilcoxon signed-rank test that `x` is centred on
// zero (exact for up to 60 values, normal beyond).
double WilcoxonSignedRankP(std::span<const double> x);

// Two-sided p-value of the Mann-Whitney U test (normal approximation with
// tie and continuity corrections; exact enough for n >= 5 per side).
double MannWhitneyP(std::span<const double> a, std::span<const double> b);

std::vector<MetricComparison> CompareResults(
    const std::vector<v1::Result>& base, const std::vector<v1::Result>& next,
    const CompareOptions& options);

// Over the metrics both sides timed: the median change, how many moved up
// and down, the signed-rank test's two-sided p and the verdict.
struct CompareSummary {
  int metrics = 0;
  double median_change = 0;
  int slower = 0, faster = 0;
  double p_value = 1;  // Wilcoxon signed-rank over the metrics' changes
  // With 2+ base runs: each run's "machine factor" (the median over the
  // metrics of its log time against the base mean) and a two-sample t test
  // of the new runs' factors against the base runs' (-1: not done).
  int base_runs = 0, new_runs = 0;
  double machine_change = 0;  // exp(mean new factor - mean base factor) - 1
  double machine_p = -1;
  // The runs interleave in time (base, new, base, new, ...; 3+ each): the
  // test pairs each new run with the base run beside it (paired trimmed t).
  bool paired = false;
  Verdict verdict = Verdict::kSame;
};
CompareSummary SummarizeComparison(const std::vector<MetricComparison>& rows,
                                   const CompareOptions& options);

}  // namespace ringmaster

#endif  // RINGMASTER_CORE_COMPARE_H_
