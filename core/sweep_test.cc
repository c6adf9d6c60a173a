#include "core/sweep.h"

#include <gtest/gtest.h>

#include "core/plan.h"

namespace ringmaster {
namespace {

TEST(SweepSizes, Geometric) {
  v1::SizeSweep s;
  s.set_min_bytes(8);
  s.set_max_bytes(128);
  s.set_factor(2);
  EXPECT_EQ(SweepSizes(s), (std::vector<int64_t>{8, 16, 32, 64, 128}));
  s.set_factor(4);
  EXPECT_EQ(SweepSizes(s), (std::vector<int64_t>{8, 32, 128}));
  s.set_max_bytes(100);  // max not on the grid: stop below it
  EXPECT_EQ(SweepSizes(s), (std::vector<int64_t>{8, 32}));
}

TEST(SweepSizes, ListAndNoOverflow) {
  v1::SizeSweep s;
  s.add_list_bytes(1024);
  s.add_list_bytes(10);
  EXPECT_EQ(SweepSizes(s), (std::vector<int64_t>{1024, 10}));
  v1::SizeSweep big;
  big.set_min_bytes(1LL << 40);
  big.set_max_bytes(INT64_MAX);
  big.set_factor(1024);
  EXPECT_EQ(SweepSizes(big).size(), 3u);  // 2^40, 2^50, 2^60
}

TEST(ExpandPlan, NestingOrderAndCounts) {
  auto plan = ParsePlanYaml(R"(name: x
cases:
  - name: ar
    collective: all_reduce
    sizes: {min: 8B, max: 32B}
    dtypes: [float32, bfloat16]
    ops: [sum, min]
)",
                            "x.yaml");
  ASSERT_TRUE(plan.ok()) << plan.status();
  auto cases = ExpandPlan(*plan);
  ASSERT_TRUE(cases.ok());
  // 2 dtypes x 2 ops x 3 sizes x 2 placements.
  ASSERT_EQ(cases->size(), 24u);
  const auto& c0 = (*cases)[0];
  EXPECT_EQ(c0.seq(), 0);
  EXPECT_EQ(c0.dtype(), v1::FLOAT32);
  EXPECT_EQ(c0.op(), v1::SUM);
  EXPECT_EQ(c0.size_bytes(), 8);
  EXPECT_EQ(c0.count(), 2);
  EXPECT_FALSE(c0.in_place());
  EXPECT_TRUE((*cases)[1].in_place());
  EXPECT_EQ((*cases)[2].size_bytes(), 16);
  EXPECT_EQ((*cases)[6].op(), v1::MIN);
  EXPECT_EQ((*cases)[12].dtype(), v1::BFLOAT16);
  EXPECT_EQ((*cases)[12].count(), 4);  // 8 B of bfloat16
  EXPECT_EQ((*cases)[23].seq(), 23);
}

TEST(ExpandPlan, RoundsToWholeElements) {
  auto plan = ParsePlanYaml(R"(name: x
cases:
  - {name: a, collective: all_reduce, sizes: [10B], dtypes: float32, placement: in_place}
)",
                            "x.yaml");
  ASSERT_TRUE(plan.ok()) << plan.status();
  auto cases = ExpandPlan(*plan);
  ASSERT_TRUE(cases.ok());
  ASSERT_EQ(cases->size(), 1u);
  EXPECT_EQ((*cases)[0].count(), 2);
  EXPECT_EQ((*cases)[0].size_bytes(), 8);
}

TEST(ExpandPlan, CapsTheNumberOfCases) {
  auto plan = ParsePlanYaml(R"(name: x
cases:
  - {name: a, collective: all_reduce, sizes: {min: 8B, max: 1GiB}}
)",
                            "x.yaml");
  ASSERT_TRUE(plan.ok());
  auto cases = ExpandPlan(*plan, 10);
  EXPECT_FALSE(cases.ok());
  EXPECT_EQ(cases.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ringmaster
