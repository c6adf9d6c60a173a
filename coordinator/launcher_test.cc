#include "coordinator/launcher.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace ringmaster {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

TEST(BuildMpirunArgv, ArgvNotShell) {
  MpirunOptions o;
  o.np = 4;
  o.allow_run_as_root = true;
  o.oversubscribe = true;
  o.forward_env = {"NCCL_NVLS_ENABLE", "RINGMASTER_TOKEN"};
  o.worker_argv = {"/bin/worker", "run", "--job", "x; rm -rf /"};
  EXPECT_THAT(BuildMpirunArgv(o),
              ElementsAre("mpirun", "--allow-run-as-root", "--oversubscribe",
                          "-np", "4", "--bind-to", "none", "-x",
                          "NCCL_NVLS_ENABLE", "-x", "RINGMASTER_TOKEN",
                          "/bin/worker", "run", "--job", "x; rm -rf /"));
}

TEST(BuildMpirunArgv, NodeMajorPlacementOnlyWithAHostfile) {
  MpirunOptions o;
  o.np = 8;
  o.ranks_per_node = 2;
  o.worker_argv = {"/bin/worker"};
  EXPECT_THAT(BuildMpirunArgv(o), Not(Contains("--map-by")))
      << "one host: the slots decide";
  o.hostfile = "/tmp/hosts";
  EXPECT_THAT(
      BuildMpirunArgv(o),
      ElementsAre("mpirun", "-np", "8", "--hostfile", "/tmp/hosts", "--map-by",
                  "ppr:2:node", "--bind-to", "none", "/bin/worker"));
}

TEST(ForwardedEnvNames, Allowlist) {
  EXPECT_THAT(
      ForwardedEnvNames({"NCCL_NVLS_ENABLE=0", "HOME=/root", "NCCL_DEBUG=INFO",
                         "CUDA_VISIBLE_DEVICES=0,1", "RINGMASTER_TOKEN=abc",
                         "AWS_SECRET=x", "LD_LIBRARY_PATH=/x", "=bad"}),
      ElementsAre("NCCL_NVLS_ENABLE", "NCCL_DEBUG", "CUDA_VISIBLE_DEVICES",
                  "RINGMASTER_TOKEN", "LD_LIBRARY_PATH"));
}

// A Unix socket bound at `path`; listening or not (a stale socket: the file
// stays after close, and connect() is refused).
int BindUnixSocket(const std::string& path, bool listening) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
  int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      (listening && listen(fd, 1) != 0)) {
    close(fd);
    return -1;
  }
  return fd;
}

TEST(AvoidStaleMunge, OnlyAStaleSocketTurnsMungeOff) {
  char dir_template[] = "/tmp/rm-munge-XXXXXX";
  ASSERT_NE(mkdtemp(dir_template), nullptr);
  const std::string dir = dir_template;
  const std::vector<std::string> base = {"PATH=/usr/bin", "HOME=/root"};

  // No socket (munge not installed, or never started): nothing to avoid.
  auto env = base;
  EXPECT_EQ(AvoidStaleMunge(&env, dir + "/missing.socket"), "");
  EXPECT_EQ(env, base);

  // A live daemon's socket: PMIx may use munge.
  const std::string live = dir + "/live.socket";
  int live_fd = BindUnixSocket(live, /*listening=*/true);
  ASSERT_GE(live_fd, 0);
  EXPECT_EQ(AvoidStaleMunge(&env, live), "");
  EXPECT_EQ(env, base);
  close(live_fd);

  // A stale socket (the daemon gone): munge off, and a note that says why.
  const std::string stale = dir + "/stale.socket";
  int stale_fd = BindUnixSocket(stale, /*listening=*/false);
  ASSERT_GE(stale_fd, 0);
  close(stale_fd);
  const std::string note = AvoidStaleMunge(&env, stale);
  EXPECT_THAT(note, HasSubstr(stale));
  EXPECT_THAT(note, HasSubstr("PMIX_MCA_psec=^munge"));
  EXPECT_THAT(
      env, ElementsAre("PATH=/usr/bin", "HOME=/root", "PMIX_MCA_psec=^munge"));
  EXPECT_THAT(ForwardedEnvNames(env), Not(Contains("PMIX_MCA_psec")))
      << "mpirun reads it itself; ranks do not need it";

  // The user's own choice wins.
  env = base;
  env.push_back("PMIX_MCA_psec=native");
  EXPECT_EQ(AvoidStaleMunge(&env, stale), "");
  EXPECT_THAT(env, Contains("PMIX_MCA_psec=native"));
  EXPECT_THAT(env, Not(Contains("PMIX_MCA_psec=^munge")));

  unlink(live.c_str());
  unlink(stale.c_str());
  rmdir(dir.c_str());
}

TEST(ParseMpirunFailureLine, OpenMpiMessages) {
  auto f = ParseMpirunFailureLine(
      "mpirun noticed that process rank 1 with PID 4242 on node vm exited on "
      "signal 9 "
      "(Killed).");
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->rank, 1);
  EXPECT_EQ(f->host, "vm");
  EXPECT_EQ(f->detail, "exited on signal 9 (Killed)");
  EXPECT_FALSE(ParseMpirunFailureLine("all good").has_value());
}

