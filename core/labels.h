// Labels and small figures every view shares: how a case is named in
// tables, plots, comparisons and verdicts, and a result's relative CI.
// Kept apart from the renderers (core/report.h, core/html_report.h), so
// that compare, verdict and the curves need no renderer.
#ifndef RINGMASTER_CORE_LABELS_H_
#define RINGMASTER_CORE_LABELS_H_

#include <string>
#include <string_view>

#include "ringmaster/v1/plan.pb.h"
#include "ringmaster/v1/result.pb.h"

namespace ringmaster {

// One-line description of a node benchmark, training or plug-in case's
// configuration, e.g. "p2p ce write uni pairs", "gemm bfloat16" or
// "rank_sum scale=3".
std::string BenchLabel(const v1::Case& c);

// `text` safe to print on a terminal, in a CSV cell or a log line: control
// characters as \n, \t, \r or \xHH (C1 controls and bytes that are not
// UTF-8 as \xHH too); printable UTF-8 unchanged. JSON output keeps the exact
// text instead (its encoder escapes).
std::string Printable(std::string_view text);

// Relative half-width of the CI the stopping rule used (the mean's unless
// stats.ci_on_median), or -1 when it is undefined.
double RelativeCi(const v1::Stats& stats);

}  // namespace ringmaster

#endif  // RINGMASTER_CORE_LABELS_H_
