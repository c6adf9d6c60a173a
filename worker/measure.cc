#include "worker/measure.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_format.h"
#include "core/progress.h"

namespace ringmaster {

bool AllRanksOk(const absl::Status& local, Control& control, v1::Result* result,
                Unsupported unsupported) {
  // One gather: "" for OK, "U<message>" for Unimplemented, "E<message>"
  // for any other error.
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
    const bool refused = m[0] == 'U';
    result->set_status(refused && unsupported == Unsupported::kSkipped
                           ? v1::SKIPPED
                           : v1::FAILED);
    v1::Failure* f = result->mutable_failure();
    f->set_reason(refused ? v1::REJECTED : v1::BACKEND_ERROR);
    f->set_rank(static_cast<int>(r));
    f->set_detail(m.substr(1));
    return false;
  }
  return true;
}

WrongCount CountWrong(const std::vector<double>& per_rank) {
  WrongCount w;
  for (size_t r = 0; r < per_rank.size(); ++r) {
    w.total += static_cast<int64_t>(per_rank[r]);
    if (per_rank[r] > 0 && w.first_bad < 0) w.first_bad = static_cast<int>(r);
  }
  return w;
}

void RecordFailure(const absl::Status& local, Control& control,
                   v1::Result* result, Unsupported unsupported) {
  if (!AllRanksOk(local, control, result, unsupported)) return;
  result->set_status(v1::FAILED);
  result->mutable_failure()->set_reason(v1::BACKEND_ERROR);
  result->mutable_failure()->set_rank(-1);
  result->mutable_failure()->set_detail(
      "a rank's operation failed without saying why");
}

namespace {

// Samples in the next batch: min_samples first, then half as many as are
// in (at most options.max_batch), within max_samples and what max_time_s
// leaves at the time per sample so far.
int NextBatch(const v1::Timing& timing, const LoopOptions& options,
              const Measurement& m) {
  const int n = static_cast<int>(m.samples.size());
  int batch = n == 0 ? std::max(1, timing.min_samples())
                     : std::clamp(n / 2, 1, std::max(1, options.max_batch));
  if (options.per_op) batch = 1;
  batch = std::min(batch, std::max(1, options.max_batch));
  batch = std::min(batch, std::max(1, timing.max_samples() - n));
  if (timing.max_time_s() > 0 && n > 0) {
    const double per_sample = m.sampled_s / n;
    const double left = timing.max_time_s() - m.sampled_s;
    if (per_sample > 0)
      batch = std::clamp(static_cast<int>(left / per_sample) + 1, 1, batch);
  }
  return batch;
}

}  // namespace

std::optional<Measurement> Measure(const v1::Timing& timing,
                                   const StoppingCriterion& rule,
                                   Sampler& sampler,
                                   const LoopOptions& options) {
  Measurement m;
  auto first = sampler.WarmUp(1);
  if (!first) return std::nullopt;
  CountOp();
  m.warmup_ops = 1;
  double op_estimate = *first;
  int remaining = std::max(0, timing.warmup_iters() - 1);
  if (timing.warmup_max_time_s() > 0) {
    const double budget = timing.warmup_max_time_s() - *first;
    remaining = budget <= 0 ? 0
                            : static_cast<int>(std::min<double>(
                                  remaining, budget / std::max(*first, 1e-12)));
  }
  if (remaining > 0) {
    auto t = sampler.WarmUp(remaining);
    if (!t) return std::nullopt;
    CountOp();
    m.warmup_ops += remaining;
    op_estimate = *t / remaining;
  }

  int iters = timing.fixed_iters_per_sample();
  if (iters <= 0) {
    iters = rule.ItersPerSample(op_estimate);
    if (options.per_op) iters = std::min(iters, 100);  // events per sample
  }
  m.iters_per_sample = iters;
  auto ready = sampler.BeforeSampling(iters);
  if (!ready) return std::nullopt;
  m.warmup_ops += *ready;

  while (true) {
    auto values = sampler.Sample(iters, NextBatch(timing, options, m));
    if (!values) return std::nullopt;
    CountOp();
    for (double v : *values) {
      m.samples.push_back(v);
      m.sampled_s += options.per_op ? v : v * iters;
    }
    m.stop_reason = rule.StopReason(m.samples, m.sampled_s);
    if (!m.stop_reason.empty()) return m;
  }
}

void FillStats(const Measurement& m, const v1::Timing& timing,
               const StoppingCriterion& rule, v1::Result* result) {
  const SampleSummary summary = Summarize(m.samples);
  v1::Stats* stats = result->mutable_stats();
  *stats = ToProto(summary, m.iters_per_sample, m.warmup_ops,
                   rule.TargetMet(summary));
  stats->set_ci_on_median(timing.ci_on_median());
  stats->set_stop_reason(m.stop_reason);
  stats->set_p99_s(Quantile(m.samples, 0.99));
  StoreSamples(m.samples, stats);
}

bool LossWithinTolerance(double loss, double rank0_reference, double tolerance,
                         const std::string& what, Control& control,
                         LossCheck* check, v1::Result* result) {
  auto reference = control.Max(rank0_reference);
  if (!AllRanksOk(reference.status(), control, result)) return false;
  check->loss = loss;
  check->reference = *reference;
  check->rel_error =
      std::abs(loss - *reference) / std::max(1e-30, std::abs(*reference));
  if (check->rel_error <= tolerance) return true;
  result->set_status(v1::FAILED);
  result->mutable_failure()->set_reason(v1::DATA_MISMATCH);
  result->mutable_failure()->set_rank(-1);
  result->mutable_failure()->set_detail(
      absl::StrFormat("%s %.9g, float64 reference %.9g: relative error %.3g > "
                      "%.0e",
                      what, loss, *reference, check->rel_error, tolerance));
  return false;
}

}  // namespace ringmaster
