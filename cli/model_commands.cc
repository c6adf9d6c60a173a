#include "cli/model_commands.h"

#include <google/protobuf/util/json_util.h>
#include <hwloc.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <set>
#include <tuple>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "cli/run_command.h"
#include "coordinator/launcher.h"
#include "core/detected_topology.h"
#include "core/names.h"
#include "core/placement.h"
#include "core/plan.h"
#include "core/result_io.h"
#include "core/sweep.h"
#include "core/topology.h"
#include "core/units.h"
#include "core/yaml_proto.h"
#include "nlohmann/json.hpp"

namespace ringmaster {
namespace {

namespace fs = std::filesystem;

int Fail(const std::string& message, int code = kExitUsage) {
  std::cerr << "ringmaster: error: " << message << "\n";
  return code;
}

// ---------------------------------------------------------------- topo

struct NumaNode {
  int index = 0;
  std::string cpus;
  double memory_gib = 0;
};
struct CpuTopology {
  int packages = 0, cores = 0, pus = 0;
  std::vector<NumaNode> numa;
};

// CPU packages, cores, hardware threads and NUMA nodes through hwloc.
CpuTopology DetectCpu() {
  CpuTopology c;
  hwloc_topology_t topo;
  if (hwloc_topology_init(&topo) != 0) return c;
  if (hwloc_topology_load(topo) != 0) {
    hwloc_topology_destroy(topo);
    return c;
  }
  c.packages = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PACKAGE);
  c.cores = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE);
  c.pus = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PU);
  const int n = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE);
  for (int i = 0; i < n; ++i) {
    hwloc_obj_t obj = hwloc_get_obj_by_type(topo, HWLOC_OBJ_NUMANODE, i);
    NumaNode node;
    node.index = static_cast<int>(obj->os_index);
    char* list = nullptr;
    if (hwloc_bitmap_list_asprintf(&list, obj->cpuset) >= 0 && list) {
      node.cpus = list;
      free(list);
    }
    node.memory_gib = obj->attr->numanode.local_memory / double(1 << 30);
    c.numa.push_back(node);
  }
  hwloc_topology_destroy(topo);
  return c;
}

// One core's memory copy rate, GB/s (bytes copied per second, the best of
// 5 copies of 256 MiB): the path between host ranks of one node, for a node
// without GPUs. 256 MiB is far past any CPU cache.
double MeasureMemoryCopyGbps() {
  constexpr size_t kBytes = size_t{256} << 20;
  std::vector<char> a(kBytes, 1), b(kBytes, 2);
  double best = 0;
  for (int i = 0; i < 5; ++i) {
    const auto start = std::chrono::steady_clock::now();
    std::memcpy(b.data(), a.data(), kBytes);
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
    if (s > 0) best = std::max(best, kBytes / s / 1e9);
    a[i] = b[kBytes - 1 - i];  // keep the copies from being elided
  }
  return best;
}

void FillCpu(const CpuTopology& cpu, v1::CpuSpec* out) {
  out->set_packages(cpu.packages);
  out->set_cores(cpu.cores);
  out->set_threads(cpu.pus);
  for (const NumaNode& n : cpu.numa) {
    v1::NumaSpec* numa = out->add_numa();
    numa->set_index(n.index);
    numa->set_cpus(n.cpus);
    numa->set_memory_gib(std::round(n.memory_gib * 10) / 10);
  }
}

}  // namespace

