#include "coordinator/job_manager.h"

#include <algorithm>
#include <chrono>
#include <random>

#include "absl/strings/str_format.h"
#include "core/status_macros.h"

namespace ringmaster {
namespace {

std::string RandomHex(int bytes) {
  std::random_device rd;  // /dev/urandom on Linux
  std::string out;
  for (int i = 0; i < bytes; ++i) out += absl::StrFormat("%02x", rd() & 0xff);
  return out;
}

absl::Status CheckRank(const v1::Job& job, int rank) {
  if (rank < 0 || rank >= job.nranks()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("rank %d out of range (job %s has %d ranks)", rank,
                        job.job_id(), job.nranks()));
  }
  return absl::OkStatus();
}

}  // namespace

v1::Job JobSummary(const v1::Job& job) {
  v1::Job out = job;
  out.clear_plan();
  out.clear_cases();
  out.clear_worker_token();
  out.mutable_plan()->set_name(job.plan().name());
  out.mutable_plan()->set_source_path(job.plan().source_path());
  return out;
}

std::string NewJobId() {
  return absl::FormatTime("%Y%m%d-%H%M%S-", absl::Now(), absl::UTCTimeZone()) +
         RandomHex(3);
}

std::string NewToken() { return RandomHex(32); }

std::string NowRfc3339() {
  // Milliseconds: compare pairs interleaved runs by their start order, and
  // runs shorter than a second would tie at whole seconds.
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::Now(),
                          absl::UTCTimeZone());
}

JobManager::JobManager(Store* store, Options options)
    : store_(store), options_(options) {}

JobManager::JobRecord* JobManager::Find(const std::string& job_id) {
  auto it = jobs_.find(job_id);
  return it == jobs_.end() ? nullptr : &it->second;
}

void JobManager::Push(JobEvent event) {
  if (!options_.events) return;
  if (events_.size() >= options_.max_queued_events) events_.pop_front();
  events_.push_back(std::move(event));
  events_cv_.notify_all();
}

absl::Status JobManager::Persist(const v1::Job& job) {
  return store_->PutJob(job);
}

void JobManager::ResetRanks(JobRecord* rec) {
  rec->ranks.assign(rec->job.nranks(), RankStatus());
  for (int r = 0; r < rec->job.nranks(); ++r) rec->ranks[r].rank = r;
  rec->failed_result.reset();
  rec->rendezvous.assign(rec->job.nranks(), std::nullopt);
  rec->blob.clear();
  rec->published = 0;
}

absl::StatusOr<v1::Job> JobManager::CreateJob(
    const v1::Plan& plan, std::vector<v1::Case> cases, int nranks,
    std::vector<std::string> command_line) {
  v1::Job spec;
  *spec.mutable_plan() = plan;
  for (auto& c : cases) *spec.add_cases() = std::move(c);
  spec.set_nranks(nranks);
  for (auto& a : command_line) spec.add_command_line(std::move(a));
  bool duplicate = false;
  return CreateJob(std::move(spec), &duplicate);
}

absl::StatusOr<v1::Job> JobManager::CreateJob(v1::Job spec, bool* duplicate) {
  *duplicate = false;
  if (spec.nranks() < 1)
    return absl::InvalidArgumentError("a job needs at least one rank");
  const std::pair<std::string, std::string> request{spec.user(),
                                                    spec.request_id()};
  JobRecord record;
  v1::Job& job = record.job;
  job = std::move(spec);
  job.set_state(v1::JOB_QUEUED);
  job.set_attempt(1);
  job.set_created_at(NowRfc3339());
  job.set_worker_token(NewToken());
  if (job.max_attempts() < 1) job.set_max_attempts(1);
  v1::Attempt* a = job.add_attempts();
  a->set_attempt(1);
  a->set_state(v1::JOB_QUEUED);
  std::string job_id;
  {
    MutexLock lock(&mu_);
    if (!job.request_id().empty()) {
      // The same request again: its job, once that is durable.
      while (true) {
        auto it = requests_.find(request);
        if (it == requests_.end()) break;
        JobRecord* rec = Find(it->second);
        if (!rec) break;
        if (rec->durable) {
          *duplicate = true;
          return rec->job;
        }
        durable_cv_.wait(lock);
      }
    }
    job.set_job_id(NewJobId());
    while (jobs_.count(job.job_id())) job.set_job_id(NewJobId());
    job_id = job.job_id();
    record.order = next_order_++;
    record.durable = false;  // invisible to the scheduler until stored
    ResetRanks(&record);
    if (!job.request_id().empty()) requests_[request] = job_id;
    jobs_.emplace(job_id, record);
  }
  // Stored outside the lock: concurrent submissions share one commit.
  absl::Status stored = Persist(job);
  MutexLock lock(&mu_);
  if (!stored.ok()) {
    jobs_.erase(job_id);
    if (!job.request_id().empty()) requests_.erase(request);
    durable_cv_.notify_all();
    return stored;
  }
  Find(job_id)->durable = true;
  durable_cv_.notify_all();
  return job;
}

