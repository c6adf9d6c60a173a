// `ringmaster serve --launcher slurm` on a real single-node Slurm (slurmctld
// + slurmd + munge from Debian, two fake GPUs in gres.conf) started by
// tests/slurm/cluster.sh: ranks run under `srun --mpi=pmix`, results are
// stored, the job SUCCEEDS; `ringmaster cancel` ends a long job through
// scancel. Skipped (with the reason) where Slurm or root is missing.
#include "coordinator/slurm.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "tests/injection_check.h"
#include "tests/service_harness.h"

namespace ringmaster {
namespace {

namespace fs = std::filesystem;
using testing::Ctx;
using ::testing::HasSubstr;
using ::testing::Not;

std::string g_cluster_dir;
std::string g_skip;

class SlurmEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    if (geteuid() != 0) {
      g_skip = "needs root to start slurmctld, slurmd and munged";
      return;
    }
    for (const char* tool : {"slurmctld", "slurmd", "munged", "sbatch"}) {
      if (std::system(
              absl::StrFormat("command -v %s >/dev/null", tool).c_str()) != 0) {
        g_skip = std::string(tool) + " is not installed (scripts/setup)";
        return;
      }
    }
    g_cluster_dir = testing::ScratchDir("slurm");
    const std::string cmd =
        absl::StrFormat("%s/tests/slurm/cluster.sh start %s >%s/start.log 2>&1",
                        RINGMASTER_SOURCE_DIR, g_cluster_dir, g_cluster_dir);
    if (std::system(cmd.c_str()) != 0) {
      g_skip = "the test cluster did not start: " +
               testing::ReadFile(g_cluster_dir + "/start.log");
      return;
    }
    setenv("SLURM_CONF", (g_cluster_dir + "/slurm.conf").c_str(), 1);
  }
  void TearDown() override {
    if (g_cluster_dir.empty()) return;
    std::system(absl::StrFormat("%s/tests/slurm/cluster.sh stop %s",
                                RINGMASTER_SOURCE_DIR, g_cluster_dir)
                    .c_str());
  }
};

const auto* const kEnv =
    ::testing::AddGlobalTestEnvironment(new SlurmEnvironment);

TEST(SlurmLaunch, TwoRanksUnderSrunPmixSucceedAndCancelGoesThroughScancel) {
  if (!g_skip.empty()) GTEST_SKIP() << g_skip;
  const std::string data = testing::ScratchDir("slurm-serve");
  testing::ServeProcess serve(
      data, {"--launcher", "slurm", "--slurm-gpus-per-node", "2",
             "--max-running", "1"});
  ASSERT_TRUE(serve.ok()) << serve.output();
  const std::string admin = serve.admin_token();
  auto stub = serve.Stub();

  // 1. The quickstart on 2 ranks through sbatch + srun --mpi=pmix.
  auto submitted = testing::Submit(
      *stub, admin,
      testing::HostSubmission(
          std::string(RINGMASTER_SOURCE_DIR) + "/plans/quickstart.yaml", 2));
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  const v1::SubmitPlanResponse& a = *submitted;
  v1::Job done =
      testing::WaitTerminal(*stub, admin, a.job().job_id(), absl::Seconds(120));
  ASSERT_EQ(done.state(), v1::JOB_SUCCEEDED)
      << done.failure().ShortDebugString() << "\n"
      << serve.output();
  ASSERT_EQ(done.attempts_size(), 1);
  EXPECT_GT(done.attempts(0).slurm_job_id(), 0) << "it ran as a Slurm job";
  v1::QueryResultsRequest q;
  q.set_job_id(a.job().job_id());
  q.set_after_seq(-1);
  v1::QueryResultsResponse rows;
  {
    auto ctx = Ctx(admin);
    ASSERT_TRUE(stub->QueryResults(ctx.get(), q, &rows).ok());
  }
  EXPECT_EQ(rows.results_size(), 24);
  ASSERT_GT(rows.results_size(), 0);
  EXPECT_EQ(rows.results(0).nranks(), 2);
  const std::string script = testing::ReadFile(
      data + "/jobs/" + a.job().job_id() + "/attempt-1.sbatch");
  EXPECT_THAT(script, HasSubstr("srun --mpi=pmix"));
  EXPECT_THAT(script, HasSubstr("#SBATCH --gpus-per-node=2"));
  EXPECT_THAT(script,
              Not(HasSubstr(a.worker_token().empty() ? "never-empty"
                                                     : a.worker_token())));

  // 2. A long job, cancelled while it runs: scancel ends it.
  auto b = testing::Submit(
      *stub, admin,
      testing::HostSubmission(testing::PlanPath("service-long.yaml"), 2));
  ASSERT_TRUE(b.ok()) << b.status();
  const int64_t slurm_id =
      testing::WaitRunningWithResults(*stub, admin, b->job().job_id(),
                                      absl::Seconds(60))
          .slurm_job_id();
  ASSERT_GT(slurm_id, 0) << serve.output();
  const absl::Time cancel_at = absl::Now();
  {
    v1::CancelJobRequest c;
    c.set_job_id(b->job().job_id());
    v1::CancelJobResponse cr;
    auto ctx = Ctx(admin);
    ASSERT_TRUE(stub->CancelJob(ctx.get(), c, &cr).ok());
  }
  v1::Job cancelled =
      testing::WaitTerminal(*stub, admin, b->job().job_id(), absl::Seconds(60));
  EXPECT_EQ(cancelled.state(), v1::JOB_CANCELLED);
  // Slurm itself says the job is over (squeue no longer runs it).
  bool gone = false;
  while (absl::Now() < cancel_at + absl::Seconds(30) && !gone) {
    auto sq = RunAndCapture(
        {"squeue", "-h", "-j", std::to_string(slurm_id), "-o", "%T"}, nullptr,
        absl::Seconds(10));
    gone = sq.ok() && (sq->out.empty() || sq->out.rfind("CANCELLED", 0) == 0 ||
                       sq->exit_code != 0);
    if (!gone) absl::SleepFor(absl::Milliseconds(200));
  }
  EXPECT_TRUE(gone);
  auto sc =
      RunAndCapture({"scontrol", "show", "job", "-o", std::to_string(slurm_id)},
                    nullptr, absl::Seconds(10));
  ASSERT_TRUE(sc.ok());
  auto end = ParseScontrolJob(sc->out);
  ASSERT_TRUE(end.has_value()) << sc->out << sc->err;
  EXPECT_EQ(end->state, "CANCELLED");
  testing::Figure(
      "Slurm",
      absl::StrFormat("quickstart: %s, %d results via srun --mpi=pmix (Slurm "
                      "job %d); long job: %s, Slurm state %s, %.1f s after "
                      "cancel",
                      v1::JobState_Name(done.state()), rows.results_size(),
                      done.attempts(0).slurm_job_id(),
                      v1::JobState_Name(cancelled.state()), end->state,
                      absl::ToDoubleSeconds(absl::Now() - cancel_at)),
      done.state() == v1::JOB_SUCCEEDED && end->state == "CANCELLED");
}

