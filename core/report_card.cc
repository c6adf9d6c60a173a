#include "core/report_card.h"

#include <algorithm>
#include <map>
#include <optional>
#include <string>

#include "absl/strings/str_format.h"
#include "core/datasheet.h"
#include "core/names.h"
#include "core/topology.h"

namespace ringmaster {
namespace {

// The share of its datasheet figure below which a figure is flagged: well
// under what a healthy part of that model measures (dense GEMMs reach
// 70-85% of the datasheet on Hopper, HBM copies about 90%, pinned PCIe
// copies 85-90% of the link).
constexpr double kExpectedGemm = 0.6;
constexpr double kExpectedMemory = 0.75;
constexpr double kExpectedPcie = 0.7;

struct Row {
  std::string figure, unit;
  double measured = 0;
  double datasheet = 0;  // 0: none to compare with
  double expected = 0;   // the share below which the row is flagged
  std::string note;
  const v1::Result* result = nullptr;
};

std::string DeviceOf(const std::vector<v1::Result>& results) {
  for (const v1::Result& r : results)
    for (const v1::DeviceTelemetry& t : r.telemetry())
      if (t.rank() == 0 && t.device().rfind("GPU ", 0) == 0) return t.device();
  return "";
}

std::string Num(double v) {
  return v >= 100 ? absl::StrFormat("%.0f", v) : absl::StrFormat("%.3g", v);
}

// The best OK result of `bench` accepted by `keep` (by `value`).
template <typename Keep, typename Value>
const v1::Result* Best(const std::vector<v1::Result>& results, v1::Bench bench,
                       Keep keep, Value value) {
  const v1::Result* best = nullptr;
  for (const v1::Result& r : results) {
    if (r.status() != v1::OK || r.case_().bench() != bench || !keep(r))
      continue;
    if (best == nullptr || value(r) > value(*best)) best = &r;
  }
  return best;
}

void AddRows(const std::vector<v1::Result>& results, const v1::Datasheet* d,
             std::vector<Row>* rows) {
  for (v1::DataType t : {v1::FLOAT32, v1::TFLOAT32, v1::BFLOAT16, v1::FLOAT16,
                         v1::FLOAT8_E4M3}) {
    const v1::Result* r = Best(
        results, v1::BENCH_GEMM,
        [t](const v1::Result& x) { return x.case_().dtype() == t; },
        [](const v1::Result& x) { return x.tflops(); });
    if (r == nullptr) continue;
    rows->push_back(
        {absl::StrFormat("dense GEMM %s", std::string(DataTypeName(t))),
         "TFLOP/s", r->tflops(), d != nullptr ? DatasheetPeakTflops(*d, t) : 0,
         kExpectedGemm, "", r});
  }
  const double hbm = d != nullptr ? d->gpu().hbm_gbps() : 0;
  if (const v1::Result* r = Best(
          results, v1::BENCH_LOCAL_COPY,
          [](const v1::Result& x) { return x.path() == "hbm"; },
          [](const v1::Result& x) { return x.bandwidth_gbps(); })) {
    rows->push_back({"memory copy (read + write)", "GB/s",
                     2 * r->bandwidth_gbps(), hbm, kExpectedMemory,
                     "2 x bytes copied / s", r});
  }
  if (const v1::Result* r = Best(
          results, v1::BENCH_TRIAD,
          [](const v1::Result& x) { return x.path() == "hbm"; },
          [](const v1::Result& x) { return x.bandwidth_gbps(); })) {
    rows->push_back({"memory triad", "GB/s", r->bandwidth_gbps(), hbm,
                     kExpectedMemory, "STREAM's count: 2 reads + 1 write", r});
  }
  const double pcie =
      d != nullptr ? PcieGbps(d->pcie().generation(), d->pcie().width()) : 0;
  for (v1::CopyDirection dir : {v1::TO_DEVICE, v1::TO_HOST}) {
    for (v1::HostMemory mem : {v1::PINNED, v1::PAGEABLE}) {
      const v1::Result* r = Best(
          results, v1::BENCH_HOST_DEVICE,
          [dir, mem](const v1::Result& x) {
            const v1::Case& c = x.case_();
            return c.direction() == dir && c.host_memory() == mem &&
                   !c.bidirectional() && c.pattern() != v1::ALL_RANKS;
          },
          [](const v1::Result& x) { return x.bandwidth_gbps(); });
      if (r == nullptr) continue;
      // Pageable copies go through a staging buffer at the host's pace:
      // no flag.
      rows->push_back(
          {absl::StrFormat(
               "%s, %s memory",
               dir == v1::TO_DEVICE ? "host -> device" : "device -> host",
               mem == v1::PINNED ? "pinned" : "pageable"),
           "GB/s", r->bandwidth_gbps(), pcie,
           mem == v1::PINNED ? kExpectedPcie : 0, r->ceiling_source(), r});
    }
  }
  if (const v1::Result* r = Best(
          results, v1::BENCH_LATENCY,
          [](const v1::Result& x) {
            return x.case_().latency_path() == v1::HOST &&
                   x.case_().method() == v1::SM;
          },
          [](const v1::Result& x) { return -x.latency_ns(); })) {
    rows->push_back({"host memory load latency", "ns", r->latency_ns(), 0, 0,
                     "a GPU thread's dependent loads from host memory", r});
  }
  if (const v1::Result* r = Best(
          results, v1::BENCH_LATENCY,
          [](const v1::Result& x) {
            return x.case_().latency_path() == v1::HOST &&
                   x.case_().method() == v1::COPY_ENGINE;
          },
          [](const v1::Result& x) { return -x.latency_ns(); })) {
    rows->push_back({"small copy to host, issue to done", "us",
                     r->latency_ns() / 1e3, 0, 0, "8-byte cudaMemcpyAsync", r});
  }
  if (const v1::Result* r = Best(
          results, v1::BENCH_TRANSFORMER,
          [](const v1::Result&) { return true; },
          [](const v1::Result& x) {
            return x.transformer().tokens_per_s_per_rank();
          })) {
    const v1::TransformerFigures& t = r->transformer();
    rows->push_back(
        {absl::StrFormat("training step, %s", r->case_().spec_name()),
         "TFLOP/s", t.model_tflops_per_rank(),
         d != nullptr ? DatasheetPeakTflops(*d, r->case_().dtype()) : 0, 0,
         absl::StrFormat("%.0f tokens/s; MFU = the share",
                         t.tokens_per_s_per_rank()),
         r});
  }
  // Decode: the smallest batch's time per token and read rate, and the
  // batch with the most tokens/s.
  const v1::Result* small = nullptr;
  const v1::Result* most = nullptr;
  for (const v1::Result& r : results) {
    if (r.status() != v1::OK || r.case_().bench() != v1::BENCH_INFERENCE)
      continue;
    const int64_t b = r.case_().transformer().micro_batch();
    if (small == nullptr || b < small->case_().transformer().micro_batch())
      small = &r;
    if (most == nullptr || r.serve().tokens_per_s_per_rank() >
                               most->serve().tokens_per_s_per_rank())
      most = &r;
  }
  if (small != nullptr) {
    rows->push_back(
        {absl::StrFormat("decode read rate, batch %d",
                         small->case_().transformer().micro_batch()),
         "GB/s", small->serve().decode_read_gbps(), hbm, 0,
         absl::StrFormat("time per output token %.3f ms",
                         small->serve().tpot_p50_s() * 1e3),
         small});
  }
  if (most != nullptr) {
    rows->push_back(
        {absl::StrFormat("decode throughput, batch %d",
                         most->case_().transformer().micro_batch()),
         "tokens/s", most->serve().tokens_per_s_per_rank(), 0, 0,
         absl::StrFormat("TPOT p99 %.3f ms", most->serve().tpot_p99_s() * 1e3),
         most});
  }
}

// Clocks, power and slowdowns over the results' rank-0 samples.
std::string TelemetryLine(const std::vector<v1::Result>& results,
                          const v1::Datasheet* d) {
  double clock_sum = 0, clock_min = 0, clock_max = 0, power_max = 0,
         limit_min = 0, limit_max = 0;
  int clocks = 0, throttled = 0, measured = 0;
  std::map<std::string, int> reasons;
  for (const v1::Result& r : results) {
    if (r.status() != v1::OK) continue;
    ++measured;
    if (r.throttled()) {
      ++throttled;
      ++reasons[r.throttle_detail()];
    }
    for (const v1::DeviceTelemetry& t : r.telemetry()) {
      if (t.rank() != 0) continue;
      for (const v1::TelemetrySample& s : t.samples()) {
        if (s.has_sm_clock_mhz()) {
          const double c = s.sm_clock_mhz();
          clock_min = clocks == 0 ? c : std::min(clock_min, c);
          clock_max = std::max(clock_max, c);
          clock_sum += c;
          ++clocks;
        }
        if (s.has_power_w()) power_max = std::max(power_max, s.power_w());
        if (s.has_power_limit_w()) {
          limit_min = limit_max == 0 ? s.power_limit_w()
                                     : std::min(limit_min, s.power_limit_w());
          limit_max = std::max(limit_max, s.power_limit_w());
        }
      }
    }
  }
  std::string line = "# telemetry:";
  if (clocks > 0) {
    line += absl::StrFormat(" SM clock %.0f-%.0f MHz (mean %.0f);", clock_min,
                            clock_max, clock_sum / clocks);
  }
  if (power_max > 0) {
    line += absl::StrFormat(" power up to %.0f W", power_max);
    if (limit_max > 0) {
      line += limit_min < limit_max
                  ? absl::StrFormat(" under a power cap of %.0f-%.0f W",
                                    limit_min, limit_max)
                  : absl::StrFormat(" under a power cap of %.0f W", limit_max);
    }
    if (d != nullptr)
      line += absl::StrFormat(" (datasheet board power %.0f W)", d->tdp_w());
    line += ";";
  }
  if (throttled == 0) {
    line += " no clock slowdown seen";
  } else {
    line += absl::StrFormat(" clocks slowed during %d of %d results", throttled,
                            measured);
    std::string why;
    for (const auto& [reason, n] : reasons) {
      if (reason.empty()) continue;
      why += (why.empty() ? " (" : "; ") + reason;
    }
    if (!why.empty()) line += why + ")";
  }
  return line + "\n";
}

}  // namespace

std::string RenderServerCard(const std::vector<v1::Result>& results) {
  const std::string device = DeviceOf(results);
  if (device.empty()) return "";
  const v1::Datasheet* d = FindDatasheet(device);
  std::vector<Row> rows;
  AddRows(results, d, &rows);
  std::string out = "# server card: " + device + "\n";
  if (d != nullptr) {
    out += absl::StrFormat(
        "# datasheet: %s (%s; %.0f GiB at %.0f GB/s, PCIe gen %d x%d)\n",
        d->gpu().model(), d->source(), d->gpu().hbm_gib(), d->gpu().hbm_gbps(),
        d->pcie().generation(), d->pcie().width());
  } else {
    out +=
        "# datasheet: no datasheet entry for this GPU: figures without a "
        "share of it\n";
  }
  out += absl::StrFormat("#%-40s %12s %12s %7s  %s\n", "figure", "measured",
                         "datasheet", "share", "note");
  std::vector<std::string> flags;
  for (const Row& row : rows) {
    const bool compared = row.datasheet > 0;
    const double share = compared ? row.measured / row.datasheet : 0;
    out += absl::StrFormat(
        " %-40s %12s %12s %7s  %s\n",
        absl::StrFormat("%s (%s)", row.figure, row.unit), Num(row.measured),
        compared ? Num(row.datasheet) : "-",
        compared ? absl::StrFormat("%.1f%%", 100 * share) : "-", row.note);
    if (compared && row.expected > 0 && share < row.expected) {
      std::string why =
          row.result != nullptr && row.result->throttled()
              ? "the clocks slowed while it ran (" +
                    row.result->throttle_detail() + ")"
              : "no clock slowdown was seen: another load on the GPU, a "
                "narrower link or a part below its datasheet";
      flags.push_back(absl::StrFormat(
          "# LOW %s: %.1f%% of the datasheet figure, below the %.0f%% a "
          "healthy %s reaches; likely cause: %s\n",
          row.figure, 100 * share, 100 * row.expected,
          d != nullptr ? d->gpu().model() : "GPU", why));
    }
  }
  out += TelemetryLine(results, d);
  for (const std::string& f : flags) out += f;
  return out;
}

}  // namespace ringmaster
