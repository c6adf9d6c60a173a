#include "coordinator/store.h"

#include <sqlite3.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

#include "absl/strings/str_format.h"
#include "core/status_macros.h"

namespace ringmaster {
namespace {

absl::Status SqlError(sqlite3* db, const char* what) {
  const int code = sqlite3_extended_errcode(db) & 0xff;
  if (code == SQLITE_FULL || (code == SQLITE_IOERR && errno == ENOSPC)) {
    const char* file = sqlite3_db_filename(db, "main");
    return absl::ResourceExhaustedError(
        absl::StrFormat("no space left on device: %s (sqlite: %s: %s)",
                        file ? file : "?", what, sqlite3_errmsg(db)));
  }
  return absl::InternalError(
      absl::StrFormat("sqlite: %s: %s", what, sqlite3_errmsg(db)));
}

// Finalizes a prepared statement on scope exit.
class Statement {
 public:
  Statement(sqlite3* db, const char* sql) {
    rc_ = sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr);
  }
  ~Statement() { sqlite3_finalize(stmt_); }
  bool ok() const { return rc_ == SQLITE_OK; }
  sqlite3_stmt* get() { return stmt_; }

 private:
  sqlite3_stmt* stmt_ = nullptr;
  int rc_ = SQLITE_ERROR;
};

}  // namespace

bool TerminalState(v1::JobState s) {
  return s == v1::JOB_SUCCEEDED || s == v1::JOB_FAILED ||
         s == v1::JOB_CANCELLED;
}

absl::StatusOr<std::unique_ptr<Store>> Store::Open(const std::string& path) {
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(
      path.c_str(), &db,
      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
      nullptr);
  if (rc != SQLITE_OK) {
    absl::Status s = absl::UnavailableError(
        absl::StrFormat("%s: cannot open results store: %s", path,
                        db ? sqlite3_errmsg(db) : "out of memory"));
    sqlite3_close(db);
    return s;
  }
  sqlite3_busy_timeout(db, 5000);
  std::unique_ptr<Store> store(new Store(db));
  MutexLock lock(&store->mu_);
  const char* setup[] = {
      "PRAGMA journal_mode=WAL",
      "PRAGMA synchronous=FULL",
      "PRAGMA foreign_keys=ON",
      "CREATE TABLE IF NOT EXISTS jobs ("
      " job_id TEXT PRIMARY KEY, state INTEGER NOT NULL, created_at TEXT,"
      " finished_at TEXT, job BLOB NOT NULL)",
      "CREATE TABLE IF NOT EXISTS results ("
      // Keys are unique by the in-memory check (see store.h); a store
      // made before has them as the primary key, which still holds.
      " idempotency_key TEXT NOT NULL, job_id TEXT NOT NULL, attempt "
      "INTEGER,"
      " rank INTEGER, seq INTEGER, status INTEGER, busbw_gbps REAL,"
      " result BLOB NOT NULL)",
      "CREATE INDEX IF NOT EXISTS results_by_job ON results(job_id, seq)",
      // A rank's end (its final report), so a restarted coordinator knows
      // which ranks of an adopted job are done.
      "CREATE TABLE IF NOT EXISTS rank_finals ("
      " job_id TEXT NOT NULL, attempt INTEGER NOT NULL, rank INTEGER NOT NULL,"
      " failure BLOB, PRIMARY KEY(job_id, attempt, rank))",
  };
  for (const char* sql : setup) {
    RM_RETURN_IF_ERROR(store->Exec(sql));
  }
  // quick_check at start: refuse to run on a damaged store.
  Statement check(db, "PRAGMA quick_check");
  if (!check.ok() || sqlite3_step(check.get()) != SQLITE_ROW) {
    return SqlError(db, "quick_check");
  }
  std::string verdict =
      reinterpret_cast<const char*>(sqlite3_column_text(check.get(), 0));
  if (verdict != "ok") {
    return absl::DataLossError(
        absl::StrFormat("%s: quick_check: %s", path, verdict));
  }
  store->StartCheckpointer(path);
  return store;
}

void LowerThisThreadPriority(int by) {
  const auto tid = static_cast<id_t>(syscall(SYS_gettid));
  errno = 0;
  const int nice = getpriority(PRIO_PROCESS, tid);
  if (errno == 0) setpriority(PRIO_PROCESS, tid, std::min(nice + by, 19));
}

