#include "coordinator/job_manager.h"

#include <random>

#include "absl/strings/str_format.h"
#include "core/status_macros.h"

namespace ringmaster {
namespace {

bool Terminal(v1::JobState s) {
  return s == v1::JOB_SUCCEEDED || s == v1::JOB_FAILED ||
         s == v1::JOB_CANCELLED;
}

std::string RandomHex(int bytes) {
  std::random_device rd;  // /dev/urandom on Linux
  std::string out;
  for (int i = 0; i < bytes; ++i) out += absl::StrFormat("%02x", rd() & 0xff);
  return out;
}

}  // namespace

std::string NewJobId() {
  return absl::FormatTime("%Y%m%d-%H%M%S-", absl::Now(), absl::UTCTimeZone()) +
         RandomHex(3);
}

std::string NewToken() { return RandomHex(32); }

std::string NowRfc3339() {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::Now(),
                          absl::UTCTimeZone());
}

JobManager::JobManager(Store* store, Options options)
    : store_(store), options_(options) {}

JobManager::JobRecord* JobManager::Find(const std::string& job_id) {
  auto it = jobs_.find(job_id);
  return it == jobs_.end() ? nullptr : &it->second;
}

void JobManager::Push(JobEvent event) {
  if (events_.size() >= options_.max_queued_events) events_.pop_front();
  events_.push_back(std::move(event));
  events_cv_.notify_all();
}

absl::Status JobManager::Persist(const v1::Job& job) {
  return store_->PutJob(job);
}

absl::StatusOr<v1::Job> JobManager::CreateJob(
    const v1::Plan& plan, std::vector<v1::Case> cases, int nranks,
    std::vector<std::string> command_line) {
  if (nranks < 1)
    return absl::InvalidArgumentError("a job needs at least one rank");
  JobRecord record;
  v1::Job& job = record.job;
  job.set_job_id(NewJobId());
  job.set_state(v1::JOB_PENDING);
  *job.mutable_plan() = plan;
  for (auto& c : cases) *job.add_cases() = std::move(c);
  job.set_nranks(nranks);
  job.set_attempt(1);
  job.set_created_at(NowRfc3339());
  for (auto& a : command_line) job.add_command_line(std::move(a));
  record.ranks.resize(nranks);
  for (int r = 0; r < nranks; ++r) record.ranks[r].rank = r;
  std::lock_guard<std::mutex> lock(mu_);
  RM_RETURN_IF_ERROR(Persist(job));
  v1::Job copy = job;
  jobs_.emplace(job.job_id(), std::move(record));
  return copy;
}

absl::StatusOr<v1::RegisterResponse> JobManager::Register(
    const v1::RegisterRequest& req) {
  std::lock_guard<std::mutex> lock(mu_);
  JobRecord* rec = Find(req.job_id());
  if (!rec) return absl::NotFoundError("unknown job " + req.job_id());
  if (Terminal(rec->job.state())) {
    return absl::FailedPreconditionError("job " + req.job_id() + " is over");
  }
  if (req.world_size() != rec->job.nranks()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("job %s has %d ranks, the worker says %d", req.job_id(),
                        rec->job.nranks(), req.world_size()));
  }
  if (req.rank() < 0 || req.rank() >= rec->job.nranks()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("rank %d out of range", req.rank()));
  }
  RankStatus& rank = rec->ranks[req.rank()];
  rank.registered = true;
  rank.fingerprint = req.fingerprint();
  rank.last_seen = absl::Now();
  if (rec->job.state() == v1::JOB_PENDING) {
    rec->job.set_state(v1::JOB_RUNNING);
    rec->started = absl::Now();
    Persist(rec->job).IgnoreError();  // the state is re-persisted at the end
  }
  JobEvent ev;
  ev.type = JobEvent::Type::kRegistered;
  ev.job_id = req.job_id();
  ev.rank = req.rank();
  Push(std::move(ev));
  v1::RegisterResponse resp;
  *resp.mutable_job() = rec->job;
  resp.set_heartbeat_interval_ms(options_.heartbeat_interval_ms);
  return resp;
}

absl::StatusOr<v1::HeartbeatResponse> JobManager::Heartbeat(
    const v1::HeartbeatRequest& req) {
  std::lock_guard<std::mutex> lock(mu_);
  JobRecord* rec = Find(req.job_id());
  if (!rec) return absl::NotFoundError("unknown job " + req.job_id());
  v1::HeartbeatResponse resp;
  if (req.rank() < 0 || req.rank() >= rec->job.nranks()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("rank %d out of range", req.rank()));
  }
  RankStatus& rank = rec->ranks[req.rank()];
  rank.last_seen = absl::Now();
  rank.progress_seq = std::max(rank.progress_seq, req.progress_seq());
  resp.set_cancel(Terminal(rec->job.state()));
  return resp;
}

