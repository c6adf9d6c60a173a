// A benchmark kind that lives in a test: what adding a kind takes (this
// file and its line in worker/CMakeLists.txt). `bench: rank_sum` sums
// (rank + 1) * scale over the case's ranks through the control channel,
// checks the sum against `expect` (default: scale * n(n+1)/2) and times the
// sum with the measurement loop.
#include <chrono>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "worker/kinds/kind.h"
#include "worker/measure.h"

namespace ringmaster {
namespace {

int64_t Param(const v1::Case& c, const std::string& name, int64_t fallback) {
  auto it = c.params().find(name);
  int64_t v = fallback;
  if (it != c.params().end() && !absl::SimpleAtoi(it->second, &v))
    return fallback;
  return v;
}

// Times `ops` sums of one value over the ranks.
class SumSampler : public Sampler {
 public:
  SumSampler(Control& control, v1::Result* result)
      : control_(control), result_(result) {}
  std::optional<double> WarmUp(int ops) override { return Time(ops); }
  std::optional<std::vector<double>> Sample(int iters, int windows) override {
    std::vector<double> out;
    for (int w = 0; w < windows; ++w) {
      auto t = Time(iters);
      if (!t) return std::nullopt;
      out.push_back(*t / iters);
    }
    return out;
  }

 private:
  std::optional<double> Time(int ops) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < ops; ++i) {
      auto s = control_.Sum(1);
      if (!AllRanksOk(s.status(), control_, result_)) return std::nullopt;
    }
    const double mine =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
            .count();
    auto slowest = control_.Max(mine);
    if (!AllRanksOk(slowest.status(), control_, result_)) return std::nullopt;
    return *slowest;
  }
  Control& control_;
  v1::Result* result_;
};

class RankSumKind : public BenchmarkKind {
 public:
  bool RunsOnCaseRanks() const override { return true; }

  v1::Result Run(const v1::Case& c, CaseEnv& env) override {
    const int n = c.nranks() > 0 ? c.nranks() : env.world_size();
    auto group = env.Group(n);
    if (!group.ok()) return FailedResult(c, n, group.status());
    Control& control = *group->control;
    v1::Result result;
    *result.mutable_case_() = c;
    result.set_nranks(n);
    result.set_path("rank_sum over the control channel");
    const int64_t scale = Param(c, "scale", 1);
    const int64_t expect = Param(c, "expect", scale * n * (n + 1) / 2);
    auto sum = control.Sum((control.rank() + 1) * scale);
    if (!AllRanksOk(sum.status(), control, &result)) return result;
    result.set_wrong_elements(*sum == expect ? 0 : 1);
    if (c.verify() && *sum != expect) {
      result.set_status(v1::FAILED);
      result.mutable_failure()->set_reason(v1::DATA_MISMATCH);
      result.mutable_failure()->set_rank(-1);
      result.mutable_failure()->set_detail(
          absl::StrFormat("sum %d, expected %d", *sum, expect));
      return result;
    }
    StoppingRule rule(c.timing());
    SumSampler sampler(control, &result);
    auto m = Measure(c.timing(), rule, sampler);
    if (!m) return result;
    FillStats(*m, c.timing(), rule, &result);
    result.set_latency_ns(result.stats().median_s() * 1e9);
    result.set_status(v1::OK);
    return result;
  }
};

RINGMASTER_REGISTER_KIND("rank_sum", RankSumKind);

}  // namespace
}  // namespace ringmaster
