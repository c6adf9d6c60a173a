// The training section of a plan case (bench: train).
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

// bench: train: the model, optimizer, buckets, overlap, the
// ladder of rank counts and the precision.
absl::Status PlanParser::ParseTrainCase(const YAML::Node& node,
                                        const CaseKeys& get,
                                        v1::CaseSpec* spec) const {
  std::string f;
  for (const char* key :
       {"collective", "ops", "placement", "root", "sizes", "method",
        "direction", "traffic", "pattern", "memory", "path", "shapes",
        "slow_ratio", "members", "repeat", "parallel", "weight_decay"}) {
    YAML::Node n = get(key, &f);
    if (n) return Error(n, f, "bench: train does not take this key");
  }
  RM_RETURN_IF_ERROR(ParseTrainModel(node, get, spec));
  RM_RETURN_IF_ERROR(ParseTrainStep(get, spec));
  v1::TrainSpec* t = spec->mutable_train();
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

// The model (layers, hidden, a batch or a list of them) and the mode
// (train, inference or both).
absl::Status PlanParser::ParseTrainModel(const YAML::Node& node,
                                         const CaseKeys& get,
                                         v1::CaseSpec* spec) const {
  std::string f;
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
        return Error(item, f,
                     absl::StrFormat("expected train or inference, got \"%s\"",
                                     item.Scalar()));
      }
      spec->add_inference(v == "inference");
    }
  } else {
    spec->add_inference(false);
  }
  return absl::OkStatus();
}

// How a step trains: optimizer, learning rate, buckets, steps and checks,
// scaling, reduction, schedule, GEMM choice, master weights, loss scale.
absl::Status PlanParser::ParseTrainStep(const CaseKeys& get,
                                        v1::CaseSpec* spec) const {
  std::string f;
  v1::TrainSpec* t = spec->mutable_train();
  const int64_t layers = t->layers();
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
  return absl::OkStatus();
}

}  // namespace plan_internal
}  // namespace ringmaster