void JobManager::Adopt(const v1::Job& job) {
  JobRecord record;
  record.job = job;
  ResetRanks(&record);
  if (job.state() == v1::JOB_RUNNING || job.state() == v1::JOB_LAUNCHING) {
    // The workers may still be running: count the restart as their last
    // sign of life, so the lease starts now. Ranks that already reported
    // their end are done.
    for (auto& r : record.ranks) r.last_progress = absl::Now();
    record.started = absl::Now();
    if (auto finals = store_->RankFinals(job.job_id(), job.attempt());
        finals.ok()) {
      for (const auto& f : *finals) {
        if (f.rank < 0 || f.rank >= job.nranks()) continue;
        RankStatus& r = record.ranks[f.rank];
        r.final = true;
        r.registered = true;
        r.failure = f.failure;
      }
    }
    if (auto n = store_->CountResults(job.job_id(), job.attempt()); n.ok())
      record.job.set_results_received(*n);
  }
  MutexLock lock(&mu_);
  record.order = next_order_++;
  if (!job.request_id().empty())
    requests_[{job.user(), job.request_id()}] = job.job_id();
  jobs_[job.job_id()] = std::move(record);
}

absl::Status JobManager::RegisterLocked(JobRecord* rec,
                                        const v1::RegisterRequest& req,
                                        const std::string& node) {
  if (TerminalState(rec->job.state())) {
    return absl::FailedPreconditionError("job " + req.job_id() + " is over");
  }
  if (rec->job.state() == v1::JOB_QUEUED) {
    // Ranks started by other means may come before the scheduler admits
    // the job: UNAVAILABLE, so they retry.
    return absl::UnavailableError("job " + req.job_id() +
                                  " is not launched yet (queued)");
  }
  if (req.world_size() != rec->job.nranks()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("job %s has %d ranks, the worker says %d", req.job_id(),
                        rec->job.nranks(), req.world_size()));
  }
  RM_RETURN_IF_ERROR(CheckRank(rec->job, req.rank()));
  RankStatus& rank = rec->ranks[req.rank()];
  rank.registered = true;
  rank.host = req.fingerprint().host();
  rank.node = node.empty() ? rank.host : node;
  rank.pid = req.fingerprint().pid();
  rank.last_seen = absl::Now();
  rank.last_progress = rank.last_seen;
  ++rec->version;
  if (rec->job.state() == v1::JOB_LAUNCHING) {
    rec->job.set_state(v1::JOB_RUNNING);
    rec->job.mutable_attempts()->rbegin()->set_state(v1::JOB_RUNNING);
    rec->started = absl::Now();
    Persist(rec->job).IgnoreError();  // the state is re-persisted at the end
  }
  JobEvent ev;
  ev.type = JobEvent::Type::kRegistered;
  ev.job_id = req.job_id();
  ev.rank = req.rank();
  Push(std::move(ev));
  return absl::OkStatus();
}

v1::RegisterResponse JobManager::Registered(const JobRecord& rec) const {
  v1::RegisterResponse resp;
  *resp.mutable_job() = rec.job;
  resp.mutable_job()->clear_worker_token();
  resp.set_heartbeat_interval_ms(options_.heartbeat_interval_ms);
  return resp;
}

