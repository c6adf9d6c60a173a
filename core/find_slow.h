// The bad-node finder's search (bench: find_slow): which pairs of members
// (ranks or nodes) to test, and what the tests say.
//
//  1. "pairs": disjoint pairs (0,1), (2,3), ...; an odd last member pairs
//     with member 0. The reference is the median of these bandwidths; a
//     pair below slow_ratio x reference is a suspect.
//  2. "split": per suspect pair (a, b), a and b each against a member g of
//     a good pair. The slower of the two is slow when its test is below
//     slow_ratio x reference (it explains the pair). The faster one is
//     slow too only below the stricter limit: the geometric midpoint of
//     the suspect pair's bandwidth and the reference (its test looks more
//     like the suspect pair than like the others), never above slow_ratio
//     x reference. Both may be slow; when neither is,
//     the pair is "cleared": the path between the two (a slow link), or a
//     noisy first test. No member is named on the pair test alone.
//  3. "confirm": each named member against another good member; a re-test
//     below the same limit confirms it. A member in two suspect pairs
//     (member 0 of an odd-sized group) is named and re-tested once.
// With `repeat` > 1 each split and confirmation test runs up to that many
// times and the median decides (where pair tests are noisy: one unlucky run
// then neither names a healthy member nor clears a slow one); the first
// round runs once, since a suspect it flags by chance is cleared by the
// split. A test stops early once more than half of its `repeat` runs fall
// on one side of its limit(s): the median of all runs would fall there too,
// so the verdict is the one all runs would give (a split test, whose
// median is also compared with its partner's, stops early only below the
// stricter limit or at or above slow_ratio x reference; see Decided()).
// Among 8 members with one slow: 4 + 2 tests and 1 confirmation. The
// reference is the median pair, so when most pairs are slow the slow speed
// is the reference and nobody is named: the finder looks for the few
// members unlike the rest. The caller runs each pair and feeds back its GB/s
// (identically on every rank, so every rank walks the same pairs).
#ifndef RINGMASTER_CORE_FIND_SLOW_H_
#define RINGMASTER_CORE_FIND_SLOW_H_

#include <initializer_list>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ringmaster/v1/result.pb.h"

namespace ringmaster {

class SlowMemberSearch {
 public:
  // `repeat` below 1 (a case from before the key existed) counts as 1.
  // `stop_when_decided` false runs every test `repeat` times (the tests
  // compare the two).
  SlowMemberSearch(int members, double slow_ratio, int repeat = 1,
                   bool stop_when_decided = true);

  // The next pair to test (and its phase), or nothing when done.
  struct Test {
    int a = 0, b = 0;
    std::string phase;
  };
  std::optional<Test> Next();
  // The bandwidth of the pair Next() returned (0: the pair failed). With
  // `repeat` > 1 Next() returns a split or confirmation test again until it
  // has that many runs or its verdict is decided.
  void Record(double gbps);

  // The figures so far (complete once Next() returned nothing).
  const v1::FindSlowFigures& figures() const { return figures_; }

 private:
  void Plan();  // queue the next phase's tests
  // The first good member not in `avoid` (its first entry: the member to
  // be tested, never paired with itself).
  void EndPairs();
  void EndSplits();
  void EndConfirmations();
  int GoodPartner(std::initializer_list<int> avoid) const;
  // The first-round GB/s of suspect pair `suspect`.
  double PairGbps(size_t suspect) const;
  // What "slow" means after the first round for a member of suspect pair
  // `suspect`: min(sqrt(pair GB/s x reference), slow_ratio x reference).
  double SlowLimit(size_t suspect) const;
  // Whether the current split or confirmation test's runs so far decide
  // it: more than half of `repeat` runs below its lower limit, or at or
  // above its upper one. Any further runs leave the median on that side.
  bool Decided() const;
  int n_;
  double ratio_;
  int repeat_;
  bool stop_when_decided_;
  std::vector<double> runs_;  // of the current test
  int phase_ = 0;             // 0 pairs, 1 split, 2 confirm, 3 done
  std::vector<Test> queue_;
  size_t next_ = 0;
  std::vector<double> results_;  // per queued test of this phase
  std::vector<std::pair<int, int>> suspects_;
  std::vector<int> good_;       // members of pairs above the threshold
  std::vector<double> limits_;  // per named member: the limit it was under
  // The verdict's end: the cleared pairs and the runs per test.
  std::string verdict_tail_;
  v1::FindSlowFigures figures_;
};

}  // namespace ringmaster

#endif  // RINGMASTER_CORE_FIND_SLOW_H_
