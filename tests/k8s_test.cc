// `ringmaster serve --launcher k8s` end to end, with tests/k8s/fake-kubectl
// standing in for a cluster: the coordinator writes the Secret, headless
// Service and Indexed Job, applies them, and the "pods" (local processes
// running the container's command with the container's env) start
// `ringmaster-worker run --bootstrap` with no MPI at all: ranks from
// JOB_COMPLETION_INDEX (two per pod through --local-ranks), peers found
// through the coordinator, collectives over TCP. Their results must match
// the same plan run under mpirun case by case. A cancelled job is deleted
// with kubectl and its pods end.
#include <gmock/gmock.h>
#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>

#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "tests/injection_check.h"
#include "tests/service_harness.h"

namespace ringmaster {
namespace {

namespace fs = std::filesystem;
using testing::Ctx;
using ::testing::HasSubstr;

struct Cluster {
  std::string state;
  std::vector<std::string> serve_args;
};

// A fake cluster's state folder, and the serve arguments that use it.
Cluster FakeCluster(const std::string& name) {
  Cluster c;
  c.state = testing::ScratchDir(name);
  setenv("FAKE_KUBECTL_STATE", c.state.c_str(), 1);
  setenv("FAKE_KUBECTL_WORKER",
         (std::string(RINGMASTER_BIN_DIR) + "/ringmaster-worker").c_str(), 1);
  c.serve_args = {
      "--launcher",
      "k8s",
      "--kubectl",
      std::string(RINGMASTER_SOURCE_DIR) + "/tests/k8s/fake-kubectl",
      "--k8s-image",
      "registry.example/ringmaster-worker:test",
      "--k8s-ranks-per-pod",
      "2",
      "--k8s-poll",
      "0.2"};
  return c;
}

// Every result of a run (`ringmaster run --out DIR`), from its JSON Lines.
std::vector<v1::Result> ReadJsonl(const std::string& out_dir) {
  std::vector<v1::Result> rows;
  for (const auto& entry : fs::recursive_directory_iterator(out_dir)) {
    if (entry.path().filename() != "results.jsonl") continue;
    std::ifstream in(entry.path());
    std::string line;
    while (std::getline(in, line)) {
      v1::Result r;
      if (google::protobuf::util::JsonStringToMessage(line, &r).ok())
        rows.push_back(std::move(r));
    }
  }
  return rows;
}

std::string Key(const v1::Result& r) {
  return absl::StrFormat("%d/%s/%d", r.case_().seq(), r.case_().spec_name(),
                         r.nranks());
}

bool ProcessAlive(int pid) { return pid > 0 && kill(pid, 0) == 0; }

// kubectl's calls so far, once they mention `text` (the coordinator reaps
// a job after it is over: its deletes come a moment later), or at 20 s.
std::string CallsOnce(const std::string& state, const std::string& text) {
  const absl::Time give_up = absl::Now() + absl::Seconds(20);
  std::string calls;
  while (true) {
    calls = testing::ReadFile(state + "/calls.jsonl");
    if (calls.find(text) != std::string::npos || absl::Now() > give_up)
      return calls;
    absl::SleepFor(absl::Milliseconds(50));
  }
}

TEST(K8sLaunch, IndexedJobPodsBootstrapWithoutMpiAndMatchMpiResults) {
  Cluster cluster = FakeCluster("k8s-bootstrap");
  const std::string data = testing::ScratchDir("k8s-serve");
  testing::ServeProcess serve(data, cluster.serve_args);
  ASSERT_TRUE(serve.ok()) << serve.output();
  const std::string admin = serve.admin_token();
  auto stub = serve.Stub();
  const std::string plan = testing::PlanPath("bootstrap.yaml");

  auto sub = testing::Submit(*stub, admin, testing::HostSubmission(plan, 4));
  ASSERT_TRUE(sub.ok()) << sub.status();
  const std::string job_id = sub->job().job_id();
  v1::Job done =
      testing::WaitTerminal(*stub, admin, job_id, absl::Seconds(120));
  ASSERT_EQ(done.state(), v1::JOB_SUCCEEDED)
      << done.failure().ShortDebugString() << "\n"
      << serve.output() << testing::ReadFile(cluster.state + "/calls.jsonl");

  v1::QueryResultsRequest q;
  q.set_job_id(job_id);
  q.set_after_seq(-1);
  v1::QueryResultsResponse tcp;
  {
    auto ctx = Ctx(admin);
    ASSERT_TRUE(stub->QueryResults(ctx.get(), q, &tcp).ok());
  }

  // What the coordinator applied: Secret + Service + Indexed Job, written
  // owner-only, and the token never on a command line.
  const std::string manifest_path =
      data + "/jobs/" + job_id + "/attempt-1.k8s.yaml";
  const std::string manifest = testing::ReadFile(manifest_path);
  EXPECT_THAT(manifest, HasSubstr("completionMode: Indexed"));
  EXPECT_THAT(manifest, HasSubstr("kind: Service"));
  EXPECT_THAT(manifest, HasSubstr("kind: Secret"));
  EXPECT_EQ(fs::status(manifest_path).permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write);
  // At the end the token's Secret is deleted; the Job stays for its logs.
  const std::string name = "ringmaster-" + job_id + "-1";
  const std::string calls =
      CallsOnce(cluster.state, "\"secret/" + name + "-token\"");
  EXPECT_THAT(calls, HasSubstr("\"apply\""));
  EXPECT_THAT(calls, HasSubstr("\"secret/" + name + "-token\""));
  EXPECT_THAT(calls, ::testing::Not(HasSubstr("\"job/" + name + "\"")));
  const auto at = manifest.find("token: \"");
  ASSERT_NE(at, std::string::npos);
  const std::string worker_token =
      manifest.substr(at + 8, manifest.find('"', at + 8) - at - 8);
  EXPECT_GE(worker_token.size(), 32u);
  EXPECT_THAT(calls, ::testing::Not(HasSubstr(worker_token)));
  std::string pod_log =
      testing::ReadFile(cluster.state + "/ringmaster-" + job_id + "-1-0.log");
  EXPECT_THAT(pod_log, HasSubstr("bootstrapped 4 ranks over TCP"));

  // The same plan under mpirun.
  const std::string out = testing::ScratchDir("k8s-mpi-run");
  auto mpi_run = RunAndCapture(
      {std::string(RINGMASTER_BIN_DIR) + "/ringmaster", "run", plan, "--np",
       "4", "--backend", "host", "--out", out, "--quiet"},
      nullptr, absl::Seconds(180));
  ASSERT_TRUE(mpi_run.ok());
  ASSERT_EQ(mpi_run->exit_code, 0) << mpi_run->err;
  std::vector<v1::Result> mpi = ReadJsonl(out);

  // Case by case: the same cases, every one OK and verified with nothing
  // wrong under both transports; training losses equal to float32
  // rounding (the reduction order differs) and both within the float64
  // check; the transports named in provenance.
  ASSERT_EQ(static_cast<size_t>(tcp.results_size()), mpi.size());
  std::map<std::string, const v1::Result*> by_key;
  for (const auto& r : mpi) by_key[Key(r)] = &r;
  int compared = 0, losses = 0;
  double worst_loss_diff = 0;
  for (const v1::Result& t : tcp.results()) {
    auto it = by_key.find(Key(t));
    ASSERT_NE(it, by_key.end()) << Key(t) << " only under TCP";
    const v1::Result& m = *it->second;
    SCOPED_TRACE(Key(t));
    EXPECT_EQ(t.status(), v1::OK) << t.failure().ShortDebugString();
    EXPECT_EQ(m.status(), v1::OK) << m.failure().ShortDebugString();
    EXPECT_EQ(t.wrong_elements(), m.wrong_elements());
    EXPECT_LE(t.wrong_elements(), 0);
    EXPECT_EQ(t.provenance().backend(), "host (TCP)");
    EXPECT_EQ(m.provenance().backend(), "host (MPI)");
    if (t.case_().bench() == v1::BENCH_TRAIN) {
      const double a = t.train().loss_last(), b = m.train().loss_last();
      const double diff = std::abs(a - b) / std::max(std::abs(b), 1e-30);
      worst_loss_diff = std::max(worst_loss_diff, diff);
      EXPECT_LT(diff, 1e-5) << a << " vs " << b;
      EXPECT_GE(t.train().loss_check(), 0);
      EXPECT_LT(t.train().loss_rel_error(), 1e-4);
      ++losses;
    }
    ++compared;
  }
  EXPECT_EQ(losses, 3) << "the 1-2-4 ladder";
  testing::Figure(
      "K8sBootstrap",
      absl::StrFormat("Indexed Job, 2 pods x 2 ranks, no MPI: %s, %d results; "
                      "%d cases equal to mpirun's (wrong elements 0), "
                      "training loss max rel diff %.1e",
                      v1::JobState_Name(done.state()), tcp.results_size(),
                      compared, worst_loss_diff),
      done.state() == v1::JOB_SUCCEEDED && compared == tcp.results_size());
}

TEST(K8sLaunch, CancelDeletesTheJobAndItsPodsEnd) {
  Cluster cluster = FakeCluster("k8s-cancel");
  const std::string data = testing::ScratchDir("k8s-serve-cancel");
  testing::ServeProcess serve(data, cluster.serve_args);
  ASSERT_TRUE(serve.ok()) << serve.output();
  const std::string admin = serve.admin_token();
  auto stub = serve.Stub();
  auto sub = testing::Submit(
      *stub, admin,
      testing::HostSubmission(testing::PlanPath("service-long.yaml"), 2));
  ASSERT_TRUE(sub.ok()) << sub.status();
  const std::string job_id = sub->job().job_id();
  const std::string name = "ringmaster-" + job_id + "-1";
  v1::Job running =
      testing::WaitRunningWithResults(*stub, admin, job_id, absl::Seconds(60));
  ASSERT_EQ(running.state(), v1::JOB_RUNNING) << serve.output();
  std::vector<int> pids;
  for (const auto& p :
       absl::StrSplit(testing::ReadFile(cluster.state + "/" + name + ".pids"),
                      ' ', absl::SkipWhitespace())) {
    pids.push_back(std::atoi(std::string(p).c_str()));
  }
  ASSERT_EQ(pids.size(), 1u) << "2 ranks in one pod of 2";
  const absl::Time cancel_at = absl::Now();
  {
    v1::CancelJobRequest c;
    c.set_job_id(job_id);
    v1::CancelJobResponse cr;
    auto ctx = Ctx(admin);
    ASSERT_TRUE(stub->CancelJob(ctx.get(), c, &cr).ok());
  }
  v1::Job cancelled =
      testing::WaitTerminal(*stub, admin, job_id, absl::Seconds(60));
  EXPECT_EQ(cancelled.state(), v1::JOB_CANCELLED);
  const std::string calls = CallsOnce(cluster.state, "\"job/" + name + "\"");
  const bool deleted =
      calls.find("\"job/" + name + "\"") != std::string::npos &&
      calls.find("\"service/" + name + "\"") != std::string::npos &&
      calls.find("\"secret/" + name + "-token\"") != std::string::npos;
  EXPECT_TRUE(deleted) << calls;
  bool gone = false;
  while (absl::Now() < cancel_at + absl::Seconds(30) && !gone) {
    gone = !ProcessAlive(pids[0]);
    if (!gone) absl::SleepFor(absl::Milliseconds(100));
  }
  EXPECT_TRUE(gone) << "the pod's process outlived the delete";
  testing::Figure(
      "K8sCancel",
      absl::StrFormat("%s after cancel; kubectl delete of job, service and "
                      "secret: %s; pod ended %.1f s after cancel",
                      v1::JobState_Name(cancelled.state()),
                      deleted ? "yes" : "NO",
                      absl::ToDoubleSeconds(absl::Now() - cancel_at)),
      cancelled.state() == v1::JOB_CANCELLED && gone && deleted);
}

// S6 (shared/RELIABILITY.md) through the Kubernetes launcher: env values
// full of shell metacharacters go into the manifest (YAML, written by
// yaml-cpp) and reach the pods' ranks byte for byte; kubectl's argv never
// holds them, and nothing runs: no marker file, no stray process.
TEST(S6_shell_metacharacters, NothingInjectedThroughKubectl) {
  Cluster cluster = FakeCluster("k8s-s6");
  const std::string data = testing::ScratchDir("k8s-s6-serve");
  const std::string marks = testing::ScratchDir("k8s-s6-marks");
  testing::ServeProcess serve(data, cluster.serve_args);
  ASSERT_TRUE(serve.ok()) << serve.output();
  const std::string admin = serve.admin_token();
  auto stub = serve.Stub();
  auto req = testing::HostSubmission(testing::PlanPath("bootstrap.yaml"), 4);
  req.set_request_id("$(touch " + marks + "/rid)");
  auto run = testing::RunHostile(*stub, admin, req, marks);
  ASSERT_TRUE(run.ok()) << run.status();
  const std::string calls = CallsOnce(cluster.state, "\"delete\"");
  // Every value holds the marker folder's path (a JSON-safe string): if
  // it shows in kubectl's recorded argv, a value got onto a command line.
  const int values_in_argv = calls.find(marks) != std::string::npos ? 1 : 0;
  testing::CheckNothingInjected("kubectl", run->job, run->results, run->values,
                                values_in_argv, marks);
}

}  // namespace
}  // namespace ringmaster
