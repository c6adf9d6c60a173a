#include "core/plan.h"

#include <openssl/evp.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
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
#include "core/plan_parser.h"
#include "core/status_macros.h"
#include "core/units.h"
#include "yaml-cpp/yaml.h"

namespace ringmaster {
namespace plan_internal {

absl::StatusOr<v1::Plan> PlanParser::Parse(const YAML::Node& root) {
  v1::Plan plan;
  if (!root.IsDefined() || root.IsNull()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s:1: (plan): expected a mapping with `name` and "
                        "`cases`, got an empty document",
                        file_));
  }
  if (!root.IsMap()) {
    return Error(root, "(plan)", "expected a mapping with `name` and `cases`");
  }
  RM_RETURN_IF_ERROR(CheckKeys(root, "", kTopKeys));
  RM_ASSIGN_OR_RETURN(*plan.mutable_name(),
                      RequiredString(root, root["name"], "name"));
  if (root["description"]) {
    RM_ASSIGN_OR_RETURN(*plan.mutable_description(),
                        String(root["description"], "description"));
  }
  if (root["card"]) {
    RM_ASSIGN_OR_RETURN(*plan.mutable_card(), String(root["card"], "card"));
    if (plan.card() != "server") {
      return Error(root["card"], "card",
                   "expected `server` (the server card after the results)");
    }
  }
  if (root["ranks"]) {
    RM_ASSIGN_OR_RETURN(int64_t ranks, Int(root["ranks"], "ranks", 1, 65536));
    plan.set_ranks(static_cast<int32_t>(ranks));
  }
  // Placement: nodes x ranks_per_node.
  if (root["ranks_per_node"]) {
    RM_ASSIGN_OR_RETURN(int64_t k,
                        Int(root["ranks_per_node"], "ranks_per_node", 1, 4096));
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
                   absl::StrFormat("%d nodes x %d ranks exceed 65536 ranks", n,
                                   plan.ranks_per_node()));
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
  if (!cases) return Error(root, "cases", "missing: expected a list of cases");
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
                        ParseSizedCase(cases[i], defaults, prefix));
    if (!names.insert(spec.name()).second) {
      return Error(cases[i]["name"], prefix + ".name",
                   absl::StrFormat("duplicate case name \"%s\"", spec.name()));
    }
    *plan.add_cases() = std::move(spec);
  }
  return plan;
}

