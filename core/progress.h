// A process-wide count of completed operations (timed samples, training
// steps): the worker's heartbeat sends it, and the coordinator's watchdog
// calls a rank hung when no rank's count moved for the op timeout.
#ifndef RINGMASTER_CORE_PROGRESS_H_
#define RINGMASTER_CORE_PROGRESS_H_

#include <atomic>
#include <cstdint>

namespace ringmaster {

inline std::atomic<int64_t>& OpsCounter() {
  static std::atomic<int64_t> ops{0};
  return ops;
}
inline void CountOp() { OpsCounter().fetch_add(1, std::memory_order_relaxed); }

}  // namespace ringmaster

#endif  // RINGMASTER_CORE_PROGRESS_H_
