#include "core/compare.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numbers>
#include <random>
#include <utility>

#include "absl/strings/str_format.h"
#include "core/labels.h"
#include "core/names.h"
#include "core/stats.h"
#include "core/transformer.h"
#include "core/units.h"

namespace ringmaster {
namespace {

struct Side {
  int results = 0;
  int failed = 0;
  std::string failure;
  std::vector<double> samples;
  std::vector<double> medians;  // for results stored without samples
  // Per run (job id and attempt): its samples, or its medians.
  std::map<std::string, std::vector<double>> runs;
};

// The log of each run's median timing, by run.
std::map<std::string, double> LogRunMedians(const Side& s) {
  std::map<std::string, double> out;
  for (const auto& [id, v] : s.runs) {
    const double m = Median(v);
    if (m > 0) out[id] = std::log(m);
  }
  return out;
}

std::vector<double> Values(const std::map<std::string, double>& m) {
  std::vector<double> out;
  for (const auto& [id, v] : m) out.push_back(v);
  return out;
}

double Mean(const std::vector<double>& v) {
  double sum = 0;
  for (double x : v) sum += x;
  return v.empty() ? 0 : sum / static_cast<double>(v.size());
}

double StdDev(const std::vector<double>& v) {
  if (v.size() < 2) return 0;
  const double m = Mean(v);
  double ss = 0;
  for (double x : v) ss += (x - m) * (x - m);
  return std::sqrt(ss / static_cast<double>(v.size() - 1));
}

// Two-sided tail P(|T| >= t) of Student's t with `df` (an integer >= 1)
// degrees of freedom: the closed forms for integer df (Abramowitz & Stegun
// 26.7.3 and 26.7.4). Hand-written: no statistics library in the
// dependency set.
double StudentTail(double t, int df) {
  t = std::abs(t);
  if (df < 1) return 1;
  const double theta = std::atan(t / std::sqrt(static_cast<double>(df)));
  const double c = std::cos(theta), sn = std::sin(theta);
  double a;  // P(|T| < t)
  if (df % 2 == 1) {
    double sum = 0, term = c;
    if (df > 1) {
      sum = c;
      for (int k = 3; k <= df - 2; k += 2) {
        term *= c * c * (k - 1) / k;
        sum += term;
      }
    }
    a = 2 / std::numbers::pi * (theta + sn * sum);
  } else {
    double sum = 1, term = 1;
    for (int k = 2; k <= df - 2; k += 2) {
      term *= c * c * (k - 1) / k;
      sum += term;
    }
    a = sn * sum;
  }
  return std::clamp(1 - a, 0.0, 1.0);
}

// The t with StudentTwoSidedP(t, df) = p, by bisection.
double StudentCritical(double p, int df) {
  double lo = 0, hi = 1e4;
  for (int i = 0; i < 200; ++i) {
    const double mid = (lo + hi) / 2;
    (StudentTail(mid, df) > p ? lo : hi) = mid;
  }
  return (lo + hi) / 2;
}

}  // namespace

double StudentTwoSidedP(double t, int df) { return StudentTail(t, df); }

double WilcoxonSignedRankP(std::span<const double> x) {
  // Hand-written: ranks of |x| (ties averaged, zeros dropped), W+ = the sum
  // of the positive ones' ranks; exact null distribution by counting the
  // subsets of ranks 1..n with each sum (doubled ranks keep ties integral).
  std::vector<std::pair<double, bool>> v;
  for (double d : x)
    if (d != 0 && std::isfinite(d)) v.emplace_back(std::abs(d), d > 0);
  const int n = static_cast<int>(v.size());
  if (n == 0) return 1;
  std::sort(v.begin(), v.end());
  int w2 = 0;  // 2 x W+
  for (int i = 0; i < n;) {
    int j = i;
    while (j < n && v[j].first == v[i].first) ++j;
    const int rank2 = i + j + 1;  // 2 x the average 1-based rank
    for (int k = i; k < j; ++k)
      if (v[k].second) w2 += rank2;
    i = j;
  }
  const int max2 = n * (n + 1);      // 2 x (1 + ... + n)
  if (n > 60) {                      // normal approximation
    const double mean = max2 / 4.0;  // of W+, n(n+1)/4
    const double var = n * (n + 1.0) * (2 * n + 1) / 24;
    const double z = (std::abs(w2 / 2.0 - mean) - 0.5) / std::sqrt(var);
    return std::min(1.0, std::erfc(z / std::sqrt(2.0)));
  }
  // Counts of subsets of {2, 4, ..., 2n} (doubled ranks) by sum.
  std::vector<double> count(max2 + 1, 0);
  count[0] = 1;
  for (int r = 1; r <= n; ++r)
    for (int s = max2; s >= 2 * r; --s) count[s] += count[s - 2 * r];
  const double total = std::ldexp(1.0, n);
  // Two-sided: the tail beyond |W+ - n(n+1)/4| on either side.
  const int lo = std::min(w2, max2 - w2);
  double tail = 0;
  for (int s = 0; s <= lo; ++s) tail += count[s];
  return std::min(1.0, 2 * tail / total);
}

std::string_view VerdictName(Verdict v) {
  switch (v) {
    case Verdict::kBetter:
      return "better";
    case Verdict::kWorse:
      return "worse";
    case Verdict::kFailed:
      return "failed";
    case Verdict::kMissing:
      return "missing";
    case Verdict::kAdded:
      return "added";
    default:
      return "same";
  }
}

std::string CompareKey(const v1::Result& r) {
  const v1::Case& c = r.case_();
  std::string key;
  if (c.bench() == v1::BENCH_COLLECTIVE) {
    key = absl::StrFormat(
        "%s: %s %s %s %s %s, %d ranks, %s", c.spec_name(),
        CollectiveName(c.collective()), DataTypeName(c.dtype()),
        IsReduction(c.collective()) ? ReduceOpName(c.op()) : "-",
        FormatBytes(c.size_bytes()), c.in_place() ? "in-place" : "out",
        r.nranks(), TimingModeName(r.timing_mode()));
    if (c.collective() == v1::BROADCAST || c.collective() == v1::REDUCE)
      absl::StrAppendFormat(&key, ", root %d", c.root());
  } else {
    key = absl::StrFormat("%s: %s", c.spec_name(), BenchLabel(c));
    if (c.bench() == v1::BENCH_GEMM) {
      absl::StrAppendFormat(&key, " %dx%dx%d", c.gemm().m(), c.gemm().n(),
                            c.gemm().k());
    } else if (c.bench() == v1::BENCH_TRANSFORMER) {
      absl::StrAppend(&key, ", layout ", LayoutName(c));
    } else if (c.bench() == v1::BENCH_INFERENCE) {
      absl::StrAppendFormat(&key, ", layout %s, batch %d", LayoutName(c),
                            c.transformer().micro_batch());
    } else if (c.bench() != v1::BENCH_TRAIN) {
      absl::StrAppend(&key, " ", FormatBytes(c.size_bytes()));
    }
    if (c.pattern() == v1::PAIR || c.bench() == v1::BENCH_LATENCY) {
      absl::StrAppendFormat(&key, ", %d->%d", c.src_rank(), c.dst_rank());
    } else if (c.pattern() == v1::ONE_RANK || c.pattern() == v1::ONE_TO_ALL) {
      absl::StrAppendFormat(&key, ", rank %d", c.src_rank());
    } else if (c.pattern() == v1::ALL_TO_ONE) {
      absl::StrAppendFormat(&key, ", to rank %d", c.dst_rank());
    }
    absl::StrAppendFormat(&key, ", %d ranks", r.nranks());
  }
  if (!c.variant().empty()) absl::StrAppend(&key, ", variant ", c.variant());
  return key;
}

double MannWhitneyP(std::span<const double> a, std::span<const double> b) {
  // Hand-written (a few lines; no statistics library in Debian's C++ set):
  // ranks of the pooled samples, ties get their average rank.
  const size_t n1 = a.size(), n2 = b.size();
  if (n1 == 0 || n2 == 0) return 1;
  std::vector<std::pair<double, int>> all;
  all.reserve(n1 + n2);
  for (double v : a) all.emplace_back(v, 0);
  for (double v : b) all.emplace_back(v, 1);
  std::sort(all.begin(), all.end());
  const double n = static_cast<double>(n1 + n2);
  double rank_sum_a = 0, tie_term = 0;
  for (size_t i = 0; i < all.size();) {
    size_t j = i;
    while (j < all.size() && all[j].first == all[i].first) ++j;
    const double avg_rank = (static_cast<double>(i + j) + 1) / 2;  // 1-based
    const double t = static_cast<double>(j - i);
    tie_term += t * t * t - t;
    for (size_t k = i; k < j; ++k)
      if (all[k].second == 0) rank_sum_a += avg_rank;
    i = j;
  }
  const double u = rank_sum_a - n1 * (n1 + 1.0) / 2;
  const double mean = n1 * static_cast<double>(n2) / 2;
  const double var =
      n1 * static_cast<double>(n2) / 12 * ((n + 1) - tie_term / (n * (n - 1)));
  if (var <= 0) return 1;  // every sample equal
  const double z = (std::abs(u - mean) - 0.5) / std::sqrt(var);
  if (z <= 0) return 1;
  return std::erfc(z / std::sqrt(2.0));
}

namespace {

// Adds `results` to `sides` by comparison key; `order` receives each key
// the first time either side has it.
void CollectSides(const std::vector<v1::Result>& results,
                  const std::map<std::string, Side>& other,
                  std::map<std::string, Side>* sides,
                  std::vector<std::string>* order) {
  for (const auto& r : results) {
    const std::string key = CompareKey(r);
    if (!sides->count(key) && !other.count(key)) order->push_back(key);
    Side& s = (*sides)[key];
    ++s.results;
    if (r.status() == v1::SKIPPED) continue;
    if (r.status() != v1::OK) {
      ++s.failed;
      s.failure =
          std::string(FailureReason_Name(r.failure().reason())) +
          (r.failure().detail().empty() ? "" : ": " + r.failure().detail());
      continue;
    }
    // Runs sort by their job's start (RFC 3339, so text order is time
    // order) for the interleaved-runs pairing of SummarizeComparison.
    const std::string run = absl::StrFormat(
        "%s %s/%d", r.provenance().started_at(), r.job_id(), r.attempt());
    if (r.stats().samples_s_size() > 0) {
      s.samples.insert(s.samples.end(), r.stats().samples_s().begin(),
                       r.stats().samples_s().end());
      s.runs[run].insert(s.runs[run].end(), r.stats().samples_s().begin(),
                         r.stats().samples_s().end());
    } else if (r.stats().median_s() > 0) {
      s.medians.push_back(r.stats().median_s());
      s.runs[run].push_back(r.stats().median_s());
    }
  }
}

// Run level (3+ base runs): the new runs' mean log median against the base
// runs', with Student's t on the runs' noise.
void JudgeRuns(const std::vector<double>& base_logs,
               const std::vector<double>& new_logs, double sd,
               const CompareOptions& o, MetricComparison* m) {
  const double d = Mean(new_logs) - Mean(base_logs);
  const double noise =
      sd * std::sqrt(1.0 / static_cast<double>(new_logs.size()) +
                     1.0 / static_cast<double>(base_logs.size()));
  m->run_noise = sd;
  m->change = std::exp(d) - 1;
  // A prediction interval: the sd comes from the base runs, so
  // Student's t with (runs - 1) degrees of freedom, not the normal.
  const int df = static_cast<int>(base_logs.size()) - 1;
  const double t95 = StudentCritical(0.05, df);
  m->ci_low = std::exp(d - t95 * noise) - 1;
  m->ci_high = std::exp(d + t95 * noise) - 1;
  m->p_value = noise > 0 ? StudentTail(d / noise, df) : (d == 0 ? 1.0 : 0.0);
  if (std::abs(m->change) >= o.threshold && m->p_value < o.alpha) {
    m->verdict = d > 0 ? Verdict::kWorse : Verdict::kBetter;
  }
}

// Sample level: a percentile bootstrap of the change of medians, and the
// Mann-Whitney p already in `m`.
void JudgeSamples(const std::vector<double>& xa, const std::vector<double>& xb,
                  const CompareOptions& o, std::mt19937_64* rng,
                  MetricComparison* m) {
  std::vector<double> changes;
  changes.reserve(o.bootstrap);
  std::vector<double> ra(xa.size()), rb(xb.size());
  std::uniform_int_distribution<size_t> pick_a(0, xa.size() - 1),
      pick_b(0, xb.size() - 1);
  for (int i = 0; i < o.bootstrap; ++i) {
    for (double& v : ra) v = xa[pick_a(*rng)];
    for (double& v : rb) v = xb[pick_b(*rng)];
    const double ma = Median(ra);
    if (ma > 0) changes.push_back(Median(rb) / ma - 1);
  }
  if (!changes.empty()) {
    std::sort(changes.begin(), changes.end());
    auto at = [&](double q) {
      return changes[std::min(changes.size() - 1,
                              static_cast<size_t>(q * changes.size()))];
    };
    m->ci_low = at(0.025);
    m->ci_high = at(0.975);
  }
  const bool few = xa.size() < 3 || xb.size() < 3;
  if (few) m->note = "fewer than 3 samples on a side: no test";
  if (!few && m->p_value < o.alpha && std::abs(m->change) >= o.threshold) {
    if (m->change > 0 && m->ci_low > 0) m->verdict = Verdict::kWorse;
    if (m->change < 0 && m->ci_high < 0) m->verdict = Verdict::kBetter;
  }
}

}  // namespace

std::vector<MetricComparison> CompareResults(
    const std::vector<v1::Result>& base, const std::vector<v1::Result>& next,
    const CompareOptions& o) {
  std::vector<std::string> order;
  std::map<std::string, Side> a, b;
  CollectSides(base, b, &a, &order);
  CollectSides(next, a, &b, &order);

  // Run-to-run noise: per metric the sd of the base runs' log medians; the
  // median of those over all metrics floors each (a few runs give a rough
  // sd per metric, the pool of metrics a steadier one).
  std::map<std::string, double> run_sd;
  std::vector<double> sds;
  for (const auto& [key, side] : a) {
    const auto logs = Values(LogRunMedians(side));
    if (logs.size() >= 3) {
      run_sd[key] = StdDev(logs);
      sds.push_back(run_sd[key]);
    }
  }
  const double pooled_sd = sds.empty() ? 0 : Median(sds);

  std::mt19937_64 rng(o.seed);
  std::vector<MetricComparison> out;
  for (const std::string& key : order) {
    MetricComparison m;
    m.key = key;
    const Side& sa = a[key];
    const Side& sb = b[key];
    m.base_results = sa.results;
    m.new_results = sb.results;
    m.base_samples = static_cast<int>(sa.samples.size());
    m.new_samples = static_cast<int>(sb.samples.size());
    if (sb.results == 0) {
      m.verdict = Verdict::kMissing;
      m.note = "not in the new results";
      out.push_back(m);
      continue;
    }
    if (sa.results == 0) {
      m.verdict = Verdict::kAdded;
      m.note = "not in the base results";
      out.push_back(m);
      continue;
    }
    if (sb.failed > 0 && sa.failed == 0) {
      m.verdict = Verdict::kFailed;
      m.note = "failed in the new results: " + sb.failure;
      out.push_back(m);
      continue;
    }
    const std::vector<double>& xa =
        sa.samples.empty() ? sa.medians : sa.samples;
    const std::vector<double>& xb =
        sb.samples.empty() ? sb.medians : sb.samples;
    if (xa.empty() || xb.empty()) {
      m.note = "no timing on one side";
      out.push_back(m);
      continue;
    }
    m.base_median_s = Median(xa);
    m.new_median_s = Median(xb);
    m.change = m.base_median_s > 0 ? m.new_median_s / m.base_median_s - 1 : 0;
    m.p_value = MannWhitneyP(xa, xb);
    m.base_runs = static_cast<int>(sa.runs.size());
    m.new_runs = static_cast<int>(sb.runs.size());
    m.base_run_logs = LogRunMedians(sa);
    m.new_run_logs = LogRunMedians(sb);
    const auto base_logs = Values(m.base_run_logs);
    const auto new_logs = Values(m.new_run_logs);
    if (base_logs.size() >= 3 && !new_logs.empty()) {
      JudgeRuns(base_logs, new_logs, std::max(run_sd[key], pooled_sd), o, &m);
      out.push_back(m);
      continue;
    }
    JudgeSamples(xa, xb, o, &rng, &m);
    out.push_back(m);
  }
  return out;
}

namespace {

// Hand-written: the 20%-trimmed mean of `d` and the two-sided p of the
// Tukey-McLaughlin t that it is 0 (winsorized deviation, h - 1 degrees of
// freedom, h the values kept).
std::pair<double, double> TrimmedMeanTest(std::vector<double> d) {
  std::sort(d.begin(), d.end());
  const size_t n = d.size(), g = n / 5, h = n - 2 * g;
  double tm = 0;
  for (size_t i = g; i < n - g; ++i) tm += d[i];
  tm /= static_cast<double>(h);
  std::vector<double> w(d);
  for (double& x : w) x = std::clamp(x, d[g], d[n - g - 1]);
  const double wm = Mean(w);
  double ss = 0;
  for (double x : w) ss += (x - wm) * (x - wm);
  const double sw = std::sqrt(ss / static_cast<double>(n - 1));
  const double se = sw / (static_cast<double>(h) / static_cast<double>(n) *
                          std::sqrt(n * 1.0));
  const double p = se > 0 ? StudentTail(tm / se, static_cast<int>(h) - 1)
                          : (tm == 0 ? 1.0 : 0.0);
  return {tm, p};
}

// The per-pair differences (new - base) of the runs' machine factors when
// the runs interleave: both sides have the same number of runs, every run
// has a start time (run ids begin with it) and, in start order, each
// consecutive two are one base and one new run. Otherwise nothing.
std::vector<double> InterleavedDifferences(
    const std::map<std::string, std::vector<double>>& base_f,
    const std::map<std::string, std::vector<double>>& new_f) {
  if (base_f.size() != new_f.size()) return {};
  std::vector<std::pair<std::string, int>> order;  // run id, 0 base 1 new
  for (const auto& [id, v] : base_f) order.emplace_back(id, 0);
  for (const auto& [id, v] : new_f) order.emplace_back(id, 1);
  for (const auto& [id, side] : order)
    if (id.empty() || id[0] == ' ') return {};  // no start time
  std::sort(order.begin(), order.end());
  std::vector<double> d;
  for (size_t i = 0; i + 1 < order.size(); i += 2) {
    const auto& [x, sx] = order[i];
    const auto& [y, sy] = order[i + 1];
    if (sx == sy) return {};
    const std::string& b = sx == 0 ? x : y;
    const std::string& n = sx == 0 ? y : x;
    d.push_back(Median(new_f.at(n)) - Median(base_f.at(b)));
  }
  return d;
}

}  // namespace

CompareSummary SummarizeComparison(const std::vector<MetricComparison>& rows,
                                   const CompareOptions& o) {
  CompareSummary sum;
  std::vector<double> changes;
  for (const auto& m : rows) {
    if (m.base_median_s <= 0 || m.new_median_s <= 0) continue;
    changes.push_back(m.change);
    if (m.change > 0) ++sum.slower;
    if (m.change < 0) ++sum.faster;
  }
  sum.metrics = static_cast<int>(changes.size());
  if (changes.empty()) return sum;
  sum.median_change = Median(changes);
  sum.p_value = WilcoxonSignedRankP(changes);
  // Machine factors: per run, the median over metrics of its log time
  // minus the metric's base mean.
  std::map<std::string, std::vector<double>> base_f, new_f;
  for (const auto& m : rows) {
    if (m.base_run_logs.empty() || m.new_run_logs.empty()) continue;
    double mean = 0;
    for (const auto& [id, l] : m.base_run_logs) mean += l;
    mean /= static_cast<double>(m.base_run_logs.size());
    for (const auto& [id, l] : m.base_run_logs) base_f[id].push_back(l - mean);
    for (const auto& [id, l] : m.new_run_logs) new_f[id].push_back(l - mean);
  }
  std::vector<double> fa, fb;
  for (auto& [id, v] : base_f) fa.push_back(Median(v));
  for (auto& [id, v] : new_f) fb.push_back(Median(v));
  sum.base_runs = static_cast<int>(fa.size());
  sum.new_runs = static_cast<int>(fb.size());
  // Interleaved runs (base, new, base, new, ... in start order, as an A/B
  // benchmark on a shared machine takes them): each new run against the
  // base run beside it in time, a paired t test. The machine's drift moves
  // both runs of a pair alike and cancels, so no floor is needed.
  if (std::vector<double> d = InterleavedDifferences(base_f, new_f);
      d.size() >= 3) {
    // Trimmed: one run hit by a burst of the neighbours' load moves its
    // pair's difference by tens of percent, which would swamp a plain t
    // test's deviation (CI: +10.4% over 12 pairs, plain paired p 0.076).
    const auto [tm, t_p] = TrimmedMeanTest(d);
    sum.paired = true;
    sum.machine_change = std::exp(tm) - 1;
    sum.machine_p = t_p;
    if (std::abs(sum.machine_change) >= o.threshold &&
        sum.machine_p < o.alpha) {
      sum.verdict = tm > 0 ? Verdict::kWorse : Verdict::kBetter;
    }
    return sum;
  }
  if (fa.size() >= 2 && !fb.empty()) {
    // Pooled two-sample t test (one new run: a prediction interval).
    const double ma = Mean(fa), mb = Mean(fb);
    double ss = 0;
    for (double x : fa) ss += (x - ma) * (x - ma);
    for (double x : fb) ss += (x - mb) * (x - mb);
    const int df = static_cast<int>(fa.size() + fb.size()) - 2;
    // Floored by the metrics' typical run-to-run spread: base runs taken
    // back to back miss a machine's slower drift, which a median over
    // metrics would otherwise hide from the estimate.
    std::vector<double> metric_sd;
    for (const auto& m : rows)
      if (m.run_noise > 0) metric_sd.push_back(m.run_noise);
    const double floor_sd = metric_sd.empty() ? 0 : Median(metric_sd);
    const double sd = std::max(std::sqrt(ss / df), floor_sd);
    const double se = sd * std::sqrt(1.0 / static_cast<double>(fa.size()) +
                                     1.0 / static_cast<double>(fb.size()));
    sum.machine_change = std::exp(mb - ma) - 1;
    sum.machine_p =
        se > 0 ? StudentTail((mb - ma) / se, df) : (mb == ma ? 1.0 : 0.0);
    // Runs on both sides: the run level decides (a shared machine's drift
    // moves every metric of a run together, which the signed-rank test over
    // metrics would take for a change).
    if (std::abs(sum.machine_change) >= o.threshold &&
        sum.machine_p < o.alpha) {
      sum.verdict = mb > ma ? Verdict::kWorse : Verdict::kBetter;
    }
    return sum;
  }
  // One base run: the metrics' changes.
  if (std::abs(sum.median_change) >= o.threshold && sum.p_value < o.alpha) {
    sum.verdict = sum.median_change > 0 ? Verdict::kWorse : Verdict::kBetter;
  }
  return sum;
}

}  // namespace ringmaster
