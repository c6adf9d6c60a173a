#include "core/find_slow.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/stats.h"

namespace ringmaster {

SlowMemberSearch::SlowMemberSearch(int members, double slow_ratio, int repeat,
                                   bool stop_when_decided)
    : n_(members),
      ratio_(slow_ratio),
      repeat_(std::max(repeat, 1)),
      stop_when_decided_(stop_when_decided) {
  figures_.set_member_count(members);
  figures_.set_slow_ratio(slow_ratio);
  figures_.set_repeat(repeat_);
  Plan();
}

void SlowMemberSearch::Plan() {
  queue_.clear();
  results_.clear();
  next_ = 0;
  if (phase_ == 0) {
    for (int a = 0; a + 1 < n_; a += 2) queue_.push_back({a, a + 1, "pairs"});
    if (n_ % 2 == 1 && n_ > 1) queue_.push_back({n_ - 1, 0, "pairs"});
    if (queue_.empty()) {
      phase_ = 3;
      figures_.set_verdict("fewer than 2 members: nothing to compare");
    }
  }
}

std::optional<SlowMemberSearch::Test> SlowMemberSearch::Next() {
  // Each complete phase is judged and plans the next (or ends the search).
  while (phase_ < 3 && next_ >= queue_.size()) {
    if (phase_ == 0) {
      EndPairs();
    } else if (phase_ == 1) {
      EndSplits();
    } else {
      EndConfirmations();
    }
  }
  if (phase_ >= 3) return std::nullopt;
  return queue_[next_];
}

// Disjoint pairs done: pairs below the ratio of the median pair are
// suspects; each suspect's members are tested next with a good member.
void SlowMemberSearch::EndPairs() {
  std::vector<double> bw;
  for (const auto& t : figures_.tests()) bw.push_back(t.gbps());
  const double ref = Quantile(bw, 0.5);
  figures_.set_reference_gbps(ref);
  for (size_t i = 0; i < queue_.size(); ++i) {
    if (bw[i] < ratio_ * ref) {
      suspects_.emplace_back(queue_[i].a, queue_[i].b);
    } else {
      good_.push_back(queue_[i].a);
      good_.push_back(queue_[i].b);
    }
  }
  // In an odd-sized group member 0 can be in a good pair and a
  // suspect one: it is no good partner then.
  std::vector<int> clean;
  for (int g : good_) {
    bool suspect = false;
    for (const auto& [a, b] : suspects_) suspect |= (g == a || g == b);
    if (!suspect) clean.push_back(g);
  }
  if (!clean.empty()) good_ = std::move(clean);
  figures_.set_pair_runs(figures_.tests_size());
  if (suspects_.empty()) {
    figures_.set_verdict(absl::StrFormat(
        "no slow member: every pair within %.0f%% of the median pair "
        "(%.4g GB/s)",
        ratio_ * 100, ref));
    phase_ = 3;
    return;
  }
  if (good_.empty()) {  // cannot happen with a median reference
    figures_.set_verdict("no verdict: no pair to compare against");
    phase_ = 3;
    return;
  }
  phase_ = 1;
  queue_.clear();
  results_.clear();
  next_ = 0;
  for (const auto& [a, b] : suspects_) {
    queue_.push_back({a, GoodPartner({a, b}), "split"});
    queue_.push_back({b, GoodPartner({a, b}), "split"});
  }
}

// Splits done: a member is slow when its own test looks like its suspect
// pair; named members are confirmed next with another good member.
void SlowMemberSearch::EndSplits() {
  // Each member of a suspect pair was tested with a good member; a
  // member is slow when its own test looks like the suspect pair.
  const double ref = figures_.reference_gbps();
  std::vector<std::string> cleared;
  for (size_t i = 0; i < suspects_.size(); ++i) {
    const auto [a, b] = suspects_[i];
    // The slower member alone explains the pair when it is below the
    // threshold; the faster one must also look like the pair (the
    // stricter limit) to be named as a second slow member.
    const int slower = results_[2 * i + 1] < results_[2 * i] ? 1 : 0;
    bool any = false;
    for (int k = 0; k < 2; ++k) {
      const double bw = results_[2 * i + k];
      const double limit = k == slower ? ratio_ * ref : SlowLimit(i);
      const int member = k == 0 ? a : b;
      if (bw >= limit) continue;
      any = true;
      // In an odd-sized group member 0 sits in two first-round pairs:
      // name it once.
      if (std::find(figures_.slow().begin(), figures_.slow().end(), member) !=
          figures_.slow().end())
        continue;
      figures_.add_slow(member);
      figures_.add_slow_ratios(ref > 0 ? bw / ref : 0);
      limits_.push_back(limit);
    }
    if (!any) {
      // Both members are fine with others: the pair's own path (a slow
      // link between them) or noise. Nobody is named.
      figures_.add_cleared_pairs(absl::StrFormat("%d-%d", a, b));
      cleared.push_back(absl::StrFormat(
          "pair %d-%d (%.2fx the median pair; each member alone %.2fx "
          "and %.2fx)",
          a, b, ref > 0 ? PairGbps(i) / ref : 0,
          ref > 0 ? results_[2 * i] / ref : 0,
          ref > 0 ? results_[2 * i + 1] / ref : 0));
    }
  }
  figures_.set_pair_runs(figures_.tests_size());
  verdict_tail_ =
      cleared.empty()
          ? ""
          : absl::StrFormat("; cleared %s: a slow link between them or noise",
                            absl::StrJoin(cleared, ", "));
  if (repeat_ > 1) {
    verdict_tail_ += absl::StrFormat(
        "; split and confirmation tests: median of up to %d runs (%s)", repeat_,
        stop_when_decided_ ? "a test stops once most of them agree"
                           : "every test ran that many times");
  }
  if (figures_.slow().empty()) {
    figures_.set_verdict(absl::StrFormat("no slow member after %d pair tests%s",
                                         figures_.pair_runs(), verdict_tail_));
    phase_ = 3;
    return;
  }
  phase_ = 2;
  queue_.clear();
  results_.clear();
  next_ = 0;
  // The re-test pairs each named member with a good member other than
  // the one its split test used, where there is one.
  for (int m : figures_.slow()) {
    int split_partner = -1;
    for (const auto& t : figures_.tests())
      if (t.phase() == "split" && t.a() == m) split_partner = t.b();
    queue_.push_back({m, GoodPartner({m, split_partner}), "confirm"});
  }
}

// Confirmations done: the verdict.
void SlowMemberSearch::EndConfirmations() {
  // Slow in the same sense as the split test.
  std::vector<std::string> named;
  int confirmed_count = 0;
  for (size_t i = 0; i < queue_.size(); ++i) {
    const bool confirmed = results_[i] < limits_[i];
    figures_.add_confirmed(confirmed);
    confirmed_count += confirmed ? 1 : 0;
    named.push_back(
        absl::StrFormat("%d (%.2fx the median pair%s)", figures_.slow(i),
                        figures_.slow_ratios(i),
                        confirmed ? ", confirmed" : ", NOT confirmed"));
  }
  // A verdict whose every suspect its re-test refuted says so first: the
  // split test's figure was noise, nobody is slow.
  const std::string head =
      confirmed_count == 0
          ? "no slow member confirmed; looked slow in its split test"
          : (figures_.slow_size() == 1 ? "slow member" : "slow members");
  figures_.set_verdict(
      absl::StrFormat("%s: %s, after %d pair tests and %d confirmation(s)%s",
                      head, absl::StrJoin(named, "; "), figures_.pair_runs(),
                      queue_.size(), verdict_tail_));
  phase_ = 3;
}

int SlowMemberSearch::GoodPartner(std::initializer_list<int> avoid) const {
  for (int g : good_)
    if (std::find(avoid.begin(), avoid.end(), g) == avoid.end()) return g;
  // Fewer good members than avoided ones: any good member but the first
  // avoided (the member under test itself).
  for (int g : good_)
    if (g != *avoid.begin()) return g;
  return good_.front();
}

double SlowMemberSearch::PairGbps(size_t suspect) const {
  const auto [a, b] = suspects_[suspect];
  for (const auto& t : figures_.tests())
    if (t.phase() == "pairs" && t.a() == a && t.b() == b) return t.gbps();
  return 0;
}

double SlowMemberSearch::SlowLimit(size_t suspect) const {
  const double ref = figures_.reference_gbps();
  return std::min(ratio_ * ref,
                  std::sqrt(std::max(PairGbps(suspect), 0.0) * ref));
}

void SlowMemberSearch::Record(double gbps) {
  if (phase_ >= 3 || next_ >= queue_.size()) return;
  const Test& t = queue_[next_];
  v1::PairTest* pt = figures_.add_tests();
  pt->set_a(t.a);
  pt->set_b(t.b);
  pt->set_gbps(gbps);
  pt->set_phase(t.phase);
  runs_.push_back(gbps);
  if (phase_ > 0 && static_cast<int>(runs_.size()) < repeat_ &&
      !(stop_when_decided_ && Decided()))
    return;
  results_.push_back(Median(runs_));
  runs_.clear();
  ++next_;
}

bool SlowMemberSearch::Decided() const {
  // A split test's median is compared with two limits (the slower member's
  // slow_ratio x reference, the faster one's stricter SlowLimit) and with
  // its partner's median (which is slower). Stopping only outside the band
  // between the limits keeps all three answers: a test decided below the
  // stricter limit is named either way and slower than any test above it;
  // one decided at or above slow_ratio x reference is named neither way and
  // faster than any test below it; two tests inside the band both ran every
  // run. A confirmation test has one limit.
  double lower, upper;
  if (phase_ == 1) {
    upper = ratio_ * figures_.reference_gbps();
    lower = SlowLimit(next_ / 2);
  } else if (phase_ == 2) {
    lower = upper = limits_[next_];
  } else {
    return false;
  }
  int below = 0, above = 0;
  for (double r : runs_) {
    if (r < lower) ++below;
    if (r >= upper) ++above;
  }
  const int majority = repeat_ / 2 + 1;
  return below >= majority || above >= majority;
}

}  // namespace ringmaster
