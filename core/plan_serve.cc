// The inference section of a plan case (bench: inference): the model (as
// bench: transformer's, without seq and micro_batch), the tensor-parallel
// widths, the prompt and generated lengths, the batch sweep and the latency
// objective.
#include <string>

#include "absl/strings/str_format.h"
#include "core/names.h"
#include "core/plan_parser.h"
#include "core/status_macros.h"
#include "core/transformer.h"

namespace ringmaster {
namespace plan_internal {

absl::Status PlanParser::ParseServeCase(const YAML::Node& node,
                                        const CaseKeys& get,
                                        v1::CaseSpec* spec) const {
  std::string f;
  for (const char* key : {"collective",
                          "ops",
                          "placement",
                          "root",
                          "sizes",
                          "method",
                          "direction",
                          "traffic",
                          "pattern",
                          "memory",
                          "path",
                          "shapes",
                          "slow_ratio",
                          "members",
                          "repeat",
                          "ladder",
                          "bucket",
                          "overlap",
                          "scaling",
                          "comm",
                          "mode",
                          "schedule",
                          "deferred_layers",
                          "loss_scale",
                          "gemm",
                          "optimizer",
                          "lr",
                          "weight_decay",
                          "steps",
                          "check_steps",
                          "master_weights"}) {
    YAML::Node n = get(key, &f);
    if (n) return Error(n, f, "bench: inference does not take this key");
  }
  RM_RETURN_IF_ERROR(ParseTransformerModel(node, get, spec, true));
  v1::ServeSpec* s = spec->mutable_serve();
  for (auto [key, out] :
       {std::pair{"prompt", int64_t{0}}, std::pair{"generate", int64_t{1}}}) {
    YAML::Node n = get(key, &f);
    if (!n) {
      return Error(node, f,
                   absl::StrFormat("missing: expected the tokens per sequence "
                                   "%s",
                                   out == 0 ? "of the prompt (prefill)"
                                            : "to generate (decode steps)"));
    }
    RM_ASSIGN_OR_RETURN(int64_t v, Int(n, f, 1, 1 << 20));
    if (out == 0) {
      s->set_prompt(v);
    } else {
      s->set_generate(v);
    }
  }
  v1::TransformerSpec* t = spec->mutable_transformer();
  t->set_seq(s->prompt() + s->generate());
  if (YAML::Node b = get("batch", &f)) {
    RM_ASSIGN_OR_RETURN(std::vector<YAML::Node> items, ScalarList(b, f));
    for (const auto& item : items) {
      RM_ASSIGN_OR_RETURN(int64_t v, Int(item, f, 1, 1 << 16));
      spec->add_serve_batches(v);
    }
  } else {
    spec->add_serve_batches(1);
  }
  t->set_micro_batch(spec->serve_batches(0));
  if (YAML::Node slo = get("slo", &f)) {
    if (!slo.IsMap()) return Error(slo, f, "expected {tpot_p99: 30ms}");
    static constexpr const char* kSloKeys[] = {"tpot_p99"};
    RM_RETURN_IF_ERROR(CheckKeys(slo, f + ".", kSloKeys));
    if (YAML::Node p99 = slo["tpot_p99"]) {
      RM_ASSIGN_OR_RETURN(double v, Duration(p99, f + ".tpot_p99"));
      s->set_slo_tpot_p99_s(v);
    }
  }
  s->set_repeats(3);
  if (YAML::Node r = get("repeats", &f)) {
    RM_ASSIGN_OR_RETURN(int64_t v, Int(r, f, 1, 1000));
    s->set_repeats(static_cast<int32_t>(v));
  }
  RM_RETURN_IF_ERROR(ParseServeLayouts(get, spec));
  RM_RETURN_IF_ERROR(ParseModelDtypesAndBackend(get, spec));
  if (YAML::Node timing = get("timing", &f)) {
    return Error(timing, f,
                 "bench: inference times every decode step of `repeats` "
                 "requests; it takes no timing section");
  }
  return absl::OkStatus();
}

// `parallel: {tp: 2}` or a list of them (one case each); default tp 1.
absl::Status PlanParser::ParseServeLayouts(const CaseKeys& get,
                                           v1::CaseSpec* spec) const {
  std::string f;
  const TransformerShape shape = ShapeOf(spec->transformer());
  YAML::Node node = get("parallel", &f);
  if (!node) {
    spec->add_layouts()->set_tp(1);
    spec->mutable_layouts(0)->set_dp(1);
    return absl::OkStatus();
  }
  RM_ASSIGN_OR_RETURN(auto items,
                      MapOrList(node, f, "expected {tp: 2} or a list of them"));
  static constexpr const char* kServeLayoutKeys[] = {"tp"};
  for (const auto& [item, field] : items) {
    if (!item.IsMap()) return Error(item, field, "expected {tp: N}");
    RM_RETURN_IF_ERROR(CheckKeys(item, field + ".", kServeLayoutKeys));
    int64_t tp = 1;
    if (YAML::Node v = item["tp"]) {
      RM_ASSIGN_OR_RETURN(tp, Int(v, field + ".tp", 1, 1 << 12));
    }
    if (shape.heads % tp != 0 || shape.kv_heads % tp != 0 ||
        shape.ffn_hidden % tp != 0) {
      return Error(
          item, field + ".tp",
          absl::StrFormat("must divide heads (%d), kv_heads (%d) and "
                          "ffn_hidden (%d)",
                          shape.heads, shape.kv_heads, shape.ffn_hidden));
    }
    v1::ParallelLayout* l = spec->add_layouts();
    l->set_dp(1);
    l->set_tp(static_cast<int32_t>(tp));
  }
  return absl::OkStatus();
}

}  // namespace plan_internal
}  // namespace ringmaster
