// Expansion of a validated Plan into the concrete Cases a worker runs.
#ifndef RINGMASTER_CORE_SWEEP_H_
#define RINGMASTER_CORE_SWEEP_H_

#include <cstdint>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "ringmaster/v1/plan.pb.h"

namespace ringmaster {

// Sizes of a sweep in bytes: min, min·f, min·f², … while <= max, or the
// explicit list in the order given.
std::vector<int64_t> SweepSizes(const v1::SizeSweep& sweep);

// Expands every CaseSpec: for each ladder rung, timing mode, dtype, op, size
// and placement, in that nesting order (placement innermost, so out-of-place
// and in-place of one size sit together as in nccl-tests). Sizes are rounded
// down to a whole number of elements. Cases are numbered by `seq` from 0.
// InvalidArgument when the expansion exceeds `max_cases`.
//
// Node benchmarks (bench != collective) expand per method, direction,
// traffic, pattern, memory, latency path, dtype and size or shape, then per
// rank of the pattern for a launch of `nranks` ranks: every ordered pair
// (src != dst) for pairs and latency, every destination for all_to_one,
// every source for one_to_all, every rank for one. With nranks = 0 (not yet
// known) one placeholder case with src_rank = dst_rank = -1 stands for them.
absl::StatusOr<std::vector<v1::Case>> ExpandPlan(const v1::Plan& plan,
                                                 int64_t max_cases = 100000,
                                                 int nranks = 0);

// The plan as a launch on `backend` ("host", "cuda" or "auto") runs it: on
// "cuda" each case that has keys of its own for GPUs (its spec's `cuda`)
// takes them; elsewhere the cases stay as written (the host sizes: with
// "auto" the workers choose their backend later, and the smaller sizes
// suit both).
v1::Plan PlanForBackend(const v1::Plan& plan, std::string_view backend);

}  // namespace ringmaster

#endif  // RINGMASTER_CORE_SWEEP_H_
