// The hostile-input and fault suite: bad plans, bad arguments, crafted
// names, signals at random moments, a killed launcher, a full disk and
// leftover shared memory, each against the real `ringmaster` binary
// (docs/limits.md states the guarantees these tests hold it to). Every
// test leaves no process of its runs, no shared-memory file and no job in
// a running state behind, and checks that it does not.
#include <gmock/gmock.h>
#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "coordinator/launcher.h"
#include "coordinator/store.h"
#include "tests/cli_runner.h"
#include "tests/service_harness.h"

namespace ringmaster {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

// Live processes whose environment holds `marker` (every process a run
// starts inherits it), other than zombies.
std::vector<pid_t> ProcessesWithMarker(const std::string& marker) {
  std::vector<pid_t> found;
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string name = e.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream f(e.path() / "environ");
    const std::string env((std::istreambuf_iterator<char>(f)),
                          std::istreambuf_iterator<char>());
    if (env.find(marker) != std::string::npos) found.push_back(std::stoi(name));
  }
  return found;
}

std::string Commands(const std::vector<pid_t>& pids) {
  std::string out;
  for (pid_t p : pids) {
    std::ifstream f("/proc/" + std::to_string(p) + "/cmdline");
    std::string cmd((std::istreambuf_iterator<char>(f)),
                    std::istreambuf_iterator<char>());
    std::replace(cmd.begin(), cmd.end(), '\0', ' ');
    out += absl::StrFormat("[%d] %s\n", p, cmd);
  }
  return out;
}

// Jobs of the store under `out` that are not over.
std::vector<std::string> UnfinishedJobs(const std::string& out) {
  std::vector<std::string> open;
  if (!fs::exists(out + "/ringmaster.db")) return open;
  auto store = Store::Open(out + "/ringmaster.db");
  EXPECT_TRUE(store.ok()) << store.status();
  if (!store.ok()) return open;
  auto jobs = (*store)->AllJobs();
  EXPECT_TRUE(jobs.ok());
  for (const v1::Job& j : jobs.ok() ? *jobs : std::vector<v1::Job>{}) {
    if (j.state() != v1::JOB_SUCCEEDED && j.state() != v1::JOB_FAILED &&
        j.state() != v1::JOB_CANCELLED)
      open.push_back(j.job_id() + " " + v1::JobState_Name(j.state()));
  }
  return open;
}

std::vector<v1::Job> Jobs(const std::string& out) {
  auto store = Store::Open(out + "/ringmaster.db");
  if (!store.ok()) return {};
  auto jobs = (*store)->AllJobs();
  return jobs.ok() ? *jobs : std::vector<v1::Job>{};
}

// A plan of about 3 s on two host ranks.
std::string ShortPlan(const std::string& dir) {
  const std::string path = dir + "/short.yaml";
  std::ofstream(path) << R"(name: short
cases:
  - name: ar
    collective: all_reduce
    sizes: {min: 8B, max: 1MiB, factor: 8}
    dtypes: [float32, int32]
    timing: {warmup: 1, min_samples: 3, max_samples: 20, target_ci: 0.01, max_time: 0.2s}
)";
  return path;
}

