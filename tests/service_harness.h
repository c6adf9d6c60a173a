// Test harness for `ringmaster serve`: starts the real binary on a free
// loopback port with its own data folder, talks to it through the gRPC
// stubs, and reads its memory and logs from /proc.
#ifndef RINGMASTER_TESTS_SERVICE_HARNESS_H_
#define RINGMASTER_TESTS_SERVICE_HARNESS_H_

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "coordinator/launcher.h"
#include "ringmaster/v1/coordinator.grpc.pb.h"

namespace ringmaster::testing {

// A free TCP port on 127.0.0.1 (bound, then released).
int FreePort();

// Peak and current resident memory of `pid`, MiB (VmHWM / VmRSS).
double PeakRssMiB(pid_t pid);
double RssMiB(pid_t pid);

// A fresh scratch folder under the test's temporary directory.
std::string ScratchDir(const std::string& name);

std::string ReadFile(const std::string& path);

class ServeProcess {
 public:
  // Starts `ringmaster serve --listen 127.0.0.1:PORT --data DIR` plus
  // `extra` arguments; waits until it answers (or fails).
  ServeProcess(std::string data_dir, std::vector<std::string> extra,
               int port = 0);
  ~ServeProcess();
  bool ok() const { return ok_; }
  int port() const { return port_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  pid_t pid() const { return child_ ? child_->pid() : -1; }
  const std::string& data_dir() const { return data_dir_; }
  std::string admin_token() const;
  std::string output();  // stdout + stderr so far
  // Still running?
  bool alive();
  void Kill9();      // SIGKILL, waits for it
  void Terminate();  // SIGTERM, waits for it

  // A stub over a fresh plaintext channel.
  std::unique_ptr<v1::Coordinator::Stub> Stub() const;

 private:
  std::string data_dir_;
  int port_ = 0;
  bool ok_ = false;
  std::unique_ptr<ChildProcess> child_;
  std::mutex mu_;
  std::string out_;
};

// A client context with `token` and a deadline.
std::unique_ptr<grpc::ClientContext> Ctx(
    const std::string& token, absl::Duration deadline = absl::Seconds(10));

// Waits for the job to reach a terminal state; returns it (or the last
// seen state at the deadline).
v1::Job WaitTerminal(v1::Coordinator::Stub& stub, const std::string& token,
                     const std::string& job_id, absl::Duration timeout);
// Waits until the job runs and has stored a result; returns it (or the last
// seen state at the deadline).
v1::Job WaitRunningWithResults(v1::Coordinator::Stub& stub,
                               const std::string& token,
                               const std::string& job_id,
                               absl::Duration timeout);

// SubmitPlan with `token`; the error names the gRPC status.
absl::StatusOr<v1::SubmitPlanResponse> Submit(
    v1::Coordinator::Stub& stub, const std::string& token,
    const v1::SubmitPlanRequest& request);

std::string PlanPath(const std::string& name);  // tests/plans/NAME

// A submission of the plan file at `path` on `np` host ranks.
v1::SubmitPlanRequest HostSubmission(const std::string& path, int np);
std::string ReadPlan(const std::string& path);

// The n-th percentile (0..100) of `v` (copied and sorted).
double Percentile(std::vector<double> v, double p);

// Alive and not a zombie (a zombie holds nothing but its pid, and in a
// container without an init that reaps, orphans' zombies stay).
bool Alive(int pid);

// Live processes whose command line mentions `needle` (e.g. a job id).
int ProcessesMentioning(const std::string& needle);

// Files and folders below `dir` (0 when it is missing).
int EntriesBelow(const std::string& dir);

// Prints "FIGURE id key=value ..." lines the CI summary collects.
void Figure(const std::string& id, const std::string& text, bool pass);

}  // namespace ringmaster::testing

#endif  // RINGMASTER_TESTS_SERVICE_HARNESS_H_
