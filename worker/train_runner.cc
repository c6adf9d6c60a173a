#include "worker/train_runner.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <vector>

#include "absl/strings/str_format.h"
#include "core/progress.h"
#include "core/stats.h"
#include "core/training.h"
#include "worker/bench_runner.h"

namespace ringmaster {
namespace {

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
  const int64_t global = batch * n;
  v1::TrainFigures* fig = result.mutable_train();
  fig->set_loss_check(-1);

  auto global_loss = [&](double local) -> absl::StatusOr<double> {
    auto all = control.AllGather(local);
    if (!all.ok()) return all.status();
    double sum = 0;
    for (double x : *all) sum += x;
    return sum / n;
  };

  // Numerical check: check_steps steps, the global loss after them against
  // float64 on the whole global batch (what one rank with n x the batch
  // computes).
  if (spec.check_steps() > 0) {
    if (!AllRanksOk(trainer.Prepare(c, batch, rank * batch), control, &result))
      return result;
    double loss = 0;
    for (int s = 0; s <= spec.check_steps(); ++s) {
      auto t = trainer.Step();
      if (!AllRanksOk(t.status(), control, &result)) return result;
      auto g = global_loss(t->loss);
      if (!AllRanksOk(g.status(), control, &result)) return result;
      loss = *g;  // the loss of step s's forward, after s updates
    }
    MlpShape shape{spec.layers(), spec.hidden(), global};
    // Inference never updates the weights: every forward's loss is the first.
    const int ref_steps = spec.inference() ? 1 : spec.check_steps() + 1;
    std::vector<double> ref =
        rank == 0
            ? ReferenceLosses(shape, spec.optimizer(), spec.lr(), ref_steps)
            : std::vector<double>(ref_steps, 0.0);
    auto ref_last =
        control.Max(ref.back());  // rank 0's value (others 0, losses > 0)
    if (!AllRanksOk(ref_last.status(), control, &result)) return result;
    const double rel =
        std::abs(loss - *ref_last) / std::max(1e-30, std::abs(*ref_last));
    fig->set_loss_check(loss);
    fig->set_loss_reference(*ref_last);
    fig->set_loss_rel_error(rel);
    const double tol = c.dtype() == v1::FLOAT32 ? 1e-4 : 2e-2;
    if (!(rel <= tol)) {
      result.set_status(v1::FAILED);
      result.mutable_failure()->set_reason(v1::DATA_MISMATCH);
      result.mutable_failure()->set_rank(-1);
      result.mutable_failure()->set_detail(
          absl::StrFormat("loss after %d steps %.9g, float64 reference %.9g: "
                          "relative error %.3g > %.0e",
                          spec.check_steps(), loss, *ref_last, rel, tol));
      return result;
    }
  }

  // Timed run from fresh weights.
  if (!AllRanksOk(trainer.Prepare(c, batch, rank * batch), control, &result))
    return result;
  const int warmup = std::max(1, c.timing().warmup_iters());
  const int steps = std::max(1, spec.steps());
  std::vector<double> step_s, compute_s, exposed_s, skew_s, comm_s, mine;
  double loss_first = 0, loss_last = 0;
  for (int s = 0; s < warmup + steps; ++s) {
    auto t = trainer.Step();
    CountOp();
    if (!AllRanksOk(t.status(), control, &result)) return result;
    auto g = global_loss(t->loss);
    auto steps_all = control.AllGather(t->step_s);
    auto bwd_all = control.AllGather(t->backward_end_at);
    if (!AllRanksOk(
            !g.ok() ? g.status()
                    : (!steps_all.ok() ? steps_all.status() : bwd_all.status()),
            control, &result)) {
      return result;
    }
    if (s == 0) loss_first = *g;
    loss_last = *g;
    if (s < warmup) continue;
    // The slowest rank's step, and its breakdown.
    const int slow = static_cast<int>(
        std::max_element(steps_all->begin(), steps_all->end()) -
        steps_all->begin());
    const double last_gradient =
        *std::max_element(bwd_all->begin(), bwd_all->end());
    auto pick = [&](double v) -> absl::StatusOr<double> {
      auto all = control.AllGather(v);
      if (!all.ok()) return all.status();
      return (*all)[slow];
    };
    double my_skew = last_gradient - t->backward_end_at;
    double my_exposed =
        t->comm_in_backward_s + std::max(0.0, t->comm_done_at - last_gradient);
    if (t->pipelined) {
      // The waits are the whole non-compute time: a peer that finished
      // backward later explains part of them.
      my_skew = std::clamp(my_skew, 0.0, t->comm_in_backward_s);
      my_exposed = t->comm_in_backward_s - my_skew;
    }
    auto compute = pick(t->compute_s);
    auto skew = pick(my_skew);
    auto exposed = pick(my_exposed);
    auto busy = pick(t->comm_busy_s);
    for (const auto* v : {&compute, &skew, &exposed, &busy}) {
      if (!AllRanksOk(v->status(), control, &result)) return result;
    }
    step_s.push_back((*steps_all)[slow]);
    compute_s.push_back(*compute);
    skew_s.push_back(*skew);
    exposed_s.push_back(*exposed);
    comm_s.push_back(*busy);
  }
  // The breakdown is the median step's (independent medians of the parts
  // need not add up to the median step).
  std::vector<size_t> idx(step_s.size());
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = i;
  std::sort(idx.begin(), idx.end(),
            [&](size_t a, size_t b) { return step_s[a] < step_s[b]; });
  const size_t mid = idx[idx.size() / 2];
  SampleSummary summary = Summarize(step_s);
  *result.mutable_stats() = ToProto(summary, 1, warmup, false);
  result.mutable_stats()->set_p99_s(Quantile(step_s, 0.99));
  StoreSamples(step_s, result.mutable_stats());
  result.mutable_stats()->set_stop_reason("steps");
  const double step = summary.median;
  fig->set_compute_s(compute_s[mid]);
  fig->set_exposed_comm_s(exposed_s[mid]);
  fig->set_skew_s(skew_s[mid]);
  fig->set_comm_s(comm_s[mid]);
  fig->set_step_of_breakdown_s(step_s[mid]);
  fig->set_samples_per_s(step > 0 ? global / step : 0);
  const MlpShape local{spec.layers(), spec.hidden(), batch};
  const double flops =
      spec.inference() ? ForwardFlops(local) : TrainStepFlops(local);
  fig->set_tflops_per_rank(step > 0 ? flops / step / 1e12 : 0);
  fig->set_loss_first(loss_first);
  fig->set_loss_last(loss_last);
  fig->set_buckets(static_cast<int>(
      GradientBuckets(spec.layers(), spec.hidden() * spec.hidden() * 4,
                      spec.bucket_bytes())
          .size()));
  result.set_path(trainer.Describe());
  result.set_tflops(fig->tflops_per_rank());
  result.set_status(v1::OK);
  return result;
}

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
