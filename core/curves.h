// The shape of bus-bandwidth curves: where each collective's busbw peaks,
// from which message size it first reaches half and 90% of that peak, and
// where it clearly falls as messages grow. A fall is a switch of
// algorithm, protocol or transport (NCCL's tuner, Open MPI's tuned
// decision table), a buffer or cache limit, or interference: the figure
// says where to look, and the NCCL choice on both sides when the results
// carry it (`run --nccl-algorithms`).
#ifndef RINGMASTER_CORE_CURVES_H_
#define RINGMASTER_CORE_CURVES_H_

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "ringmaster/v1/result.pb.h"

namespace ringmaster {

// A drop: busbw at `to_size` (the next measured size after `from_size`)
// is at least kCurveDropShare lower, and the two points' 95% intervals do
// not overlap (so noise alone does not make one).
inline constexpr double kCurveDropShare = 0.2;

struct CurveDrop {
  int64_t from_size = 0;
  int64_t to_size = 0;
  double from_gbps = 0;
  double to_gbps = 0;
  // "Ring/LL128"-style NCCL choices of the two points when labelled.
  std::string from_choice;
  std::string to_choice;
};

struct BusbwCurve {
  std::string group;   // "all_reduce, 2 ranks, pipelined timing"
  std::string series;  // what differs inside the group: "float32 sum out"
  int points = 0;      // measured sizes
  int64_t peak_size = 0;
  double peak_gbps = 0;
  int64_t half_size = 0;    // the first size with busbw >= 50% of the peak
  int64_t ninety_size = 0;  // the first size with busbw >= 90% of the peak
  std::vector<CurveDrop> drops;
};

// One curve per series of OK collective results with at least 3 sizes,
// grouped as the HTML report's plots are (collective, ranks, timing mode;
// a series per spec / variant / dtype / op / placement, named by what
// differs). Repeated runs of a point (run --rounds, several jobs) count
// by their median busbw, and their interval spans all of theirs.
std::vector<BusbwCurve> BusbwCurves(const std::vector<v1::Result>& results);

// "8 MiB -> 32 MiB: 60 -> 3 GB/s (-95%": the drop's sizes, busbw and
// change, its parenthesis left open for what a view adds.
std::string DropSpanText(const CurveDrop& drop);

// What NCCL chose on the drop's two sides: "NCCL Ring/LL128 -> Ring/Simple",
// "NCCL Ring/Simple on both", or empty when the results carry no choice.
std::string DropChoiceText(const CurveDrop& drop);

// The terminal section: one line per curve. Empty when there is no curve.
std::string RenderBusbwCurves(const std::vector<v1::Result>& results);

// Collective results that draw busbw curves (OK, busbw > 0), grouped by
// collective, rank count and timing mode in the order first seen.
struct CollectiveGroup {
  std::string title;  // "all_reduce, 2 ranks, pipelined timing"
  std::vector<const v1::Result*> results;
  // What differs inside the group: "spec", "job", "variant", "dtype", "op",
  // "place" (CollectiveSeriesLabel's `vary`).
  std::set<std::string> vary;
};
std::vector<CollectiveGroup> GroupCollectiveResults(
    const std::vector<v1::Result>& results);

// A series name from what varies inside its group ("spec", "variant",
// "dtype", "op", "place"); the spec name when nothing does.
std::string CollectiveSeriesLabel(const v1::Result& r,
                                  const std::set<std::string>& vary);

}  // namespace ringmaster

#endif  // RINGMASTER_CORE_CURVES_H_
