#include "worker/kinds/node_bench_kind.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <optional>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "core/stats.h"
#include "worker/measure.h"

namespace ringmaster {
namespace {

constexpr double kFailed = std::numeric_limits<double>::infinity();

// What each rank does per operation, known to every rank after Prepare.
struct RankWork {
  std::vector<double> bytes, flops, hops, active, ceilings;
  std::vector<std::string> labels;  // path \t ceiling source \t placement
};

absl::StatusOr<RankWork> GatherWork(const BenchSetup& setup, Control& control) {
  RankWork w;
  auto bytes = control.AllGather(static_cast<double>(setup.bytes_per_op));
  auto flops = control.AllGather(setup.flops_per_op);
  auto hops = control.AllGather(static_cast<double>(setup.hops_per_op));
  auto active = control.AllGather(setup.active ? 1.0 : 0.0);
  auto ceilings = control.AllGather(setup.active ? setup.ceiling_gbps : 0.0);
  auto labels = control.AllGatherStrings(
      setup.path + "\t" + setup.ceiling_source + "\t" + setup.placement);
  for (const absl::Status& s :
       {bytes.status(), flops.status(), hops.status(), active.status(),
        ceilings.status(), labels.status()}) {
    if (!s.ok()) return s;
  }
  w.bytes = *bytes;
  w.flops = *flops;
  w.hops = *hops;
  w.active = *active;
  w.ceilings = *ceilings;
  w.labels = *labels;
  return w;
}

// Labels from the active ranks: the first one's path and ceiling source,
// every active rank's placement. Returns the summed ceiling (0 when any
// active rank's is unknown) and sets *hops to the most hops per operation.
double DescribeActive(const RankWork& w, v1::Result* result, double* hops) {
  std::string placement;
  double ceiling = 0;
  bool unknown = false;
  for (size_t r = 0; r < w.active.size(); ++r) {
    if (w.active[r] == 0) continue;
    std::vector<std::string> parts = absl::StrSplit(w.labels[r], '\t');
    parts.resize(3);
    if (result->path().empty()) {
      result->set_path(parts[0]);
      result->set_ceiling_source(parts[1]);
    }
    if (!placement.empty()) placement += "; ";
    placement += absl::StrFormat("rank %d: %s", r, parts[2]);
    ceiling += w.ceilings[r];
    unknown = unknown || w.ceilings[r] <= 0;
    *hops = std::max(*hops, w.hops[r]);
  }
  result->set_placement(placement);
  return unknown ? 0 : ceiling;
}

std::string WrongBytes(int64_t wrong, double /*rel_error*/, int first_bad) {
  return absl::StrFormat("%d wrong bytes after the copy (first on rank %d)",
                         wrong, first_bad);
}

// Verifies the last operation on every rank; false (result filled) on a
// failure or wrong data.
bool Verified(NodeBench& bench, Control& control, WrongDetail detail,
              v1::Result* result) {
  auto wrong = bench.Verify();
  if (!AllRanksOk(wrong.status(), control, result)) return false;
  auto per_rank = control.AllGather(static_cast<double>(*wrong));
  auto err = control.Max(bench.rel_error());
  if (!AllRanksOk(per_rank.ok() ? err.status() : per_rank.status(), control,
                  result)) {
    return false;
  }
  const auto [total, first_bad] = CountWrong(*per_rank);
  result->set_wrong_elements(total);
  result->set_rel_error(*err);
  if (total == 0) return true;
  result->set_status(v1::FAILED);
  result->mutable_failure()->set_reason(v1::DATA_MISMATCH);
  result->mutable_failure()->set_rank(first_bad);
  result->mutable_failure()->set_detail(
      (detail ? detail : WrongBytes)(total, *err, first_bad));
  return false;
}

// Each sample is one call of `iters` operations on every rank; the
// sample's time is the slowest active rank's, and the bandwidth the sum of
// the ranks' that moved bytes at once.
class BenchSampler : public Sampler {
 public:
  BenchSampler(NodeBench& bench, Control& control, const RankWork& work,
               v1::Result* result)
      : bench_(bench),
        control_(control),
        work_(work),
        result_(result),
        rank_bw_(work.bytes.size()) {}

  std::optional<double> WarmUp(int ops) override {
    auto secs = TimeOps(ops);
    if (!secs) return std::nullopt;
    return *std::max_element(secs->begin(), secs->end());
  }

