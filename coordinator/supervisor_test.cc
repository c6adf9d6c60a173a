#include "coordinator/supervisor.h"

#include <gtest/gtest.h>

#include <thread>

#include "absl/time/clock.h"

namespace ringmaster {
namespace {

// A job of two ranks started "elsewhere" (the external launcher), driven
// through JobManager calls as the workers would.
class SupervisorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto s = Store::Open(":memory:");
    ASSERT_TRUE(s.ok());
    store_ = std::move(*s);
    manager_ = std::make_unique<JobManager>(store_.get());
    std::vector<v1::Case> cases(2);
    for (int i = 0; i < 2; ++i) cases[i].set_seq(i);
    auto job = manager_->CreateJob(v1::Plan(), cases, 2, {});
    ASSERT_TRUE(job.ok());
    id_ = job->job_id();
  }
  std::unique_ptr<JobSupervisor> Follow(WatchLimits limits) {
    return JobSupervisor::Follow(manager_.get(), id_, limits, false, 0);
  }
  void Register(int rank) {
    v1::RegisterRequest req;
    req.set_job_id(id_);
    req.set_rank(rank);
    req.set_world_size(2);
    req.mutable_fingerprint()->set_host("elsewhere");
    ASSERT_TRUE(manager_->Register(req).ok());
  }
  void Heartbeat(int rank, int64_t entered, int64_t ops) {
    v1::HeartbeatRequest req;
    req.set_job_id(id_);
    req.set_rank(rank);
    req.set_attempt(1);
    req.set_entered_seq(entered);
    req.set_progress_seq(entered - 1);
    req.set_ops(ops);
    ASSERT_TRUE(manager_->Heartbeat(req).ok());
  }
  void Report(int rank, std::vector<int> seqs, bool final,
              v1::Status status = v1::OK) {
    v1::ReportResultsRequest req;
    req.set_job_id(id_);
    req.set_rank(rank);
    req.set_attempt(1);
    req.set_final(final);
    for (int seq : seqs) {
      v1::Result* r = req.add_results();
      r->set_job_id(id_);
      r->set_attempt(1);
      r->set_status(status);
      r->mutable_case_()->set_seq(seq);
      if (status == v1::FAILED)
        r->mutable_failure()->set_reason(v1::DATA_MISMATCH);
      r->set_idempotency_key(id_ + "/1/" + std::to_string(rank) + "/" +
                             std::to_string(seq));
    }
    ASSERT_TRUE(manager_->ReportResults(req).ok());
  }
  std::optional<Outcome> PollFor(JobSupervisor& sup, absl::Duration d) {
    absl::Time give_up = absl::Now() + d;
    while (absl::Now() < give_up) {
      if (auto o = sup.Poll()) return o;
      absl::SleepFor(absl::Milliseconds(10));
    }
    return std::nullopt;
  }
  std::unique_ptr<Store> store_;
  std::unique_ptr<JobManager> manager_;
  std::string id_;
};

TEST_F(SupervisorTest, SucceedsWhenEveryRankReportedItsEnd) {
  auto sup = Follow(WatchLimits());
  EXPECT_EQ(manager_->GetJob(id_)->state(), v1::JOB_LAUNCHING);
  Register(0);
  Register(1);
  Report(0, {0, 1}, false);
  EXPECT_FALSE(sup->Poll().has_value());
  Report(0, {}, true);
  EXPECT_FALSE(sup->Poll().has_value()) << "rank 1 has not finished";
  Report(1, {}, true);
  auto o = sup->Poll();
  ASSERT_TRUE(o.has_value());
  EXPECT_EQ(o->state, v1::JOB_SUCCEEDED);
}

TEST_F(SupervisorTest, MissingResultsFailTheJob) {
  auto sup = Follow(WatchLimits());
  Register(0);
  Register(1);
  Report(0, {0}, true);
  Report(1, {}, true);
  auto o = sup->Poll();
  ASSERT_TRUE(o.has_value());
  EXPECT_EQ(o->state, v1::JOB_FAILED);
  EXPECT_EQ(o->failure.reason(), v1::WORKER_EXIT);
  EXPECT_NE(o->failure.detail().find("only 1 of 2"), std::string::npos);
}

TEST_F(SupervisorTest, AFailedResultFailsTheJobWithItsReason) {
  auto sup = Follow(WatchLimits());
  Register(0);
  Register(1);
  Report(0, {0}, false);
  Report(0, {1}, true, v1::FAILED);
  Report(1, {}, true);
  auto o = sup->Poll();
  ASSERT_TRUE(o.has_value());
  EXPECT_EQ(o->failure.reason(), v1::DATA_MISMATCH);
}

TEST_F(SupervisorTest, StalledProgressNamesTheRankBehind) {
  WatchLimits limits;
  limits.op_timeout_s = 0.3;
  auto sup = Follow(limits);
  Register(0);
  Register(1);
  Heartbeat(0, 2, 10);  // rank 0 entered case 2
  Heartbeat(1, 1, 10);  // rank 1 is still in case 1
  auto o = PollFor(*sup, absl::Seconds(5));
  ASSERT_TRUE(o.has_value());
  EXPECT_EQ(o->failure.reason(), v1::RANK_HUNG);
  EXPECT_EQ(o->failure.rank(), 1);
  EXPECT_NE(o->failure.detail().find("rank 1 last entered case 1 (after 10 "
                                     "operations) and never entered case 2"),
            std::string::npos)
      << o->failure.detail();
}

