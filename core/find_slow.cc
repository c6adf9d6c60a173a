#include "core/find_slow.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/stats.h"

namespace ringmaster {

SlowMemberSearch::SlowMemberSearch(int members, double slow_ratio)
    : n_(members), ratio_(slow_ratio) {
  figures_.set_member_count(members);
  figures_.set_slow_ratio(slow_ratio);
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
  while (phase_ < 3 && next_ >= queue_.size()) {
    // The phase is complete: judge it and plan the next.
    if (phase_ == 0) {
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
      figures_.set_pair_runs(figures_.tests_size());
      if (suspects_.empty()) {
        figures_.set_verdict(absl::StrFormat(
            "no slow member: every pair within %.0f%% of the median pair "
            "(%.4g GB/s)",
            ratio_ * 100, ref));
        phase_ = 3;
        break;
      }
      if (good_.empty()) {  // cannot happen with a median reference
        figures_.set_verdict("no verdict: no pair to compare against");
        phase_ = 3;
        break;
      }
      phase_ = 1;
      queue_.clear();
      results_.clear();
      next_ = 0;
      for (const auto& [a, b] : suspects_)
        queue_.push_back({a, good_[0], "split"});
      continue;
    }
    if (phase_ == 1) {
      const double ref = figures_.reference_gbps();
      for (size_t i = 0; i < queue_.size(); ++i) {
        const auto [a, b] = suspects_[i];
        // a is the slow one when its test with a good member looks like the
        // suspect pair rather than like the reference: below the geometric
        // midpoint of the two.
        const bool a_slow = results_[i] < Midpoint(i);
        const int named = a_slow ? a : b;
        figures_.add_slow(named);
        // The split test measured `named` only when it was `a`; otherwise
        // its first-round pair is all we have.
        double bw = results_[i];
        if (!a_slow) {
          for (const auto& t : figures_.tests())
            if (t.phase() == "pairs" && (t.a() == b || t.b() == b))
              bw = t.gbps();
        }
        figures_.add_slow_ratios(ref > 0 ? bw / ref : 0);
      }
      phase_ = 2;
      queue_.clear();
      results_.clear();
      next_ = 0;
      const int other = good_.size() > 1 ? good_[1] : good_[0];
      for (int s : figures_.slow()) queue_.push_back({s, other, "confirm"});
      figures_.set_pair_runs(figures_.tests_size());
      continue;
    }
    // phase 2: confirmations
    std::vector<std::string> named;
    for (size_t i = 0; i < queue_.size(); ++i) {
      const bool confirmed = results_[i] < Midpoint(i);
      figures_.add_confirmed(confirmed);
      named.push_back(
          absl::StrFormat("%d (%.2fx the median pair%s)", figures_.slow(i),
                          figures_.slow_ratios(i),
                          confirmed ? ", confirmed" : ", NOT confirmed"));
    }
    figures_.set_verdict(absl::StrFormat(
        "slow %s: %s, after %d pair tests and %d confirmation(s)",
        figures_.slow_size() == 1 ? "member" : "members",
        absl::StrJoin(named, "; "), figures_.pair_runs(), queue_.size()));
    phase_ = 3;
  }
  if (phase_ >= 3) return std::nullopt;
  return queue_[next_];
}

double SlowMemberSearch::Midpoint(size_t suspect) const {
  const auto [a, b] = suspects_[suspect];
  double pair = 0;
  for (const auto& t : figures_.tests())
    if (t.phase() == "pairs" && t.a() == a && t.b() == b) pair = t.gbps();
  return std::sqrt(std::max(pair, 0.0) * figures_.reference_gbps());
}

void SlowMemberSearch::Record(double gbps) {
  if (phase_ >= 3 || next_ >= queue_.size()) return;
  const Test& t = queue_[next_++];
  v1::PairTest* pt = figures_.add_tests();
  pt->set_a(t.a);
  pt->set_b(t.b);
  pt->set_gbps(gbps);
  pt->set_phase(t.phase);
  results_.push_back(gbps);
}

}  // namespace ringmaster