// ---------------------------------------------------------------------------
// Bad plans: refused with exit 2, "file:line:", nothing written, no raw
// control character on the terminal.
TEST(HostileInput, BadPlansAreRefusedWithTheirLine) {
  const std::string dir = testing::ScratchDir("bad_plans");
  const std::string good = testing::ReadFile(Source("plans/quickstart.yaml"));
  struct Bad {
    std::string name, text, says;
  };
  std::string evil_name = good;
  evil_name.replace(evil_name.find("name: quickstart"), 16,
                    "name: \"x\\e]0;owned\\a\\e[2J\"");
  std::string newline_name = good;
  newline_name.replace(newline_name.find("name: quickstart"), 16,
                       "name: \"x\\nringmaster: job FAKE SUCCEEDED\"");
  std::string long_duration = good;
  long_duration.replace(long_duration.find("max_time: 0.5s"), 14,
                        "max_time: 1e308min");
  std::string nan_number = good;
  nan_number.replace(nan_number.find("target_ci: 0.02"), 15, "target_ci: nan");
  const int lines =
      static_cast<int>(std::count(good.begin(), good.end(), '\n'));
  const std::vector<Bad> bad = {
      {"two documents", good + "---\nname: second\ncases: []\n",
       absl::StrFormat(":%d: (yaml): a second YAML document", lines + 1)},
      {"duplicate key", good + "name: again\n",
       absl::StrFormat(":%d: (yaml): key \"name\" given twice", lines + 1)},
      {"NUL byte", "name: a\nx: \"b" + std::string(1, '\0') + "c\"\n",
       ":2: (yaml): a NUL byte"},
      {"invalid UTF-8", "name: a\ndescription: caf\xe9\n",
       absl::StrFormat(":2: (yaml): invalid UTF-8 at byte offset %d",
                       std::string("name: a\ndescription: caf").size())},
      {"raw escape", "name: a\x1b[2J\ncases: []\n", "control character 0x1b"},
      {"escaped escape", evil_name, "control character 0x1b"},
      {"newline in a name", newline_name, "one line of printable text"},
      {"infinite duration", long_duration, "at most 2592000 s"},
      {"NaN", nan_number, "target_ci"},
  };
  for (const Bad& b : bad) {
    SCOPED_TRACE(b.name);
    const std::string path = dir + "/bad.yaml";
    std::ofstream(path, std::ios::binary | std::ios::trunc) << b.text;
    for (const std::string cmd : {"validate", "run"}) {
      const std::string out = dir + "/out";
      Outcome o = Ringmaster({cmd, path, "--out", out});
      if (std::string(cmd) == "validate") o = Ringmaster({cmd, path});
      EXPECT_EQ(o.exit_code, 2) << o.err;
      EXPECT_THAT(o.err, HasSubstr(b.says));
      EXPECT_THAT(o.err, HasSubstr("bad.yaml:"));
      EXPECT_LT(o.seconds, 2.0);
      EXPECT_EQ(o.out.find('\x1b'), std::string::npos);
      EXPECT_EQ(o.err.find('\x1b'), std::string::npos);
      EXPECT_THAT(o.out + o.err, Not(HasSubstr("\nringmaster: job FAKE")));
      EXPECT_FALSE(fs::exists(out)) << "a refused plan wrote " << out;
    }
  }
}

// Limits checked before reading: a 3 GiB sparse file and 2 MiB on
// standard input are refused at once.
TEST(HostileInput, OversizedPlansAreRefusedBeforeReading) {
  const std::string dir = testing::ScratchDir("big_plans");
  const std::string sparse = dir + "/huge.yaml";
  { std::ofstream f(sparse); }
  fs::resize_file(sparse, int64_t{3} << 30);
  Outcome o = Ringmaster({"validate", sparse});
  EXPECT_EQ(o.exit_code, 2);
  EXPECT_THAT(o.err, HasSubstr("more than the 1048576 allowed"));
  EXPECT_LT(o.seconds, 1.0);
  const std::string big = dir + "/big.yaml";
  std::ofstream(big) << "name: big\n" << std::string(2 << 20, '#') << "\n";
  o = Ringmaster({"validate", "-"}, {}, nullptr, big);
  EXPECT_EQ(o.exit_code, 2) << o.err;
  EXPECT_THAT(o.err, HasSubstr("(stdin):1: (plan): more than the 1048576"));
  o = Ringmaster({"validate", "-"}, {}, nullptr,
                 Source("plans/quickstart.yaml"));
  EXPECT_EQ(o.exit_code, 0) << o.err;
}

// Bad arguments: one exit code (2) for every usage error, before anything
// is written or launched.
TEST(HostileInput, BadArgumentsAreUsageErrors) {
  const std::string dir = testing::ScratchDir("bad_args");
  const std::string plan = ShortPlan(dir);
  const std::string file = dir + "/a-file";
  std::ofstream(file) << "x";
  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  const std::vector<std::vector<std::string>> bad = {
      {"run", ""},
      {"validate", ""},
      {"run", plan, "--out", ""},
      {"run", plan, "--timeout", "nan"},
      {"run", plan, "--timeout", "inf"},
      {"run", plan, "--timeout", "1e308"},
      {"run", plan, "--op-timeout", "-1"},
      {"compare", plan, plan, "--threshold", "nan"},
      {"run", plan, "--np", "65536"},
      {"run", plan, "--np", std::to_string(cores + 1), "--backend", "host"},
      {"run", plan, "--out", file + "/sub"},
  };
  for (const auto& args : bad) {
    SCOPED_TRACE(absl::StrJoin(args, " "));
    Outcome o = Ringmaster(args, {"OMPI_MCA_rmaps_base_oversubscribe=0"});
    EXPECT_EQ(o.exit_code, 2) << o.err;
    EXPECT_FALSE(o.err.empty());
  }
  EXPECT_FALSE(fs::exists(dir + "/ringmaster-results"));
}

