// The one measurement loop every benchmark kind runs through: warm-up,
// operations per sample, batches of samples, a pluggable stopping rule,
// and agreement across ranks on failures, so that ranks never diverge.
//
// Every rank calls the same functions with the same arguments in the same
// order; each decision that changes how many operations run is taken from
// values every rank shares (through Control).
#ifndef RINGMASTER_WORKER_MEASURE_H_
#define RINGMASTER_WORKER_MEASURE_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "comm/control.h"
#include "core/stats.h"
#include "ringmaster/v1/plan.pb.h"
#include "ringmaster/v1/result.pb.h"

namespace ringmaster {

// How a rank's Unimplemented status is recorded when ranks agree on one.
enum class Unsupported {
  kSkipped,  // SKIPPED, reason REJECTED: the case cannot run here
  kFailed,   // FAILED, reason REJECTED: a configuration the kind refuses
};

// Agrees across the ranks of `control` on a step that may fail: true when
// every rank's `local` is OK. Otherwise fills `result` from the first
// failing rank (its rank and message; Unimplemented as `unsupported` says,
// anything else FAILED with BACKEND_ERROR) and returns false. Collective.
bool AllRanksOk(const absl::Status& local, Control& control, v1::Result* result,
                Unsupported unsupported = Unsupported::kSkipped);

// Every rank's count of wrong elements, summed, and the first rank with any
// (-1: none).
struct WrongCount {
  int64_t total = 0;
  int first_bad = -1;
};
WrongCount CountWrong(const std::vector<double>& per_rank);

// After ranks agreed that a step failed somewhere (an infinite or failed
// shared value): records the first failing rank's `local` status in
// `result` (AllRanksOk), or a generic failure if no rank has one.
// Collective.
void RecordFailure(const absl::Status& local, Control& control,
                   v1::Result* result,
                   Unsupported unsupported = Unsupported::kSkipped);

// What a kind times, seen by the loop. Every call is collective and
// returns agreed values (the slowest rank's), or nullopt once any rank
// failed, after the sampler has recorded the failure in its result.
class Sampler {
 public:
  virtual ~Sampler() = default;
  // Runs `ops` operations: the seconds they took.
  virtual std::optional<double> WarmUp(int ops) = 0;
  // Once, after the operations per sample are known and before the first
  // sample (CUDA graphs are captured and replayed here): the operations
  // it ran.
  virtual std::optional<int> BeforeSampling(int iters) { return 0; }
  // `windows` samples of `iters` operations, back to back: seconds per
  // operation, one value per sample (per operation when the loop's
  // `per_op` is set).
  virtual std::optional<std::vector<double>> Sample(int iters, int windows) = 0;
};

// A training kind's numerical check: `loss` (agreed by every rank) against
// a reference computed on rank 0 alone (`rank0_reference`; the others pass
// 0, losses are positive). Fills `check` (loss, reference, relative
// error); beyond `tolerance` the result FAILS with DATA_MISMATCH, its
// detail `what` followed by the figures. False when the check failed or a
// rank failed (the result says which). Collective.
struct LossCheck {
  double loss = 0, reference = 0, rel_error = 0;
};
bool LossWithinTolerance(double loss, double rank0_reference, double tolerance,
                         const std::string& what, Control& control,
                         LossCheck* check, v1::Result* result);

// A sampler whose operation is one step of something that reports its
// parts (training steps): `StepParts` has a `step` (seconds). Each sample
// is one step; every sampled step's parts are kept.
template <typename StepParts>
class StepSampler : public Sampler {
 public:
  std::optional<double> WarmUp(int ops) override {
    double total = 0;
    for (int s = 0; s < ops; ++s) {
      std::optional<StepParts> p = Step();
      if (!p) return std::nullopt;
      total += p->step;
    }
    return total;
  }
  std::optional<std::vector<double>> Sample(int /*iters*/,
                                            int windows) override {
    std::vector<double> values;
    for (int w = 0; w < windows; ++w) {
      std::optional<StepParts> p = Step();
      if (!p) return std::nullopt;
      parts_.push_back(*p);
      values.push_back(p->step);
    }
    return values;
  }
  const std::vector<StepParts>& parts() const { return parts_; }

 protected:
  // One step, agreed over the ranks; nullopt (the failure recorded) when
  // a rank failed.
  virtual std::optional<StepParts> Step() = 0;

 private:
  std::vector<StepParts> parts_;
};

struct LoopOptions {
  bool per_op = false;  // each operation is a sample (batches of one)
  int max_batch = 50;   // samples taken between two stopping checks
};

struct Measurement {
  std::vector<double> samples;  // agreed seconds per operation
  int iters_per_sample = 1;
  int warmup_ops = 0;
  double sampled_s = 0;  // summed duration of the samples
  std::string stop_reason;
};

// Warm-up (the first operation alone, it pays for lazy set-up; then up to
// warmup_iters in all, within warmup_max_time_s when that is set), then
// operations per sample (fixed_iters_per_sample, or sized by `rule` from
// the warm-up's time per operation; at most 100 per-op events), then
// batches of samples until `rule` stops. nullopt when the sampler failed.
std::optional<Measurement> Measure(const v1::Timing& timing,
                                   const StoppingCriterion& rule,
                                   Sampler& sampler,
                                   const LoopOptions& options = {});

// Fills result->stats from a measurement: summary, p99, stored samples,
// the stopping reason and whether `rule`'s target was met.
void FillStats(const Measurement& m, const v1::Timing& timing,
               const StoppingCriterion& rule, v1::Result* result);

}  // namespace ringmaster

#endif  // RINGMASTER_WORKER_MEASURE_H_