int TopoCommand(const TopoOptions& o) {
  const CpuTopology cpu = DetectCpu();
  const std::vector<DetectedNic> nics = DetectNics();
  // GPUs through the worker (it links CUDA and loads NVML).
  nlohmann::json gpus = nlohmann::json::object();
  std::string gpu_note;
  auto probe = RunAndCapture({o.worker.empty() ? DefaultWorkerPath() : o.worker,
                              "probe", "--topology"},
                             nullptr, absl::Seconds(60));
  if (probe.ok() && probe->exit_code == 0) {
    try {
      gpus = nlohmann::json::parse(probe->out);
    } catch (const std::exception& e) {
      gpu_note = std::string("unreadable GPU probe: ") + e.what();
    }
  } else {
    gpu_note = "the GPU probe (ringmaster-worker probe --topology) failed";
  }
  const auto& devices = gpus.value("devices", nlohmann::json::array());
  if (gpu_note.empty() && devices.empty())
    gpu_note = gpus.value("note", std::string("no GPU found"));

  v1::Topology t;
  *t.mutable_node() = DetectedNode(gpus.dump(), nics);
  t.set_id(TopologyId(t.node(), cpu.pus));
  FillCpu(cpu, t.mutable_node()->mutable_cpu());
  t.set_name(HostName());
  t.set_nodes(1);
  if (o.format == "yaml") {
    std::cout << "# ringmaster topo on " << HostName()
              << (gpu_note.empty() ? "" : " (" + gpu_note + ")") << "\n";
    if (devices.empty()) {
      // A node of host ranks: its intra-node path is the memory.
      const double gbps = MeasureMemoryCopyGbps();
      t.mutable_node()->mutable_cpu()->set_memory_gbps(std::round(gbps * 10) /
                                                       10);
      std::cout << "# no GPUs: a node of host ranks, one per core; "
                   "cpu.memory_gbps is one core's memcpy of 256 MiB, "
                   "measured now (best of 5)\n";
    }
    for (const DetectedNic& n : nics) {
      if (n.gbit_s <= 0) {
        std::cout << absl::StrFormat(
            "# NIC %s (%s): speed unknown (down or virtual), not in "
            "node.nics\n",
            n.name, n.kind);
      }
    }
    std::cout << MessageToYaml(t);
    return kExitOk;
  }
  std::cout << absl::StrFormat("host %s (topology id %s)\n", HostName(),
                               t.id());
  std::cout << absl::StrFormat(
      "CPU: %d package(s), %d core(s), %d hardware thread(s); %d NUMA "
      "node(s)\n",
      cpu.packages, cpu.cores, cpu.pus, cpu.numa.size());
  for (const NumaNode& n : cpu.numa) {
    std::cout << absl::StrFormat("  numa %d: cpus %s, %.1f GiB\n", n.index,
                                 n.cpus, n.memory_gib);
  }
  std::cout << absl::StrFormat("NICs: %d\n", nics.size());
  for (const DetectedNic& n : nics) {
    std::cout << absl::StrFormat(
        "  %-16s %-10s %s\n", n.name, n.kind,
        n.gbit_s > 0 ? absl::StrFormat("%g Gbit/s (%.1f GB/s per direction)",
                                       n.gbit_s, n.gbit_s / 8)
                     : "speed unknown (down or virtual)");
  }
  if (devices.empty()) {
    std::cout << "GPUs: none found (" << gpu_note << ")\n";
    return kExitOk;
  }
  std::cout << absl::StrFormat("GPUs: %d\n", devices.size());
  for (const auto& d : devices) {
    const double pcie =
        PcieGbps(d.value("pcie_generation", 0), d.value("pcie_width", 0));
    std::cout << absl::StrFormat(
        "  GPU%d %s  %s  %.0f GiB  numa %d  PCIe Gen%d x%d: %.1f GB/s per "
        "direction\n",
        d.value("index", 0), d.value("name", ""), d.value("bus_id", ""),
        d.value("memory_gib", 0.0), d.value("numa_node", -1),
        d.value("pcie_generation", 0), d.value("pcie_width", 0), pcie);
  }
  for (const auto& p : gpus.value("pairs", nlohmann::json::array())) {
    const int links = p.value("nvlink_links", 0);
    std::cout << absl::StrFormat(
        "  GPU%d <-> GPU%d: %s\n", p.value("a", 0), p.value("b", 0),
        links > 0 ? absl::StrFormat("NV%d (NVLink %d): %.0f GB/s per direction",
                                    links, gpus.value("nvlink_generation", 0),
                                    links * 25.0)
                  : std::string(p.value("p2p", false)
                                    ? "PCIe peer-to-peer"
                                    : "no peer access (through host)"));
    if (p.contains("nvlink_note"))
      std::cout << "    " << p.value("nvlink_note", "") << "\n";
  }
  return kExitOk;
}

// ------------------------------------------------------------- predict