absl::StatusOr<v1::RegisterResponse> JobManager::Register(
    const v1::RegisterRequest& req) {
  MutexLock lock(&mu_);
  JobRecord* rec = Find(req.job_id());
  if (!rec) return absl::NotFoundError("unknown job " + req.job_id());
  RM_RETURN_IF_ERROR(RegisterLocked(rec, req));
  return Registered(*rec);
}

absl::StatusOr<v1::RegisterNodeResponse> JobManager::RegisterNode(
    const v1::RegisterNodeRequest& req) {
  if (req.ranks().empty())
    return absl::InvalidArgumentError("register node: no ranks");
  if (req.node().size() > 256)
    return absl::InvalidArgumentError(
        "register node: node name over 256 characters");
  MutexLock lock(&mu_);
  JobRecord* rec = Find(req.job_id());
  if (!rec) return absl::NotFoundError("unknown job " + req.job_id());
  for (const v1::RegisterRequest& r : req.ranks()) {
    if (r.job_id() != req.job_id()) {
      return absl::InvalidArgumentError(
          "register node: a rank of another job in the request");
    }
    RM_RETURN_IF_ERROR(RegisterLocked(rec, r, req.node()));
  }
  v1::RegisterNodeResponse resp;
  *resp.mutable_registered() = Registered(*rec);
  return resp;
}

absl::Status JobManager::PublishLocked(JobRecord* rec,
                                       const v1::RendezvousRequest& req) {
  RM_RETURN_IF_ERROR(CheckRank(rec->job, req.rank()));
  if (req.attempt() != rec->job.attempt()) {
    return absl::FailedPreconditionError(
        absl::StrFormat("job %s is at attempt %d, the rank says %d",
                        req.job_id(), rec->job.attempt(), req.attempt()));
  }
  if (req.address().empty() || req.address().size() > 256 ||
      req.host().size() > 256) {
    return absl::InvalidArgumentError(
        "rendezvous: address must be 1-256 characters, host at most 256");
  }
  if (req.blob().size() > 4096)
    return absl::InvalidArgumentError("rendezvous: blob over 4 KiB");
  std::optional<v1::RendezvousPeer>& published = rec->rendezvous[req.rank()];
  if (published && published->address() != req.address()) {
    return absl::AlreadyExistsError(
        absl::StrFormat("rank %d of job %s already published %s", req.rank(),
                        req.job_id(), published->address()));
  }
  if (!published) {
    v1::RendezvousPeer peer;
    peer.set_host(req.host());
    peer.set_address(req.address());
    published = std::move(peer);
    if (req.rank() == 0) rec->blob = req.blob();
    ++rec->version;
    ++rec->published;
  }
  rec->ranks[req.rank()].last_seen = absl::Now();
  return absl::OkStatus();
}

v1::RendezvousResponse JobManager::RendezvousAnswer(const JobRecord& rec,
                                                    bool peers) const {
  v1::RendezvousResponse resp;
  const int waiting = static_cast<int>(rec.ranks.size()) - rec.published;
  resp.set_waiting_for(waiting);
  if (waiting > 0) {
    for (size_t i = 0; i < rec.rendezvous.size() && resp.missing_size() < 16;
         ++i)
      if (!rec.rendezvous[i]) resp.add_missing(static_cast<int>(i));
    return resp;
  }
  resp.set_ready(true);
  if (peers) {
    for (const auto& peer : rec.rendezvous) *resp.add_peers() = *peer;
  }
  resp.set_blob(rec.blob);
  return resp;
}

absl::StatusOr<v1::RendezvousResponse> JobManager::Rendezvous(
    const v1::RendezvousRequest& req) {
  MutexLock lock(&mu_);
  JobRecord* rec = Find(req.job_id());
  if (!rec) return absl::NotFoundError("unknown job " + req.job_id());
  if (TerminalState(rec->job.state())) {
    return absl::FailedPreconditionError("job " + req.job_id() + " is over");
  }
  RM_RETURN_IF_ERROR(PublishLocked(rec, req));
  return RendezvousAnswer(*rec, /*peers=*/true);
}

