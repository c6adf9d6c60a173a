// A SubmitPlan request turned into a job: the plan parsed, checked and
// expanded, the limits and output name validated. Plain logic (no gRPC), so
// the request fuzzer and the service share it.
#ifndef RINGMASTER_COORDINATOR_SUBMIT_H_
#define RINGMASTER_COORDINATOR_SUBMIT_H_

#include "absl/status/statusor.h"
#include "ringmaster/v1/coordinator.pb.h"

namespace ringmaster {

// The plan of a SubmitPlan request, parsed and expanded for its rank count
// (InvalidArgument with file:line: field on a bad plan, or the request
// field that is wrong).
absl::StatusOr<v1::Job> JobFromSubmit(const v1::SubmitPlanRequest& request);

}  // namespace ringmaster

#endif  // RINGMASTER_COORDINATOR_SUBMIT_H_