namespace {

// All-reduce medians of the default path (no variant) from JSON Lines
// results; the node count from the hosts of the ranks.
absl::Status ReadMeasurements(const std::vector<std::string>& files,
                              std::vector<Measurement>* out, int* nranks,
                              int* nodes, v1::Provenance* provenance) {
  absl::Status read = ForEachResult(files, [&](const v1::Result& r) {
    if (r.status() != v1::OK || r.case_().bench() != v1::BENCH_COLLECTIVE ||
        r.case_().collective() != v1::ALL_REDUCE ||
        !r.case_().variant().empty() || r.stats().median_s() <= 0)
      return;
    if (*nranks == 0) {
      *nranks = r.nranks();
      *provenance = r.provenance();
      // A ladder rung runs on the launch's first nranks ranks.
      const auto& all_hosts = r.provenance().hosts();
      std::set<std::string> hosts(
          all_hosts.begin(),
          all_hosts.begin() + std::min(all_hosts.size(), r.nranks()));
      *nodes = std::max<int>(1, hosts.size());
    }
    if (r.nranks() != *nranks) return;  // one rank count per calibration
    out->push_back({v1::ALL_REDUCE, r.case_().size_bytes(), r.nranks(),
                    r.stats().median_s(),
                    CanonicalProtocol(r.nccl_protocol())});
  });
  if (!read.ok()) return read;
  if (out->empty())
    return absl::InvalidArgumentError(
        "no successful all-reduce results to fit");
  return absl::OkStatus();
}

// One-rank training steps measured, by (spec name, overlap): what a rank's
// compute takes, for the data-parallel model.
absl::StatusOr<std::map<std::pair<std::string, bool>, double>> ReadComputeSteps(
    const std::vector<std::string>& files) {
  std::map<std::pair<std::string, bool>, double> out;
  absl::Status read = ForEachResult(files, [&](const v1::Result& r) {
    if (r.status() == v1::OK && r.case_().bench() == v1::BENCH_TRAIN &&
        r.nranks() == 1 && r.train().compute_s() > 0) {
      out[{r.case_().spec_name(), r.case_().train().overlap()}] =
          r.stats().median_s();
    }
  });
  if (!read.ok()) return read;
  return out;
}

// Whether results measured on `measured` can calibrate `t`'s model: the
// same kind of GPU (a model fitted to CPU ranks, or to other GPUs, says
// nothing about this system's links).
absl::Status SameSystem(const v1::Provenance& measured, const v1::Topology& t,
                        const std::string& files) {
  std::string gpu;
  for (const std::string& m : measured.gpu_models())
    if (!m.empty()) gpu = m;
  const std::string host = measured.hosts().empty() ? "?" : measured.hosts(0);
  const std::string want = t.node().gpu().model();
  if (gpu.empty() && !IsHostNode(t.node())) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--calibrate: %s were measured on host ranks (%s) of %s, without "
        "GPUs; the topology %s describes %d %s GPU(s) per node. Calibrate on "
        "results measured on the system the topology describes",
        files, measured.backend().empty() ? "host" : measured.backend(), host,
        t.id(), t.node().gpus(), want.empty() ? "unnamed" : want));
  }
  if (!gpu.empty() && IsHostNode(t.node())) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--calibrate: %s were measured on %s GPUs of %s; the topology %s "
        "describes a node of host ranks without GPUs. Calibrate on results "
        "measured on the system the topology describes",
        files, gpu, host, t.id()));
  }
  auto lower = [](std::string s) {
    for (char& ch : s) ch = static_cast<char>(std::tolower(ch));
    return s;
  };
  if (!gpu.empty() && !want.empty() &&
      lower(gpu).find(lower(want)) == std::string::npos &&
      lower(want).find(lower(gpu)) == std::string::npos) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--calibrate: %s were measured on %s GPUs of %s; the topology %s "
        "describes %s GPUs. Calibrate on results measured on the system the "
        "topology describes",
        files, gpu, host, t.id(), want));
  }
  return absl::OkStatus();
}

std::string DtypeKey(v1::DataType t) {
  switch (t) {
    case v1::BFLOAT16:
      return "bf16";
    case v1::FLOAT16:
      return "fp16";
    case v1::FLOAT32:
      return "fp32";
    default:
      return std::string(DataTypeName(t));
  }
}

