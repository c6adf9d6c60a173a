// Where a process runs: its CPU affinity and NUMA nodes, for the
// placement recorded with host<->device and copy results.
#ifndef RINGMASTER_CORE_PLACEMENT_H_
#define RINGMASTER_CORE_PLACEMENT_H_

#include <map>
#include <string>
#include <vector>

namespace ringmaster {

// This machine's host name.
std::string HostName();

// This process's NCCL_* environment variables, by name (what a rank runs
// with, and what reaches every container of a Kubernetes launch).
std::map<std::string, std::string> NcclEnvironment();

// "cpus 0-31 numa 0" for the calling thread's affinity (NUMA nodes of
// those CPUs from /sys; omitted when unknown).
std::string CpuPlacement();

// NUMA node of a PCI device ("0000:07:00.0" or "00000000:07:00.0"), -1
// when unknown (no /sys entry, or the kernel reports -1).
int PciNumaNode(const std::string& bus_id);

// Compresses sorted CPU numbers into "0-3,8,10-11".
std::string FormatCpuList(const std::vector<int>& cpus);

}  // namespace ringmaster

#endif  // RINGMASTER_CORE_PLACEMENT_H_
