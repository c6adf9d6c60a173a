// Helpers of the GPU kernel tests: bfloat16 conversions on the host,
// deterministic inputs, the presence of a GPU, and the relative error of a
// bfloat16 block against a float64 reference.
#ifndef RINGMASTER_KERNELS_KERNEL_TEST_VALUES_H_
#define RINGMASTER_KERNELS_KERNEL_TEST_VALUES_H_

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

namespace ringmaster::tk {

inline uint16_t ToBf16(float f) {  // round to nearest even
  uint32_t u = 0;
  std::memcpy(&u, &f, 4);
  u += 0x7FFF + ((u >> 16) & 1);
  return static_cast<uint16_t>(u >> 16);
}
inline double FromBf16(uint16_t h) {
  const uint32_t u = static_cast<uint32_t>(h) << 16;
  float f = 0;
  std::memcpy(&f, &u, 4);
  return f;
}

// Deterministic values in [-1, 1).
inline float Value(uint64_t i) {
  uint64_t z = i * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<float>(static_cast<double>(z >> 11) * 0x1.0p-52 - 1.0);
}

// n bfloat16 values scale * Value(seed + i).
inline std::vector<uint16_t> Bf16Values(int64_t n, uint64_t seed, float scale) {
  std::vector<uint16_t> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = ToBf16(scale * Value(seed + i));
  return v;
}

inline bool HaveGpu() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

// max |got - want| / max |want| over a [tokens x width] block of `got`
// (leading dimension ld, bfloat16) against `want` (dense).
inline double Error(const std::vector<uint16_t>& got, int64_t ld, int64_t col0,
                    const std::vector<double>& want, int64_t tokens,
                    int64_t width) {
  double err = 0, scale = 0;
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t c = 0; c < width; ++c) {
      const double w = want[t * width + c];
      err = std::max(err, std::abs(FromBf16(got[t * ld + col0 + c]) - w));
      scale = std::max(scale, std::abs(w));
    }
  return err / scale;
}

}  // namespace ringmaster::tk

#endif  // RINGMASTER_KERNELS_KERNEL_TEST_VALUES_H_
