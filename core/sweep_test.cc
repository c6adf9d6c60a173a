#include "core/sweep.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

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

TEST(ExpandPlan, NodeBenchmarksExpandPerRankPairAndPattern) {
  auto plan = ParsePlanYaml(R"(name: x
cases:
  - {name: p, bench: p2p, method: [ce, sm], traffic: [uni, bidir], pattern: [pairs, all_to_one], sizes: [1MiB]}
  - {name: h, bench: host_device, direction: to_device, pattern: [one, all], sizes: [4KiB]}
  - {name: g, bench: gemm, dtypes: [bfloat16], shapes: [64, 8x16x32]}
  - {name: l, bench: latency, path: [peer, host]}
)",
                            "x.yaml");
  ASSERT_TRUE(plan.ok()) << plan.status();
  auto cases = ExpandPlan(*plan, 100000, 3);
  ASSERT_TRUE(cases.ok()) << cases.status();
  int pairs = 0, all_to_one = 0, one = 0, all = 0, gemm = 0, lat_peer = 0,
      lat_host = 0;
  std::set<std::pair<int, int>> seen;
  for (size_t i = 0; i < cases->size(); ++i) {
    const v1::Case& c = (*cases)[i];
    EXPECT_EQ(c.seq(), static_cast<int64_t>(i));
    if (c.spec_name() == "p" && c.pattern() == v1::PAIR) {
      ++pairs;
      EXPECT_NE(c.src_rank(), c.dst_rank());
      if (c.method() == v1::COPY_ENGINE && !c.bidirectional())
        seen.insert({c.src_rank(), c.dst_rank()});
    }
    if (c.spec_name() == "p" && c.pattern() == v1::ALL_TO_ONE) {
      ++all_to_one;
      EXPECT_EQ(c.src_rank(), -1);
    }
    if (c.spec_name() == "h") (c.pattern() == v1::ONE_RANK ? one : all)++;
    if (c.spec_name() == "g") {
      ++gemm;
      EXPECT_EQ(c.dtype(), v1::BFLOAT16);
    }
    if (c.spec_name() == "l")
      (c.latency_path() == v1::PEER ? lat_peer : lat_host)++;
  }
  EXPECT_EQ(pairs, 2 * 2 * 6);  // methods x traffic x ordered pairs of 3
  EXPECT_EQ(seen.size(), 6u);
  EXPECT_EQ(all_to_one, 2 * 2 * 3);  // one per destination
  EXPECT_EQ(one, 3);
  EXPECT_EQ(all, 1);
  EXPECT_EQ(gemm, 2 * 3);  // shapes x ranks
  EXPECT_EQ(lat_peer, 6);
  EXPECT_EQ(lat_host, 3);
  const v1::Case& shape =
      *std::find_if(cases->begin(), cases->end(), [](const v1::Case& c) {
        return c.spec_name() == "g" && c.gemm().m() == 8;
      });
  EXPECT_EQ(shape.gemm().n(), 16);
  EXPECT_EQ(shape.gemm().k(), 32);
  // Launch size unknown: one placeholder per pattern point.
  auto unknown = ExpandPlan(*plan);
  ASSERT_TRUE(unknown.ok());
  EXPECT_EQ(unknown->front().src_rank(), -1);
  EXPECT_EQ(unknown->front().dst_rank(), -1);
  // One rank: no pairs at all.
  auto solo = ExpandPlan(*plan, 100000, 1);
  ASSERT_TRUE(solo.ok());
  for (const auto& c : *solo) EXPECT_NE(c.pattern(), v1::PAIR) << c.spec_name();
}

}  // namespace
}  // namespace ringmaster
