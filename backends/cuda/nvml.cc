#include "backends/cuda/nvml.h"

#include <dlfcn.h>

#include <cstdio>
#include <set>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace ringmaster {

std::optional<std::string> NvmlDriverVersion() {
  // Declared by hand from NVML's public API (nvmlReturn_t is an int enum,
  // NVML_SUCCESS = 0).
  using InitFn = int (*)();
  using ShutdownFn = int (*)();
  using DriverVersionFn = int (*)(char*, unsigned int);
  void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) return std::nullopt;
  auto init = reinterpret_cast<InitFn>(dlsym(lib, "nvmlInit_v2"));
  auto shutdown = reinterpret_cast<ShutdownFn>(dlsym(lib, "nvmlShutdown"));
  auto version = reinterpret_cast<DriverVersionFn>(
      dlsym(lib, "nvmlSystemGetDriverVersion"));
  std::optional<std::string> out;
  if (init && shutdown && version && init() == 0) {
    char buf[96] = {};
    if (version(buf, sizeof buf) == 0) out = std::string(buf);
    shutdown();
  }
  dlclose(lib);
  return out;
}

namespace {

// NVML's API declared by hand (no nvml.h on build machines): nvmlReturn_t
// is an int enum with NVML_SUCCESS = 0, nvmlDevice_t an opaque pointer,
// nvmlEnableState_t an int enum with NVML_FEATURE_ENABLED = 1.
struct NvmlPciInfo {  // nvmlPciInfo_t (v3 layout)
  char bus_id_legacy[16];
  unsigned domain, bus, device, pci_device_id, pci_subsystem_id;
  char bus_id[32];
};
using NvmlDevice = void*;

// Opens NVML for the lifetime of one query.
class NvmlSession {
 public:
  NvmlSession() {
    lib_ = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib_ == nullptr) return;
    auto init = reinterpret_cast<int (*)()>(dlsym(lib_, "nvmlInit_v2"));
    ok_ = init != nullptr && init() == 0;
  }
  ~NvmlSession() {
    if (ok_) {
      auto shutdown = reinterpret_cast<int (*)()>(dlsym(lib_, "nvmlShutdown"));
      if (shutdown) shutdown();
    }
    if (lib_) dlclose(lib_);
  }
  bool ok() const { return ok_; }
  template <typename Fn>
  Fn Get(const char* name) const {
    return reinterpret_cast<Fn>(dlsym(lib_, name));
  }
  std::optional<NvmlDevice> Device(const std::string& bus_id) const {
    auto by_bus = Get<int (*)(const char*, NvmlDevice*)>(
        "nvmlDeviceGetHandleByPciBusId_v2");
    NvmlDevice dev = nullptr;
    if (!by_bus || by_bus(bus_id.c_str(), &dev) != 0) return std::nullopt;
    return dev;
  }

 private:
  void* lib_ = nullptr;
  bool ok_ = false;
};

// "0000:07:00.0" and "00000000:07:00.0" name the same device.
bool SameBus(const NvmlPciInfo& info, const std::string& bus_id) {
  unsigned domain = 0, bus = 0, device = 0, function = 0;
  if (sscanf(bus_id.c_str(), "%x:%x:%x.%x", &domain, &bus, &device,
             &function) != 4)
    return false;
  return info.domain == domain && info.bus == bus && info.device == device;
}

}  // namespace

int NvlinkLinksToPeer(const NvlinkInfo& info) {
  if (info.links_to_peer > 0) return info.links_to_peer;
  return info.p2p_nvlink ? info.active_links : 0;
}

