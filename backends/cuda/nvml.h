// NVML loaded at run time: there is no nvml.h on build machines, and the
// driver (which provides libnvidia-ml.so.1) exists only on GPU machines.
#ifndef RINGMASTER_BACKENDS_CUDA_NVML_H_
#define RINGMASTER_BACKENDS_CUDA_NVML_H_

#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "core/telemetry.h"

namespace ringmaster {

// The driver version ("580.159.04"), or nullopt when NVML cannot be loaded.
std::optional<std::string> NvmlDriverVersion();

// NVLink between the GPU at `bus_id` and the GPU at `peer_bus_id` (both as
// cudaDeviceGetPCIBusId spells them), as NVML sees it.
struct NvlinkInfo {
  int active_links = 0;     // active NVLink links of the first GPU
  int links_to_peer = 0;    // those whose remote end is the peer's bus id
  bool p2p_nvlink = false;  // nvmlDeviceGetP2PStatus(NVLINK) says OK
  unsigned version = 0;     // NVML's NVLink version code of the first link
  std::string remote_ends;  // remote bus ids seen, for the record
};
// NVLink links between the two GPUs: those whose remote end names the peer;
// when no remote end names it but NVML says NVLink P2P works (a hypervisor
// masks the remote ends as ffffffff:ff:ff, as on the lent 2xH200 VM, or an
// NVSwitch sits between), all of the GPU's active links.
int NvlinkLinksToPeer(const NvlinkInfo& info);
// nullopt when NVML or the queries are unavailable.
std::optional<NvlinkInfo> NvmlNvlink(const std::string& bus_id,
                                     const std::string& peer_bus_id);

// The GPU's maximum PCIe link generation and width; nullopt when unknown.
std::optional<std::pair<unsigned, unsigned>> NvmlPcieMaxLink(
    const std::string& bus_id);
// The link's current generation and width (an idle GPU may train its link
// down to save power; under a copy it runs at its best).
std::optional<std::pair<unsigned, unsigned>> NvmlPcieCurrentLink(
    const std::string& bus_id);

// Telemetry of the GPU at `bus_id` (SM and memory clocks, power,
// temperature, utilization, clocks-event reasons, volatile ECC counts),
// NVML kept open for the source's life; nullptr when NVML or the device is
// not there.
std::unique_ptr<TelemetrySource> NvmlTelemetrySource(const std::string& bus_id,
                                                     const std::string& name);

}  // namespace ringmaster

#endif  // RINGMASTER_BACKENDS_CUDA_NVML_H_
