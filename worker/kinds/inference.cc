// bench: inference: LLM serving on tp ranks (core/transformer.h's model;
// the back end's InferenceEngine). A case first checks its numerics (a
// prefill and every decode step of one request batch against the float64
// reference's full forward pass over the same tokens, on rank 0), then
// times `repeats` requests after one warm-up: the prefill (time to first
// token) and each decode step (time per output token, and its time on the
// device alone), and reports the tokens/s they give (docs/metrics.md).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "backends/inference_engine.h"
#include "core/names.h"
#include "core/stats.h"
#include "core/transformer.h"
#include "worker/kinds/kind.h"
#include "worker/measure.h"

namespace ringmaster {
namespace {

// The float64 reference runs on one core: past this many FLOPs the check
// is left out (the result says so with check_rel_error -1).
constexpr double kMaxReferenceFlops = 2e10;

// max |got - want| / max |want| of decode's outputs (rank 0's rows: prefill
// [batch * prompt x h], then each step's [batch x h]) against the
// reference's [batch x capacity x h].
double CheckError(const v1::Case& c, const std::vector<float>& prefill,
                  const std::vector<std::vector<float>>& steps) {
  const v1::TransformerSpec& t = c.transformer();
  const int64_t h = t.hidden(), batch = t.micro_batch(), cap = t.seq();
  const int64_t prompt = c.serve().prompt();
  ReferenceTransformer<double> ref(ShapeOf(t), t.layers(), batch, cap);
  ref.Loss();
  const std::vector<double>& want = ref.Output();
  double err = 0, scale = 0;
  auto compare = [&](double got, double w) {
    err = std::max(err, std::abs(got - w));
    scale = std::max(scale, std::abs(w));
  };
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t i = 0; i < prompt * h; ++i)
      compare(prefill[b * prompt * h + i], want[b * cap * h + i]);
    for (size_t s = 0; s < steps.size(); ++s)
      for (int64_t j = 0; j < h; ++j)
        compare(steps[s][b * h + j],
                want[(b * cap + prompt + static_cast<int64_t>(s)) * h + j]);
  }
  return scale > 0 ? err / scale : err;
}

// The largest value over the ranks (the slowest rank's time).
absl::StatusOr<double> Slowest(double mine, Control& control) {
  auto all = control.AllGather(mine);
  if (!all.ok()) return all.status();
  return *std::max_element(all->begin(), all->end());
}

// The numerical check; false (result filled) when it fails.
bool OutputsMatchReference(const v1::Case& c, InferenceEngine& engine,
                           Control& control, v1::Result* result) {
  const v1::TransformerSpec& t = c.transformer();
  const double ref_flops =
      ForwardFlopsPerToken(ShapeOf(t), t.layers(), t.seq()) *
      static_cast<double>(t.micro_batch() * t.seq());
  if (ref_flops > kMaxReferenceFlops) return true;  // check stays -1
  std::vector<float> prefill;
  auto p = engine.Prefill(c.serve().prompt(), &prefill);
  if (!AllRanksOk(p.status(), control, result)) return false;
  std::vector<std::vector<float>> steps(c.serve().generate());
  for (auto& step : steps) {
    auto d = engine.Decode(&step);
    if (!AllRanksOk(d.status(), control, result)) return false;
  }
  const double err = control.rank() == 0 ? CheckError(c, prefill, steps) : 0.0;
  auto all = Slowest(err, control);
  if (!AllRanksOk(all.status(), control, result)) return false;
  const double worst = *all;
  result->mutable_serve()->set_check_rel_error(worst);
  const double tolerance = c.dtype() == v1::FLOAT32 ? 1e-4 : 3e-2;
  if (worst <= tolerance) return true;
  result->set_status(v1::FAILED);
  result->mutable_failure()->set_reason(v1::DATA_MISMATCH);
  result->mutable_failure()->set_detail(absl::StrFormat(
      "%s batch %d: decode's outputs differ from the float64 full forward "
      "pass by %.3g (max |error| / max |reference|; tolerance %.0e)",
      LayoutName(c), t.micro_batch(), worst, tolerance));
  return false;
}