  std::optional<std::vector<double>> Sample(int iters, int windows) override {
    std::vector<double> values;
    for (int w = 0; w < windows; ++w) {
      auto secs = TimeOps(iters);
      if (!secs) return std::nullopt;
      double total = 0, tf = 0;
      for (size_t r = 0; r < secs->size(); ++r) {
        const double s = (*secs)[r];
        const double bw = s > 0 ? work_.bytes[r] * iters / s / 1e9 : 0;
        rank_bw_[r].push_back(bw);
        total += bw;
        if (s > 0) tf += work_.flops[r] * iters / s / 1e12;
      }
      totals_.push_back(total);
      tflops_.push_back(tf);
      values.push_back(*std::max_element(secs->begin(), secs->end()) / iters);
    }
    return values;
  }

  const std::vector<double>& totals() const { return totals_; }
  const std::vector<double>& tflops() const { return tflops_; }
  const std::vector<std::vector<double>>& rank_bw() const { return rank_bw_; }

 private:
  // Every rank's seconds for one call of `iters` operations; +inf anywhere
  // is a failure every rank sees.
  std::optional<std::vector<double>> TimeOps(int iters) {
    auto t = bench_.TimeOps(iters);
    if (!t.ok() && local_.ok()) local_ = t.status();
    auto all = control_.AllGather(t.ok() ? *t : kFailed);
    if (!all.ok() || std::any_of(all->begin(), all->end(),
                                 [](double v) { return std::isinf(v); })) {
      RecordFailure(all.ok() ? local_ : all.status(), control_, result_);
      return std::nullopt;
    }
    return *all;
  }

  NodeBench& bench_;
  Control& control_;
  const RankWork& work_;
  v1::Result* result_;
  absl::Status local_ = absl::OkStatus();
  std::vector<double> totals_, tflops_;
  std::vector<std::vector<double>> rank_bw_;
};

v1::Result RunBenchInner(const v1::Case& c, NodeBench& bench, Control& control,
                         WrongDetail detail) {
  v1::Result result;
  *result.mutable_case_() = c;
  const int n = control.size();
  result.set_nranks(n);
  result.set_timing_mode(v1::PIPELINED);
  result.set_wrong_elements(-1);

  auto setup = bench.Prepare(c);
  if (!AllRanksOk(setup.status(), control, &result)) return result;
  result.mutable_case_()->set_method(setup->method);
  auto work = GatherWork(*setup, control);
  if (!AllRanksOk(work.status(), control, &result)) return result;
  double total_hops = 0;
  const double ceiling = DescribeActive(*work, &result, &total_hops);
  if (c.verify() && !Verified(bench, control, detail, &result)) return result;

  StoppingRule rule(c.timing());
  BenchSampler sampler(bench, control, *work, &result);
  LoopOptions options;
  options.max_batch = 1;  // the stopping rule looks at every sample
  auto m = Measure(c.timing(), rule, sampler, options);
  if (!m) return result;
  FillStats(*m, c.timing(), rule, &result);
  const double bandwidth = Median(sampler.totals());
  result.set_bandwidth_gbps(bandwidth);
  for (const auto& bw : sampler.rank_bw())
    result.add_rank_bandwidth_gbps(Median(bw));
  if (total_hops > 0) {
    result.set_latency_ns(Summarize(m->samples).median / total_hops * 1e9);
  }
  result.set_tflops(Median(sampler.tflops()));
  if (bandwidth > 0 && ceiling > 0) {
    result.set_ceiling_gbps(ceiling);
    result.set_pct_of_ceiling(100.0 * bandwidth / ceiling);
  }
  result.set_status(v1::OK);
  return result;
}

}  // namespace

v1::Result RunBench(const v1::Case& c, NodeBench& bench, Control& control,
                    WrongDetail detail) {
  const auto wall_start = std::chrono::steady_clock::now();
  v1::Result result = RunBenchInner(c, bench, control, detail);
  result.set_case_wall_s(std::chrono::duration<double>(
                             std::chrono::steady_clock::now() - wall_start)
                             .count());
  return result;
}

NodeBench* NodeBenchKind::BenchFor(const v1::Case& c, CaseEnv& env,
                                   v1::Result* result) {
  std::string why;
  BackendProvider* provider = env.ProviderFor(c, &why);
  if (provider == nullptr) {
    *result = SkippedResult(c, env.world_size(), why);
    return nullptr;
  }
  auto bench = env.NodeBenchOf(*provider);
  if (!bench.ok()) {
    *result = FailedResult(c, env.world_size(), bench.status());
    return nullptr;
  }
  return *bench;
}

v1::Result NodeBenchKind::Run(const v1::Case& c, CaseEnv& env) {
  v1::Result result;
  NodeBench* bench = BenchFor(c, env, &result);
  if (bench == nullptr) return result;
  return RunBench(c, *bench, env.world_control(), wrong_detail());
}

}  // namespace ringmaster
