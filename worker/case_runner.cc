#include "worker/case_runner.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <optional>
#include <vector>

#include "absl/strings/str_format.h"
#include "backends/collective_layout.h"
#include "core/metrics.h"
#include "core/names.h"
#include "core/progress.h"
#include "core/stats.h"

namespace ringmaster {
namespace {

// Agrees across ranks on whether `local` failed; on failure fills
// `result` with the first failing rank's message. Returns true if any rank
// failed. Collective: every rank must call it at the same point.
bool AnyRankFailed(const absl::Status& local, Control& control,
                   v1::Result* result) {
  auto failures = control.Sum(local.ok() ? 0 : 1);
  if (failures.ok() && *failures == 0) return false;
  result->set_status(v1::FAILED);
  v1::Failure* f = result->mutable_failure();
  f->set_rank(-1);
  auto messages = control.AllGatherStrings(local.ok() ? "" : local.ToString());
  if (!failures.ok() || !messages.ok()) {
    f->set_reason(v1::BACKEND_ERROR);
    f->set_detail(!failures.ok() ? failures.status().ToString()
                                 : messages.status().ToString());
    return true;
  }
  for (size_t r = 0; r < messages->size(); ++r) {
    if ((*messages)[r].empty()) continue;
    f->set_rank(static_cast<int>(r));
    f->set_detail((*messages)[r]);
    break;
  }
  // Unsupported configurations are rejected, not backend errors.
  bool unsupported =
      (*messages)[f->rank() < 0 ? 0 : f->rank()].rfind("UNIMPLEMENTED", 0) == 0;
  f->set_reason(unsupported ? v1::REJECTED : v1::BACKEND_ERROR);
  return true;
}

}  // namespace

static v1::Result RunCaseInner(const v1::Case& c, CollectiveBackend& backend,
                               Control& control) {
  v1::Result result;
  *result.mutable_case_() = c;
  result.set_nranks(control.size());
  result.set_timing_mode(c.timing().mode() == v1::TIMING_MODE_UNSPECIFIED
                             ? v1::PIPELINED
                             : c.timing().mode());
  result.set_wrong_elements(-1);

  CollectiveConfig config;
  config.collective = c.collective();
  config.dtype = c.dtype();
  config.op = c.op();
  // All-gather, reduce-scatter and all-to-all split the buffer evenly.
  config.count = EffectiveCount(c.collective(), c.count(), control.size());
  result.mutable_case_()->set_count(config.count);
  result.mutable_case_()->set_size_bytes(config.count *
                                         DataTypeSize(c.dtype()));
  config.in_place = c.in_place();
  config.root = c.root();
  if (AnyRankFailed(backend.Prepare(config), control, &result)) return result;

  if (c.verify()) {
    auto wrong = backend.Verify();
    if (AnyRankFailed(wrong.status(), control, &result)) return result;
    auto per_rank = control.AllGather(static_cast<double>(*wrong));
    if (!per_rank.ok()) {
      AnyRankFailed(per_rank.status(), control, &result);
      return result;
    }
    int64_t total = 0;
    int first_bad = -1;
    for (size_t r = 0; r < per_rank->size(); ++r) {
      total += static_cast<int64_t>((*per_rank)[r]);
      if ((*per_rank)[r] > 0 && first_bad < 0) first_bad = static_cast<int>(r);
    }
    result.set_wrong_elements(total);
    if (total > 0) {
      result.set_status(v1::FAILED);
      result.mutable_failure()->set_reason(v1::DATA_MISMATCH);
      result.mutable_failure()->set_rank(first_bad);
      result.mutable_failure()->set_detail(absl::StrFormat(
          "%d wrong elements (first on rank %d)", total, first_bad));
      return result;
    }
  }

  const v1::Timing& timing = c.timing();
  const v1::TimingMode mode = result.timing_mode();
  const bool graph = mode == v1::GRAPH;
  StoppingRule rule(timing);
  // A failed op on any rank turns the shared value into +inf, which every
  // rank sees through Max and stops on.
  constexpr double kFailed = std::numeric_limits<double>::infinity();
  constexpr double kSettleBelowS =
      5e-3;  // windows shorter than this get settled
  absl::Status local = absl::OkStatus();
  auto note = [&](const absl::Status& s) {
    if (!s.ok() && local.ok()) local = s;
  };
  auto agreed = [&](double v) -> std::optional<double> {
    auto m = control.Max(v);
    if (!m.ok() || std::isinf(*m)) {
      AnyRankFailed(m.ok() ? local : m.status(), control, &result);
      return std::nullopt;
    }
    return *m;
  };
  auto pipelined = [&](int iters) -> double {
    auto t = backend.TimeOps(iters);
    if (!t.ok()) {
      note(t.status());
      return kFailed;
    }
    return *t;
  };

  // Warm-up: the first operation pays for lazy set-up; the rest stop early
  // once warmup_max_time_s has passed (every rank runs the same count). The
  // warm-up's time per operation also sizes the samples.
  auto first = agreed(pipelined(1));
  if (!first) return result;
  int warmup_done = 1;
  double op_estimate = *first;
  int remaining = std::max(0, timing.warmup_iters() - 1);
  if (timing.warmup_max_time_s() > 0) {
    double budget = timing.warmup_max_time_s() - *first;
    remaining =
        budget <= 0
            ? 0
            : static_cast<int>(std::min<double>(remaining, budget / *first));
  }
  if (remaining > 0) {
    auto t = agreed(pipelined(remaining));
    if (!t) return result;
    warmup_done += remaining;
    op_estimate = *t / remaining;
  }

  // Operations per sample: fixed, or sized to last about sample_target_s.
  int iters = timing.fixed_iters_per_sample();
  if (iters <= 0) {
    iters = rule.ItersPerSample(op_estimate);
    if (mode == v1::PER_OP) iters = std::min(iters, 100);  // events per sample
  }
  if (absl::Status b = control.Barrier(); !b.ok()) {
    AnyRankFailed(b, control, &result);
    return result;
  }
  if (graph) {
    // Capture once and replay once before measuring.
    auto w = backend.TimeWindows(iters, 1, true);
    if (!w.ok()) note(w.status());
    if (!agreed(w.ok() ? (*w)[0] : kFailed)) return result;
    warmup_done += iters;
  }

  // Samples are taken in batches of back-to-back windows (no host round trip
  // between samples, so ranks stay in step through the collective itself);
  // the stopping rule is checked after each batch.
  std::vector<double> samples;  // slowest rank's time per op
  std::vector<double> mine;     // this rank's time per op
  double sampled_s = 0;
  std::string stop_reason;
  while (true) {
    int batch = samples.empty()
                    ? std::max(1, timing.min_samples())
                    : std::clamp(static_cast<int>(samples.size()) / 2, 1, 50);
    if (mode == v1::PER_OP) batch = 1;
    batch = std::min(batch, std::max(1, timing.max_samples() -
                                            static_cast<int>(samples.size())));
    if (timing.max_time_s() > 0 && !samples.empty()) {
      double per_window = sampled_s / static_cast<double>(samples.size());
      double left = timing.max_time_s() - sampled_s;
      if (per_window > 0)
        batch = std::clamp(static_cast<int>(left / per_window) + 1, 1, batch);
    }
    std::vector<double> values;
    if (mode == v1::PER_OP) {
      auto each = backend.TimeEachOp(iters);
      if (!each.ok()) note(each.status());
      values = each.ok() ? *each : std::vector<double>(iters, kFailed);
    } else {
      // Ranks leave the previous batch's reduction at slightly different
      // times. In adaptive mode, when a window is short enough for that skew
      // to matter, one extra first window absorbs it and is discarded. Fixed
      // mode times exactly what it was asked to (nccl-tests' method).
      const bool settle = timing.fixed_iters_per_sample() <= 0 &&
                          op_estimate * iters < kSettleBelowS;
      if (absl::Status b = control.Barrier(); !b.ok()) note(b);
      auto w = backend.TimeWindows(iters, batch + (settle ? 1 : 0), graph);
      if (!w.ok()) note(w.status());
      values =
          w.ok() ? std::vector<double>(w->begin() + (settle ? 1 : 0), w->end())
                 : std::vector<double>(batch, kFailed);
      for (double& v : values) v /= iters;
    }
    mine.insert(mine.end(), values.begin(), values.end());
    absl::Status ms = control.MaxVector(&values);
    if (!ms.ok() || std::isinf(values[0])) {
      AnyRankFailed(ms.ok() ? local : ms, control, &result);
      return result;
    }
    CountOp();
    for (double v : values) {
      samples.push_back(v);
      sampled_s += mode == v1::PER_OP ? v : v * iters;
    }
    stop_reason = rule.StopReason(samples, sampled_s);
    if (!stop_reason.empty()) break;
  }

  SampleSummary summary = Summarize(samples);
  *result.mutable_stats() =
      ToProto(summary, iters, warmup_done, rule.TargetMet(summary));
  result.mutable_stats()->set_ci_on_median(timing.ci_on_median());
  result.mutable_stats()->set_stop_reason(stop_reason);
  result.mutable_stats()->set_p99_s(Quantile(samples, 0.99));
  StoreSamples(samples, result.mutable_stats());
  auto medians = control.AllGather(Summarize(mine).median);
  if (medians.ok()) {
    for (double m : *medians) result.add_rank_median_s(m);
    // Straggler: the slowest rank's median against the median rank.
    double mid = Quantile(*medians, 0.5);
    int slowest = static_cast<int>(
        std::max_element(medians->begin(), medians->end()) - medians->begin());
    result.set_straggler_rank(slowest);
    result.set_straggler_ratio(mid > 0 ? (*medians)[slowest] / mid : 0);
  }
  result.set_status(v1::OK);
  FillBandwidth(&result);
  return result;
}

v1::Result RunCase(const v1::Case& c, CollectiveBackend& backend,
                   Control& control) {
  const auto wall_start = std::chrono::steady_clock::now();
  v1::Result result = RunCaseInner(c, backend, control);
  result.set_case_wall_s(std::chrono::duration<double>(
                             std::chrono::steady_clock::now() - wall_start)
                             .count());
  return result;
}

}  // namespace ringmaster
