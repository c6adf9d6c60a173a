#include "coordinator/server.h"

#include <gtest/gtest.h>

#include "worker/coordinator_client.h"

namespace ringmaster {
namespace {

constexpr char kAdminToken[] = "0123456789abcdef0123456789abcdef";

class ServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto s = Store::Open(":memory:");
    ASSERT_TRUE(s.ok());
    store_ = std::move(*s);
    manager_ = std::make_unique<JobManager>(store_.get());
    v1::Plan plan;
    plan.set_name("p");
    auto job = manager_->CreateJob(plan, {v1::Case()}, 1, {});
    ASSERT_TRUE(job.ok());
    job_id_ = job->job_id();
    ASSERT_TRUE(manager_->MarkLaunching(job_id_, 0).ok());
    auto server =
        CoordinatorServer::Start(manager_.get(), "127.0.0.1:0", kAdminToken);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    address_ = "127.0.0.1:" + std::to_string(server_->port());
  }
  std::unique_ptr<Store> store_;
  std::unique_ptr<JobManager> manager_;
  std::unique_ptr<CoordinatorServer> server_;
  std::string job_id_;
  std::string address_;
};

TEST_F(ServerTest, RoundTripWithToken) {
  auto client = CoordinatorClient::Create(address_, kAdminToken);
  v1::RegisterRequest req;
  req.set_job_id(job_id_);
  req.set_world_size(1);
  auto resp = client->Register(req, absl::Seconds(5));
  ASSERT_TRUE(resp.ok()) << resp.status();
  EXPECT_EQ(resp->job().job_id(), job_id_);
  v1::ReportResultsRequest report;
  report.set_job_id(job_id_);
  report.set_attempt(1);
  v1::Result* r = report.add_results();
  r->set_job_id(job_id_);
  r->set_attempt(1);
  r->set_idempotency_key(job_id_ + "/1/0/0");
  auto sent = client->ReportResults(report);
  ASSERT_TRUE(sent.ok()) << sent.status();
  EXPECT_EQ(sent->accepted(), 1);
}

TEST_F(ServerTest, WrongTokenIsUnauthenticatedAndWritesNothing) {
  auto client = CoordinatorClient::Create(address_, "guess");
  v1::ReportResultsRequest report;
  report.set_job_id(job_id_);
  report.set_attempt(1);
  v1::Result* r = report.add_results();
  r->set_job_id(job_id_);
  r->set_idempotency_key(job_id_ + "/1/0/0");
  auto sent = client->ReportResults(report);
  EXPECT_EQ(sent.status().code(), absl::StatusCode::kUnauthenticated);
  auto stored = manager_->QueryResults(job_id_, -1, 0);
  ASSERT_TRUE(stored.ok());
  EXPECT_TRUE(stored->empty());
}

TEST_F(ServerTest, UnknownJobIsNotFound) {
  auto client = CoordinatorClient::Create(address_, kAdminToken);
  v1::HeartbeatRequest hb;
  hb.set_job_id("nope");
  EXPECT_EQ(client->Heartbeat(hb).status().code(), absl::StatusCode::kNotFound);
}

TEST(CoordinatorServerStart, RefusesNonLoopbackWithoutTls) {
  auto store = Store::Open(":memory:");
  ASSERT_TRUE(store.ok());
  JobManager manager(store->get());
  auto server = CoordinatorServer::Start(&manager, "0.0.0.0:0", kAdminToken);
  EXPECT_EQ(server.status().code(), absl::StatusCode::kPermissionDenied);
}

TEST(IsLoopbackAddress, Forms) {
  EXPECT_TRUE(IsLoopbackAddress("127.0.0.1:0"));
  EXPECT_TRUE(IsLoopbackAddress("localhost:50051"));
  EXPECT_TRUE(IsLoopbackAddress("[::1]:5"));
  EXPECT_FALSE(IsLoopbackAddress("0.0.0.0:1"));
  EXPECT_FALSE(IsLoopbackAddress("10.0.0.1:1"));
}

}  // namespace
}  // namespace ringmaster
