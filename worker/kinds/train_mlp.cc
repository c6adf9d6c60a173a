#include "worker/kinds/train_mlp.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "core/stats.h"
#include "core/training.h"
#include "worker/kinds/kind.h"
#include "worker/measure.h"

namespace ringmaster {
namespace {

// The mean of every rank's loss.
absl::StatusOr<double> GlobalLoss(double local, Control& control) {
  auto all = control.AllGather(local);
  if (!all.ok()) return all.status();
  double sum = 0;
  for (double x : *all) sum += x;
  return sum / control.size();
}

// Numerical check: check_steps steps, the global loss after them against
// float64 on the whole global batch (what one rank with n x the batch
// computes). False (result filled) when it fails.
bool LossMatchesReference(const v1::Case& c, Trainer& trainer, Control& control,
                          int64_t batch, v1::Result* result) {
  const v1::TrainSpec& spec = c.train();
  const int n = control.size(), rank = control.rank();
  v1::TrainFigures* fig = result->mutable_train();
  if (!AllRanksOk(trainer.Prepare(c, batch, rank * batch), control, result))
    return false;
  double loss = 0;
  for (int s = 0; s <= spec.check_steps(); ++s) {
    auto t = trainer.Step();
    if (!AllRanksOk(t.status(), control, result)) return false;
    auto g = GlobalLoss(t->loss, control);
    if (!AllRanksOk(g.status(), control, result)) return false;
    loss = *g;  // the loss of step s's forward, after s updates
  }
  MlpShape shape{spec.layers(), spec.hidden(), batch * n};
  // Inference never updates the weights: every forward's loss is the first.
  const int ref_steps = spec.inference() ? 1 : spec.check_steps() + 1;
  std::vector<double> ref =
      rank == 0 ? ReferenceLosses(shape, spec.optimizer(), spec.lr(), ref_steps)
                : std::vector<double>(ref_steps, 0.0);
  LossCheck check;
  const bool ok = LossWithinTolerance(
      loss, ref.back(), c.dtype() == v1::FLOAT32 ? 1e-4 : 2e-2,
      absl::StrFormat("loss after %d steps", spec.check_steps()), control,
      &check, result);
  fig->set_loss_check(check.loss);
  fig->set_loss_reference(check.reference);
  fig->set_loss_rel_error(check.rel_error);
  return ok;
}

// One step's breakdown, the slowest rank's.
struct StepParts {
  double step = 0, compute = 0, skew = 0, exposed = 0, comm = 0;
};

// Training steps as the measurement loop sees them: one step a sample.
class TrainSampler : public StepSampler<StepParts> {
 public:
  TrainSampler(Trainer& trainer, Control& control, v1::Result* result)
      : trainer_(trainer), control_(control), result_(result) {}

  double loss_first() const { return loss_first_; }
  double loss_last() const { return loss_last_; }

 private:
  std::optional<StepParts> Step() override {
    auto t = trainer_.Step();
    if (!AllRanksOk(t.status(), control_, result_)) return std::nullopt;
    auto g = GlobalLoss(t->loss, control_);
    auto steps_all = control_.AllGather(t->step_s);
    auto bwd_all = control_.AllGather(t->backward_end_at);
    if (!AllRanksOk(
            !g.ok() ? g.status()
                    : (!steps_all.ok() ? steps_all.status() : bwd_all.status()),
            control_, result_)) {
      return std::nullopt;
    }
    if (steps_ == 0) loss_first_ = *g;
    loss_last_ = *g;
    ++steps_;
    // The slowest rank's step, and its breakdown.
    const int slow = static_cast<int>(
        std::max_element(steps_all->begin(), steps_all->end()) -
        steps_all->begin());
    const double last_gradient =
        *std::max_element(bwd_all->begin(), bwd_all->end());
    double my_skew = last_gradient - t->backward_end_at;
    double my_exposed =
        t->comm_in_backward_s + std::max(0.0, t->comm_done_at - last_gradient);
    if (t->pipelined) {
      // The waits are the whole non-compute time: a peer that finished
      // backward later explains part of them.
      my_skew = std::clamp(my_skew, 0.0, t->comm_in_backward_s);
      my_exposed = t->comm_in_backward_s - my_skew;
    }
    StepParts p;
    p.step = (*steps_all)[slow];
    for (auto [mine, out] :
         {std::pair{t->compute_s, &p.compute}, std::pair{my_skew, &p.skew},
          std::pair{my_exposed, &p.exposed},
          std::pair{t->comm_busy_s, &p.comm}}) {
      auto all = control_.AllGather(mine);
      if (!AllRanksOk(all.status(), control_, result_)) return std::nullopt;
      *out = (*all)[slow];
    }
    return p;
  }

