// The durable results store: SQLite in WAL mode with synchronous=FULL.
//
// Jobs and results are stored as serialized protos plus the columns needed
// to query them. A result is identified by its idempotency key
// (job/attempt/rank/seq): inserting it twice stores it once. InsertResults
// returns only after the transaction committed, so callers may acknowledge.
// Thread-safe (one connection behind a mutex).
#ifndef RINGMASTER_COORDINATOR_STORE_H_
#define RINGMASTER_COORDINATOR_STORE_H_

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "ringmaster/v1/coordinator.pb.h"
#include "ringmaster/v1/result.pb.h"

struct sqlite3;

namespace ringmaster {

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

  // Results of `job_id` with case.seq > after_seq, in seq order; limit 0 =
  // all.
  absl::StatusOr<std::vector<v1::Result>> Results(const std::string& job_id,
                                                  int64_t after_seq, int limit);

 private:
  explicit Store(sqlite3* db) : db_(db) {}
  absl::Status Exec(const char* sql) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  std::mutex mu_;
  sqlite3* db_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ringmaster

#endif  // RINGMASTER_COORDINATOR_STORE_H_
