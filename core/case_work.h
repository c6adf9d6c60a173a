// A rough estimate of how long each case of a job takes, relative to the
// others, for the progress display's ETA: by case counts an 8 B all-reduce
// weighs as much as an 8 GiB one, and a sweep's ETA is off by the ratio of
// its largest sizes to its smallest. Only the ratios matter: the display
// scales them by the time the cases done so far took.
#ifndef RINGMASTER_CORE_CASE_WORK_H_
#define RINGMASTER_CORE_CASE_WORK_H_

#include <vector>

#include "ringmaster/v1/plan.pb.h"

namespace ringmaster {

// Seconds one case would take on a nominal machine (10 GB/s for bytes
// moved, 10 TFLOP/s for arithmetic, 20 us per operation): its operations'
// time at the samples its timing asks for, capped by its time limits, plus
// a fixed cost for the case itself. Always > 0.
double EstimatedCaseSeconds(const v1::Case& c);

// The estimate of each case, in order.
std::vector<double> EstimatedCaseSeconds(const std::vector<v1::Case>& cases);

}  // namespace ringmaster

#endif  // RINGMASTER_CORE_CASE_WORK_H_