// Crafted names in results (a hostile worker or a store written by other
// means): every text, CSV and HTML view escapes their control characters;
// JSON keeps them exact.
TEST(HostileInput, CraftedNamesAreEscapedInEveryView) {
  const std::string dir = testing::ScratchDir("crafted");
  const std::string evil =
      "x\x1b]0;owned\x07\x1b[2J\nringmaster: job FAKE SUCCEEDED";
  v1::Result r;
  r.set_job_id("job1");
  r.set_status(v1::OK);
  r.set_nranks(2);
  v1::Case* c = r.mutable_case_();
  c->set_spec_name(evil);
  c->set_variant(evil);
  c->set_collective(v1::ALL_REDUCE);
  c->set_dtype(v1::FLOAT32);
  c->set_size_bytes(1024);
  c->set_count(256);
  r.mutable_stats()->set_mean_s(1e-5);
  r.mutable_stats()->set_samples(5);
  v1::Result failed = r;
  failed.mutable_case_()->set_seq(1);
  failed.mutable_case_()->set_size_bytes(2048);
  failed.set_status(v1::FAILED);
  failed.mutable_failure()->set_reason(v1::BACKEND_ERROR);
  failed.mutable_failure()->set_detail(evil);
  std::string line, line2;
  ASSERT_TRUE(google::protobuf::util::MessageToJsonString(r, &line).ok());
  ASSERT_TRUE(google::protobuf::util::MessageToJsonString(failed, &line2).ok());
  const std::string jsonl = dir + "/results.jsonl";
  std::ofstream(jsonl) << line << "\n" << line2 << "\n";
  for (const std::string format : {"text", "csv"}) {
    SCOPED_TRACE(format);
    Outcome o = Ringmaster({"report", jsonl, "--format", format});
    EXPECT_EQ(o.exit_code, 0) << o.err;
    EXPECT_EQ((o.out + o.err).find('\x1b'), std::string::npos);
    EXPECT_EQ((o.out + o.err).find('\x07'), std::string::npos);
    EXPECT_THAT(o.out, Not(HasSubstr("\nringmaster: job FAKE")));
    EXPECT_THAT(o.out, HasSubstr("x\\x1b]0;owned\\x07\\x1b[2J\\nringmaster"));
  }
  const std::string html = dir + "/r.html";
  Outcome o = Ringmaster({"report", jsonl, "--html", html});
  ASSERT_EQ(o.exit_code, 0) << o.err;
  const std::string page = testing::ReadFile(html);
  EXPECT_EQ(page.find('\x1b'), std::string::npos);
  EXPECT_THAT(page, HasSubstr("\\x1b"));
  o = Ringmaster({"report", jsonl, "--format", "jsonl"});
  EXPECT_THAT(o.out, HasSubstr("\\u001b]0;owned"));  // exact in JSON
}

// The documented 16 KiB header limit of `serve`, across several headers.
TEST(HostileInput, RequestHeadersAbove16KiBAreRefused) {
  testing::ServeProcess serve(testing::ScratchDir("headers"),
                              {"--launcher", "external"});
  ASSERT_TRUE(serve.ok()) << serve.output();
  auto stub = serve.Stub();
  auto call = [&](int headers, int bytes_each) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() +
                     std::chrono::seconds(5));
    ctx.AddMetadata("authorization", "Bearer " + serve.admin_token());
    for (int i = 0; i < headers; ++i)
      ctx.AddMetadata(absl::StrFormat("x-pad-%d", i),
                      std::string(bytes_each, 'p'));
    v1::GetJobRequest req;
    req.set_job_id("no-such-job");
    v1::GetJobResponse resp;
    return stub->GetJob(&ctx, req, &resp).error_code();
  };
  EXPECT_EQ(call(2, 4 << 10), grpc::StatusCode::NOT_FOUND);  // 8 KiB: read
  // The call reached the handler: its answer is about the job.
  auto Read = [](grpc::StatusCode code) {
    return code == grpc::StatusCode::NOT_FOUND || code == grpc::StatusCode::OK;
  };
  // Above the limit every time (gRPC's own limit refuses only some of the
  // requests between it and twice it).
  std::map<std::string, int> read;
  for (int i = 0; i < 40; ++i) {
    read["17 KiB"] += Read(call(1, 17 << 10));
    read["3 x 6 KiB"] += Read(call(3, 6 << 10));
    read["24 KiB"] += Read(call(4, 6 << 10));
    read["64 KiB"] += Read(call(8, 8 << 10));
  }
  for (const auto& [what, n] : read) EXPECT_EQ(n, 0) << what << " read";
  EXPECT_TRUE(serve.alive());
}

