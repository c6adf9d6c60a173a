// The durable results store: SQLite in WAL mode with synchronous=FULL.
//
// Jobs and results are stored as serialized protos plus the columns needed
// to query them. A result is identified by its idempotency key
// (job/attempt/rank/seq): inserting it twice stores it once. InsertResults
// returns only after the transaction committed, so callers may acknowledge.
// The keys of the jobs being written to are held in memory (read from the
// store at a job's first insert, dropped when PutJob stores the job
// ended), so the results table needs no index on them: keys arrive in no
// order, and their index dirtied about one page per result.
// Writers that arrive together share one transaction (group commit).
// Thread-safe (one connection behind a mutex).
#ifndef RINGMASTER_COORDINATOR_STORE_H_
#define RINGMASTER_COORDINATOR_STORE_H_

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "core/mutex.h"
#include "ringmaster/v1/coordinator.pb.h"
#include "ringmaster/v1/result.pb.h"

struct sqlite3;
struct sqlite3_stmt;

namespace ringmaster {

// Succeeded, failed or cancelled: the job takes no more results.
bool TerminalState(v1::JobState state);

// Lowers the calling thread's CPU priority by `by` nice steps: for the
// coordinator's writers, which may wait, below gRPC's threads, which answer
// heartbeats and must not (on a busy coordinator the scheduler then runs
// those first). Best effort; Linux (nice is per thread there).
void LowerThisThreadPriority(int by);
// How much lower the coordinator's writer threads run.
inline constexpr int kBackgroundNice = 5;

class Store {
 public:
  // Opens (creating if needed) the database at `path`, runs quick_check.
  // ":memory:" gives a private in-memory store for tests.
  static absl::StatusOr<std::unique_ptr<Store>> Open(const std::string& path);
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  // Inserts or replaces the job row.
  absl::Status PutJob(const v1::Job& job);
  absl::StatusOr<v1::Job> GetJob(const std::string& job_id);

  struct InsertCounts {
    int accepted = 0;
    int duplicates = 0;
  };
  // Stores `results` in one transaction; results whose idempotency key is
  // already stored are counted as duplicates and left unchanged.
  absl::StatusOr<InsertCounts> InsertResults(
      const std::vector<v1::Result>& results, int reporting_rank);

  // A rank's final report: it finished (failure unset) or stopped on a
  // failure.
  struct RankFinal {
    std::string job_id;
    int attempt = 0;
    int rank = 0;
    v1::Failure failure;
  };
  using ResultList = google::protobuf::RepeatedPtrField<v1::Result>;
  // InsertResults plus, in the same transaction, the rank's end when
  // `final` is given.
  absl::StatusOr<InsertCounts> InsertReport(const ResultList& results,
                                            int reporting_rank,
                                            const RankFinal* final);
  // Several ranks' reports (a node's) in one transaction: counts by part.
  struct ReportPart {
    const ResultList* results = nullptr;
    int reporting_rank = 0;
    const RankFinal* final = nullptr;  // the rank's end, when it ended
  };
  absl::StatusOr<std::vector<InsertCounts>> InsertReports(
      const std::vector<ReportPart>& parts);
  absl::StatusOr<std::vector<RankFinal>> RankFinals(const std::string& job_id,
                                                    int attempt);

  // How many results of `job_id`'s `attempt` are stored.
  absl::StatusOr<int64_t> CountResults(const std::string& job_id, int attempt);
  // Every job, oldest first (to take them over after a restart).
  absl::StatusOr<std::vector<v1::Job>> AllJobs();
  // PRAGMA quick_check's verdict ("ok" when sound).
  absl::StatusOr<std::string> QuickCheck();

  // Results of `job_id` with case.seq > after_seq, in seq order; limit 0 =
  // all. `status` (when not STATUS_UNSPECIFIED) and `attempt` (when > 0)
  // filter.
  absl::StatusOr<std::vector<v1::Result>> Results(
      const std::string& job_id, int64_t after_seq, int limit,
      v1::Status status = v1::STATUS_UNSPECIFIED, int attempt = 0);

 private:
  explicit Store(sqlite3* db) : db_(db) {}
  // Moves WAL checkpoints to a thread of their own (see store.cc).
  void StartCheckpointer(const std::string& path)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  static constexpr int kCheckpointPages = 1000;
  static constexpr int kFinishPages = 1000;
  static constexpr int kInlineCheckpointPages = 20000;
  absl::Status Exec(const char* sql) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The statement for `sql` (a string literal), prepared on first use and
  // kept: the writers' statements run thousands of times a second, and
  // preparing one costs about as much as running it. Reset, bindings kept.
  sqlite3_stmt* Cached(const char* sql) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Exec through Cached (statements without results).
  absl::Status ExecCached(const char* sql) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Runs `work` (with mu_ held) inside a transaction shared with every
  // other writer waiting at the same time: group commit, one fsync for all
  // of them. Returns after the commit, with `work`'s own status.
  absl::Status Commit(const std::function<absl::Status()>& work);

  struct Work {
    const std::function<absl::Status()>* fn;
    absl::Status result;
    bool done = false;
  };
  Mutex queue_mu_;
  std::condition_variable_any queue_cv_;
  std::vector<Work*> queue_ ABSL_GUARDED_BY(queue_mu_);
  bool committing_ ABSL_GUARDED_BY(queue_mu_) = false;

  // The stored keys of `job_id`'s results, read from the store on first use.
  absl::StatusOr<absl::flat_hash_set<std::string>*> KeysOf(
      const std::string& job_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Forgets the keys claimed since added_ had `mark` entries (their
  // inserts were rolled back).
  void ForgetKeys(size_t mark) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  Mutex mu_;
  sqlite3* db_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, absl::flat_hash_set<std::string>> keys_
      ABSL_GUARDED_BY(mu_);
  // The checkpointer: its connection and thread, woken by the WAL hook.
  sqlite3* checkpoint_db_ = nullptr;
  std::mutex checkpoint_mu_;
  std::condition_variable checkpoint_cv_;
  bool checkpoint_wanted_ = false;
  bool checkpoint_stop_ = false;
  // The log's round (how often the writer finished a checkpoint, after
  // which the log starts over), and the thread's last checkpoint as
  // (round when it started << 32 | log frames it had copied).
  std::atomic<int64_t> log_round_{0};
  std::atomic<int64_t> checkpoint_done_{0};
  std::thread checkpointer_;
  // Keys claimed by the transaction under way: (job id, key).
  std::vector<std::pair<std::string, std::string>> added_ ABSL_GUARDED_BY(mu_);
  std::map<const char*, sqlite3_stmt*> cached_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ringmaster

#endif  // RINGMASTER_COORDINATOR_STORE_H_
