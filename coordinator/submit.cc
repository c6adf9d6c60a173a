#include "coordinator/submit.h"

#include "coordinator/plan_jobs.h"
#include "core/plan.h"
#include "core/safe_path.h"

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
  JobRequest request;
  request.ranks = req.nranks();
  request.backend = req.backend();
  request.timeout_s = req.timeout_s();
  request.op_timeout_s = req.op_timeout_s();
  auto job = JobFromPlan(plan, request);
  if (!job.ok()) return job.status();
  job->set_request_id(req.request_id());
  for (const auto& [k, v] : req.env()) (*job->mutable_env())[k] = v;
  if (!req.output().empty()) {
    auto output = NormalizeOutputName(req.output());
    if (!output.ok()) return output.status();
    job->set_output(*output);
  }
  return job;
}

}  // namespace ringmaster
