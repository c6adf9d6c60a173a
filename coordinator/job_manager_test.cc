#include "coordinator/job_manager.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

namespace ringmaster {
namespace {

class JobManagerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto s = Store::Open(":memory:");
    ASSERT_TRUE(s.ok());
    store_ = std::move(*s);
    manager_ = std::make_unique<JobManager>(store_.get());
    v1::Plan plan;
    plan.set_name("p");
    std::vector<v1::Case> cases(3);
    for (int i = 0; i < 3; ++i) cases[i].set_seq(i);
    auto job = manager_->CreateJob(plan, cases, 2, {"ringmaster", "run"});
    ASSERT_TRUE(job.ok());
    job_ = *job;
    ASSERT_TRUE(manager_->MarkLaunching(job_.job_id(), 0).ok());
  }
  v1::Result Result(int seq) {
    v1::Result r;
    r.set_job_id(job_.job_id());
    r.set_attempt(1);
    r.mutable_case_()->set_seq(seq);
    r.set_idempotency_key(job_.job_id() + "/1/0/" + std::to_string(seq));
    return r;
  }
  std::unique_ptr<Store> store_;
  std::unique_ptr<JobManager> manager_;
  v1::Job job_;
};

TEST_F(JobManagerTest, RegisterReturnsCasesAndStartsTheJob) {
  EXPECT_EQ(job_.state(), v1::JOB_QUEUED);
  EXPECT_EQ(manager_->GetJob(job_.job_id())->state(), v1::JOB_LAUNCHING);
  v1::RegisterRequest req;
  req.set_job_id(job_.job_id());
  req.set_rank(1);
  req.set_world_size(2);
  req.mutable_fingerprint()->set_host("h1");
  auto resp = manager_->Register(req);
  ASSERT_TRUE(resp.ok()) << resp.status();
  EXPECT_EQ(resp->job().cases_size(), 3);
  EXPECT_EQ(resp->job().state(), v1::JOB_RUNNING);
  auto ranks = manager_->Ranks(job_.job_id());
  ASSERT_EQ(ranks.size(), 2u);
  EXPECT_TRUE(ranks[1].registered);
  EXPECT_FALSE(ranks[0].registered);
  EXPECT_EQ(ranks[1].host, "h1");
  auto ev = manager_->NextEvent(absl::ZeroDuration());
  ASSERT_TRUE(ev.has_value());
  EXPECT_EQ(ev->type, JobEvent::Type::kRegistered);
  EXPECT_EQ(ev->rank, 1);
}