absl::StatusOr<v1::RendezvousResponse> JobManager::RendezvousNode(
    const v1::RendezvousNodeRequest& req) {
  MutexLock lock(&mu_);
  JobRecord* rec = Find(req.job_id());
  if (!rec) return absl::NotFoundError("unknown job " + req.job_id());
  if (TerminalState(rec->job.state())) {
    return absl::FailedPreconditionError("job " + req.job_id() + " is over");
  }
  for (const v1::RendezvousRequest& r : req.ranks()) {
    if (r.job_id() != req.job_id()) {
      return absl::InvalidArgumentError(
          "rendezvous node: a rank of another job in the request");
    }
    RM_RETURN_IF_ERROR(PublishLocked(rec, r));
  }
  return RendezvousAnswer(*rec, req.peers());
}

bool JobManager::HeartbeatLocked(JobRecord* rec,
                                 const v1::HeartbeatRequest& req,
                                 absl::Time now) {
  if (req.attempt() != 0 && req.attempt() != rec->job.attempt())
    return true;  // a stale attempt's rank: stop
  RankStatus& rank = rec->ranks[req.rank()];
  rank.last_seen = now;
  if (!rank.registered && rec->job.state() == v1::JOB_RUNNING) {
    // A rank of a job adopted after a restart: it registered with the
    // previous coordinator.
    rank.registered = true;
  }
  if (req.progress_seq() > rank.progress_seq ||
      req.entered_seq() > rank.entered_seq || req.ops() > rank.ops) {
    rank.progress_seq = std::max(rank.progress_seq, req.progress_seq());
    rank.entered_seq = std::max(rank.entered_seq, req.entered_seq());
    rank.ops = std::max(rank.ops, req.ops());
    rank.last_progress = now;
    ++rec->version;
  }
  return TerminalState(rec->job.state()) || rec->cancel_requested;
}

absl::StatusOr<v1::HeartbeatResponse> JobManager::Heartbeat(
    const v1::HeartbeatRequest& req) {
  MutexLock lock(&mu_);
  JobRecord* rec = Find(req.job_id());
  if (!rec) return absl::NotFoundError("unknown job " + req.job_id());
  RM_RETURN_IF_ERROR(CheckRank(rec->job, req.rank()));
  v1::HeartbeatResponse resp;
  resp.set_cancel(HeartbeatLocked(rec, req, absl::Now()));
  return resp;
}

absl::Status JobManager::PrepareReportLocked(const JobRecord& rec,
                                             v1::ReportResultsRequest* req) {
  RM_RETURN_IF_ERROR(CheckRank(rec.job, req->rank()));
  if (req->attempt() != rec.job.attempt()) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "stale attempt %d (current %d)", req->attempt(), rec.job.attempt()));
  }
  if (TerminalState(rec.job.state())) {
    return absl::FailedPreconditionError("job " + req->job_id() + " is over");
  }
  for (v1::Result& r : *req->mutable_results()) {
    if (r.job_id() != req->job_id() || r.idempotency_key().empty()) {
      return absl::InvalidArgumentError(
          "result without this job's id or an idempotency key");
    }
    if (r.attempt() != req->attempt()) {
      return absl::InvalidArgumentError(
          absl::StrFormat("result of attempt %d in a report of attempt %d",
                          r.attempt(), req->attempt()));
    }
    v1::Provenance* p = r.mutable_provenance();
    *p->mutable_command_line() = rec.job.command_line();
    if (p->started_at().empty()) p->set_started_at(rec.job.created_at());
    if (options_.annotate) options_.annotate(&r);
  }
  return absl::OkStatus();
}

void JobManager::NoteStoreFailure(const std::string& job_id,
                                  const absl::Status& status) {
  MutexLock lock(&mu_);
  JobRecord* rec = Find(job_id);
  if (rec && !rec->store_failure) {
    v1::Failure f;
    f.set_reason(v1::STORE_ERROR);
    f.set_rank(-1);
    f.set_detail(std::string(status.message()));
    rec->store_failure = f;
    ++rec->version;
  }
}

