// Telemetry: each rank samples its device in the background (GPU clocks,
// power, temperature, utilization, throttle reasons and ECC counters via
// NVML; on the host backend the CPUs' clock and load), and every result
// keeps the samples taken while it ran, so a low figure can be told apart
// from a throttled device.
#ifndef RINGMASTER_CORE_TELEMETRY_H_
#define RINGMASTER_CORE_TELEMETRY_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "ringmaster/v1/result.pb.h"

namespace ringmaster {

// One device's readings. Read() fills what it can (the rest stays unset).
class TelemetrySource {
 public:
  virtual ~TelemetrySource() = default;
  virtual std::string device() const = 0;
  virtual void Read(v1::TelemetrySample* sample) = 0;
  // Volatile ECC error counts so far; -1 when not available. Called from
  // another thread than Read(): must be safe alongside it.
  virtual int64_t EccCorrected() { return -1; }
  virtual int64_t EccUncorrected() { return -1; }
};

// The host's CPUs from <proc>/stat (busy share since the last read) and
// <proc>/cpuinfo (mean "cpu MHz"), the hottest <sys>/class/thermal zone.
std::unique_ptr<TelemetrySource> HostTelemetrySource(
    const std::string& proc = "/proc", const std::string& sys = "/sys");

// NVML's clocks-event reasons that mean a slowdown (not idle or an
// application clock setting): SW power cap, HW slowdown, SW and HW thermal
// slowdown, HW power brake.
uint64_t SlowdownReasons(uint64_t reasons);
// "sw_power_cap, hw_thermal_slowdown" for a reasons bitmask.
std::string ReasonNames(uint64_t reasons);

// Samples a source every `interval` on its own thread. Thread-safe.
class TelemetrySampler {
 public:
  TelemetrySampler(std::unique_ptr<TelemetrySource> source,
                   std::chrono::milliseconds interval);
  ~TelemetrySampler();
  TelemetrySampler(const TelemetrySampler&) = delete;
  TelemetrySampler& operator=(const TelemetrySampler&) = delete;

  // Seconds since the sampler started.
  double Now() const;
  // The samples of [t0, t1] (at most `max_samples`, evenly thinned; for a
  // window shorter than the period the latest reading before t1), with
  // the OR of their slowdown reasons and the ECC counts' change since the
  // previous window; drops older samples.
  v1::DeviceTelemetry Window(double t0, double t1, int max_samples = 64);

 private:
  void Loop();
  std::unique_ptr<TelemetrySource> source_;
  const std::chrono::milliseconds interval_;
  const std::chrono::steady_clock::time_point start_;
  std::mutex mu_;
  std::condition_variable wake_;
  bool stop_ = false;                         // guarded by mu_
  std::vector<v1::TelemetrySample> samples_;  // guarded by mu_
  v1::TelemetrySample last_;                  // guarded by mu_
  bool has_last_ = false;                     // guarded by mu_
  int64_t ecc_c_ = -1, ecc_u_ = -1;           // at the last window
  std::thread thread_;
};

}  // namespace ringmaster

#endif  // RINGMASTER_CORE_TELEMETRY_H_