std::optional<NvlinkInfo> NvmlNvlink(const std::string& bus_id,
                                     const std::string& peer_bus_id) {
  NvmlSession nvml;
  if (!nvml.ok()) return std::nullopt;
  auto dev = nvml.Device(bus_id);
  auto state =
      nvml.Get<int (*)(NvmlDevice, unsigned, int*)>("nvmlDeviceGetNvLinkState");
  auto remote = nvml.Get<int (*)(NvmlDevice, unsigned, NvmlPciInfo*)>(
      "nvmlDeviceGetNvLinkRemotePciInfo_v2");
  auto get_version = nvml.Get<int (*)(NvmlDevice, unsigned, unsigned*)>(
      "nvmlDeviceGetNvLinkVersion");
  // nvmlDeviceGetP2PStatus(dev1, dev2, NVML_P2P_CAPS_INDEX_NVLINK = 2,
  // &status); NVML_P2P_STATUS_OK = 0.
  auto p2p = nvml.Get<int (*)(NvmlDevice, NvmlDevice, int, int*)>(
      "nvmlDeviceGetP2PStatus");
  if (!dev || !state) return std::nullopt;
  NvlinkInfo info;
  if (auto peer = nvml.Device(peer_bus_id); peer && p2p) {
    int status = -1;
    info.p2p_nvlink = p2p(*dev, *peer, 2, &status) == 0 && status == 0;
  }
  std::set<std::string> ends;
  constexpr unsigned kMaxLinks = 18;  // NVML_NVLINK_MAX_LINKS
  for (unsigned l = 0; l < kMaxLinks; ++l) {
    int active = 0;
    if (state(*dev, l, &active) != 0 || active != 1) continue;
    if (info.active_links++ == 0 && get_version != nullptr)
      get_version(*dev, l, &info.version);
    NvmlPciInfo pci{};
    if (remote == nullptr || remote(*dev, l, &pci) != 0) continue;
    ends.insert(
        absl::StrFormat("%04x:%02x:%02x", pci.domain, pci.bus, pci.device));
    if (SameBus(pci, peer_bus_id)) ++info.links_to_peer;
  }
  info.remote_ends = absl::StrJoin(ends, " ");
  return info;
}

namespace {

// A PCIe link's generation and width through NVML's `gen` and `width`
// queries; nullopt when either is unavailable.
std::optional<std::pair<unsigned, unsigned>> PcieLink(const std::string& bus_id,
                                                      const char* gen_query,
                                                      const char* width_query) {
  NvmlSession nvml;
  if (!nvml.ok()) return std::nullopt;
  auto dev = nvml.Device(bus_id);
  auto gen = nvml.Get<int (*)(NvmlDevice, unsigned*)>(gen_query);
  auto width = nvml.Get<int (*)(NvmlDevice, unsigned*)>(width_query);
  unsigned g = 0, w = 0;
  if (!dev || !gen || !width || gen(*dev, &g) != 0 || width(*dev, &w) != 0 ||
      g == 0 || w == 0) {
    return std::nullopt;
  }
  return std::make_pair(g, w);
}

}  // namespace

std::optional<std::pair<unsigned, unsigned>> NvmlPcieMaxLink(
    const std::string& bus_id) {
  return PcieLink(bus_id, "nvmlDeviceGetMaxPcieLinkGeneration",
                  "nvmlDeviceGetMaxPcieLinkWidth");
}

std::optional<std::pair<unsigned, unsigned>> NvmlPcieCurrentLink(
    const std::string& bus_id) {
  return PcieLink(bus_id, "nvmlDeviceGetCurrPcieLinkGeneration",
                  "nvmlDeviceGetCurrPcieLinkWidth");
}