// ---------------------------------------------------------------------------
// Signals at random moments: the run, its mpirun and every rank end; the
// job is stored CANCELLED (or finished before the signal); no process, no
// shared-memory file and no running job is left.

std::set<std::string> ShmEntries() {
  std::set<std::string> names;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/dev/shm", ec))
    names.insert(e.path().filename().string());
  return names;
}

struct Stop {
  int signal;
  int times;       // 1, or 2 sent 50 ms apart
  double after_s;  // after the start
};

// Runs the short plan, stops it as `stop` says, and checks what is left.
// True when a cancelled job's report was checked.
bool StopAndCheck(const std::string& dir, int round, const Stop& stop) {
  SCOPED_TRACE(absl::StrFormat("round %d: %s x%d after %.2f s", round,
                               strsignal(stop.signal), stop.times,
                               stop.after_s));
  const std::string marker =
      absl::StrFormat("RINGMASTER_HOSTILE_MARK=%d_%d", getpid(), round);
  const std::string out = absl::StrFormat("%s/out%d", dir, round);
  std::thread stopper;
  Outcome o = Ringmaster(
      {"run", ShortPlan(dir), "--np", "2", "--backend", "host", "--out", out,
       "--quiet"},
      {marker}, [&](pid_t pid) {
        stopper = std::thread([pid, stop] {
          std::this_thread::sleep_for(
              std::chrono::duration<double>(stop.after_s));
          for (int i = 0; i < stop.times; ++i) {
            if (i > 0)
              std::this_thread::sleep_for(std::chrono::milliseconds(50));
            kill(pid, stop.signal);
          }
        });
      });
  stopper.join();
  const std::vector<pid_t> left = ProcessesWithMarker(marker);
  EXPECT_TRUE(left.empty()) << "left behind:\n" << Commands(left);
  for (pid_t p : left) kill(p, SIGKILL);
  EXPECT_THAT(UnfinishedJobs(out), ::testing::IsEmpty());
  // A run that exited on the signal stored its job as cancelled.
  bool reported = false;
  if (o.exit_code == 128 + stop.signal) {
    bool cancelled = false;
    for (const v1::Job& j : Jobs(out)) {
      EXPECT_NE(j.state(), v1::JOB_FAILED) << j.job_id() << " " << o.err;
      cancelled = cancelled || j.state() == v1::JOB_CANCELLED;
    }
    // `report` says so too (when the job stored a result to report on).
    Outcome r = Ringmaster({"report", out});
    if (cancelled && r.exit_code == 0) {
      EXPECT_THAT(r.out, HasSubstr("# status: CANCELLED"));
      EXPECT_THAT(r.out, Not(HasSubstr("# status: SUCCEEDED")));
      reported = true;
    }
  } else {
    EXPECT_EQ(o.exit_code, 0) << o.err;  // it ended before the signal
  }
  for (const std::string& name : ShmEntries())
    EXPECT_EQ(name.rfind("ringmaster-run-", 0), std::string::npos) << name;
  return reported;
}

TEST(HostileFaults, OneSignalAtRandomMomentsLeavesNothing) {
  const std::string dir = testing::ScratchDir("signals1");
  const std::set<std::string> shm_before = ShmEntries();
  std::mt19937 rng(20261203);
  std::uniform_real_distribution<double> when(0.0, 2.5);
  int reported = 0;
  for (int round = 0; round < 12; ++round) {
    reported += StopAndCheck(dir, round,
                             {round % 2 == 0 ? SIGTERM : SIGINT, 1, when(rng)});
  }
  EXPECT_GT(reported, 0) << "no round stopped a job that had results";
  EXPECT_EQ(ShmEntries(), shm_before);
}

TEST(HostileFaults, RepeatedSignalsAtRandomMomentsLeaveNothing) {
  const std::string dir = testing::ScratchDir("signals2");
  const std::set<std::string> shm_before = ShmEntries();
  std::mt19937 rng(31);
  std::uniform_real_distribution<double> when(0.0, 2.5);
  for (int round = 0; round < 10; ++round) {
    StopAndCheck(dir, round, {round % 2 == 0 ? SIGINT : SIGTERM, 2, when(rng)});
  }
  EXPECT_EQ(ShmEntries(), shm_before);
}

