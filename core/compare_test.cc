#include "core/compare.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>
#include <vector>

#include "absl/strings/str_format.h"

namespace ringmaster {
namespace {

TEST(StudentT, TablesValues) {
  // Two-sided 1% and 5% critical values from the t tables.
  EXPECT_NEAR(StudentTwoSidedP(63.657, 1), 0.01, 1e-4);
  EXPECT_NEAR(StudentTwoSidedP(4.604, 4), 0.01, 1e-4);
  EXPECT_NEAR(StudentTwoSidedP(2.571, 5), 0.05, 1e-4);
  EXPECT_NEAR(StudentTwoSidedP(2.086, 20), 0.05, 1e-4);
  EXPECT_NEAR(StudentTwoSidedP(0, 7), 1.0, 1e-12);
  EXPECT_NEAR(StudentTwoSidedP(-4.604, 4), 0.01, 1e-4);  // symmetric
}

TEST(MannWhitney, HandComputed) {
  // a = 1..5, b = 6..10: U = 0, mean 12.5, variance 5*5*11/12 = 22.917;
  // z = (12.5 - 0.5) / 4.787 = 2.507, two-sided p = erfc(z/sqrt 2) = 0.0122.
  std::vector<double> a = {1, 2, 3, 4, 5}, b = {6, 7, 8, 9, 10};
  EXPECT_NEAR(MannWhitneyP(a, b), 0.0122, 5e-4);
  EXPECT_NEAR(MannWhitneyP(b, a), 0.0122, 5e-4);  // symmetric
  // Interleaved: no evidence of a shift.
  std::vector<double> c = {1, 3, 5, 7, 9}, d = {2, 4, 6, 8, 10};
  EXPECT_GT(MannWhitneyP(c, d), 0.5);
  // All tied: no information.
  std::vector<double> e = {1, 1, 1}, f = {1, 1, 1};
  EXPECT_EQ(MannWhitneyP(e, f), 1.0);
}

v1::Result Timed(const std::string& spec, const std::vector<double>& samples,
                 v1::Status status = v1::OK) {
  v1::Result r;
  r.mutable_case_()->set_spec_name(spec);
  r.mutable_case_()->set_collective(v1::ALL_REDUCE);
  r.mutable_case_()->set_size_bytes(1 << 20);
  r.set_nranks(2);
  r.set_status(status);
  for (double s : samples) r.mutable_stats()->add_samples_s(s);
  if (status != v1::OK) r.mutable_failure()->set_reason(v1::DATA_MISMATCH);
  return r;
}

std::vector<double> Noisy(double centre, double spread, int n, int seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> noise(0, spread);
  std::vector<double> v;
  for (int i = 0; i < n; ++i) v.push_back(centre * (1 + noise(rng)));
  return v;
}

TEST(CompareResults, Verdicts) {
  std::vector<v1::Result> base = {
      Timed("slower", Noisy(1e-3, 0.02, 30, 1)),
      Timed("steady", Noisy(1e-3, 0.02, 30, 2)),
      Timed("faster", Noisy(1e-3, 0.02, 30, 3)),
      Timed("tiny_shift", Noisy(1e-3, 0.002, 30, 4)),
      Timed("breaks", Noisy(1e-3, 0.02, 30, 5)),
      Timed("gone", Noisy(1e-3, 0.02, 30, 6))};
  std::vector<v1::Result> next = {
      Timed("slower", Noisy(1.1e-3, 0.02, 30, 11)),
      Timed("steady", Noisy(1e-3, 0.02, 30, 12)),
      Timed("faster", Noisy(0.8e-3, 0.02, 30, 13)),
      // Significant (tiny noise) but only 2%: below the 5% threshold.
      Timed("tiny_shift", Noisy(1.02e-3, 0.002, 30, 14)),
      Timed("breaks", {}, v1::FAILED),
      Timed("fresh", Noisy(1e-3, 0.02, 30, 7))};
  auto out = CompareResults(base, next, CompareOptions{});
  std::map<std::string, MetricComparison> by;
  for (const auto& m : out) by[m.key.substr(0, m.key.find(':'))] = m;
  ASSERT_EQ(by.size(), 7u);
  EXPECT_EQ(by["slower"].verdict, Verdict::kWorse);
  EXPECT_NEAR(by["slower"].change, 0.10, 0.02);
  EXPECT_GT(by["slower"].ci_low, 0.05);
  EXPECT_LT(by["slower"].p_value, 1e-6);
  EXPECT_EQ(by["steady"].verdict, Verdict::kSame);
  EXPECT_EQ(by["faster"].verdict, Verdict::kBetter);
  EXPECT_LT(by["faster"].ci_high, 0);
  EXPECT_EQ(by["tiny_shift"].verdict, Verdict::kSame);
  EXPECT_LT(by["tiny_shift"].p_value, 0.01);  // real, but too small to count
  EXPECT_EQ(by["breaks"].verdict, Verdict::kFailed);
  EXPECT_EQ(by["gone"].verdict, Verdict::kMissing);
  EXPECT_EQ(by["fresh"].verdict, Verdict::kAdded);
}

TEST(CompareResults, RepeatedRunsPoolTheirSamples) {
  std::vector<v1::Result> base = {Timed("x", {1, 2, 3}), Timed("x", {4, 5})};
  std::vector<v1::Result> next = {Timed("x", {1, 2, 3, 4, 5})};
  auto out = CompareResults(base, next, CompareOptions{});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].base_results, 2);
  EXPECT_EQ(out[0].base_samples, 5);
  EXPECT_EQ(out[0].verdict, Verdict::kSame);
  EXPECT_DOUBLE_EQ(out[0].change, 0);
}