v1::ReportResultsResponse JobManager::ApplyReportLocked(
    JobRecord* rec, const v1::ReportResultsRequest& req,
    const Store::InsertCounts& counts) {
  const auto& results = req.results();
  if (rec) {
    rec->job.set_results_received(rec->job.results_received() +
                                  counts.accepted);
    rec->ranks[req.rank()].last_seen = absl::Now();
    if (counts.accepted > 0) {
      ++rec->version;
      rec->last_case = results.rbegin()->case_();
    }
    if (!rec->failed_result) {
      for (const auto& r : results) {
        if (r.status() == v1::FAILED) {
          rec->failed_result = r.failure();
          break;
        }
      }
    }
  }
  // Only newly stored results become events (a retried report is silent).
  if (counts.accepted > 0 && options_.events) {
    for (const auto& r : results) {
      JobEvent ev;
      ev.type = JobEvent::Type::kResult;
      ev.job_id = req.job_id();
      ev.rank = req.rank();
      ev.result = r;
      Push(std::move(ev));
    }
  }
  if (req.final() && rec) {
    RankStatus& rank = rec->ranks[req.rank()];
    rank.final = true;
    if (req.has_failure()) rank.failure = req.failure();
    ++rec->version;
    JobEvent ev;
    ev.type = JobEvent::Type::kRankFinal;
    ev.job_id = req.job_id();
    ev.rank = req.rank();
    if (req.has_failure()) ev.failure = req.failure();
    Push(std::move(ev));
  }
  v1::ReportResultsResponse resp;
  resp.set_accepted(counts.accepted);
  resp.set_duplicates(counts.duplicates);
  return resp;
}

Store::RankFinal JobManager::FinalMark(const v1::ReportResultsRequest& req) {
  Store::RankFinal mark;
  mark.job_id = req.job_id();
  mark.attempt = req.attempt();
  mark.rank = req.rank();
  if (req.has_failure()) mark.failure = req.failure();
  return mark;
}

absl::StatusOr<v1::ReportResultsResponse> JobManager::ReportResults(
    const v1::ReportResultsRequest& request) {
  v1::ReportResultsRequest req = request;  // stamped as stored
  {
    MutexLock lock(&mu_);
    JobRecord* rec = Find(req.job_id());
    if (!rec) return absl::NotFoundError("unknown job " + req.job_id());
    RM_RETURN_IF_ERROR(PrepareReportLocked(*rec, &req));
  }
  // Commit before acknowledging (the rank's end with its last results);
  // the store groups concurrent writers into one transaction.
  const Store::RankFinal final_mark = FinalMark(req);
  auto counts = store_->InsertReport(req.results(), req.rank(),
                                     req.final() ? &final_mark : nullptr);
  if (!counts.ok()) {
    NoteStoreFailure(req.job_id(), counts.status());
    return counts.status();
  }
  MutexLock lock(&mu_);
  return ApplyReportLocked(Find(req.job_id()), req, *counts);
}

absl::StatusOr<v1::NodeReportResponse> JobManager::NodeReport(
    const v1::NodeReportRequest& request) {
  absl::StatusOr<v1::NodeReportResponse> beat = NodeHeartbeats(request);
  if (!beat.ok() || request.reports().empty()) return beat;
  v1::NodeReportRequest req = request;  // stamped as stored
  absl::StatusOr<v1::NodeReportResponse> resp =
      std::move(NodeReports({&req}).front());
  if (resp.ok() && beat->cancel()) resp->set_cancel(true);
  return resp;
}

absl::StatusOr<bool> JobManager::TakeNodeHeartbeatsLocked(
    JobRecord* rec, const v1::NodeReportRequest& req, absl::Time now) {
  bool cancel = false;
  for (const v1::HeartbeatRequest& hb : req.heartbeats()) {
    if (hb.job_id() != req.job_id()) {
      return absl::InvalidArgumentError(
          "node report: a rank of another job in the request");
    }
    RM_RETURN_IF_ERROR(CheckRank(rec->job, hb.rank()));
    cancel = HeartbeatLocked(rec, hb, now) || cancel;
  }
  for (const v1::RankGone& g : req.gone()) {
    RM_RETURN_IF_ERROR(CheckRank(rec->job, g.rank()));
    RankStatus& rank = rec->ranks[g.rank()];
    if (!rank.final && !rank.gone) {
      rank.gone = g.detail().substr(0, 256);
      ++rec->version;
    }
  }
  return cancel || TerminalState(rec->job.state()) || rec->cancel_requested;
}

