#include "coordinator/plan_jobs.h"

#include <algorithm>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "coordinator/supervisor.h"
#include "core/sweep.h"

namespace ringmaster {

absl::StatusOr<v1::Job> JobFromPlan(const v1::Plan& plan,
                                    const JobRequest& request) {
  // The largest job anyone runs (a coordinator's --max-ranks, at most the
  // same, is the admission limit).
  constexpr int kMaxRanks = 65536;
  if (request.ranks < 0 || request.ranks > kMaxRanks) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "nranks: expected 1..%d ranks, got %d", kMaxRanks, request.ranks));
  }
  const int nranks =
      request.ranks > 0
          ? request.ranks
          : (plan.ranks() > 0 ? plan.ranks()
                              : std::max(1, request.fallback_ranks));
  const std::string backend =
      request.backend.empty() ? "auto" : request.backend;
  if (backend != "auto" && backend != "host" && backend != "cuda") {
    return absl::InvalidArgumentError(
        "backend: expected auto, host or cuda, got " + backend);
  }
  const v1::Plan sized = PlanForBackend(plan, backend);
  auto cases = ExpandPlan(sized, 100000, nranks);
  if (!cases.ok()) return cases.status();
  if (!(request.timeout_s >= 0 && request.timeout_s <= 7 * 86400) ||
      !(request.op_timeout_s >= 0 && request.op_timeout_s <= 86400)) {
    return absl::InvalidArgumentError(
        "timeout_s / op_timeout_s: expected 0 (default) up to 7 days / 1 day");
  }
  v1::Job job;
  *job.mutable_plan() = sized;
  job.set_deadline_s(request.timeout_s > 0 ? request.timeout_s
                                           : DefaultDeadlineSeconds(*cases));
  for (auto& c : *cases) *job.add_cases() = std::move(c);
  job.set_nranks(nranks);
  job.set_backend(backend);
  job.set_op_timeout_s(request.op_timeout_s);
  return job;
}

std::vector<PlannedJob> JobsOfRounds(const v1::Job& base, int rounds) {
  std::vector<const v1::Variant*> variants;
  for (const auto& v : base.plan().variants()) variants.push_back(&v);
  if (variants.empty()) variants.push_back(nullptr);
  std::vector<PlannedJob> jobs;
  for (int round = 0; round < std::max(rounds, 1); ++round) {
    for (const v1::Variant* variant : variants) {
      PlannedJob p{base, variant, round};
      if (variant) {
        for (auto& c : *p.job.mutable_cases()) {
          c.set_variant(variant->name());
          c.set_ceiling_gbps(variant->ceiling_gbps());
        }
      }
      jobs.push_back(std::move(p));
    }
  }
  return jobs;
}

std::string DropVariantsWithoutEffect(const std::string& backend,
                                      v1::Job* job) {
  v1::Plan* plan = job->mutable_plan();
  if (backend != "host" || plan->variants_size() < 2) return "";
  // A plan's variants set NCCL_* variables only (core/plan.cc refuses
  // others), so on the host backend they never differ.
  std::vector<std::string> names;
  for (const v1::Variant& v : plan->variants()) names.push_back(v.name());
  for (v1::Variant& v : *plan->mutable_variants()) v.set_ceiling_gbps(0);
  for (v1::Case& c : *job->mutable_cases()) c.set_ceiling_gbps(0);
  return absl::StrFormat(
      "variants %s set only NCCL_* variables, which the host backend (MPI) "
      "ignores: they all measure the same path, so their differences are "
      "run-to-run noise, and no path ceiling applies",
      absl::StrJoin(names, ", "));
}

std::vector<v1::Case> TuningProbeCases(std::vector<v1::Case> cases) {
  for (auto& c : cases) {
    v1::Timing* t = c.mutable_timing();
    t->set_mode(v1::PIPELINED);
    t->set_warmup_iters(1);
    t->set_warmup_max_time_s(0);
    t->set_fixed_iters_per_sample(1);
    t->set_min_samples(1);
    t->set_max_samples(1);
    c.set_verify(false);
  }
  return cases;
}

absl::StatusOr<bool> RanksShareGpus(const v1::Plan& plan, int ranks, int gpus) {
  if (ranks <= gpus) return false;
  for (const v1::CaseSpec& c : plan.cases()) {
    // A rung of one rank needs no communicator; any other needs NCCL unless
    // it trains over the copy engines.
    bool nccl_rungs = c.ladder().empty();
    for (int n : c.ladder()) nccl_rungs = nccl_rungs || n != 1;
    if (c.bench() != v1::BENCH_TRAIN ||
        (c.train().comm() != "ce" && nccl_rungs)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "--np %d: only %d GPU(s) are visible and NCCL needs one GPU per "
          "rank (use --backend host for CPU ranks)",
          ranks, gpus));
    }
  }
  return true;
}

}  // namespace ringmaster
