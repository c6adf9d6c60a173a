#include "tests/injection_check.h"

#include <gtest/gtest.h>

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "tests/service_harness.h"

namespace ringmaster::testing {

std::vector<std::string> HostileValues(const std::string& m) {
  return {
      "$(touch " + m + "/a)",
      "`touch " + m + "/b`",
      "x; touch " + m + "/c; sleep 1234 &",
      "x' \"; touch " + m + "/d #",
      "x\ntouch " + m + "/e",
      "| touch " + m + "/f > " + m + "/g",
      "${IFS}touch${IFS}" + m + "/h",
      "$(sleep 1234)&& touch " + m + "/i || true",
  };
}

std::string HostileEnvName(size_t i) {
  return absl::StrFormat("NCCL_RINGMASTER_S6_%d", i);
}

absl::StatusOr<HostileRun> RunHostile(v1::Coordinator::Stub& stub,
                                      const std::string& token,
                                      v1::SubmitPlanRequest request,
                                      const std::string& marks) {
  HostileRun run;
  run.values = HostileValues(marks);
  for (size_t i = 0; i < run.values.size(); ++i)
    (*request.mutable_env())[HostileEnvName(i)] = run.values[i];
  auto sub = Submit(stub, token, request);
  if (!sub.ok()) return sub.status();
  const std::string job_id = sub->job().job_id();
  run.job = WaitTerminal(stub, token, job_id, absl::Seconds(120));
  v1::QueryResultsRequest q;
  q.set_job_id(job_id);
  auto ctx = Ctx(token);
  const grpc::Status st = stub.QueryResults(ctx.get(), q, &run.results);
  if (!st.ok())
    return absl::InternalError("QueryResults: " + st.error_message());
  return run;
}

bool CheckNothingInjected(const std::string& launcher, const v1::Job& job,
                          const v1::QueryResultsResponse& results,
                          const std::vector<std::string>& values,
                          int values_on_command_line,
                          const std::string& marks) {
  int exact = 0;
  if (results.results_size() > 0) {
    const auto& env = results.results(0).provenance().nccl_env();
    for (size_t i = 0; i < values.size(); ++i) {
      auto it = env.find(HostileEnvName(i));
      if (it != env.end() && it->second == values[i]) ++exact;
    }
  }
  absl::SleepFor(absl::Milliseconds(300));  // anything injected has run
  const int marks_made = EntriesBelow(marks);
  const int stray = ProcessesMentioning("sleep 1234");
  const bool pass = job.state() == v1::JOB_SUCCEEDED &&
                    exact == static_cast<int>(values.size()) &&
                    values_on_command_line == 0 && marks_made == 0 &&
                    stray == 0;
  Figure(
      "S6",
      absl::StrFormat("%s: job=%s values_seen_exactly=%d/%d "
                      "values_on_command_line=%d injected_files=%d "
                      "extra_processes=%d",
                      launcher, v1::JobState_Name(job.state()), exact,
                      values.size(), values_on_command_line, marks_made, stray),
      pass);
  EXPECT_EQ(job.state(), v1::JOB_SUCCEEDED) << job.failure().detail();
  EXPECT_EQ(exact, static_cast<int>(values.size()));
  EXPECT_EQ(values_on_command_line, 0);
  EXPECT_EQ(marks_made, 0);
  EXPECT_EQ(stray, 0);
  return pass;
}

}  // namespace ringmaster::testing
