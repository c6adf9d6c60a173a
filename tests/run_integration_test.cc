// End-to-end tests of `ringmaster run` on the host backend: real mpirun,
// real workers, real coordinator, checked through the durable store.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <regex>
#include <set>
#include <tuple>

#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "coordinator/launcher.h"
#include "coordinator/store.h"
#include "nlohmann/json.hpp"
#include "tests/cli_runner.h"

namespace ringmaster {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

// Runs the ringmaster binary with `args` and extra environment
// (tests/cli_runner.h).
Outcome RunRingmaster(
    const std::vector<std::string>& args,
    const std::vector<std::pair<std::string, std::string>>& env = {}) {
  std::vector<std::string> vars;
  for (const auto& [k, v] : env) vars.push_back(k + "=" + v);
  return Ringmaster(args, vars);
}

// The results of `job` in the store under `out`, in sequence order.
std::vector<v1::Result> StoredResults(const std::string& out,
                                      const std::string& job) {
  auto store = Store::Open(out + "/ringmaster.db");
  EXPECT_TRUE(store.ok()) << store.status();
  if (!store.ok()) return {};
  auto results = (*store)->Results(job, -1, 0);
  EXPECT_TRUE(results.ok()) << results.status();
  return results.ok() ? *results : std::vector<v1::Result>{};
}

std::string JobId(const Outcome& o) {
  std::smatch m;
  static const std::regex kJob(R"(ringmaster: job (\S+):)");
  return std::regex_search(o.err, m, kJob) ? m[1].str() : "";
}

// Live processes whose command line mentions `needle`.
int ProcessesMentioning(const std::string& needle) {
  int n = 0;
  for (const auto& e : fs::directory_iterator("/proc")) {
    std::string name = e.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream f(e.path() / "cmdline");
    std::string cmd((std::istreambuf_iterator<char>(f)),
                    std::istreambuf_iterator<char>());
    if (cmd.find(needle) != std::string::npos &&
        std::to_string(getpid()) != name)
      ++n;
  }
  return n;
}

class RunTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("rm_it_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    plan_ = (dir_ / "plan.yaml").string();
    std::ofstream(plan_) << R"(name: it
cases:
  - name: ar
    collective: all_reduce
    sizes: {min: 8B, max: 1MiB, factor: 8}
    dtypes: [float32, int32, bfloat16]
    placement: both
    timing: {warmup: 1, min_samples: 3, max_samples: 10, target_ci: 0.05, max_time: 0.2s}
)";
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
  std::string plan_;
};

TEST_F(RunTest, FourHostRanksStoreVerifiedResults) {
  std::string out = (dir_ / "results").string();
  Outcome o = RunRingmaster({"run", plan_, "--np", "4", "--backend", "host",
                             "--out", out, "--quiet"});
  ASSERT_EQ(o.exit_code, 0) << o.err << o.out;
  EXPECT_THAT(o.out, HasSubstr("# status: SUCCEEDED"));
  std::string job = JobId(o);
  ASSERT_FALSE(job.empty()) << o.err;
  auto store = Store::Open(out + "/ringmaster.db");
  ASSERT_TRUE(store.ok()) << store.status();
  auto results = (*store)->Results(job, -1, 0);
  ASSERT_TRUE(results.ok());
  // sizes 8, 64, 512, 4096, 32768, 262144 B x 3 dtypes x 2 placements.
  ASSERT_EQ(results->size(), 36u);
  for (const v1::Result& r : *results) {
    SCOPED_TRACE(r.idempotency_key());
    EXPECT_EQ(r.status(), v1::OK) << r.failure().detail();
    EXPECT_EQ(r.nranks(), 4);
    EXPECT_EQ(r.wrong_elements(), 0);
    EXPECT_GE(r.stats().samples(), 3);
    EXPECT_GT(r.algbw_gbps(), 0);
    EXPECT_NEAR(r.busbw_gbps(), r.algbw_gbps() * 2.0 * 3 / 4,
                1e-9 * r.busbw_gbps());
    EXPECT_EQ(r.provenance().hosts_size(), 4);
    EXPECT_EQ(r.provenance().backend(), "host (MPI)");
    EXPECT_FALSE(r.provenance().git_sha().empty());
    EXPECT_GE(r.provenance().command_line_size(), 3);
    // The detected topology: no GPU here, so "cpu-<threads>t-<hash>".
    EXPECT_TRUE(absl::StartsWith(r.provenance().topology_id(), "cpu-"))
        << r.provenance().topology_id();
    EXPECT_EQ(r.rank_median_s_size(), 4);
  }
  auto stored_job = (*store)->GetJob(job);
  ASSERT_TRUE(stored_job.ok());
  EXPECT_EQ(stored_job->state(), v1::JOB_SUCCEEDED);
  // The files beside the store hold the same results.
  std::ifstream jsonl(out + "/" + job + "/results.jsonl");
  int lines = 0;
  for (std::string line; std::getline(jsonl, line);) ++lines;
  EXPECT_EQ(lines, 36);
  std::ifstream csv(out + "/" + job + "/results.csv");
  lines = 0;
  for (std::string line; std::getline(csv, line);) ++lines;
  EXPECT_EQ(lines, 37);  // header + rows
}

