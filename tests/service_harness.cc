#include "tests/service_harness.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <sstream>

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"

namespace ringmaster::testing {
namespace fs = std::filesystem;

int FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  int port = ntohs(addr.sin_port);
  close(fd);
  return port;
}

static double StatusKiB(pid_t pid, const std::string& key) {
  std::ifstream in(absl::StrFormat("/proc/%d/status", pid));
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key + ":", 0) == 0) {
      std::istringstream rest(line.substr(key.size() + 1));
      double kib = 0;
      rest >> kib;
      return kib;
    }
  }
  return 0;
}
double PeakRssMiB(pid_t pid) { return StatusKiB(pid, "VmHWM") / 1024; }
double RssMiB(pid_t pid) { return StatusKiB(pid, "VmRSS") / 1024; }

std::string ScratchDir(const std::string& name) {
  const char* base = std::getenv("TEST_TMPDIR");
  fs::path dir =
      fs::path(base ? base : fs::temp_directory_path().string()) /
      absl::StrFormat(
          "rm-%s-%d-%d", name, getpid(),
          static_cast<int>(absl::ToUnixMicros(absl::Now()) % 1000000));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir.string();
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

ServeProcess::ServeProcess(std::string data_dir, std::vector<std::string> extra,
                           int port)
    : data_dir_(std::move(data_dir)), port_(port > 0 ? port : FreePort()) {
  // RINGMASTER_TEST_BIN_DIR: another build's binary (what an older one
  // fails).
  const char* bin_dir = std::getenv("RINGMASTER_TEST_BIN_DIR");
  std::vector<std::string> argv = {
      std::string(bin_dir ? bin_dir : RINGMASTER_BIN_DIR) + "/ringmaster",
      "serve",
      "--listen",
      address(),
      "--data",
      data_dir_};
  argv.insert(argv.end(), extra.begin(), extra.end());
  auto child = ChildProcess::Spawn(argv, [this](std::string_view line, bool) {
    std::lock_guard<std::mutex> lock(mu_);
    out_.append(line.data(), line.size()).append("\n");
  });
  if (!child.ok()) return;
  child_ = std::move(*child);
  // Up when an admin call answers (NOT_FOUND for a made-up job); a TLS
  // listener when it accepts TCP connections.
  const bool tls =
      std::find(extra.begin(), extra.end(), "--tls-cert") != extra.end();
  absl::Time give_up = absl::Now() + absl::Seconds(20);
  while (absl::Now() < give_up) {
    if (child_->Poll()) return;
    std::string token = admin_token();
    if (tls && !token.empty()) {
      int fd = socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in addr{};
      addr.sin_family = AF_INET;
      addr.sin_port = htons(port_);
      addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      bool up =
          connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
      close(fd);
      if (up) {
        ok_ = true;
        return;
      }
    } else if (!token.empty()) {
      auto stub = Stub();
      v1::GetJobRequest req;
      req.set_job_id("probe");
      v1::GetJobResponse resp;
      auto ctx = Ctx(token, absl::Milliseconds(500));
      grpc::Status s = stub->GetJob(ctx.get(), req, &resp);
      if (s.error_code() == grpc::StatusCode::NOT_FOUND) {
        ok_ = true;
        return;
      }
    }
    absl::SleepFor(absl::Milliseconds(50));
  }
}

ServeProcess::~ServeProcess() {
  if (child_ && !child_->Poll()) Terminate();
  // The child's output readers append to out_ under mu_: end them before
  // those members go (they are destroyed before child_ otherwise).
  child_.reset();
}

std::string ServeProcess::admin_token() const {
  std::string t = ReadFile(data_dir_ + "/admin.token");
  while (!t.empty() && (t.back() == '\n' || t.back() == ' ')) t.pop_back();
  return t;
}

std::string ServeProcess::output() {
  std::lock_guard<std::mutex> lock(mu_);
  return out_;
}

bool ServeProcess::alive() { return child_ && !child_->Poll(); }

void ServeProcess::Kill9() {
  if (!child_) return;
  kill(child_->pid(), SIGKILL);
  while (!child_->Poll()) absl::SleepFor(absl::Milliseconds(5));
  child_->JoinReaders();
}

void ServeProcess::Terminate() {
  if (!child_) return;
  kill(child_->pid(), SIGTERM);
  absl::Time give_up = absl::Now() + absl::Seconds(10);
  while (!child_->Poll() && absl::Now() < give_up)
    absl::SleepFor(absl::Milliseconds(10));
  if (!child_->Poll()) Kill9();
  child_->JoinReaders();
}

std::unique_ptr<v1::Coordinator::Stub> ServeProcess::Stub() const {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 50);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 200);
  // Distinct channels, so clients do not share one connection.
  args.SetInt("rm.test.channel", rand());
  return v1::Coordinator::NewStub(grpc::CreateCustomChannel(
      address(), grpc::InsecureChannelCredentials(), args));
}