TEST(DescribeWaitStatus, ExitAndSignal) {
  EXPECT_EQ(DescribeWaitStatus(3 << 8), "exit code 3");
  EXPECT_EQ(DescribeWaitStatus(SIGKILL), "signal 9 (Killed)");
}

TEST(ChildProcess, DeliversLinesAndExitStatus) {
  std::mutex mu;
  std::vector<std::string> out, err;
  auto child =
      ChildProcess::Spawn({"sh", "-c", "echo one; echo two >&2; exit 7"},
                          [&](std::string_view line, bool is_err) {
                            std::lock_guard<std::mutex> lock(mu);
                            (is_err ? err : out).emplace_back(line);
                          });
  ASSERT_TRUE(child.ok()) << child.status();
  std::optional<int> status;
  for (int i = 0; i < 500 && !(status = (*child)->Poll()); ++i) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  ASSERT_TRUE(status.has_value());
  EXPECT_EQ(DescribeWaitStatus(*status), "exit code 7");
  (*child)->JoinReaders();
  EXPECT_THAT(out, ElementsAre("one"));
  EXPECT_THAT(err, ElementsAre("two"));
}

TEST(ChildProcess, TerminateSessionReapsGrandchildren) {
  // The shell starts two background sleepers that ignore SIGTERM, like a
  // launcher whose ranks live in process groups of their own.
  auto child = ChildProcess::Spawn({"sh", "-c",
                                    "trap '' TERM; (trap '' TERM; sleep 60) & "
                                    "(trap '' TERM; sleep 60) & wait"},
                                   [](std::string_view, bool) {});
  ASSERT_TRUE(child.ok());
  pid_t sid = (*child)->pid();
  for (int i = 0; i < 200 && ProcessesInSession(sid).size() < 3; ++i) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_GE(ProcessesInSession(sid).size(), 3u);
  int killed = (*child)->TerminateSession(absl::Milliseconds(200));
  EXPECT_GE(killed, 1);
  EXPECT_TRUE(ProcessesInSession(sid).empty());
  EXPECT_TRUE((*child)->Poll().has_value());
}

TEST(ResourceLimits, Parse) {
  auto as = ParseResourceLimit("as=4GiB");
  ASSERT_TRUE(as.ok()) << as.status();
  EXPECT_EQ(as->resource, RLIMIT_AS);
  EXPECT_EQ(as->value, 4ull << 30);
  auto nofile = ParseResourceLimit("nofile=256");
  ASSERT_TRUE(nofile.ok());
  EXPECT_EQ(nofile->value, 256u);
  EXPECT_EQ(ParseResourceLimit("cpu=unlimited")->value, RLIM_INFINITY);
  EXPECT_THAT(ParseResourceLimit("heap=1").status().message(),
              HasSubstr("NAME one of"));
  EXPECT_THAT(ParseResourceLimit("cpu=lots").status().message(),
              HasSubstr("non-negative integer"));
  EXPECT_THAT(ParseResourceLimit("as=-1").status().message(),
              HasSubstr("size"));
}

// The limits reach the child (and what it starts), not the parent.
TEST(ChildProcess, SetsResourceLimitsInTheChildOnly) {
  rlimit before{};
  getrlimit(RLIMIT_NOFILE, &before);
  std::vector<ResourceLimit> limits = {*ParseResourceLimit("nofile=123"),
                                       *ParseResourceLimit("core=0")};
  std::vector<std::string> out;
  std::mutex mu;
  auto child = ChildProcess::Spawn(
      {"sh", "-c", "ulimit -n; ulimit -c; sh -c 'ulimit -Hn'"},
      [&](std::string_view line, bool is_err) {
        std::lock_guard<std::mutex> lock(mu);
        out.emplace_back(line);
      },
      nullptr, &limits);
  ASSERT_TRUE(child.ok()) << child.status();
  std::optional<int> status;
  for (int i = 0; i < 500 && !(status = (*child)->Poll()); ++i)
    absl::SleepFor(absl::Milliseconds(10));
  ASSERT_TRUE(status.has_value());
  (*child)->JoinReaders();
  EXPECT_THAT(out, ElementsAre("123", "0", "123"));
  rlimit after{};
  getrlimit(RLIMIT_NOFILE, &after);
  EXPECT_EQ(after.rlim_cur, before.rlim_cur);
  auto missing = ChildProcess::Spawn(
      {"no-such-program-here"}, [](std::string_view, bool) {}, nullptr,
      &limits);
  EXPECT_FALSE(missing.ok());
}

TEST(ChildProcess, MissingProgram) {
  auto child = ChildProcess::Spawn({"/nonexistent/program"},
                                   [](std::string_view, bool) {});
  EXPECT_FALSE(child.ok());
}

}  // namespace
}  // namespace ringmaster