// A node leader's calls: the node's ranks registered, published and
// reported in one call each, with the effects of the per-rank calls.
TEST_F(JobManagerTest, NodeCallsActForEveryRankOfTheNode) {
  v1::RegisterNodeRequest reg;
  reg.set_job_id(job_.job_id());
  reg.set_node("n0");
  for (int r = 0; r < 2; ++r) {
    v1::RegisterRequest* one = reg.add_ranks();
    one->set_job_id(job_.job_id());
    one->set_rank(r);
    one->set_world_size(2);
    one->mutable_fingerprint()->set_host("n0");
    one->mutable_fingerprint()->set_pid(100 + r);
  }
  auto registered = manager_->RegisterNode(reg);
  ASSERT_TRUE(registered.ok()) << registered.status();
  EXPECT_EQ(registered->registered().job().cases_size(), 3);
  auto ranks = manager_->Ranks(job_.job_id());
  ASSERT_EQ(ranks.size(), 2u);
  for (int r = 0; r < 2; ++r) {
    EXPECT_TRUE(ranks[r].registered);
    EXPECT_EQ(ranks[r].host, "n0");
    EXPECT_EQ(ranks[r].pid, 100 + r);
  }
  // A rank of another job in the request is refused, naming why.
  v1::RegisterNodeRequest stray = reg;
  stray.mutable_ranks(1)->set_job_id("other");
  EXPECT_THAT(manager_->RegisterNode(stray).status().message(),
              ::testing::HasSubstr("another job"));

  // The rendezvous: one call publishes both; the answer carries rank 0's
  // blob, and every address only when asked.
  v1::RendezvousNodeRequest meet;
  meet.set_job_id(job_.job_id());
  meet.set_attempt(1);
  for (int r = 0; r < 2; ++r) {
    v1::RendezvousRequest* one = meet.add_ranks();
    one->set_job_id(job_.job_id());
    one->set_rank(r);
    one->set_attempt(1);
    one->set_host("n0");
    one->set_address("10.0.0.1:" + std::to_string(4000 + r));
    if (r == 0) one->set_blob("nccl-id");
  }
  auto ready = manager_->RendezvousNode(meet);
  ASSERT_TRUE(ready.ok()) << ready.status();
  EXPECT_TRUE(ready->ready());
  EXPECT_EQ(ready->blob(), "nccl-id");
  EXPECT_EQ(ready->peers_size(), 0) << "peers not asked for";
  meet.set_peers(true);
  ready = manager_->RendezvousNode(meet);
  ASSERT_TRUE(ready.ok()) << ready.status();
  ASSERT_EQ(ready->peers_size(), 2);
  EXPECT_EQ(ready->peers(1).address(), "10.0.0.1:4001");

  // One report: both heartbeats, rank 1's results and rank 0's end, stored
  // together; a repeat of it stores nothing twice.
  v1::NodeReportRequest rep;
  rep.set_job_id(job_.job_id());
  for (int r = 0; r < 2; ++r) {
    v1::HeartbeatRequest* hb = rep.add_heartbeats();
    hb->set_job_id(job_.job_id());
    hb->set_rank(r);
    hb->set_attempt(1);
    hb->set_progress_seq(r);
  }
  v1::ReportResultsRequest* results = rep.add_reports();
  results->set_job_id(job_.job_id());
  results->set_rank(1);
  results->set_attempt(1);
  *results->add_results() = Result(0);
  *results->add_results() = Result(1);
  v1::ReportResultsRequest* end = rep.add_reports();
  end->set_job_id(job_.job_id());
  end->set_rank(0);
  end->set_attempt(1);
  end->set_final(true);
  auto answered = manager_->NodeReport(rep);
  ASSERT_TRUE(answered.ok()) << answered.status();
  EXPECT_FALSE(answered->cancel());
  ASSERT_EQ(answered->reports_size(), 2);
  EXPECT_EQ(answered->reports(0).accepted(), 2);
  EXPECT_EQ(answered->reports(1).accepted(), 0);
  ranks = manager_->Ranks(job_.job_id());
  EXPECT_EQ(ranks[0].progress_seq, 0);
  EXPECT_EQ(ranks[1].progress_seq, 1);
  EXPECT_TRUE(ranks[0].final);
  EXPECT_FALSE(ranks[1].final);
  EXPECT_EQ(*manager_->CountResults(job_.job_id(), 1), 2);
  auto finals = store_->RankFinals(job_.job_id(), 1);
  ASSERT_TRUE(finals.ok());
  ASSERT_EQ(finals->size(), 1u);
  EXPECT_EQ(finals->front().rank, 0);
  answered = manager_->NodeReport(rep);
  ASSERT_TRUE(answered.ok()) << answered.status();
  EXPECT_EQ(answered->reports(0).accepted(), 0);
  EXPECT_EQ(answered->reports(0).duplicates(), 2);

  // A rank its leader saw end is marked gone (the supervisor names it);
  // once the job is cancelled, the answer says stop.
  v1::NodeReportRequest gone;
  gone.set_job_id(job_.job_id());
  v1::RankGone* g = gone.add_gone();
  g->set_rank(1);
  g->set_detail("process 101 exited with status 9");
  ASSERT_TRUE(manager_->NodeReport(gone).ok());
  ranks = manager_->Ranks(job_.job_id());
  ASSERT_TRUE(ranks[1].gone.has_value());
  EXPECT_EQ(*ranks[1].gone, "process 101 exited with status 9");
  ASSERT_TRUE(manager_->RequestCancel(job_.job_id()).ok());
  answered = manager_->NodeReport(gone);
  ASSERT_TRUE(answered.ok());
  EXPECT_TRUE(answered->cancel());
}