std::unique_ptr<grpc::ClientContext> Ctx(const std::string& token,
                                         absl::Duration deadline) {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(std::chrono::system_clock::now() +
                    absl::ToChronoMilliseconds(deadline));
  if (!token.empty()) ctx->AddMetadata("authorization", "Bearer " + token);
  return ctx;
}

v1::Job WaitFor(v1::Coordinator::Stub& stub, const std::string& token,
                const std::string& job_id, absl::Duration timeout,
                const std::function<bool(const v1::Job&)>& done) {
  absl::Time give_up = absl::Now() + timeout;
  v1::Job last;
  while (absl::Now() < give_up) {
    v1::GetJobRequest req;
    req.set_job_id(job_id);
    v1::GetJobResponse resp;
    auto ctx = Ctx(token, absl::Seconds(2));
    if (stub.GetJob(ctx.get(), req, &resp).ok()) {
      last = resp.job();
      if (done(last)) return last;
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  return last;
}

v1::Job WaitTerminal(v1::Coordinator::Stub& stub, const std::string& token,
                     const std::string& job_id, absl::Duration timeout) {
  return WaitFor(stub, token, job_id, timeout, [](const v1::Job& j) {
    return j.state() == v1::JOB_SUCCEEDED || j.state() == v1::JOB_FAILED ||
           j.state() == v1::JOB_CANCELLED;
  });
}

v1::Job WaitRunningWithResults(v1::Coordinator::Stub& stub,
                               const std::string& token,
                               const std::string& job_id,
                               absl::Duration timeout) {
  return WaitFor(stub, token, job_id, timeout, [](const v1::Job& j) {
    return j.state() == v1::JOB_RUNNING && j.results_received() > 0;
  });
}

absl::StatusOr<v1::SubmitPlanResponse> Submit(
    v1::Coordinator::Stub& stub, const std::string& token,
    const v1::SubmitPlanRequest& request) {
  v1::SubmitPlanResponse resp;
  auto ctx = Ctx(token);
  grpc::Status s = stub.SubmitPlan(ctx.get(), request, &resp);
  if (!s.ok()) return absl::UnknownError("SubmitPlan: " + s.error_message());
  return resp;
}

std::string PlanPath(const std::string& name) {
  return std::string(RINGMASTER_SOURCE_DIR) + "/tests/plans/" + name;
}

v1::SubmitPlanRequest HostSubmission(const std::string& path, int np) {
  v1::SubmitPlanRequest req;
  req.set_plan_yaml(ReadFile(path));
  req.set_plan_name(path);
  req.set_nranks(np);
  req.set_backend("host");
  return req;
}

std::string ReadPlan(const std::string& path) { return ReadFile(path); }

bool Alive(int pid) {
  if (pid <= 0 || kill(pid, 0) != 0) return false;
  std::string stat = ReadFile(absl::StrFormat("/proc/%d/stat", pid));
  auto close = stat.rfind(')');
  return close == std::string::npos || close + 2 >= stat.size() ||
         stat[close + 2] != 'Z';
}

int ProcessesMentioning(const std::string& needle) {
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.empty() || !std::isdigit(static_cast<unsigned char>(name[0])))
      continue;
    std::string cmd = ReadFile(e.path().string() + "/cmdline");
    std::replace(cmd.begin(), cmd.end(), '\0', ' ');
    std::string stat = ReadFile(e.path().string() + "/stat");
    auto close = stat.rfind(')');
    if (close != std::string::npos && close + 2 < stat.size() &&
        stat[close + 2] == 'Z')
      continue;
    if (cmd.find(needle) != std::string::npos) ++n;
  }
  return n;
}

int EntriesBelow(const std::string& dir) {
  int n = 0;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, ec);
       !ec && it != std::filesystem::recursive_directory_iterator();
       it.increment(ec)) {
    ++n;
  }
  return n;
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(std::ceil(p / 100.0 * v.size()));
  return v[std::min(v.size() - 1, i == 0 ? 0 : i - 1)];
}

void Figure(const std::string& id, const std::string& text, bool pass) {
  std::cout << "FIGURE " << id << " " << text << " => "
            << (pass ? "PASS" : "FAIL") << std::endl;
}

}  // namespace ringmaster::testing
