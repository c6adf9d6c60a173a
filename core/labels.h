// Labels and small figures every view shares: how a case is named in
// tables, plots, comparisons and verdicts, and a result's relative CI.
// Kept apart from the renderers (core/report.h, core/html_report.h), so
// that compare, verdict and the curves need no renderer.
#ifndef RINGMASTER_CORE_LABELS_H_
#define RINGMASTER_CORE_LABELS_H_

#include <string>

#include "ringmaster/v1/plan.pb.h"
#include "ringmaster/v1/result.pb.h"

namespace ringmaster {

// One-line description of a node benchmark, training or plug-in case's
// configuration, e.g. "p2p ce write uni pairs", "gemm bfloat16" or
// "rank_sum scale=3".
std::string BenchLabel(const v1::Case& c);

// Relative half-width of the CI the stopping rule used (the mean's unless
// stats.ci_on_median), or -1 when it is undefined.
double RelativeCi(const v1::Stats& stats);

}  // namespace ringmaster

#endif  // RINGMASTER_CORE_LABELS_H_
