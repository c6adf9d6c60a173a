#include "core/telemetry.h"

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>

namespace ringmaster {
namespace {

namespace fs = std::filesystem;

class FakeGpu : public TelemetrySource {
 public:
  std::string device() const override { return "GPU fake"; }
  void Read(v1::TelemetrySample* s) override {
    const int n = reads_++;
    s->set_sm_clock_mhz(1980 - n);
    s->set_power_w(500);
    // Power capping from the 3rd read on, idle before.
    s->set_clock_event_reasons(n >= 2 ? 0x4 : 0x1);
  }
  int64_t EccCorrected() override { return ecc_.load(); }
  std::atomic<int64_t> ecc_{10};
  std::atomic<int> reads_{0};
};

TEST(TelemetrySampler, WindowsTakeTheirSamplesAndReasons) {
  auto gpu = std::make_unique<FakeGpu>();
  FakeGpu* raw = gpu.get();
  TelemetrySampler sampler(std::move(gpu), std::chrono::milliseconds(2));
  while (raw->reads_.load() < 30)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  raw->ecc_ = 13;
  const double now = sampler.Now();
  v1::DeviceTelemetry w = sampler.Window(0, now, 8);
  EXPECT_EQ(w.device(), "GPU fake");
  EXPECT_EQ(w.samples_size(), 8);         // thinned from ~30
  EXPECT_EQ(w.slowdown_reasons(), 0x4u);  // sw_power_cap; idle is no slowdown
  EXPECT_EQ(w.ecc_corrected(), 3);
  EXPECT_EQ(w.ecc_uncorrected(), -1);
  for (int i = 1; i < w.samples_size(); ++i)
    EXPECT_GE(w.samples(i).t_s(), w.samples(i - 1).t_s());
  // Taken samples are gone; a window with none of its own gets the latest
  // reading before it.
  v1::DeviceTelemetry again = sampler.Window(now, now, 8);
  ASSERT_EQ(again.samples_size(), 1);
  EXPECT_LE(again.samples(0).t_s(), now);
}

TEST(Telemetry, ReasonNames) {
  EXPECT_EQ(SlowdownReasons(0x1 | 0x4 | 0x40), 0x44u);
  EXPECT_EQ(ReasonNames(0x44), "sw_power_cap, hw_thermal_slowdown");
  EXPECT_EQ(ReasonNames(0), "");
}

TEST(Telemetry, HostSourceReadsProcAndSys) {
  const fs::path root = fs::path(testing::TempDir()) / "telemetry_host";
  fs::remove_all(root);
  fs::create_directories(root / "proc");
  fs::create_directories(root / "sys/class/thermal/thermal_zone0");
  std::ofstream(root / "proc/cpuinfo")
      << "processor : 0\ncpu MHz\t\t: 2000.0\nprocessor : 1\n"
         "cpu MHz\t\t: 3000.0\n";
  std::ofstream(root / "sys/class/thermal/thermal_zone0/temp") << "55000\n";
  auto write_stat = [&](int user, int idle) {
    std::ofstream(root / "proc/stat")
        << "cpu  " << user << " 0 0 " << idle << " 0 0 0 0 0 0\ncpu0 1 2 3\n";
  };
  auto src =
      HostTelemetrySource((root / "proc").string(), (root / "sys").string());
  write_stat(100, 100);
  v1::TelemetrySample first;
  src->Read(&first);
  EXPECT_FALSE(first.has_utilization_pct());  // needs two reads
  EXPECT_DOUBLE_EQ(first.sm_clock_mhz(), 2500);
  EXPECT_DOUBLE_EQ(first.temperature_c(), 55);
  EXPECT_FALSE(first.has_power_w());
  write_stat(175, 125);  // +75 busy, +25 idle
  v1::TelemetrySample second;
  src->Read(&second);
  EXPECT_DOUBLE_EQ(second.utilization_pct(), 75);
  fs::remove_all(root);
}

}  // namespace
}  // namespace ringmaster