TEST_F(JobManagerTest, RendezvousAnswersOnceEveryRankPublished) {
  auto publish = [&](int rank, const std::string& address, int attempt = 1) {
    v1::RendezvousRequest req;
    req.set_job_id(job_.job_id());
    req.set_rank(rank);
    req.set_attempt(attempt);
    req.set_host("h" + std::to_string(rank));
    req.set_address(address);
    req.set_blob(rank == 0 ? "nccl-id" : "ignored");
    return manager_->Rendezvous(req);
  };
  auto first = publish(1, "10.0.0.2:4000");
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_FALSE(first->ready());
  EXPECT_EQ(first->waiting_for(), 1);
  EXPECT_EQ(first->peers_size(), 0) << "no addresses before everyone is in";
  // Another address for a rank that already published: a second process
  // claiming the same rank.
  EXPECT_EQ(publish(1, "10.0.0.9:4000").status().code(),
            absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(publish(0, "10.0.0.1:4000", /*attempt=*/2).status().code(),
            absl::StatusCode::kFailedPrecondition)
      << "a stale or future attempt";
  EXPECT_EQ(publish(0, "").status().code(), absl::StatusCode::kInvalidArgument);
  auto all = publish(0, "10.0.0.1:4000");
  ASSERT_TRUE(all.ok());
  ASSERT_TRUE(all->ready());
  ASSERT_EQ(all->peers_size(), 2);
  EXPECT_EQ(all->peers(0).address(), "10.0.0.1:4000");
  EXPECT_EQ(all->peers(1).host(), "h1");
  EXPECT_EQ(all->blob(), "nccl-id") << "rank 0's blob, relayed";
  auto again = publish(1, "10.0.0.2:4000");  // polling is idempotent
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->ready());
}