// S6 (shared/RELIABILITY.md) through the Slurm launcher: env values full of
// shell metacharacters reach the ranks byte for byte through sbatch's
// exported environment (never the generated script, which is a shell
// script), and nothing runs: no marker file, no stray process.
TEST(S6_shell_metacharacters, NothingInjectedThroughSbatchAndSrun) {
  if (!g_skip.empty()) GTEST_SKIP() << g_skip;
  const std::string data = testing::ScratchDir("slurm-s6-serve");
  const std::string marks = testing::ScratchDir("slurm-s6-marks");
  testing::ServeProcess serve(data, {"--launcher", "slurm"});
  ASSERT_TRUE(serve.ok()) << serve.output();
  const std::string admin = serve.admin_token();
  auto stub = serve.Stub();
  auto req = testing::HostSubmission(
      std::string(RINGMASTER_SOURCE_DIR) + "/plans/quickstart.yaml", 2);
  auto run = testing::RunHostile(*stub, admin, req, marks);
  ASSERT_TRUE(run.ok()) << run.status();
  const std::string job_id = run->job.job_id();
  const std::string script =
      testing::ReadFile(data + "/jobs/" + job_id + "/attempt-1.sbatch");
  // Every value holds the marker folder's path: the generated shell script
  // must not carry any (they reach the ranks through sbatch's environment).
  const int values_in_script = script.find(marks) != std::string::npos;
  testing::CheckNothingInjected("sbatch+srun", run->job, run->results,
                                run->values, values_in_script, marks);
}

TEST(SbatchScript, ValuesThatCouldBreakTheScriptAreRejected) {
  SlurmSpec s;
  s.job_name = "ringmaster-x";
  s.nranks = 4;
  s.ranks_per_node = 2;
  s.output = "/tmp/out-%j.txt";
  s.worker = "/opt/rm/ringmaster-worker";
  s.coordinator = "10.0.0.1:7450";
  s.job_id = "20261201-000000-abcdef";
  auto script = BuildSbatchScript(s);
  ASSERT_TRUE(script.ok()) << script.status();
  EXPECT_THAT(*script, HasSubstr("#SBATCH --nodes=2\n"));
  EXPECT_THAT(*script, HasSubstr("#SBATCH --ntasks-per-node=2\n"));
  EXPECT_THAT(*script, HasSubstr("exec srun --mpi=pmix --kill-on-bad-exit=1 "
                                 "/opt/rm/ringmaster-worker run --coordinator "
                                 "10.0.0.1:7450 --job 20261201-000000-abcdef "
                                 "--backend auto\n"));
  for (const std::string bad : {"x; rm -rf /", "x$(id)", "x`id`", "a b",
                                "x\nid", "x'y", "x\"y", "x|y", "x&y"}) {
    SlurmSpec t = s;
    t.job_name = bad;
    EXPECT_FALSE(BuildSbatchScript(t).ok()) << bad;
    t = s;
    t.worker = bad;
    EXPECT_FALSE(BuildSbatchScript(t).ok()) << bad;
  }
  s.ranks_per_node = 3;
  EXPECT_FALSE(BuildSbatchScript(s).ok()) << "4 ranks do not fill nodes of 3";
  EXPECT_EQ(ParseSbatchJobId("123;cluster\n"), 123);
  EXPECT_EQ(ParseSbatchJobId("456\n"), 456);
  EXPECT_FALSE(ParseSbatchJobId("sbatch: error").has_value());
  auto end = ParseScontrolJob(
      "JobId=7 JobName=x JobState=CANCELLED Reason=None ExitCode=0:15 x=y");
  ASSERT_TRUE(end.has_value());
  EXPECT_EQ(end->state, "CANCELLED");
  EXPECT_EQ(end->signal, 15);
}

}  // namespace
}  // namespace ringmaster