// A benchmark kind added by one file (tests/kinds/rank_sum_kind.cc) and
// its registration line, in a worker built with it: `ringmaster run
// --worker` validates the plan against that worker's kinds and runs it,
// ladder rung and failed check included; the default worker refuses it.
TEST_F(RunTest, KindRegisteredFromATestRunsThroughRun) {
  const std::string plan = (dir_ / "plugin.yaml").string();
  std::ofstream(plan) << R"(name: plugin
cases:
  - name: sum
    bench: rank_sum
    params: {scale: 3}
    ladder: [1, 2]
    timing: {warmup: 1, min_samples: 3, max_samples: 5}
  - name: wrong
    bench: rank_sum
    params: {expect: 99}
)";
  const std::string worker =
      std::string(RINGMASTER_BIN_DIR) + "/ringmaster-worker-test-kinds";
  std::string out = (dir_ / "results").string();
  Outcome o = RunRingmaster({"run", plan, "--np", "2", "--backend", "host",
                             "--worker", worker, "--out", out, "--quiet"});
  EXPECT_EQ(o.exit_code, 1) << o.err << o.out;  // the `wrong` case fails
  std::string job = JobId(o);
  ASSERT_FALSE(job.empty()) << o.err;
  const std::vector<v1::Result> results = StoredResults(out, job);
  ASSERT_EQ(results.size(), 3u);
  for (int i = 0; i < 2; ++i) {
    const v1::Result& r = results[i];
    SCOPED_TRACE(i);
    EXPECT_EQ(r.case_().kind(), "rank_sum");
    EXPECT_EQ(r.case_().params().at("scale"), "3");
    EXPECT_EQ(r.status(), v1::OK) << r.failure().detail();
    EXPECT_EQ(r.nranks(), i + 1);
    EXPECT_EQ(r.wrong_elements(), 0);
    EXPECT_GE(r.stats().samples(), 3);
    EXPECT_GT(r.latency_ns(), 0);
    EXPECT_EQ(r.path(), "rank_sum over the control channel");
  }
  const v1::Result& wrong = results[2];
  EXPECT_EQ(wrong.status(), v1::FAILED);
  EXPECT_EQ(wrong.failure().reason(), v1::DATA_MISMATCH);
  EXPECT_EQ(wrong.failure().detail(), "sum 3, expected 99");

  // The worker lists the kind; the default worker has none of that name,
  // so the plan is a usage error there, before anything runs.
  Outcome v = RunRingmaster({"validate", plan, "--worker", worker});
  EXPECT_EQ(v.exit_code, 0) << v.err;
  Outcome d = RunRingmaster({"run", plan, "--np", "2", "--backend", "host",
                             "--out", out + "2", "--quiet"});
  EXPECT_EQ(d.exit_code, 2) << d.err;
  EXPECT_THAT(d.err, HasSubstr("cases[0].bench: expected one of:"));
  EXPECT_FALSE(fs::exists(out + "2"));
}

// Every collective x dtype x op x placement on 1-4 ranks (a ladder in one
// 4-rank launch), each output element checked.
TEST_F(RunTest, EveryCollectiveDtypeAndOpVerifiedOnOneToFourRanks) {
  std::string out = (dir_ / "results").string();
  Outcome o = RunRingmaster(
      {"run",
       std::string(RINGMASTER_SOURCE_DIR) + "/tests/plans/verify-all.yaml",
       "--np", "4", "--backend", "host", "--out", out, "--quiet"});
  ASSERT_EQ(o.exit_code, 0) << o.err << o.out.substr(0, 4000);
  auto store = Store::Open(out + "/ringmaster.db");
  ASSERT_TRUE(store.ok());
  auto results = (*store)->Results(JobId(o), -1, 0);
  ASSERT_TRUE(results.ok());
  std::set<std::tuple<int, int, int, bool, int>>
      seen;  // collective, dtype, op, in_place, n
  for (const v1::Result& r : *results) {
    const v1::Case& c = r.case_();
    SCOPED_TRACE(r.idempotency_key());
    ASSERT_EQ(r.status(), v1::OK) << r.failure().detail();
    EXPECT_EQ(r.wrong_elements(), 0);
    seen.insert({c.collective(), c.dtype(), c.op(), c.in_place(), r.nranks()});
  }
  // 3 reductions x 8 dtypes x 5 ops x 2 placements + 2 rooted/gathering
  // collectives x 8 x 2 + 2 out-of-place-only collectives x 8, on 4 rank
  // counts.
  EXPECT_EQ(seen.size(),
            static_cast<size_t>((3 * 8 * 5 * 2 + 2 * 8 * 2 + 2 * 8) * 4));
}

TEST_F(RunTest, CorruptedElementIsReportedAsDataMismatchWithItsCount) {
  std::string out = (dir_ / "results").string();
  Outcome o = RunRingmaster(
      {"run",
       std::string(RINGMASTER_SOURCE_DIR) + "/tests/plans/verify-all.yaml",
       "--np", "4", "--backend", "host", "--out", out, "--quiet"},
      {{"RINGMASTER_FAULT", "corrupt:rank=1"}});
  EXPECT_EQ(o.exit_code, 1);
  auto store = Store::Open(out + "/ringmaster.db");
  ASSERT_TRUE(store.ok());
  auto results = (*store)->Results(JobId(o), -1, 0);
  ASSERT_TRUE(results.ok());
  int caught = 0;
  for (const v1::Result& r : *results) {
    const v1::Case& c = r.case_();
    SCOPED_TRACE(r.idempotency_key());
    // Rank 1 checks an output unless it is not in the communicator or is a
    // reduce's non-root.
    bool rank1_checks =
        r.nranks() >= 2 && !(c.collective() == v1::REDUCE && c.root() != 1);
    if (rank1_checks) {
      ASSERT_EQ(r.status(), v1::FAILED);
      EXPECT_EQ(r.failure().reason(), v1::DATA_MISMATCH);
      EXPECT_EQ(r.failure().rank(), 1);
      EXPECT_EQ(r.wrong_elements(), 1);
      EXPECT_EQ(r.busbw_gbps(), 0);
      ++caught;
    } else {
      EXPECT_EQ(r.status(), v1::OK);
    }
  }
  EXPECT_GT(caught, 1000);
  EXPECT_THAT(o.err, HasSubstr("data_mismatch rank 1"));
}

TEST_F(RunTest, CollectivesPlanPassesOnTwoHostRanks) {
  Outcome o = RunRingmaster(
      {"run", std::string(RINGMASTER_SOURCE_DIR) + "/plans/collectives.yaml",
       "--np", "2", "--backend", "host", "--out", (dir_ / "r").string(),
       "--quiet"});
  EXPECT_EQ(o.exit_code, 0) << o.err;
  EXPECT_THAT(o.out, HasSubstr("# status: SUCCEEDED"));
  for (const char* c : {"all_reduce", "all_gather", "reduce_scatter",
                        "broadcast", "reduce", "all_to_all", "send_recv"}) {
    EXPECT_THAT(o.out, HasSubstr(std::string(": ") + c + " float32")) << c;
  }
}

// Variants run one job each and line up side by side. On host ranks they
// cannot differ (variants set NCCL_* variables only, which MPI ignores):
// the run says so and shows no ceiling.
TEST_F(RunTest, VariantsRunSideBySide) {
  std::ofstream(plan_) << R"(name: ab
variants:
  - {name: plain, ceiling: 100}
  - {name: noshm, env: {NCCL_SHM_DISABLE: "1"}}
cases:
  - {name: ar, collective: all_reduce, sizes: [4KiB, 64KiB], placement: out_of_place,
     timing: {min_samples: 3, max_samples: 3}}
)";
  std::string out = (dir_ / "results").string();
  Outcome o = RunRingmaster({"run", plan_, "--np", "2", "--backend", "host",
                             "--out", out, "--quiet"});
  ASSERT_EQ(o.exit_code, 0) << o.err;
  EXPECT_THAT(o.out, HasSubstr("# interconnect variants"));
  EXPECT_THAT(o.out, Not(HasSubstr("plain /100")));
  EXPECT_THAT(o.out, HasSubstr("noshm"));
  EXPECT_THAT(o.err, HasSubstr("variant noshm"));
  EXPECT_THAT(o.err, HasSubstr("which the host backend (MPI) ignores"));
}

