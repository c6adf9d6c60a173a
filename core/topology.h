// Topologies (proto/ringmaster/v1/topology.proto) and the model that
// predicts collectives on them.
//
// The model: a collective moves `size x bus factor` bytes (nccl-tests'
// busbw accounting) over its bottleneck path, the slower of the GPU's
// intra-node path (NVLink or PCIe, per direction, times the path's
// efficiency) and the node's network ports (all ports of a node, divided by
// the fabric's oversubscription, times the network efficiency), plus one
// step latency per algorithm step. Ring and (for all-reduce across nodes)
// tree algorithms, each with NCCL-like protocols that trade bandwidth for
// latency (LL: half the bandwidth, a quarter of the latency; LL128: 15/16,
// half; Simple: all, all), all pipelined in chunks whose overhead at the
// best chunk size costs 2 sqrt(bus bytes x chunk overhead / bandwidth); the
// fastest combination is the prediction.
// docs/model.md has the derivations.
#ifndef RINGMASTER_CORE_TOPOLOGY_H_
#define RINGMASTER_CORE_TOPOLOGY_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "ringmaster/v1/plan.pb.h"
#include "ringmaster/v1/topology.pb.h"

namespace ringmaster {

// Reads and validates a topology file (YAML). Errors name file:line: field.
absl::StatusOr<v1::Topology> LoadTopology(const std::string& path);
absl::StatusOr<v1::Topology> ParseTopology(const std::string& text,
                                           const std::string& file);

// Ranks on one node: its GPUs, or on a node of host ranks (gpus: 0) its
// cores. SetRanksPerNode makes the node a part of itself with `ranks`.
int RanksPerNode(const v1::NodeSpec& n);
bool IsHostNode(const v1::NodeSpec& n);
void SetRanksPerNode(v1::NodeSpec* n, int ranks);

// PCIe bandwidth of one direction, GB/s, after line coding (Gen5 x16: 63.0).
double PcieGbps(int generation, int width);

// Speed of light of each path, GB/s per direction (0 = no such path).
struct Ceilings {
  double nvlink_gbps = 0;    // one GPU's NVLink (all its links)
  double pcie_gbps = 0;      // one GPU's PCIe link; on a node of host
                             // ranks, one core's memory copy rate
  double net_node_gbps = 0;  // all of a node's network ports
  double net_gpu_gbps = 0;   // the ports one GPU reaches (its rail)
};
Ceilings PathCeilings(const v1::Topology& t);

// The model's parameters: the topology's, with defaults for what is unset.
v1::ModelParams EffectiveParams(const v1::Topology& t);

struct Prediction {
  double time_s = 0;
  double algbw_gbps = 0;
  double busbw_gbps = 0;
  std::string algorithm;   // ring or tree
  std::string protocol;    // LL, LL128 or Simple
  std::string bottleneck;  // nvlink, pcie or network
};

// `collective` of `size_bytes` (per rank, as nccl-tests counts) on `nodes`
// nodes of the topology, every GPU a rank.
absl::StatusOr<Prediction> PredictCollective(const v1::Topology& t, int nodes,
                                             v1::Collective collective,
                                             int64_t size_bytes);

// A data-parallel training step (the MLP of bench: train): `compute_s` is
// one rank's forward + backward + optimizer (measured on one rank, or from
// ComputeSeconds). Backward is two thirds of it, layer by layer from the
// last; each layer's gradient joins the current bucket, which is
// all-reduced (in order, one at a time) once it reaches the cap; with
// overlap a bucket starts as soon as it is complete, without overlap after
// backward. Contention between the reduction and backward's GEMMs is not
// modelled (docs/model.md).
struct DpStepSpec {
  int layers = 0;
  int64_t hidden = 0;
  int64_t batch = 0;  // per rank
  int dtype_bytes = 2;
  int64_t bucket_bytes = 25 << 20;
  bool overlap = true;
  double compute_s = 0;
};
struct DpStepPrediction {
  double step_s = 0;
  double compute_s = 0;
  double exposed_comm_s = 0;  // reduction left after backward
  double comm_s = 0;          // all reductions together
  int buckets = 0;
};
absl::StatusOr<DpStepPrediction> PredictDpStep(const v1::Topology& t, int nodes,
                                               const DpStepSpec& spec);

// One rank's step from the GPU's peak: 6 x batch x hidden^2 x layers FLOP at
// `efficiency` of the dense peak of `dtype` ("bf16", "fp16", "tf32" ...).
absl::StatusOr<double> ComputeSeconds(const v1::Topology& t,
                                      const DpStepSpec& spec,
                                      const std::string& dtype,
                                      double efficiency);

// One measured point: a collective's median time at a size.
struct Measurement {
  v1::Collective collective = v1::ALL_REDUCE;
  int64_t size_bytes = 0;
  int nranks = 0;
  double time_s = 0;
  std::string protocol;  // NCCL's choice when labelled: LL, LL128, Simple
};

// "LL", "LL128" or "Simple" for NCCL's protocol names in any case ("SIMPLE"),
// "" for anything else.
std::string CanonicalProtocol(std::string_view name);

// Fits the efficiency, step latency and chunk overhead of the path the
// measurements ran on (all on one topology and node count): the parameters
// of PredictCollective that minimize the RMS relative error (a coarse grid,
// then a fine one around its best). Uses the sizes >= `min_bytes`. When
// the measurements are labelled with NCCL's protocol and show a switch from
// LL to Simple, the switch (the geometric midpoint between the largest LL
// and the smallest Simple size) and Simple's extra fixed cost are fitted
// too, and predictions follow NCCL's choice instead of the fastest one.
absl::StatusOr<v1::ModelParams> Calibrate(
    const v1::Topology& t, int nodes, const std::vector<Measurement>& points,
    int64_t min_bytes);

}  // namespace ringmaster

#endif  // RINGMASTER_CORE_TOPOLOGY_H_
