// A rank's heartbeat: a background thread that tells the coordinator the
// rank is alive and how far it got, and learns that the job was cancelled.
#ifndef RINGMASTER_WORKER_HEARTBEAT_H_
#define RINGMASTER_WORKER_HEARTBEAT_H_

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "worker/coordinator_client.h"

namespace ringmaster {

// Sends a heartbeat every `interval` from construction until destruction:
// the rank's progress (the last case done and the one entered) and the
// operations counter (core/progress.h). Thread-safe setters.
class HeartbeatThread {
 public:
  // `client` must outlive the thread.
  HeartbeatThread(CoordinatorClient* client, std::string job_id, int rank,
                  int attempt, absl::Duration interval);
  ~HeartbeatThread();
  HeartbeatThread(const HeartbeatThread&) = delete;
  HeartbeatThread& operator=(const HeartbeatThread&) = delete;

  void SetProgress(int64_t seq) { progress_.store(seq); }
  void SetEntered(int64_t seq) { entered_.store(seq); }
  // True once the coordinator answered that the job is over.
  bool cancelled() const { return cancelled_.load(); }

 private:
  void Loop();

  CoordinatorClient* client_;
  std::string job_id_;
  int rank_;
  int attempt_;
  absl::Duration interval_;
  std::atomic<int64_t> progress_{-1};
  std::atomic<int64_t> entered_{-1};
  std::atomic<bool> cancelled_{false};
  absl::Notification stop_;
  std::thread thread_;
};

}  // namespace ringmaster

#endif  // RINGMASTER_WORKER_HEARTBEAT_H_
