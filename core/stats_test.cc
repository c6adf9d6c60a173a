#include "core/stats.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace ringmaster {
namespace {

TEST(Summarize, HandComputed) {
  // samples 1..5: mean 3, median 3, sample variance 2.5, stddev 1.5811388,
  // t(0.975, 4) = 2.776, CI half-width = 2.776 * 1.5811388 / sqrt(5)
  // = 2.776 * 0.7071068 = 1.962928; p95 = 4 + 0.8 * (5 - 4) = 4.8 (position
  // 0.95 * 4 = 3.8).
  std::vector<double> v = {5, 1, 4, 2, 3};
  SampleSummary s = Summarize(v);
  EXPECT_EQ(s.n, 5);
  EXPECT_DOUBLE_EQ(s.mean, 3.0);
  EXPECT_DOUBLE_EQ(s.median, 3.0);
  EXPECT_DOUBLE_EQ(s.min, 1.0);
  EXPECT_DOUBLE_EQ(s.max, 5.0);
  EXPECT_NEAR(s.p95, 4.8, 1e-12);
  EXPECT_NEAR(s.stddev, 1.5811388300841898, 1e-12);
  EXPECT_NEAR(s.ci95_half_width, 1.962928, 1e-5);
}

TEST(Summarize, EvenCountMedianAndEdgeCases) {
  std::vector<double> v = {4, 1, 3, 2};
  EXPECT_DOUBLE_EQ(Summarize(v).median, 2.5);
  std::vector<double> one = {7};
  SampleSummary s = Summarize(one);
  EXPECT_EQ(s.n, 1);
  EXPECT_DOUBLE_EQ(s.median, 7);
  EXPECT_DOUBLE_EQ(s.ci95_half_width, 0);
  EXPECT_EQ(Summarize(std::vector<double>{}).n, 0);
}

TEST(StudentT975, TableAndExpansion) {
  EXPECT_DOUBLE_EQ(StudentT975(1), 12.706);
  EXPECT_DOUBLE_EQ(StudentT975(10), 2.228);
  EXPECT_DOUBLE_EQ(StudentT975(30), 2.042);
  // Published values: t(0.975, 60) = 2.000, t(0.975, 120) = 1.980.
  EXPECT_NEAR(StudentT975(60), 2.000, 0.001);
  EXPECT_NEAR(StudentT975(120), 1.980, 0.001);
  EXPECT_NEAR(StudentT975(100000), 1.95996, 0.0001);
}

TEST(MedianCi, RanksFromTheBinomial) {
  EXPECT_EQ(MedianCiRank(5), 0);  // P(B=0) = 1/32 > 2.5%: no interval
  EXPECT_EQ(MedianCiRank(6), 1);  // P(B=0) = 1/64
  // n = 20: P(B<=5) = 21700/2^20 = 0.0207, P(B<=6) = 0.0577.
  EXPECT_EQ(MedianCiRank(20), 6);
  // The same ranks as the closed form with lgamma, up to large n.
  for (int n : {1, 2, 7, 11, 50, 99, 100, 257, 1000, 5000}) {
    int j = 0;
    double cdf = 0;
    for (int i = 0; i < n; ++i) {
      cdf += std::exp(std::lgamma(n + 1.0) - std::lgamma(i + 1.0) -
                      std::lgamma(n - i + 1.0) + n * std::log(0.5));
      if (cdf > 0.025) break;
      j = i + 1;
    }
    EXPECT_EQ(MedianCiRank(n), std::min(j, (n + 1) / 2)) << n;
  }
  std::vector<double> v;
  for (int i = 20; i >= 1; --i) v.push_back(i);
  SampleSummary s = Summarize(v);
  EXPECT_DOUBLE_EQ(s.median_ci_low, 6);    // x(6)
  EXPECT_DOUBLE_EQ(s.median_ci_high, 15);  // x(15)
  std::vector<double> five = {1, 2, 3, 4, 5};
  EXPECT_DOUBLE_EQ(Summarize(five).median_ci_high, 0);
}

v1::Timing TestTiming() {
  v1::Timing t;
  t.set_min_samples(3);
  t.set_max_samples(10);
  t.set_target_ci(0.01);
  t.set_max_time_s(1.0);
  t.set_sample_target_s(1e-3);
  t.set_max_iters_per_sample(100);
  return t;
}

TEST(StoppingRule, WaitsForMinSamples) {
  StoppingRule rule(TestTiming());
  std::vector<double> v = {1.0, 1.0};
  EXPECT_FALSE(rule.ShouldStop(v, 0.001));
}

TEST(StoppingRule, StopsWhenMedianCiIsTight) {
  v1::Timing t = TestTiming();
  t.set_ci_on_median(true);
  StoppingRule rule(t);
  // One wild outlier among six: the median's CI [x(1), x(6)] is wide.
  std::vector<double> six = {1.0, 1.001, 0.999, 1.0, 1.002, 9.0};
  EXPECT_FALSE(rule.ShouldStop(six, 0.001));
  std::vector<double> tight = {1.0, 1.001, 0.999, 1.0, 1.002, 1.001};
  EXPECT_TRUE(rule.ShouldStop(tight, 0.001));
  std::vector<double> three = {1.0, 1.0, 1.0};  // too few for a median CI
  EXPECT_FALSE(rule.ShouldStop(three, 0.001));
}

TEST(StoppingRule, StopsWhenMeanCiIsTight) {
  StoppingRule rule(TestTiming());
  std::vector<double> tight = {1.0, 1.001, 0.999};  // CI ~0.25% of mean
  EXPECT_TRUE(rule.ShouldStop(tight, 0.001));
  std::vector<double> noisy = {1.0, 2.0, 3.0};
  EXPECT_FALSE(rule.ShouldStop(noisy, 0.001));
}

TEST(StoppingRule, StopsAtLimits) {
  StoppingRule rule(TestTiming());
  std::vector<double> noisy = {1.0, 2.0, 3.0};
  EXPECT_FALSE(rule.ShouldStop(noisy, 0.5));
  EXPECT_TRUE(rule.ShouldStop(noisy, 1.5));  // past max_time
  std::vector<double> many(10, 1.0);
  many[0] = 5.0;
  EXPECT_TRUE(rule.ShouldStop(many, 0.0));  // max_samples
}

TEST(StoppingRule, StopsForFutility) {
  v1::Timing t = TestTiming();
  t.set_max_samples(100);
  t.set_max_time_s(10);
  StoppingRule rule(t);
  // 20 samples alternating 1 and 1.2: mean 1.1, s = 0.1026, CI = 2.093 *
  // 0.1026 / sqrt(20) = 4.8% of the mean; reaching 1% needs ~20 * 4.8^2 =
  // 468 samples > 100: futile.
  std::vector<double> noisy;
  for (int i = 0; i < 20; ++i) noisy.push_back(i % 2 ? 1.2 : 1.0);
  EXPECT_EQ(rule.StopReason(noisy, 1.0), "futility");
  // The same noise at 19 samples: too early to judge.
  std::vector<double> early(noisy.begin(), noisy.begin() + 19);
  EXPECT_EQ(rule.StopReason(early, 1.0), "");
  // Less noisy and on course: 1 and 1.06 give s = 0.0308, CI = 2.093 *
  // 0.0308 / sqrt(20) / 1.03 = 1.4%, needing ~20 * 1.4^2 = 39 of 100.
  std::vector<double> close;
  for (int i = 0; i < 20; ++i) close.push_back(i % 2 ? 1.06 : 1.0);
  EXPECT_EQ(rule.StopReason(close, 1.0), "");
  std::vector<double> flat(6, 1.0);
  EXPECT_EQ(rule.StopReason(flat, 1.0), "ci_target");
}

TEST(StoppingRule, ItersPerSample) {
  StoppingRule rule(TestTiming());
  EXPECT_EQ(rule.ItersPerSample(1e-4), 10);   // 1 ms / 100 us
  EXPECT_EQ(rule.ItersPerSample(1e-7), 100);  // capped
  EXPECT_EQ(rule.ItersPerSample(1.0), 1);
  EXPECT_EQ(rule.ItersPerSample(0), 100);
}

TEST(StoreSamples, KeepsAllUpToTheCapThenThinsEvenly) {
  v1::Stats stats;
  StoreSamples(std::vector<double>{3, 1, 2}, &stats);
  EXPECT_THAT(stats.samples_s(), testing::ElementsAre(3, 1, 2));
  std::vector<double> many(2500);
  for (size_t i = 0; i < many.size(); ++i) many[i] = static_cast<double>(i);
  StoreSamples(many, &stats);
  ASSERT_EQ(stats.samples_s_size(), kMaxStoredSamples);
  EXPECT_EQ(stats.samples_s(0), 0);
  EXPECT_EQ(stats.samples_s(1), 2);  // every 2.5th, rounded down
  EXPECT_EQ(stats.samples_s(2), 5);
  EXPECT_EQ(stats.samples_s(kMaxStoredSamples - 1), 2497);
}

}  // namespace
}  // namespace ringmaster
