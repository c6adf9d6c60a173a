#include "coordinator/store.h"

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <thread>

namespace ringmaster {
namespace {

v1::Result MakeResult(const std::string& job, int seq) {
  v1::Result r;
  r.set_job_id(job);
  r.set_attempt(1);
  r.mutable_case_()->set_seq(seq);
  r.set_status(v1::OK);
  r.set_busbw_gbps(seq * 1.5);
  r.set_idempotency_key(job + "/1/0/" + std::to_string(seq));
  return r;
}

class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("rm_store_test_" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_);
    path_ = (dir_ / "store.db").string();
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
  std::string path_;
};

TEST_F(StoreTest, UsesWalAndFullSync) {
  auto store = Store::Open(path_);
  ASSERT_TRUE(store.ok()) << store.status();
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &st, nullptr);
  ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
  EXPECT_STREQ(reinterpret_cast<const char*>(sqlite3_column_text(st, 0)),
               "wal");
  sqlite3_finalize(st);
  sqlite3_close(db);
}

TEST_F(StoreTest, ResultsAreIdempotentAndSurviveReopen) {
  {
    auto store = Store::Open(path_);
    ASSERT_TRUE(store.ok());
    v1::Job job;
    job.set_job_id("j1");
    job.set_state(v1::JOB_RUNNING);
    ASSERT_TRUE((*store)->PutJob(job).ok());
    auto counts =
        (*store)->InsertResults({MakeResult("j1", 0), MakeResult("j1", 1)}, 0);
    ASSERT_TRUE(counts.ok());
    EXPECT_EQ(counts->accepted, 2);
    EXPECT_EQ(counts->duplicates, 0);
    counts =
        (*store)->InsertResults({MakeResult("j1", 1), MakeResult("j1", 2)}, 0);
    ASSERT_TRUE(counts.ok());
    EXPECT_EQ(counts->accepted, 1);
    EXPECT_EQ(counts->duplicates, 1);
  }
  auto store = Store::Open(path_);
  ASSERT_TRUE(store.ok());
  auto results = (*store)->Results("j1", -1, 0);
  ASSERT_TRUE(results.ok());
  ASSERT_EQ(results->size(), 3u);
  EXPECT_EQ((*results)[2].case_().seq(), 2);
  EXPECT_DOUBLE_EQ((*results)[2].busbw_gbps(), 3.0);
  auto after = (*store)->Results("j1", 0, 1);
  ASSERT_TRUE(after.ok());
  ASSERT_EQ(after->size(), 1u);
  EXPECT_EQ((*after)[0].case_().seq(), 1);
  auto job = (*store)->GetJob("j1");
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->state(), v1::JOB_RUNNING);
  EXPECT_EQ((*store)->GetJob("nope").status().code(),
            absl::StatusCode::kNotFound);
}

// Keys are checked in memory: a key stored before a reopen, before its job
// ended and was stored again, or earlier in the same report is still a
// duplicate, and the table holds each key once.
TEST_F(StoreTest, KeysStayUniqueAcrossReopenJobEndAndWithinAReport) {
  {
    auto store = Store::Open(path_);
    ASSERT_TRUE(store.ok());
    auto counts = (*store)->InsertResults(
        {MakeResult("j1", 0), MakeResult("j1", 1), MakeResult("j1", 1)}, 0);
    ASSERT_TRUE(counts.ok());
    EXPECT_EQ(counts->accepted, 2);
    EXPECT_EQ(counts->duplicates, 1);
  }
  auto store = Store::Open(path_);
  ASSERT_TRUE(store.ok());
  auto counts = (*store)->InsertResults(
      {MakeResult("j1", 0), MakeResult("j1", 2), MakeResult("j2", 0)}, 0);
  ASSERT_TRUE(counts.ok());
  EXPECT_EQ(counts->accepted, 2);
  EXPECT_EQ(counts->duplicates, 1);
  v1::Job job;
  job.set_job_id("j1");
  job.set_state(v1::JOB_SUCCEEDED);
  ASSERT_TRUE((*store)->PutJob(job).ok());
  counts =
      (*store)->InsertResults({MakeResult("j1", 2), MakeResult("j1", 3)}, 0);
  ASSERT_TRUE(counts.ok());
  EXPECT_EQ(counts->accepted, 1);
  EXPECT_EQ(counts->duplicates, 1);
  auto results = (*store)->Results("j1", -1, 0);
  ASSERT_TRUE(results.ok());
  ASSERT_EQ(results->size(), 4u);
  for (int i = 0; i < 4; ++i) EXPECT_EQ((*results)[i].case_().seq(), i);
  auto other = (*store)->Results("j2", -1, 0);
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(other->size(), 1u);
}