// Checkpoints mostly off the writers' path: a checkpoint inside a commit
// (SQLite's default, every 1000 pages) held every writer for its length.
// The WAL hook asks a thread with a connection of its own to copy the log
// into the database (passive: writers go on). The log only starts over
// when a checkpoint has copied all of it before the next write, which a
// checkpoint beside steady writers never does; so once the thread has
// copied all but kFinishPages, the writer copies that remainder itself
// (short) and the next commit starts the log over. Past
// kInlineCheckpointPages (the thread fell behind) the writer checkpoints
// all of it, as SQLite would.
void Store::StartCheckpointer(const std::string& path) {
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE, nullptr) !=
      SQLITE_OK) {
    sqlite3_close(db);
    return;  // SQLite's own checkpoints stay on
  }
  // A checkpoint on a connection that has not read the database yet does
  // nothing (it has not opened the log): read the schema first.
  if (sqlite3_exec(db, "SELECT count(*) FROM sqlite_master", nullptr, nullptr,
                   nullptr) != SQLITE_OK) {
    sqlite3_close(db);
    return;
  }
  checkpoint_db_ = db;
  sqlite3_wal_hook(
      db_,
      [](void* self, sqlite3* db, const char*, int frames) -> int {
        auto* store = static_cast<Store*>(self);
        // What the thread copied of this log (not of one before the log
        // last started over).
        const int64_t done = store->checkpoint_done_.load();
        const int copied =
            (done >> 32) == store->log_round_ ? static_cast<int>(done) : 0;
        if (frames >= kInlineCheckpointPages ||
            (copied > 0 && copied <= frames &&
             frames - copied <= kFinishPages)) {
          sqlite3_wal_checkpoint_v2(db, nullptr, SQLITE_CHECKPOINT_PASSIVE,
                                    nullptr, nullptr);
          ++store->log_round_;
        } else if (frames >= kCheckpointPages) {
          std::lock_guard<std::mutex> lock(store->checkpoint_mu_);
          store->checkpoint_wanted_ = true;
          store->checkpoint_cv_.notify_one();
        }
        return SQLITE_OK;
      },
      this);
  checkpointer_ = std::thread([this] {
    LowerThisThreadPriority(kBackgroundNice);
    std::unique_lock<std::mutex> lock(checkpoint_mu_);
    for (;;) {
      checkpoint_cv_.wait(
          lock, [this] { return checkpoint_wanted_ || checkpoint_stop_; });
      if (checkpoint_stop_) return;
      checkpoint_wanted_ = false;
      const int64_t round = log_round_;
      lock.unlock();
      int copied = 0;
      if (sqlite3_wal_checkpoint_v2(checkpoint_db_, nullptr,
                                    SQLITE_CHECKPOINT_PASSIVE, nullptr,
                                    &copied) == SQLITE_OK &&
          copied > 0) {
        checkpoint_done_ = (round << 32) | copied;
      }
      lock.lock();
    }
  });
}

Store::~Store() {
  if (checkpointer_.joinable()) {
    {
      std::lock_guard<std::mutex> lock(checkpoint_mu_);
      checkpoint_stop_ = true;
    }
    checkpoint_cv_.notify_one();
    checkpointer_.join();
  }
  sqlite3_close(checkpoint_db_);
  MutexLock lock(&mu_);
  for (auto& [sql, stmt] : cached_) sqlite3_finalize(stmt);
  sqlite3_close(db_);
}

sqlite3_stmt* Store::Cached(const char* sql) {
  sqlite3_stmt*& stmt = cached_[sql];
  if (stmt == nullptr) {
    if (sqlite3_prepare_v3(db_, sql, -1, SQLITE_PREPARE_PERSISTENT, &stmt,
                           nullptr) != SQLITE_OK) {
      sqlite3_finalize(stmt);
      stmt = nullptr;
      cached_.erase(sql);
      return nullptr;
    }
  } else {
    sqlite3_reset(stmt);
  }
  return stmt;
}

absl::Status Store::ExecCached(const char* sql) {
  sqlite3_stmt* stmt = Cached(sql);
  if (stmt == nullptr) return SqlError(db_, sql);
  const int rc = sqlite3_step(stmt);
  sqlite3_reset(stmt);
  if (rc != SQLITE_DONE && rc != SQLITE_ROW) return SqlError(db_, sql);
  return absl::OkStatus();
}

absl::Status Store::Exec(const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    sqlite3_free(err);
    return SqlError(db_, sql);
  }
  return absl::OkStatus();
}