// --calibrate: fits `t`'s model to measured all-reduce results and prints
// the fit, point by point (held-out sizes marked).
int PredictCalibration(const PredictOptions& o, v1::Topology* topology,
                       nlohmann::json* out) {
  v1::Topology& t = *topology;
  nlohmann::json& summary = *out;
  std::vector<Measurement> all;
  int nranks = 0, measured_nodes = 1;
  v1::Provenance measured_on;
  if (auto s = ReadMeasurements(o.calibrate, &all, &nranks, &measured_nodes,
                                &measured_on);
      !s.ok())
    return Fail(std::string(s.message()));
  if (auto s = SameSystem(measured_on, t, absl::StrJoin(o.calibrate, ", "));
      !s.ok())
    return Fail(std::string(s.message()));
  if (nranks != measured_nodes * RanksPerNode(t.node())) {
    return Fail(absl::StrFormat(
        "the results ran on %d rank(s) over %d node(s); the topology %s has "
        "%d rank(s) per node",
        nranks, measured_nodes, t.id(), RanksPerNode(t.node())));
  }
  auto min_bytes = ParseSizeBytes(o.min_size);
  if (!min_bytes.ok())
    return Fail("--min-size: " + std::string(min_bytes.status().message()));
  // Distinct sizes >= the minimum; every k-th is held out.
  std::set<int64_t> sizes;
  for (const auto& m : all)
    if (m.size_bytes >= *min_bytes) sizes.insert(m.size_bytes);
  std::set<int64_t> held;
  int i = 0;
  for (int64_t s : sizes) {
    if (o.holdout > 0 && i % o.holdout == o.holdout - 1) held.insert(s);
    ++i;
  }
  std::vector<Measurement> fit_points;
  for (const auto& m : all)
    if (m.size_bytes >= *min_bytes && !held.count(m.size_bytes))
      fit_points.push_back(m);
  auto params = Calibrate(t, measured_nodes, fit_points, *min_bytes);
  if (!params.ok()) return Fail(std::string(params.status().message()));
  *t.mutable_model() = *params;
  std::cout << absl::StrFormat(
      "# calibration on %s: %d rank(s), %d node(s), %d point(s) >= %s, %d "
      "size(s) held out\n# %s\n",
      absl::StrJoin(o.calibrate, ", "), nranks, measured_nodes,
      fit_points.size(), FormatBytes(*min_bytes), held.size(),
      params->source());
  std::cout << "#        size   measured (us)  predicted (us)   rel err  "
               "held out\n";
  double worst_held = 0, worst_fit = 0;
  std::map<int64_t, std::vector<double>> by_size;
  for (const auto& m : all)
    if (m.size_bytes >= *min_bytes) by_size[m.size_bytes].push_back(m.time_s);
  for (const auto& [size, times] : by_size) {
    std::vector<double> v = times;
    std::sort(v.begin(), v.end());
    const double measured = v[v.size() / 2];
    auto p = PredictCollective(t, measured_nodes, v1::ALL_REDUCE, size);
    if (!p.ok()) return Fail(std::string(p.status().message()));
    const double rel = (p->time_s - measured) / measured;
    const bool is_held = held.count(size) > 0;
    (is_held ? worst_held : worst_fit) =
        std::max(is_held ? worst_held : worst_fit, std::abs(rel));
    std::cout << absl::StrFormat("%13s %15.2f %15.2f %+9.3f  %s\n",
                                 FormatBytes(size), measured * 1e6,
                                 p->time_s * 1e6, rel, is_held ? "yes" : "");
  }
  std::cout << absl::StrFormat(
      "# max |rel err|: %.3f on held-out sizes, %.3f on fitted sizes\n",
      worst_held, worst_fit);
  summary["model_allreduce_max_rel_err_ge1MiB"] =
      held.empty() ? worst_fit : worst_held;
  summary["model_allreduce_max_rel_err_fitted"] = worst_fit;
  summary["calibrated_points"] = fit_points.size();
  summary["held_out_sizes"] = held.size();
  summary["nvlink_efficiency"] = params->nvlink_efficiency();
  summary["pcie_efficiency"] = params->pcie_efficiency();
  summary["net_efficiency"] = params->net_efficiency();
  summary["intra_step_us"] = params->intra_step_us();
  summary["inter_step_us"] = params->inter_step_us();
  if (!o.params_out.empty()) {
    std::ofstream out(o.params_out);
    out << "# ringmaster predict --calibrate: the model section of " << t.id()
        << "\n"
        << MessageToYaml(*params);
    if (!out) return Fail(o.params_out + ": cannot write", kExitInternal);
  }
  return kExitOk;
}

