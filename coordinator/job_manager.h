// Jobs and their ranks: the coordinator's logic, independent of gRPC.
//
// The gRPC service (service.h) is a thin adapter over this class; the
// embedded coordinator of `ringmaster run` drives it directly and reads its
// event queue. Thread-safe. (std::mutex rather than absl::Mutex: Debian's
// Abseil is not built for ThreadSanitizer, which then cannot see its locks.)
#ifndef RINGMASTER_COORDINATOR_JOB_MANAGER_H_
#define RINGMASTER_COORDINATOR_JOB_MANAGER_H_

#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "coordinator/store.h"
#include "ringmaster/v1/coordinator.pb.h"

namespace ringmaster {

struct JobEvent {
  enum class Type { kRegistered, kResult, kRankFinal, kTerminal };
  Type type = Type::kResult;
  std::string job_id;
  int rank = -1;
  v1::Result result;    // kResult
  v1::Failure failure;  // kRankFinal (when the rank failed), kTerminal
  v1::JobState state = v1::JOB_STATE_UNSPECIFIED;  // kTerminal
};

struct RankStatus {
  int rank = 0;
  bool registered = false;
  v1::Fingerprint fingerprint;
  int64_t progress_seq = -1;
  absl::Time last_seen = absl::InfinitePast();
  bool final = false;
};

class JobManager {
 public:
  struct Options {
    int heartbeat_interval_ms = 500;
    size_t max_queued_events = 1 << 20;  // oldest dropped beyond this
    // Called on every accepted result before it is stored (e.g. to label it
    // with NCCL's algorithm choice). Must be thread-safe; may be empty.
    std::function<void(v1::Result*)> annotate;
  };
  // `store` must outlive the manager.
  JobManager(Store* store, Options options);
  explicit JobManager(Store* store) : JobManager(store, Options()) {}

  // Creates a PENDING job with a fresh id and stores it.
  absl::StatusOr<v1::Job> CreateJob(const v1::Plan& plan,
                                    std::vector<v1::Case> cases, int nranks,
                                    std::vector<std::string> command_line);

  // Worker calls. Errors use gRPC-compatible codes: NotFound (unknown job),
  // InvalidArgument (bad rank), FailedPrecondition (job over, stale attempt).
  absl::StatusOr<v1::RegisterResponse> Register(
      const v1::RegisterRequest& request);
  absl::StatusOr<v1::HeartbeatResponse> Heartbeat(
      const v1::HeartbeatRequest& request);
  absl::StatusOr<v1::ReportResultsResponse> ReportResults(
      const v1::ReportResultsRequest& request);

  // User calls.
  absl::StatusOr<v1::Job> GetJob(const std::string& job_id);
  absl::StatusOr<std::vector<v1::Result>> QueryResults(
      const std::string& job_id, int64_t after_seq, int limit);

  // Moves the job to a terminal state; the first call wins (returns false
  // when the job was already terminal or is unknown).
  bool Finish(const std::string& job_id, v1::JobState state,
              const v1::Failure& failure);

  std::vector<RankStatus> Ranks(const std::string& job_id);

  // The next event, waiting up to `timeout`.
  std::optional<JobEvent> NextEvent(absl::Duration timeout);

 private:
  struct JobRecord {
    v1::Job job;
    std::vector<RankStatus> ranks;
    absl::Time started = absl::InfinitePast();
  };
  JobRecord* Find(const std::string& job_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Push(JobEvent event) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status Persist(const v1::Job& job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  Store* store_;
  Options options_;
  std::mutex mu_;
  std::map<std::string, JobRecord> jobs_ ABSL_GUARDED_BY(mu_);
  std::deque<JobEvent> events_ ABSL_GUARDED_BY(mu_);
  std::condition_variable events_cv_;
};

// "YYYYmmdd-HHMMSS-xxxxxx" (UTC time plus random hex).
std::string NewJobId();
// 32 random bytes, hex.
std::string NewToken();
// RFC 3339 UTC, second precision.
std::string NowRfc3339();

}  // namespace ringmaster

#endif  // RINGMASTER_COORDINATOR_JOB_MANAGER_H_