absl::Status Store::Commit(const std::function<absl::Status()>& work) {
  Work w{&work, absl::OkStatus(), false};
  MutexLock ql(&queue_mu_);
  queue_.push_back(&w);
  while (!w.done) {
    if (committing_) {
      queue_cv_.wait(ql);
      continue;
    }
    // Lead: commit everything queued so far in one transaction (one fsync
    // for all of them); each piece of work in a savepoint of its own, so
    // one failure does not undo the others.
    committing_ = true;
    std::vector<Work*> batch;
    batch.swap(queue_);
    ql.unlock();
    {
      MutexLock lock(&mu_);
      absl::Status begun = ExecCached("BEGIN IMMEDIATE");
      if (!begun.ok()) {
        for (Work* b : batch) b->result = begun;
      } else {
        for (Work* b : batch) {
          const size_t mark = added_.size();
          ExecCached("SAVEPOINT work").IgnoreError();
          b->result = (*b->fn)();
          if (!b->result.ok()) {
            ExecCached("ROLLBACK TO work").IgnoreError();
            ForgetKeys(mark);
          }
          ExecCached("RELEASE work").IgnoreError();
        }
        absl::Status committed = ExecCached("COMMIT");
        if (!committed.ok()) {
          ExecCached("ROLLBACK").IgnoreError();
          ForgetKeys(0);
          for (Work* b : batch) {
            if (b->result.ok()) b->result = committed;
          }
        }
      }
      added_.clear();
    }
    ql.lock();
    for (Work* b : batch) b->done = true;
    committing_ = false;
    queue_cv_.notify_all();
  }
  return w.result;
}

absl::StatusOr<absl::flat_hash_set<std::string>*> Store::KeysOf(
    const std::string& job_id) {
  auto [it, inserted] = keys_.try_emplace(job_id);
  if (!inserted) return &it->second;
  sqlite3_stmt* st =
      Cached("SELECT idempotency_key FROM results WHERE job_id = ?");
  if (st == nullptr) {
    keys_.erase(it);
    return SqlError(db_, "prepare KeysOf");
  }
  sqlite3_bind_text(st, 1, job_id.c_str(), -1, SQLITE_TRANSIENT);
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    it->second.emplace(
        reinterpret_cast<const char*>(sqlite3_column_text(st, 0)),
        sqlite3_column_bytes(st, 0));
  }
  sqlite3_reset(st);
  if (rc != SQLITE_DONE) {
    keys_.erase(it);
    return SqlError(db_, "KeysOf");
  }
  return &it->second;
}

void Store::ForgetKeys(size_t mark) {
  while (added_.size() > mark) {
    auto it = keys_.find(added_.back().first);
    if (it != keys_.end()) it->second.erase(added_.back().second);
    added_.pop_back();
  }
}

absl::Status Store::PutJob(const v1::Job& job) {
  return Commit([&]() ABSL_NO_THREAD_SAFETY_ANALYSIS -> absl::Status {
    Statement st(db_,
                 "INSERT OR REPLACE INTO jobs(job_id, state, created_at, "
                 "finished_at, job) VALUES(?, ?, ?, ?, ?)");
    if (!st.ok()) return SqlError(db_, "prepare PutJob");
    std::string blob = job.SerializeAsString();
    sqlite3_bind_text(st.get(), 1, job.job_id().c_str(), -1, SQLITE_TRANSIENT);
    sqlite3_bind_int(st.get(), 2, job.state());
    sqlite3_bind_text(st.get(), 3, job.created_at().c_str(), -1,
                      SQLITE_TRANSIENT);
    sqlite3_bind_text(st.get(), 4, job.finished_at().c_str(), -1,
                      SQLITE_TRANSIENT);
    sqlite3_bind_blob(st.get(), 5, blob.data(), static_cast<int>(blob.size()),
                      SQLITE_TRANSIENT);
    if (sqlite3_step(st.get()) != SQLITE_DONE) return SqlError(db_, "PutJob");
    // An ended job takes no more results: its keys leave memory.
    if (TerminalState(job.state())) keys_.erase(job.job_id());
    return absl::OkStatus();
  });
}