using Points = std::vector<std::pair<v1::Collective, int64_t>>;

// The plan's (collective, size) points once each, in plan order, or
// --sizes MIN:MAX in powers of two for each of its collectives.
int PredictionPoints(const PredictOptions& o,
                     const std::vector<v1::Case>& cases, Points* out) {
  Points& points = *out;
  std::set<std::pair<int, int64_t>> seen;
  std::vector<v1::Collective> collectives;
  for (const v1::Case& c : cases) {
    if (c.bench() != v1::BENCH_COLLECTIVE) continue;
    if (std::find(collectives.begin(), collectives.end(), c.collective()) ==
        collectives.end())
      collectives.push_back(c.collective());
    if (seen.insert({c.collective(), c.size_bytes()}).second)
      points.push_back({c.collective(), c.size_bytes()});
  }
  if (!o.sizes.empty()) {
    std::vector<std::string> mm = absl::StrSplit(o.sizes, ':');
    auto lo = ParseSizeBytes(mm[0]);
    auto hi = ParseSizeBytes(mm.size() > 1 ? mm[1] : mm[0]);
    if (!lo.ok() || !hi.ok() || *lo <= 0 || *hi < *lo)
      return Fail("--sizes: expected MIN:MAX like 1MiB:8GiB");
    points.clear();
    for (v1::Collective c : collectives)
      for (int64_t s = *lo; s <= *hi; s *= 2) points.push_back({c, s});
  }
  return kExitOk;
}

// The collectives of `points` on `t`, with `nodes` nodes of `nranks` ranks.
int PredictCollectives(const v1::Plan& plan, const v1::Topology& t, int nodes,
                       int nranks, const Points& points,
                       nlohmann::json* summary) {
  const Ceilings ceil = PathCeilings(t);
  const v1::ModelParams m = EffectiveParams(t);
  std::cout << absl::StrFormat(
      "# predict %s on %s: %d node(s) x %d %s = %d ranks\n", plan.name(),
      t.name(), nodes, RanksPerNode(t.node()),
      IsHostNode(t.node()) ? "host rank(s)" : "GPU(s)", nranks);
  if (IsHostNode(t.node())) {
    std::cout << absl::StrFormat(
        "# speed of light per direction: memory %.4g GB/s per rank, network "
        "%.4g GB/s per node (%.4g per rank)\n",
        ceil.pcie_gbps, ceil.net_node_gbps, ceil.net_gpu_gbps);
  } else {
    std::cout << absl::StrFormat(
        "# speed of light per direction: NVLink %.4g GB/s, PCIe %.4g GB/s, "
        "network %.4g GB/s per node (%.4g per GPU)\n",
        ceil.nvlink_gbps, ceil.pcie_gbps, ceil.net_node_gbps,
        ceil.net_gpu_gbps);
  }
  std::cout << absl::StrFormat(
      "# model (%s): efficiency NVLink %.3f, PCIe %.3f, network %.3f; step "
      "%.2f us intra, %.2f us inter; base %.1f us\n",
      m.source(), m.nvlink_efficiency(), m.pcie_efficiency(),
      m.net_efficiency(), m.intra_step_us(), m.inter_step_us(), m.base_us());
  const double price = t.price_per_gpu_hour() * nranks;
  nlohmann::json rows = nlohmann::json::array();
  v1::Collective current = v1::COLLECTIVE_UNSPECIFIED;
  for (const auto& [c, size] : points) {
    auto p = PredictCollective(t, nodes, c, size);
    if (!p.ok()) return Fail(std::string(p.status().message()));
    if (c != current) {
      current = c;
      std::cout << absl::StrFormat(
          "#\n# %s\n#        size      time (us)   algbw (GB/s)   busbw "
          "(GB/s)  algorithm     bottleneck%s\n",
          CollectiveName(c), price > 0 ? "   cost/op (USD)" : "");
    }
    std::cout << absl::StrFormat(
        "%13s %14.2f %14.2f %14.2f  %-12s  %-10s", FormatBytes(size),
        p->time_s * 1e6, p->algbw_gbps, p->busbw_gbps,
        p->algorithm + "/" + p->protocol, p->bottleneck);
    if (price > 0)
      std::cout << absl::StrFormat("   %.3g", price * p->time_s / 3600);
    std::cout << "\n";
    rows.push_back({{"collective", std::string(CollectiveName(c))},
                    {"size_bytes", size},
                    {"time_s", p->time_s},
                    {"busbw_gbps", p->busbw_gbps},
                    {"algorithm", p->algorithm},
                    {"protocol", p->protocol},
                    {"bottleneck", p->bottleneck}});
  }
  (*summary)["nodes"] = nodes;
  (*summary)["predictions"] = rows;

  return kExitOk;
}

