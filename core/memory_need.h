// How much memory a case's buffers take on each rank, before anything is
// allocated: what `validate` states and what a rank checks against the
// memory it has, so that a case that cannot fit is SKIPPED with the figure
// instead of ending its rank with an allocation failure.
//
// The figures count the buffers a benchmark kind allocates for the case
// (send and receive buffers, copy sources and targets, GEMM operands, a
// model's weights, gradients, optimizer state and activations), not the
// libraries' own workspaces; they are lower bounds of the real need.
#ifndef RINGMASTER_CORE_MEMORY_NEED_H_
#define RINGMASTER_CORE_MEMORY_NEED_H_

#include <cstdint>
#include <string>

#include "ringmaster/v1/plan.pb.h"

namespace ringmaster {

// Bytes of case `c`'s buffers on one rank of `nranks`; 0 when the kind does
// not say (plug-in kinds, find_slow's sub-cases are checked on their own).
int64_t CaseMemoryBytes(const v1::Case& c, int nranks);

// Memory this machine's host ranks may use each: MemAvailable (from
// /proc/meminfo) shared by `local_ranks`; 0 when unknown.
int64_t HostMemoryPerRank(int local_ranks);

// The SKIPPED reason for a case that needs `need` bytes where `available`
// are free, e.g. "needs 16 GiB per rank for its buffers; 11.2 GiB of host
// memory is available to each rank".
std::string DoesNotFitReason(int64_t need, int64_t available,
                             const std::string& memory);

}  // namespace ringmaster

#endif  // RINGMASTER_CORE_MEMORY_NEED_H_
