#include "core/find_slow.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <vector>

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
  // Member 2's runs split 1:1 around the limit (6 GB/s) until the third;
  // member 3's first two runs are both above it: no third run.
  thrice.insert(thrice.end(), {4, 9.5, 10.2, /*member 3*/ 10, 9.8});
  auto f3 = Replay(6, 3, thrice);
  SCOPED_TRACE(f3.verdict());
  EXPECT_EQ(f3.repeat(), 3);
  EXPECT_EQ(f3.slow_size(), 0);
  ASSERT_EQ(f3.cleared_pairs_size(), 1);
  EXPECT_EQ(f3.cleared_pairs(0), "2-3");
  EXPECT_EQ(f3.tests_size(), 8);  // every run is kept
  EXPECT_EQ(f3.pair_runs(), 8);
  EXPECT_NE(f3.verdict().find("median of up to 3 runs"), std::string::npos);
}

// A member named by one unlucky split run whose re-test is healthy: named
// but not confirmed, and the verdict leads with "no slow member confirmed"
// (the result does not fail).
TEST(SlowMemberSearch, RefutedSuspectIsNotCalledSlow) {
  auto f = Replay(6, 1, {10, 5, 10, /*split*/ 4, 10, /*confirm*/ 9.9});
  SCOPED_TRACE(f.verdict());
  ASSERT_EQ(f.slow_size(), 1);
  EXPECT_EQ(f.slow(0), 2);
  ASSERT_EQ(f.confirmed_size(), 1);
  EXPECT_FALSE(f.confirmed(0));
  EXPECT_EQ(f.verdict().rfind("no slow member confirmed;", 0), 0u);
  EXPECT_NE(f.verdict().find("2 (0.40x the median pair, NOT confirmed)"),
            std::string::npos);
}

// A slow member stays named when one of its runs is lucky, and its
// confirmation is a median too.
TEST(SlowMemberSearch, RepeatedTestsStillNameASlowMemberWithOneLuckyRun) {
  auto f = Replay(6, 3,
                  {10, 4, 10,
                   /*member 2*/ 4, 10, 4.2,
                   /*member 3*/ 10, 9.9,
                   /*confirm 2*/ 9.8, 3.9, 4.1});
  SCOPED_TRACE(f.verdict());
  ASSERT_EQ(f.slow_size(), 1);
  EXPECT_EQ(f.slow(0), 2);
  EXPECT_NEAR(f.slow_ratios(0), 0.42, 1e-9);  // median 4.2 / reference 10
  ASSERT_EQ(f.confirmed_size(), 1);
  EXPECT_TRUE(f.confirmed(0));
  EXPECT_EQ(f.tests_size(), 11);
  EXPECT_EQ(f.pair_runs(), 8);
}

// Runs the search with `repeat` over a seeded noisy machine: a pair test
// measures its slower member's speed times noise drawn from (seed, phase,
// pair, run), so two searches see the same value for the same run of the
// same test. Three draws in ten are wild (0.3x-1.7x), as on an oversubscribed
// host.
v1::FindSlowFigures NoisySearch(const std::vector<double>& speed, double ratio,
                                int repeat, bool stop_early, uint64_t seed) {
  SlowMemberSearch s(static_cast<int>(speed.size()), ratio, repeat, stop_early);
  std::map<std::tuple<std::string, int, int>, int> run_of;
  int guard = 0;
  while (auto t = s.Next()) {
    const int run = run_of[{t->phase, t->a, t->b}]++;
    std::seed_seq seq{seed, static_cast<uint64_t>(t->phase[0]),
                      static_cast<uint64_t>(t->a), static_cast<uint64_t>(t->b),
                      static_cast<uint64_t>(run)};
    std::mt19937_64 rng(seq);
    std::uniform_real_distribution<double> u(0, 1);
    const double noise =
        u(rng) < 0.3 ? 0.3 + 1.4 * u(rng) : 0.85 + 0.3 * u(rng);
    s.Record(std::min(speed[t->a], speed[t->b]) * noise);
    if (++guard > 500) break;
  }
  return s.figures();
}

// Stopping a test once most of its runs agree gives the verdict all runs
// give, on every draw: the same members named, confirmed and cleared.
TEST(SlowMemberSearch, StoppingWhenDecidedKeepsEveryVerdict) {
  int searches = 0, named = 0, early = 0;
  int64_t runs_early = 0, runs_all = 0;
  for (uint64_t seed = 1; seed <= 2000; ++seed) {
    const int members = 4 + static_cast<int>(seed % 6);  // 4..9
    std::vector<double> speed(members, 10.0);
    const int m = static_cast<int>(seed / 4) % members;
    switch (seed % 4) {
      case 0:  // one slow member
        speed[m] = 3;
        break;
      case 1:  // one member near the first round's limit
        speed[m] = 6.5;
        break;
      case 2:  // two in one first-round pair, the faster near its limit
        speed[m & ~1] = 3;
        speed[(m & ~1) + 1 < members ? (m & ~1) + 1 : 0] = 6;
        break;
      case 3:  // two in different pairs
        speed[m] = 3;
        speed[(m + 2) % members] = 5;
        break;
    }
    const int repeat = 2 + static_cast<int>(seed % 4);  // 2..5
    const double ratio = seed % 2 ? 0.8 : 0.6;
    auto a = NoisySearch(speed, ratio, repeat, true, seed);
    auto b = NoisySearch(speed, ratio, repeat, false, seed);
    SCOPED_TRACE(testing::Message() << "seed " << seed << "\n  " << a.verdict()
                                    << "\n  " << b.verdict());
    ++searches;
    EXPECT_EQ(std::vector<int>(a.slow().begin(), a.slow().end()),
              std::vector<int>(b.slow().begin(), b.slow().end()));
    EXPECT_EQ(std::vector<bool>(a.confirmed().begin(), a.confirmed().end()),
              std::vector<bool>(b.confirmed().begin(), b.confirmed().end()));
    EXPECT_EQ(std::vector<std::string>(a.cleared_pairs().begin(),
                                       a.cleared_pairs().end()),
              std::vector<std::string>(b.cleared_pairs().begin(),
                                       b.cleared_pairs().end()));
    EXPECT_LE(a.tests_size(), b.tests_size());
    named += b.slow_size() > 0;
    early += a.tests_size() < b.tests_size();
    runs_early += a.tests_size();
    runs_all += b.tests_size();
  }
  // The draws cover both kinds of verdict, and early stops happen.
  EXPECT_GT(named, searches / 2);
  EXPECT_LT(named, searches);
  EXPECT_GT(early, searches / 2);
  EXPECT_LT(runs_early, runs_all);
}

// 8 members, one slow, no noise: each split and confirmation test is
// decided by its first two of three runs (13 runs become 10).
TEST(SlowMemberSearch, AClearVerdictTakesTwoOfThreeRuns) {
  std::vector<double> speed(8, 10.0);
  speed[5] = 4.0;
  for (bool stop : {true, false}) {
    SlowMemberSearch s(8, 0.8, 3, stop);
    while (auto t = s.Next()) s.Record(std::min(speed[t->a], speed[t->b]));
    const auto& f = s.figures();
    SCOPED_TRACE(f.verdict());
    ASSERT_EQ(f.slow_size(), 1);
    EXPECT_EQ(f.slow(0), 5);
    ASSERT_EQ(f.confirmed_size(), 1);
    EXPECT_TRUE(f.confirmed(0));
    EXPECT_EQ(f.tests_size(), stop ? 4 + 2 * 2 + 2 : 4 + 2 * 3 + 3);
  }
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
