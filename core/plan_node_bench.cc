// The node-benchmark sections of a plan case (bench: p2p, latency,
// host_device, local_copy, triad, gemm, find_slow).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "core/names.h"
#include "core/plan_parser.h"
#include "core/status_macros.h"
#include "core/units.h"

namespace ringmaster {
namespace plan_internal {

// The keys of a node benchmark (bench: p2p, latency, host_device,
// local_copy, triad, gemm); collective-only keys are errors.
absl::Status PlanParser::ParseBenchCase(const YAML::Node& node,
                                        const CaseKeys& get,
                                        v1::CaseSpec* spec) const {
  std::string f;
  const v1::Bench bench = spec->bench();
  const std::string bname(BenchName(bench));
  if (bench == v1::BENCH_INFERENCE) return ParseServeCase(node, get, spec);
  for (const char* key : kServeKeys) {
    YAML::Node n = get(key, &f);
    if (n)
      return Error(
          n, f,
          absl::StrFormat("belongs to bench: inference, not bench: %s", bname));
  }
  if (bench == v1::BENCH_TRAIN) return ParseTrainCase(node, get, spec);
  if (bench == v1::BENCH_TRANSFORMER)
    return ParseTransformerCase(node, get, spec);
  for (const char* key : kTransformerKeys) {
    YAML::Node n = get(key, &f);
    if (n)
      return Error(n, f,
                   absl::StrFormat(
                       "belongs to bench: transformer, not bench: %s", bname));
  }
  for (const char* key : kTrainKeys) {
    YAML::Node n = get(key, &f);
    if (n)
      return Error(
          n, f,
          absl::StrFormat("belongs to bench: train, not bench: %s", bname));
  }
  for (const char* key : {"collective", "ops", "placement", "root", "ladder"}) {
    YAML::Node n = get(key, &f);
    if (n)
      return Error(
          n, f,
          absl::StrFormat("is a collective's key; bench: %s has none", bname));
  }
  RM_RETURN_IF_ERROR(ParseFindSlowKeys(get, spec));
  RM_RETURN_IF_ERROR(ParseTransferKeys(get, spec));
  RM_RETURN_IF_ERROR(ParsePathKeys(get, spec));
  RM_RETURN_IF_ERROR(ParseOperands(node, get, spec));
  return ParseBenchCommon(get, spec);
}

absl::Status PlanParser::NotHere(const CaseKeys& get, const v1::CaseSpec& spec,
                                 const char* key, const char* why) const {
  std::string f;
  YAML::Node n = get(key, &f);
  if (!n) return absl::OkStatus();
  return Error(n, f,
               absl::StrFormat("bench: %s %s", BenchName(spec.bench()), why));
}

// The bad-node finder's keys (bench: find_slow): its threshold, members
// and repeats; errors on any other bench.
absl::Status PlanParser::ParseFindSlowKeys(const CaseKeys& get,
                                           v1::CaseSpec* spec) const {
  std::string f;
  const v1::Bench bench = spec->bench();
  const bool find_slow = bench == v1::BENCH_FIND_SLOW;
  // The bad-node finder: P2P pair tests (method, direction, traffic and
  // one size as p2p's), a threshold and what the members are.
  if (find_slow) {
    RM_RETURN_IF_ERROR(NotHere(get, *spec, "pattern",
                               "chooses its pairs itself (disjoint pairs, "
                               "then splits and a confirmation)"));
    spec->set_slow_ratio(0.8);
    if (YAML::Node r = get("slow_ratio", &f); r) {
      RM_ASSIGN_OR_RETURN(double v, Number(r, f, 0, 0.99));
      spec->set_slow_ratio(v);
    }
    spec->set_members("ranks");
    if (YAML::Node m = get("members", &f); m) {
      std::string v = m.IsScalar() ? absl::AsciiStrToLower(m.Scalar()) : "";
      if (v != "ranks" && v != "nodes") {
        return Error(
            m, f, absl::StrFormat("expected ranks or nodes, got %s", Show(m)));
      }
      spec->set_members(v);
    }
    spec->set_repeat(1);
    if (YAML::Node r = get("repeat", &f); r) {
      RM_ASSIGN_OR_RETURN(int64_t v, Int(r, f, 1, 9));
      spec->set_repeat(static_cast<int32_t>(v));
    }
  } else {
    RM_RETURN_IF_ERROR(
        NotHere(get, *spec, "slow_ratio", "is not the bad-node finder"));
    RM_RETURN_IF_ERROR(
        NotHere(get, *spec, "members", "is not the bad-node finder"));
    RM_RETURN_IF_ERROR(
        NotHere(get, *spec, "repeat", "is not the bad-node finder"));
  }
  return absl::OkStatus();
}

// Who moves the bytes and how: methods, directions, one-way or both, and
// which ranks at once.
absl::Status PlanParser::ParseTransferKeys(const CaseKeys& get,
                                           v1::CaseSpec* spec) const {
  std::string f;
  const v1::Bench bench = spec->bench();
  const bool gemm = bench == v1::BENCH_GEMM;
  const bool find_slow = bench == v1::BENCH_FIND_SLOW;
  // Methods: unspecified = the backend's own (ce or sm on GPUs, cpu on
  // the host backend).
  std::vector<v1::CopyMethod> methods;
  std::vector<v1::CopyMethod> method_ok = {v1::COPY_ENGINE, v1::SM, v1::CPU};
  if (bench == v1::BENCH_TRIAD || gemm) {
    RM_RETURN_IF_ERROR(
        NotHere(get, *spec, "method", "has one method per backend"));
    methods = {v1::COPY_METHOD_UNSPECIFIED};
  } else {
    RM_RETURN_IF_ERROR(EnumList<v1::CopyMethod>(
        get, "method", &ParseCopyMethod, CopyMethodNames(), method_ok,
        {v1::COPY_METHOD_UNSPECIFIED}, &methods));
  }
  for (auto m : methods) spec->add_methods(m);

  std::vector<v1::CopyDirection> dirs;
  if (bench == v1::BENCH_P2P || find_slow) {
    RM_RETURN_IF_ERROR(EnumList<v1::CopyDirection>(
        get, "direction", &ParseCopyDirection, "write, read",
        {v1::WRITE, v1::READ}, {v1::WRITE}, &dirs));
  } else if (bench == v1::BENCH_HOST_DEVICE) {
    RM_RETURN_IF_ERROR(EnumList<v1::CopyDirection>(
        get, "direction", &ParseCopyDirection, "to_device, to_host",
        {v1::TO_DEVICE, v1::TO_HOST}, {v1::TO_DEVICE, v1::TO_HOST}, &dirs));
  } else {
    RM_RETURN_IF_ERROR(NotHere(get, *spec, "direction", "has no direction"));
  }
  for (auto d : dirs) spec->add_directions(d);

  if (bench == v1::BENCH_P2P || bench == v1::BENCH_HOST_DEVICE || find_slow) {
    YAML::Node traffic = get("traffic", &f);
    if (traffic) {
      RM_ASSIGN_OR_RETURN(std::vector<YAML::Node> items,
                          ScalarList(traffic, f));
      for (const auto& item : items) {
        std::string t = absl::AsciiStrToLower(item.Scalar());
        if (t != "uni" && t != "bidir") {
          return Error(item, f,
                       absl::StrFormat("expected uni or bidir, got \"%s\"",
                                       item.Scalar()));
        }
        spec->add_bidirectional(t == "bidir");
      }
    } else {
      // Pair tests load both directions: a slow member's link shows
      // whichever way it is slow.
      spec->add_bidirectional(find_slow);
    }
  } else {
    RM_RETURN_IF_ERROR(
        NotHere(get, *spec, "traffic", "has no bidirectional form"));
  }

  std::vector<v1::TransferPattern> patterns;
  if (bench == v1::BENCH_P2P) {
    RM_RETURN_IF_ERROR(EnumList<v1::TransferPattern>(
        get, "pattern", &ParseTransferPattern, "pairs, all_to_one, one_to_all",
        {v1::PAIR, v1::ALL_TO_ONE, v1::ONE_TO_ALL}, {v1::PAIR}, &patterns));
  } else if (find_slow) {
    patterns = {v1::ALL_RANKS};  // one case that tests the pairs it picks
  } else if (bench == v1::BENCH_LATENCY) {
    RM_RETURN_IF_ERROR(NotHere(get, *spec, "pattern",
                               "runs between pairs (path: peer) or host "
                               "to each GPU (path: host)"));
  } else {
    RM_RETURN_IF_ERROR(EnumList<v1::TransferPattern>(
        get, "pattern", &ParseTransferPattern, "one, all",
        {v1::ONE_RANK, v1::ALL_RANKS}, {v1::ONE_RANK}, &patterns));
  }
  for (auto p : patterns) spec->add_patterns(p);

  return absl::OkStatus();
}

// Host memory kinds (host_device) and latency paths (latency).
absl::Status PlanParser::ParsePathKeys(const CaseKeys& get,
                                       v1::CaseSpec* spec) const {
  std::string f;
  const v1::Bench bench = spec->bench();
  if (bench == v1::BENCH_HOST_DEVICE) {
    std::vector<v1::HostMemory> mem;
    RM_RETURN_IF_ERROR(EnumList<v1::HostMemory>(
        get, "memory", &ParseHostMemory, HostMemoryNames(),
        {v1::PINNED, v1::PAGEABLE}, {v1::PINNED}, &mem));
    for (auto m : mem) spec->add_host_memory(m);
  } else {
    RM_RETURN_IF_ERROR(
        NotHere(get, *spec, "memory", "has no host memory kind"));
  }

  if (bench == v1::BENCH_LATENCY) {
    std::vector<v1::LatencyPath> paths;
    RM_RETURN_IF_ERROR(EnumList<v1::LatencyPath>(
        get, "path", &ParseLatencyPath, LatencyPathNames(),
        {v1::PEER, v1::HOST}, {v1::PEER}, &paths));
    for (auto p : paths) spec->add_latency_paths(p);
  } else {
    RM_RETURN_IF_ERROR(NotHere(get, *spec, "path", "has no latency path"));
  }

  return absl::OkStatus();
}

// What each operation works on: GEMM shapes and types, or sizes.
absl::Status PlanParser::ParseOperands(const YAML::Node& node,
                                       const CaseKeys& get,
                                       v1::CaseSpec* spec) const {
  std::string f;
  const v1::Bench bench = spec->bench();
  const bool gemm = bench == v1::BENCH_GEMM;
  if (gemm) {
    RM_RETURN_IF_ERROR(
        NotHere(get, *spec, "sizes", "takes shapes (m, n, k), not sizes"));
    YAML::Node shapes = get("shapes", &f);
    if (!shapes) {
      return Error(
          node, f,
          "missing: expected a list of 8192 or 4096x4096x8192 (m x n x k)");
    }
    RM_ASSIGN_OR_RETURN(std::vector<YAML::Node> items, ScalarList(shapes, f));
    for (const auto& item : items) {
      std::vector<std::string> parts =
          absl::StrSplit(absl::AsciiStrToLower(item.Scalar()), 'x');
      std::vector<int64_t> dims;
      for (const auto& p : parts) {
        int64_t d = 0;
        if (!absl::SimpleAtoi(p, &d) || d < 1 || d > 131072)
          dims.clear(), dims.push_back(-1);
        else
          dims.push_back(d);
        if (dims.back() < 0) break;
      }
      if ((dims.size() != 1 && dims.size() != 3) || dims[0] < 0) {
        return Error(item, f,
                     absl::StrFormat("expected n (square) or MxNxK with each "
                                     "in [1, 131072], got \"%s\"",
                                     item.Scalar()));
      }
      v1::GemmShape* s = spec->add_gemm_shapes();
      s->set_m(dims[0]);
      s->set_n(dims.size() == 3 ? dims[1] : dims[0]);
      s->set_k(dims.size() == 3 ? dims[2] : dims[0]);
    }
    YAML::Node dtypes = get("dtypes", &f);
    if (dtypes) {
      RM_ASSIGN_OR_RETURN(std::vector<YAML::Node> items, ScalarList(dtypes, f));
      for (const auto& item : items) {
        auto t = ParseDataType(item.Scalar());
        if (!t ||
            !(*t == v1::FLOAT32 || *t == v1::TFLOAT32 || *t == v1::BFLOAT16 ||
              *t == v1::FLOAT16 || *t == v1::FLOAT8_E4M3)) {
          return Error(
              item, f,
              absl::StrFormat("expected one of: float32, tf32, bfloat16, "
                              "float16, fp8_e4m3, got \"%s\"",
                              item.Scalar()));
        }
        spec->add_dtypes(*t);
      }
    } else {
      spec->add_dtypes(v1::FLOAT32);
    }
  } else {
    RM_RETURN_IF_ERROR(NotHere(get, *spec, "shapes",
                               "takes sizes; shapes belong to bench: gemm"));
    RM_RETURN_IF_ERROR(NotHere(get, *spec, "dtypes",
                               "moves bytes; dtypes belong to bench: gemm"));
    YAML::Node sizes = get("sizes", &f);
    if (sizes) {
      RM_ASSIGN_OR_RETURN(*spec->mutable_sizes(), ParseSizes(sizes, f));
    } else if (bench == v1::BENCH_LATENCY) {
      spec->mutable_sizes()->add_list_bytes(8);  // one pointer / one word
    } else {
      return Error(node, f, "missing: expected a list of sizes, like [512MiB]");
    }
    spec->add_dtypes(v1::UINT8);
  }

  return absl::OkStatus();
}

// Keys every node benchmark shares (verify, backend, timing) and the
// checks across them.
absl::Status PlanParser::ParseBenchCommon(const CaseKeys& get,
                                          v1::CaseSpec* spec) const {
  std::string f;
  RM_RETURN_IF_ERROR(ParseVerifyAndBackend(get, spec));
  // Node benchmarks default to nvbandwidth's sampling: a fixed number of
  // operations per sample behind a held stream, median of the samples.
  *spec->mutable_timing() = DefaultBenchTiming();
  if (YAML::Node timing = get("timing", &f)) {
    if (timing.IsMap() && timing["mode"]) {
      return Error(timing["mode"], f + ".mode",
                   "node benchmarks have one timing method");
    }
    RM_ASSIGN_OR_RETURN(*spec->mutable_timing(),
                        ParseTiming(timing, f, DefaultBenchTiming()));
  }
  // GPU operations wait in the stream behind a spin kernel; CUDA's launch
  // queue holds about a thousand, so a sample stays well below that.
  if (spec->backend() != v1::BACKEND_HOST &&
      spec->timing().fixed_iters_per_sample() > 256) {
    return Error(get("timing", &f), f + ".iters",
                 "GPU node benchmarks queue at most 256 operations per sample");
  }
  for (auto m : spec->methods()) {
    if (m == v1::CPU && spec->backend() == v1::BACKEND_CUDA) {
      return Error(get("method", &f), f,
                   "method cpu runs on the host backend, not cuda");
    }
    if ((m == v1::COPY_ENGINE || m == v1::SM) &&
        spec->backend() == v1::BACKEND_HOST) {
      return Error(get("method", &f), f,
                   "methods ce and sm need GPUs (backend: cuda)");
    }
  }
  return absl::OkStatus();
  return absl::OkStatus();
}

}  // namespace plan_internal
}  // namespace ringmaster
