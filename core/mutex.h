// A std::mutex that clang's thread-safety analysis understands.
//
// ABSL_GUARDED_BY needs a lock type the analysis knows; absl::Mutex is one,
// but Debian's Abseil is not built for ThreadSanitizer, which then cannot
// see its locks and reports every access they guard as a race. This wrapper
// keeps std::mutex (pthread, which TSan intercepts) and adds the
// capability annotations, so both the TSan lane and -Wthread-safety see the
// same locking. Waits use std::condition_variable_any on the MutexLock.
#ifndef RINGMASTER_CORE_MUTEX_H_
#define RINGMASTER_CORE_MUTEX_H_

#include <mutex>

#include "absl/base/thread_annotations.h"

namespace ringmaster {

class ABSL_LOCKABLE Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  void Unlock() ABSL_UNLOCK_FUNCTION() { mu_.unlock(); }

 private:
  std::mutex mu_;
};

// Holds `mu` for the object's lifetime. Also a BasicLockable, so that a
// std::condition_variable_any can wait on it (the wait releases and
// re-acquires `mu`; to the analysis, it stays held).
class ABSL_SCOPED_LOCKABLE MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) {
    mu_->Lock();
  }
  ~MutexLock() ABSL_UNLOCK_FUNCTION() { mu_->Unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

  // For std::condition_variable_any only.
  void lock() ABSL_NO_THREAD_SAFETY_ANALYSIS { mu_->Lock(); }
  void unlock() ABSL_NO_THREAD_SAFETY_ANALYSIS { mu_->Unlock(); }

 private:
  Mutex* mu_;
};

}  // namespace ringmaster

#endif  // RINGMASTER_CORE_MUTEX_H_
