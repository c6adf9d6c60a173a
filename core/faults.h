// Fault injection for tests: makes failures reproducible without a GPU.
//
// Set RINGMASTER_FAULT on the workers, e.g. "crash:rank=1:seq=3" or
// "hang:rank=0:seq=2;corrupt:rank=1". Several faults are separated by ';'.
//   crash    the rank SIGKILLs itself when it starts case `seq`
//   exit     the rank exits with code 3 when it starts case `seq`
//   hang     the rank stops making progress at case `seq` (sleeps forever)
//   corrupt  the rank flips one output element when verifying
//   mismatch the rank reports a different build id in its fingerprint
//   linger   the rank waits 2 s after its last report before exiting (slow
//            teardown, as CUDA/NCCL shutdown can be)
//   slow     the rank's operations take `factor` times as long (host
//            backend: collectives, node benchmarks), e.g.
//            "slow:rank=3:factor=1.1" for a 10% slower rank
//   hog      the rank allocates and touches `bytes` of memory when it
//            starts case `seq` (a runaway rank, for worker rlimits), e.g.
//            "hog:rank=1:seq=0:bytes=8000000000"
// Never set in production; the worker logs every fault it applies.
#ifndef RINGMASTER_CORE_FAULTS_H_
#define RINGMASTER_CORE_FAULTS_H_

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace ringmaster {

struct Fault {
  enum class Kind {
    kCrash,
    kExit,
    kHang,
    kCorrupt,
    kMismatch,
    kLinger,
    kSlow,
    kHog
  };
  Kind kind = Kind::kCrash;
  int rank = -1;      // -1: every rank
  int64_t seq = 0;    // case sequence number where it fires (crash/exit/hang)
  double factor = 2;  // slow: how many times as long each operation takes
  int64_t bytes = 0;  // hog: memory to allocate and touch
};

absl::StatusOr<std::vector<Fault>> ParseFaults(std::string_view text);

// The first fault of `kind` that applies to `rank` (and `seq` when given).
std::optional<Fault> FindFault(const std::vector<Fault>& faults,
                               Fault::Kind kind, int rank,
                               std::optional<int64_t> seq = std::nullopt);

// The slow factor of `rank` (1 when no slow fault applies to it).
double SlowFactor(const std::vector<Fault>& faults, int rank);

// Busy-waits `seconds` (a slow fault's extra time: sleeping is too coarse
// for microsecond operations).
void SpinFor(double seconds);

}  // namespace ringmaster

#endif  // RINGMASTER_CORE_FAULTS_H_
