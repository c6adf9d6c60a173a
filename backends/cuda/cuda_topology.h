// What the GPUs of this machine are and how they connect, for
// `ringmaster topo` (through `ringmaster-worker probe --topology`).
#ifndef RINGMASTER_BACKENDS_CUDA_CUDA_TOPOLOGY_H_
#define RINGMASTER_BACKENDS_CUDA_CUDA_TOPOLOGY_H_

#include <cstdint>
#include <string>

namespace ringmaster {

// JSON: {"devices": [{index, name, bus_id, memory_gib, numa_node,
// pcie_generation, pcie_width}], "pairs": [{a, b, p2p, nvlink_links,
// nvlink_active_links, nvlink_p2p, nvlink_remote_ends[, nvlink_note]}],
// "nvlink_generation", "note"}. No GPU: empty devices and the driver's
// answer in "note".
std::string DescribeGpusJson();

// The PCI bus id ("0000:19:00.0") and name of CUDA device `device`; empty
// when there is none.
std::string CudaBusId(int device);
std::string CudaDeviceName(int device);

// Free memory of `device` (cudaMemGetInfo), 0 when it cannot be read.
int64_t CudaFreeMemory(int device);

}  // namespace ringmaster

#endif  // RINGMASTER_BACKENDS_CUDA_CUDA_TOPOLOGY_H_