// --rounds: variants interleave (a b a b a b) and compare judges b against
// a from one folder, pairing each b run with the a run beside it.
TEST_F(RunTest, RoundsInterleaveVariantsForAPairedCompare) {
  std::ofstream(plan_) << R"(name: ab
variants:
  - {name: a}
  - {name: b, env: {NCCL_DEBUG: WARN}}
cases:
  - {name: ag, collective: all_gather, sizes: [64KiB, 1MiB], placement: out_of_place,
     timing: {min_samples: 3, max_samples: 5}}
)";
  std::string out = (dir_ / "results").string();
  Outcome o = RunRingmaster({"run", plan_, "--np", "2", "--backend", "host",
                             "--out", out, "--quiet", "--rounds", "3"});
  ASSERT_EQ(o.exit_code, 0) << o.err;
  // The jobs in the order they ran.
  std::vector<std::string> order;
  static const std::regex kRound(R"(round (\d) of 3, variant (\w))");
  for (auto it = std::sregex_iterator(o.err.begin(), o.err.end(), kRound);
       it != std::sregex_iterator(); ++it)
    order.push_back((*it)[1].str() + (*it)[2].str());
  EXPECT_EQ(order,
            (std::vector<std::string>{"1a", "1b", "2a", "2b", "3a", "3b"}));
  int jobs = 0;
  for (const auto& e : fs::directory_iterator(out))
    jobs += fs::exists(e.path() / "results.jsonl");
  EXPECT_EQ(jobs, 6);

  Outcome c = RunRingmaster({"compare", out, out, "--base-variant", "a",
                             "--new-variant", "b", "--format", "json"});
  ASSERT_NE(c.exit_code, 2) << c.err;
  auto j = nlohmann::json::parse(c.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << c.out;
  EXPECT_EQ(j["base_variant"], "a");
  EXPECT_EQ(j["summary"]["base_runs"], 3);
  EXPECT_EQ(j["summary"]["new_runs"], 3);
  EXPECT_EQ(j["summary"]["paired"], true);
  EXPECT_EQ(j["summary"]["metrics_timed"], 2);  // a's and b's matched
  EXPECT_EQ(j["summary"].value("missing", 0), 0);

  Outcome bad = RunRingmaster(
      {"compare", out, out, "--base-variant", "a", "--new-variant", "c"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_THAT(bad.err, HasSubstr("no results of variant c (variants there: "
                                 "a, b)"));
}

struct BadPlan {
  const char* name;
  const char* text;      // nullptr: the file does not exist
  const char* expected;  // regex the single error line must match
};

void PrintTo(const BadPlan& p, std::ostream* os) { *os << p.name; }

class BadPlanRunTest : public RunTest,
                       public ::testing::WithParamInterface<BadPlan> {};

TEST_P(BadPlanRunTest, ExitTwoOneLineNothingWritten) {
  const BadPlan& p = GetParam();
  std::string path = (dir_ / "bad.yaml").string();
  if (p.text) std::ofstream(path) << p.text;
  std::string out = (dir_ / "results").string();
  Outcome o = RunRingmaster({"run", path, "--out", out, "--backend", "host"});
  EXPECT_EQ(o.exit_code, 2) << o.err;
  EXPECT_TRUE(o.out.empty()) << o.out;
  EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << o.err;
  EXPECT_TRUE(std::regex_search(o.err, std::regex(p.expected))) << o.err;
  EXPECT_FALSE(fs::exists(out));
}

INSTANTIATE_TEST_SUITE_P(
    Plans, BadPlanRunTest,
    ::testing::Values(
        BadPlan{"unknown_key",
                "name: x\ncases:\n  - {name: a, collective: all_reduce, sizes: "
                "8B, colour: red}\n",
                R"(bad\.yaml:3: cases\[0\]\.colour: unknown key)"},
        BadPlan{
            "negative_size",
            "name: x\ncases:\n  - name: a\n    collective: all_reduce\n    "
            "sizes: {min: -8, max: 1MiB}\n",
            R"(bad\.yaml:5: cases\[0\]\.sizes\.min: size must not be negative)"},
        BadPlan{
            "wrong_type",
            "name: x\ncases:\n  - name: a\n    collective: all_reduce\n    "
            "sizes: 8B\n    timing: {warmup: lots}\n",
            R"(bad\.yaml:6: cases\[0\]\.timing\.warmup: expected an integer)"},
        BadPlan{"missing_file", nullptr, R"(bad\.yaml: cannot read plan file)"},
        BadPlan{"bad_yaml", "name: x\ncases: [\n  {name: a\n",
                R"(bad\.yaml:\d+: \(yaml\): invalid YAML)"}),
    [](const auto& info) { return std::string(info.param.name); });

TEST_F(RunTest, KilledRankFailsFastNamingTheRankAndLeavesNothing) {
  std::string out = (dir_ / "results").string();
  Outcome o = RunRingmaster(
      {"run", plan_, "--np", "3", "--backend", "host", "--out", out, "--quiet"},
      {{"RINGMASTER_FAULT", "crash:rank=1:seq=4"}});
  EXPECT_NE(o.exit_code, 0);
  EXPECT_LT(o.seconds, 10.0);
  EXPECT_THAT(o.err, HasSubstr("worker_exit rank 1"));
  std::string job = JobId(o);
  ASSERT_FALSE(job.empty());
  EXPECT_EQ(ProcessesMentioning(job), 0);
  auto store = Store::Open(out + "/ringmaster.db");
  ASSERT_TRUE(store.ok());
  auto stored = (*store)->GetJob(job);
  ASSERT_TRUE(stored.ok());
  EXPECT_EQ(stored->state(), v1::JOB_FAILED);
  EXPECT_EQ(stored->failure().reason(), v1::WORKER_EXIT);
  EXPECT_EQ(stored->failure().rank(), 1);
  auto results = (*store)->Results(job, -1, 0);
  ASSERT_TRUE(results.ok());
  EXPECT_EQ(results->size(), 4u);  // cases 0..3 finished before the crash
}

// Pid of the worker process of `job` whose MPI rank is `rank`, or -1.
int WorkerPid(const std::string& job, int rank) {
  for (const auto& e : fs::directory_iterator("/proc")) {
    std::string name = e.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream cmdf(e.path() / "cmdline");
    std::string cmd((std::istreambuf_iterator<char>(cmdf)),
                    std::istreambuf_iterator<char>());
    if (cmd.find("ringmaster-worker") == std::string::npos ||
        cmd.find(job) == std::string::npos) {
      continue;
    }
    std::ifstream envf(e.path() / "environ");
    std::string env((std::istreambuf_iterator<char>(envf)),
                    std::istreambuf_iterator<char>());
    if (env.find(std::string("OMPI_COMM_WORLD_RANK=") + std::to_string(rank) +
                 '\0') != std::string::npos) {
      return std::stoi(name);
    }
  }
  return -1;
}

// A plan long enough to be caught mid-run.
constexpr char kLongPlan[] = R"(name: long
cases:
  - name: ar
    collective: all_reduce
    sizes: {min: 8B, max: 64KiB, factor: 2}
    timing: {min_samples: 50, max_samples: 50, max_time: 10s}
)";

TEST_F(RunTest, RankKilledFromOutsideFailsWithinTenSeconds) {
  std::ofstream(plan_) << kLongPlan;
  std::mutex mu;
  std::string err;
  auto child = ChildProcess::Spawn(
      {std::string(RINGMASTER_BIN_DIR) + "/ringmaster", "run", plan_, "--np",
       "3", "--backend", "host", "--out", (dir_ / "r").string(), "--quiet"},
      [&](std::string_view line, bool is_err) {
        std::lock_guard<std::mutex> lock(mu);
        if (is_err) err.append(line.data(), line.size()).append("\n");
      });
  ASSERT_TRUE(child.ok());
  std::string job;
  int victim = -1;
  for (int i = 0; i < 1000 && victim < 0; ++i) {
    usleep(10000);
    {
      std::lock_guard<std::mutex> lock(mu);
      Outcome o;
      o.err = err;
      job = JobId(o);
    }
    if (!job.empty()) victim = WorkerPid(job, 1);
  }
  ASSERT_GT(victim, 0) << err;
  usleep(300000);  // let it get into the cases
  ASSERT_EQ(kill(victim, SIGKILL), 0);
  auto killed_at = std::chrono::steady_clock::now();
  std::optional<int> status;
  while (!(status = (*child)->Poll())) usleep(10000);
  double seconds = std::chrono::duration<double>(
                       std::chrono::steady_clock::now() - killed_at)
                       .count();
  (*child)->JoinReaders();
  EXPECT_LT(seconds, 10.0);
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 1)
      << DescribeWaitStatus(*status);
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_THAT(err, HasSubstr("worker_exit rank 1"));
  EXPECT_EQ(ProcessesMentioning(job), 0);
}

