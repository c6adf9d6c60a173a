#include "backends/collective_layout.h"

#include "absl/strings/str_format.h"
#include "core/names.h"

namespace ringmaster {

namespace {
bool SplitsBuffer(v1::Collective c) {
  return c == v1::ALL_GATHER || c == v1::REDUCE_SCATTER || c == v1::ALL_TO_ALL;
}
}  // namespace

int64_t EffectiveCount(v1::Collective collective, int64_t count, int nranks) {
  if (!SplitsBuffer(collective) || nranks < 1) return count;
  return count / nranks * nranks;
}

absl::StatusOr<CollectiveLayout> MakeLayout(const CollectiveConfig& c, int rank,
                                            int nranks) {
  CollectiveLayout l;
  const bool reduction = IsReduction(c.collective);
  l.fill_op = reduction ? static_cast<int>(c.op) : kPatternSum;
  l.range = reduction ? PatternRange(nranks, PatternExactLimit(c.dtype)) : 4;
  l.check.op = l.fill_op;
  l.check.nranks = nranks;
  l.check.range = l.range;
  l.check.rank = rank;
  l.check.integral = c.dtype == v1::INT32 || c.dtype == v1::INT64 ||
                     c.dtype == v1::INT8 || c.dtype == v1::UINT8;
  if (c.root < 0 || c.root >= nranks) {
    return absl::InvalidArgumentError(
        absl::StrFormat("root %d is not a rank of %d", c.root, nranks));
  }
  if (SplitsBuffer(c.collective)) {
    l.chunk = c.count / nranks;
    if (l.chunk == 0) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s of %d elements leaves no element per rank on %d ranks",
          CollectiveName(c.collective), c.count, nranks));
    }
  }
  if (c.in_place &&
      (c.collective == v1::ALL_TO_ALL || c.collective == v1::SEND_RECV)) {
    return absl::UnimplementedError(absl::StrFormat(
        "%s has no in-place form", CollectiveName(c.collective)));
  }
  switch (c.collective) {
    case v1::ALL_REDUCE:
      l.send_count = l.recv_count = l.inplace_count = c.count;
      l.check.mode = kExpectReduced;
      break;
    case v1::REDUCE:
      l.send_count = l.recv_count = l.inplace_count = c.count;
      l.check.mode = kExpectReduced;
      l.check_output = rank == c.root;
      break;
    case v1::BROADCAST:
      l.send_count = l.recv_count = l.inplace_count = c.count;
      l.check.mode = kExpectInputOf;
      l.check.src = c.root;
      l.fill_input = rank == c.root || !c.in_place;
      break;
    case v1::ALL_GATHER:
      l.send_count = l.chunk;
      l.recv_count = l.inplace_count = l.chunk * nranks;
      l.in_offset = rank * l.chunk;
      l.fill_offset = rank * l.chunk;
      l.check.mode = kExpectGathered;
      l.check.chunk = l.chunk;
      break;
    case v1::REDUCE_SCATTER:
      l.send_count = l.inplace_count = l.chunk * nranks;
      l.recv_count = l.chunk;
      l.out_offset = rank * l.chunk;
      l.check.mode = kExpectReduced;
      l.check.offset = rank * l.chunk;
      break;
    case v1::ALL_TO_ALL:
      l.send_count = l.recv_count = l.chunk * nranks;
      l.check.mode = kExpectAllToAll;
      l.check.chunk = l.chunk;
      break;
    case v1::SEND_RECV:
      l.send_count = l.recv_count = c.count;
      l.send_peer = (rank + 1) % nranks;
      l.recv_peer = (rank + nranks - 1) % nranks;
      l.check.mode = kExpectInputOf;
      l.check.src = l.recv_peer;
      break;
    default:
      return absl::InvalidArgumentError("unknown collective");
  }
  return l;
}

}  // namespace ringmaster
