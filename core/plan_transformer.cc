// The transformer section of a plan case (bench: transformer): the model
// (a preset or an explicit shape, the layers run, sequence and micro-batch),
// the parallel layouts, the optimizer and the step counts.
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/names.h"
#include "core/plan_parser.h"
#include "core/status_macros.h"
#include "core/transformer.h"

namespace ringmaster {
namespace plan_internal {
namespace {

constexpr const char* kTransformerModelKeys[] = {
    "preset", "layers",   "seq",      "micro_batch", "hidden",
    "heads",  "kv_heads", "head_dim", "ffn_hidden",  "rope_theta"};
constexpr const char* kLayoutKeys[] = {"dp", "tp", "sp", "zero"};

// ValidateShape's and ValidateParallel's "field: why", split so the error
// names the field under the plan's key.
std::string FieldOf(const absl::Status& s) {
  const std::string msg(s.message());
  return msg.substr(0, msg.find(':'));
}
std::string WhyOf(const absl::Status& s) {
  const std::string msg(s.message());
  const size_t colon = msg.find(": ");
  return colon == std::string::npos ? msg : msg.substr(colon + 2);
}

}  // namespace

absl::Status PlanParser::ParseTransformerCase(const YAML::Node& node,
                                              const CaseKeys& get,
                                              v1::CaseSpec* spec) const {
  std::string f;
  for (const char* key :
       {"collective", "ops",       "placement",       "root",       "sizes",
        "method",     "direction", "traffic",         "pattern",    "memory",
        "path",       "shapes",    "slow_ratio",      "members",    "repeat",
        "ladder",     "bucket",    "overlap",         "scaling",    "comm",
        "mode",       "schedule",  "deferred_layers", "loss_scale", "gemm"}) {
    YAML::Node n = get(key, &f);
    if (n) return Error(n, f, "bench: transformer does not take this key");
  }
  RM_RETURN_IF_ERROR(ParseTransformerModel(node, get, spec));
  RM_RETURN_IF_ERROR(ParseTransformerLayouts(get, spec));
  v1::TransformerSpec* t = spec->mutable_transformer();
  t->set_optimizer("adamw");
  if (YAML::Node o = get("optimizer", &f)) {
    RM_ASSIGN_OR_RETURN(std::string v, OneOf(o, f, "adamw", "sgd"));
    t->set_optimizer(v);
  }
  t->set_lr(t->optimizer() == "adamw" ? 1e-4 : 1e-2);
  if (YAML::Node lr = get("lr", &f)) {
    RM_ASSIGN_OR_RETURN(double v, Number(lr, f, 0, 10));
    t->set_lr(v);
  }
  if (YAML::Node wd = get("weight_decay", &f)) {
    if (wd.IsScalar() && wd.Scalar() == "0") {
      t->set_weight_decay(0);
    } else {
      RM_ASSIGN_OR_RETURN(double v, Number(wd, f, 0, 1));
      t->set_weight_decay(v);
    }
  }
  t->set_steps(10);
  if (YAML::Node st = get("steps", &f)) {
    RM_ASSIGN_OR_RETURN(int64_t v, Int(st, f, 1, 100000));
    t->set_steps(static_cast<int32_t>(v));
  }
  if (YAML::Node mw = get("master_weights", &f)) {
    RM_ASSIGN_OR_RETURN(bool v, Bool(mw, f));
    t->set_master_weights(v);
  }
  if (YAML::Node cs = get("check_steps", &f)) {
    RM_ASSIGN_OR_RETURN(int64_t v, Int(cs, f, 0, 1000));
    t->set_check_steps(static_cast<int32_t>(v));
  }
  RM_RETURN_IF_ERROR(ParseModelDtypesAndBackend(get, spec));
  *spec->mutable_timing() = DefaultTiming();
  spec->mutable_timing()->set_warmup_iters(2);
  if (YAML::Node timing = get("timing", &f)) {
    RM_ASSIGN_OR_RETURN(*spec->mutable_timing(),
                        ParseTiming(timing, f, spec->timing()));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::pair<YAML::Node, std::string>>>
PlanParser::MapOrList(const YAML::Node& node, const std::string& field,
                      const std::string& expected) const {
  std::vector<std::pair<YAML::Node, std::string>> items;
  if (node.IsMap()) {
    items.emplace_back(node, field);
  } else if (node.IsSequence()) {
    for (size_t i = 0; i < node.size(); ++i)
      items.emplace_back(node[i], absl::StrFormat("%s[%d]", field, i));
  } else {
    return Error(node, field, expected);
  }
  return items;
}

// The dtype is the backend's precision unless the plan names one:
// bfloat16 on GPUs, float32 on the host.
absl::Status PlanParser::ParseModelDtypesAndBackend(const CaseKeys& get,
                                                    v1::CaseSpec* spec) const {
  std::string f;
  if (YAML::Node dtypes = get("dtypes", &f)) {
    RM_ASSIGN_OR_RETURN(std::vector<YAML::Node> items, ScalarList(dtypes, f));
    for (const auto& item : items) {
      auto d = ParseDataType(item.Scalar());
      if (!d || !(*d == v1::FLOAT32 || *d == v1::BFLOAT16)) {
        return Error(item, f,
                     absl::StrFormat("expected float32 or bfloat16, got \"%s\"",
                                     item.Scalar()));
      }
      spec->add_dtypes(*d);
    }
  }
  spec->set_verify(true);
  if (YAML::Node backend = get("backend", &f)) {
    RM_RETURN_IF_ERROR(ParseBackendKey(backend, f, spec));
  }
  return absl::OkStatus();
}

// `model: {preset: llama3-8b, layers: 4, seq: 4096, micro_batch: 1}`, or
// an explicit shape in place of the preset (hidden, heads, kv_heads,
// head_dim, ffn_hidden; rope_theta optional). Shape keys beside a preset
// override it.
absl::Status PlanParser::ParseTransformerModel(const YAML::Node& node,
                                               const CaseKeys& get,
                                               v1::CaseSpec* spec,
                                               bool serving) const {
  std::string f;
  YAML::Node model = get("model", &f);
  if (!model || !model.IsMap()) {
    return Error(model ? model : node, f,
                 serving ? "missing: expected {preset: llama3-8b, layers: 4}"
                         : "missing: expected {preset: llama3-8b, layers: 4, "
                           "seq: 4096, micro_batch: 1}");
  }
  if (serving) {
    for (const char* key : {"seq", "micro_batch"}) {
      if (model[key]) {
        return Error(model[key], f + "." + key,
                     "bench: inference sets it from prompt + generate and "
                     "batch");
      }
    }
  }
  RM_RETURN_IF_ERROR(CheckKeys(model, f + ".", kTransformerModelKeys));
  v1::TransformerSpec* t = spec->mutable_transformer();
  TransformerShape s;
  if (YAML::Node p = model["preset"]) {
    RM_ASSIGN_OR_RETURN(std::string name, String(p, f + ".preset"));
    auto preset = TransformerPreset(name);
    if (!preset.ok()) {
      return Error(
          p, f + ".preset",
          absl::StrFormat("expected one of: %s, got \"%s\"",
                          absl::StrJoin(TransformerPresetNames(), ", "), name));
    }
    s = *preset;
    t->set_preset(name);
  } else {
    for (const char* key :
         {"hidden", "heads", "kv_heads", "head_dim", "ffn_hidden"}) {
      if (!model[key]) {
        return Error(model, f + "." + key,
                     "missing: expected an integer (or a preset: " +
                         absl::StrJoin(TransformerPresetNames(), ", ") + ")");
      }
    }
  }
  for (auto [key, out, max] :
       {std::tuple{"hidden", &s.hidden, int64_t{1} << 17},
        std::tuple{"heads", &s.heads, int64_t{4096}},
        std::tuple{"kv_heads", &s.kv_heads, int64_t{4096}},
        std::tuple{"head_dim", &s.head_dim, int64_t{4096}},
        std::tuple{"ffn_hidden", &s.ffn_hidden, int64_t{1} << 19}}) {
    if (YAML::Node v = model[key]) {
      RM_ASSIGN_OR_RETURN(*out, Int(v, f + "." + key, 1, max));
    }
  }
  if (YAML::Node v = model["rope_theta"]) {
    RM_ASSIGN_OR_RETURN(s.rope_theta, Number(v, f + ".rope_theta", 0, 1e12));
  }
  if (!model["layers"]) {
    return Error(model, f + ".layers",
                 "missing: expected the number of blocks to run");
  }
  RM_ASSIGN_OR_RETURN(int64_t layers, Int(model["layers"], f + ".layers", 1,
                                          s.layers > 0 ? s.layers : 1024));
  s.layers = static_cast<int>(layers);
  if (absl::Status v = ValidateShape(s); !v.ok()) {
    return Error(model, f + "." + FieldOf(v), WhyOf(v));
  }
  if (!model["seq"] && !serving) {
    return Error(model, f + ".seq", "missing: expected tokens per sequence");
  }
  int64_t seq = 1;
  if (!serving) {
    RM_ASSIGN_OR_RETURN(seq, Int(model["seq"], f + ".seq", 1, 1 << 20));
  }
  int64_t micro = 1;
  if (YAML::Node mb = model["micro_batch"]) {
    RM_ASSIGN_OR_RETURN(micro, Int(mb, f + ".micro_batch", 1, 1 << 16));
  }
  t->set_layers(static_cast<int32_t>(layers));
  t->set_hidden(s.hidden);
  t->set_heads(s.heads);
  t->set_kv_heads(s.kv_heads);
  t->set_head_dim(s.head_dim);
  t->set_ffn_hidden(s.ffn_hidden);
  t->set_rope_theta(s.rope_theta);
  t->set_seq(seq);
  t->set_micro_batch(micro);
  return absl::OkStatus();
}

// `parallel: {dp: 2, tp: 2, sp: true, zero: 3}`, or a list of them (one
// case each); default one rank.
absl::Status PlanParser::ParseTransformerLayouts(const CaseKeys& get,
                                                 v1::CaseSpec* spec) const {
  std::string f;
  const v1::TransformerSpec& t = spec->transformer();
  YAML::Node node = get("parallel", &f);
  if (!node) {
    spec->add_layouts()->set_dp(1);
    spec->mutable_layouts(0)->set_tp(1);
    return absl::OkStatus();
  }
  RM_ASSIGN_OR_RETURN(
      auto items,
      MapOrList(node, f,
                "expected {dp: 2, tp: 2, sp: true, zero: 3} or a list"));
  for (const auto& [item, field] : items) {
    if (!item.IsMap())
      return Error(item, field, "expected {dp: N, tp: N, ...}");
    RM_RETURN_IF_ERROR(CheckKeys(item, field + ".", kLayoutKeys));
    TransformerParallel p;
    for (auto [key, out] : {std::pair{"dp", &p.dp}, std::pair{"tp", &p.tp},
                            std::pair{"zero", &p.zero}}) {
      if (YAML::Node v = item[key]) {
        RM_ASSIGN_OR_RETURN(int64_t n, Int(v, field + "." + key, 0, 1 << 16));
        *out = static_cast<int>(n);
      }
    }
    if (YAML::Node v = item["sp"]) {
      RM_ASSIGN_OR_RETURN(p.sp, Bool(v, field + ".sp"));
    }
    if (absl::Status v =
            ValidateParallel(ShapeOf(t), p, t.micro_batch(), t.seq());
        !v.ok()) {
      return Error(item, field + "." + FieldOf(v), WhyOf(v));
    }
    v1::ParallelLayout* l = spec->add_layouts();
    l->set_dp(p.dp);
    l->set_tp(p.tp);
    l->set_sp(p.sp);
    l->set_zero(p.zero);
  }
  return absl::OkStatus();
}

}  // namespace plan_internal
}  // namespace ringmaster
