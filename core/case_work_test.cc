#include "core/case_work.h"

#include <gtest/gtest.h>

#include <numeric>

#include "core/sweep.h"

namespace ringmaster {
namespace {

std::vector<v1::Case> Sweep() {
  v1::Plan plan;
  plan.set_name("sweep");
  v1::CaseSpec* s = plan.add_cases();
  s->set_name("allreduce");
  s->set_bench(v1::BENCH_COLLECTIVE);
  s->set_collective(v1::ALL_REDUCE);
  s->add_dtypes(v1::FLOAT32);
  s->mutable_sizes()->set_min_bytes(8);
  s->mutable_sizes()->set_max_bytes(int64_t{8} << 30);
  s->mutable_sizes()->set_factor(8);
  s->mutable_timing()->set_min_samples(5);
  s->mutable_timing()->set_max_samples(30);
  s->mutable_timing()->set_max_time_s(2);
  auto cases = ExpandPlan(plan, 1000, 2);
  EXPECT_TRUE(cases.ok()) << cases.status();
  return cases.ok() ? *cases : std::vector<v1::Case>{};
}

// An 8 B..8 GiB sweep: half of the cases by count is far less than half of
// the time, so an ETA by counts is far too short after the small sizes.
TEST(CaseWork, LargeSizesWeighMoreThanSmallOnes) {
  const std::vector<v1::Case> cases = Sweep();
  ASSERT_GE(cases.size(), 10u);
  const std::vector<double> w = EstimatedCaseSeconds(cases);
  ASSERT_EQ(w.size(), cases.size());
  for (double x : w) EXPECT_GT(x, 0);
  EXPECT_GT(w.back(), 50 * w.front());
  const double total = std::accumulate(w.begin(), w.end(), 0.0);
  const double first_half =
      std::accumulate(w.begin(), w.begin() + w.size() / 2, 0.0);
  EXPECT_LT(first_half / total, 0.2);
  // Time limits cap a case: no more than max_time plus warm-up and the
  // fixed cost.
  EXPECT_LT(w.back(), 2.0 + 9.0 + 0.1);
}

}  // namespace
}  // namespace ringmaster
