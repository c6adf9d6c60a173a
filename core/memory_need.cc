#include "core/memory_need.h"

#include <algorithm>
#include <fstream>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "core/names.h"
#include "core/transformer.h"
#include "core/units.h"

namespace ringmaster {
namespace {

// Saturating a * b for sizes from plans (bounded, but products of three
// 64-bit dimensions may still overflow).
int64_t Mul(int64_t a, int64_t b) {
  if (a <= 0 || b <= 0) return 0;
  if (a > INT64_MAX / b) return INT64_MAX;
  return a * b;
}

int64_t Add(int64_t a, int64_t b) {
  return a > INT64_MAX - b ? INT64_MAX : a + b;
}

int64_t CollectiveBytes(const v1::Case& c, int nranks) {
  const int64_t size = c.size_bytes();
  const int64_t n = std::max(nranks, 1);
  if (c.in_place()) {
    // One buffer: the gathered size for all-gather / reduce-scatter.
    return size;
  }
  switch (c.collective()) {
    case v1::ALL_GATHER:
    case v1::REDUCE_SCATTER:
      return Add(size, size / n);  // the total and one rank's part
    default:
      return Mul(size, 2);  // send and receive buffers
  }
}

int64_t TrainBytes(const v1::Case& c) {
  const v1::TrainSpec& t = c.train();
  const int64_t elem = std::max<int64_t>(DataTypeSize(c.dtype()), 1);
  const int64_t params = Mul(Mul(t.layers(), t.hidden()), t.hidden());
  // Weights and gradients in the model's type; Adam's two moments and
  // master weights in float32.
  int64_t per_param = 2 * elem;
  if (t.optimizer() == "adam") per_param += 8;
  if (t.master_weights()) per_param += 4;
  if (t.inference()) per_param = elem;
  const int64_t activations =
      Mul(Mul(Mul(t.layers() + 1, t.batch()), t.hidden()), 2 * elem);
  return Add(Mul(params, per_param), activations);
}

}  // namespace

int64_t CaseMemoryBytes(const v1::Case& c, int nranks) {
  const int64_t size = c.size_bytes();
  switch (c.bench()) {
    case v1::BENCH_COLLECTIVE:
      return CollectiveBytes(c, nranks);
    case v1::BENCH_P2P:
    case v1::BENCH_HOST_DEVICE:
    case v1::BENCH_LOCAL_COPY:
    case v1::BENCH_LATENCY:
      return Mul(size, 2);  // source and destination
    case v1::BENCH_TRIAD:
      return Mul(size, 3);  // a = b + s * c, `size` bytes each
    case v1::BENCH_GEMM: {
      const v1::GemmShape& g = c.gemm();
      const int64_t elem = std::max<int64_t>(DataTypeSize(c.dtype()), 1);
      // A, B and a C/D of at most 4 bytes per element.
      return Add(Mul(Add(Mul(g.m(), g.k()), Mul(g.k(), g.n())), elem),
                 Mul(Mul(g.m(), g.n()), 4));
    }
    case v1::BENCH_TRAIN:
      return TrainBytes(c);
    case v1::BENCH_TRANSFORMER:
      // float32 (the host's step) keeps the attention scores; bfloat16 is
      // the GPUs' step, whose fused attention keeps none.
      return c.dtype() == v1::BFLOAT16
                 ? TransformerStepBytes(c.transformer(), 2, false)
                 : TransformerStepBytes(c.transformer(), 4, true);
    case v1::BENCH_INFERENCE:
      return static_cast<int64_t>(
          ServeBytes(c.transformer(), c.dtype() == v1::BFLOAT16 ? 2 : 4,
                     static_cast<double>(c.transformer().seq())));
    default:
      return 0;
  }
}

int64_t HostMemoryPerRank(int local_ranks) {
  std::ifstream in("/proc/meminfo");
  std::string key;
  int64_t kib = 0;
  std::string unit;
  while (in >> key >> kib >> unit) {
    if (key == "MemAvailable:")
      return Mul(kib, 1024) / std::max(local_ranks, 1);
  }
  return 0;
}

std::string DoesNotFitReason(int64_t need, int64_t available,
                             const std::string& memory) {
  return absl::StrFormat(
      "needs %s per rank for its buffers; %s of %s is available to each rank",
      FormatBytes(need), FormatBytes(available), memory);
}

}  // namespace ringmaster