namespace {

class NvmlGpuSource : public TelemetrySource {
 public:
  NvmlGpuSource(std::unique_ptr<NvmlSession> nvml, NvmlDevice dev,
                std::string name)
      : nvml_(std::move(nvml)), dev_(dev), name_(std::move(name)) {
    clock_ = nvml_->Get<int (*)(NvmlDevice, int, unsigned*)>(
        "nvmlDeviceGetClockInfo");
    power_ =
        nvml_->Get<int (*)(NvmlDevice, unsigned*)>("nvmlDeviceGetPowerUsage");
    limit_ = nvml_->Get<int (*)(NvmlDevice, unsigned*)>(
        "nvmlDeviceGetEnforcedPowerLimit");
    temp_ = nvml_->Get<int (*)(NvmlDevice, int, unsigned*)>(
        "nvmlDeviceGetTemperature");
    util_ = nvml_->Get<int (*)(NvmlDevice, unsigned*)>(
        "nvmlDeviceGetUtilizationRates");
    reasons_ = nvml_->Get<int (*)(NvmlDevice, unsigned long long*)>(
        "nvmlDeviceGetCurrentClocksEventReasons");
    if (reasons_ == nullptr) {  // the name before NVML 12.3
      reasons_ = nvml_->Get<int (*)(NvmlDevice, unsigned long long*)>(
          "nvmlDeviceGetCurrentClocksThrottleReasons");
    }
    ecc_ = nvml_->Get<int (*)(NvmlDevice, int, int, unsigned long long*)>(
        "nvmlDeviceGetTotalEccErrors");
  }
  std::string device() const override { return name_; }
  void Read(v1::TelemetrySample* s) override {
    unsigned v = 0;
    // NVML_CLOCK_SM = 1, NVML_CLOCK_MEM = 2; NVML_TEMPERATURE_GPU = 0.
    if (clock_ && clock_(dev_, 1, &v) == 0) s->set_sm_clock_mhz(v);
    if (clock_ && clock_(dev_, 2, &v) == 0) s->set_mem_clock_mhz(v);
    if (power_ && power_(dev_, &v) == 0) s->set_power_w(v / 1000.0);
    if (limit_ && limit_(dev_, &v) == 0) s->set_power_limit_w(v / 1000.0);
    if (temp_ && temp_(dev_, 0, &v) == 0) s->set_temperature_c(v);
    unsigned util[2] = {};  // nvmlUtilization_t {gpu, memory}
    if (util_ && util_(dev_, util) == 0) {
      s->set_utilization_pct(util[0]);
      s->set_mem_utilization_pct(util[1]);
    }
    unsigned long long r = 0;
    if (reasons_ && reasons_(dev_, &r) == 0) s->set_clock_event_reasons(r);
  }
  // NVML_MEMORY_ERROR_TYPE_CORRECTED = 0 / UNCORRECTED = 1,
  // NVML_VOLATILE_ECC = 0.
  int64_t EccCorrected() override { return Ecc(0); }
  int64_t EccUncorrected() override { return Ecc(1); }

 private:
  int64_t Ecc(int type) {
    unsigned long long n = 0;
    if (ecc_ == nullptr || ecc_(dev_, type, 0, &n) != 0) return -1;
    return static_cast<int64_t>(n);
  }
  std::unique_ptr<NvmlSession> nvml_;
  NvmlDevice dev_;
  std::string name_;
  int (*clock_)(NvmlDevice, int, unsigned*) = nullptr;
  int (*power_)(NvmlDevice, unsigned*) = nullptr;
  int (*limit_)(NvmlDevice, unsigned*) = nullptr;  // enforced limit, mW
  int (*temp_)(NvmlDevice, int, unsigned*) = nullptr;
  int (*util_)(NvmlDevice, unsigned*) = nullptr;
  int (*reasons_)(NvmlDevice, unsigned long long*) = nullptr;
  int (*ecc_)(NvmlDevice, int, int, unsigned long long*) = nullptr;
};

}  // namespace

std::unique_ptr<TelemetrySource> NvmlTelemetrySource(const std::string& bus_id,
                                                     const std::string& name) {
  auto nvml = std::make_unique<NvmlSession>();
  if (!nvml->ok()) return nullptr;
  auto dev = nvml->Device(bus_id);
  if (!dev) return nullptr;
  return std::make_unique<NvmlGpuSource>(std::move(nvml), *dev, name);
}

}  // namespace ringmaster