// --compare / --measured: the same points on other systems (each with its
// own model), and what was measured where it was.
int PredictSideBySide(const PredictOptions& o, const v1::Topology& t, int nodes,
                      const Points& points, nlohmann::json* summary) {
  std::vector<v1::Topology> systems = {t};
  for (const std::string& path : o.compare) {
    auto other = LoadTopology(path);
    if (!other.ok()) return Fail(std::string(other.status().message()));
    systems.push_back(*other);
  }
  std::map<std::pair<int, int64_t>, std::vector<double>> measured_busbw;
  absl::Status read = ForEachResult(o.measured, [&](const v1::Result& r) {
    if (r.status() == v1::OK && r.case_().bench() == v1::BENCH_COLLECTIVE &&
        r.case_().variant().empty()) {
      measured_busbw[{r.case_().collective(), r.case_().size_bytes()}]
          .push_back(r.busbw_gbps());
    }
  });
  if (!read.ok()) return Fail(std::string(read.message()));
  std::cout << "#\n# busbw (GB/s) side by side, " << nodes
            << " node(s) each (predicted"
            << (o.measured.empty() ? "" : "; measured") << ")\n#"
            << absl::StrFormat("%12s %-14s", "size", "collective");
  for (const v1::Topology& sys : systems)
    std::cout << absl::StrFormat(" %22s", sys.id().substr(0, 22));
  if (!o.measured.empty()) std::cout << absl::StrFormat(" %10s", "measured");
  std::cout << "\n";
  nlohmann::json side = nlohmann::json::array();
  for (const auto& [c, size] : points) {
    std::cout << absl::StrFormat(" %12s %-14s", FormatBytes(size),
                                 CollectiveName(c));
    nlohmann::json row = {{"collective", std::string(CollectiveName(c))},
                          {"size_bytes", size}};
    for (const v1::Topology& sys : systems) {
      auto p = PredictCollective(sys, nodes, c, size);
      if (!p.ok()) return Fail(std::string(p.status().message()));
      std::cout << absl::StrFormat(" %14.2f %-7s", p->busbw_gbps,
                                   p->bottleneck);
      row[sys.id()] = p->busbw_gbps;
    }
    auto m = measured_busbw.find({c, size});
    if (m != measured_busbw.end()) {
      std::vector<double> v = m->second;
      std::sort(v.begin(), v.end());
      std::cout << absl::StrFormat(" %10.2f", v[v.size() / 2]);
      row["measured"] = v[v.size() / 2];
    } else if (!o.measured.empty()) {
      std::cout << absl::StrFormat(" %10s", "-");
    }
    std::cout << "\n";
    side.push_back(row);
  }
  (*summary)["side_by_side"] = side;
  return kExitOk;
}

