#include "backends/cuda/nvml.h"

#include <dlfcn.h>

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
  auto version =
      reinterpret_cast<DriverVersionFn>(dlsym(lib, "nvmlSystemGetDriverVersion"));
  std::optional<std::string> out;
  if (init && shutdown && version && init() == 0) {
    char buf[96] = {};
    if (version(buf, sizeof buf) == 0) out = std::string(buf);
    shutdown();
  }
  dlclose(lib);
  return out;
}

}  // namespace ringmaster