absl::StatusOr<v1::ReportResultsResponse> JobManager::ReportResults(
    const v1::ReportResultsRequest& req) {
  std::vector<v1::Result> results;
  {
    std::lock_guard<std::mutex> lock(mu_);
    JobRecord* rec = Find(req.job_id());
    if (!rec) return absl::NotFoundError("unknown job " + req.job_id());
    if (req.rank() < 0 || req.rank() >= rec->job.nranks()) {
      return absl::InvalidArgumentError(
          absl::StrFormat("rank %d out of range", req.rank()));
    }
    if (req.attempt() != rec->job.attempt()) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "stale attempt %d (current %d)", req.attempt(), rec->job.attempt()));
    }
    if (Terminal(rec->job.state())) {
      return absl::FailedPreconditionError("job " + req.job_id() + " is over");
    }
    for (const v1::Result& r : req.results()) {
      if (r.job_id() != req.job_id() || r.idempotency_key().empty()) {
        return absl::InvalidArgumentError(
            "result without this job's id or an idempotency key");
      }
      v1::Result copy = r;
      v1::Provenance* p = copy.mutable_provenance();
      p->clear_command_line();
      for (const auto& a : rec->job.command_line()) p->add_command_line(a);
      if (p->started_at().empty()) p->set_started_at(rec->job.created_at());
      if (options_.annotate) options_.annotate(&copy);
      results.push_back(std::move(copy));
    }
  }
  // Commit before acknowledging; the store serializes writers itself.
  auto counts = store_->InsertResults(results, req.rank());
  if (!counts.ok()) return counts.status();
  std::lock_guard<std::mutex> lock(mu_);
  JobRecord* rec = Find(req.job_id());
  if (rec) {
    rec->job.set_results_received(rec->job.results_received() +
                                  counts->accepted);
    rec->ranks[req.rank()].last_seen = absl::Now();
  }
  // Only newly stored results become events (a retried report is silent).
  if (counts->accepted > 0) {
    for (auto& r : results) {
      JobEvent ev;
      ev.type = JobEvent::Type::kResult;
      ev.job_id = req.job_id();
      ev.rank = req.rank();
      ev.result = std::move(r);
      Push(std::move(ev));
    }
  }
  if (req.final() && rec) {
    rec->ranks[req.rank()].final = true;
    JobEvent ev;
    ev.type = JobEvent::Type::kRankFinal;
    ev.job_id = req.job_id();
    ev.rank = req.rank();
    if (req.has_failure()) ev.failure = req.failure();
    Push(std::move(ev));
  }
  v1::ReportResultsResponse resp;
  resp.set_accepted(counts->accepted);
  resp.set_duplicates(counts->duplicates);
  return resp;
}

absl::StatusOr<v1::Job> JobManager::GetJob(const std::string& job_id) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (JobRecord* rec = Find(job_id)) return rec->job;
  }
  return store_->GetJob(job_id);
}

absl::StatusOr<std::vector<v1::Result>> JobManager::QueryResults(
    const std::string& job_id, int64_t after_seq, int limit) {
  return store_->Results(job_id, after_seq, limit);
}

bool JobManager::Finish(const std::string& job_id, v1::JobState state,
                        const v1::Failure& failure) {
  std::lock_guard<std::mutex> lock(mu_);
  JobRecord* rec = Find(job_id);
  if (!rec || Terminal(rec->job.state())) return false;
  rec->job.set_state(state);
  if (state != v1::JOB_SUCCEEDED) *rec->job.mutable_failure() = failure;
  rec->job.set_finished_at(NowRfc3339());
  Persist(rec->job).IgnoreError();
  JobEvent ev;
  ev.type = JobEvent::Type::kTerminal;
  ev.job_id = job_id;
  ev.state = state;
  ev.failure = failure;
  Push(std::move(ev));
  return true;
}

std::vector<RankStatus> JobManager::Ranks(const std::string& job_id) {
  std::lock_guard<std::mutex> lock(mu_);
  JobRecord* rec = Find(job_id);
  return rec ? rec->ranks : std::vector<RankStatus>{};
}

std::optional<JobEvent> JobManager::NextEvent(absl::Duration timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  events_cv_.wait_for(lock, absl::ToChronoNanoseconds(timeout),
                      [this] { return !events_.empty(); });
  if (events_.empty()) return std::nullopt;
  JobEvent ev = std::move(events_.front());
  events_.pop_front();
  return ev;
}

}  // namespace ringmaster
