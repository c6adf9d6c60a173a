// Data patterns whose reductions are exact by construction.
//
// Plain C++ usable from host code and from CUDA kernels (RM_HD). Element i
// of rank r holds a small integer, so sums, products, minima and maxima are
// exactly representable in every data type we test, including bfloat16.
#ifndef RINGMASTER_KERNELS_PATTERNS_H_
#define RINGMASTER_KERNELS_PATTERNS_H_

#include <cstdint>

#ifdef __CUDACC__
#define RM_HD __host__ __device__
#else
#define RM_HD
#endif

namespace ringmaster {

// Reduction codes shared with kernels; values equal v1::ReduceOp's.
enum PatternOp : int { kPatternSum = 1, kPatternProd = 2, kPatternMin = 3,
                       kPatternMax = 4, kPatternAvg = 5 };

// Largest value per element such that `nranks` of them sum exactly in a
// type whose integers are exact up to `exact_limit` (bfloat16: 256,
// float16: 2048, int8: 127). Between 1 and 4.
RM_HD inline int PatternRange(int nranks, int64_t exact_limit) {
  int64_t r = nranks > 0 ? exact_limit / nranks : 4;
  if (r > 4) r = 4;
  if (r < 1) r = 1;
  return static_cast<int>(r);
}

// Input value of element i on `rank`.
RM_HD inline int PatternInput(int op, int rank, int nranks, int range,
                              int64_t i) {
  if (op == kPatternProd) {
    // Exactly one rank holds 2 for each element: the product is 2.
    return ((i + rank) % nranks) == 0 ? 2 : 1;
  }
  return 1 + static_cast<int>((i + 3 * static_cast<int64_t>(rank)) % range);
}

// Expected reduced value of element i (before any division for avg).
RM_HD inline int PatternReduced(int op, int nranks, int range, int64_t i) {
  int acc = PatternInput(op, 0, nranks, range, i);
  for (int r = 1; r < nranks; ++r) {
    int v = PatternInput(op, r, nranks, range, i);
    switch (op) {
      case kPatternProd: acc *= v; break;
      case kPatternMin: acc = v < acc ? v : acc; break;
      case kPatternMax: acc = v > acc ? v : acc; break;
      default: acc += v; break;
    }
  }
  return acc;
}

}  // namespace ringmaster

#endif  // RINGMASTER_KERNELS_PATTERNS_H_
