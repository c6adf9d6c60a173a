#include "worker/bench_runner.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "core/find_slow.h"
#include "core/progress.h"
#include "core/stats.h"

namespace ringmaster {
namespace {

constexpr double kFailed = std::numeric_limits<double>::infinity();

v1::Result RunBenchInner(const v1::Case& c, NodeBench& bench,
                         Control& control) {
  v1::Result result;
  *result.mutable_case_() = c;
  const int n = control.size();
  result.set_nranks(n);
  result.set_timing_mode(v1::PIPELINED);
  result.set_wrong_elements(-1);

  auto setup = bench.Prepare(c);
  if (!AllRanksOk(setup.status(), control, &result)) return result;
  result.mutable_case_()->set_method(setup->method);

  // What each rank does per operation, known to every rank.
  auto bytes = control.AllGather(static_cast<double>(setup->bytes_per_op));
  auto flops = control.AllGather(setup->flops_per_op);
  auto hops = control.AllGather(static_cast<double>(setup->hops_per_op));
  auto active = control.AllGather(setup->active ? 1.0 : 0.0);
  auto ceilings = control.AllGather(setup->active ? setup->ceiling_gbps : 0.0);
  auto labels = control.AllGatherStrings(
      setup->path + "\t" + setup->ceiling_source + "\t" + setup->placement);
  absl::Status gathered = absl::OkStatus();
  for (const absl::Status& s :
       {bytes.status(), flops.status(), hops.status(), active.status(),
        ceilings.status(), labels.status()}) {
    if (!s.ok() && gathered.ok()) gathered = s;
  }
  if (!AllRanksOk(gathered, control, &result)) return result;

  // Labels from the active ranks: the first one's path and ceiling source,
  // every active rank's placement.
  std::string placement;
  double ceiling = 0, total_hops = 0;
  bool any_ceiling_unknown = false;
  for (int r = 0; r < n; ++r) {
    if ((*active)[r] == 0) continue;
    std::vector<std::string> parts = absl::StrSplit((*labels)[r], '\t');
    parts.resize(3);
    if (result.path().empty()) {
      result.set_path(parts[0]);
      result.set_ceiling_source(parts[1]);
    }
    if (!placement.empty()) placement += "; ";
    placement += absl::StrFormat("rank %d: %s", r, parts[2]);
    ceiling += (*ceilings)[r];
    any_ceiling_unknown = any_ceiling_unknown || (*ceilings)[r] <= 0;
    total_hops = std::max(total_hops, (*hops)[r]);
  }
  result.set_placement(placement);
  if (any_ceiling_unknown) ceiling = 0;

  if (c.verify()) {
    auto wrong = bench.Verify();
    if (!AllRanksOk(wrong.status(), control, &result)) return result;
    auto per_rank = control.AllGather(static_cast<double>(*wrong));
    auto err = control.Max(bench.rel_error());
    if (!AllRanksOk(per_rank.ok() ? err.status() : per_rank.status(), control,
                    &result)) {
      return result;
    }
    int64_t total = 0;
    int first_bad = -1;
    for (int r = 0; r < n; ++r) {
      total += static_cast<int64_t>((*per_rank)[r]);
      if ((*per_rank)[r] > 0 && first_bad < 0) first_bad = r;
    }
    result.set_wrong_elements(total);
    result.set_rel_error(*err);
    if (total > 0) {
      result.set_status(v1::FAILED);
      result.mutable_failure()->set_reason(v1::DATA_MISMATCH);
      result.mutable_failure()->set_rank(first_bad);
      result.mutable_failure()->set_detail(
          c.bench() == v1::BENCH_GEMM
              ? absl::StrFormat("GEMM result off the float64 reference: "
                                "relative error %.3g "
                                "(first on rank %d)",
                                *err, first_bad)
              : absl::StrFormat(
                    "%d wrong bytes after the copy (first on rank %d)", total,
                    first_bad));
      return result;
    }
  }

  // Every rank's seconds for one call of `iters` operations; +inf anywhere
  // is a failure every rank sees.
  absl::Status local = absl::OkStatus();
  auto time_ops = [&](int iters) -> std::optional<std::vector<double>> {
    auto t = bench.TimeOps(iters);
    if (!t.ok() && local.ok()) local = t.status();
    auto all = control.AllGather(t.ok() ? *t : kFailed);
    if (!all.ok() || std::any_of(all->begin(), all->end(),
                                 [](double v) { return std::isinf(v); })) {
      AllRanksOk(all.ok()
                     ? (local.ok() ? absl::InternalError("another rank failed")
                                   : local)
                     : all.status(),
                 control, &result);
      return std::nullopt;
    }
    return *all;
  };
  const v1::Timing& timing = c.timing();
  StoppingRule rule(timing);
  int warmup = std::max(1, timing.warmup_iters());
  auto first = time_ops(warmup);
  if (!first) return result;
  int iters = timing.fixed_iters_per_sample();
  if (iters <= 0) {
    double op = *std::max_element(first->begin(), first->end()) / warmup;
    iters = rule.ItersPerSample(op);
  }

  std::vector<double> samples;  // slowest active rank's seconds per op
  std::vector<double> totals;   // GB/s summed over active ranks
  std::vector<double> tflops;
  std::vector<std::vector<double>> rank_bw(n);
  double sampled_s = 0;
  std::string stop_reason;
  while (stop_reason.empty()) {
    auto secs = time_ops(iters);
    if (!secs) return result;
    double slowest = *std::max_element(secs->begin(), secs->end());
    double total = 0, tf = 0;
    for (int r = 0; r < n; ++r) {
      double s = (*secs)[r];
      double bw = s > 0 ? (*bytes)[r] * iters / s / 1e9 : 0;
      rank_bw[r].push_back(bw);
      total += bw;
      if (s > 0) tf += (*flops)[r] * iters / s / 1e12;
    }
    CountOp();
    samples.push_back(slowest / iters);
    totals.push_back(total);
    tflops.push_back(tf);
    sampled_s += slowest;
    stop_reason = rule.StopReason(samples, sampled_s);
  }

  SampleSummary summary = Summarize(samples);
  *result.mutable_stats() =
      ToProto(summary, iters, warmup, rule.TargetMet(summary));
  result.mutable_stats()->set_ci_on_median(timing.ci_on_median());
  result.mutable_stats()->set_stop_reason(stop_reason);
  result.mutable_stats()->set_p99_s(Quantile(samples, 0.99));
  StoreSamples(samples, result.mutable_stats());
  double bandwidth = Median(totals);
  result.set_bandwidth_gbps(bandwidth);
  for (int r = 0; r < n; ++r)
    result.add_rank_bandwidth_gbps(Median(rank_bw[r]));
  if (total_hops > 0) result.set_latency_ns(summary.median / total_hops * 1e9);
  result.set_tflops(Median(tflops));
  if (bandwidth > 0 && ceiling > 0) {
    result.set_ceiling_gbps(ceiling);
    result.set_pct_of_ceiling(100.0 * bandwidth / ceiling);
  }
  result.set_status(v1::OK);
  return result;
}

}  // namespace

v1::Result RunFindSlow(const v1::Case& c, NodeBench& bench, Control& control,
                       const std::vector<std::string>& hosts) {
  const int n = control.size();
  // Members and the rank that stands for each.
  std::vector<int> rep;
  std::vector<std::string> member_host;
  if (c.members() == "nodes") {
    for (int r = 0; r < n; ++r) {
      const std::string h = r < static_cast<int>(hosts.size()) ? hosts[r] : "";
      if (std::find(member_host.begin(), member_host.end(), h) ==
          member_host.end()) {
        member_host.push_back(h);
        rep.push_back(r);
      }
    }
  } else {
    for (int r = 0; r < n; ++r) {
      rep.push_back(r);
      member_host.push_back(r < static_cast<int>(hosts.size()) ? hosts[r] : "");
    }
  }
  const double ratio = c.slow_ratio() > 0 ? c.slow_ratio() : 0.8;
  SlowMemberSearch search(static_cast<int>(rep.size()), ratio, c.repeat());
  v1::Result result;
  *result.mutable_case_() = c;
  result.set_nranks(n);
  result.set_timing_mode(v1::PIPELINED);
  result.set_wrong_elements(-1);
  std::vector<double> pair_times;
  while (auto t = search.Next()) {
    v1::Case pc = c;
    pc.set_bench(v1::BENCH_P2P);
    pc.set_pattern(v1::PAIR);
    pc.set_src_rank(rep[t->a]);
    pc.set_dst_rank(rep[t->b]);
    v1::Result pr = RunBench(pc, bench, control);
    // Rank 0 holds the figure; every rank needs it to walk the same pairs.
    double gbps = pr.status() == v1::OK ? pr.bandwidth_gbps() : 0;
    if (absl::Status st = control.Broadcast(&gbps, sizeof gbps, 0); !st.ok()) {
      result.set_status(v1::FAILED);
      result.mutable_failure()->set_reason(v1::BACKEND_ERROR);
      result.mutable_failure()->set_rank(-1);
      result.mutable_failure()->set_detail(st.ToString());
      return result;
    }
    if (pr.stats().median_s() > 0) pair_times.push_back(pr.stats().median_s());
    search.Record(gbps);
  }
  v1::FindSlowFigures f = search.figures();
  f.set_members(c.members().empty() ? "ranks" : c.members());
  for (auto& t : *f.mutable_tests()) {
    t.set_a_host(member_host[t.a()]);
    t.set_b_host(member_host[t.b()]);
  }
  for (int m : f.slow()) f.add_slow_hosts(member_host[m]);
  SampleSummary summary = Summarize(pair_times);
  *result.mutable_stats() = ToProto(summary, 1, 0, false);
  result.set_bandwidth_gbps(f.reference_gbps());
  *result.mutable_find_slow() = f;
  result.set_status(v1::OK);
  for (int i = 0; i < f.slow_size(); ++i) {
    if (!f.confirmed(i)) continue;
    result.set_status(v1::FAILED);
    result.mutable_failure()->set_reason(v1::BELOW_FLOOR);
    result.mutable_failure()->set_rank(rep[f.slow(i)]);
    result.mutable_failure()->set_host(f.slow_hosts(i));
    result.mutable_failure()->set_detail(f.verdict());
    break;
  }
  return result;
}

bool AllRanksOk(const absl::Status& local, Control& control,
                v1::Result* result) {
  auto messages = control.AllGatherStrings(
      local.ok() ? ""
                 : (absl::IsUnimplemented(local) ? "U" : "E") +
                       std::string(local.message()));
  if (!messages.ok()) {
    result->set_status(v1::FAILED);
    result->mutable_failure()->set_reason(v1::BACKEND_ERROR);
    result->mutable_failure()->set_rank(-1);
    result->mutable_failure()->set_detail(messages.status().ToString());
    return false;
  }
  for (size_t r = 0; r < messages->size(); ++r) {
    const std::string& m = (*messages)[r];
    if (m.empty()) continue;
    bool skipped = m[0] == 'U';
    result->set_status(skipped ? v1::SKIPPED : v1::FAILED);
    v1::Failure* f = result->mutable_failure();
    f->set_reason(skipped ? v1::REJECTED : v1::BACKEND_ERROR);
    f->set_rank(static_cast<int>(r));
    f->set_detail(m.substr(1));
    return false;
  }
  return true;
}

v1::Result SkippedBench(const v1::Case& c, int nranks, const std::string& why) {
  v1::Result result;
  *result.mutable_case_() = c;
  result.set_nranks(nranks);
  result.set_wrong_elements(-1);
  result.set_status(v1::SKIPPED);
  result.mutable_failure()->set_reason(v1::REJECTED);
  result.mutable_failure()->set_rank(-1);
  result.mutable_failure()->set_detail(why);
  return result;
}

v1::Result FailedBench(const v1::Case& c, int nranks, const absl::Status& why) {
  v1::Result r = SkippedBench(c, nranks, std::string(why.message()));
  r.set_status(v1::FAILED);
  r.mutable_failure()->set_reason(v1::BACKEND_ERROR);
  return r;
}

v1::Result RunBench(const v1::Case& c, NodeBench& bench, Control& control) {
  const auto wall_start = std::chrono::steady_clock::now();
  v1::Result result = RunBenchInner(c, bench, control);
  result.set_case_wall_s(std::chrono::duration<double>(
                             std::chrono::steady_clock::now() - wall_start)
                             .count());
  return result;
}

}  // namespace ringmaster
