// Data patterns whose reductions are exact by construction.
//
// Plain C++ usable from host code and from CUDA kernels (RM_HD). Element i
// of rank r holds a small integer, so sums, products, minima and maxima are
// exactly representable in every data type we test, including bfloat16.
#ifndef RINGMASTER_KERNELS_PATTERNS_H_
#define RINGMASTER_KERNELS_PATTERNS_H_

#include <cmath>
#include <cstdint>

#ifdef __CUDACC__
#define RM_HD __host__ __device__
#else
#define RM_HD
#endif

namespace ringmaster {

// Reduction codes shared with kernels; values equal v1::ReduceOp's.
enum PatternOp : int {
  kPatternSum = 1,
  kPatternProd = 2,
  kPatternMin = 3,
  kPatternMax = 4,
  kPatternAvg = 5
};

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
      case kPatternProd:
        acc *= v;
        break;
      case kPatternMin:
        acc = v < acc ? v : acc;
        break;
      case kPatternMax:
        acc = v > acc ? v : acc;
        break;
      default:
        acc += v;
        break;
    }
  }
  return acc;
}

// Largest integer a type holds exactly, by v1::DataType value (pattern
// sizing): bfloat16 256, float16 2048, int8 127, uint8 255; wider types 2^24.
RM_HD inline int64_t PatternExactLimit(int dtype) {
  switch (dtype) {
    case 2:
      return 256;  // BFLOAT16
    case 3:
      return 2048;  // FLOAT16
    case 7:
      return 127;  // INT8
    case 8:
      return 255;  // UINT8
    default:
      return int64_t{1} << 24;
  }
}

// How the expected value of output element i is derived.
enum PatternCheckMode : int {
  kExpectReduced = 0,  // PatternReduced(op, i + offset) (÷ nranks for avg)
  kExpectInputOf = 1,  // PatternInput(op, src, i + offset)
  kExpectGathered =
      2,  // src = (i + offset) / chunk; PatternInput(op, src, i + offset)
  kExpectAllToAll =
      3,  // src = i / chunk; PatternInput(op, src, rank * chunk + i % chunk)
};

// What a rank's output must hold. Plain data, copied to kernels by value.
struct PatternCheck {
  int mode = kExpectReduced;
  int op = kPatternSum;
  int nranks = 1;
  int range = 1;
  int src = 0;            // kExpectInputOf
  int rank = 0;           // kExpectAllToAll: this rank
  int64_t offset = 0;     // global index of output element 0
  int64_t chunk = 1;      // elements per rank (gathered, all-to-all)
  bool integral = false;  // integer type: avg truncates
};

// Expected value of output element i (exact except avg on floating types).
RM_HD inline double PatternExpected(const PatternCheck& c, int64_t i) {
  switch (c.mode) {
    case kExpectInputOf:
      return PatternInput(c.op, c.src, c.nranks, c.range, i + c.offset);
    case kExpectGathered: {
      int64_t g = i + c.offset;
      return PatternInput(c.op, static_cast<int>(g / c.chunk), c.nranks,
                          c.range, g);
    }
    case kExpectAllToAll:
      return PatternInput(c.op, static_cast<int>(i / c.chunk), c.nranks,
                          c.range, c.rank * c.chunk + i % c.chunk);
    default: {
      double v = PatternReduced(c.op, c.nranks, c.range, i + c.offset);
      if (c.op == kPatternAvg) {
        v = c.integral ? static_cast<double>(static_cast<int64_t>(v) / c.nranks)
                       : v / c.nranks;
      }
      return v;
    }
  }
}

// True when `got` equals `expected`: exactly, except avg on floating types,
// whose division rounds (relative 1e-2 for bfloat16, 1e-3 for float16,
// 1e-6 otherwise). NaN never matches.
RM_HD inline bool PatternMatches(double got, double expected,
                                 const PatternCheck& c, int dtype) {
  double tol = 0;
  if (c.mode == kExpectReduced && c.op == kPatternAvg && !c.integral) {
    tol = dtype == 2 ? 1e-2 : dtype == 3 ? 1e-3 : 1e-6;
  }
  double err = got - expected;
  if (err < 0) err = -err;
  return err <= tol * (expected < 0 ? -expected : expected);
}

// Byte i of a copy benchmark's source buffer for `seed`: a hash of the
// offset, so a copy to the wrong place or of stale data shows as mismatches.
RM_HD inline uint8_t CopyPatternByte(uint32_t seed, int64_t i) {
  uint32_t x = static_cast<uint32_t>(i) * 0x9E3779B1u ^
               static_cast<uint32_t>(i >> 32) ^ seed;
  x ^= x >> 15;
  x *= 0x85EBCA6Bu;
  x ^= x >> 13;
  return static_cast<uint8_t>(x);
}

// Element i of a GEMM operand: standard normal (Box-Muller over two hashes
// of i), like torch.randn, never all zeros (zeros hide unwritten outputs
// and run faster than real data). The distribution matters on a
// power-capped GPU: uniform [-1, 1) bf16 inputs ran ~11% slower than
// normal ones on an H200 (bench/results/h200x2/p2p.md).
RM_HD inline float GemmInputValue(uint32_t seed, int64_t i) {
  uint32_t x = static_cast<uint32_t>(i) * 0x9E3779B1u ^
               static_cast<uint32_t>(i >> 32) ^ (seed * 0x27D4EB2Fu);
  x ^= x >> 16;
  x *= 0x7FEB352Du;
  x ^= x >> 15;
  x *= 0x846CA68Bu;
  x ^= x >> 16;
  uint32_t y = x * 0x9E3779B1u + 0x632BE5ABu;
  y ^= y >> 15;
  y *= 0x2C1B3C6Du;
  y ^= y >> 12;
  float u1 = (static_cast<float>(x >> 8) + 1.0f) / 16777217.0f;  // (0, 1]
  float u2 = static_cast<float>(y >> 8) / 16777216.0f;           // [0, 1)
  return sqrtf(-2.0f * logf(u1)) * cosf(6.2831853f * u2);
}

}  // namespace ringmaster

#endif  // RINGMASTER_KERNELS_PATTERNS_H_
