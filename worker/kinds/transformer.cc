// bench: transformer: decoder-only transformer training steps on dp x tp
// ranks (core/transformer.h; the back end's TransformerTrainer). A case
// first checks its numerics (the global loss after check_steps steps
// against a float64 reference of the whole global batch, computed on rank
// 0), then times `steps` steps from fresh weights and splits the median
// step into compute, the communication each parallelism made it wait for,
// and skew (docs/metrics.md).
#include "core/transformer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "backends/trainer.h"
#include "core/names.h"
#include "core/stats.h"
#include "worker/kinds/kind.h"
#include "worker/measure.h"

namespace ringmaster {
namespace {

// The reference in float64 runs on one core: past this many FLOPs the
// check is left out (the result says so with loss_check -1).
constexpr double kMaxReferenceFlops = 2e10;

// The global loss: every rank's share, summed.
absl::StatusOr<double> GlobalLoss(double part, Control& control) {
  auto all = control.AllGather(part);
  if (!all.ok()) return all.status();
  double sum = 0;
  for (double x : *all) sum += x;
  return sum;
}

// Losses of the reference over steps 0..steps-1 (each step's forward,
// after the previous updates).
std::vector<double> ReferenceLosses(const v1::TransformerSpec& t, int steps) {
  const v1::ParallelLayout& p = t.parallel();
  ReferenceTransformer<double> ref(
      ShapeOf(t), t.layers(), std::max(1, p.dp()) * t.micro_batch(), t.seq());
  std::vector<double> losses;
  for (int s = 0; s < steps; ++s) {
    losses.push_back(ref.ForwardBackward());
    ref.Update(t.optimizer(), t.lr(), t.weight_decay());
  }
  return losses;
}

// The numerical check; false (result filled) when it fails.
bool LossMatchesReference(const v1::Case& c, TransformerTrainer& trainer,
                          Control& control, v1::Result* result) {
  const v1::TransformerSpec& t = c.transformer();
  v1::TransformerFigures* fig = result->mutable_transformer();
  const int64_t tokens =
      std::max(1, t.parallel().dp()) * t.micro_batch() * t.seq();
  const double ref_flops = TrainFlopsPerToken(ShapeOf(t), t.layers(), t.seq()) *
                           tokens * (t.check_steps() + 1);
  if (ref_flops > kMaxReferenceFlops) return true;  // loss_check stays -1
  if (!AllRanksOk(trainer.Prepare(c), control, result)) return false;
  double loss = 0;
  for (int s = 0; s <= t.check_steps(); ++s) {
    auto step = trainer.Step();
    if (!AllRanksOk(step.status(), control, result)) return false;
    auto g = GlobalLoss(step->loss_part, control);
    if (!AllRanksOk(g.status(), control, result)) return false;
    loss = *g;
  }
  std::vector<double> ref = control.rank() == 0
                                ? ReferenceLosses(t, t.check_steps() + 1)
                                : std::vector<double>{0.0};
  LossCheck check;
  const bool ok = LossWithinTolerance(
      loss, ref.back(), c.dtype() == v1::FLOAT32 ? 1e-4 : 3e-2,
      absl::StrFormat("%s: loss after %d steps", LayoutName(c),
                      t.check_steps()),
      control, &check, result);
  fig->set_loss_check(check.loss);
  fig->set_loss_reference(check.reference);
  fig->set_loss_rel_error(check.rel_error);
  return ok;
}

// One step's parts, of the rank whose step was slowest.
struct Parts {
  double step = 0, compute = 0, tp = 0, gather = 0, reduce_scatter = 0,
         allreduce = 0, skew = 0;
  int64_t peak = 0;
};

class TransformerSampler : public StepSampler<Parts> {
 public:
  TransformerSampler(TransformerTrainer& trainer, Control& control,
                     v1::Result* r)
      : trainer_(trainer), control_(control), result_(r) {}

  double loss_first() const { return loss_first_; }
  double loss_last() const { return loss_last_; }

 private:
  // Blocking communication counts a slower peer's extra compute as the
  // waiting rank's communication: that share (the slowest compute minus
  // this rank's, at most its communication) is skew, taken from each
  // parallelism's time in proportion.
  std::optional<Parts> Step() override {
    // The step as this loop sees it (the trainer's own parts are checked
    // against it).
    const double start = MonotonicSeconds();
    auto t = trainer_.Step();
    const double wall = MonotonicSeconds() - start;
    if (!AllRanksOk(t.status(), control_, result_)) return std::nullopt;
    auto loss = GlobalLoss(t->loss_part, control_);
    auto steps = control_.AllGather(wall);
    auto computes = control_.AllGather(t->compute_s);
    auto peak = control_.Max(static_cast<double>(t->peak_memory_bytes));
    for (const absl::Status& s :
         {loss.status(), steps.status(), computes.status(), peak.status()}) {
      if (!AllRanksOk(s, control_, result_)) return std::nullopt;
    }
    if (n_ == 0) loss_first_ = *loss;
    loss_last_ = *loss;
    ++n_;
    const int slow = static_cast<int>(
        std::max_element(steps->begin(), steps->end()) - steps->begin());
    const double comm =
        t->tp_s + t->gather_s + t->reduce_scatter_s + t->allreduce_s;
    const double skew = std::clamp(
        *std::max_element(computes->begin(), computes->end()) - t->compute_s,
        0.0, comm);
    const double keep = comm > 0 ? (comm - skew) / comm : 0.0;
    Parts mine{wall,
               t->compute_s,
               t->tp_s * keep,
               t->gather_s * keep,
               t->reduce_scatter_s * keep,
               t->allreduce_s * keep,
               skew,
               static_cast<int64_t>(*peak)};
    Parts out;
    for (auto [value, slot] :
         {std::pair{mine.step, &out.step},
          std::pair{mine.compute, &out.compute}, std::pair{mine.tp, &out.tp},
          std::pair{mine.gather, &out.gather},
          std::pair{mine.reduce_scatter, &out.reduce_scatter},
          std::pair{mine.allreduce, &out.allreduce},
          std::pair{mine.skew, &out.skew}}) {
      auto all = control_.AllGather(value);
      if (!AllRanksOk(all.status(), control_, result_)) return std::nullopt;
      *slot = (*all)[slow];
    }
    out.peak = mine.peak;
    return out;
  }