// Ctrl-C on `ringmaster run` (SIGINT to its process group, as a terminal
// sends it): the job's processes live in a session of their own, so the
// run must stop them itself, keep what it measured and exit 130. Before,
// the run died and left mpirun and the ranks spinning for a minute.
TEST_F(RunTest, InterruptCancelsTheJobKeepsItsResultsAndLeavesNothing) {
  std::ofstream(plan_) << kLongPlan;
  std::mutex mu;
  std::string out, err;
  auto child = ChildProcess::Spawn(
      {std::string(RINGMASTER_BIN_DIR) + "/ringmaster", "run", plan_, "--np",
       "2", "--backend", "host", "--out", (dir_ / "r").string(), "--quiet"},
      [&](std::string_view line, bool is_err) {
        std::lock_guard<std::mutex> lock(mu);
        (is_err ? err : out).append(line.data(), line.size()).append("\n");
      });
  ASSERT_TRUE(child.ok());
  // Wait for the first result row, so the job is mid-run.
  std::string job;
  for (int i = 0; i < 3000; ++i) {
    usleep(10000);
    std::lock_guard<std::mutex> lock(mu);
    Outcome o;
    o.err = err;
    job = JobId(o);
    if (!job.empty() && absl::StrContains(out, " float32 ")) break;
  }
  ASSERT_FALSE(job.empty()) << err;
  ASSERT_GT(ProcessesMentioning(job), 0);
  ASSERT_EQ(kill(-(*child)->pid(), SIGINT), 0);
  auto sent = std::chrono::steady_clock::now();
  std::optional<int> status;
  while (!(status = (*child)->Poll())) usleep(10000);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - sent)
          .count();
  (*child)->JoinReaders();
  EXPECT_LT(seconds, 10.0);
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 130)
      << DescribeWaitStatus(*status) << "\n"
      << err;
  EXPECT_EQ(ProcessesMentioning(job), 0);
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_THAT(err, HasSubstr("cancelling job " + job));
  EXPECT_THAT(out, HasSubstr("# status: CANCELLED: stopped by Interrupt"));
  // What was measured before the signal is in the store.
  std::ifstream jsonl(dir_ / "r" / job / "results.jsonl");
  int rows = 0;
  for (std::string line; std::getline(jsonl, line);) rows += !line.empty();
  EXPECT_GT(rows, 0);
}

TEST_F(RunTest, RankExitingWithAnErrorCodeIsNamed) {
  Outcome o = RunRingmaster({"run", plan_, "--np", "2", "--backend", "host",
                             "--out", (dir_ / "r").string(), "--quiet"},
                            {{"RINGMASTER_FAULT", "exit:rank=0:seq=2"}});
  EXPECT_EQ(o.exit_code, 1);
  EXPECT_LT(o.seconds, 10.0);
  EXPECT_THAT(o.err, HasSubstr("worker_exit rank 0"));
  EXPECT_EQ(ProcessesMentioning(JobId(o)), 0);
}

TEST_F(RunTest, RanksEndingAtDifferentTimesIsSuccess) {
  // Rank 0 tears down slowly (as NCCL/CUDA shutdown can): the other ranks
  // are gone while mpirun still runs, which must not read as a dead rank.
  Outcome o = RunRingmaster({"run", plan_, "--np", "3", "--backend", "host",
                             "--out", (dir_ / "r").string(), "--quiet"},
                            {{"RINGMASTER_FAULT", "linger:rank=0"}});
  EXPECT_EQ(o.exit_code, 0) << o.err;
  EXPECT_THAT(o.out, HasSubstr("# status: SUCCEEDED"));
}

