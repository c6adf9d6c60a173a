// NCCL's algorithm and protocol choices, read from its own log.
//
// With NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=TUNING, NCCL prints one line per
// collective call, e.g.
//   NCCL INFO AllReduce: 1048576 Bytes -> Algo RING proto LL
//   channel{Lo..Hi}={0..23}
// where the bytes are the per-rank count of the call times the element
// size. `ringmaster run --nccl-algorithms` runs each case once that way
// (a probe launch, before the measured one, whose timings it would
// disturb) and labels every result with what NCCL chose.
#ifndef RINGMASTER_CORE_NCCL_TUNING_H_
#define RINGMASTER_CORE_NCCL_TUNING_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "ringmaster/v1/plan.pb.h"

namespace ringmaster {

struct NcclChoice {
  std::string function;  // "AllReduce", "AllGather", ...
  int64_t bytes = 0;
  std::string algorithm;  // "RING", "TREE", "NVLS", ...
  std::string protocol;   // "LL", "LL128", "SIMPLE"
  int channels = 0;       // Hi - Lo + 1
};

// Parses one log line; nullopt for every other line.
std::optional<NcclChoice> ParseNcclTuningLine(std::string_view line);

// The (function, bytes) key NCCL logs for a case on `nranks` ranks, or
// nullopt where NCCL logs no choice (send/recv and all-to-all are
// point-to-point). `count` is the case's effective element count.
std::optional<std::pair<std::string, int64_t>> NcclTuningKey(const v1::Case& c,
                                                             int nranks);

using NcclChoices = std::map<std::pair<std::string, int64_t>, NcclChoice>;

}  // namespace ringmaster

#endif  // RINGMASTER_CORE_NCCL_TUNING_H_
