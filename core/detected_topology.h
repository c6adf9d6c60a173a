// The machine this process runs on, as a topology node: what `ringmaster
// topo` prints and what every result records as its topology id.
//
// GPUs come from the worker's probe (backends/cuda/cuda_topology.h, JSON),
// network ports from /sys; both are read here without CUDA or MPI.
#ifndef RINGMASTER_CORE_DETECTED_TOPOLOGY_H_
#define RINGMASTER_CORE_DETECTED_TOPOLOGY_H_

#include <string>
#include <vector>

#include "ringmaster/v1/topology.pb.h"

namespace ringmaster {

struct DetectedNic {
  std::string name, kind;  // kind: infiniband, roce or ethernet
  double gbit_s = 0;       // 0: unknown (link down or virtual)
};

// Network ports: InfiniBand/RoCE devices from <sys>/class/infiniband, the
// rest from <sys>/class/net (physical devices only).
std::vector<DetectedNic> DetectNics(const std::string& sys = "/sys");

// A node from the GPU probe's JSON ({"devices": [...], "pairs": [...],
// "nvlink_generation"}) and the ports with a known speed. Unreadable JSON
// counts as no GPU.
v1::NodeSpec DetectedNode(const std::string& gpu_probe_json,
                          const std::vector<DetectedNic>& nics);

// A stable id for a detected system: what it is, then a content hash, e.g.
// "2x-nvidia-h200-nv18-3f2a9c1e" or "cpu-2t-5b0d77aa" (no GPU; t = hardware
// threads). Identical machines get the same id whatever their host names.
std::string TopologyId(const v1::NodeSpec& node, int cpu_threads);

// The id of a job whose ranks reported `node_ids` over `nodes` nodes: the
// common id ("<nodes>n-" in front when several), or the distinct ids joined
// by "+" when nodes differ.
std::string JobTopologyId(const std::vector<std::string>& node_ids, int nodes);

}  // namespace ringmaster

#endif  // RINGMASTER_CORE_DETECTED_TOPOLOGY_H_
