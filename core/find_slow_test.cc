#include "core/find_slow.h"

#include <gtest/gtest.h>

#include <set>

namespace ringmaster {
namespace {

// Runs the search against members whose links run at `speed` (GB/s): a
// pair moves at its slower member's speed.
v1::FindSlowFigures Search(const std::vector<double>& speed,
                           double ratio = 0.8) {
  SlowMemberSearch s(static_cast<int>(speed.size()), ratio);
  int guard = 0;
  while (auto t = s.Next()) {
    s.Record(std::min(speed[t->a], speed[t->b]));
    if (++guard > 100) break;
  }
  return s.figures();
}

TEST(SlowMemberSearch, NamesEachSlowMemberOfEightWithinSevenTestsPlusOne) {
  for (int slow = 0; slow < 8; ++slow) {
    std::vector<double> speed(8, 10.0);
    speed[slow] = 4.0;
    auto f = Search(speed);
    SCOPED_TRACE(f.verdict());
    ASSERT_EQ(f.slow_size(), 1);
    EXPECT_EQ(f.slow(0), slow);
    EXPECT_TRUE(f.confirmed(0));
    EXPECT_NEAR(f.slow_ratios(0), 0.4, 1e-9);
    EXPECT_EQ(f.pair_runs(), 5);  // 4 disjoint pairs + 1 split
    EXPECT_EQ(f.tests_size(), 6);
    EXPECT_EQ(f.tests(5).phase(), "confirm");
    EXPECT_DOUBLE_EQ(f.reference_gbps(), 10.0);
  }
}

TEST(SlowMemberSearch, NobodyWhenAllAreAlike) {
  auto f = Search({10, 10.2, 9.9, 10.1, 10, 9.8});
  EXPECT_EQ(f.slow_size(), 0);
  EXPECT_EQ(f.tests_size(), 3);
  EXPECT_NE(f.verdict().find("no slow member"), std::string::npos);
}

TEST(SlowMemberSearch, OddCountAndTwoSlowMembers) {
  std::vector<double> speed(9, 10.0);
  speed[2] = 3;
  speed[8] = 3;  // the odd one out, paired with member 0 first
  auto f = Search(speed);
  SCOPED_TRACE(f.verdict());
  std::set<int> named(f.slow().begin(), f.slow().end());
  EXPECT_EQ(named, (std::set<int>{2, 8}));
  for (bool c : f.confirmed()) EXPECT_TRUE(c);
}

TEST(SlowMemberSearch, HalfThePairsSlowStillSplits) {
  auto f = Search({1, 10, 10, 10, 10, 1, 10, 10});
  std::set<int> named(f.slow().begin(), f.slow().end());
  EXPECT_EQ(named, (std::set<int>{0, 5}));
}

TEST(SlowMemberSearch, MostPairsSlowNamesNobody) {
  // The median pair is a slow one: nobody stands out from it.
  auto f = Search({1, 10, 1, 10, 1, 10, 10, 10});
  EXPECT_EQ(f.slow_size(), 0);
}

TEST(SlowMemberSearch, TooFewMembers) {
  auto f = Search({10});
  EXPECT_EQ(f.tests_size(), 0);
  EXPECT_FALSE(f.verdict().empty());
}

}  // namespace
}  // namespace ringmaster
