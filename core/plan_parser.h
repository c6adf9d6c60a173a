// The plan parser's parts, internal to core/plan*.cc: one file per section
// of a case (collective, node benchmark, training, plug-in kind) over the
// YAML reading layer (core/yaml_read.h). Use core/plan.h instead.
#ifndef RINGMASTER_CORE_PLAN_PARSER_H_
#define RINGMASTER_CORE_PLAN_PARSER_H_

#include <array>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "core/plan.h"
#include "core/status_macros.h"
#include "core/yaml_read.h"
#include "ringmaster/v1/plan.pb.h"
#include "yaml-cpp/yaml.h"

namespace ringmaster {
namespace plan_internal {

inline constexpr const char* kTopKeys[] = {
    "name",     "description", "ranks",    "nodes", "ranks_per_node",
    "defaults", "cases",       "variants", "card"};
inline constexpr const char* kVariantKeys[] = {"name", "env", "ceiling",
                                               "description"};
// Keys only bench: train takes; every case may carry them (the other
// parsers say which bench they belong to).
inline constexpr std::array<const char*, 15> kTrainKeys = {
    "model",          "optimizer",  "lr",          "bucket",
    "overlap",        "steps",      "check_steps", "scaling",
    "comm",           "mode",       "schedule",    "deferred_layers",
    "master_weights", "loss_scale", "gemm"};
inline constexpr std::array<const char*, 23> kOtherCaseKeys = {
    "name",   "collective", "sizes",   "dtypes",  "ops",    "placement",
    "root",   "verify",     "backend", "timing",  "ladder", "bench",
    "method", "direction",  "traffic", "pattern", "memory", "path",
    "shapes", "slow_ratio", "members", "repeat",  "params"};
// What a plug-in kind's case may say.
inline constexpr const char* kPluginCaseKeys[] = {
    "name", "bench", "params", "timing", "backend", "verify", "ladder"};
template <size_t A, size_t B>
inline constexpr std::array<const char*, A + B> Concat(
    const std::array<const char*, A>& a, const std::array<const char*, B>& b) {
  std::array<const char*, A + B> out{};
  for (size_t i = 0; i < A; ++i) out[i] = a[i];
  for (size_t i = 0; i < B; ++i) out[A + i] = b[i];
  return out;
}
// Keys only bench: transformer takes (it shares model, optimizer, lr,
// steps and check_steps with bench: train).
inline constexpr std::array<const char*, 2> kTransformerKeys = {"parallel",
                                                                "weight_decay"};
// Keys only bench: inference takes (it shares model, parallel and backend
// with bench: transformer).
inline constexpr std::array<const char*, 5> kServeKeys = {
    "prompt", "generate", "batch", "slo", "repeats"};
inline constexpr auto kCaseKeys = Concat(
    Concat(Concat(kOtherCaseKeys, kTrainKeys), kTransformerKeys), kServeKeys);
// A case (not the defaults) may also give keys of its own for GPUs.
inline constexpr auto kSizedCaseKeys =
    Concat(kCaseKeys, std::array<const char*, 1>{"cuda"});
inline constexpr const char* kModelKeys[] = {"layers", "hidden", "batch"};
inline constexpr const char* kTimingKeys[] = {"warmup",
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
inline constexpr const char* kSizeKeys[] = {"min", "max", "factor", "host_max"};

// A case key's node, falling back to the plan's defaults; `*field`
// receives where the value was written (for messages).
using CaseKeys = std::function<YAML::Node(const char* key, std::string* field)>;

// Reads one plan; every method returns errors already formatted as
// "<file>:<line>: <field>: <what>".
class PlanParser : public YamlReader {
 public:
  PlanParser(std::string file, const PlanLimits& limits)
      : YamlReader(std::move(file), limits.max_size_bytes,
                   limits.max_list_entries),
        limits_(limits) {}

  absl::StatusOr<v1::Plan> Parse(const YAML::Node& root);

 private:
  // plan.cc

  absl::Status ParseVariants(const YAML::Node& node, v1::Plan* plan) const;

  absl::StatusOr<v1::SizeSweep> ParseSizes(const YAML::Node& node,
                                           const std::string& field) const;

  absl::StatusOr<v1::Timing> ParseTiming(
      const YAML::Node& node, const std::string& field,
      const v1::Timing& base = DefaultTiming()) const;

  // `sized`: the node may hold `cuda:` (ignored here; ParseSizedCase).
  absl::StatusOr<v1::CaseSpec> ParseCase(const YAML::Node& node,
                                         const YAML::Node& defaults,
                                         const std::string& prefix,
                                         bool sized = false) const;
  // ParseCase, and the case's `cuda:` keys into its spec's `cuda`.
  absl::StatusOr<v1::CaseSpec> ParseSizedCase(const YAML::Node& node,
                                              const YAML::Node& defaults,
                                              const std::string& prefix) const;

  // `backend: auto | host | cuda`.
  absl::Status ParseBackendKey(const YAML::Node& node, const std::string& field,
                               v1::CaseSpec* spec) const;

  // `ladder: [1, 2, 4]`: rank counts, increasing; `ladder: {nodes: [1, 2,
  // 4]}`: node counts, each nodes x the plan's ranks_per_node ranks.
  absl::Status ParseLadder(const YAML::Node& node, const std::string& field,
                           v1::CaseSpec* spec) const;

  bool IsPluginKind(const std::string& name) const;

  // `verify` (default true) and `backend`, which every kind's case takes.
  absl::Status ParseVerifyAndBackend(const CaseKeys& get,
                                     v1::CaseSpec* spec) const;

  static bool NoInPlace(v1::Collective c);

  // plan_collective.cc
  // A collective's case (bench: collective, the default): what it
  // reduces, its sizes, types, ops and placements, timing and ladder.
  absl::Status ParseCollectiveCase(const YAML::Node& node,
                                   const std::string& prefix,
                                   const CaseKeys& get,
                                   v1::CaseSpec* out) const;

  // A collective's data types, ops and placements (defaults: float32, sum,
  // out of place and in place where the collective has both).
  absl::Status ParseCollectiveLists(const CaseKeys& get,
                                    v1::CaseSpec* out) const;

  // plan_plugin.cc
  // A plug-in kind's case: its parameters (scalars, kept as written), and
  // the keys every kind shares.
  absl::Status ParsePluginCase(const YAML::Node& node,
                               const std::string& prefix, const CaseKeys& get,
                               v1::CaseSpec* spec) const;

  // plan_node_bench.cc
  // The keys of a node benchmark (bench: p2p, latency, host_device,
  // local_copy, triad, gemm); collective-only keys are errors.
  absl::Status ParseBenchCase(const YAML::Node& node, const CaseKeys& get,
                              v1::CaseSpec* spec) const;
  // An error when `key` is set: bench `spec.bench()` `why`.
  absl::Status NotHere(const CaseKeys& get, const v1::CaseSpec& spec,
                       const char* key, const char* why) const;
  absl::Status ParseFindSlowKeys(const CaseKeys& get, v1::CaseSpec* spec) const;
  absl::Status ParseTransferKeys(const CaseKeys& get, v1::CaseSpec* spec) const;
  absl::Status ParsePathKeys(const CaseKeys& get, v1::CaseSpec* spec) const;
  absl::Status ParseOperands(const YAML::Node& node, const CaseKeys& get,
                             v1::CaseSpec* spec) const;
  absl::Status ParseBenchCommon(const CaseKeys& get, v1::CaseSpec* spec) const;

  // plan_train.cc
  // bench: train: the model, optimizer, buckets, overlap, the
  // ladder of rank counts and the precision.
  absl::Status ParseTrainCase(const YAML::Node& node, const CaseKeys& get,
                              v1::CaseSpec* spec) const;
  absl::Status ParseTrainModel(const YAML::Node& node, const CaseKeys& get,
                               v1::CaseSpec* spec) const;
  absl::Status ParseTrainStep(const CaseKeys& get, v1::CaseSpec* spec) const;

  // plan_transformer.cc
  // bench: transformer: the model, its parallel layouts and the step.
  absl::Status ParseTransformerCase(const YAML::Node& node, const CaseKeys& get,
                                    v1::CaseSpec* spec) const;
  // serving: seq and micro_batch come from the inference keys instead.
  absl::Status ParseTransformerModel(const YAML::Node& node,
                                     const CaseKeys& get, v1::CaseSpec* spec,
                                     bool serving = false) const;
  absl::Status ParseTransformerLayouts(const CaseKeys& get,
                                       v1::CaseSpec* spec) const;
  // One mapping or a list of them, each with its field name
  // ("parallel", "parallel[1]"); `expected` is the error otherwise.
  absl::StatusOr<std::vector<std::pair<YAML::Node, std::string>>> MapOrList(
      const YAML::Node& node, const std::string& field,
      const std::string& expected) const;
  // dtypes (float32 or bfloat16; none: the backend's) and backend.
  absl::Status ParseModelDtypesAndBackend(const CaseKeys& get,
                                          v1::CaseSpec* spec) const;

  // plan_serve.cc
  // bench: inference: the model, tensor-parallel widths, prompt, generate,
  // the batch sweep and the latency objective.
  absl::Status ParseServeCase(const YAML::Node& node, const CaseKeys& get,
                              v1::CaseSpec* spec) const;
  absl::Status ParseServeLayouts(const CaseKeys& get, v1::CaseSpec* spec) const;

  // plan_node_bench.cc: a list-valued enum key, every entry through
  // `parse` and in `allowed`, or `fallback`.
  template <typename E>
  absl::Status EnumList(const CaseKeys& get, const char* key,
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

  PlanLimits limits_;
  int ranks_per_node_ = 0;  // the plan's, for ladders of nodes
};

}  // namespace plan_internal
}  // namespace ringmaster

#endif  // RINGMASTER_CORE_PLAN_PARSER_H_