  TransformerTrainer& trainer_;
  Control& control_;
  v1::Result* result_;
  int n_ = 0;
  double loss_first_ = 0, loss_last_ = 0;
};

void FillFigures(const v1::Case& c, const Parts& mid, double step, double peak,
                 double gemm, const TransformerSampler& sampler, int nranks,
                 v1::Result* result) {
  const v1::TransformerSpec& t = c.transformer();
  v1::TransformerFigures* fig = result->mutable_transformer();
  const double tokens = static_cast<double>(std::max(1, t.parallel().dp())) *
                        t.micro_batch() * t.seq();
  const double per_token = TrainFlopsPerToken(ShapeOf(t), t.layers(), t.seq());
  fig->set_flops_per_token(per_token);
  fig->set_tokens_per_s_per_rank(step > 0 ? tokens / step / nranks : 0);
  fig->set_model_tflops_per_rank(
      step > 0 ? per_token * tokens / nranks / step / 1e12 : 0);
  // MFU over the datasheet peak where the backend knows one.
  fig->set_peak_flops(peak);
  fig->set_mfu(peak > 0 ? fig->model_tflops_per_rank() * 1e12 / peak : -1);
  fig->set_measured_gemm_flops(gemm);
  fig->set_mfu_of_measured_gemm(
      gemm > 0 ? fig->model_tflops_per_rank() * 1e12 / gemm : -1);
  fig->set_compute_s(mid.compute);
  fig->set_tp_exposed_s(mid.tp);
  fig->set_gather_exposed_s(mid.gather);
  fig->set_reduce_scatter_exposed_s(mid.reduce_scatter);
  fig->set_allreduce_exposed_s(mid.allreduce);
  fig->set_skew_s(mid.skew);
  fig->set_step_of_breakdown_s(mid.step);
  const double sum = mid.compute + mid.tp + mid.gather + mid.reduce_scatter +
                     mid.allreduce + mid.skew;
  fig->set_breakdown_gap(mid.step > 0 ? 1.0 - sum / mid.step : 0);
  fig->set_peak_memory_bytes(mid.peak);
  fig->set_loss_first(sampler.loss_first());
  fig->set_loss_last(sampler.loss_last());
  result->set_tflops(fig->model_tflops_per_rank());
}

v1::Result RunTransformer(const v1::Case& c, TransformerTrainer& trainer,
                          Control& control) {
  v1::Result result;
  *result.mutable_case_() = c;
  const int n = control.size();
  result.set_nranks(n);
  result.set_wrong_elements(-1);
  result.mutable_transformer()->set_loss_check(-1);
  if (c.transformer().check_steps() > 0 &&
      !LossMatchesReference(c, trainer, control, &result)) {
    return result;
  }
  if (!AllRanksOk(trainer.Prepare(c), control, &result)) return result;
  v1::Timing timing = c.timing();
  timing.set_warmup_iters(std::max(1, timing.warmup_iters()));
  timing.set_warmup_max_time_s(0);
  timing.set_fixed_iters_per_sample(1);
  timing.set_ci_on_median(false);
  FixedSampleCount rule(std::max(1, c.transformer().steps()));
  TransformerSampler sampler(trainer, control, &result);
  LoopOptions options;
  options.max_batch = 1;
  auto m = Measure(timing, rule, sampler, options);
  if (!m) return result;
  FillStats(*m, timing, rule, &result);
  // The breakdown of the median step (the lower middle of an even count).
  std::vector<Parts> parts = sampler.parts();
  std::sort(parts.begin(), parts.end(),
            [](const Parts& a, const Parts& b) { return a.step < b.step; });
  FillFigures(c, parts[(parts.size() - 1) / 2], result.stats().median_s(),
              trainer.PeakFlops(c.dtype()),
              trainer.MeasuredGemmFlops(c.dtype()), sampler, n, &result);
  result.set_path(trainer.Describe());
  result.set_status(v1::OK);
  return result;
}

class TransformerKind : public BenchmarkKind {
 public:
  bool RunsOnCaseRanks() const override { return true; }

  v1::Result Run(const v1::Case& input, CaseEnv& env) override {
    const auto start = std::chrono::steady_clock::now();
    v1::Case c = input;
    auto got = trainers_.For(
        c, env,
        [](BackendProvider& p, const RankResources& r) {
          return p.NewTransformerTrainer(r);
        },
        true);
    if (got.instead) return *got.instead;
    if (c.dtype() == v1::DATA_TYPE_UNSPECIFIED)
      c.set_dtype(got.object->DefaultDtype());
    v1::Result r = RunTransformer(c, *got.object, *got.control);
    r.set_case_wall_s(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count());
    return r;
  }

 private:
  GroupObjects<TransformerTrainer> trainers_;
};

RINGMASTER_REGISTER_KIND("transformer", TransformerKind);

}  // namespace
}  // namespace ringmaster