absl::Status PlanParser::ParseVariants(const YAML::Node& node,
                                       v1::Plan* plan) const {
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
    if (!v.IsMap()) return Error(v, f, "expected a mapping with name and env");
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
      if (!absl::SimpleAtod(absl::StripAsciiWhitespace(text), &g) || !(g > 0) ||
          !std::isfinite(g)) {
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

absl::StatusOr<v1::SizeSweep> PlanParser::ParseSizes(
    const YAML::Node& node, const std::string& field) const {
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
    if (node["host_max"]) {
      RM_ASSIGN_OR_RETURN(int64_t host_max,
                          Size(node["host_max"], field + ".host_max"));
      sweep.set_host_max_bytes(host_max);
    }
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

absl::StatusOr<v1::Timing> PlanParser::ParseTiming(
    const YAML::Node& node, const std::string& field,
    const v1::Timing& base) const {
  v1::Timing t = base;
  if (!node.IsMap()) {
    return Error(node, field, "expected a mapping (warmup, min_samples, ...)");
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
    RM_ASSIGN_OR_RETURN(double v,
                        Number(node["target_ci"], field + ".target_ci", 0, 1));
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
      return Error(c, field + ".ci",
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

// A case with `cuda: {key: value, ...}` is parsed twice: without it (what
// host ranks run) and with its keys in place of the case's (what GPUs
// run, kept in the spec's `cuda`). The nodes are the plan's own, so errors
// still name their lines.
absl::StatusOr<v1::CaseSpec> PlanParser::ParseSizedCase(
    const YAML::Node& node, const YAML::Node& defaults,
    const std::string& prefix) const {
  if (!node.IsMap() || !node["cuda"]) return ParseCase(node, defaults, prefix);
  const YAML::Node over = node["cuda"];
  if (!over.IsMap() || over.size() == 0) {
    return Error(over, prefix + ".cuda",
                 "expected a mapping of the case's keys as they are on GPUs, "
                 "e.g. {model: {layers: 8, hidden: 8192, batch: 1024}}");
  }
  YAML::Node gpu(YAML::NodeType::Map);
  for (const auto& kv : node) {
    const std::string key = kv.first.Scalar();
    if (key != "cuda") gpu[key] = kv.second;
  }
  for (const auto& kv : over) {
    const std::string key = kv.first.Scalar();
    if (key == "name" || key == "cuda" || key == "backend") {
      return Error(kv.first, prefix + ".cuda." + key,
                   "the GPU keys of a case change its sizes; its name and "
                   "backend stay the case's");
    }
    gpu[key] = kv.second;
  }
  RM_ASSIGN_OR_RETURN(v1::CaseSpec spec,
                      ParseCase(node, defaults, prefix, /*sized=*/true));
  RM_ASSIGN_OR_RETURN(*spec.mutable_cuda(),
                      ParseCase(gpu, defaults, prefix + " (cuda)"));
  return spec;
}

absl::StatusOr<v1::CaseSpec> PlanParser::ParseCase(const YAML::Node& node,
                                                   const YAML::Node& defaults,
                                                   const std::string& prefix,
                                                   bool sized) const {
  if (!node.IsMap()) {
    return Error(node, prefix, "expected a mapping with name and collective");
  }
  RM_RETURN_IF_ERROR(sized ? CheckKeys(node, prefix + ".", kSizedCaseKeys)
                           : CheckKeys(node, prefix + ".", kCaseKeys));
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
                   absl::StrFormat("expected one of: %s, got %s", BenchNames(),
                                   Show(bench)));
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
  RM_RETURN_IF_ERROR(ParseCollectiveCase(node, prefix, get, &spec));
  return spec;
}

// `backend: auto | host | cuda`.
absl::Status PlanParser::ParseBackendKey(const YAML::Node& node,
                                         const std::string& field,
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
absl::Status PlanParser::ParseLadder(const YAML::Node& node,
                                     const std::string& field,
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
      return Error(item, field,
                   "expected rank counts in increasing order, like [1, 2, 4]");
    }
    previous = n;
    spec->add_ladder(static_cast<int32_t>(n));
  }
  return absl::OkStatus();
}

absl::Status PlanParser::ParseVerifyAndBackend(const CaseKeys& get,
                                               v1::CaseSpec* spec) const {
  std::string f;
  spec->set_verify(true);
  if (YAML::Node verify = get("verify", &f)) {
    RM_ASSIGN_OR_RETURN(bool v, Bool(verify, f));
    spec->set_verify(v);
  }
  if (YAML::Node backend = get("backend", &f)) {
    RM_RETURN_IF_ERROR(ParseBackendKey(backend, f, spec));
  }
  return absl::OkStatus();
}

bool PlanParser::IsPluginKind(const std::string& name) const {
  return !ParseBench(name) &&
         std::find(limits_.plugin_kinds.begin(), limits_.plugin_kinds.end(),
                   name) != limits_.plugin_kinds.end();
}

bool PlanParser::NoInPlace(v1::Collective c) {
  return c == v1::ALL_TO_ALL || c == v1::SEND_RECV;
}

}  // namespace plan_internal

using plan_internal::PlanParser;

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
  RM_ASSIGN_OR_RETURN(YAML::Node root, LoadYamlDocument(yaml, source_name));
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
  if (path.empty()) {
    return absl::InvalidArgumentError(
        "(plan): an empty path names no plan file");
  }
  auto text = ReadBoundedText(path, limits.max_plan_bytes, "plan file");
  if (!text.ok()) return text.status();
  return ParsePlanYaml(*text, path == "-" ? "(stdin)" : path, limits);
}

absl::StatusOr<std::string> ReadBoundedText(const std::string& path,
                                            int64_t max_bytes,
                                            const std::string& what) {
  const bool from_stdin = path == "-";
  std::error_code ec;
  if (!from_stdin) {
    // The size before reading: a huge (or sparse) file is refused at once.
    const auto status = std::filesystem::status(path, ec);
    if (!ec && std::filesystem::exists(status) &&
        !std::filesystem::is_regular_file(status)) {
      return absl::NotFoundError(absl::StrFormat(
          "%s: cannot read %s: not a regular file", path, what));
    }
    const auto size = std::filesystem::file_size(path, ec);
    if (!ec && static_cast<int64_t>(size) > max_bytes) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s:1: (plan): file is %d bytes, more than the %d "
                          "allowed",
                          path, size, max_bytes));
    }
  }
  std::ifstream file;
  if (!from_stdin) {
    file.open(path, std::ios::binary);
    if (!file) {
      return absl::NotFoundError(absl::StrFormat("%s: cannot read %s: %s", path,
                                                 what, std::strerror(errno)));
    }
  }
  std::istream& in = from_stdin ? std::cin : file;
  // At most one byte past the limit: a stream's size is known only by
  // reading it.
  std::string text;
  std::array<char, 65536> buf;
  while (in && static_cast<int64_t>(text.size()) <= max_bytes) {
    in.read(buf.data(), buf.size());
    text.append(buf.data(), static_cast<size_t>(in.gcount()));
  }
  if (in.bad()) {
    return absl::NotFoundError(absl::StrFormat("%s: cannot read %s: %s", path,
                                               what, std::strerror(errno)));
  }
  if (static_cast<int64_t>(text.size()) > max_bytes) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s:1: (plan): more than the %d bytes allowed",
                        from_stdin ? "(stdin)" : path, max_bytes));
  }
  return text;
}

}  // namespace ringmaster
