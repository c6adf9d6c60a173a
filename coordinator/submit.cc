#include "coordinator/submit.h"

#include <cmath>

#include "absl/strings/str_format.h"
#include "coordinator/supervisor.h"
#include "core/plan.h"
#include "core/safe_path.h"
#include "core/sweep.h"

namespace ringmaster {

absl::StatusOr<v1::Job> JobFromSubmit(const v1::SubmitPlanRequest& req) {
  v1::Plan plan = req.plan();
  if (!req.plan_yaml().empty()) {
    auto parsed = ParsePlanYaml(req.plan_yaml(), req.plan_name().empty()
                                                     ? "<submitted plan>"
                                                     : req.plan_name());
    if (!parsed.ok()) return parsed.status();
    plan = *parsed;
  } else if (!req.has_plan()) {
    return absl::InvalidArgumentError("SubmitPlan: no plan_yaml and no plan");
  }
  if (req.nranks() < 0 || req.nranks() > 4096) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "nranks: expected 1..4096 ranks, got %d", req.nranks()));
  }
  int nranks =
      req.nranks() > 0 ? req.nranks() : (plan.ranks() > 0 ? plan.ranks() : 2);
  auto cases = ExpandPlan(plan, 100000, nranks);
  if (!cases.ok()) return cases.status();
  if (!(req.timeout_s() >= 0 && req.timeout_s() <= 7 * 86400) ||
      !(req.op_timeout_s() >= 0 && req.op_timeout_s() <= 86400)) {
    return absl::InvalidArgumentError(
        "timeout_s / op_timeout_s: expected 0 (default) up to 7 days / 1 day");
  }
  const std::string backend = req.backend().empty() ? "auto" : req.backend();
  if (backend != "auto" && backend != "host" && backend != "cuda") {
    return absl::InvalidArgumentError(
        "backend: expected auto, host or cuda, got " + backend);
  }
  const double deadline =
      req.timeout_s() > 0 ? req.timeout_s() : DefaultDeadlineSeconds(*cases);
  v1::Job job;
  *job.mutable_plan() = std::move(plan);
  for (auto& c : *cases) *job.add_cases() = std::move(c);
  job.set_nranks(nranks);
  job.set_request_id(req.request_id());
  job.set_backend(backend);
  job.set_deadline_s(deadline);
  job.set_op_timeout_s(req.op_timeout_s());
  for (const auto& [k, v] : req.env()) (*job.mutable_env())[k] = v;
  if (!req.output().empty()) {
    auto output = NormalizeOutputName(req.output());
    if (!output.ok()) return output.status();
    job.set_output(*output);
  }
  return job;
}

}  // namespace ringmaster