absl::StatusOr<v1::NodeReportResponse> JobManager::NodeHeartbeats(
    const v1::NodeReportRequest& req) {
  MutexLock lock(&mu_);
  JobRecord* rec = Find(req.job_id());
  if (!rec) return absl::NotFoundError("unknown job " + req.job_id());
  auto cancel = TakeNodeHeartbeatsLocked(rec, req, absl::Now());
  if (!cancel.ok()) return cancel.status();
  v1::NodeReportResponse resp;
  resp.set_cancel(*cancel);
  return resp;
}

// One node report's checks under mu_ (its heartbeats were taken): its
// results stamped, its final marks into `finals`, its answer so far into
// `resp`.
absl::Status JobManager::PrepareNodeReportLocked(
    v1::NodeReportRequest* req, std::vector<Store::RankFinal>* finals,
    v1::NodeReportResponse* resp) {
  JobRecord* rec = Find(req->job_id());
  if (!rec) return absl::NotFoundError("unknown job " + req->job_id());
  finals->assign(req->reports_size(), {});
  for (int i = 0; i < req->reports_size(); ++i) {
    v1::ReportResultsRequest* rep = req->mutable_reports(i);
    if (rep->job_id() != req->job_id()) {
      return absl::InvalidArgumentError(
          "node report: a report of another job in the request");
    }
    RM_RETURN_IF_ERROR(PrepareReportLocked(*rec, rep));
    if (rep->final()) (*finals)[i] = FinalMark(*rep);
  }
  resp->set_cancel(TerminalState(rec->job.state()) || rec->cancel_requested);
  return absl::OkStatus();
}

std::vector<absl::StatusOr<v1::NodeReportResponse>> JobManager::NodeReports(
    const std::vector<v1::NodeReportRequest*>& reqs) {
  const size_t n = reqs.size();
  std::vector<absl::StatusOr<v1::NodeReportResponse>> out(
      n, v1::NodeReportResponse());
  std::vector<std::vector<Store::RankFinal>> finals(n);
  // The lock is taken per request, not for the whole batch: heartbeats
  // taken meanwhile on other threads wait for one report, not for all.
  size_t reports = 0;
  for (size_t k = 0; k < n; ++k) {
    MutexLock lock(&mu_);
    absl::Status s = PrepareNodeReportLocked(reqs[k], &finals[k], &*out[k]);
    if (!s.ok()) out[k] = s;
    reports += reqs[k]->reports_size();
  }
  // Every accepted report's results in one transaction, before answering.
  std::vector<Store::ReportPart> parts;
  parts.reserve(reports);
  for (size_t k = 0; k < n; ++k) {
    if (!out[k].ok()) continue;
    const v1::NodeReportRequest& req = *reqs[k];
    for (int i = 0; i < req.reports_size(); ++i) {
      const v1::ReportResultsRequest& rep = req.reports(i);
      parts.push_back(
          {&rep.results(), rep.rank(), rep.final() ? &finals[k][i] : nullptr});
    }
  }
  if (parts.empty()) return out;
  auto counts = store_->InsertReports(parts);
  if (!counts.ok()) {
    for (size_t k = 0; k < n; ++k) {
      if (!out[k].ok() || reqs[k]->reports().empty()) continue;
      NoteStoreFailure(reqs[k]->job_id(), counts.status());
      out[k] = counts.status();
    }
    return out;
  }
  size_t part = 0;
  for (size_t k = 0; k < n; ++k) {
    if (!out[k].ok()) continue;
    const v1::NodeReportRequest& req = *reqs[k];
    MutexLock lock(&mu_);
    JobRecord* rec = Find(req.job_id());
    for (int i = 0; i < req.reports_size(); ++i, ++part) {
      *out[k]->add_reports() =
          ApplyReportLocked(rec, req.reports(i), (*counts)[part]);
    }
  }
  return out;
}