// `serve --on-stop cancel` stopped by one or two signals at random moments
// while a job runs: every launcher and rank ends and the job is stored
// CANCELLED (or had finished); nothing is left running.
TEST(HostileFaults, ServeStoppedAtRandomMomentsCancelsItsJobs) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> when(0.0, 2.0);
  for (int round = 0; round < 4; ++round) {
    const std::string dir =
        testing::ScratchDir(absl::StrFormat("serve%d", round));
    const std::string marker =
        absl::StrFormat("RINGMASTER_HOSTILE_MARK=%d_serve%d", getpid(), round);
    const size_t eq = marker.find('=');
    setenv(marker.substr(0, eq).c_str(), marker.substr(eq + 1).c_str(), 1);
    auto serve = std::make_unique<testing::ServeProcess>(
        dir + "/data", std::vector<std::string>{"--on-stop", "cancel"});
    unsetenv(marker.substr(0, eq).c_str());
    ASSERT_TRUE(serve->ok()) << serve->output();
    auto stub = serve->Stub();
    auto job = testing::Submit(*stub, serve->admin_token(),
                               testing::HostSubmission(ShortPlan(dir), 2));
    ASSERT_TRUE(job.ok()) << job.status();
    const double after = when(rng);
    const int times = round % 2 + 1;
    SCOPED_TRACE(absl::StrFormat("round %d: SIGTERM x%d after %.2f s", round,
                                 times, after));
    std::this_thread::sleep_for(std::chrono::duration<double>(after));
    for (int i = 0; i < times; ++i) {
      if (i > 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));
      kill(serve->pid(), SIGTERM);
    }
    const auto give_up =
        std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (serve->alive() && std::chrono::steady_clock::now() < give_up)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    EXPECT_FALSE(serve->alive());
    std::vector<pid_t> left;
    for (pid_t p : ProcessesWithMarker(marker))
      if (p != getpid()) left.push_back(p);
    EXPECT_TRUE(left.empty()) << Commands(left);
    for (pid_t p : left) kill(p, SIGKILL);
    serve.reset();
    EXPECT_THAT(UnfinishedJobs(dir + "/data"), ::testing::IsEmpty());
    EXPECT_EQ(Jobs(dir + "/data").size(), 1u);
    for (const v1::Job& j : Jobs(dir + "/data"))
      EXPECT_NE(j.state(), v1::JOB_FAILED) << j.failure().ShortDebugString();
  }
}

// A launcher killed under the run: the job FAILED as worker_exit, every
// rank ended, nothing RUNNING.
TEST(HostileFaults, KilledLauncherLeavesNoRank) {
  const std::string dir = testing::ScratchDir("killed_launcher");
  const std::string marker =
      absl::StrFormat("RINGMASTER_HOSTILE_MARK=%d_launcher", getpid());
  const std::string out = dir + "/out";
  std::thread killer;
  std::atomic<bool> killed{false};
  Outcome o = Ringmaster(
      {"run", ShortPlan(dir), "--np", "2", "--backend", "host", "--out", out,
       "--quiet"},
      {marker}, [&](pid_t) {
        killer = std::thread([&] {
          for (int i = 0; i < 400 && !killed; ++i) {
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
            for (pid_t p : ProcessesWithMarker(marker)) {
              std::ifstream f("/proc/" + std::to_string(p) + "/comm");
              std::string comm;
              f >> comm;
              if (comm == "mpirun" && ProcessesWithMarker(marker).size() >= 4) {
                kill(p, SIGKILL);
                killed = true;
              }
            }
          }
        });
      });
  killer.join();
  ASSERT_TRUE(killed) << o.err;
  EXPECT_EQ(o.exit_code, 1) << o.err;
  EXPECT_THAT(o.err, HasSubstr("worker_exit"));
  const std::vector<pid_t> left = ProcessesWithMarker(marker);
  EXPECT_TRUE(left.empty()) << Commands(left);
  for (pid_t p : left) kill(p, SIGKILL);
  EXPECT_THAT(UnfinishedJobs(out), ::testing::IsEmpty());
}

