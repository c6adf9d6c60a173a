#include "core/topology.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>

#include "absl/strings/str_format.h"
#include "core/metrics.h"
#include "core/yaml_proto.h"

namespace ringmaster {
namespace {

// Defaults until calibration (docs/model.md says where they come from).
constexpr double kNvlinkEfficiency = 0.80;
constexpr double kPcieEfficiency = 0.80;
constexpr double kNetEfficiency = 0.92;
constexpr double kIntraStepUs = 0.6;
constexpr double kInterStepUs = 4.0;
constexpr double kBaseUs = 5.0;
constexpr double kChunkUs = 3.6;  // the 2xH200 calibration (docs/model.md)

struct Protocol {
  const char* name;
  double bandwidth;  // share of the path's bandwidth it reaches
  double latency;    // share of the Simple protocol's step latency
};
constexpr Protocol kProtocols[] = {
    {"LL", 0.5, 0.25}, {"LL128", 15.0 / 16.0, 0.5}, {"Simple", 1.0, 1.0}};

absl::Status Invalid(const std::string& file, const std::string& what) {
  return absl::InvalidArgumentError(file + ": " + what);
}

// Algorithm steps of a ring collective on n ranks.
int RingSteps(v1::Collective c, int n) {
  switch (c) {
    case v1::ALL_REDUCE:
      return 2 * (n - 1);
    case v1::SEND_RECV:
      return 1;
    default:
      return n - 1;
  }
}

}  // namespace

double PcieGbps(int generation, int width) {
  // GT/s per lane and line-coding efficiency per generation.
  static const double kRate[] = {0, 2.5, 5, 8, 16, 32, 64};
  if (generation < 1 || generation > 6 || width <= 0) return 0;
  const double coding = generation <= 2
                            ? 8.0 / 10.0
                            : (generation <= 5 ? 128.0 / 130.0 : 242.0 / 256.0);
  return kRate[generation] * width * coding / 8.0;
}

absl::StatusOr<v1::Topology> ParseTopology(const std::string& text,
                                           const std::string& file) {
  v1::Topology t;
  absl::Status s = YamlToMessage(text, file, &t);
  if (!s.ok()) return s;
  if (t.id().empty()) return Invalid(file, "id: required");
  const v1::NodeSpec& n = t.node();
  if (n.gpus() < 0) return Invalid(file, "node.gpus: expected 0 or more");
  if (n.gpus() == 0) {
    // A node of host ranks, one per core, over the host's memory.
    if (n.cpu().cores() < 1) {
      return Invalid(file,
                     "node.cpu.cores: a node without GPUs (node.gpus: 0) "
                     "needs its cores (one host rank per core)");
    }
    if (!(n.cpu().memory_gbps() > 0)) {
      return Invalid(file,
                     "node.cpu.memory_gbps: a node without GPUs needs its "
                     "memory copy rate in GB/s (`ringmaster topo --format "
                     "yaml` measures it)");
    }
  } else {
    if (n.gpu().model().empty())
      return Invalid(file, "node.gpu.model: required");
    if (n.has_nvlink() &&
        (n.nvlink().links() < 1 || n.nvlink().link_gbps() <= 0))
      return Invalid(file, "node.nvlink: links and link_gbps must be positive");
    if (PcieGbps(n.pcie().generation(), n.pcie().width()) <= 0) {
      return Invalid(file,
                     "node.pcie: expected generation 1-6 and a positive width");
    }
  }
  for (int i = 0; i < n.nics_size(); ++i) {
    const v1::NicSpec& nic = n.nics(i);
    if (nic.kind() != "infiniband" && nic.kind() != "roce" &&
        nic.kind() != "ethernet") {
      return Invalid(
          file, absl::StrFormat("node.nics[%d].kind: expected infiniband, roce "
                                "or ethernet, got \"%s\"",
                                i, nic.kind()));
    }
    if (nic.gbit_s() <= 0 || nic.count() < 1) {
      return Invalid(
          file, absl::StrFormat(
                    "node.nics[%d]: gbit_s and count must be positive", i));
    }
  }
  if (t.nodes() < 0) return Invalid(file, "nodes: expected at least 1");
  if (t.nodes() > 1 && n.nics_size() == 0)
    return Invalid(file, "node.nics: a system of several nodes needs NICs");
  if (t.fabric().oversubscription() < 0)
    return Invalid(file, "fabric.oversubscription: expected >= 1");
  const v1::ModelParams& m = t.model();
  for (double e :
       {m.nvlink_efficiency(), m.pcie_efficiency(), m.net_efficiency()}) {
    if (e < 0 || e > 1)
      return Invalid(file, "model: efficiencies are fractions in (0, 1]");
  }
  return t;
}

absl::StatusOr<v1::Topology> LoadTopology(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(path + ": cannot read");
  std::stringstream text;
  text << in.rdbuf();
  return ParseTopology(text.str(), path);
}

bool IsHostNode(const v1::NodeSpec& n) { return n.gpus() == 0; }

int RanksPerNode(const v1::NodeSpec& n) {
  return IsHostNode(n) ? n.cpu().cores() : n.gpus();
}

void SetRanksPerNode(v1::NodeSpec* n, int ranks) {
  if (IsHostNode(*n)) {
    n->mutable_cpu()->set_cores(ranks);
  } else {
    n->set_gpus(ranks);
  }
}

Ceilings PathCeilings(const v1::Topology& t) {
  Ceilings c;
  const v1::NodeSpec& n = t.node();
  if (n.has_nvlink())
    c.nvlink_gbps = n.nvlink().links() * n.nvlink().link_gbps();
  c.pcie_gbps = IsHostNode(n)
                    ? n.cpu().memory_gbps()
                    : PcieGbps(n.pcie().generation(), n.pcie().width());
  double per_gpu = 0;
  for (const v1::NicSpec& nic : n.nics()) {
    const double port = nic.gbit_s() / 8.0;
    c.net_node_gbps += nic.count() * port;
    per_gpu += port / std::max(1, nic.gpus_per_nic());
  }
  const double over = std::max(1.0, t.fabric().oversubscription());
  c.net_node_gbps /= over;
  c.net_gpu_gbps = per_gpu / over;
  return c;
}

v1::ModelParams EffectiveParams(const v1::Topology& t) {
  v1::ModelParams m = t.model();
  if (m.nvlink_efficiency() <= 0) m.set_nvlink_efficiency(kNvlinkEfficiency);
  if (m.pcie_efficiency() <= 0) m.set_pcie_efficiency(kPcieEfficiency);
  if (m.net_efficiency() <= 0) m.set_net_efficiency(kNetEfficiency);
  if (m.intra_step_us() <= 0) m.set_intra_step_us(kIntraStepUs);
  if (m.inter_step_us() <= 0) m.set_inter_step_us(kInterStepUs);
  if (m.base_us() <= 0) m.set_base_us(kBaseUs);
  if (m.chunk_us() <= 0) m.set_chunk_us(kChunkUs);
  if (m.source().empty()) m.set_source("default");
  return m;
}

namespace {

// PredictCollective with the path ceilings and the effective parameters
// already worked out: Calibrate evaluates millions of parameter sets
// against the same topology and keeps both out of its loop.
absl::StatusOr<Prediction> PredictWith(const v1::Topology& t,
                                       const Ceilings& ceil,
                                       const v1::ModelParams& m, int nodes,
                                       v1::Collective c, int64_t size_bytes) {
  if (nodes < 1) return absl::InvalidArgumentError("nodes: expected >= 1");
  const int g = RanksPerNode(t.node());
  const int n = nodes * g;
  if (n < 2 && c != v1::SEND_RECV) {
    Prediction p;
    p.algorithm = "local";
    p.protocol = "-";
    p.bottleneck = "none";
    return p;  // one rank moves nothing
  }
  // The intra-node path of one GPU.
  const bool nvlink = ceil.nvlink_gbps > 0;
  double intra = nvlink ? ceil.nvlink_gbps * m.nvlink_efficiency()
                        : ceil.pcie_gbps * m.pcie_efficiency();
  if (!nvlink && t.node().pcie().gpus_per_switch() > 1) {
    // Rings cross the switch's uplink to reach the next switch's GPUs.
    intra = std::min(intra, ceil.pcie_gbps * m.pcie_efficiency());
  }
  const std::string intra_name =
      nvlink ? "nvlink" : (IsHostNode(t.node()) ? "memory" : "pcie");
  double bw = intra;
  std::string bottleneck = intra_name;
  double step_s = m.intra_step_us() * 1e-6;
  if (nodes > 1) {
    if (ceil.net_node_gbps <= 0)
      return absl::InvalidArgumentError("several nodes but no NICs");
    double net = ceil.net_node_gbps * m.net_efficiency();
    if (c == v1::SEND_RECV) net = ceil.net_gpu_gbps * m.net_efficiency();
    if (c == v1::ALL_TO_ALL) {
      // A node's ranks send (n - g)/n of their data off the node, through
      // all of its ports; busbw counts (n - 1)/n per rank.
      net = net * (n - 1) / (static_cast<double>(g) * (n - g));
    }
    if (net < bw) {
      bw = net;
      bottleneck = "network";
    }
    // Ring steps: one in g crosses the network.
    step_s = ((g - 1) * m.intra_step_us() + m.inter_step_us()) / g * 1e-6;
  }
  const double bus_bytes =
      static_cast<double>(size_bytes) * BusBwFactor(c, std::max(n, 2));
  Prediction best;
  best.time_s = std::numeric_limits<double>::infinity();
  // NCCL's own switch, when calibration saw it: LL up to it, Simple above.
  const bool follow_nccl = m.ll_max_bytes() > 0;
  const char* nccl_choice = size_bytes <= m.ll_max_bytes() ? "LL" : "Simple";
  auto consider = [&](const char* algo, double steps, double algo_bw) {
    for (const Protocol& p : kProtocols) {
      if (follow_nccl && std::string_view(p.name) != nccl_choice) continue;
      const double bytes_per_s = algo_bw * p.bandwidth * 1e9;
      double time = m.base_us() * 1e-6 + steps * step_s * p.latency +
                    bus_bytes / bytes_per_s;
      if (std::string_view(p.name) == "Simple")
        time += m.simple_base_us() * 1e-6;
      // Data moves in chunks; the best chunk size C balances bus/C chunk
      // overheads against the pipeline's fill: together they cost
      // 2 sqrt(bus x chunk overhead / bandwidth).
      time += 2 * std::sqrt(bus_bytes * m.chunk_us() * 1e-6 / bytes_per_s);
      if (time < best.time_s) {
        best.time_s = time;
        best.algorithm = algo;
        best.protocol = p.name;
      }
    }
  };
  consider("ring", RingSteps(c, n), bw);
  if (c == v1::ALL_REDUCE && nodes > 1 && !follow_nccl) {
    // Double binary tree: up and down log2(nodes) network hops, a chain of
    // g ranks inside each node; NCCL's tree reaches ~90% of the ring's
    // bandwidth.
    const double steps_time = 2 *
                              (std::ceil(std::log2(nodes)) * m.inter_step_us() +
                               (g - 1) * m.intra_step_us()) /
                              (step_s * 1e6);
    consider("tree", steps_time, bw * 0.9);
  }
  best.bottleneck = bottleneck;
  best.algbw_gbps = size_bytes / best.time_s / 1e9;
  best.busbw_gbps = bus_bytes / best.time_s / 1e9;
  return best;
}

}  // namespace

absl::StatusOr<Prediction> PredictCollective(const v1::Topology& t, int nodes,
                                             v1::Collective c,
                                             int64_t size_bytes) {
  return PredictWith(t, PathCeilings(t), EffectiveParams(t), nodes, c,
                     size_bytes);
}

absl::StatusOr<DpStepPrediction> PredictDpStep(const v1::Topology& t, int nodes,
                                               const DpStepSpec& s) {
  if (s.layers < 1 || s.hidden < 1 || s.compute_s <= 0)
    return absl::InvalidArgumentError(
        "a step needs layers, hidden and compute");
  DpStepPrediction p;
  p.compute_s = s.compute_s;
  const int ranks = nodes * RanksPerNode(t.node());
  if (ranks < 2) {
    p.step_s = s.compute_s;
    return p;
  }
  const double backward = s.compute_s * 2.0 / 3.0;
  const double forward_and_rest = s.compute_s - backward;
  const double per_layer = backward / s.layers;
  const int64_t layer_bytes = s.hidden * s.hidden * s.dtype_bytes;
  // Buckets in backward order: (ready time, bytes).
  std::vector<std::pair<double, int64_t>> buckets;
  int64_t open = 0;
  for (int done = 1; done <= s.layers; ++done) {
    open += layer_bytes;
    if (open >= s.bucket_bytes || done == s.layers) {
      buckets.push_back({done * per_layer, open});
      open = 0;
    }
  }
  double end = 0;
  for (const auto& [ready, bytes] : buckets) {
    auto ar = PredictCollective(t, nodes, v1::ALL_REDUCE, bytes);
    if (!ar.ok()) return ar.status();
    const double start = std::max(s.overlap ? ready : backward, end);
    end = start + ar->time_s;
    p.comm_s += ar->time_s;
  }
  p.buckets = static_cast<int>(buckets.size());
  p.exposed_comm_s = std::max(0.0, end - backward);
  p.step_s = forward_and_rest + backward + p.exposed_comm_s;
  return p;
}

absl::StatusOr<double> ComputeSeconds(const v1::Topology& t,
                                      const DpStepSpec& s,
                                      const std::string& dtype,
                                      double efficiency) {
  const v1::PeakTflops& peaks = t.node().gpu().peak_tflops();
  const auto* field = peaks.GetDescriptor()->FindFieldByName(dtype);
  const double peak =
      field != nullptr && field->cpp_type() ==
                              google::protobuf::FieldDescriptor::CPPTYPE_DOUBLE
          ? peaks.GetReflection()->GetDouble(peaks, field)
          : 0;
  if (peak <= 0) {
    return absl::NotFoundError(absl::StrFormat("%s: no %s peak for %s", t.id(),
                                               dtype, t.node().gpu().model()));
  }
  const double flop = 6.0 * static_cast<double>(s.batch) * s.hidden *
                      static_cast<double>(s.hidden) * s.layers;
  return flop / (peak * 1e12 * efficiency);
}

std::string CanonicalProtocol(std::string_view name) {
  std::string upper;
  for (char ch : name) upper += static_cast<char>(std::toupper(ch));
  if (upper == "LL") return "LL";
  if (upper == "LL128") return "LL128";
  if (upper == "SIMPLE") return "Simple";
  return "";
}

absl::StatusOr<v1::ModelParams> Calibrate(
    const v1::Topology& t, int nodes, const std::vector<Measurement>& points,
    int64_t min_bytes) {
  std::vector<Measurement> use;
  for (const Measurement& p : points)
    if (p.size_bytes >= min_bytes && p.time_s > 0) use.push_back(p);
  if (use.size() < 2) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "calibration needs at least 2 measurements of >= %d bytes, got %d",
        min_bytes, use.size()));
  }
  const bool net = nodes > 1;
  const bool nvlink = t.node().has_nvlink();
  // NCCL's protocol switch, when the points are labelled and show one.
  int64_t ll_max = 0, simple_min = 0;
  for (const Measurement& p : use) {
    if (p.protocol == "LL" || p.protocol == "LL128")
      ll_max = std::max(ll_max, p.size_bytes);
    if (p.protocol == "Simple" &&
        (simple_min == 0 || p.size_bytes < simple_min))
      simple_min = p.size_bytes;
  }
  const bool labelled = ll_max > 0 && simple_min > ll_max;
  const int64_t ll_switch =
      labelled
          ? static_cast<int64_t>(std::sqrt(static_cast<double>(ll_max) *
                                           static_cast<double>(simple_min)))
          : 0;
  // Grid search over (efficiency, step latency), minimizing the RMS
  // relative error of the model itself (protocol choice included).
  // Every trial set starts from EffectiveParams(t) and keeps its fields
  // positive, so it is already what PredictCollective would make of it.
  const Ceilings ceil = PathCeilings(t);
  double best_err = std::numeric_limits<double>::infinity();
  v1::ModelParams best;
  auto error_of = [&](const v1::ModelParams& m) -> absl::StatusOr<double> {
    double sum = 0;
    for (const Measurement& p : use) {
      auto pred = PredictWith(t, ceil, m, nodes, p.collective, p.size_bytes);
      if (!pred.ok()) return pred.status();
      const double rel = (pred->time_s - p.time_s) / p.time_s;
      sum += rel * rel;
    }
    return std::sqrt(sum / use.size());
  };
  const v1::ModelParams start = EffectiveParams(t);
  auto with = [&](double eff, double step_us, double chunk_us,
                  double simple_base_us) {
    v1::ModelParams m = start;
    m.set_ll_max_bytes(ll_switch);
    m.set_simple_base_us(simple_base_us);
    if (net) {
      m.set_net_efficiency(eff);
      m.set_inter_step_us(step_us);
    } else {
      (nvlink ? m.set_nvlink_efficiency(eff) : m.set_pcie_efficiency(eff));
      m.set_intra_step_us(step_us);
    }
    m.set_chunk_us(chunk_us);
    return m;
  };
  // Coarse grid, then a finer one around the best point. Simple's fixed
  // cost only where labels pinned the protocol (else it would only trade
  // against base_us and the step latency).
  double best_eff = 0.8, best_step = 1, best_chunk = 5, best_simple = 0;
  for (int pass = 0; pass < 2; ++pass) {
    const double eff_lo = pass == 0 ? 0.2 : best_eff - 0.02;
    const double eff_hi = pass == 0 ? 1.0 : best_eff + 0.02;
    const double eff_d = pass == 0 ? 0.01 : 0.0005;
    const double lg_span = pass == 0 ? 0 : 0.2;
    const double lg_d = pass == 0 ? 0.1 : 0.01;
    const double step_c = std::log10(best_step),
                 chunk_c = std::log10(best_chunk);
    std::vector<double> simple_grid = {0};
    if (labelled) {
      simple_grid.clear();
      const double lo = pass == 0 ? 0 : std::max(0.0, best_simple - 2);
      const double hi = pass == 0 ? 30 : best_simple + 2;
      const double d = pass == 0 ? 2 : 0.5;
      for (double sb = lo; sb <= hi + 1e-9; sb += d) simple_grid.push_back(sb);
    }
    for (double eff = eff_lo; eff <= std::min(1.0, eff_hi) + 1e-9;
         eff += eff_d) {
      if (eff <= 0) continue;
      for (double ls = pass == 0 ? -1 : step_c - lg_span;
           ls <= (pass == 0 ? 1.5 : step_c + lg_span) + 1e-9; ls += lg_d) {
        for (double lc = pass == 0 ? -2 : chunk_c - lg_span;
             lc <= (pass == 0 ? 2 : chunk_c + lg_span) + 1e-9; lc += lg_d) {
          for (double sb : simple_grid) {
            v1::ModelParams m =
                with(eff, std::pow(10.0, ls), std::pow(10.0, lc), sb);
            auto err = error_of(m);
            if (!err.ok()) return err.status();
            if (*err < best_err) {
              best_err = *err;
              best = m;
              best_eff = eff;
              best_step = std::pow(10.0, ls);
              best_chunk = std::pow(10.0, lc);
              best_simple = sb;
            }
          }
        }
      }
    }
  }
  best.set_source(absl::StrFormat(
      "calibrated on %d measurement(s) >= %d bytes, %d node(s); RMS relative "
      "error %.3f%s",
      use.size(), min_bytes, nodes, best_err,
      labelled ? absl::StrFormat("; NCCL's switch LL -> Simple at %d bytes, "
                                 "Simple's extra fixed cost %.1f us",
                                 ll_switch, best.simple_base_us())
               : ""));
  return best;
}

}  // namespace ringmaster
