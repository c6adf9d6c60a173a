// Security tests of `ringmaster serve` (rows S5, S6 and S7 of
// shared/RELIABILITY.md): output paths confined to the results root under
// traversal names and symlink swaps; shell metacharacters in what users
// send never reaching a shell; quotas, wall-clock limits and worker rlimits
// enforced with the coordinator unaffected. Each test runs the real binary,
// prints "FIGURE <id> ... => PASS|FAIL" and asserts the bars.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "tests/injection_check.h"
#include "tests/service_harness.h"

namespace ringmaster {
namespace {

namespace fs = std::filesystem;
using testing::Ctx;
using testing::Figure;
using ::testing::HasSubstr;
using testing::ServeProcess;

std::string QuickstartPath() {
  return std::string(RINGMASTER_SOURCE_DIR) + "/plans/quickstart.yaml";
}

// Waits until `pred` holds (polling), up to `timeout`.
bool WaitUntil(const std::function<bool()>& pred, absl::Duration timeout) {
  const absl::Time give_up = absl::Now() + timeout;
  while (absl::Now() < give_up) {
    if (pred()) return true;
    absl::SleepFor(absl::Milliseconds(50));
  }
  return pred();
}

int CountLines(const std::string& text, const std::string& needle) {
  int n = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n'))
    if (absl::StrContains(line, needle)) ++n;
  return n;
}

// ---------------------------------------------------------------------------
// S5: a job's export goes to RESULTS_ROOT/OUTPUT/JOB_ID. Traversal names are
// refused at submission; a symlink planted under the root, or swapped in
// and out while jobs export, is refused at write time. Nothing may appear
// outside the root.
TEST(S5_path_traversal, NothingLandsOutsideTheResultsRoot) {
  const std::string scratch = testing::ScratchDir("s5");
  const fs::path root = fs::path(scratch) / "results";
  const fs::path outside = fs::path(scratch) / "outside";
  fs::create_directories(root);
  fs::create_directories(outside);
  ServeProcess serve(scratch + "/data",
                     {"--results-root", root.string(), "--max-running", "2"});
  ASSERT_TRUE(serve.ok()) << serve.output();
  const std::string admin = serve.admin_token();
  auto stub = serve.Stub();

  // 1. Names that would leave the root: refused, no job created.
  const std::vector<std::string> hostile = {
      "../outside",
      "/abs/path",
      "a/../../outside",
      "nightly/../../../etc",
      std::string("a\0b", 3),
      "$(touch " + outside.string() + "/x)",
      ".hidden",
      "-rf",
      "a/b/c/d/e/f/g/h/i",
      "..",
      "a\\..\\..\\x",
      std::string(300, 'a')};
  int rejected = 0;
  for (const std::string& name : hostile) {
    auto req = testing::HostSubmission(QuickstartPath(), 2);
    req.set_output(name);
    v1::SubmitPlanResponse resp;
    auto ctx = Ctx(admin);
    grpc::Status st = stub->SubmitPlan(ctx.get(), req, &resp);
    if (st.error_code() == grpc::StatusCode::INVALID_ARGUMENT &&
        absl::StrContains(st.error_message(), "output:")) {
      ++rejected;
    } else {
      ADD_FAILURE() << "output '" << name << "': " << st.error_code() << " "
                    << st.error_message();
    }
  }
  v1::ListJobsRequest list;
  v1::ListJobsResponse jobs;
  auto lctx = Ctx(admin);
  ASSERT_TRUE(stub->ListJobs(lctx.get(), list, &jobs).ok());
  const int created_by_rejected = jobs.jobs_size();

  // 2. An ordinary name: exported under the root.
  auto good_req = testing::HostSubmission(QuickstartPath(), 2);
  good_req.set_output("nightly//h200/");
  auto good = testing::Submit(*stub, admin, good_req);
  ASSERT_TRUE(good.ok()) << good.status();
  EXPECT_EQ(good->job().output(), "nightly/h200");
  const std::string good_id = good->job().job_id();
  v1::Job good_job =
      testing::WaitTerminal(*stub, admin, good_id, absl::Seconds(120));
  const fs::path good_dir = root / "nightly" / "h200" / good_id;
  const bool exported = WaitUntil(
      [&] { return fs::exists(good_dir / "report.html"); }, absl::Seconds(20));
  const std::string jsonl = testing::ReadFile((good_dir / "results.jsonl"));
  const int exported_rows = CountLines(jsonl, "\"idempotency_key\"");
  const std::string record = testing::ReadFile((good_dir / "job.json"));

  // 3. A symlink planted under the root, pointing outside.
  fs::create_directory_symlink(outside, root / "planted");
  auto planted_req = testing::HostSubmission(QuickstartPath(), 2);
  planted_req.set_output("planted/x");
  auto planted = testing::Submit(*stub, admin, planted_req);
  ASSERT_TRUE(planted.ok());
  v1::Job planted_job = testing::WaitTerminal(
      *stub, admin, planted->job().job_id(), absl::Seconds(120));
  const bool planted_refused = WaitUntil(
      [&] {
        return CountLines(serve.output(), planted->job().job_id() +
                                              ": export to the results root "
                                              "refused") == 1;
      },
      absl::Seconds(20));

  // 4. "swap" flips between a folder and a symlink to the outside while
  // jobs export into it.
  std::atomic<bool> stop{false};
  std::atomic<int> swaps{0};
  const fs::path swap = root / "swap";
  fs::create_directories(swap);
  std::thread swapper([&] {
    // A fresh parking name each round: with one fixed name, an export that
    // re-created "swap" meanwhile left the swapper stuck (rename and link
    // failing for good), as core/safe_path_test.cc's race once did in CI.
    for (int round = 0; !stop; ++round) {
      std::error_code ec;
      const fs::path parked = root / ("swap.parked" + std::to_string(round));
      fs::rename(swap, parked, ec);
      fs::create_directory_symlink(outside, swap, ec);
      if (!ec) ++swaps;
      std::this_thread::sleep_for(std::chrono::microseconds(200));
      if (fs::is_symlink(swap, ec)) fs::remove(swap, ec);
      fs::rename(parked, swap, ec);
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  });
  const int kRaceJobs = 4;
  std::vector<std::string> race_ids;
  for (int i = 0; i < kRaceJobs; ++i) {
    auto req = testing::HostSubmission(QuickstartPath(), 2);
    req.set_output("swap");
    auto r = testing::Submit(*stub, admin, req);
    ASSERT_TRUE(r.ok());
    race_ids.push_back(r->job().job_id());
  }
  int race_exported = 0, race_refused = 0;
  for (const std::string& id : race_ids) {
    testing::WaitTerminal(*stub, admin, id, absl::Seconds(120));
    WaitUntil(
        [&] {
          const std::string out = serve.output();
          return CountLines(out, "job " + id + " exported") +
                     CountLines(out, id + ": export to the results root") >
                 0;
        },
        absl::Seconds(20));
    const std::string out = serve.output();
    race_exported += CountLines(out, "job " + id + " exported");
    race_refused += CountLines(out, id + ": export to the results root");
  }
  stop = true;
  swapper.join();
  const int files_outside = testing::EntriesBelow(outside.string());

  const bool pass =
      rejected == static_cast<int>(hostile.size()) &&
      created_by_rejected == 0 && good_job.state() == v1::JOB_SUCCEEDED &&
      exported && exported_rows == good_job.results_received() &&
      !absl::StrContains(record, "worker_token") && planted_refused &&
      planted_job.state() == v1::JOB_SUCCEEDED &&
      race_exported + race_refused == kRaceJobs && swaps > 0 &&
      files_outside == 0;
  Figure(
      "S5",
      absl::StrFormat(
          "traversal_names_rejected=%d/%d jobs_created=%d; exported=%s "
          "rows=%d/%d; planted_symlink_refused=%s; swap_race: jobs=%d "
          "exported=%d refused=%d swaps=%d; files_outside=%d",
          rejected, hostile.size(), created_by_rejected,
          exported ? "yes" : "no", exported_rows, good_job.results_received(),
          planted_refused ? "yes" : "no", kRaceJobs, race_exported,
          race_refused, swaps.load(), files_outside),
      pass);
  EXPECT_EQ(rejected, static_cast<int>(hostile.size()));
  EXPECT_EQ(created_by_rejected, 0);
  EXPECT_EQ(good_job.state(), v1::JOB_SUCCEEDED);
  EXPECT_TRUE(exported) << serve.output();
  EXPECT_GT(exported_rows, 0);
  EXPECT_EQ(exported_rows, good_job.results_received());
  EXPECT_THAT(record, HasSubstr("\"job_id\""));
  EXPECT_THAT(record, ::testing::Not(HasSubstr("worker_token")));
  EXPECT_TRUE(planted_refused) << serve.output();
  EXPECT_EQ(planted_job.state(), v1::JOB_SUCCEEDED);
  EXPECT_EQ(race_exported + race_refused, kRaceJobs) << serve.output();
  EXPECT_GT(swaps.load(), 0);
  EXPECT_EQ(files_outside, 0);
}

// ---------------------------------------------------------------------------
// S6: shell metacharacters in env values, plan and case names and request
// ids. mpirun is wrapped to record its argv; the ranks must see every value
// byte for byte (rank 0's NCCL_* environment is in each result's
// provenance), and nothing may run: no marker file, no stray process.
TEST(S6_shell_metacharacters, NothingInjectedThroughMpirun) {
  const std::string scratch = testing::ScratchDir("s6");
  const fs::path marks = fs::path(scratch) / "marks";
  fs::create_directories(marks);
  const std::string m = marks.string();
  const fs::path wrapper = fs::path(scratch) / "mpirun-wrapper";
  const fs::path argv_file = fs::path(scratch) / "mpirun.argv";
  {
    std::ofstream w(wrapper);
    // The wrapper itself passes "$@" on untouched (no eval, no word split).
    w << "#!/bin/sh\nprintf '%s\\0' \"$@\" > '" << argv_file.string()
      << "'\nexec mpirun \"$@\"\n";
  }
  fs::permissions(wrapper, fs::perms::owner_all);
  ServeProcess serve(scratch + "/data", {"--mpirun", wrapper.string()});
  ASSERT_TRUE(serve.ok()) << serve.output();
  const std::string admin = serve.admin_token();
  auto stub = serve.Stub();

  std::string plan = testing::ReadPlan(QuickstartPath());
  const std::string hostile_name =
      "s6 $(touch " + m + "/p); `touch " + m + "/q` && touch " + m + "/r";
  plan = "# S6\n" + plan;
  plan = absl::StrReplaceAll(
      plan, {{"name: quickstart", "name: \"" + hostile_name + "\""}});
  v1::SubmitPlanRequest req;
  req.set_plan_yaml(plan);
  req.set_plan_name("s6 $(touch " + m + "/n).yaml");
  req.set_nranks(2);
  req.set_backend("host");
  req.set_request_id("$(touch " + m + "/rid);x");
  auto run = testing::RunHostile(*stub, admin, req, m);
  ASSERT_TRUE(run.ok()) << run.status();
  const std::vector<std::string>& values = run->values;
  // mpirun's argv: names only (-x NAME), never a value.
  const std::string argv_text = testing::ReadFile(argv_file.string());
  std::vector<std::string> argv = absl::StrSplit(argv_text, '\0');
  int values_in_argv = 0;
  for (const std::string& a : argv)
    for (const std::string& v : values)
      if (a.find(v) != std::string::npos) ++values_in_argv;
  EXPECT_TRUE(absl::StrContains(argv_text, testing::HostileEnvName(0)))
      << "the NCCL_* names are forwarded (-x NAME): " << argv_text;
  testing::CheckNothingInjected("mpirun", run->job, run->results, values,
                                values_in_argv, marks.string());
}

// ---------------------------------------------------------------------------
// S7: a user's quota (RESOURCE_EXHAUSTED at once, other users unaffected),
// a job's wall-clock limit (FAILED deadline, every process reaped) and
// worker rlimits (a rank that runs away with memory dies alone; the
// coordinator's memory does not move and the next job succeeds).
TEST(S7_limits, QuotaDeadlineAndRlimitsEnforced) {
  // Quotas, on an external launcher (jobs wait for ranks that never come).
  const std::string dir = testing::ScratchDir("s7q");
  const std::string alice = "alice-token-0123456789abcdef";
  const std::string bob = "bob-token-0123456789abcdef01";
  {
    std::ofstream users(dir + "-users");
    users << "alice " << alice << "\nbob " << bob << "\n";
  }
  int quota_ok = 0, over_quota = 0, bob_ok = 0, after_cancel_ok = 0;
  double reject_ms = 0;
  {
    ServeProcess serve(dir, {"--launcher", "external", "--users",
                             dir + "-users", "--user-quota", "2"});
    ASSERT_TRUE(serve.ok()) << serve.output();
    auto stub = serve.Stub();
    auto req = testing::HostSubmission(QuickstartPath(), 2);
    std::vector<std::string> alice_jobs;
    for (int i = 0; i < 2; ++i) {
      auto r = testing::Submit(*stub, alice, req);
      if (r.ok()) {
        ++quota_ok;
        alice_jobs.push_back(r->job().job_id());
      }
    }
    const absl::Time t0 = absl::Now();
    v1::SubmitPlanResponse resp;
    auto ctx = Ctx(alice);
    grpc::Status st = stub->SubmitPlan(ctx.get(), req, &resp);
    reject_ms = absl::ToDoubleMilliseconds(absl::Now() - t0);
    if (st.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED &&
        absl::StrContains(st.error_message(), "quota"))
      ++over_quota;
    if (testing::Submit(*stub, bob, req).ok()) ++bob_ok;
    v1::CancelJobRequest cancel;
    cancel.set_job_id(alice_jobs.empty() ? "" : alice_jobs[0]);
    v1::CancelJobResponse cresp;
    auto cctx = Ctx(alice);
    stub->CancelJob(cctx.get(), cancel, &cresp).IgnoreError();
    if (!alice_jobs.empty())
      testing::WaitTerminal(*stub, alice, alice_jobs[0], absl::Seconds(20));
    if (testing::Submit(*stub, alice, req).ok()) ++after_cancel_ok;
  }

  // Deadline and rlimits, on mpirun with a 4 GiB address-space limit.
  ServeProcess serve(testing::ScratchDir("s7"),
                     {"--allow-fault-injection", "--worker-rlimit", "as=4GiB",
                      "--worker-rlimit", "core=0", "--heartbeat-timeout", "5"});
  ASSERT_TRUE(serve.ok()) << serve.output();
  const std::string admin = serve.admin_token();
  auto stub = serve.Stub();
  const double rss_before = testing::RssMiB(serve.pid());
  const double kDeadline = 3;
  auto long_req =
      testing::HostSubmission(testing::PlanPath("service-long.yaml"), 2);
  long_req.set_timeout_s(kDeadline);
  const absl::Time submitted = absl::Now();
  auto late = testing::Submit(*stub, admin, long_req);
  ASSERT_TRUE(late.ok()) << late.status();
  v1::Job late_job = testing::WaitTerminal(*stub, admin, late->job().job_id(),
                                           absl::Seconds(60));
  const double deadline_s = absl::ToDoubleSeconds(absl::Now() - submitted);
  WaitUntil(
      [&] { return testing::ProcessesMentioning(late->job().job_id()) == 0; },
      absl::Seconds(10));
  const int late_left = testing::ProcessesMentioning(late->job().job_id());

  auto hog_req = testing::HostSubmission(QuickstartPath(), 2);
  (*hog_req.mutable_env())["RINGMASTER_FAULT"] =
      "hog:rank=1:seq=0:bytes=8000000000";
  auto hog = testing::Submit(*stub, admin, hog_req);
  ASSERT_TRUE(hog.ok());
  v1::Job hog_job = testing::WaitTerminal(*stub, admin, hog->job().job_id(),
                                          absl::Seconds(60));
  WaitUntil(
      [&] { return testing::ProcessesMentioning(hog->job().job_id()) == 0; },
      absl::Seconds(10));
  const int hog_left = testing::ProcessesMentioning(hog->job().job_id());
  auto normal = testing::Submit(*stub, admin,
                                testing::HostSubmission(QuickstartPath(), 2));
  ASSERT_TRUE(normal.ok());
  v1::Job normal_job = testing::WaitTerminal(
      *stub, admin, normal->job().job_id(), absl::Seconds(60));
  const double rss_growth = testing::RssMiB(serve.pid()) - rss_before;
  const bool alive = serve.alive();

  const bool pass =
      quota_ok == 2 && over_quota == 1 && reject_ms <= 100 && bob_ok == 1 &&
      after_cancel_ok == 1 && late_job.state() == v1::JOB_FAILED &&
      late_job.failure().reason() == v1::DEADLINE &&
      deadline_s <= kDeadline + 5 && late_left == 0 &&
      hog_job.state() == v1::JOB_FAILED &&
      hog_job.failure().reason() == v1::WORKER_EXIT &&
      hog_job.failure().rank() == 1 && hog_left == 0 &&
      normal_job.state() == v1::JOB_SUCCEEDED && rss_growth <= 10 && alive;
  Figure("S7",
         absl::StrFormat(
             "quota 2: accepted=%d over_quota_rejected=%d in %.1f ms, other "
             "user=%d, after cancel=%d; deadline %.0f s: %s %s in %.2f s, "
             "left=%d; rlimit as=4GiB, rank 1 allocates 8 GB: %s %s rank %d "
             "(%s), left=%d; next job %s; coordinator alive=%s rss_growth=%.1f "
             "MiB",
             quota_ok, over_quota, reject_ms, bob_ok, after_cancel_ok,
             kDeadline, v1::JobState_Name(late_job.state()),
             v1::FailureReason_Name(late_job.failure().reason()), deadline_s,
             late_left, v1::JobState_Name(hog_job.state()),
             v1::FailureReason_Name(hog_job.failure().reason()),
             hog_job.failure().rank(), hog_job.failure().detail(), hog_left,
             v1::JobState_Name(normal_job.state()), alive ? "yes" : "no",
             rss_growth),
         pass);
  EXPECT_EQ(quota_ok, 2);
  EXPECT_EQ(over_quota, 1);
  EXPECT_LE(reject_ms, 100);
  EXPECT_EQ(bob_ok, 1);
  EXPECT_EQ(after_cancel_ok, 1);
  EXPECT_EQ(late_job.failure().reason(), v1::DEADLINE)
      << late_job.failure().detail();
  EXPECT_LE(deadline_s, kDeadline + 5);
  EXPECT_EQ(late_left, 0);
  EXPECT_EQ(hog_job.failure().reason(), v1::WORKER_EXIT)
      << hog_job.failure().detail();
  EXPECT_EQ(hog_job.failure().rank(), 1);
  EXPECT_EQ(hog_left, 0);
  EXPECT_EQ(normal_job.state(), v1::JOB_SUCCEEDED)
      << normal_job.failure().detail();
  EXPECT_LE(rss_growth, 10);
  EXPECT_TRUE(alive);
}

}  // namespace
}  // namespace ringmaster
