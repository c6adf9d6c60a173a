// The collective section of a plan case (bench: collective).
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

// A collective's case (bench: collective, the default): what it
// reduces, its sizes, types, ops and placements, timing and ladder.
absl::Status PlanParser::ParseCollectiveCase(const YAML::Node& node,
                                             const std::string& prefix,
                                             const CaseKeys& get,
                                             v1::CaseSpec* out) const {
  v1::CaseSpec& spec = *out;
  std::string f;
  std::vector<const char*> node_keys = {
      "method", "direction", "traffic",    "pattern", "memory",
      "path",   "shapes",    "slow_ratio", "members", "repeat"};
  node_keys.insert(node_keys.end(), kTrainKeys.begin(), kTrainKeys.end());
  node_keys.insert(node_keys.end(), kTransformerKeys.begin(),
                   kTransformerKeys.end());
  node_keys.insert(node_keys.end(), kServeKeys.begin(), kServeKeys.end());
  for (const char* key : node_keys) {
    YAML::Node n = get(key, &f);
    if (n) {
      return Error(n, f,
                   "belongs to node benchmarks (bench: p2p, latency, ...), "
                   "not to collectives");
    }
  }

  YAML::Node coll = get("collective", &f);
  if (!coll) {
    return Error(
        node, f,
        absl::StrFormat("missing: expected one of: %s", CollectiveNames()));
  }
  if (!coll.IsScalar() || !ParseCollective(coll.Scalar())) {
    return Error(coll, f,
                 absl::StrFormat("expected one of: %s, got %s",
                                 CollectiveNames(), Show(coll)));
  }
  spec.set_collective(*ParseCollective(coll.Scalar()));

  YAML::Node sizes = get("sizes", &f);
  if (!sizes) {
    return Error(
        node, f,
        "missing: expected {min: 8B, max: 64MiB, factor: 2} or a list");
  }
  RM_ASSIGN_OR_RETURN(*spec.mutable_sizes(), ParseSizes(sizes, f));

  RM_RETURN_IF_ERROR(ParseCollectiveLists(get, &spec));

  YAML::Node root = get("root", &f);
  if (root) {
    RM_ASSIGN_OR_RETURN(int64_t r, Int(root, f, 0, 65535));
    spec.set_root(static_cast<int32_t>(r));
  }

  RM_RETURN_IF_ERROR(ParseVerifyAndBackend(get, &spec));

  YAML::Node timing = get("timing", &f);
  if (timing) {
    RM_ASSIGN_OR_RETURN(*spec.mutable_timing(), ParseTiming(timing, f));
    if (timing.IsMap() && timing["mode"]) {
      std::string mf = f + ".mode";
      RM_ASSIGN_OR_RETURN(std::vector<YAML::Node> items,
                          ScalarList(timing["mode"], mf));
      for (const auto& item : items) {
        std::string m = absl::AsciiStrToLower(item.Scalar());
        if (m == "pipelined") {
          spec.add_modes(v1::PIPELINED);
        } else if (m == "per_op") {
          spec.add_modes(v1::PER_OP);
        } else if (m == "graph") {
          spec.add_modes(v1::GRAPH);
        } else {
          return Error(
              item, mf,
              absl::StrFormat("expected pipelined, per_op or graph, got \"%s\"",
                              item.Scalar()));
        }
      }
    }
  } else {
    *spec.mutable_timing() = DefaultTiming();
  }
  if (spec.modes_size() == 0) spec.add_modes(v1::PIPELINED);

  if (YAML::Node ladder = get("ladder", &f)) {
    RM_RETURN_IF_ERROR(ParseLadder(ladder, f, &spec));
  }

  // Every size must hold at least one element of every dtype.
  int64_t smallest = spec.sizes().list_bytes_size() > 0
                         ? *std::min_element(spec.sizes().list_bytes().begin(),
                                             spec.sizes().list_bytes().end())
                         : spec.sizes().min_bytes();
  for (int i = 0; i < spec.dtypes_size(); ++i) {
    auto dt = static_cast<v1::DataType>(spec.dtypes(i));
    if (smallest < DataTypeSize(dt)) {
      return Error(sizes, prefix + ".sizes",
                   absl::StrFormat("%s is smaller than one %s element (%d B)",
                                   FormatBytes(smallest), DataTypeName(dt),
                                   DataTypeSize(dt)));
    }
  }
  return absl::OkStatus();
}

// A collective's data types, ops and placements (defaults: float32, sum,
// out of place and in place where the collective has both).
absl::Status PlanParser::ParseCollectiveLists(const CaseKeys& get,
                                              v1::CaseSpec* out) const {
  v1::CaseSpec& spec = *out;
  std::string f;
  YAML::Node dtypes = get("dtypes", &f);
  if (dtypes) {
    RM_ASSIGN_OR_RETURN(std::vector<YAML::Node> items, ScalarList(dtypes, f));
    for (const auto& item : items) {
      auto t = ParseDataType(item.Scalar());
      if (!t) {
        return Error(item, f,
                     absl::StrFormat("expected one of: %s, got \"%s\"",
                                     DataTypeNames(), item.Scalar()));
      }
      if (*t == v1::TFLOAT32 || *t == v1::FLOAT8_E4M3) {
        return Error(item, f,
                     absl::StrFormat("%s is a GEMM type (bench: gemm), not a "
                                     "collective's",
                                     item.Scalar()));
      }
      spec.add_dtypes(*t);
    }
  } else {
    spec.add_dtypes(v1::FLOAT32);
  }

  YAML::Node ops = get("ops", &f);
  if (ops) {
    if (!IsReduction(spec.collective())) {
      return Error(ops, f,
                   absl::StrFormat("%s does not reduce; remove `ops`",
                                   CollectiveName(spec.collective())));
    }
    RM_ASSIGN_OR_RETURN(std::vector<YAML::Node> items, ScalarList(ops, f));
    for (const auto& item : items) {
      auto op = ParseReduceOp(item.Scalar());
      if (!op) {
        return Error(item, f,
                     absl::StrFormat("expected one of: %s, got \"%s\"",
                                     ReduceOpNames(), item.Scalar()));
      }
      spec.add_ops(*op);
    }
  } else if (IsReduction(spec.collective())) {
    spec.add_ops(v1::SUM);
  }

  YAML::Node placement = get("placement", &f);
  if (placement) {
    RM_ASSIGN_OR_RETURN(std::vector<YAML::Node> items,
                        ScalarList(placement, f));
    for (const auto& item : items) {
      std::string p = absl::AsciiStrToLower(item.Scalar());
      if (p == "out_of_place") {
        spec.add_in_place(false);
      } else if (p == "in_place") {
        spec.add_in_place(true);
      } else if (p == "both") {
        spec.add_in_place(false);
        spec.add_in_place(true);
      } else {
        return Error(item, f,
                     absl::StrFormat("expected out_of_place, in_place or both, "
                                     "got \"%s\"",
                                     item.Scalar()));
      }
    }
  } else {
    spec.add_in_place(false);
    if (!NoInPlace(spec.collective())) spec.add_in_place(true);
  }
  if (NoInPlace(spec.collective())) {
    for (bool ip : spec.in_place()) {
      if (ip) {
        return Error(
            placement, f,
            absl::StrFormat("%s has no in-place form; use out_of_place",
                            CollectiveName(spec.collective())));
      }
    }
  }

  return absl::OkStatus();
}

}  // namespace plan_internal
}  // namespace ringmaster
