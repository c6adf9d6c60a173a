#include "worker/case_runner.h"

#include <cmath>
#include <limits>
#include <vector>

#include "absl/strings/str_format.h"
#include "core/metrics.h"
#include "core/stats.h"

namespace ringmaster {
namespace {

// Agrees across ranks on whether `local` failed; on failure fills
// `result` with the first failing rank's message. Returns true if any rank
// failed. Collective: every rank must call it at the same point.
bool AnyRankFailed(const absl::Status& local, Control& control, v1::Result* result) {
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
  bool unsupported = (*messages)[f->rank() < 0 ? 0 : f->rank()].rfind("UNIMPLEMENTED", 0) == 0;
  f->set_reason(unsupported ? v1::REJECTED : v1::BACKEND_ERROR);
  return true;
}

}  // namespace

v1::Result RunCase(const v1::Case& c, CollectiveBackend& backend, Control& control) {
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
  config.count = c.count();
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
  StoppingRule rule(timing);
  // A failed op on any rank turns the shared sample into +inf, which every
  // rank sees through Max and stops on.
  constexpr double kFailed = std::numeric_limits<double>::infinity();
  absl::Status local = absl::OkStatus();
  auto time_ops = [&](int iters) -> double {
    auto t = backend.TimeOps(iters);
    if (!t.ok()) {
      local = t.status();
      return kFailed;
    }
    return *t;
  };

  if (timing.warmup_iters() > 0) time_ops(timing.warmup_iters());
  auto one = control.Max(time_ops(1));
  if (!one.ok() || std::isinf(*one)) {
    AnyRankFailed(one.ok() ? local : one.status(), control, &result);
    return result;
  }
  const int iters = rule.ItersPerSample(*one);

  std::vector<double> samples;  // slowest rank's time per op
  std::vector<double> mine;     // this rank's time per op
  double sampled_s = 0;
  while (true) {
    if (absl::Status b = control.Barrier(); !b.ok()) {
      AnyRankFailed(b, control, &result);
      return result;
    }
    double t = time_ops(iters);
    auto slowest = control.Max(t);
    if (!slowest.ok() || std::isinf(*slowest)) {
      AnyRankFailed(slowest.ok() ? local : slowest.status(), control, &result);
      return result;
    }
    mine.push_back(t / iters);
    samples.push_back(*slowest / iters);
    sampled_s += *slowest;
    if (rule.ShouldStop(samples, sampled_s)) break;
  }

  SampleSummary summary = Summarize(samples);
  *result.mutable_stats() =
      ToProto(summary, iters, timing.warmup_iters(), rule.TargetMet(summary));
  auto medians = control.AllGather(Summarize(mine).median);
  if (medians.ok()) {
    for (double m : *medians) result.add_rank_median_s(m);
  }
  result.set_status(v1::OK);
  FillBandwidth(&result);
  return result;
}

}  // namespace ringmaster
