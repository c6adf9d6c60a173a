#include "worker/heartbeat.h"

#include <utility>

#include "core/progress.h"

namespace ringmaster {

HeartbeatThread::HeartbeatThread(CoordinatorClient* client, std::string job_id,
                                 int rank, int attempt, absl::Duration interval)
    : client_(client),
      job_id_(std::move(job_id)),
      rank_(rank),
      attempt_(attempt),
      interval_(interval) {
  thread_ = std::thread([this] { Loop(); });
}

HeartbeatThread::~HeartbeatThread() {
  stop_.Notify();
  thread_.join();
}

void HeartbeatThread::Loop() {
  while (!stop_.WaitForNotificationWithTimeout(interval_)) {
    v1::HeartbeatRequest req;
    req.set_job_id(job_id_);
    req.set_rank(rank_);
    req.set_attempt(attempt_);
    req.set_progress_seq(progress_.load());
    req.set_entered_seq(entered_.load());
    req.set_ops(OpsCounter().load(std::memory_order_relaxed));
    auto resp = client_->Heartbeat(req);
    if (resp.ok() && resp->cancel()) cancelled_.store(true);
  }
}

}  // namespace ringmaster
