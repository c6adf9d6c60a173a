#include "core/plan.h"

#include <openssl/evp.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <span>
#include <sstream>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "core/names.h"
#include "core/status_macros.h"
#include "core/units.h"
#include "yaml-cpp/yaml.h"

namespace ringmaster {
namespace {

constexpr const char* kTopKeys[] = {"name",  "description",    "ranks",
                                    "nodes", "ranks_per_node", "defaults",
                                    "cases", "variants"};
constexpr const char* kVariantKeys[] = {"name", "env", "ceiling",
                                        "description"};
// Keys only bench: train takes; every case may carry them (the other
// parsers say which bench they belong to).
constexpr std::array<const char*, 15> kTrainKeys = {
    "model",          "optimizer",  "lr",          "bucket",
    "overlap",        "steps",      "check_steps", "scaling",
    "comm",           "mode",       "schedule",    "deferred_layers",
    "master_weights", "loss_scale", "gemm"};
constexpr std::array<const char*, 23> kOtherCaseKeys = {
    "name",   "collective", "sizes",   "dtypes",  "ops",    "placement",
    "root",   "verify",     "backend", "timing",  "ladder", "bench",
    "method", "direction",  "traffic", "pattern", "memory", "path",
    "shapes", "slow_ratio", "members", "repeat",  "params"};
// What a plug-in kind's case may say.
constexpr const char* kPluginCaseKeys[] = {"name",    "bench",  "params",
                                           "timing",  "backend", "verify",
                                           "ladder"};
template <size_t A, size_t B>
constexpr std::array<const char*, A + B> Concat(
    const std::array<const char*, A>& a, const std::array<const char*, B>& b) {
  std::array<const char*, A + B> out{};
  for (size_t i = 0; i < A; ++i) out[i] = a[i];
  for (size_t i = 0; i < B; ++i) out[A + i] = b[i];
  return out;
}
constexpr auto kCaseKeys = Concat(kOtherCaseKeys, kTrainKeys);
constexpr const char* kModelKeys[] = {"layers", "hidden", "batch"};
constexpr const char* kTimingKeys[] = {"warmup",
                                       "min_samples",
                                       "max_samples",
                                       "target_ci",
                                       "max_time",
                                       "sample_target",
                                       "max_iters_per_sample",
                                       "mode",
                                       "warmup_time",
                                       "iters",
                                       "ci"};
constexpr const char* kSizeKeys[] = {"min", "max", "factor"};

// Reads one plan; every method returns errors already formatted as
// "<file>:<line>: <field>: <what>".
class PlanParser {
 public:
  PlanParser(std::string file, const PlanLimits& limits)
      : file_(std::move(file)), limits_(limits) {}

