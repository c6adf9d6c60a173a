// How a plan becomes jobs: one place for `ringmaster run` and `ringmaster
// serve` alike. The rank count's defaults, the cases expanded for it, the
// deadline, the back end, the jobs of variants and rounds, the NCCL
// tuning probe's cases and whether ranks may share GPUs.
#ifndef RINGMASTER_COORDINATOR_PLAN_JOBS_H_
#define RINGMASTER_COORDINATOR_PLAN_JOBS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ringmaster/v1/coordinator.pb.h"
#include "ringmaster/v1/plan.pb.h"

namespace ringmaster {

struct JobRequest {
  // Ranks asked for (--np, SubmitPlan.nranks); 0: the plan's `ranks`, else
  // `fallback_ranks`.
  int ranks = 0;
  // Ranks when neither the request nor the plan says: the visible GPUs for
  // a run on GPUs, 2 host ranks otherwise.
  int fallback_ranks = 2;
  std::string backend = "auto";  // auto, host or cuda
  double timeout_s = 0;          // 0: derived from the cases
  double op_timeout_s = 0;       // 0: the coordinator's default
};

// The job of `plan` for `request`: nranks, every case expanded for that
// many ranks, backend and deadline set (InvalidArgument for a bad request
// field or a plan that does not expand). No id, state or token yet.
absl::StatusOr<v1::Job> JobFromPlan(const v1::Plan& plan,
                                    const JobRequest& request);

// One job of a run: `base` under a variant (nullptr: none), in a round.
struct PlannedJob {
  v1::Job job;
  const v1::Variant* variant = nullptr;  // points into base.plan()
  int round = 0;
};

// The jobs of `rounds` rounds over the plan's variants (one job when it
// has none), interleaved in time (A B A B ...) so that compare pairs each
// B run with the A run beside it. Each variant's cases carry its name and
// ceiling; `base` must outlive the result (variant pointers).
std::vector<PlannedJob> JobsOfRounds(const v1::Job& base, int rounds);

// On the host backend (MPI) NCCL_* variables change nothing, and they are
// all a variant may set: a plan's variants then measure the same path.
// Their ceilings are dropped from `job` (no "% of NVLink" for a CPU run)
// and the warning to show is returned; otherwise "" and `job` is left as
// it is. `backend` is the launch's resolved backend (host or cuda).
std::string DropVariantsWithoutEffect(const std::string& backend, v1::Job* job);

// The NCCL tuning probe of `cases`: one pipelined, unverified operation
// each (NCCL logs its algorithm choices meanwhile).
std::vector<v1::Case> TuningProbeCases(std::vector<v1::Case> cases);

// Whether `ranks` ranks of `plan` share `gpus` GPUs: false when each rank
// has a GPU of its own; true when there are fewer GPUs and every case may
// share (training over the copy engines: no NCCL communicator, so the
// 2-rank arithmetic can be checked on one GPU; its times mean nothing);
// InvalidArgument naming the figures otherwise.
absl::StatusOr<bool> RanksShareGpus(const v1::Plan& plan, int ranks, int gpus);

}  // namespace ringmaster

#endif  // RINGMASTER_COORDINATOR_PLAN_JOBS_H_