// Each training case at its own rung, and at one node and at the whole
// system described: the plan's ladder was written for the machine it ran
// on, and the question here is the system predicted. Inference cases go to
// `inference` by name (not modelled).
std::vector<std::pair<const v1::Case*, int>> TrainingRungs(
    const v1::Topology& t, int nranks, const std::vector<v1::Case>& cases,
    std::set<std::string>* inference) {
  std::set<std::tuple<std::string, bool, int>> done;
  std::vector<std::pair<const v1::Case*, int>> rungs;
  for (const v1::Case& c : cases) {
    if (c.bench() != v1::BENCH_TRAIN) continue;
    if (c.train().inference()) {
      inference->insert(c.spec_name());
      continue;
    }
    for (int n : {c.nranks() > 0 ? c.nranks() : nranks,
                  std::min(nranks, RanksPerNode(t.node())), nranks}) {
      if (done.insert({c.spec_name(), c.train().overlap(), n}).second)
        rungs.push_back({&c, n});
    }
  }
  return rungs;
}

// Training cases: the data-parallel step on each rung of the ladder.
int PredictTraining(const PredictOptions& o, const v1::Topology& t, int nranks,
                    const std::vector<v1::Case>& cases,
                    nlohmann::json* summary) {
  const double price = t.price_per_gpu_hour() * nranks;
  std::map<std::pair<std::string, bool>, double> measured_compute;
  if (!o.compute_from.empty()) {
    auto m = ReadComputeSteps(o.compute_from);
    if (!m.ok()) return Fail(std::string(m.status().message()));
    measured_compute = *m;
  }
  nlohmann::json train_rows = nlohmann::json::array();
  struct TrainRow {
    int order;  // the spec's first appearance, then overlap first
    std::string name;
    bool overlap;
    int ranks;
    std::string header;
    DpStepSpec spec;
    DpStepPrediction p;
  };
  std::vector<TrainRow> train;
  std::map<std::string, int> spec_order;
  std::set<std::string> inference;
  const std::vector<std::pair<const v1::Case*, int>> rungs =
      TrainingRungs(t, nranks, cases, &inference);
  for (const auto& [case_ptr, n] : rungs) {
    const v1::Case& c = *case_ptr;
    spec_order.emplace(c.spec_name(), static_cast<int>(spec_order.size()));
    DpStepSpec spec;
    spec.layers = c.train().layers();
    spec.hidden = c.train().hidden();
    spec.batch = c.train().strong() ? c.train().batch() / n : c.train().batch();
    spec.dtype_bytes = static_cast<int>(DataTypeSize(c.dtype()));
    spec.bucket_bytes =
        c.train().bucket_bytes() > 0 ? c.train().bucket_bytes() : 25 << 20;
    spec.overlap = c.train().overlap();
    std::string compute_source;
    auto mc = measured_compute.find({c.spec_name(), spec.overlap});
    if (mc != measured_compute.end()) {
      spec.compute_s = mc->second;
      compute_source = "measured on 1 rank";
    } else {
      auto secs =
          ComputeSeconds(t, spec, DtypeKey(c.dtype()), o.gemm_efficiency);
      if (!secs.ok()) return Fail(std::string(secs.status().message()));
      spec.compute_s = *secs;
      compute_source =
          absl::StrFormat("%.0f%% of the %s peak", o.gemm_efficiency * 100,
                          DtypeKey(c.dtype()));
    }
    // A rung of n ranks: whole nodes, or part of one.
    v1::Topology rung = t;
    const int rung_nodes =
        std::max(1, (n + RanksPerNode(t.node()) - 1) / RanksPerNode(t.node()));
    if (n < RanksPerNode(t.node())) SetRanksPerNode(rung.mutable_node(), n);
    auto p = PredictDpStep(rung, rung_nodes, spec);
    if (!p.ok()) return Fail(std::string(p.status().message()));
    const std::string header = absl::StrFormat(
        "#\n# train %s: L%d H%d B%d/rank %s, bucket %s, %s; compute %s\n"
        "#ranks  step (ms)  compute (ms)  exposed (ms)  comm (ms)  "
        "buckets    samples/s%s\n",
        c.spec_name(), spec.layers, spec.hidden, spec.batch,
        DataTypeName(c.dtype()), FormatBytes(spec.bucket_bytes),
        spec.overlap ? "overlap" : "no overlap", compute_source,
        price > 0 ? "   USD/step  USD/1M samples" : "");
    train.push_back({spec_order[c.spec_name()], c.spec_name(), spec.overlap, n,
                     header, spec, *p});
  }
  std::stable_sort(train.begin(), train.end(),
                   [](const TrainRow& a, const TrainRow& b) {
                     return std::make_tuple(a.order, !a.overlap, a.ranks) <
                            std::make_tuple(b.order, !b.overlap, b.ranks);
                   });
  std::string last_header;
  for (const TrainRow& r : train) {
    if (r.header != last_header) std::cout << (last_header = r.header);
    const double samples =
        static_cast<double>(r.spec.batch) * r.ranks / r.p.step_s;
    std::cout << absl::StrFormat("%6d %10.3f %13.3f %13.3f %10.3f %8d %12.0f",
                                 r.ranks, r.p.step_s * 1e3, r.p.compute_s * 1e3,
                                 r.p.exposed_comm_s * 1e3, r.p.comm_s * 1e3,
                                 r.p.buckets, samples);
    const double rung_price = t.price_per_gpu_hour() * r.ranks;
    if (rung_price > 0) {
      const double per_step = rung_price * r.p.step_s / 3600;
      const double per_million =
          per_step / (static_cast<double>(r.spec.batch) * r.ranks) * 1e6;
      std::cout << absl::StrFormat("   %.4g  %.4g", per_step, per_million);
    }
    std::cout << "\n";
    train_rows.push_back({{"spec", r.name},
                          {"overlap", r.overlap},
                          {"ranks", r.ranks},
                          {"step_s", r.p.step_s},
                          {"compute_s", r.p.compute_s},
                          {"exposed_comm_s", r.p.exposed_comm_s},
                          {"comm_s", r.p.comm_s}});
  }
  if (!train_rows.empty()) (*summary)["train"] = train_rows;
  for (const std::string& name : inference) {
    std::cout << absl::StrFormat(
        "#\n# %s (inference): not predicted: the model covers collectives "
        "and data-parallel training steps; a forward pass alone has no "
        "communication to model\n",
        name);
  }
  if (!inference.empty())
    (*summary)["not_predicted"] =
        std::vector<std::string>(inference.begin(), inference.end());
  return kExitOk;
}

}  // namespace