TEST_F(SupervisorTest, ProgressKeepsTheWatchdogAway) {
  WatchLimits limits;
  limits.op_timeout_s = 0.3;
  auto sup = Follow(limits);
  Register(0);
  Register(1);
  for (int i = 1; i <= 10; ++i) {
    Heartbeat(0, 0, i);
    Heartbeat(1, 0, i);
    EXPECT_FALSE(sup->Poll().has_value());
    absl::SleepFor(absl::Milliseconds(100));
  }
}

TEST_F(SupervisorTest, SilentRankIsUnreachableAfterTheLease) {
  WatchLimits limits;
  limits.heartbeat_timeout_s = 0.3;
  limits.op_timeout_s = 100;
  auto sup = Follow(limits);
  Register(0);
  Register(1);
  absl::Time until = absl::Now() + absl::Milliseconds(600);
  std::optional<Outcome> o;
  while (!o && absl::Now() < until + absl::Seconds(2)) {
    Heartbeat(0, 0, 1);  // rank 0 keeps talking, rank 1 is silent
    o = sup->Poll();
    absl::SleepFor(absl::Milliseconds(20));
  }
  ASSERT_TRUE(o.has_value());
  EXPECT_EQ(o->failure.reason(), v1::WORKER_UNREACHABLE);
  EXPECT_EQ(o->failure.rank(), 1);
}

// Two nodes on one host (node-0: ranks 0-1, node-1: ranks 2-3), each
// registered by its leader. Node-1 falls silent (its leader lost); a while
// later so does rank 0 of node-0, which is still within the heartbeat
// timeout when node-1's ranks pass it. The ranks that went quiet together
// are grouped by node, so the rank named is node-1's lowest (2), not the
// host's (0).
TEST_F(SupervisorTest, SilentRanksAreGroupedByNodeNotHost) {
  std::vector<v1::Case> cases(1);
  auto job = manager_->CreateJob(v1::Plan(), cases, 4, {});
  ASSERT_TRUE(job.ok());
  const std::string id = job->job_id();
  WatchLimits limits;
  limits.heartbeat_timeout_s = 2.0;
  limits.op_timeout_s = 100;
  auto sup = JobSupervisor::Follow(manager_.get(), id, limits, false, 0);
  for (int n = 0; n < 2; ++n) {
    v1::RegisterNodeRequest node;
    node.set_job_id(id);
    node.set_node("node-" + std::to_string(n));
    for (int r = 2 * n; r < 2 * n + 2; ++r) {
      v1::RegisterRequest* req = node.add_ranks();
      req->set_job_id(id);
      req->set_rank(r);
      req->set_world_size(4);
      req->mutable_fingerprint()->set_host("elsewhere");
    }
    ASSERT_TRUE(manager_->RegisterNode(node).ok());
  }
  auto beat = [&](int rank) {
    v1::HeartbeatRequest req;
    req.set_job_id(id);
    req.set_rank(rank);
    req.set_attempt(1);
    req.set_ops(1);
    ASSERT_TRUE(manager_->Heartbeat(req).ok());
  };
  const absl::Time t0 = absl::Now();
  std::optional<Outcome> o;
  while (!o && absl::Now() < t0 + absl::Seconds(8)) {
    beat(1);
    if (absl::Now() < t0 + absl::Milliseconds(600)) beat(0);
    o = sup->Poll();
    absl::SleepFor(absl::Milliseconds(20));
  }
  ASSERT_TRUE(o.has_value());
  EXPECT_EQ(o->failure.reason(), v1::WORKER_UNREACHABLE);
  EXPECT_EQ(o->failure.rank(), 2) << o->failure.detail();
}

TEST_F(SupervisorTest, CancelEndsTheJob) {
  auto sup = Follow(WatchLimits());
  ASSERT_TRUE(manager_->RequestCancel(id_).ok());
  auto o = sup->Poll();
  ASSERT_TRUE(o.has_value());
  EXPECT_EQ(o->state, v1::JOB_CANCELLED);
}

TEST_F(SupervisorTest, DeadlineEndsTheJob) {
  WatchLimits limits;
  limits.deadline_s = 0.2;
  limits.registration_timeout_s = 100;
  auto late = Follow(limits);
  auto d = PollFor(*late, absl::Seconds(3));
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->failure.reason(), v1::DEADLINE);
}

TEST(RetryableFailure, InfrastructureOnly) {
  v1::Failure f;
  for (auto r : {v1::WORKER_EXIT, v1::RANK_HUNG, v1::WORKER_UNREACHABLE,
                 v1::COORDINATOR_RESTART}) {
    f.set_reason(r);
    EXPECT_TRUE(RetryableFailure(f)) << r;
  }
  for (auto r : {v1::CONFIG_MISMATCH, v1::DATA_MISMATCH, v1::REJECTED,
                 v1::DEADLINE, v1::BELOW_FLOOR}) {
    f.set_reason(r);
    EXPECT_FALSE(RetryableFailure(f)) << r;
  }
}

}  // namespace
}  // namespace ringmaster