TEST_F(JobManagerTest, RejectsBadRegistrations) {
  v1::RegisterRequest req;
  req.set_job_id("unknown");
  EXPECT_EQ(manager_->Register(req).status().code(),
            absl::StatusCode::kNotFound);
  req.set_job_id(job_.job_id());
  req.set_world_size(3);
  EXPECT_EQ(manager_->Register(req).status().code(),
            absl::StatusCode::kInvalidArgument);
  req.set_world_size(2);
  req.set_rank(2);
  EXPECT_EQ(manager_->Register(req).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(JobManagerTest, ResultsAreStoredOnceAndStamped) {
  v1::ReportResultsRequest req;
  req.set_job_id(job_.job_id());
  req.set_attempt(1);
  *req.add_results() = Result(0);
  auto resp = manager_->ReportResults(req);
  ASSERT_TRUE(resp.ok()) << resp.status();
  EXPECT_EQ(resp->accepted(), 1);
  resp = manager_->ReportResults(req);  // a retry
  ASSERT_TRUE(resp.ok());
  EXPECT_EQ(resp->accepted(), 0);
  EXPECT_EQ(resp->duplicates(), 1);
  auto stored = manager_->QueryResults(job_.job_id(), -1, 0);
  ASSERT_TRUE(stored.ok());
  ASSERT_EQ(stored->size(), 1u);
  EXPECT_EQ((*stored)[0].provenance().command_line_size(), 2);
  // The start time has milliseconds (compare orders runs by it).
  EXPECT_THAT((*stored)[0].provenance().started_at(),
              testing::MatchesRegex(
                  "[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}"
                  "\\.[0-9]{3}Z"));
  auto ev = manager_->NextEvent(absl::ZeroDuration());
  ASSERT_TRUE(ev.has_value());
  EXPECT_EQ(ev->type, JobEvent::Type::kResult);
  EXPECT_FALSE(
      manager_->NextEvent(absl::ZeroDuration()).has_value());  // retry silent
}

TEST_F(JobManagerTest, StaleAttemptsAndLateWritesAreRejected) {
  v1::ReportResultsRequest req;
  req.set_job_id(job_.job_id());
  req.set_attempt(2);
  *req.add_results() = Result(0);
  EXPECT_EQ(manager_->ReportResults(req).status().code(),
            absl::StatusCode::kFailedPrecondition);
  v1::Failure f;
  f.set_reason(v1::WORKER_EXIT);
  EXPECT_TRUE(manager_->Finish(job_.job_id(), v1::JOB_FAILED, f));
  EXPECT_FALSE(
      manager_->Finish(job_.job_id(), v1::JOB_SUCCEEDED, {}));  // first wins
  req.set_attempt(1);
  EXPECT_EQ(manager_->ReportResults(req).status().code(),
            absl::StatusCode::kFailedPrecondition);
  auto job = manager_->GetJob(job_.job_id());
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->state(), v1::JOB_FAILED);
  EXPECT_EQ(job->failure().reason(), v1::WORKER_EXIT);
  auto stored = store_->GetJob(job_.job_id());
  ASSERT_TRUE(stored.ok());
  EXPECT_EQ(stored->state(), v1::JOB_FAILED);  // persisted
  v1::HeartbeatRequest hb;
  hb.set_job_id(job_.job_id());
  hb.set_rank(0);
  auto hbr = manager_->Heartbeat(hb);
  ASSERT_TRUE(hbr.ok());
  EXPECT_TRUE(hbr->cancel());
}

TEST(JobManagerAnnotate, LabelsResultsBeforeTheyAreStored) {
  auto store = Store::Open(":memory:");
  ASSERT_TRUE(store.ok());
  JobManager::Options options;
  options.annotate = [](v1::Result* r) { r->set_nccl_algorithm("RING"); };
  JobManager manager(store->get(), options);
  auto job = manager.CreateJob(v1::Plan(), {v1::Case()}, 1, {});
  ASSERT_TRUE(job.ok());
  v1::ReportResultsRequest req;
  req.set_job_id(job->job_id());
  req.set_attempt(1);
  v1::Result* r = req.add_results();
  r->set_job_id(job->job_id());
  r->set_attempt(1);
  r->set_idempotency_key(job->job_id() + "/1/0/0");
  ASSERT_TRUE(manager.ReportResults(req).ok());
  auto stored = manager.QueryResults(job->job_id(), -1, 0);
  ASSERT_TRUE(stored.ok());
  ASSERT_EQ(stored->size(), 1u);
  EXPECT_EQ((*stored)[0].nccl_algorithm(), "RING");
}

TEST_F(JobManagerTest, FinalReportWithFailureBecomesAnEvent) {
  v1::ReportResultsRequest req;
  req.set_job_id(job_.job_id());
  req.set_attempt(1);
  req.set_final(true);
  req.mutable_failure()->set_reason(v1::CONFIG_MISMATCH);
  ASSERT_TRUE(manager_->ReportResults(req).ok());
  auto ev = manager_->NextEvent(absl::ZeroDuration());
  ASSERT_TRUE(ev.has_value());
  EXPECT_EQ(ev->type, JobEvent::Type::kRankFinal);
  EXPECT_EQ(ev->failure.reason(), v1::CONFIG_MISMATCH);
  EXPECT_TRUE(manager_->Ranks(job_.job_id())[0].final);
}

}  // namespace
}  // namespace ringmaster