int PredictCommand(const PredictOptions& o) {
  auto topo = LoadTopology(o.topology);
  if (!topo.ok()) return Fail(std::string(topo.status().message()));
  v1::Topology t = *topo;
  if (o.price_per_gpu_hour >= 0) t.set_price_per_gpu_hour(o.price_per_gpu_hour);
  const int nodes = o.nodes > 0 ? o.nodes : std::max(1, t.nodes());
  nlohmann::json summary;
  summary["topology"] = t.id();
  if (!o.calibrate.empty()) {
    if (int code = PredictCalibration(o, &t, &summary); code != kExitOk)
      return code;
  }
  if (!o.plan.empty()) {
    auto plan = LoadPlanFile(o.plan);
    if (!plan.ok()) return Fail(std::string(plan.status().message()));
    const int nranks = nodes * RanksPerNode(t.node());
    // A plan's GPU sizes where the topology is one of GPUs.
    auto cases = ExpandPlan(
        PlanForBackend(*plan, IsHostNode(t.node()) ? "host" : "cuda"), 100000,
        nranks);
    if (!cases.ok()) return Fail(std::string(cases.status().message()));
    Points points;
    if (int code = PredictionPoints(o, *cases, &points); code != kExitOk)
      return code;
    if (int code =
            PredictCollectives(*plan, t, nodes, nranks, points, &summary);
        code != kExitOk)
      return code;
    if (!o.compare.empty() || !o.measured.empty()) {
      if (int code = PredictSideBySide(o, t, nodes, points, &summary);
          code != kExitOk)
        return code;
    }
    if (int code = PredictTraining(o, t, nranks, *cases, &summary);
        code != kExitOk)
      return code;
  }
  if (!o.summary_out.empty()) {
    std::ofstream out(o.summary_out);
    out << summary.dump(1) << "\n";
    if (!out) return Fail(o.summary_out + ": cannot write", kExitInternal);
  }
  if (o.format == "json") std::cout << summary.dump() << "\n";
  return kExitOk;
}

}  // namespace ringmaster