absl::StatusOr<v1::Job> JobManager::GetJob(const std::string& job_id) {
  {
    MutexLock lock(&mu_);
    if (JobRecord* rec = Find(job_id)) return rec->job;
  }
  return store_->GetJob(job_id);
}

absl::StatusOr<std::vector<v1::Result>> JobManager::QueryResults(
    const std::string& job_id, int64_t after_seq, int limit, v1::Status status,
    int attempt) {
  return store_->Results(job_id, after_seq, limit, status, attempt);
}

std::vector<v1::Job> JobManager::ListJobs(
    const std::vector<v1::JobState>& states, const std::string& user,
    int limit) {
  MutexLock lock(&mu_);
  std::vector<const JobRecord*> recs;
  for (const auto& [id, rec] : jobs_) {
    if (!rec.durable) continue;
    if (!user.empty() && rec.job.user() != user) continue;
    if (!states.empty() && std::find(states.begin(), states.end(),
                                     rec.job.state()) == states.end())
      continue;
    recs.push_back(&rec);
  }
  std::sort(recs.begin(), recs.end(),
            [](const JobRecord* a, const JobRecord* b) {
              return a->order > b->order;
            });
  if (limit > 0 && static_cast<int>(recs.size()) > limit) recs.resize(limit);
  std::vector<v1::Job> out;
  out.reserve(recs.size());
  for (const JobRecord* rec : recs) out.push_back(JobSummary(rec->job));
  return out;
}

bool JobManager::Finish(const std::string& job_id, v1::JobState state,
                        const v1::Failure& failure) {
  MutexLock lock(&mu_);
  JobRecord* rec = Find(job_id);
  if (!rec || TerminalState(rec->job.state())) return false;
  rec->job.set_state(state);
  if (state != v1::JOB_SUCCEEDED) *rec->job.mutable_failure() = failure;
  rec->job.set_finished_at(NowRfc3339());
  rec->job.set_launcher_sid(0);
  rec->job.set_slurm_job_id(0);
  if (rec->job.attempts_size() > 0) {
    v1::Attempt* a = &*rec->job.mutable_attempts()->rbegin();
    a->set_state(state);
    a->set_finished_at(rec->job.finished_at());
    if (state != v1::JOB_SUCCEEDED) *a->mutable_failure() = failure;
  }
  ++rec->version;
  Persist(rec->job).IgnoreError();
  JobEvent ev;
  ev.type = JobEvent::Type::kTerminal;
  ev.job_id = job_id;
  ev.state = state;
  ev.failure = failure;
  Push(std::move(ev));
  return true;
}

absl::Status JobManager::MarkLaunching(const std::string& job_id,
                                       int launcher_sid, int64_t slurm_job_id) {
  MutexLock lock(&mu_);
  JobRecord* rec = Find(job_id);
  if (!rec) return absl::NotFoundError("unknown job " + job_id);
  if (TerminalState(rec->job.state()))
    return absl::FailedPreconditionError("job " + job_id + " is over");
  rec->job.set_state(v1::JOB_LAUNCHING);
  rec->job.set_launcher_sid(launcher_sid);
  rec->job.set_slurm_job_id(slurm_job_id);
  if (rec->job.attempts_size() > 0) {
    v1::Attempt* a = &*rec->job.mutable_attempts()->rbegin();
    a->set_state(v1::JOB_LAUNCHING);
    a->set_started_at(NowRfc3339());
    a->set_slurm_job_id(slurm_job_id);
  }
  rec->started = absl::Now();
  ++rec->version;
  return Persist(rec->job);
}

