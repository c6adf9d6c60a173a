// Buffer layout and verification rules of each collective, with
// nccl-tests' conventions, shared by every backend.
//
// `count` follows nccl-tests: the element count of the whole buffer for
// all-reduce, broadcast, reduce and send/recv; the gathered (total) count for
// all-gather, reduce-scatter and all-to-all, each rank contributing or
// receiving count / nranks.
#ifndef RINGMASTER_BACKENDS_COLLECTIVE_LAYOUT_H_
#define RINGMASTER_BACKENDS_COLLECTIVE_LAYOUT_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "backends/backend.h"
#include "kernels/patterns.h"

namespace ringmaster {

struct CollectiveLayout {
  int64_t chunk =
      0;  // elements per rank (all-gather, reduce-scatter, all-to-all)
  int64_t send_count = 0;  // elements the operation reads on this rank
  int64_t recv_count = 0;  // elements the operation writes on this rank
  // Out-of-place: separate send and receive buffers of the sizes above.
  // In-place: one buffer of `inplace_count` elements; the input starts at
  // `in_offset` and the output at `out_offset` elements.
  int64_t inplace_count = 0;
  int64_t in_offset = 0;
  int64_t out_offset = 0;
  // The input: element j holds PatternInput(fill_op, rank, nranks, range,
  // j + fill_offset). `fill_input` is false where the input is ignored
  // (broadcast on non-root ranks), so in-place outputs start poisoned.
  bool fill_input = true;
  int fill_op = kPatternSum;
  int64_t fill_offset = 0;
  int range = 4;
  // The output: checked against `check` when `check_output`.
  bool check_output = true;
  PatternCheck check;
  int send_peer = -1;  // send/recv ring neighbours
  int recv_peer = -1;
};

// Layout of `config` on `rank` of `nranks`. InvalidArgument when the count
// does not hold one element per rank; Unimplemented for in-place all-to-all
// and send/recv, which nccl-tests does not define either.
absl::StatusOr<CollectiveLayout> MakeLayout(const CollectiveConfig& config,
                                            int rank, int nranks);

// Count actually used (rounded down to a multiple of nranks where the
// collective splits the buffer); what results report.
int64_t EffectiveCount(v1::Collective collective, int64_t count, int nranks);

}  // namespace ringmaster

#endif  // RINGMASTER_BACKENDS_COLLECTIVE_LAYOUT_H_