v1::Result RunServe(const v1::Case& c, InferenceEngine& engine,
                    Control& control) {
  v1::Result result;
  *result.mutable_case_() = c;
  const int n = control.size();
  result.set_nranks(n);
  result.set_wrong_elements(-1);
  v1::ServeFigures* fig = result.mutable_serve();
  fig->set_check_rel_error(-1);
  if (!AllRanksOk(engine.Prepare(c), control, &result)) return result;
  if (!OutputsMatchReference(c, engine, control, &result)) return result;
  const v1::ServeSpec& s = c.serve();
  std::vector<double> ttft, tpot, device;  // device: the steps' device time
  bool device_timed = true;                // every timed step had one
  double decode_tp_s = 0;                  // the timed decode steps' tp sums
  for (int r = 0; r <= std::max(1, s.repeats()); ++r) {  // r 0: warm-up
    auto p = engine.Prefill(s.prompt(), nullptr);
    if (!AllRanksOk(p.status(), control, &result)) return result;
    if (r > 0) ttft.push_back(*p);
    const double tp_before = engine.TpSeconds();
    for (int64_t g = 0; g < s.generate(); ++g) {
      auto d = engine.Decode(nullptr);
      if (!AllRanksOk(d.status(), control, &result)) return result;
      if (r > 0) {
        tpot.push_back(*d);
        device.push_back(engine.LastDecodeDeviceSeconds());
        device_timed = device_timed && device.back() >= 0;
      }
    }
    if (r > 0) decode_tp_s += engine.TpSeconds() - tp_before;
  }
  const v1::TransformerSpec& t = c.transformer();
  const int64_t batch = t.micro_batch();
  const double tp_per_step = decode_tp_s / static_cast<double>(tpot.size());
  const SampleSummary summary = Summarize(tpot);
  double local[] = {Median(ttft),
                    Quantile(tpot, 0.5),
                    Quantile(tpot, 0.99),
                    summary.mean,
                    tp_per_step,
                    static_cast<double>(engine.HeldBytes()),
                    device_timed ? Quantile(device, 0.5) : 0.0,
                    device_timed ? Summarize(device).mean : 0.0,
                    device_timed ? 0.0 : 1.0};
  for (double& v : local) {
    auto slowest = Slowest(v, control);
    if (!AllRanksOk(slowest.status(), control, &result)) return result;
    v = *slowest;
  }
  const auto [ttft_s, p50, p99, mean, tp_s, held, dev_p50, dev_mean, untimed] =
      local;
  fig->set_ttft_s(ttft_s);
  fig->set_tpot_p50_s(p50);
  fig->set_tpot_p99_s(p99);
  fig->set_tpot_mean_s(mean);
  const double per_replica = mean > 0 ? static_cast<double>(batch) / mean : 0;
  fig->set_tokens_per_s_per_replica(per_replica);
  fig->set_tokens_per_s_per_rank(per_replica / n);
  fig->set_tp_share(mean > 0 ? std::min(1.0, tp_s / mean) : 0);
  const double prefill_flops =
      ForwardFlopsPerToken(ShapeOf(t), t.layers(), s.prompt()) *
      static_cast<double>(batch * s.prompt());
  fig->set_prefill_tflops_per_rank(
      ttft_s > 0 ? prefill_flops / ttft_s / n / 1e12 : 0);
  fig->set_memory_bytes(static_cast<int64_t>(held));
  // A decode step reads the weights and the cache at its length: on
  // average the decode steps' mean length.
  const double read =
      ServeBytes(t, DataTypeSize(c.dtype()),
                 static_cast<double>(s.prompt()) + (s.generate() + 1) / 2.0);
  fig->set_decode_read_bytes(static_cast<int64_t>(read));
  fig->set_decode_read_gbps(mean > 0 ? read / mean / 1e9 : 0);
  if (untimed == 0 && dev_mean > 0) {  // else left out: no device clock
    fig->set_tpot_device_p50_s(dev_p50);
    fig->set_tpot_device_mean_s(dev_mean);
    fig->set_decode_device_read_gbps(read / dev_mean / 1e9);
  }
  fig->set_slo_met(s.slo_tpot_p99_s() <= 0 || p99 <= s.slo_tpot_p99_s());
  *result.mutable_stats() = ToProto(summary, 1, 1, true);
  StoreSamples(tpot, result.mutable_stats());
  result.mutable_stats()->set_median_s(p50);
  result.mutable_stats()->set_p99_s(p99);
  result.set_path(engine.Describe());
  result.set_status(v1::OK);
  return result;
}

class InferenceKind : public BenchmarkKind {
 public:
  bool RunsOnCaseRanks() const override { return true; }

  v1::Result Run(const v1::Case& input, CaseEnv& env) override {
    const auto start = std::chrono::steady_clock::now();
    v1::Case c = input;
    auto got = engines_.For(
        c, env,
        [](BackendProvider& p, const RankResources& r) {
          return p.NewInferenceEngine(r);
        },
        true);
    if (got.instead) return *got.instead;
    if (c.dtype() == v1::DATA_TYPE_UNSPECIFIED)
      c.set_dtype(got.object->DefaultDtype());
    v1::Result r = RunServe(c, *got.object, *got.control);
    r.set_case_wall_s(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count());
    return r;
  }

 private:
  GroupObjects<InferenceEngine> engines_;
};

RINGMASTER_REGISTER_KIND("inference", InferenceKind);

}  // namespace
}  // namespace ringmaster
