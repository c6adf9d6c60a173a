// The server card: what one GPU server delivers, each figure of a
// `card: server` plan's results beside the GPU's datasheet figure
// (core/datasheet.h) and its share of it, a figure far below what the
// model should reach flagged with the slowdown the telemetry saw, and
// the clocks and power seen meanwhile.
#ifndef RINGMASTER_CORE_REPORT_CARD_H_
#define RINGMASTER_CORE_REPORT_CARD_H_

#include <string>
#include <vector>

#include "ringmaster/v1/result.pb.h"

namespace ringmaster {

// The card of `results` (the first GPU's: rank 0's device); "" when none
// of them was measured on a GPU.
std::string RenderServerCard(const std::vector<v1::Result>& results);

}  // namespace ringmaster

#endif  // RINGMASTER_CORE_REPORT_CARD_H_