absl::Status JobManager::Requeue(const std::string& job_id,
                                 const v1::Failure& failure) {
  MutexLock lock(&mu_);
  JobRecord* rec = Find(job_id);
  if (!rec) return absl::NotFoundError("unknown job " + job_id);
  if (TerminalState(rec->job.state()))
    return absl::FailedPreconditionError("job " + job_id + " is over");
  if (rec->job.attempts_size() > 0) {
    v1::Attempt* a = &*rec->job.mutable_attempts()->rbegin();
    a->set_state(v1::JOB_FAILED);
    a->set_finished_at(NowRfc3339());
    *a->mutable_failure() = failure;
  }
  rec->job.set_attempt(rec->job.attempt() + 1);
  rec->job.set_state(v1::JOB_QUEUED);
  rec->job.set_launcher_sid(0);
  rec->job.set_slurm_job_id(0);
  v1::Attempt* next = rec->job.add_attempts();
  next->set_attempt(rec->job.attempt());
  next->set_state(v1::JOB_QUEUED);
  ResetRanks(rec);
  ++rec->version;
  return Persist(rec->job);
}

absl::Status JobManager::RequestCancel(const std::string& job_id) {
  MutexLock lock(&mu_);
  JobRecord* rec = Find(job_id);
  if (!rec) return absl::NotFoundError("unknown job " + job_id);
  if (TerminalState(rec->job.state())) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "job %s is already %s", job_id, v1::JobState_Name(rec->job.state())));
  }
  rec->cancel_requested = true;
  ++rec->version;
  return absl::OkStatus();
}

std::vector<RankStatus> JobManager::Ranks(const std::string& job_id) {
  MutexLock lock(&mu_);
  JobRecord* rec = Find(job_id);
  return rec ? rec->ranks : std::vector<RankStatus>{};
}

absl::StatusOr<JobSnapshot> JobManager::Snapshot(const std::string& job_id) {
  MutexLock lock(&mu_);
  JobRecord* rec = Find(job_id);
  if (!rec) return absl::NotFoundError("unknown job " + job_id);
  JobSnapshot s;
  s.job = JobSummary(rec->job);
  s.store_failure = rec->store_failure;
  s.cases = rec->job.cases_size();
  s.ranks = rec->ranks;
  s.cancel_requested = rec->cancel_requested;
  s.failed_result = rec->failed_result;
  s.version = rec->version;
  s.last_case = rec->last_case;
  return s;
}

std::vector<std::string> JobManager::JobsInState(v1::JobState state) {
  MutexLock lock(&mu_);
  std::vector<std::pair<uint64_t, std::string>> found;
  for (const auto& [id, rec] : jobs_) {
    if (rec.durable && rec.job.state() == state)
      found.emplace_back(rec.order, id);
  }
  std::sort(found.begin(), found.end());
  std::vector<std::string> out;
  for (auto& f : found) out.push_back(std::move(f.second));
  return out;
}

std::string JobManager::WorkerToken(const std::string& job_id) {
  MutexLock lock(&mu_);
  JobRecord* rec = Find(job_id);
  return rec ? rec->job.worker_token() : std::string();
}

int JobManager::CountUnfinished(const std::string& user) {
  MutexLock lock(&mu_);
  int n = 0;
  for (const auto& [id, rec] : jobs_) {
    n += rec.job.user() == user && !TerminalState(rec.job.state());
  }
  return n;
}

std::optional<v1::Job> JobManager::FindRequest(const std::string& user,
                                               const std::string& request_id) {
  MutexLock lock(&mu_);
  auto it = requests_.find({user, request_id});
  if (it == requests_.end()) return std::nullopt;
  JobRecord* rec = Find(it->second);
  if (!rec || !rec->durable) return std::nullopt;
  return JobSummary(rec->job);
}

bool JobManager::IsWorkerToken(const std::string& token) {
  MutexLock lock(&mu_);
  for (const auto& [id, rec] : jobs_) {
    if (!token.empty() && rec.job.worker_token() == token) return true;
  }
  return false;
}

std::optional<JobEvent> JobManager::NextEvent(absl::Duration timeout) {
  MutexLock lock(&mu_);
  const auto deadline =
      std::chrono::steady_clock::now() + absl::ToChronoNanoseconds(timeout);
  while (events_.empty()) {
    if (events_cv_.wait_until(lock, deadline) == std::cv_status::timeout) break;
  }
  if (events_.empty()) return std::nullopt;
  JobEvent ev = std::move(events_.front());
  events_.pop_front();
  return ev;
}

}  // namespace ringmaster