// Steady small commits past the checkpoint threshold: the log is copied
// into the database while the store is open (by the checkpoint thread, and
// the writer's short finish), and nothing is lost.
TEST_F(StoreTest, CheckpointsCopyTheLogWhileWritersGoOn) {
  auto store = Store::Open(path_);
  ASSERT_TRUE(store.ok());
  constexpr int kCommits = 300, kPerCommit = 10;  // about 1,600 pages
  const std::string filler(2000, 'x');
  for (int c = 0; c < kCommits; ++c) {
    std::vector<v1::Result> batch;
    for (int i = 0; i < kPerCommit; ++i) {
      batch.push_back(MakeResult("j1", c * kPerCommit + i));
      batch.back().mutable_provenance()->add_command_line(filler);
    }
    auto counts = (*store)->InsertResults(batch, 0);
    ASSERT_TRUE(counts.ok()) << counts.status();
    ASSERT_EQ(counts->accepted, kPerCommit);
  }
  // The database file holds the copied pages (it starts at a few pages;
  // the results are about 6 MB).
  std::error_code ec;
  uintmax_t size = 0;
  for (int i = 0; i < 100; ++i) {
    size = std::filesystem::file_size(path_, ec);
    if (size > (2u << 20)) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_GT(size, 2u << 20) << "no checkpoint copied the log";
  auto n = (*store)->CountResults("j1", 1);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, kCommits * kPerCommit);
}

TEST_F(StoreTest, UnopenablePathIsAnError) {
  auto store = Store::Open((dir_ / "missing-dir" / "x.db").string());
  EXPECT_FALSE(store.ok());
}

}  // namespace
}  // namespace ringmaster

namespace ringmaster {
namespace {

TEST(StoreQuery, FiltersByStatusAndAttempt) {
  auto s = Store::Open(":memory:");
  ASSERT_TRUE(s.ok());
  std::vector<v1::Result> rows(4);
  for (int i = 0; i < 4; ++i) {
    rows[i].set_job_id("j");
    rows[i].set_attempt(i < 2 ? 1 : 2);
    rows[i].mutable_case_()->set_seq(i);
    rows[i].set_status(i % 2 ? v1::FAILED : v1::OK);
    rows[i].set_idempotency_key("j/" + std::to_string(i));
  }
  ASSERT_TRUE((*s)->InsertResults(rows, 0).ok());
  EXPECT_EQ((*s)->Results("j", -1, 0)->size(), 4u);
  auto failed = (*s)->Results("j", -1, 0, v1::FAILED);
  ASSERT_EQ(failed->size(), 2u);
  EXPECT_EQ((*failed)[0].case_().seq(), 1);
  auto second = (*s)->Results("j", -1, 0, v1::STATUS_UNSPECIFIED, 2);
  ASSERT_EQ(second->size(), 2u);
  EXPECT_EQ((*second)[0].case_().seq(), 2);
  EXPECT_EQ((*s)->Results("j", -1, 0, v1::OK, 2)->size(), 1u);
}

}  // namespace
}  // namespace ringmaster