TEST_F(RunTest, FingerprintMismatchFailsBeforeTheFirstCollective) {
  std::string out = (dir_ / "results").string();
  Outcome o = RunRingmaster(
      {"run", plan_, "--np", "2", "--backend", "host", "--out", out, "--quiet"},
      {{"RINGMASTER_FAULT", "mismatch:rank=1"}});
  EXPECT_EQ(o.exit_code, 1);
  EXPECT_LT(o.seconds, 10.0);
  EXPECT_THAT(o.err, HasSubstr("config_mismatch rank 1"));
  EXPECT_THAT(o.err, HasSubstr("build_id"));
  auto store = Store::Open(out + "/ringmaster.db");
  ASSERT_TRUE(store.ok());
  auto results = (*store)->Results(JobId(o), -1, 0);
  ASSERT_TRUE(results.ok());
  EXPECT_TRUE(results->empty());
}

TEST_F(RunTest, CorruptedDataFailsTheResultNotJustTheNumber) {
  Outcome o = RunRingmaster({"run", plan_, "--np", "2", "--backend", "host",
                             "--out", (dir_ / "r").string(), "--quiet"},
                            {{"RINGMASTER_FAULT", "corrupt:rank=1"}});
  EXPECT_EQ(o.exit_code, 1);
  EXPECT_THAT(o.out, HasSubstr("FAILED data_mismatch rank 1"));
  EXPECT_THAT(o.err, HasSubstr("data_mismatch"));
}

// Issue 4's CI check: the node plan on host ranks, every host case run and
// verified, every GPU case skipped with its reason, every pair on record.
TEST_F(RunTest, P2pPlanPassesOnTwoHostRanksWithEveryPairRecorded) {
  std::string out = (dir_ / "r").string();
  Outcome o = RunRingmaster(
      {"run", std::string(RINGMASTER_SOURCE_DIR) + "/plans/p2p.yaml", "--np",
       "2", "--backend", "host", "--out", out});
  ASSERT_EQ(o.exit_code, 0) << o.err << o.out;
  EXPECT_THAT(o.out, HasSubstr("# status: SUCCEEDED"));
  // The matrix, as a matrix.
  EXPECT_THAT(
      o.out,
      HasSubstr(
          "# mpi_p2p: p2p cpu write uni pairs, 16 MiB (GB/s; rows: source "
          "rank, columns: destination rank)\n src\\dst          0          "
          "1\n"));
  std::string job = JobId(o);
  auto store = Store::Open(out + "/ringmaster.db");
  ASSERT_TRUE(store.ok());
  auto results = (*store)->Results(job, -1, 0);
  ASSERT_TRUE(results.ok());
  int ok = 0, skipped = 0;
  std::set<std::tuple<std::string, bool, int, int>> pairs;
  for (const v1::Result& r : *results) {
    const v1::Case& c = r.case_();
    SCOPED_TRACE(c.spec_name() + " " + std::to_string(c.seq()));
    ASSERT_NE(c.bench(), v1::BENCH_COLLECTIVE);
    if (r.status() == v1::SKIPPED) {
      ++skipped;
      EXPECT_FALSE(r.failure().detail().empty());
      // Only GPU cases and GEMM types OpenBLAS lacks are skipped here.
      EXPECT_TRUE(c.backend() == v1::BACKEND_CUDA || c.dtype() != v1::FLOAT32)
          << r.failure().detail();
      continue;
    }
    ASSERT_EQ(r.status(), v1::OK) << r.failure().detail();
    ++ok;
    EXPECT_EQ(c.backend(), v1::BACKEND_HOST);
    EXPECT_EQ(c.method(), v1::CPU);
    EXPECT_EQ(r.wrong_elements(), 0);  // verified
    EXPECT_GE(r.stats().samples(), 5);
    EXPECT_FALSE(r.placement().empty());
    switch (c.bench()) {
      case v1::BENCH_P2P:
        EXPECT_GT(r.bandwidth_gbps(), 0);
        EXPECT_EQ(r.path(), "mpi");
        pairs.insert(
            {c.spec_name(), c.bidirectional(), c.src_rank(), c.dst_rank()});
        if (c.bidirectional()) {
          EXPECT_GT(r.rank_bandwidth_gbps(0), 0);
          EXPECT_GT(r.rank_bandwidth_gbps(1), 0);
          EXPECT_NEAR(
              r.bandwidth_gbps(),
              r.rank_bandwidth_gbps(0) + r.rank_bandwidth_gbps(1),
              0.3 * r.bandwidth_gbps());  // medians of sums vs sums of medians
        }
        break;
      case v1::BENCH_LATENCY:
        EXPECT_GT(r.latency_ns(), 0);
        EXPECT_LT(r.latency_ns(), 1e7);
        break;
      case v1::BENCH_GEMM:
        EXPECT_GT(r.tflops(), 0);
        EXPECT_LT(r.rel_error(), 1e-5);
        break;
      default:
        EXPECT_GT(r.bandwidth_gbps(), 0);
    }
  }
  // memcpy + triad + gemm per rank, 2 pairs x (uni, bidir), 2 latency pairs.
  EXPECT_EQ(ok, 2 + 2 + 2 + 4 + 2);
  EXPECT_GT(skipped, 30);
  EXPECT_EQ(pairs.size(), 4u);
  // JSON Lines holds every result, every pair included.
  std::ifstream jsonl(out + "/" + job + "/results.jsonl");
  int lines = 0, pair_lines = 0;
  for (std::string line; std::getline(jsonl, line);) {
    ++lines;
    if (line.find("\"spec_name\":\"mpi_p2p\"") != std::string::npos)
      ++pair_lines;
  }
  EXPECT_EQ(lines, static_cast<int>(results->size()));
  EXPECT_EQ(pair_lines, 4);
}