  absl::StatusOr<v1::Plan> Parse(const YAML::Node& root) {
    v1::Plan plan;
    if (!root.IsDefined() || root.IsNull()) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s:1: (plan): expected a mapping with `name` and "
                          "`cases`, got an empty document",
                          file_));
    }
    if (!root.IsMap()) {
      return Error(root, "(plan)",
                   "expected a mapping with `name` and `cases`");
    }
    RM_RETURN_IF_ERROR(CheckKeys(root, "", kTopKeys));
    RM_ASSIGN_OR_RETURN(*plan.mutable_name(),
                        RequiredString(root, root["name"], "name"));
    if (root["description"]) {
      RM_ASSIGN_OR_RETURN(*plan.mutable_description(),
                          String(root["description"], "description"));
    }
    if (root["ranks"]) {
      RM_ASSIGN_OR_RETURN(int64_t ranks, Int(root["ranks"], "ranks", 1, 65536));
      plan.set_ranks(static_cast<int32_t>(ranks));
    }
    // Placement: nodes x ranks_per_node.
    if (root["ranks_per_node"]) {
      RM_ASSIGN_OR_RETURN(
          int64_t k, Int(root["ranks_per_node"], "ranks_per_node", 1, 4096));
      plan.set_ranks_per_node(static_cast<int32_t>(k));
      ranks_per_node_ = static_cast<int>(k);
    }
    if (root["nodes"]) {
      RM_ASSIGN_OR_RETURN(int64_t n, Int(root["nodes"], "nodes", 1, 65536));
      if (!root["ranks_per_node"]) {
        return Error(root["nodes"], "nodes",
                     "needs ranks_per_node (ranks = nodes x ranks_per_node)");
      }
      const int64_t total = n * plan.ranks_per_node();
      if (total > 65536) {
        return Error(root["nodes"], "nodes",
                     absl::StrFormat("%d nodes x %d ranks exceed 65536 ranks",
                                     n, plan.ranks_per_node()));
      }
      if (root["ranks"] && plan.ranks() != total) {
        return Error(root["ranks"], "ranks",
                     absl::StrFormat("%d, but nodes x ranks_per_node = %d",
                                     plan.ranks(), total));
      }
      plan.set_nodes(static_cast<int32_t>(n));
      plan.set_ranks(static_cast<int32_t>(total));
    }
    YAML::Node defaults = root["defaults"];
    if (defaults) {
      if (!defaults.IsMap()) {
        return Error(defaults, "defaults",
                     "expected a mapping of case keys (sizes, dtypes, ...)");
      }
      RM_RETURN_IF_ERROR(CheckKeys(defaults, "defaults.", kCaseKeys));
      if (defaults["name"]) {
        return Error(defaults["name"], "defaults.name",
                     "a name belongs to each case, not to defaults");
      }
    }
    YAML::Node cases = root["cases"];
    if (!cases)
      return Error(root, "cases", "missing: expected a list of cases");
    if (!cases.IsSequence() || cases.size() == 0) {
      return Error(cases, "cases", "expected a non-empty list of cases");
    }
    if (static_cast<int>(cases.size()) > limits_.max_case_specs) {
      return Error(cases, "cases",
                   absl::StrFormat("at most %d cases are allowed, got %d",
                                   limits_.max_case_specs, cases.size()));
    }
    if (YAML::Node variants = root["variants"]) {
      RM_RETURN_IF_ERROR(ParseVariants(variants, &plan));
    }
    std::set<std::string> names;
    for (size_t i = 0; i < cases.size(); ++i) {
      std::string prefix = absl::StrFormat("cases[%d]", i);
      RM_ASSIGN_OR_RETURN(v1::CaseSpec spec,
                          ParseCase(cases[i], defaults, prefix));
      if (!names.insert(spec.name()).second) {
        return Error(
            cases[i]["name"], prefix + ".name",
            absl::StrFormat("duplicate case name \"%s\"", spec.name()));
      }
      *plan.add_cases() = std::move(spec);
    }
    return plan;
  }

 private:
  absl::Status ParseVariants(const YAML::Node& node, v1::Plan* plan) const {
    if (!node.IsSequence() || node.size() == 0) {
      return Error(node, "variants",
                   "expected a non-empty list of {name, env, ceiling}");
    }
    if (static_cast<int>(node.size()) > 16) {
      return Error(node, "variants", "at most 16 variants are allowed");
    }
    std::set<std::string> names;
    for (size_t i = 0; i < node.size(); ++i) {
      const YAML::Node& v = node[i];
      std::string f = absl::StrFormat("variants[%d]", i);
      if (!v.IsMap())
        return Error(v, f, "expected a mapping with name and env");
      RM_RETURN_IF_ERROR(CheckKeys(v, f + ".", kVariantKeys));
      v1::Variant* out = plan->add_variants();
      RM_ASSIGN_OR_RETURN(*out->mutable_name(),
                          RequiredString(v, v["name"], f + ".name"));
      for (char ch : out->name()) {
        if (!(absl::ascii_isalnum(ch) || ch == '-' || ch == '_')) {
          return Error(v["name"], f + ".name",
                       "expected letters, digits, '-' and '_' only");
        }
      }
      if (!names.insert(out->name()).second) {
        return Error(
            v["name"], f + ".name",
            absl::StrFormat("duplicate variant name \"%s\"", out->name()));
      }
      if (v["description"]) {
        RM_ASSIGN_OR_RETURN(*out->mutable_description(),
                            String(v["description"], f + ".description"));
      }
      if (v["ceiling"]) {
        std::string cf = f + ".ceiling";
        const YAML::Node& c = v["ceiling"];
        std::string text = c.IsScalar() ? c.Scalar() : "";
        // "370.8GB/s" or a plain number of GB/s.
        for (const char* suffix : {"GB/s", "gb/s", "GBps"}) {
          if (absl::EndsWith(text, suffix))
            text = text.substr(0, text.size() - strlen(suffix));
        }
        double g = 0;
        if (!absl::SimpleAtod(absl::StripAsciiWhitespace(text), &g) ||
            !(g > 0) || !std::isfinite(g)) {
          return Error(
              c, cf,
              "expected a positive bandwidth in GB/s, like 370.8 or 63GB/s");
        }
        out->set_ceiling_gbps(g);
      }
      if (const YAML::Node& env = v["env"]) {
        if (!env.IsMap())
          return Error(env, f + ".env", "expected a mapping NAME: value");
        for (const auto& kv : env) {
          std::string name = kv.first.Scalar();
          std::string ef = f + ".env." + name;
          bool ok = absl::StartsWith(name, "NCCL_") && name.size() > 5;
          for (char ch : name)
            ok = ok && (absl::ascii_isupper(ch) || absl::ascii_isdigit(ch) ||
                        ch == '_');
          if (!ok) {
            return Error(
                kv.first, ef,
                "only NCCL_* variables (upper case, digits, '_') may be set");
          }
          if (!kv.second.IsScalar())
            return Error(kv.second, ef, "expected a single value");
          (*out->mutable_env())[name] = kv.second.Scalar();
        }
      }
    }
    return absl::OkStatus();
  }

  absl::Status Error(const YAML::Node& node, std::string_view field,
                     std::string_view what) const {
    int line = node.Mark().is_null() ? 0 : node.Mark().line + 1;
    return absl::InvalidArgumentError(
        absl::StrFormat("%s:%d: %s: %s", file_, line, field, what));
  }

  absl::Status CheckKeys(const YAML::Node& map, const std::string& prefix,
                         std::span<const char* const> allowed) const {
    for (const auto& kv : map) {
      std::string key = kv.first.Scalar();
      bool ok = false;
      for (const char* a : allowed) ok = ok || key == a;
      if (!ok) {
        std::vector<std::string> names(std::begin(allowed), std::end(allowed));
        return Error(kv.first, prefix + key,
                     absl::StrFormat("unknown key (expected one of: %s)",
                                     absl::StrJoin(names, ", ")));
      }
    }
    return absl::OkStatus();
  }

  absl::StatusOr<std::string> String(const YAML::Node& node,
                                     const std::string& field) const {
    if (!node.IsScalar()) return Error(node, field, "expected a string");
    return node.Scalar();
  }

  absl::StatusOr<std::string> RequiredString(const YAML::Node& parent,
                                             const YAML::Node& node,
                                             const std::string& field) const {
    if (!node) return Error(parent, field, "missing: expected a string");
    RM_ASSIGN_OR_RETURN(std::string s, String(node, field));
    if (absl::StripAsciiWhitespace(s).empty()) {
      return Error(node, field, "expected a non-empty string");
    }
    return s;
  }

  absl::StatusOr<int64_t> Int(const YAML::Node& node, const std::string& field,
                              int64_t min, int64_t max) const {
    int64_t v = 0;
    if (!node.IsScalar() || !absl::SimpleAtoi(node.Scalar(), &v)) {
      return Error(node, field,
                   absl::StrFormat("expected an integer, got %s", Show(node)));
    }
    if (v < min || v > max) {
      return Error(node, field,
                   absl::StrFormat("expected an integer in [%d, %d], got %d",
                                   min, max, v));
    }
    return v;
  }

  absl::StatusOr<double> Number(const YAML::Node& node,
                                const std::string& field, double min_exclusive,
                                double max_inclusive) const {
    double v = 0;
    if (!node.IsScalar() || !absl::SimpleAtod(node.Scalar(), &v) ||
        !std::isfinite(v)) {
      return Error(node, field,
                   absl::StrFormat("expected a number, got %s", Show(node)));
    }
    if (!(v > min_exclusive && v <= max_inclusive)) {
      return Error(node, field,
                   absl::StrFormat("expected a number in (%g, %g], got %g",
                                   min_exclusive, max_inclusive, v));
    }
    return v;
  }

  // One of two keywords (case-insensitive), lowercased.
  absl::StatusOr<std::string> OneOf(const YAML::Node& node,
                                    const std::string& field, const char* a,
                                    const char* b) const {
    std::string v = node.IsScalar() ? absl::AsciiStrToLower(node.Scalar()) : "";
    if (v != a && v != b) {
      return Error(
          node, field,
          absl::StrFormat("expected %s or %s, got %s", a, b, Show(node)));
    }
    return v;
  }

  absl::StatusOr<bool> Bool(const YAML::Node& node,
                            const std::string& field) const {
    if (node.IsScalar()) {
      std::string s = absl::AsciiStrToLower(node.Scalar());
      if (s == "true" || s == "yes" || s == "on") return true;
      if (s == "false" || s == "no" || s == "off") return false;
    }
    return Error(node, field,
                 absl::StrFormat("expected true or false, got %s", Show(node)));
  }

  absl::StatusOr<int64_t> Size(const YAML::Node& node,
                               const std::string& field) const {
    if (!node.IsScalar()) {
      return Error(node, field, "expected a size like 8B, 64KiB or 1GiB");
    }
    auto size = ParseSizeBytes(node.Scalar());
    if (!size.ok()) {
      return Error(node, field,
                   absl::StrFormat("%s, got \"%s\"", size.status().message(),
                                   node.Scalar()));
    }
    if (*size < 1) {
      return Error(node, field, "size must be at least 1 byte");
    }
    if (*size > limits_.max_size_bytes) {
      return Error(node, field,
                   absl::StrFormat("size must be at most %s, got %s",
                                   FormatBytes(limits_.max_size_bytes),
                                   FormatBytes(*size)));
    }
    return *size;
  }

  absl::StatusOr<double> Duration(const YAML::Node& node,
                                  const std::string& field) const {
    if (!node.IsScalar()) {
      return Error(node, field, "expected a duration like 2s or 500ms");
    }
    auto d = ParseDurationSeconds(node.Scalar());
    if (!d.ok()) {
      return Error(node, field,
                   absl::StrFormat("%s, got \"%s\"", d.status().message(),
                                   node.Scalar()));
    }
    if (*d <= 0) return Error(node, field, "duration must be positive");
    return *d;
  }

  static std::string Show(const YAML::Node& node) {
    if (node.IsScalar()) return absl::StrFormat("\"%s\"", node.Scalar());
    if (node.IsSequence()) return "a list";
    if (node.IsMap()) return "a mapping";
    return "nothing";
  }

  // A scalar or a list of scalars, as a list of (node, text) pairs.
  absl::StatusOr<std::vector<YAML::Node>> ScalarList(
      const YAML::Node& node, const std::string& field) const {
    std::vector<YAML::Node> out;
    if (node.IsScalar()) {
      out.push_back(node);
    } else if (node.IsSequence()) {
      if (node.size() == 0)
        return Error(node, field, "expected a non-empty list");
      if (static_cast<int>(node.size()) > limits_.max_list_entries) {
        return Error(node, field,
                     absl::StrFormat("at most %d entries are allowed",
                                     limits_.max_list_entries));
      }
      for (size_t i = 0; i < node.size(); ++i) {
        if (!node[i].IsScalar()) {
          return Error(node[i], absl::StrFormat("%s[%d]", field, i),
                       "expected a single value");
        }
        out.push_back(node[i]);
      }
    } else {
      return Error(node, field, "expected a value or a list of values");
    }
    return out;
  }

  absl::StatusOr<v1::SizeSweep> ParseSizes(const YAML::Node& node,
                                           const std::string& field) const {
    v1::SizeSweep sweep;
    if (node.IsMap()) {
      RM_RETURN_IF_ERROR(CheckKeys(node, field + ".", kSizeKeys));
      if (!node["min"])
        return Error(node, field + ".min", "missing: expected a size");
      if (!node["max"])
        return Error(node, field + ".max", "missing: expected a size");
      RM_ASSIGN_OR_RETURN(int64_t min, Size(node["min"], field + ".min"));
      RM_ASSIGN_OR_RETURN(int64_t max, Size(node["max"], field + ".max"));
      int64_t factor = 2;
      if (node["factor"]) {
        RM_ASSIGN_OR_RETURN(factor,
                            Int(node["factor"], field + ".factor", 2, 1024));
      }
      if (max < min) {
        return Error(node["max"], field + ".max",
                     absl::StrFormat("must be at least min (%s), got %s",
                                     FormatBytes(min), FormatBytes(max)));
      }
      sweep.set_min_bytes(min);
      sweep.set_max_bytes(max);
      sweep.set_factor(factor);
      return sweep;
    }
    RM_ASSIGN_OR_RETURN(std::vector<YAML::Node> items, ScalarList(node, field));
    for (size_t i = 0; i < items.size(); ++i) {
      std::string f =
          node.IsSequence() ? absl::StrFormat("%s[%d]", field, i) : field;
      RM_ASSIGN_OR_RETURN(int64_t s, Size(items[i], f));
      sweep.add_list_bytes(s);
    }
    return sweep;
  }

  absl::StatusOr<v1::Timing> ParseTiming(
      const YAML::Node& node, const std::string& field,
      const v1::Timing& base = DefaultTiming()) const {
    v1::Timing t = base;
    if (!node.IsMap()) {
      return Error(node, field,
                   "expected a mapping (warmup, min_samples, ...)");
    }
    RM_RETURN_IF_ERROR(CheckKeys(node, field + ".", kTimingKeys));
    if (node["warmup"]) {
      RM_ASSIGN_OR_RETURN(int64_t v,
                          Int(node["warmup"], field + ".warmup", 0, 100000));
      t.set_warmup_iters(static_cast<int32_t>(v));
    }
    if (node["min_samples"]) {
      RM_ASSIGN_OR_RETURN(int64_t v,
                          Int(node["min_samples"], field + ".min_samples", 1,
                              limits_.max_samples));
      t.set_min_samples(static_cast<int32_t>(v));
    }
    if (node["max_samples"]) {
      RM_ASSIGN_OR_RETURN(int64_t v,
                          Int(node["max_samples"], field + ".max_samples", 1,
                              limits_.max_samples));
      t.set_max_samples(static_cast<int32_t>(v));
    }
    if (t.max_samples() < t.min_samples()) {
      const YAML::Node& at =
          node["max_samples"] ? node["max_samples"] : node["min_samples"];
      return Error(at, field + ".max_samples",
                   absl::StrFormat("must be at least min_samples (%d), got %d",
                                   t.min_samples(), t.max_samples()));
    }
    if (node["target_ci"]) {
      RM_ASSIGN_OR_RETURN(
          double v, Number(node["target_ci"], field + ".target_ci", 0, 1));
      t.set_target_ci(v);
    }
    if (node["max_time"]) {
      RM_ASSIGN_OR_RETURN(double v,
                          Duration(node["max_time"], field + ".max_time"));
      t.set_max_time_s(v);
    }
    if (node["sample_target"]) {
      RM_ASSIGN_OR_RETURN(
          double v, Duration(node["sample_target"], field + ".sample_target"));
      t.set_sample_target_s(v);
    }
    if (node["warmup_time"]) {
      // 0 is allowed here: run every warm-up operation.
      const YAML::Node& w = node["warmup_time"];
      if (w.IsScalar() && w.Scalar() == "0") {
        t.set_warmup_max_time_s(0);
      } else {
        RM_ASSIGN_OR_RETURN(double v, Duration(w, field + ".warmup_time"));
        t.set_warmup_max_time_s(v);
      }
    }
    if (node["ci"]) {
      const YAML::Node& c = node["ci"];
      std::string v = c.IsScalar() ? absl::AsciiStrToLower(c.Scalar()) : "";
      if (v != "median" && v != "mean") {
        return Error(
            c, field + ".ci",
            absl::StrFormat("expected median or mean, got %s", Show(c)));
      }
      t.set_ci_on_median(v == "median");
    }
    if (node["iters"]) {
      RM_ASSIGN_OR_RETURN(int64_t v,
                          Int(node["iters"], field + ".iters", 1, 1000000));
      t.set_fixed_iters_per_sample(static_cast<int32_t>(v));
    }
    if (node["max_iters_per_sample"]) {
      RM_ASSIGN_OR_RETURN(int64_t v,
                          Int(node["max_iters_per_sample"],
                              field + ".max_iters_per_sample", 1, 1000000));
      t.set_max_iters_per_sample(static_cast<int32_t>(v));
    }
    return t;
  }

  absl::StatusOr<v1::CaseSpec> ParseCase(const YAML::Node& node,
                                         const YAML::Node& defaults,
                                         const std::string& prefix) const {
    if (!node.IsMap()) {
      return Error(node, prefix, "expected a mapping with name and collective");
    }
    RM_RETURN_IF_ERROR(CheckKeys(node, prefix + ".", kCaseKeys));
    // A case key falls back to the plan's defaults; errors name where the
    // value was written.
    auto get = [&](const char* key, std::string* field) -> YAML::Node {
      if (node[key]) {
        *field = prefix + "." + key;
        return node[key];
      }
      if (defaults && defaults[key]) {
        *field = std::string("defaults.") + key;
        return defaults[key];
      }
      *field = prefix + "." + key;
      return YAML::Node(YAML::NodeType::Undefined);
    };
    std::string f;
    v1::CaseSpec spec;
    RM_ASSIGN_OR_RETURN(*spec.mutable_name(),
                        RequiredString(node, node["name"], prefix + ".name"));

    YAML::Node bench = get("bench", &f);
    if (bench && bench.IsScalar() && IsPluginKind(bench.Scalar())) {
      spec.set_bench(v1::BENCH_PLUGIN);
      spec.set_kind(bench.Scalar());
      RM_RETURN_IF_ERROR(ParsePluginCase(node, prefix, get, &spec));
      return spec;
    }
    if (bench) {
      auto b = bench.IsScalar() ? ParseBench(bench.Scalar()) : std::nullopt;
      if (!b) {
        return Error(bench, f,
                     absl::StrFormat("expected one of: %s, got %s",
                                     BenchNames(), Show(bench)));
      }
      spec.set_bench(*b);
    }
    std::string params_field;
    if (YAML::Node params = get("params", &params_field)) {
      return Error(params, params_field,
                   "belongs to plug-in kinds (a worker's own bench: names), "
                   "not to built-in ones");
    }
    if (spec.bench() != v1::BENCH_COLLECTIVE) {
      RM_RETURN_IF_ERROR(ParseBenchCase(node, get, &spec));
      return spec;
    }
    std::vector<const char*> node_keys = {
        "method", "direction", "traffic",    "pattern", "memory",
        "path",   "shapes",    "slow_ratio", "members", "repeat"};
    node_keys.insert(node_keys.end(), kTrainKeys.begin(), kTrainKeys.end());
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
          return Error(
              item, f,
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

    YAML::Node root = get("root", &f);
    if (root) {
      RM_ASSIGN_OR_RETURN(int64_t r, Int(root, f, 0, 65535));
      spec.set_root(static_cast<int32_t>(r));
    }

    YAML::Node verify = get("verify", &f);
    spec.set_verify(true);
    if (verify) {
      RM_ASSIGN_OR_RETURN(bool v, Bool(verify, f));
      spec.set_verify(v);
    }

    if (YAML::Node backend = get("backend", &f)) {
      RM_RETURN_IF_ERROR(ParseBackendKey(backend, f, &spec));
    }

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
            return Error(item, mf,
                         absl::StrFormat(
                             "expected pipelined, per_op or graph, got \"%s\"",
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
    int64_t smallest =
        spec.sizes().list_bytes_size() > 0
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
    return spec;
  }

  // A list-valued enum key: every entry through `parse`, or `fallback`.
  template <typename E, typename Get>
  absl::Status EnumList(Get& get, const char* key,
                        std::optional<E> (*parse)(std::string_view),
                        const std::string& names, const std::vector<E>& allowed,
                        std::vector<E> fallback, std::vector<E>* out) const {
    std::string f;
    YAML::Node node = get(key, &f);
    if (!node) {
      *out = std::move(fallback);
      return absl::OkStatus();
    }
    RM_ASSIGN_OR_RETURN(std::vector<YAML::Node> items, ScalarList(node, f));
    for (const auto& item : items) {
      auto v = parse(item.Scalar());
      bool ok = v.has_value() &&
                std::find(allowed.begin(), allowed.end(), *v) != allowed.end();
      if (!ok) {
        return Error(item, f,
                     absl::StrFormat("expected one of: %s, got \"%s\"", names,
                                     item.Scalar()));
      }
      out->push_back(*v);
    }
    return absl::OkStatus();
  }

  bool IsPluginKind(const std::string& name) const {
    return !ParseBench(name) &&
           std::find(limits_.plugin_kinds.begin(), limits_.plugin_kinds.end(),
                     name) != limits_.plugin_kinds.end();
  }

  // A plug-in kind's case: its parameters (scalars, kept as written), and
  // the keys every kind shares.
  template <typename Get>
  absl::Status ParsePluginCase(const YAML::Node& node,
                               const std::string& prefix, Get& get,
                               v1::CaseSpec* spec) const {
    std::string f;
    for (const auto& kv : node) {
      const std::string key = kv.first.Scalar();
      if (std::find_if(std::begin(kPluginCaseKeys), std::end(kPluginCaseKeys),
                       [&](const char* k) { return key == k; }) ==
          std::end(kPluginCaseKeys)) {
        return Error(kv.first, prefix + "." + key,
                     absl::StrFormat("bench: %s (a plug-in kind) takes only "
                                     "name, params, timing, backend, verify "
                                     "and ladder",
                                     spec->kind()));
      }
    }
    if (YAML::Node params = get("params", &f)) {
      if (!params.IsMap()) {
        return Error(params, f, "expected a mapping of names to scalars");
      }
      for (const auto& kv : params) {
        if (!kv.second.IsScalar()) {
          return Error(kv.second, f + "." + kv.first.Scalar(),
                       "expected a scalar");
        }
        (*spec->mutable_params())[kv.first.Scalar()] = kv.second.Scalar();
      }
    }
    if (YAML::Node ladder = get("ladder", &f)) {
      RM_RETURN_IF_ERROR(ParseLadder(ladder, f, spec));
    }
    spec->set_verify(true);
    if (YAML::Node verify = get("verify", &f)) {
      RM_ASSIGN_OR_RETURN(bool v, Bool(verify, f));
      spec->set_verify(v);
    }
    if (YAML::Node backend = get("backend", &f)) {
      RM_RETURN_IF_ERROR(ParseBackendKey(backend, f, spec));
    }
    *spec->mutable_timing() = DefaultBenchTiming();
    if (YAML::Node timing = get("timing", &f)) {
      RM_ASSIGN_OR_RETURN(*spec->mutable_timing(),
                          ParseTiming(timing, f, spec->timing()));
    }
    return absl::OkStatus();
  }

  // The keys of a node benchmark (bench: p2p, latency, host_device,
  // local_copy, triad, gemm); collective-only keys are errors.
  template <typename Get>
  absl::Status ParseBenchCase(const YAML::Node& node, Get& get,
                              v1::CaseSpec* spec) const {
    std::string f;
    const v1::Bench bench = spec->bench();
    const std::string bname(BenchName(bench));
    if (bench == v1::BENCH_TRAIN) return ParseTrainCase(node, get, spec);
    for (const char* key : kTrainKeys) {
      YAML::Node n = get(key, &f);
      if (n)
        return Error(
            n, f,
            absl::StrFormat("belongs to bench: train, not bench: %s", bname));
    }
    for (const char* key :
         {"collective", "ops", "placement", "root", "ladder"}) {
      YAML::Node n = get(key, &f);
      if (n)
        return Error(n, f,
                     absl::StrFormat(
                         "is a collective's key; bench: %s has none", bname));
    }
    auto not_here = [&](const char* key, const char* why) -> absl::Status {
      YAML::Node n = get(key, &f);
      if (n) return Error(n, f, absl::StrFormat("bench: %s %s", bname, why));
      return absl::OkStatus();
    };
    const bool gemm = bench == v1::BENCH_GEMM;
    // The bad-node finder: P2P pair tests (method, direction, traffic and
    // one size as p2p's), a threshold and what the members are.
    const bool find_slow = bench == v1::BENCH_FIND_SLOW;
    if (find_slow) {
      RM_RETURN_IF_ERROR(not_here("pattern",
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
              m, f,
              absl::StrFormat("expected ranks or nodes, got %s", Show(m)));
        }
        spec->set_members(v);
      }
      spec->set_repeat(1);
      if (YAML::Node r = get("repeat", &f); r) {
        RM_ASSIGN_OR_RETURN(int64_t v, Int(r, f, 1, 9));
        spec->set_repeat(static_cast<int32_t>(v));
      }
    } else {
      RM_RETURN_IF_ERROR(not_here("slow_ratio", "is not the bad-node finder"));
      RM_RETURN_IF_ERROR(not_here("members", "is not the bad-node finder"));
      RM_RETURN_IF_ERROR(not_here("repeat", "is not the bad-node finder"));
    }
    // Methods: unspecified = the backend's own (ce or sm on GPUs, cpu on
    // the host backend).
    std::vector<v1::CopyMethod> methods;
    std::vector<v1::CopyMethod> method_ok = {v1::COPY_ENGINE, v1::SM, v1::CPU};
    if (bench == v1::BENCH_TRIAD || gemm) {
      RM_RETURN_IF_ERROR(not_here("method", "has one method per backend"));
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
      RM_RETURN_IF_ERROR(not_here("direction", "has no direction"));
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
      RM_RETURN_IF_ERROR(not_here("traffic", "has no bidirectional form"));
    }

    std::vector<v1::TransferPattern> patterns;
    if (bench == v1::BENCH_P2P) {
      RM_RETURN_IF_ERROR(EnumList<v1::TransferPattern>(
          get, "pattern", &ParseTransferPattern,
          "pairs, all_to_one, one_to_all",
          {v1::PAIR, v1::ALL_TO_ONE, v1::ONE_TO_ALL}, {v1::PAIR}, &patterns));
    } else if (find_slow) {
      patterns = {v1::ALL_RANKS};  // one case that tests the pairs it picks
    } else if (bench == v1::BENCH_LATENCY) {
      RM_RETURN_IF_ERROR(not_here("pattern",
                                  "runs between pairs (path: peer) or host "
                                  "to each GPU (path: host)"));
    } else {
      RM_RETURN_IF_ERROR(EnumList<v1::TransferPattern>(
          get, "pattern", &ParseTransferPattern, "one, all",
          {v1::ONE_RANK, v1::ALL_RANKS}, {v1::ONE_RANK}, &patterns));
    }
    for (auto p : patterns) spec->add_patterns(p);

    if (bench == v1::BENCH_HOST_DEVICE) {
      std::vector<v1::HostMemory> mem;
      RM_RETURN_IF_ERROR(EnumList<v1::HostMemory>(
          get, "memory", &ParseHostMemory, HostMemoryNames(),
          {v1::PINNED, v1::PAGEABLE}, {v1::PINNED}, &mem));
      for (auto m : mem) spec->add_host_memory(m);
    } else {
      RM_RETURN_IF_ERROR(not_here("memory", "has no host memory kind"));
    }

    if (bench == v1::BENCH_LATENCY) {
      std::vector<v1::LatencyPath> paths;
      RM_RETURN_IF_ERROR(EnumList<v1::LatencyPath>(
          get, "path", &ParseLatencyPath, LatencyPathNames(),
          {v1::PEER, v1::HOST}, {v1::PEER}, &paths));
      for (auto p : paths) spec->add_latency_paths(p);
    } else {
      RM_RETURN_IF_ERROR(not_here("path", "has no latency path"));
    }

    if (gemm) {
      RM_RETURN_IF_ERROR(
          not_here("sizes", "takes shapes (m, n, k), not sizes"));
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
        RM_ASSIGN_OR_RETURN(std::vector<YAML::Node> items,
                            ScalarList(dtypes, f));
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
      RM_RETURN_IF_ERROR(
          not_here("shapes", "takes sizes; shapes belong to bench: gemm"));
      RM_RETURN_IF_ERROR(
          not_here("dtypes", "moves bytes; dtypes belong to bench: gemm"));
      YAML::Node sizes = get("sizes", &f);
      if (sizes) {
        RM_ASSIGN_OR_RETURN(*spec->mutable_sizes(), ParseSizes(sizes, f));
      } else if (bench == v1::BENCH_LATENCY) {
        spec->mutable_sizes()->add_list_bytes(8);  // one pointer / one word
      } else {
        return Error(node, f,
                     "missing: expected a list of sizes, like [512MiB]");
      }
      spec->add_dtypes(v1::UINT8);
    }

    spec->set_verify(true);
    if (YAML::Node verify = get("verify", &f)) {
      RM_ASSIGN_OR_RETURN(bool v, Bool(verify, f));
      spec->set_verify(v);
    }
    if (YAML::Node backend = get("backend", &f)) {
      RM_RETURN_IF_ERROR(ParseBackendKey(backend, f, spec));
    }
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
      return Error(
          get("timing", &f), f + ".iters",
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
  }

  // bench: train (issue 5): the model, optimizer, buckets, overlap, the
  // ladder of rank counts and the precision.
  template <typename Get>
  absl::Status ParseTrainCase(const YAML::Node& node, Get& get,
                              v1::CaseSpec* spec) const {
    std::string f;
    for (const char* key :
         {"collective", "ops", "placement", "root", "sizes", "method",
          "direction", "traffic", "pattern", "memory", "path", "shapes",
          "slow_ratio", "members", "repeat"}) {
      YAML::Node n = get(key, &f);
      if (n) return Error(n, f, "bench: train does not take this key");
    }
    v1::TrainSpec* t = spec->mutable_train();
    YAML::Node model = get("model", &f);
    if (!model || !model.IsMap()) {
      return Error(model ? model : node, f,
                   "missing: expected {layers: 8, hidden: 8192, batch: 4096}");
    }
    RM_RETURN_IF_ERROR(CheckKeys(model, f + ".", kModelKeys));
    for (const char* key : kModelKeys) {
      if (!model[key])
        return Error(model, f + "." + key, "missing: expected an integer");
    }
    RM_ASSIGN_OR_RETURN(int64_t layers,
                        Int(model["layers"], f + ".layers", 1, 1024));
    RM_ASSIGN_OR_RETURN(int64_t hidden,
                        Int(model["hidden"], f + ".hidden", 1, 65536));
    t->set_layers(static_cast<int32_t>(layers));
    t->set_hidden(hidden);
    // batch: one size or a list (a sweep).
    RM_ASSIGN_OR_RETURN(std::vector<YAML::Node> batches,
                        ScalarList(model["batch"], f + ".batch"));
    for (const auto& b : batches) {
      RM_ASSIGN_OR_RETURN(int64_t v, Int(b, f + ".batch", 1, 1 << 24));
      spec->add_train_batches(v);
    }
    t->set_batch(spec->train_batches(0));
    if (YAML::Node mode = get("mode", &f)) {
      RM_ASSIGN_OR_RETURN(std::vector<YAML::Node> items, ScalarList(mode, f));
      for (const auto& item : items) {
        std::string v = absl::AsciiStrToLower(item.Scalar());
        if (v != "train" && v != "inference") {
          return Error(
              item, f,
              absl::StrFormat("expected train or inference, got \"%s\"",
                              item.Scalar()));
        }
        spec->add_inference(v == "inference");
      }
    } else {
      spec->add_inference(false);
    }
    t->set_optimizer("sgd");
    if (YAML::Node o = get("optimizer", &f)) {
      RM_ASSIGN_OR_RETURN(std::string v, OneOf(o, f, "sgd", "adam"));
      t->set_optimizer(v);
    }
    t->set_lr(t->optimizer() == "adam" ? 1e-3 : 0.1);
    if (YAML::Node lr = get("lr", &f)) {
      RM_ASSIGN_OR_RETURN(double v, Number(lr, f, 0, 10));
      t->set_lr(v);
    }
    t->set_bucket_bytes(25 << 20);
    if (YAML::Node b = get("bucket", &f)) {
      RM_ASSIGN_OR_RETURN(int64_t v, Size(b, f));
      t->set_bucket_bytes(v);
    }
    t->set_steps(20);
    if (YAML::Node st = get("steps", &f)) {
      RM_ASSIGN_OR_RETURN(int64_t v, Int(st, f, 1, 100000));
      t->set_steps(static_cast<int32_t>(v));
    }
    t->set_check_steps(0);
    if (YAML::Node cs = get("check_steps", &f)) {
      RM_ASSIGN_OR_RETURN(int64_t v, Int(cs, f, 0, 1000));
      t->set_check_steps(static_cast<int32_t>(v));
    }
    if (YAML::Node sc = get("scaling", &f)) {
      RM_ASSIGN_OR_RETURN(std::string v, OneOf(sc, f, "weak", "strong"));
      t->set_strong(v == "strong");
    }
    t->set_comm("nccl");
    if (YAML::Node cm = get("comm", &f)) {
      RM_ASSIGN_OR_RETURN(std::string v, OneOf(cm, f, "nccl", "ce"));
      t->set_comm(v);
    }
    t->set_schedule("ddp");
    if (YAML::Node sch = get("schedule", &f)) {
      RM_ASSIGN_OR_RETURN(std::string v, OneOf(sch, f, "ddp", "pipelined"));
      t->set_schedule(v);
    }
    if (YAML::Node dl = get("deferred_layers", &f)) {
      if (t->schedule() != "pipelined") {
        return Error(dl, f, "only with schedule: pipelined");
      }
      RM_ASSIGN_OR_RETURN(int64_t v, Int(dl, f, 1, layers));
      t->set_deferred_layers(static_cast<int32_t>(v));
    }
    t->set_gemm("autotune");
    if (YAML::Node g = get("gemm", &f)) {
      RM_ASSIGN_OR_RETURN(std::string v, OneOf(g, f, "autotune", "heuristic"));
      t->set_gemm(v);
    }
    if (YAML::Node mw = get("master_weights", &f)) {
      RM_ASSIGN_OR_RETURN(bool v, Bool(mw, f));
      t->set_master_weights(v);
    }
    if (YAML::Node ls = get("loss_scale", &f)) {
      if (ls.IsScalar() && absl::AsciiStrToLower(ls.Scalar()) == "auto") {
        t->set_loss_scale(0);
      } else {
        RM_ASSIGN_OR_RETURN(double v, Number(ls, f, 0, 1e12));
        t->set_loss_scale(v);
      }
    }
    if (YAML::Node ov = get("overlap", &f)) {
      RM_ASSIGN_OR_RETURN(std::vector<YAML::Node> items, ScalarList(ov, f));
      for (const auto& item : items) {
        RM_ASSIGN_OR_RETURN(bool v, Bool(item, f));
        if (!v && t->schedule() == "pipelined") {
          return Error(item, f,
                       "schedule: pipelined always overlaps; overlap: false "
                       "is the ddp schedule's comparison");
        }
        spec->add_overlap(v);
      }
    } else {
      spec->add_overlap(true);
    }
    if (YAML::Node dtypes = get("dtypes", &f)) {
      RM_ASSIGN_OR_RETURN(std::vector<YAML::Node> items, ScalarList(dtypes, f));
      for (const auto& item : items) {
        auto d = ParseDataType(item.Scalar());
        if (!d || !(*d == v1::FLOAT32 || *d == v1::TFLOAT32 ||
                    *d == v1::BFLOAT16 || *d == v1::FLOAT16)) {
          return Error(item, f,
                       absl::StrFormat("expected one of: float32, tf32, "
                                       "bfloat16, float16, got \"%s\"",
                                       item.Scalar()));
        }
        spec->add_dtypes(*d);
      }
    } else {
      spec->add_dtypes(v1::FLOAT32);
    }
    if (YAML::Node ladder = get("ladder", &f)) {
      RM_RETURN_IF_ERROR(ParseLadder(ladder, f, spec));
    }
    spec->set_verify(true);
    if (YAML::Node backend = get("backend", &f)) {
      RM_RETURN_IF_ERROR(ParseBackendKey(backend, f, spec));
    }
    *spec->mutable_timing() = DefaultTiming();
    spec->mutable_timing()->set_warmup_iters(3);
    if (YAML::Node timing = get("timing", &f)) {
      RM_ASSIGN_OR_RETURN(*spec->mutable_timing(),
                          ParseTiming(timing, f, spec->timing()));
    }
    return absl::OkStatus();
  }

  // `backend: auto | host | cuda`.
  absl::Status ParseBackendKey(const YAML::Node& node, const std::string& field,
                               v1::CaseSpec* spec) const {
    auto b = node.IsScalar() ? ParseBackend(node.Scalar()) : std::nullopt;
    if (!b) {
      return Error(
          node, field,
          absl::StrFormat("expected auto, host or cuda, got %s", Show(node)));
    }
    spec->set_backend(*b);
    return absl::OkStatus();
  }

  // `ladder: [1, 2, 4]`: rank counts, increasing; `ladder: {nodes: [1, 2,
  // 4]}`: node counts, each nodes x the plan's ranks_per_node ranks.
  absl::Status ParseLadder(const YAML::Node& node, const std::string& field,
                           v1::CaseSpec* spec) const {
    int per_item = 1;
    YAML::Node list = node;
    std::string list_field = field;
    if (node.IsMap()) {
      if (node.size() != 1 || !node["nodes"]) {
        return Error(node, field,
                     "expected a list of rank counts, or {nodes: [1, 2, 4]}");
      }
      if (ranks_per_node_ == 0) {
        return Error(node, field,
                     "a ladder of nodes needs the plan's ranks_per_node");
      }
      per_item = ranks_per_node_;
      list = node["nodes"];
      list_field = field + ".nodes";
    }
    RM_ASSIGN_OR_RETURN(std::vector<YAML::Node> items,
                        ScalarList(list, list_field));
    int64_t previous = 0;
    for (const auto& item : items) {
      RM_ASSIGN_OR_RETURN(int64_t count, Int(item, list_field, 1, 65536));
      const int64_t n = count * per_item;
      if (n > 65536) {
        return Error(item, list_field, "more than 65536 ranks");
      }
      if (n <= previous) {
        return Error(
            item, field,
            "expected rank counts in increasing order, like [1, 2, 4]");
      }
      previous = n;
      spec->add_ladder(static_cast<int32_t>(n));
    }
    return absl::OkStatus();
  }

  static bool NoInPlace(v1::Collective c) {
    return c == v1::ALL_TO_ALL || c == v1::SEND_RECV;
  }

  std::string file_;
  PlanLimits limits_;
  int ranks_per_node_ = 0;  // the plan's, for ladders of nodes
};

}  // namespace

v1::Timing DefaultTiming() {
  v1::Timing t;
  t.set_warmup_iters(5);
  t.set_min_samples(5);
  t.set_max_samples(100);
  t.set_target_ci(0.01);
  t.set_max_time_s(1.0);
  t.set_sample_target_s(250e-6);
  t.set_max_iters_per_sample(1000);
  t.set_mode(v1::PIPELINED);
  t.set_warmup_max_time_s(0.02);
  return t;
}

v1::Timing DefaultBenchTiming() {
  v1::Timing t;
  t.set_warmup_iters(2);
  t.set_min_samples(5);
  t.set_max_samples(20);
  t.set_target_ci(0.01);
  t.set_max_time_s(2.0);
  t.set_sample_target_s(0.01);
  t.set_max_iters_per_sample(64);
  t.set_mode(v1::PIPELINED);
  t.set_ci_on_median(true);
  return t;
}

std::string Sha256Hex(std::string_view data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(data.data(), data.size(), digest, &len, EVP_sha256(), nullptr);
  std::string hex;
  hex.reserve(len * 2);
  for (unsigned int i = 0; i < len; ++i) {
    hex += absl::StrFormat("%02x", digest[i]);
  }
  return hex;
}

// The line where the text nests deeper than `max_depth` (flow brackets
// plus indentation levels), or 0. Checked by hand before yaml-cpp, whose
// recursive parser would otherwise walk any depth an attacker sends.
static int NestingTooDeepAt(std::string_view yaml, int max_depth) {
  int line = 1, flow = 0;
  bool at_line_start = true, in_comment = false;
  char quote = 0;
  int indent = 0;
  for (char c : yaml) {
    if (c == '\n') {
      ++line;
      at_line_start = true;
      in_comment = false;
      indent = 0;
      if (quote == '\'') quote = 0;  // plain scalars end at the line
      continue;
    }
    if (at_line_start) {
      if (c == ' ') {
        // Two spaces per level is the common style; a plan needs < 8.
        if (++indent > 2 * max_depth) return line;
        continue;
      }
      at_line_start = false;
    }
    if (in_comment) continue;
    if (quote) {
      if (c == quote) quote = 0;
      continue;
    }
    if (c == '#') {
      in_comment = true;
    } else if (c == '"' || c == '\'') {
      quote = c;
    } else if (c == '[' || c == '{') {
      if (++flow > max_depth) return line;
    } else if ((c == ']' || c == '}') && flow > 0) {
      --flow;
    }
  }
  return 0;
}

absl::StatusOr<v1::Plan> ParsePlanYaml(std::string_view yaml,
                                       const std::string& source_name,
                                       const PlanLimits& limits) {
  if (static_cast<int64_t>(yaml.size()) > limits.max_plan_bytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s:1: (plan): file is %d bytes, more than the %d allowed", source_name,
        yaml.size(), limits.max_plan_bytes));
  }
  if (int line = NestingTooDeepAt(yaml, limits.max_nesting)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s:%d: (yaml): nesting deeper than %d levels",
                        source_name, line, limits.max_nesting));
  }
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml));
  } catch (const YAML::Exception& e) {
    int line = e.mark.is_null() ? 0 : e.mark.line + 1;
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s:%d: (yaml): invalid YAML: %s", source_name, line, e.msg));
  }
  try {
    PlanParser parser(source_name, limits);
    RM_ASSIGN_OR_RETURN(v1::Plan plan, parser.Parse(root));
    plan.set_source_path(source_name);
    plan.set_source_sha256(Sha256Hex(yaml));
    return plan;
  } catch (const YAML::Exception& e) {
    // yaml-cpp throws on some malformed structures (e.g. aliases of the
    // wrong kind); report them like parse errors.
    int line = e.mark.is_null() ? 0 : e.mark.line + 1;
    return absl::InvalidArgumentError(
        absl::StrFormat("%s:%d: (yaml): %s", source_name, line, e.msg));
  }
}

absl::StatusOr<v1::Plan> LoadPlanFile(const std::string& path,
                                      const PlanLimits& limits) {
  std::error_code ec;
  if (std::filesystem::exists(path, ec) &&
      !std::filesystem::is_regular_file(path, ec)) {
    return absl::NotFoundError(
        absl::StrFormat("%s: cannot read plan file: not a regular file", path));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(absl::StrFormat("%s: cannot read plan file: %s",
                                               path, std::strerror(errno)));
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) {
    return absl::NotFoundError(absl::StrFormat("%s: cannot read plan file: %s",
                                               path, std::strerror(errno)));
  }
  return ParsePlanYaml(text.str(), path, limits);
}

}  // namespace ringmaster
