// Jobs and their ranks: the coordinator's logic, independent of gRPC.
//
// The gRPC server (server.h) is a thin adapter over this class; the
// embedded coordinator of `ringmaster run` reads its event queue for the
// console, `ringmaster serve` (service.h) schedules its jobs, and both
// follow a job through a JobSupervisor (supervisor.h). Thread-safe: one
// lock (core/mutex.h) guards the jobs and the event queue.
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
#include "core/mutex.h"
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
  // From its fingerprint: where it runs (the rest of the fingerprint is the
  // ranks' own business; a snapshot of a large job copies every rank).
  std::string host;
  // The node whose leader registered it (RegisterNode), else its host: the
  // ranks whose heartbeats share one relay.
  std::string node;
  int32_t pid = 0;
  int64_t progress_seq = -1;  // last case finished
  int64_t entered_seq = -1;   // case the rank is in
  int64_t ops = 0;            // operations completed
  absl::Time last_seen = absl::InfinitePast();
  // When progress_seq, entered_seq or ops last changed (or registration).
  absl::Time last_progress = absl::InfinitePast();
  bool final = false;
  v1::Failure failure;  // from the rank's final report, when it failed
  // Its node leader saw the process end before its final report (why).
  std::optional<std::string> gone;
};

// What a job's supervisor needs to decide its fate, read in one lock.
struct JobSnapshot {
  v1::Job job;  // without plan and cases
  int cases = 0;
  std::vector<RankStatus> ranks;
  bool cancel_requested = false;
  std::optional<v1::Failure> failed_result;  // first FAILED result's failure
  // Results the store refused (a full disk): STORE_ERROR, naming the path.
  std::optional<v1::Failure> store_failure;
  uint64_t version = 0;  // grows with every visible change
  v1::Case last_case;    // of the latest stored result
};

// A job's fields without its plan and cases (for listings and streams).
v1::Job JobSummary(const v1::Job& job);

class JobManager {
 public:
  struct Options {
    int heartbeat_interval_ms = 500;
    size_t max_queued_events = 1 << 20;  // oldest dropped beyond this
    bool events = true;  // false: no event queue (the service polls)
    // Called on every accepted result before it is stored (e.g. to label it
    // with NCCL's algorithm choice). Must be thread-safe; may be empty.
    std::function<void(v1::Result*)> annotate;
  };
  // `store` must outlive the manager.
  JobManager(Store* store, Options options);
  explicit JobManager(Store* store) : JobManager(store, Options()) {}

  // Creates a QUEUED job with a fresh id and worker token and stores it.
  absl::StatusOr<v1::Job> CreateJob(const v1::Plan& plan,
                                    std::vector<v1::Case> cases, int nranks,
                                    std::vector<std::string> command_line);
  // The same from a prepared job (plan, cases, nranks, user, request_id,
  // limits, env, launcher set by the caller). A request id seen before for
  // the same user returns that job with `*duplicate` set.
  absl::StatusOr<v1::Job> CreateJob(v1::Job spec, bool* duplicate);
  // Takes over jobs found in the store at start (after a restart): queued
  // ones wait for admission again, launched ones for their workers.
  void Adopt(const v1::Job& job);

  // Worker calls. Errors use gRPC-compatible codes: NotFound (unknown job),
  // InvalidArgument (bad rank), FailedPrecondition (job over, stale attempt).
  absl::StatusOr<v1::RegisterResponse> Register(
      const v1::RegisterRequest& request);
  // Records where a bootstrapping rank listens; answers every rank's
  // address once all ranks of the current attempt have published.
  absl::StatusOr<v1::RendezvousResponse> Rendezvous(
      const v1::RendezvousRequest& request);
  absl::StatusOr<v1::HeartbeatResponse> Heartbeat(
      const v1::HeartbeatRequest& request);
  absl::StatusOr<v1::ReportResultsResponse> ReportResults(
      const v1::ReportResultsRequest& request);
  // Node leader calls: each rank's part as the call above would take it,
  // under one lock; a node's reports are stored in one transaction.
  absl::StatusOr<v1::RegisterNodeResponse> RegisterNode(
      const v1::RegisterNodeRequest& request);
  absl::StatusOr<v1::RendezvousResponse> RendezvousNode(
      const v1::RendezvousNodeRequest& request);
  absl::StatusOr<v1::NodeReportResponse> NodeReport(
      const v1::NodeReportRequest& request);
  // A node report's heartbeats and gone marks alone, taken at once (its
  // reports may wait for a commit; liveness must not): the answer without
  // reports (cancel), or the error that fails the whole report.
  absl::StatusOr<v1::NodeReportResponse> NodeHeartbeats(
      const v1::NodeReportRequest& request);
  // The reports of several nodes' messages (of any jobs) whose heartbeats
  // NodeHeartbeats took: each checked on its own (an error answers that
  // request only), the results of all of them stamped in place and stored
  // in one transaction; an answer per request, in order.
  std::vector<absl::StatusOr<v1::NodeReportResponse>> NodeReports(
      const std::vector<v1::NodeReportRequest*>& requests);

  // User calls.
  absl::StatusOr<v1::Job> GetJob(const std::string& job_id);
  absl::StatusOr<std::vector<v1::Result>> QueryResults(
      const std::string& job_id, int64_t after_seq, int limit,
      v1::Status status = v1::STATUS_UNSPECIFIED, int attempt = 0);