TEST_F(RunTest, NodeBenchPatternsOnThreeRanksAreVerified) {
  std::ofstream(plan_) << R"(name: many
cases:
  - {name: p, bench: p2p, backend: host, pattern: [pairs, all_to_one, one_to_all], sizes: [64KiB],
     timing: {iters: 2, min_samples: 3, max_samples: 5}}
  - {name: m, bench: local_copy, backend: host, pattern: all, sizes: [1MiB],
     timing: {iters: 2, min_samples: 3, max_samples: 5}}
)";
  std::string out = (dir_ / "r").string();
  Outcome o = RunRingmaster({"run", plan_, "--np", "3", "--backend", "host",
                             "--out", out, "--quiet"});
  ASSERT_EQ(o.exit_code, 0) << o.err << o.out;
  auto store = Store::Open(out + "/ringmaster.db");
  ASSERT_TRUE(store.ok());
  auto results = (*store)->Results(JobId(o), -1, 0);
  ASSERT_TRUE(results.ok());
  ASSERT_EQ(results->size(),
            6u + 3u + 3u + 1u);  // pairs, to each, from each, all at once
  for (const v1::Result& r : *results) {
    EXPECT_EQ(r.status(), v1::OK) << r.failure().detail();
    EXPECT_EQ(r.wrong_elements(), 0);
    EXPECT_GT(r.bandwidth_gbps(), 0);
    int moving = 0;
    for (double b : r.rank_bandwidth_gbps()) moving += b > 0;
    switch (r.case_().pattern()) {
      case v1::ALL_TO_ONE:
        EXPECT_EQ(moving, 2);
        break;  // the two senders
      case v1::ONE_TO_ALL:
        EXPECT_EQ(moving, 1);
        break;  // the one sender
      case v1::ALL_RANKS:
        EXPECT_EQ(moving, 3);
        break;
      default:
        EXPECT_EQ(moving, 1);
        break;
    }
  }
}

TEST_F(RunTest, CorruptedNodeBenchDataFailsAsDataMismatch) {
  std::ofstream(plan_) << R"(name: bad
cases:
  - {name: p, bench: p2p, backend: host, sizes: [64KiB], timing: {iters: 2, min_samples: 3, max_samples: 5}}
  - {name: g, bench: gemm, backend: host, shapes: [64], timing: {iters: 2, min_samples: 3, max_samples: 5}}
)";
  Outcome o = RunRingmaster({"run", plan_, "--np", "2", "--backend", "host",
                             "--out", (dir_ / "r").string()},
                            {{"RINGMASTER_FAULT", "corrupt:rank=1"}});
  EXPECT_EQ(o.exit_code, 1) << o.err;
  // The pair into rank 1 and rank 1's GEMM fail; the pair into rank 0 passes.
  EXPECT_THAT(
      o.out,
      HasSubstr("FAILED data_mismatch rank 1: 1 wrong bytes after the copy"));
  EXPECT_THAT(o.out, HasSubstr("GEMM result off the float64 reference"));
  EXPECT_THAT(o.out, HasSubstr("FAIL"));
  EXPECT_THAT(o.err, HasSubstr("data_mismatch"));
}

// Issue 5's CI check: the host ladder (1 and 2 ranks), efficiency and the
// breakdown printed, the numerical checks passing.
// A train case's result: it ran, its first steps matched the float64
// reference, and it trained (or, forward only, changed nothing).
void ExpectTrainedOrServed(const v1::Result& r) {
  ASSERT_EQ(r.status(), v1::OK) << r.failure().detail();
  const v1::TrainFigures& t = r.train();
  EXPECT_GE(t.loss_check(), 0);
  EXPECT_LT(t.loss_rel_error(), 1e-4);
  if (r.case_().train().inference()) {
    EXPECT_EQ(t.loss_last(), t.loss_first());  // forward only
    EXPECT_EQ(t.grad_zero_fraction(), -1);     // no gradients
  } else {
    EXPECT_LT(t.loss_last(), t.loss_first());  // it trains
  }
}

TEST_F(RunTest, DpScalingPlanRunsTheHostLadderWithChecks) {
  std::string out = (dir_ / "r").string();
  Outcome o = RunRingmaster(
      {"run", std::string(RINGMASTER_SOURCE_DIR) + "/plans/dp-scaling.yaml",
       "--np", "2", "--backend", "host", "--out", out});
  ASSERT_EQ(o.exit_code, 0) << o.err << o.out;
  EXPECT_THAT(
      o.out,
      HasSubstr(
          "# scaling (weak, E = T1/Tn): mlp: train L4 H512 B64/rank float32 "
          "sgd overlap"));
  EXPECT_THAT(o.out, HasSubstr("compute    exposed       skew sum/step"));
  std::vector<v1::Result> results = StoredResults(out, JobId(o));
  // check: 2 rungs; mlp: 2 rungs x 2 overlap modes; adam: 2 rungs;
  // pipelined: 2 rungs; serve: 3 batches.
  ASSERT_EQ(results.size(), 13u);
  EXPECT_THAT(o.out, HasSubstr("mlp_pipelined: train L4 H512 B64/rank "
                               "float32 sgd pipelined"));
  EXPECT_THAT(
      o.out,
      HasSubstr("# best throughput mlp_serve (inference, 1 rank): batch "));
  for (const v1::Result& r : results) {
    SCOPED_TRACE(r.case_().spec_name() + " n=" + std::to_string(r.nranks()));
    ExpectTrainedOrServed(r);
    const v1::TrainFigures& t = r.train();
    EXPECT_GT(r.stats().median_s(), 0);
    EXPECT_GT(t.compute_s(), 0);
    // The parts, each measured on its own, add up to the step.
    double sum = t.compute_s() + t.exposed_comm_s() + t.skew_s();
    EXPECT_NEAR(sum / t.step_of_breakdown_s(), 1.0, 0.05);
    if (r.case_().train().inference()) {
      EXPECT_EQ(t.exposed_comm_s(), 0);
    } else {
      // float32 gradients of this model do not underflow.
      EXPECT_GE(t.grad_zero_fraction(), 0);
      EXPECT_LT(t.grad_zero_fraction(), 0.01);
    }
    if (r.nranks() == 1) {  // no collective runs: nothing to wait for
      EXPECT_EQ(t.exposed_comm_s(), 0);
      EXPECT_EQ(t.skew_s(), 0);
    }
  }
}

