#include "core/find_slow.h"

#include <gtest/gtest.h>

#include <functional>
#include <set>

namespace ringmaster {
namespace {

// Runs the search against members whose links run at `speed` (GB/s): a
// pair moves at its slower member's speed, times `link` for that pair
// (default 1). Every tested pair is checked to be two members.
v1::FindSlowFigures Search(
    const std::vector<double>& speed, double ratio = 0.8,
    const std::function<double(int, int)>& link = [](int, int) {
      return 1.0;
    }) {
  SlowMemberSearch s(static_cast<int>(speed.size()), ratio);
  int guard = 0;
  while (auto t = s.Next()) {
    EXPECT_NE(t->a, t->b) << t->phase;
    s.Record(std::min(speed[t->a], speed[t->b]) * link(t->a, t->b));
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
    EXPECT_EQ(f.pair_runs(), 6);  // 4 disjoint pairs + 2 splits
    EXPECT_EQ(f.tests_size(), 7);
    EXPECT_EQ(f.tests(6).phase(), "confirm");
    // The re-test uses another good member than the split test.
    EXPECT_NE(f.tests(6).b(), f.tests(4 + slow % 2).b());
    EXPECT_EQ(f.cleared_pairs_size(), 0);
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

TEST(SlowMemberSearch, BothMembersOfOnePairSlow) {
  auto f = Search({10, 10, 3, 3, 10, 10, 10, 10});
  SCOPED_TRACE(f.verdict());
  std::set<int> named(f.slow().begin(), f.slow().end());
  EXPECT_EQ(named, (std::set<int>{2, 3}));
  for (bool c : f.confirmed()) EXPECT_TRUE(c);
}

TEST(SlowMemberSearch, ASlowLinkClearsItsMembers) {
  // Members 2 and 3 are fine with everyone but each other.
  auto f = Search(std::vector<double>(8, 10.0), 0.8, [](int a, int b) {
    return std::min(a, b) == 2 && std::max(a, b) == 3 ? 0.3 : 1.0;
  });
  SCOPED_TRACE(f.verdict());
  EXPECT_EQ(f.slow_size(), 0);
  ASSERT_EQ(f.cleared_pairs_size(), 1);
  EXPECT_EQ(f.cleared_pairs(0), "2-3");
  EXPECT_EQ(f.tests_size(), 6);  // 4 pairs + 2 splits, nothing to confirm
  EXPECT_NE(f.verdict().find("cleared pair 2-3"), std::string::npos);
}

TEST(SlowMemberSearch, ANoisyPairIsNotBlamedOnAMember) {
  // The first test of pair 4-5 came out at 0.7x (noise); alone each member
  // is as fast as the rest, so nobody is named. (The old search named 5.)
  int calls = 0;
  auto f = Search(std::vector<double>(8, 10.0), 0.8, [&](int a, int b) {
    return (a == 4 && b == 5 && calls++ == 0) ? 0.7 : 1.0;
  });
  SCOPED_TRACE(f.verdict());
  EXPECT_EQ(f.slow_size(), 0);
  EXPECT_EQ(f.cleared_pairs_size(), 1);
}

TEST(SlowMemberSearch, OnlyTheMemberThatExplainsThePairIsNamed) {
  // Pair 0-1 at 0.5x: the midpoint is 0.71x, under the 0.8x threshold.
  // Member 1 alone at 0.75x is above that midpoint: not slow.
  auto f = Search({5, 7.5, 10, 10, 10, 10, 10, 10});
  SCOPED_TRACE(f.verdict());
  ASSERT_EQ(f.slow_size(), 1);
  EXPECT_EQ(f.slow(0), 0);
}

TEST(SlowMemberSearch, TheSlowerMemberNeedNotLookLikeItsPair) {
  // Seen in CI (8 ranks on 2 cores, rank 6 slowed 4x): pair 6-7 at 0.11x,
  // rank 6 alone at 0.40x, rank 7 alone at 1.0x. The midpoint limit
  // (0.33x) let rank 6 go; the slower member only has to be under the
  // 0.6x threshold.
  std::vector<double> speed(8, 10.0);
  speed[6] = 4.0;
  auto f = Search(speed, 0.6, [](int a, int b) {
    return std::min(a, b) == 6 && std::max(a, b) == 7 ? 0.275 : 1.0;
  });
  SCOPED_TRACE(f.verdict());
  ASSERT_EQ(f.slow_size(), 1);
  EXPECT_EQ(f.slow(0), 6);
  EXPECT_NEAR(f.slow_ratios(0), 0.4, 1e-9);
  EXPECT_TRUE(f.confirmed(0));
  EXPECT_EQ(f.cleared_pairs_size(), 0);
}

TEST(SlowMemberSearch, AMemberInTwoSuspectPairsIsNamedOnce) {
  // 9 members: member 0 pairs with 1 and with 8 (the odd one out).
  std::vector<double> speed(9, 10.0);
  speed[0] = 3;
  auto f = Search(speed);
  SCOPED_TRACE(f.verdict());
  ASSERT_EQ(f.slow_size(), 1);
  EXPECT_EQ(f.slow(0), 0);
  ASSERT_EQ(f.confirmed_size(), 1);
  EXPECT_TRUE(f.confirmed(0));
  // 5 pairs, 2 x 2 splits, 1 confirmation; no test pairs 0 as "good".
  EXPECT_EQ(f.tests_size(), 10);
  for (const auto& t : f.tests()) {
    if (t.phase() != "pairs") {
      EXPECT_NE(t.b(), 0) << t.phase();
    }
  }
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

// Replays a fixed sequence of measured GB/s, one per run, in order.
v1::FindSlowFigures Replay(int members, int repeat,
                           const std::vector<double>& runs) {
  SlowMemberSearch s(members, 0.6, repeat);
  size_t i = 0;
  while (auto t = s.Next()) {
    if (i >= runs.size()) {
      ADD_FAILURE() << "more runs asked for than replayed: " << t->phase;
      break;
    }
    s.Record(runs[i++]);
  }
  EXPECT_EQ(i, runs.size()) << "fewer runs asked for than replayed";
  return s.figures();
}

// 6 healthy members on a noisy host: pair 2-3 measures 0.5x once, and the
// split test of member 2 is unlucky once (0.4x). One run per test names
// member 2; the median of three runs does not.
TEST(SlowMemberSearch, RepeatedSplitTestsDoNotNameAHealthyMemberOnOneBadRun) {
  const std::vector<double> first_round = {10, 5, 10};
  std::vector<double> once = first_round;
  once.insert(once.end(), {4, 10, /*confirm*/ 4});
  auto f1 = Replay(6, 1, once);
  ASSERT_EQ(f1.slow_size(), 1);  // what one unlucky run does
  EXPECT_EQ(f1.slow(0), 2);

  std::vector<double> thrice = first_round;
  thrice.insert(thrice.end(), {4, 9.5, 10.2, /*member 3*/ 10, 9.8, 10.1});
  auto f3 = Replay(6, 3, thrice);
  SCOPED_TRACE(f3.verdict());
  EXPECT_EQ(f3.repeat(), 3);
  EXPECT_EQ(f3.slow_size(), 0);
  ASSERT_EQ(f3.cleared_pairs_size(), 1);
  EXPECT_EQ(f3.cleared_pairs(0), "2-3");
  EXPECT_EQ(f3.tests_size(), 9);  // every run is kept
  EXPECT_EQ(f3.pair_runs(), 9);
  EXPECT_NE(f3.verdict().find("median of 3 runs"), std::string::npos);
}

// A slow member stays named when one of its runs is lucky, and its
// confirmation is a median too.
TEST(SlowMemberSearch, RepeatedTestsStillNameASlowMemberWithOneLuckyRun) {
  auto f = Replay(6, 3,
                  {10, 4, 10,
                   /*member 2*/ 4, 10, 4.2,
                   /*member 3*/ 10, 9.9, 10.1,
                   /*confirm 2*/ 9.8, 3.9, 4.1});
  SCOPED_TRACE(f.verdict());
  ASSERT_EQ(f.slow_size(), 1);
  EXPECT_EQ(f.slow(0), 2);
  EXPECT_NEAR(f.slow_ratios(0), 0.42, 1e-9);  // median 4.2 / reference 10
  ASSERT_EQ(f.confirmed_size(), 1);
  EXPECT_TRUE(f.confirmed(0));
  EXPECT_EQ(f.tests_size(), 12);
  EXPECT_EQ(f.pair_runs(), 9);
}

TEST(SlowMemberSearch, RepeatOneIsTheSingleRunSearch) {
  std::vector<double> speed(8, 10.0);
  speed[5] = 4.0;
  auto f = Search(speed);
  EXPECT_EQ(f.repeat(), 1);
  EXPECT_EQ(f.tests_size(), 7);
}

}  // namespace
}  // namespace ringmaster
