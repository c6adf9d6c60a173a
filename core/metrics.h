// Bandwidth metrics with nccl-tests' definitions (docs/metrics.md).
#ifndef RINGMASTER_CORE_METRICS_H_
#define RINGMASTER_CORE_METRICS_H_

#include <cstdint>

#include "ringmaster/v1/plan.pb.h"
#include "ringmaster/v1/result.pb.h"

namespace ringmaster {

// busbw / algbw for `collective` on `nranks` ranks:
//   all_reduce 2(n-1)/n; all_gather, reduce_scatter, all_to_all (n-1)/n;
//   broadcast, reduce, send_recv 1. Returns 0 for nranks < 1.
double BusBwFactor(v1::Collective collective, int nranks);

// Bytes the algorithm-bandwidth figure counts, as nccl-tests does: the
// per-rank buffer (size_bytes) for all collectives; for all_gather and
// reduce_scatter size_bytes is the total (gathered) buffer.
int64_t AlgBwBytes(const v1::Case& c);

// GB/s (1e9 bytes per second); 0 when seconds <= 0.
double GigabytesPerSecond(int64_t bytes, double seconds);

// Fills algbw_gbps, busbw_gbps and pct_of_ceiling (against
// case.ceiling_gbps) from stats.median_s, case and nranks.
void FillBandwidth(v1::Result* result);

}  // namespace ringmaster

#endif  // RINGMASTER_CORE_METRICS_H_