// An n-rank data-parallel run matches a 1-rank run with n times the batch.
TEST_F(RunTest, TwoRanksMatchOneRankWithTwiceTheBatch) {
  std::ofstream(plan_) << R"(name: dp
cases:
  - {name: two, bench: train, backend: host, model: {layers: 3, hidden: 64, batch: 16},
     ladder: [2], steps: 2, check_steps: 4, lr: 0.5}
  - {name: one, bench: train, backend: host, model: {layers: 3, hidden: 64, batch: 32},
     ladder: [1], steps: 2, check_steps: 4, lr: 0.5}
  - {name: two_pipelined, bench: train, backend: host, schedule: pipelined,
     model: {layers: 3, hidden: 64, batch: 16}, bucket: 1KiB, ladder: [2],
     steps: 2, check_steps: 4, lr: 0.5}
)";
  std::string out = (dir_ / "r").string();
  Outcome o = RunRingmaster({"run", plan_, "--np", "2", "--backend", "host",
                             "--out", out, "--quiet"});
  ASSERT_EQ(o.exit_code, 0) << o.err << o.out;
  auto store = Store::Open(out + "/ringmaster.db");
  ASSERT_TRUE(store.ok());
  auto results = (*store)->Results(JobId(o), -1, 0);
  ASSERT_TRUE(results.ok());
  ASSERT_EQ(results->size(), 3u);
  const v1::TrainFigures& two = (*results)[0].train();
  const v1::TrainFigures& one = (*results)[1].train();
  const v1::TrainFigures& pipelined = (*results)[2].train();
  EXPECT_DOUBLE_EQ(two.loss_reference(),
                   one.loss_reference());  // the same global problem
  EXPECT_NEAR(two.loss_check(), one.loss_check(), 1e-5 * one.loss_check());
  // The pipelined schedule (each layer its own bucket, reductions in
  // flight into the next forward) computes the same steps.
  EXPECT_NEAR(pipelined.loss_check(), one.loss_check(),
              1e-5 * one.loss_check());
  EXPECT_NE(pipelined.loss_check(), 0);
}

// The dp-scaling plan's kinds of case at small shapes (Adam with overlapped
// buckets, the pipelined schedule, forward-only serving over a batch list):
// the sanitizer lanes run these in place of the shipped plan's sizes.
TEST_F(RunTest, TrainerOptimizersAndServingRunAtSmallShapes) {
  std::ofstream(plan_) << R"(name: dp_small
cases:
  - {name: adam, bench: train, backend: host, optimizer: adam, overlap: [true, false],
     model: {layers: 2, hidden: 32, batch: 8}, bucket: 1KiB, ladder: [1, 2],
     steps: 3, check_steps: 2}
  - {name: pipelined, bench: train, backend: host, schedule: pipelined,
     model: {layers: 2, hidden: 32, batch: 8}, bucket: 1KiB, ladder: [2],
     steps: 3, check_steps: 2, lr: 0.5}
  - {name: serve, bench: train, backend: host, mode: inference,
     model: {layers: 2, hidden: 32, batch: [2, 8]}, ladder: [1], steps: 3,
     check_steps: 1}
)";
  std::string out = (dir_ / "r").string();
  Outcome o = RunRingmaster(
      {"run", plan_, "--np", "2", "--backend", "host", "--out", out});
  ASSERT_EQ(o.exit_code, 0) << o.err << o.out;
  EXPECT_THAT(o.out, HasSubstr("# best throughput serve (inference, 1 rank)"));
  std::vector<v1::Result> results = StoredResults(out, JobId(o));
  // adam: 2 rungs x 2 overlap modes; pipelined: 1 rung; serve: 2 batches.
  ASSERT_EQ(results.size(), 7u);
  for (const v1::Result& r : results) {
    SCOPED_TRACE(r.case_().spec_name() + " n=" + std::to_string(r.nranks()));
    ExpectTrainedOrServed(r);
  }
}

// shared/RELIABILITY.md R7: a bad node among 16. The bad-node finder
// (bench: find_slow) over 16 host ranks: with rank 11 slowed 3x it names
// exactly rank 11, confirmed, and fails the job; with no slow rank it names
// nobody. Precision and recall over both runs 1.0. (A rank that is merely
// slow inside synchronous collectives cannot be told from its own times:
// every rank waits for it, so all ranks' times are equal; pair tests can.)
// slow_ratio 0.6, as tests/plans/find-slow.yaml: 16 ranks on 2 shared
// cores make single pair tests noisy, and at the default 0.8 a CI run had
// two healthy pairs among the suspects (14 pair tests of the 15 allowed);
// the 3x rank's pairs test far below 0.6. 32 operations per sample, not 4
// (0.23-0.46 ms each here: a test of 5-7 samples lasts ~40-100 ms, not
// ~5-13 ms). Beside a neighbour busy in 20-200 ms bursts a short test fell
// wholly in a burst or in a gap: healthy pairs tested 0.35x-1.67x the
// median pair and the slow rank's split once 0.64x (missed in 1 of 8 jobs;
// this test passed 5 of 6); at 32, 0.70x-1.38x and 0.17x-0.49x, and the
// test passed 8 of 8 (bench/results/cpu/timing-tests-under-noise.txt).
class R7_bad_node : public RunTest {};

TEST_F(R7_bad_node, NamedAmongSixteenWithPrecisionAndRecallOne) {
  const std::string plan = (dir_ / "r7.yaml").string();
  std::ofstream(plan) << R"(name: r7
cases:
  - {name: find_slow, bench: find_slow, backend: host, sizes: [1MiB],
     slow_ratio: 0.6,
     timing: {warmup: 1, iters: 32, min_samples: 5, max_samples: 7}}
)";
  auto finder = [&](const std::string& out, const std::string& fault,
                    int* exit_code) {
    std::vector<std::pair<std::string, std::string>> env;
    if (!fault.empty()) env.emplace_back("RINGMASTER_FAULT", fault);
    Outcome o = RunRingmaster({"run", plan, "--np", "16", "--backend", "host",
                               "--out", (dir_ / out).string(), "--quiet"},
                              env);
    *exit_code = o.exit_code;
    v1::FindSlowFigures f;
    auto store = Store::Open((dir_ / out / "ringmaster.db").string());
    if (!store.ok()) return f;
    auto rows = (*store)->Results(JobId(o), -1, 0);
    if (rows.ok() && rows->size() == 1) f = (*rows)[0].find_slow();
    return f;
  };
  int slow_exit = -1, clean_exit = -1;
  const v1::FindSlowFigures slow =
      finder("slow", "slow:rank=11:factor=3", &slow_exit);
  const v1::FindSlowFigures clean = finder("clean", "", &clean_exit);
  int named = 0, true_pos = 0;
  for (const auto* f : {&slow, &clean}) {
    for (int i = 0; i < f->slow_size(); ++i) {
      if (!f->confirmed(i)) continue;
      ++named;
      true_pos += f == &slow && f->slow(i) == 11;
    }
  }
  const double precision = named > 0 ? 1.0 * true_pos / named : 0;
  const double recall = true_pos;  // one slow rank in all
  const bool pass = precision == 1.0 && recall == 1.0 && slow_exit == 1 &&
                    clean_exit == 0 && slow.pair_runs() <= 15;
  std::cout << "FIGURE R7 "
            << absl::StrFormat(
                   "find_slow over 16 ranks, rank 11 slowed 3x: named [%s] "
                   "after %d pair tests + %d confirmation(s), job exit %d; "
                   "no slow rank: named [%s], exit %d; precision %.2f recall "
                   "%.2f",
                   absl::StrJoin(slow.slow(), ","), slow.pair_runs(),
                   slow.tests_size() - slow.pair_runs(), slow_exit,
                   absl::StrJoin(clean.slow(), ","), clean_exit, precision,
                   recall)
            << " => " << (pass ? "PASS" : "FAIL") << std::endl;
  EXPECT_EQ(precision, 1.0) << slow.verdict() << " / " << clean.verdict();
  EXPECT_EQ(recall, 1.0) << slow.verdict();
  EXPECT_EQ(slow_exit, 1);
  EXPECT_EQ(clean_exit, 0) << clean.verdict();
  EXPECT_LE(slow.pair_runs(), 15);
}

