#include "backends/cuda/cuda_topology.h"

#include <cuda_runtime_api.h>
#include <unistd.h>

#include "backends/cuda/nvml.h"
#include "core/placement.h"
#include "nlohmann/json.hpp"

namespace ringmaster {
namespace {

// NVML's nvmlNvlinkVersion_t (1_0, 2_0, 2_2, 3_0, 3_1, 4_0, 5_0 as 1..7) as
// the NVLink generation.
int NvlinkGeneration(unsigned code) {
  static const int kGeneration[] = {0, 1, 2, 2, 3, 3, 4, 5};
  return code < sizeof kGeneration / sizeof kGeneration[0] ? kGeneration[code]
                                                           : 0;
}

}  // namespace

std::string CudaBusId(int device) {
  char id[32] = {};
  if (cudaDeviceGetPCIBusId(id, sizeof id, device) != cudaSuccess) {
    cudaGetLastError();
    return "";
  }
  return id;
}

std::string CudaDeviceName(int device) {
  cudaDeviceProp prop;
  if (cudaGetDeviceProperties(&prop, device) != cudaSuccess) {
    cudaGetLastError();
    return "";
  }
  return prop.name;
}

int64_t CudaFreeMemory(int device) {
  int previous = 0;
  if (cudaGetDevice(&previous) != cudaSuccess) previous = device;
  size_t free_bytes = 0, total = 0;
  const bool ok = cudaSetDevice(device) == cudaSuccess &&
                  cudaMemGetInfo(&free_bytes, &total) == cudaSuccess;
  if (!ok) cudaGetLastError();
  cudaSetDevice(previous);
  return ok ? static_cast<int64_t>(free_bytes) : 0;
}

std::string DescribeGpusJson() {
  nlohmann::json out;
  out["devices"] = nlohmann::json::array();
  out["pairs"] = nlohmann::json::array();
  int n = 0;
  cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess) {
    // Without an NVIDIA driver the runtime says "CUDA driver version is
    // insufficient", which reads as "upgrade": say what it means here.
    const bool no_driver = err == cudaErrorInsufficientDriver &&
                           access("/dev/nvidiactl", F_OK) != 0 &&
                           access("/proc/driver/nvidia/version", F_OK) != 0;
    out["note"] = no_driver ? std::string(
                                  "no GPU found: no NVIDIA driver is loaded "
                                  "on this machine")
                            : std::string("the CUDA driver reports \"") +
                                  cudaGetErrorString(err) + "\"";
    cudaGetLastError();
    return out.dump();
  }
  std::vector<std::string> bus(n);
  for (int d = 0; d < n; ++d) {
    cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, d) != cudaSuccess) continue;
    char id[32] = {};
    cudaDeviceGetPCIBusId(id, sizeof id, d);
    bus[d] = id;
    nlohmann::json dev = {{"index", d},
                          {"name", prop.name},
                          {"bus_id", bus[d]},
                          {"memory_gib", prop.totalGlobalMem / double(1 << 30)},
                          {"sm_count", prop.multiProcessorCount},
                          {"numa_node", PciNumaNode(bus[d])}};
    if (auto link = NvmlPcieMaxLink(bus[d])) {
      dev["pcie_generation"] = link->first;
      dev["pcie_width"] = link->second;
    }
    out["devices"].push_back(dev);
  }
  unsigned generation = 0;
  for (int a = 0; a < n; ++a) {
    for (int b = a + 1; b < n; ++b) {
      int p2p = 0;
      cudaDeviceCanAccessPeer(&p2p, a, b);
      nlohmann::json pair = {{"a", a}, {"b", b}, {"p2p", p2p != 0}};
      if (auto nv = NvmlNvlink(bus[a], bus[b])) {
        const int links = NvlinkLinksToPeer(*nv);
        pair["nvlink_links"] = links;
        pair["nvlink_active_links"] = nv->active_links;
        pair["nvlink_p2p"] = nv->p2p_nvlink;
        pair["nvlink_remote_ends"] = nv->remote_ends;
        if (links > 0) {
          generation = std::max(generation, nv->version);
          if (nv->links_to_peer == 0) {
            pair["nvlink_note"] =
                "remote ends do not name the peer (" + nv->remote_ends +
                "); NVML reports NVLink P2P: counting the GPU's active links";
          }
        }
      }
      out["pairs"].push_back(pair);
    }
  }
  out["nvlink_generation"] = NvlinkGeneration(generation);
  out["nvml_nvlink_version"] = generation;
  if (n == 0) out["note"] = "no GPU found (0 CUDA devices)";
  return out.dump();
}

}  // namespace ringmaster