// A run killed with SIGKILL cannot clean up: its shared-memory folder is
// removed by the next run, which removes its own at the end.
TEST(HostileFaults, SharedMemoryOfAGoneRunIsRemoved) {
  const std::string dir = testing::ScratchDir("shm");
  const std::string marker =
      absl::StrFormat("RINGMASTER_HOSTILE_MARK=%d_shm", getpid());
  std::string folder;
  Outcome o =
      Ringmaster({"run", ShortPlan(dir), "--np", "2", "--backend", "host",
                  "--out", dir + "/out1", "--quiet"},
                 {marker}, [&](pid_t pid) {
                   folder = "/dev/shm/ringmaster-run-" + std::to_string(pid);
                   // Kill everything once the ranks wrote their segments there.
                   for (int i = 0; i < 1000; ++i) {
                     std::error_code ec;
                     if (fs::exists(folder, ec) && !fs::is_empty(folder, ec))
                       break;
                     std::this_thread::sleep_for(std::chrono::milliseconds(10));
                   }
                   for (pid_t p : ProcessesWithMarker(marker)) kill(p, SIGKILL);
                 });
  EXPECT_EQ(o.exit_code, 128 + SIGKILL);
  ASSERT_TRUE(fs::exists(folder)) << "no shared-memory folder " << folder;
  EXPECT_FALSE(fs::is_empty(folder)) << "Open MPI wrote no segment there";
  o = Ringmaster({"run", ShortPlan(dir), "--np", "2", "--backend", "host",
                  "--out", dir + "/out2", "--quiet"});
  EXPECT_EQ(o.exit_code, 0) << o.err;
  EXPECT_FALSE(fs::exists(folder)) << "the gone run's folder stayed";
  for (const std::string& name : ShmEntries())
    EXPECT_EQ(name.rfind("ringmaster-run-", 0), std::string::npos) << name;
}

// A full disk under --out: "no space left on device" with the path, the
// job FAILED in the store, no result file with half a row, nothing left.
TEST(HostileFaults, FullDiskFailsTheJobAndKeepsFilesWhole) {
  if (geteuid() != 0) GTEST_SKIP() << "mounting a small tmpfs needs root";
  const std::string dir = testing::ScratchDir("disk_full");
  const std::string mnt = dir + "/small";
  fs::create_directories(mnt);
  ASSERT_EQ(mount("tmpfs", mnt.c_str(), "tmpfs", 0, "size=16m"), 0)
      << std::strerror(errno);
  const std::string out = mnt + "/out";
  const std::string marker =
      absl::StrFormat("RINGMASTER_HOSTILE_MARK=%d_disk", getpid());
  std::thread filler;
  Outcome o = Ringmaster(
      {"run", ShortPlan(dir), "--np", "2", "--backend", "host", "--out", out,
       "--quiet"},
      {marker}, [&](pid_t) {
        filler = std::thread([&] {
          // Once the job writes results, fill what is left of the disk.
          for (int i = 0; i < 1000; ++i) {
            bool started = false;
            std::error_code ec;
            for (const auto& e : fs::recursive_directory_iterator(out, ec))
              started = started || absl::StrContains(e.path().string(),
                                                     "results.jsonl.partial");
            if (started) break;
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
          }
          std::ofstream fill(mnt + "/filler", std::ios::binary);
          const std::string block(1 << 16, 'f');
          while (fill.write(block.data(), block.size())) {
          }
        });
      });
  filler.join();
  EXPECT_EQ(o.exit_code, 1) << o.err;
  EXPECT_THAT(o.err, HasSubstr("no space left on device"));
  EXPECT_THAT(o.err, HasSubstr(out));
  const std::vector<pid_t> left = ProcessesWithMarker(marker);
  EXPECT_TRUE(left.empty()) << Commands(left);
  for (pid_t p : left) kill(p, SIGKILL);
  std::vector<v1::Job> jobs = Jobs(out);
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_EQ(jobs[0].state(), v1::JOB_FAILED);
  EXPECT_EQ(jobs[0].failure().reason(), v1::STORE_ERROR);
  // Result files: absent, or whole rows only.
  std::error_code ec;
  for (const auto& e : fs::recursive_directory_iterator(out, ec)) {
    const std::string name = e.path().filename().string();
    EXPECT_EQ(name.find(".partial"), std::string::npos) << name;
    if (name == "results.csv") {
      const std::string text = testing::ReadFile(e.path().string());
      EXPECT_TRUE(text.empty() || text.back() == '\n');
    }
  }
  umount2(mnt.c_str(), MNT_DETACH);
}

}  // namespace
}  // namespace ringmaster