// shared/RELIABILITY.md R8: one corrupted element in a million. Every
// collective at >= 1M elements with one output element flipped on rank 1 is
// a FAILED data_mismatch naming rank 1 and counting exactly 1 wrong
// element; the same plan without the fault has no failure.
class R8_corruption : public RunTest {};

TEST_F(R8_corruption, OneWrongElementInAMillionIsAlwaysCaught) {
  const std::string plan = (dir_ / "r8.yaml").string();
  std::ofstream(plan) << R"(name: r8
defaults:
  timing: {warmup: 1, min_samples: 2, max_samples: 2, sample_target: 50us, max_iters_per_sample: 2}
cases:
  - {name: ar, collective: all_reduce, sizes: [4MiB, 6MiB], dtypes: [float32, int32], placement: both}
  - {name: ag, collective: all_gather, sizes: [8MiB], dtypes: [float32, bfloat16], placement: both}
  - {name: rs, collective: reduce_scatter, sizes: [8MiB], dtypes: [float32], placement: both}
  - {name: bc, collective: broadcast, sizes: [4MiB], dtypes: [float32], placement: both, root: 0}
  - {name: a2a, collective: all_to_all, sizes: [8MiB], dtypes: [float32]}
)";
  auto results_of = [&](const std::string& out, const Outcome& o) {
    auto store = Store::Open(out + "/ringmaster.db");
    EXPECT_TRUE(store.ok());
    auto rows = (*store)->Results(JobId(o), -1, 0);
    EXPECT_TRUE(rows.ok());
    return rows.ok() ? *rows : std::vector<v1::Result>{};
  };
  const std::string bad_out = (dir_ / "bad").string();
  Outcome bad = RunRingmaster({"run", plan, "--np", "2", "--backend", "host",
                               "--out", bad_out, "--quiet"},
                              {{"RINGMASTER_FAULT", "corrupt:rank=1"}});
  const std::string good_out = (dir_ / "good").string();
  Outcome good = RunRingmaster({"run", plan, "--np", "2", "--backend", "host",
                                "--out", good_out, "--quiet"});
  int cases = 0, caught = 0, false_pos = 0, clean = 0;
  int64_t min_elements = INT64_MAX;
  for (const v1::Result& r : results_of(bad_out, bad)) {
    ++cases;
    min_elements = std::min(min_elements, r.case_().count());
    caught += r.status() == v1::FAILED &&
              r.failure().reason() == v1::DATA_MISMATCH &&
              r.failure().rank() == 1 && r.wrong_elements() == 1 &&
              r.busbw_gbps() == 0;
  }
  for (const v1::Result& r : results_of(good_out, good)) {
    ++clean;
    false_pos += r.status() != v1::OK;
  }
  const bool pass = cases > 0 && caught == cases && clean == cases &&
                    false_pos == 0 && min_elements >= (1 << 20);
  std::cout << "FIGURE R8 "
            << absl::StrFormat(
                   "one element flipped on rank 1 in %d collective results of "
                   ">= %d elements: caught %d (%.0f%%), each exactly 1 wrong "
                   "element; without the fault %d results, %d false positives",
                   cases, min_elements, caught,
                   cases > 0 ? 100.0 * caught / cases : 0.0, clean, false_pos)
            << " => " << (pass ? "PASS" : "FAIL") << std::endl;
  EXPECT_GT(cases, 10) << bad.err;
  EXPECT_EQ(caught, cases);
  EXPECT_EQ(clean, cases) << good.err;
  EXPECT_EQ(false_pos, 0);
  EXPECT_GE(min_elements, 1 << 20);
}

}  // namespace
}  // namespace ringmaster

namespace ringmaster {
namespace {

// `compare` must not pass a gate aimed at the wrong folder (nothing
// matched: its own exit code), and one base run against one new run cannot
// call a slowdown (run-to-run noise unknown): inconclusive, not exit 1.
TEST_F(RunTest, CompareWithNothingMatchedFailsAndOneRunIsInconclusive) {
  const std::string plan =
      std::string(RINGMASTER_SOURCE_DIR) + "/tests/plans/compare.yaml";
  auto run = [&](const std::string& out, const std::string& fault) {
    Outcome o = RunRingmaster({"run", plan, "--np", "2", "--backend", "host",
                               "--out", out, "--quiet"},
                              {{"RINGMASTER_FAULT", fault}});
    EXPECT_EQ(o.exit_code, 0) << o.err;
  };
  const std::string base = (dir_ / "base").string();
  const std::string slow = (dir_ / "slow").string();
  run(base, "");
  run(slow, "slow:factor=2");
  Outcome other =
      RunRingmaster({"run", plan_, "--np", "2", "--backend", "host", "--out",
                     (dir_ / "other").string(), "--quiet"});
  ASSERT_EQ(other.exit_code, 0) << other.err;

  Outcome none = RunRingmaster({"compare", base, (dir_ / "other").string()});
  EXPECT_EQ(none.exit_code, 9) << none.out << none.err;
  EXPECT_THAT(none.err, HasSubstr("nothing to compare"));

  Outcome one = RunRingmaster({"compare", base, slow});
  EXPECT_EQ(one.exit_code, 0) << one.out << one.err;
  EXPECT_THAT(one.out, HasSubstr("INCONCLUSIVE: 1 base run(s)"));
  Outcome json = RunRingmaster({"compare", base, slow, "--format", "json"});
  auto j = nlohmann::json::parse(json.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << json.out;
  EXPECT_EQ(j["inconclusive"], true);
  EXPECT_EQ(j["regressed"], false);
  // The figures still say slower: the verdict is what changed.
  EXPECT_GT(j["summary"]["median_change"].get<double>(), 0.3);
}

}  // namespace
}  // namespace ringmaster
