#include "worker/kinds/collective.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <vector>

#include "absl/strings/str_format.h"
#include "backends/collective_layout.h"
#include "core/metrics.h"
#include "core/names.h"
#include "core/stats.h"
#include "spdlog/spdlog.h"
#include "worker/kinds/kind.h"
#include "worker/measure.h"

namespace ringmaster {
namespace {

// A failed operation on any rank turns the shared value into +inf, which
// every rank sees through Max and stops on.
constexpr double kFailed = std::numeric_limits<double>::infinity();
// Adaptive windows shorter than this get one extra, discarded first window.
constexpr double kSettleBelowS = 5e-3;

// The collective's operations as the measurement loop sees them.
class CollectiveSampler : public Sampler {
 public:
  CollectiveSampler(const v1::Case& c, CollectiveBackend& backend,
                    Control& control, v1::Result* result)
      : c_(c), backend_(backend), control_(control), result_(result) {}

  std::optional<double> WarmUp(int ops) override {
    auto t = backend_.TimeOps(ops);
    if (!t.ok()) Note(t.status());
    auto agreed = Agreed(t.ok() ? *t : kFailed);
    if (agreed) op_estimate_ = *agreed / ops;
    return agreed;
  }

  std::optional<int> BeforeSampling(int iters) override {
    if (!AllRanksOk(control_.Barrier(), control_, result_,
                    Unsupported::kFailed)) {
      return std::nullopt;
    }
    if (!graph()) return 0;
    // Capture once and replay once before measuring.
    auto w = backend_.TimeWindows(iters, 1, true);
    if (!w.ok()) Note(w.status());
    if (!Agreed(w.ok() ? (*w)[0] : kFailed)) return std::nullopt;
    return iters;
  }

  std::optional<std::vector<double>> Sample(int iters, int windows) override {
    std::vector<double> values;
    if (per_op()) {
      auto each = backend_.TimeEachOp(iters);
      if (!each.ok()) Note(each.status());
      values = each.ok() ? *each : std::vector<double>(iters, kFailed);
    } else {
      // Ranks leave the previous batch's reduction at slightly different
      // times. In adaptive mode, when a window is short enough for that
      // skew to matter, one extra first window absorbs it and is
      // discarded. Fixed mode times exactly what it was asked to
      // (nccl-tests' method).
      const bool settle = c_.timing().fixed_iters_per_sample() <= 0 &&
                          op_estimate_ * iters < kSettleBelowS;
      if (absl::Status b = control_.Barrier(); !b.ok()) Note(b);
      auto w = backend_.TimeWindows(iters, windows + (settle ? 1 : 0), graph());
      if (!w.ok()) Note(w.status());
      values =
          w.ok() ? std::vector<double>(w->begin() + (settle ? 1 : 0), w->end())
                 : std::vector<double>(windows, kFailed);
      for (double& v : values) v /= iters;
    }
    mine_.insert(mine_.end(), values.begin(), values.end());
    absl::Status ms = control_.MaxVector(&values);
    if (!ms.ok() || std::isinf(values[0])) {
      RecordFailure(ms.ok() ? local_ : ms, control_, result_,
                    Unsupported::kFailed);
      return std::nullopt;
    }
    return values;
  }

  bool per_op() const { return c_.timing().mode() == v1::PER_OP; }
  bool graph() const { return c_.timing().mode() == v1::GRAPH; }
  // This rank's own seconds per operation, sample by sample.
  const std::vector<double>& mine() const { return mine_; }

 private:
  void Note(const absl::Status& s) {
    if (!s.ok() && local_.ok()) local_ = s;
  }
  std::optional<double> Agreed(double v) {
    auto m = control_.Max(v);
    if (!m.ok() || std::isinf(*m)) {
      RecordFailure(m.ok() ? local_ : m.status(), control_, result_,
                    Unsupported::kFailed);
      return std::nullopt;
    }
    return *m;
  }