  Trainer& trainer_;
  Control& control_;
  v1::Result* result_;
  int steps_ = 0;
  double loss_first_ = 0, loss_last_ = 0;
};

v1::Result RunTrainInner(const v1::Case& c, Trainer& trainer,
                         Control& control) {
  v1::Result result;
  *result.mutable_case_() = c;
  const int n = control.size(), rank = control.rank();
  result.set_nranks(n);
  result.set_wrong_elements(-1);
  const v1::TrainSpec& spec = c.train();
  if (spec.strong() && spec.batch() % n != 0) {
    result.set_status(v1::SKIPPED);
    result.mutable_failure()->set_reason(v1::REJECTED);
    result.mutable_failure()->set_detail(absl::StrFormat(
        "strong scaling: the global batch %d does not split over %d ranks",
        spec.batch(), n));
    return result;
  }
  const int64_t batch = spec.strong() ? spec.batch() / n : spec.batch();
  v1::TrainFigures* fig = result.mutable_train();
  fig->set_loss_check(-1);
  if (spec.check_steps() > 0 &&
      !LossMatchesReference(c, trainer, control, batch, &result)) {
    return result;
  }

  // Timed run from fresh weights: warmup_iters steps, then `steps` steps.
  if (!AllRanksOk(trainer.Prepare(c, batch, rank * batch), control, &result))
    return result;
  v1::Timing timing = c.timing();
  timing.set_warmup_iters(std::max(1, timing.warmup_iters()));
  timing.set_warmup_max_time_s(0);  // every warm-up step runs
  timing.set_fixed_iters_per_sample(1);
  timing.set_ci_on_median(false);
  FixedSampleCount rule(std::max(1, spec.steps()));
  TrainSampler sampler(trainer, control, &result);
  LoopOptions options;
  options.max_batch = 1;
  auto m = Measure(timing, rule, sampler, options);
  if (!m) return result;
  FillStats(*m, timing, rule, &result);
  // The breakdown is the median step's (independent medians of the parts
  // need not add up to the median step). Of an even count, the lower of
  // the two middle steps: the median is their mean, so the breakdown's
  // step (and its compute) never exceeds the step shown beside it.
  const std::vector<StepParts>& parts = sampler.parts();
  std::vector<size_t> idx(parts.size());
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = i;
  std::sort(idx.begin(), idx.end(),
            [&](size_t a, size_t b) { return parts[a].step < parts[b].step; });
  const StepParts& mid = parts[idx[(idx.size() - 1) / 2]];
  const double step = result.stats().median_s();
  fig->set_compute_s(mid.compute);
  fig->set_exposed_comm_s(mid.exposed);
  fig->set_skew_s(mid.skew);
  fig->set_comm_s(mid.comm);
  fig->set_step_of_breakdown_s(mid.step);
  fig->set_samples_per_s(step > 0 ? batch * n / step : 0);
  const MlpShape local{spec.layers(), spec.hidden(), batch};
  const double flops =
      spec.inference() ? ForwardFlops(local) : TrainStepFlops(local);
  fig->set_tflops_per_rank(step > 0 ? flops / step / 1e12 : 0);
  fig->set_loss_first(sampler.loss_first());
  fig->set_loss_last(sampler.loss_last());
  fig->set_buckets(static_cast<int>(
      GradientBuckets(spec.layers(), spec.hidden() * spec.hidden() * 4,
                      spec.bucket_bytes())
          .size()));
  result.set_path(trainer.Describe());
  result.set_tflops(fig->tflops_per_rank());
  result.set_status(v1::OK);
  return result;
}

// The kind: one trainer per rung and back end, on the case's ranks.
class TrainMlpKind : public BenchmarkKind {
 public:
  bool RunsOnCaseRanks() const override { return true; }

  v1::Result Run(const v1::Case& c, CaseEnv& env) override {
    auto got = trainers_.For(
        c, env,
        [](BackendProvider& p, const RankResources& r) {
          return p.NewTrainer(r);
        },
        false);
    if (got.instead) return *got.instead;
    return RunTrain(c, *got.object, *got.control);
  }

 private:
  GroupObjects<Trainer> trainers_;
};

RINGMASTER_REGISTER_KIND("train", TrainMlpKind);

}  // namespace

v1::Result RunTrain(const v1::Case& c, Trainer& trainer, Control& control) {
  const auto start = std::chrono::steady_clock::now();
  v1::Result r = RunTrainInner(c, trainer, control);
  if (absl::Status d = trainer.Drain(); !d.ok() && r.status() == v1::OK) {
    r.set_status(v1::FAILED);
    r.mutable_failure()->set_reason(v1::BACKEND_ERROR);
    r.mutable_failure()->set_rank(control.rank());
    r.mutable_failure()->set_detail(std::string(d.message()));
  }
  if (r.status() == v1::OK) {
    // Gradients that underflowed (float16 without a large enough loss
    // scale) make a step that multiplies zeros: cheaper than training.
    absl::StatusOr<double> zeros = c.train().inference()
                                       ? absl::StatusOr<double>(-1.0)
                                       : trainer.GradientZeroFraction();
    r.mutable_train()->set_grad_zero_fraction(zeros.ok() ? *zeros : -1.0);
  }
  r.set_case_wall_s(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count());
  return r;
}

}  // namespace ringmaster
