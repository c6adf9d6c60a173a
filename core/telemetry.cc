#include "core/telemetry.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace ringmaster {
namespace {

// NVML clocks-event reason bits (nvmlClocksEventReason*, public API).
struct ReasonBit {
  uint64_t bit;
  const char* name;
  bool slowdown;
};
constexpr ReasonBit kReasons[] = {
    {0x1, "gpu_idle", false},
    {0x2, "applications_clocks_setting", false},
    {0x4, "sw_power_cap", true},
    {0x8, "hw_slowdown", true},
    {0x10, "sync_boost", false},
    {0x20, "sw_thermal_slowdown", true},
    {0x40, "hw_thermal_slowdown", true},
    {0x80, "hw_power_brake_slowdown", true},
    {0x100, "display_clock_setting", false},
};

class HostSource : public TelemetrySource {
 public:
  HostSource(std::string proc, std::string sys)
      : proc_(std::move(proc)), sys_(std::move(sys)) {}
  std::string device() const override { return "CPU (host)"; }
  void Read(v1::TelemetrySample* s) override {
    // Busy share of all CPUs since the previous read ("cpu" line of stat:
    // user nice system idle iowait irq softirq steal ...).
    std::ifstream stat(proc_ + "/stat");
    std::string line;
    if (std::getline(stat, line) && absl::StartsWith(line, "cpu ")) {
      std::vector<std::string> f =
          absl::StrSplit(line, ' ', absl::SkipWhitespace());
      uint64_t total = 0, idle = 0;
      for (size_t i = 1; i < f.size() && i <= 8; ++i) {
        uint64_t v = 0;
        if (!absl::SimpleAtoi(f[i], &v)) continue;
        total += v;
        if (i == 4 || i == 5) idle += v;  // idle + iowait
      }
      if (last_total_ > 0 && total > last_total_) {
        const double busy = 1.0 - static_cast<double>(idle - last_idle_) /
                                      static_cast<double>(total - last_total_);
        s->set_utilization_pct(100.0 * std::clamp(busy, 0.0, 1.0));
      }
      last_total_ = total;
      last_idle_ = idle;
    }
    std::ifstream info(proc_ + "/cpuinfo");
    double sum = 0;
    int n = 0;
    while (std::getline(info, line)) {
      if (!absl::StartsWith(line, "cpu MHz")) continue;
      double mhz = 0;
      auto colon = line.find(':');
      if (colon != std::string::npos &&
          absl::SimpleAtod(absl::StripAsciiWhitespace(line.substr(colon + 1)),
                           &mhz)) {
        sum += mhz;
        ++n;
      }
    }
    if (n > 0) s->set_sm_clock_mhz(sum / n);
    std::error_code ec;
    double hottest = -1;
    for (const auto& z :
         std::filesystem::directory_iterator(sys_ + "/class/thermal", ec)) {
      std::ifstream t(z.path() / "temp");
      double milli = 0;
      if (t >> milli) hottest = std::max(hottest, milli / 1000);
    }
    if (hottest > -1) s->set_temperature_c(hottest);
  }

 private:
  std::string proc_, sys_;
  uint64_t last_total_ = 0, last_idle_ = 0;
};

}  // namespace

std::unique_ptr<TelemetrySource> HostTelemetrySource(const std::string& proc,
                                                     const std::string& sys) {
  return std::make_unique<HostSource>(proc, sys);
}

uint64_t SlowdownReasons(uint64_t reasons) {
  uint64_t out = 0;
  for (const ReasonBit& r : kReasons)
    if (r.slowdown && (reasons & r.bit)) out |= r.bit;
  return out;
}

std::string ReasonNames(uint64_t reasons) {
  std::vector<std::string> names;
  for (const ReasonBit& r : kReasons)
    if (reasons & r.bit) names.emplace_back(r.name);
  return absl::StrJoin(names, ", ");
}

TelemetrySampler::TelemetrySampler(std::unique_ptr<TelemetrySource> source,
                                   std::chrono::milliseconds interval)
    : source_(std::move(source)),
      interval_(interval),
      start_(std::chrono::steady_clock::now()) {
  ecc_c_ = source_->EccCorrected();
  ecc_u_ = source_->EccUncorrected();
  thread_ = std::thread([this] { Loop(); });
}

TelemetrySampler::~TelemetrySampler() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

double TelemetrySampler::Now() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                       start_)
      .count();
}

void TelemetrySampler::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    lock.unlock();
    v1::TelemetrySample s;
    s.set_t_s(Now());
    source_->Read(&s);  // the source is used by this thread only
    lock.lock();
    samples_.push_back(std::move(s));
    // Keep at most ~10 minutes at any interval: windows drain it anyway.
    if (samples_.size() > 20000) samples_.erase(samples_.begin());
    wake_.wait_for(lock, interval_, [this] { return stop_; });
  }
}

v1::DeviceTelemetry TelemetrySampler::Window(double t0, double t1,
                                             int max_samples) {
  v1::DeviceTelemetry out;
  out.set_device(source_->device());
  std::vector<v1::TelemetrySample> in;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& s : samples_)
      if (s.t_s() >= t0 && s.t_s() <= t1) in.push_back(s);
    // A window shorter than the period still gets the latest reading.
    if (in.empty()) {
      for (const auto& s : samples_)
        if (s.t_s() <= t1) last_ = s, has_last_ = true;
      if (has_last_) in.push_back(last_);
    } else {
      last_ = in.back();
      has_last_ = true;
    }
    samples_.erase(std::remove_if(samples_.begin(), samples_.end(),
                                  [&](const v1::TelemetrySample& s) {
                                    return s.t_s() <= t1;
                                  }),
                   samples_.end());
  }
  uint64_t slow = 0;
  for (const auto& s : in) slow |= SlowdownReasons(s.clock_event_reasons());
  out.set_slowdown_reasons(slow);
  const size_t n = in.size();
  const size_t keep = std::min<size_t>(n, std::max(1, max_samples));
  for (size_t i = 0; i < keep; ++i) *out.add_samples() = in[i * n / keep];
  // ECC counters: read here (the caller's thread), not by the sampler.
  const int64_t c = source_->EccCorrected(), u = source_->EccUncorrected();
  out.set_ecc_corrected(c >= 0 && ecc_c_ >= 0 ? c - ecc_c_ : -1);
  out.set_ecc_uncorrected(u >= 0 && ecc_u_ >= 0 ? u - ecc_u_ : -1);
  ecc_c_ = c;
  ecc_u_ = u;
  return out;
}

}  // namespace ringmaster