  // Jobs newest first; `user` empty = everyone's.
  std::vector<v1::Job> ListJobs(const std::vector<v1::JobState>& states,
                                const std::string& user, int limit);

  // Moves the job to a terminal state; the first call wins (returns false
  // when the job was already terminal or is unknown).
  bool Finish(const std::string& job_id, v1::JobState state,
              const v1::Failure& failure);
  // Marks a launched attempt (LAUNCHING, with the launcher's session id).
  absl::Status MarkLaunching(const std::string& job_id, int launcher_sid,
                             int64_t slurm_job_id = 0);
  // Ends the current attempt with `failure` and queues the next one: its
  // ranks start afresh and the old attempt's late writes are rejected.
  absl::Status Requeue(const std::string& job_id, const v1::Failure& failure);
  // Asks the job's supervisor to cancel it; heartbeats answer cancel.
  // NotFound for an unknown job, FailedPrecondition when it is over.
  absl::Status RequestCancel(const std::string& job_id);

  std::vector<RankStatus> Ranks(const std::string& job_id);
  absl::StatusOr<JobSnapshot> Snapshot(const std::string& job_id);
  absl::StatusOr<int64_t> CountResults(const std::string& job_id, int attempt) {
    return store_->CountResults(job_id, attempt);
  }
  // A user's jobs that are not over yet.
  int CountUnfinished(const std::string& user);
  // The job a (user, request id) pair created, if any.
  std::optional<v1::Job> FindRequest(const std::string& user,
                                     const std::string& request_id);
  // Ids of jobs in `state`, oldest first.
  std::vector<std::string> JobsInState(v1::JobState state);
  // The worker token of a job (empty when unknown).
  std::string WorkerToken(const std::string& job_id);
  // True when `token` is some job's worker token.
  bool IsWorkerToken(const std::string& token);

  // The next event, waiting up to `timeout`.
  std::optional<JobEvent> NextEvent(absl::Duration timeout);

 private:
  struct JobRecord {
    v1::Job job;
    std::vector<RankStatus> ranks;
    absl::Time started = absl::InfinitePast();
    bool cancel_requested = false;
    std::optional<v1::Failure> store_failure;
    std::optional<v1::Failure> failed_result;
    uint64_t version = 0;
    uint64_t order = 0;   // creation order
    bool durable = true;  // false while its first write is in flight
    v1::Case last_case;   // of the latest stored result
    // Coordinator bootstrap: where each rank listens, and rank 0's blob.
    std::vector<std::optional<v1::RendezvousPeer>> rendezvous;
    std::string blob;
    int published = 0;  // ranks of this attempt that published
  };
  // The worker calls' parts for one rank, under mu_.
  absl::Status RegisterLocked(JobRecord* rec, const v1::RegisterRequest& req,
                              const std::string& node = "")
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  v1::RegisterResponse Registered(const JobRecord& rec) const;
  absl::Status PublishLocked(JobRecord* rec, const v1::RendezvousRequest& req)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  v1::RendezvousResponse RendezvousAnswer(const JobRecord& rec,
                                          bool peers) const;
  // Returns whether the rank must stop.
  bool HeartbeatLocked(JobRecord* rec, const v1::HeartbeatRequest& req,
                       absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Checks the report's results and stamps them (in place) as stored.
  absl::Status PrepareReportLocked(const JobRecord& rec,
                                   v1::ReportResultsRequest* req)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // After the store accepted a report (`rec` null when the job is gone).
  v1::ReportResultsResponse ApplyReportLocked(
      JobRecord* rec, const v1::ReportResultsRequest& req,
      const Store::InsertCounts& counts) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  static Store::RankFinal FinalMark(const v1::ReportResultsRequest& req);
  // A node report's heartbeats and gone marks: whether its ranks must stop.
  absl::StatusOr<bool> TakeNodeHeartbeatsLocked(
      JobRecord* rec, const v1::NodeReportRequest& req, absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status PrepareNodeReportLocked(v1::NodeReportRequest* req,
                                       std::vector<Store::RankFinal>* finals,
                                       v1::NodeReportResponse* resp)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void NoteStoreFailure(const std::string& job_id, const absl::Status& status);
  // Touches only `rec` (not yet, or still, in jobs_ under the caller's lock).
  static void ResetRanks(JobRecord* rec);
  JobRecord* Find(const std::string& job_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Push(JobEvent event) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The store has its own locks: called with or without mu_.
  absl::Status Persist(const v1::Job& job);

  Store* store_;
  Options options_;
  Mutex mu_;
  std::map<std::string, JobRecord> jobs_ ABSL_GUARDED_BY(mu_);
  // (user, request id) -> job id.
  std::map<std::pair<std::string, std::string>, std::string> requests_
      ABSL_GUARDED_BY(mu_);
  uint64_t next_order_ ABSL_GUARDED_BY(mu_) = 0;
  std::deque<JobEvent> events_ ABSL_GUARDED_BY(mu_);
  std::condition_variable_any events_cv_;
  std::condition_variable_any durable_cv_;
};

// "YYYYmmdd-HHMMSS-xxxxxx" (UTC time plus random hex).
std::string NewJobId();
// 32 random bytes, hex.
std::string NewToken();
// RFC 3339 UTC, second precision.
std::string NowRfc3339();

}  // namespace ringmaster

#endif  // RINGMASTER_COORDINATOR_JOB_MANAGER_H_
