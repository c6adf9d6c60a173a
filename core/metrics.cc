#include "core/metrics.h"

namespace ringmaster {

double BusBwFactor(v1::Collective collective, int nranks) {
  if (nranks < 1) return 0;
  const double n = nranks;
  switch (collective) {
    case v1::ALL_REDUCE:
      return 2.0 * (n - 1) / n;
    case v1::ALL_GATHER:
    case v1::REDUCE_SCATTER:
    case v1::ALL_TO_ALL:
      return (n - 1) / n;
    case v1::BROADCAST:
    case v1::REDUCE:
    case v1::SEND_RECV:
      return 1.0;
    default:
      return 0;
  }
}

int64_t AlgBwBytes(const v1::Case& c) { return c.size_bytes(); }

double GigabytesPerSecond(int64_t bytes, double seconds) {
  if (!(seconds > 0)) return 0;
  return static_cast<double>(bytes) / seconds / 1e9;
}

void FillBandwidth(v1::Result* result) {
  double algbw = GigabytesPerSecond(AlgBwBytes(result->case_()),
                                    result->stats().median_s());
  result->set_algbw_gbps(algbw);
  result->set_busbw_gbps(
      algbw * BusBwFactor(result->case_().collective(), result->nranks()));
  double ceiling = result->case_().ceiling_gbps();
  result->set_pct_of_ceiling(
      ceiling > 0 ? 100.0 * result->busbw_gbps() / ceiling : 0);
}

}  // namespace ringmaster
