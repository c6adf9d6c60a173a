#include "coordinator/server.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>

#include "comm/grpc_channel.h"
#include "ringmaster/v1/coordinator.grpc.pb.h"
#include "worker/coordinator_client.h"

namespace ringmaster {
namespace {

constexpr char kAdminToken[] = "0123456789abcdef0123456789abcdef";

class ServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("rm_server_test_" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_);
    db_path_ = (dir_ / "store.db").string();
    auto s = Store::Open(db_path_);
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
  // A NodeSession stream with the admin token (`ctx` outlives it).
  std::unique_ptr<
      grpc::ClientReaderWriter<v1::NodeReportRequest, v1::NodeReportResponse>>
  OpenSession(grpc::ClientContext* ctx) {
    if (!stub_) {
      stub_ = v1::Coordinator::NewStub(
          grpc::CreateChannel(address_, grpc::InsecureChannelCredentials()));
    }
    ctx->AddMetadata("authorization", std::string("Bearer ") + kAdminToken);
    return stub_->NodeSession(ctx);
  }
  // Rank 0's heartbeat (with `ops`) and a report of one result (key seq
  // 0) of attempt 1, added to `req`.
  void AddHeartbeat(v1::NodeReportRequest* req, int64_t ops) {
    v1::HeartbeatRequest* beat = req->add_heartbeats();
    beat->set_job_id(job_id_);
    beat->set_rank(0);
    beat->set_attempt(1);
    beat->set_ops(ops);
  }
  void AddReport(v1::NodeReportRequest* req) {
    v1::ReportResultsRequest* rep = req->add_reports();
    rep->set_job_id(job_id_);
    rep->set_attempt(1);
    v1::Result* r = rep->add_results();
    r->set_job_id(job_id_);
    r->set_attempt(1);
    r->set_idempotency_key(job_id_ + "/1/0/0");
  }
  void TearDown() override {
    stub_.reset();
    server_.reset();
    manager_.reset();
    store_.reset();
    std::filesystem::remove_all(dir_);
  }
  std::filesystem::path dir_;
  std::string db_path_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<JobManager> manager_;
  std::unique_ptr<CoordinatorServer> server_;
  std::unique_ptr<v1::Coordinator::Stub> stub_;
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

// A node leader's stream: every message answered with its seq (a
// heartbeat, then a report committed before its answer), a message for
// another job ends the stream, and a wrong token is refused at the first
// message with nothing stored.
TEST_F(ServerTest, NodeSessionAnswersEachMessageAndSpeaksForOneJob) {
  grpc::ClientContext ctx;
  auto stream = OpenSession(&ctx);
  v1::NodeReportRequest hb;
  hb.set_job_id(job_id_);
  hb.set_seq(7);
  AddHeartbeat(&hb, 5);
  ASSERT_TRUE(stream->Write(hb));
  v1::NodeReportResponse answer;
  ASSERT_TRUE(stream->Read(&answer));
  EXPECT_EQ(answer.seq(), 7);
  EXPECT_EQ(manager_->Ranks(job_id_)[0].ops, 5);
  v1::NodeReportRequest rep;
  rep.set_job_id(job_id_);
  rep.set_seq(8);
  AddReport(&rep);
  ASSERT_TRUE(stream->Write(rep));
  ASSERT_TRUE(stream->Read(&answer));
  EXPECT_EQ(answer.seq(), 8);
  ASSERT_EQ(answer.reports_size(), 1);
  EXPECT_EQ(answer.reports(0).accepted(), 1);
  EXPECT_EQ(*manager_->CountResults(job_id_, 1), 1);
  v1::NodeReportRequest stray = hb;
  stray.set_job_id("another-job");
  ASSERT_TRUE(stream->Write(stray));
  EXPECT_FALSE(stream->Read(&answer));
  grpc::Status end = stream->Finish();
  EXPECT_EQ(end.error_code(), grpc::StatusCode::PERMISSION_DENIED)
      << end.error_message();

  grpc::ClientContext wrong;
  wrong.AddMetadata("authorization", "Bearer guess");
  auto refused = stub_->NodeSession(&wrong);
  rep.mutable_reports(0)->mutable_results(0)->set_idempotency_key(job_id_ +
                                                                  "/1/0/1");
  refused->Write(rep);
  EXPECT_FALSE(refused->Read(&answer));
  EXPECT_EQ(refused->Finish().error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(*manager_->CountResults(job_id_, 1), 1);
}

// A message with heartbeats and reports that asks for heartbeats_first:
// the heartbeats are taken and answered while the store cannot commit (another
// connection holds its write lock), the reports' answer follows once it can.
TEST_F(ServerTest, NodeSessionAnswersHeartbeatsBeforeTheCommit) {
  grpc::ClientContext ctx;
  auto stream = OpenSession(&ctx);
  v1::NodeReportRequest req;
  req.set_job_id(job_id_);
  req.set_seq(3);
  req.set_heartbeats_first(true);
  AddHeartbeat(&req, 9);
  AddReport(&req);

  sqlite3* other = nullptr;
  ASSERT_EQ(sqlite3_open(db_path_.c_str(), &other), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(other, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr),
            SQLITE_OK);
  ASSERT_TRUE(stream->Write(req));
  v1::NodeReportResponse answer;
  ASSERT_TRUE(stream->Read(&answer));
  EXPECT_EQ(answer.seq(), 3);
  EXPECT_TRUE(answer.reports_follow());
  EXPECT_EQ(answer.reports_size(), 0);
  EXPECT_FALSE(answer.cancel());
  EXPECT_EQ(manager_->Ranks(job_id_)[0].ops, 9);  // taken, not stored yet
  ASSERT_EQ(sqlite3_exec(other, "ROLLBACK", nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(other);
  ASSERT_TRUE(stream->Read(&answer));
  EXPECT_EQ(answer.seq(), 3);
  EXPECT_FALSE(answer.reports_follow());
  ASSERT_EQ(answer.reports_size(), 1);
  EXPECT_EQ(answer.reports(0).accepted(), 1);
  EXPECT_EQ(*manager_->CountResults(job_id_, 1), 1);
  stream->WritesDone();
  EXPECT_TRUE(stream->Finish().ok());
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

// A coordinator that is unavailable for its first `failures` calls of each
// method, then answers.
class FlakyCoordinator final : public v1::Coordinator::Service {
 public:
  explicit FlakyCoordinator(int failures) : failures_(failures) {}
  grpc::Status GetJob(grpc::ServerContext*, const v1::GetJobRequest* req,
                      v1::GetJobResponse* resp) override {
    if (get_job_calls.fetch_add(1) < failures_)
      return grpc::Status(grpc::StatusCode::UNAVAILABLE, "restarting");
    resp->mutable_job()->set_job_id(req->job_id());
    return grpc::Status::OK;
  }
  grpc::Status Heartbeat(grpc::ServerContext*, const v1::HeartbeatRequest*,
                         v1::HeartbeatResponse*) override {
    if (heartbeat_calls.fetch_add(1) < failures_)
      return grpc::Status(grpc::StatusCode::UNAVAILABLE, "restarting");
    return grpc::Status::OK;
  }
  std::atomic<int> get_job_calls{0};
  std::atomic<int> heartbeat_calls{0};

 private:
  const int failures_;
};

struct FlakyServer {
  explicit FlakyServer(int failures) : service(failures) {
    grpc::ServerBuilder b;
    b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    b.RegisterService(&service);
    server = b.BuildAndStart();
  }
  ~FlakyServer() { server->Shutdown(); }
  // A client through the channel every CLI command uses.
  std::unique_ptr<v1::Coordinator::Stub> Client() {
    auto channel =
        MakeCoordinatorChannel("127.0.0.1:" + std::to_string(port), TlsFiles{});
    EXPECT_TRUE(channel.ok()) << channel.status();
    return channel.ok() ? v1::Coordinator::NewStub(*channel) : nullptr;
  }
  FlakyCoordinator service;
  int port = 0;
  std::unique_ptr<grpc::Server> server;
};

TEST(CoordinatorChannel, IdempotentReadsRetryUnavailable) {
  FlakyServer fake(/*failures=*/2);
  auto stub = fake.Client();
  ASSERT_NE(stub, nullptr);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  v1::GetJobRequest req;
  req.set_job_id("j1");
  v1::GetJobResponse resp;
  grpc::Status st = stub->GetJob(&ctx, req, &resp);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(resp.job().job_id(), "j1");
  EXPECT_EQ(fake.service.get_job_calls.load(), 3);
}

TEST(CoordinatorChannel, RetriesGiveUpAfterFiveAttempts) {
  FlakyServer fake(/*failures=*/100);
  auto stub = fake.Client();
  ASSERT_NE(stub, nullptr);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  v1::GetJobResponse resp;
  grpc::Status st = stub->GetJob(&ctx, v1::GetJobRequest(), &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(fake.service.get_job_calls.load(), 5);
}

TEST(CoordinatorChannel, HeartbeatsAreNotRetriedByTheChannel) {
  // The worker's client owns their retries and deadlines.
  FlakyServer fake(/*failures=*/1);
  auto stub = fake.Client();
  ASSERT_NE(stub, nullptr);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  v1::HeartbeatResponse resp;
  grpc::Status st = stub->Heartbeat(&ctx, v1::HeartbeatRequest(), &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(fake.service.heartbeat_calls.load(), 1);
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