namespace ringmaster {
namespace {

TEST(JobManagerService, RequestIdGivesOneJobAndRequeueStartsAFreshAttempt) {
  auto s = Store::Open(":memory:");
  ASSERT_TRUE(s.ok());
  JobManager manager(s->get());
  v1::Job spec;
  spec.set_nranks(1);
  spec.set_user("alice");
  spec.set_request_id("r-1");
  spec.add_cases()->set_seq(0);
  bool dup = false;
  auto first = manager.CreateJob(spec, &dup);
  ASSERT_TRUE(first.ok());
  EXPECT_FALSE(dup);
  auto again = manager.CreateJob(spec, &dup);
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(dup);
  EXPECT_EQ(again->job_id(), first->job_id());
  spec.set_user("bob");  // another user's request id is another request
  auto other = manager.CreateJob(spec, &dup);
  ASSERT_TRUE(other.ok());
  EXPECT_FALSE(dup);
  EXPECT_EQ(manager.ListJobs({}, "", 0).size(), 2u);
  EXPECT_EQ(manager.CountUnfinished("alice"), 1);

  const std::string id = first->job_id();
  ASSERT_TRUE(manager.MarkLaunching(id, 0).ok());
  v1::Failure f;
  f.set_reason(v1::WORKER_UNREACHABLE);
  ASSERT_TRUE(manager.Requeue(id, f).ok());
  auto job = manager.GetJob(id);
  EXPECT_EQ(job->attempt(), 2);
  EXPECT_EQ(job->state(), v1::JOB_QUEUED);
  ASSERT_EQ(job->attempts_size(), 2);
  EXPECT_EQ(job->attempts(0).failure().reason(), v1::WORKER_UNREACHABLE);
  // The old attempt's late writes are refused; its heartbeats told to stop.
  ASSERT_TRUE(manager.MarkLaunching(id, 0).ok());
  v1::ReportResultsRequest late;
  late.set_job_id(id);
  late.set_attempt(1);
  EXPECT_EQ(manager.ReportResults(late).status().code(),
            absl::StatusCode::kFailedPrecondition);
  v1::HeartbeatRequest hb;
  hb.set_job_id(id);
  hb.set_attempt(1);
  EXPECT_TRUE(manager.Heartbeat(hb)->cancel());
  hb.set_attempt(2);
  EXPECT_FALSE(manager.Heartbeat(hb)->cancel());
  ASSERT_TRUE(manager.RequestCancel(id).ok());
  EXPECT_TRUE(manager.Heartbeat(hb)->cancel());
}

TEST(StoreGroupCommit, ConcurrentWritersAllStoredOnce) {
  auto s = Store::Open(":memory:");
  ASSERT_TRUE(s.ok());
  Store* store = s->get();
  std::vector<std::thread> threads;
  std::atomic<int> accepted{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) {
        std::vector<v1::Result> batch(3);
        for (int k = 0; k < 3; ++k) {
          batch[k].set_job_id("j");
          batch[k].set_attempt(1);
          batch[k].mutable_case_()->set_seq(i * 3 + k);
          // Every key twice across threads t and t^1.
          batch[k].set_idempotency_key("j/1/" + std::to_string(t / 2) + "/" +
                                       std::to_string(i * 3 + k));
        }
        auto c = store->InsertResults(batch, t);
        ASSERT_TRUE(c.ok());
        accepted += c->accepted;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(accepted.load(), 4 * 150);
  EXPECT_EQ(*store->CountResults("j", 1), 4 * 150);
}

}  // namespace
}  // namespace ringmaster

namespace ringmaster {
namespace {

// A coordinator restarted on the same store knows which ranks of a running
// job already reported their end, and how many results it holds.
TEST(JobManagerAdopt, FinalReportsAndResultCountSurviveARestart) {
  auto s = Store::Open(":memory:");
  ASSERT_TRUE(s.ok());
  std::string id;
  {
    JobManager first(s->get());
    auto job = first.CreateJob(v1::Plan(), {v1::Case(), v1::Case()}, 2, {});
    ASSERT_TRUE(job.ok());
    id = job->job_id();
    ASSERT_TRUE(first.MarkLaunching(id, 0).ok());
    for (int r = 0; r < 2; ++r) {
      v1::RegisterRequest reg;
      reg.set_job_id(id);
      reg.set_rank(r);
      reg.set_world_size(2);
      ASSERT_TRUE(first.Register(reg).ok());
    }
    v1::ReportResultsRequest rep;
    rep.set_job_id(id);
    rep.set_rank(0);
    rep.set_attempt(1);
    rep.set_final(true);
    v1::Result* res = rep.add_results();
    res->set_job_id(id);
    res->set_attempt(1);
    res->set_idempotency_key(id + "/1/0/0");
    ASSERT_TRUE(first.ReportResults(rep).ok());
  }
  JobManager second(s->get());
  auto jobs = (*s)->AllJobs();
  ASSERT_TRUE(jobs.ok());
  ASSERT_EQ(jobs->size(), 1u);
  EXPECT_EQ((*jobs)[0].state(), v1::JOB_RUNNING);
  second.Adopt((*jobs)[0]);
  auto ranks = second.Ranks(id);
  ASSERT_EQ(ranks.size(), 2u);
  EXPECT_TRUE(ranks[0].final);
  EXPECT_FALSE(ranks[1].final);
  EXPECT_EQ(second.GetJob(id)->results_received(), 1);
}

}  // namespace
}  // namespace ringmaster
