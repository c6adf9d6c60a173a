// S6 (shared/RELIABILITY.md): hostile values for what users send, and the
// check that nothing they carry was ever run by a shell. Shared by the S6
// tests of every launcher (mpirun, kubectl, sbatch + srun).
#ifndef RINGMASTER_TESTS_INJECTION_CHECK_H_
#define RINGMASTER_TESTS_INJECTION_CHECK_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ringmaster/v1/coordinator.grpc.pb.h"
#include "ringmaster/v1/coordinator.pb.h"

namespace ringmaster::testing {

// S6: values full of shell metacharacters, each of which would create a
// file under `marker_dir` (or start `sleep 1234`) if any shell ever
// evaluated it. Sent as NCCL_RINGMASTER_S6_<i> (HostileEnvName).
std::vector<std::string> HostileValues(const std::string& marker_dir);
std::string HostileEnvName(size_t i);

// A finished job that carried HostileValues(marks) in its environment.
struct HostileRun {
  std::vector<std::string> values;
  v1::Job job;
  v1::QueryResultsResponse results;
};

// Adds HostileValues(marks) to `request`'s environment, submits it with
// `token`, waits up to 120 s for the job to end and reads its results.
absl::StatusOr<HostileRun> RunHostile(v1::Coordinator::Stub& stub,
                                      const std::string& token,
                                      v1::SubmitPlanRequest request,
                                      const std::string& marks);

// S6's verdict on a finished job that carried HostileValues(marks):
// SUCCEEDED, rank 0 saw every value byte for byte (its NCCL_* environment
// is in each result's provenance), `values_on_command_line` is 0 (what the
// caller found on the launcher's argv or script), no file appeared under
// `marks` and no `sleep 1234` runs. Prints the FIGURE line (S6, prefixed
// with `launcher`), adds a gtest failure for each broken part and returns
// whether all held.
bool CheckNothingInjected(const std::string& launcher, const v1::Job& job,
                          const v1::QueryResultsResponse& results,
                          const std::vector<std::string>& values,
                          int values_on_command_line, const std::string& marks);

}  // namespace ringmaster::testing

#endif  // RINGMASTER_TESTS_INJECTION_CHECK_H_