  const v1::Case& c_;
  CollectiveBackend& backend_;
  Control& control_;
  v1::Result* result_;
  absl::Status local_ = absl::OkStatus();
  double op_estimate_ = 0;
  std::vector<double> mine_;
};

// Verifies the collective's output on every rank; false (result filled)
// on a failure or a wrong element.
bool Verified(CollectiveBackend& backend, Control& control,
              v1::Result* result) {
  auto wrong = backend.Verify();
  if (!AllRanksOk(wrong.status(), control, result, Unsupported::kFailed))
    return false;
  auto per_rank = control.AllGather(static_cast<double>(*wrong));
  if (!AllRanksOk(per_rank.status(), control, result, Unsupported::kFailed))
    return false;
  const auto [total, first_bad] = CountWrong(*per_rank);
  result->set_wrong_elements(total);
  if (total == 0) return true;
  result->set_status(v1::FAILED);
  result->mutable_failure()->set_reason(v1::DATA_MISMATCH);
  result->mutable_failure()->set_rank(first_bad);
  result->mutable_failure()->set_detail(absl::StrFormat(
      "%d wrong elements (first on rank %d)", total, first_bad));
  return false;
}

v1::Result RunCaseInner(const v1::Case& c, CollectiveBackend& backend,
                        Control& control) {
  v1::Result result;
  *result.mutable_case_() = c;
  result.set_nranks(control.size());
  const v1::TimingMode mode = c.timing().mode() == v1::TIMING_MODE_UNSPECIFIED
                                  ? v1::PIPELINED
                                  : c.timing().mode();
  result.set_timing_mode(mode);
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
  // A size the transport cannot carry (OutOfRange: MPI's int counts) is
  // skipped with the figure; other refusals are the configuration's
  // failure. Every rank prepares the same configuration, so they agree on
  // which it is.
  absl::Status prepared = backend.Prepare(config);
  const bool too_large = absl::IsOutOfRange(prepared);
  if (too_large) prepared = absl::UnimplementedError(prepared.message());
  if (!AllRanksOk(prepared, control, &result,
                  too_large ? Unsupported::kSkipped : Unsupported::kFailed)) {
    return result;
  }
  if (c.verify() && !Verified(backend, control, &result)) return result;

  const v1::Case& timed = result.case_();
  CollectiveSampler sampler(timed, backend, control, &result);
  StoppingRule rule(timed.timing());
  LoopOptions options;
  options.per_op = sampler.per_op();
  auto m = Measure(timed.timing(), rule, sampler, options);
  if (!m) return result;
  FillStats(*m, timed.timing(), rule, &result);
  auto medians = control.AllGather(Summarize(sampler.mine()).median);
  if (medians.ok()) {
    for (double v : *medians) result.add_rank_median_s(v);
    // Straggler: the slowest rank's median against the median rank.
    const double mid = Quantile(*medians, 0.5);
    const int slowest = static_cast<int>(
        std::max_element(medians->begin(), medians->end()) - medians->begin());
    result.set_straggler_rank(slowest);
    result.set_straggler_ratio(mid > 0 ? (*medians)[slowest] / mid : 0);
  }
  result.set_status(v1::OK);
  FillBandwidth(&result);
  return result;
}

// The kind: the launch's collective backend for cases over every rank,
// and one split from it per smaller rung.
class CollectiveKind : public BenchmarkKind {
 public:
  bool RunsOnCaseRanks() const override { return true; }

  absl::Status BeforeCase(const v1::Case& c, CaseEnv& env) override {
    const int n = c.nranks() > 0 ? c.nranks() : env.world_size();
    if (n >= env.world_size() || rungs_.count(n) > 0) return absl::OkStatus();
    auto group = env.Group(n);
    if (!group.ok()) return group.status();
    Rung& rung = rungs_[n];
    auto split = env.world_collectives().Split(group->member(), group->comm,
                                               &rung.setup_s);
    if (!split.ok()) return split.status();
    rung.backend = std::move(*split);
    return absl::OkStatus();
  }

  v1::Result Run(const v1::Case& c, CaseEnv& env) override {
    const int n = c.nranks() > 0 ? c.nranks() : env.world_size();
    v1::Result result;
    double setup_s = 0;
    if (n >= env.world_size()) {
      CollectiveBackend& world = env.world_collectives();
      result = RunCase(c, world, env.world_control());
      setup_s = world.CommSetupSeconds();
      if (!world_logged_ && setup_s > 0) {
        world_logged_ = true;
        if (env.rank() == 0 && env.launch_provider().kind() == v1::BACKEND_CUDA)
          spdlog::info("NCCL communicator ready in {:.3f} s", setup_s);
      }
    } else {
      auto group = env.Group(n);
      Rung& rung = rungs_[n];
      if (!group.ok() || !rung.backend) {
        return FailedResult(c, n,
                            group.ok() ? absl::InternalError("no backend for "
                                                             "this rung")
                                       : group.status());
      }
      result = RunCase(c, *rung.backend, *group->control);
      setup_s = rung.setup_s;
    }
    result.set_comm_setup_s(setup_s);
    return result;
  }

 private:
  struct Rung {
    std::unique_ptr<CollectiveBackend> backend;  // members only
    double setup_s = 0;
  };
  std::map<int, Rung> rungs_;
  bool world_logged_ = false;
};

RINGMASTER_REGISTER_KIND("collective", CollectiveKind);

}  // namespace

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