absl::StatusOr<v1::Job> Store::GetJob(const std::string& job_id) {
  MutexLock lock(&mu_);
  Statement st(db_, "SELECT job FROM jobs WHERE job_id = ?");
  if (!st.ok()) return SqlError(db_, "prepare GetJob");
  sqlite3_bind_text(st.get(), 1, job_id.c_str(), -1, SQLITE_TRANSIENT);
  int rc = sqlite3_step(st.get());
  if (rc == SQLITE_DONE) return absl::NotFoundError("no job " + job_id);
  if (rc != SQLITE_ROW) return SqlError(db_, "GetJob");
  v1::Job job;
  const void* data = sqlite3_column_blob(st.get(), 0);
  int len = sqlite3_column_bytes(st.get(), 0);
  if (!job.ParseFromArray(data, len))
    return absl::DataLossError("corrupt job row " + job_id);
  return job;
}

absl::StatusOr<Store::InsertCounts> Store::InsertResults(
    const std::vector<v1::Result>& results, int reporting_rank) {
  ResultList copy(results.begin(), results.end());
  return InsertReport(copy, reporting_rank, nullptr);
}

absl::StatusOr<Store::InsertCounts> Store::InsertReport(
    const ResultList& results, int reporting_rank, const RankFinal* final) {
  if (results.empty() && !final) return InsertCounts();
  auto counts = InsertReports({ReportPart{&results, reporting_rank, final}});
  if (!counts.ok()) return counts.status();
  return counts->front();
}