// Runs whose medians wander by ~5% between runs while samples within a run
// are tight: the sample-level test would call most pairs of runs different;
// the run level (3+ base runs) does not, and still sees a 20% slowdown.
TEST(CompareResults, RunToRunNoiseFromRepeatedBaseRuns) {
  std::mt19937_64 rng(42);
  std::normal_distribution<double> run_shift(0, 0.05);
  auto run = [&](const std::string& job, double factor) {
    std::vector<v1::Result> out;
    for (const char* spec :
         {"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"}) {
      v1::Result r = Timed(spec, Noisy(1e-3 * factor * (1 + run_shift(rng)),
                                       0.005, 20, static_cast<int>(rng())));
      r.set_job_id(job);
      out.push_back(r);
    }
    return out;
  };
  std::vector<v1::Result> base;
  for (int i = 0; i < 6; ++i) {
    auto r = run("base" + std::to_string(i), 1.0);
    base.insert(base.end(), r.begin(), r.end());
  }
  int same = 0, total = 0;
  for (int i = 0; i < 10; ++i) {
    auto rows = CompareResults(base, run("new" + std::to_string(i), 1.0),
                               CompareOptions{});
    for (const auto& m : rows) {
      EXPECT_EQ(m.base_runs, 6);
      EXPECT_GT(m.run_noise, 0);
      same += m.verdict == Verdict::kSame;
      ++total;
    }
    EXPECT_EQ(SummarizeComparison(rows, CompareOptions{}).verdict,
              Verdict::kSame);
  }
  EXPECT_GE(same, total * 95 / 100) << same << " of " << total;
  // A slowdown needs a few runs to stand out from run-to-run noise.
  std::vector<v1::Result> slow_runs;
  for (int i = 0; i < 3; ++i) {
    auto r = run("slow" + std::to_string(i), 1.2);
    slow_runs.insert(slow_runs.end(), r.begin(), r.end());
  }
  auto slow = CompareResults(base, slow_runs, CompareOptions{});
  const CompareSummary sum = SummarizeComparison(slow, CompareOptions{});
  EXPECT_EQ(sum.verdict, Verdict::kWorse);
  EXPECT_NEAR(sum.median_change, 0.2, 0.08);
  EXPECT_EQ(sum.slower, 10);  // the sign test needs 8+ metrics at 0.01
}

TEST(CompareResults, InterleavedRunsArePairedAndCancelTheDrift) {
  // A machine whose speed drifts by +-15% over the minutes: 8 base runs
  // and 8 runs 10% slower, taken alternately, each pair in the same minute.
  // Unpaired, the drift (sd ~0.1 across runs) hides the 10%; paired with
  // the base run beside it, the drift cancels.
  std::mt19937_64 rng(7);
  auto run = [&](const std::string& job, const std::string& at, double factor) {
    std::vector<v1::Result> out;
    for (const char* spec : {"a", "b", "c", "d", "e", "f"}) {
      v1::Result r =
          Timed(spec, Noisy(1e-3 * factor, 0.005, 20, static_cast<int>(rng())));
      r.set_job_id(job);
      r.mutable_provenance()->set_started_at(at);
      out.push_back(r);
    }
    return out;
  };
  const double drift[8] = {1.0, 1.15, 0.9, 1.1, 0.85, 1.05, 0.95, 1.2};
  std::vector<v1::Result> base, slow;
  for (int i = 0; i < 8; ++i) {
    const std::string minute = absl::StrFormat("2026-12-01T10:%02d:", i);
    auto b = run("b" + std::to_string(i), minute + "00Z", drift[i]);
    auto n = run("n" + std::to_string(i), minute + "30Z", drift[i] * 1.1);
    base.insert(base.end(), b.begin(), b.end());
    slow.insert(slow.end(), n.begin(), n.end());
  }
  CompareSummary sum =
      SummarizeComparison(CompareResults(base, slow, {}), CompareOptions{});
  EXPECT_TRUE(sum.paired);
  EXPECT_EQ(sum.verdict, Verdict::kWorse);
  EXPECT_NEAR(sum.machine_change, 0.1, 0.01);
  EXPECT_LT(sum.machine_p, 1e-6);
  // One pair hit by a burst of load (its base run 40% slow) does not hide
  // the slowdown: the test trims it.
  {
    std::vector<v1::Result> hit = base;
    for (int k = 0; k < 6; ++k) {
      auto* samples = hit[3 * 6 + k].mutable_stats()->mutable_samples_s();
      for (double& x : *samples) x *= 1.4;
    }
    CompareSummary h =
        SummarizeComparison(CompareResults(hit, slow, {}), CompareOptions{});
    EXPECT_TRUE(h.paired);
    EXPECT_EQ(h.verdict, Verdict::kWorse) << h.machine_p;
    EXPECT_NEAR(h.machine_change, 0.1, 0.02);
  }
  // The same runs without start times cannot be paired: the unpaired test
  // sees the drift and says nothing.
  for (auto* side : {&base, &slow})
    for (auto& r : *side) r.mutable_provenance()->clear_started_at();
  sum = SummarizeComparison(CompareResults(base, slow, {}), CompareOptions{});
  EXPECT_FALSE(sum.paired);
  EXPECT_EQ(sum.verdict, Verdict::kSame);
  // Nor can runs that do not alternate (all base runs first): unpaired.
  for (int i = 0; i < 8 * 6; ++i) {
    base[i].mutable_provenance()->set_started_at(
        absl::StrFormat("2026-12-01T10:%02d:00Z", i / 6));
    slow[i].mutable_provenance()->set_started_at(
        absl::StrFormat("2026-12-01T11:%02d:00Z", i / 6));
  }
  sum = SummarizeComparison(CompareResults(base, slow, {}), CompareOptions{});
  EXPECT_FALSE(sum.paired);
  // Equal speeds, interleaved: same.
  std::vector<v1::Result> again;
  for (int i = 0; i < 8; ++i) {
    auto n = run("m" + std::to_string(i),
                 absl::StrFormat("2026-12-01T10:%02d:30Z", i), drift[i]);
    again.insert(again.end(), n.begin(), n.end());
  }
  for (int i = 0; i < 8 * 6; ++i)
    base[i].mutable_provenance()->set_started_at(
        absl::StrFormat("2026-12-01T10:%02d:00Z", i / 6));
  sum = SummarizeComparison(CompareResults(base, again, {}), CompareOptions{});
  EXPECT_TRUE(sum.paired);
  EXPECT_EQ(sum.verdict, Verdict::kSame);
}

TEST(Wilcoxon, HandComputed) {
  // All 10 up: W+ = 55, only 1 of 1024 subsets reaches it each way.
  std::vector<double> up = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  EXPECT_NEAR(WilcoxonSignedRankP(up), 2.0 / 1024, 1e-12);
  // Ranks 1..10, the smallest down: W- = 1; subsets with sum <= 1: {}, {1}.
  std::vector<double> one_down = {-1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  EXPECT_NEAR(WilcoxonSignedRankP(one_down), 2 * 2.0 / 1024, 1e-12);
  // Symmetric around zero: no evidence.
  std::vector<double> even = {-3, -2, -1, 1, 2, 3};
  EXPECT_NEAR(WilcoxonSignedRankP(even), 1.0, 1e-12);
  EXPECT_EQ(WilcoxonSignedRankP(std::vector<double>{}), 1.0);
}

TEST(SummarizeComparison, SignedRankTest) {
  std::vector<MetricComparison> rows(10);
  for (auto& m : rows) {
    m.base_median_s = 1;
    m.new_median_s = 1.1;
    m.change = 0.1;
  }
  CompareSummary s = SummarizeComparison(rows, CompareOptions{});
  EXPECT_EQ(s.slower, 10);
  EXPECT_NEAR(s.p_value, 2.0 / 1024, 1e-12);  // all 10 up
  EXPECT_EQ(s.verdict, Verdict::kWorse);
  // Half up, half down by as much: the median moved (+10%) but no
  // consistent shift.
  for (int i = 0; i < 5; ++i) rows[i].change = -0.1;
  s = SummarizeComparison(rows, CompareOptions{});
  EXPECT_NEAR(s.p_value, 1.0, 1e-12);
  EXPECT_EQ(s.verdict, Verdict::kSame);
}

TEST(CompareKey, IgnoresTheRunAndKeepsTheMeasurement) {
  v1::Result a = Timed("x", {1});
  v1::Result b = a;
  b.set_job_id("other");
  b.mutable_case_()->set_seq(7);
  EXPECT_EQ(CompareKey(a), CompareKey(b));
  b.mutable_case_()->set_size_bytes(2 << 20);
  EXPECT_NE(CompareKey(a), CompareKey(b));
  b = a;
  b.set_nranks(4);
  EXPECT_NE(CompareKey(a), CompareKey(b));
  b = a;
  b.mutable_case_()->set_variant("pcie");
  EXPECT_NE(CompareKey(a), CompareKey(b));
}

}  // namespace
}  // namespace ringmaster