absl::StatusOr<std::vector<Store::InsertCounts>> Store::InsertReports(
    const std::vector<ReportPart>& parts) {
  std::vector<InsertCounts> counts(parts.size());
  absl::Status s = Commit([&]() ABSL_NO_THREAD_SAFETY_ANALYSIS -> absl::Status {
    counts.assign(parts.size(), InsertCounts());
    sqlite3_stmt* fin = Cached(
        "INSERT OR REPLACE INTO rank_finals(job_id, attempt, rank,"
        " failure) VALUES(?, ?, ?, ?)");
    if (fin == nullptr) return SqlError(db_, "prepare rank_finals");
    sqlite3_stmt* st = Cached(
        "INSERT INTO results(idempotency_key, job_id, attempt, rank,"
        " seq, status, busbw_gbps, result) VALUES(?, ?, ?, ?, ?, ?, ?, ?)");
    if (st == nullptr) return SqlError(db_, "prepare InsertResults");
    std::string blob;
    for (size_t i = 0; i < parts.size(); ++i) {
      const ReportPart& part = parts[i];
      if (part.final) {
        const RankFinal* final = part.final;
        blob = final->failure.SerializeAsString();
        sqlite3_reset(fin);
        sqlite3_bind_text(fin, 1, final->job_id.c_str(), -1, SQLITE_TRANSIENT);
        sqlite3_bind_int(fin, 2, final->attempt);
        sqlite3_bind_int(fin, 3, final->rank);
        sqlite3_bind_blob(fin, 4, blob.data(), static_cast<int>(blob.size()),
                          SQLITE_TRANSIENT);
        if (sqlite3_step(fin) != SQLITE_DONE)
          return SqlError(db_, "rank_finals");
      }
      sqlite3_reset(fin);
      if (part.results == nullptr) continue;
      for (const v1::Result& r : *part.results) {
        absl::StatusOr<absl::flat_hash_set<std::string>*> keys =
            KeysOf(r.job_id());
        if (!keys.ok()) return keys.status();
        if (!(*keys)->insert(r.idempotency_key()).second) {
          ++counts[i].duplicates;
          continue;
        }
        added_.emplace_back(r.job_id(), r.idempotency_key());
        r.SerializeToString(&blob);
        sqlite3_reset(st);
        sqlite3_bind_text(st, 1, r.idempotency_key().c_str(), -1,
                          SQLITE_TRANSIENT);
        sqlite3_bind_text(st, 2, r.job_id().c_str(), -1, SQLITE_TRANSIENT);
        sqlite3_bind_int(st, 3, r.attempt());
        sqlite3_bind_int(st, 4, part.reporting_rank);
        sqlite3_bind_int64(st, 5, r.case_().seq());
        sqlite3_bind_int(st, 6, r.status());
        sqlite3_bind_double(st, 7, r.busbw_gbps());
        sqlite3_bind_blob(st, 8, blob.data(), static_cast<int>(blob.size()),
                          SQLITE_TRANSIENT);
        if (sqlite3_step(st) != SQLITE_DONE)
          return SqlError(db_, "InsertResults");
        ++counts[i].accepted;
      }
    }
    sqlite3_reset(st);
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  return counts;
}

absl::StatusOr<std::vector<Store::RankFinal>> Store::RankFinals(
    const std::string& job_id, int attempt) {
  MutexLock lock(&mu_);
  Statement st(db_,
               "SELECT rank, failure FROM rank_finals WHERE job_id = ? AND "
               "attempt = ? ORDER BY rank");
  if (!st.ok()) return SqlError(db_, "prepare RankFinals");
  sqlite3_bind_text(st.get(), 1, job_id.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_int(st.get(), 2, attempt);
  std::vector<RankFinal> out;
  int rc;
  while ((rc = sqlite3_step(st.get())) == SQLITE_ROW) {
    RankFinal f;
    f.job_id = job_id;
    f.attempt = attempt;
    f.rank = sqlite3_column_int(st.get(), 0);
    f.failure.ParseFromArray(sqlite3_column_blob(st.get(), 1),
                             sqlite3_column_bytes(st.get(), 1));
    out.push_back(std::move(f));
  }
  if (rc != SQLITE_DONE) return SqlError(db_, "RankFinals");
  return out;
}

absl::StatusOr<int64_t> Store::CountResults(const std::string& job_id,
                                            int attempt) {
  MutexLock lock(&mu_);
  Statement st(db_,
               "SELECT COUNT(*) FROM results WHERE job_id = ? AND attempt = ?");
  if (!st.ok()) return SqlError(db_, "prepare CountResults");
  sqlite3_bind_text(st.get(), 1, job_id.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_int(st.get(), 2, attempt);
  if (sqlite3_step(st.get()) != SQLITE_ROW)
    return SqlError(db_, "CountResults");
  return sqlite3_column_int64(st.get(), 0);
}

absl::StatusOr<std::vector<v1::Job>> Store::AllJobs() {
  MutexLock lock(&mu_);
  Statement st(db_, "SELECT job FROM jobs ORDER BY job_id");
  if (!st.ok()) return SqlError(db_, "prepare AllJobs");
  std::vector<v1::Job> out;
  int rc;
  while ((rc = sqlite3_step(st.get())) == SQLITE_ROW) {
    v1::Job job;
    if (!job.ParseFromArray(sqlite3_column_blob(st.get(), 0),
                            sqlite3_column_bytes(st.get(), 0))) {
      return absl::DataLossError("corrupt job row");
    }
    out.push_back(std::move(job));
  }
  if (rc != SQLITE_DONE) return SqlError(db_, "AllJobs");
  return out;
}

absl::StatusOr<std::string> Store::QuickCheck() {
  MutexLock lock(&mu_);
  Statement check(db_, "PRAGMA quick_check");
  if (!check.ok() || sqlite3_step(check.get()) != SQLITE_ROW) {
    return SqlError(db_, "quick_check");
  }
  return std::string(
      reinterpret_cast<const char*>(sqlite3_column_text(check.get(), 0)));
}

absl::StatusOr<std::vector<v1::Result>> Store::Results(
    const std::string& job_id, int64_t after_seq, int limit, v1::Status status,
    int attempt) {
  MutexLock lock(&mu_);
  Statement st(db_,
               "SELECT result FROM results WHERE job_id = ? AND seq > ?"
               " AND (? = 0 OR status = ?) AND (? = 0 OR attempt = ?)"
               " ORDER BY seq, attempt LIMIT ?");
  if (!st.ok()) return SqlError(db_, "prepare Results");
  sqlite3_bind_text(st.get(), 1, job_id.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_int64(st.get(), 2, after_seq);
  sqlite3_bind_int(st.get(), 3, status);
  sqlite3_bind_int(st.get(), 4, status);
  sqlite3_bind_int(st.get(), 5, attempt);
  sqlite3_bind_int(st.get(), 6, attempt);
  sqlite3_bind_int(st.get(), 7, limit > 0 ? limit : -1);
  std::vector<v1::Result> out;
  int rc;
  while ((rc = sqlite3_step(st.get())) == SQLITE_ROW) {
    v1::Result r;
    if (!r.ParseFromArray(sqlite3_column_blob(st.get(), 0),
                          sqlite3_column_bytes(st.get(), 0))) {
      return absl::DataLossError("corrupt result row in job " + job_id);
    }
    out.push_back(std::move(r));
  }
  if (rc != SQLITE_DONE) return SqlError(db_, "Results");
  return out;
}

}  // namespace ringmaster
