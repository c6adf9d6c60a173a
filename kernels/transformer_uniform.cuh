// core/transformer.cc's TransformerUniform on the device, bit for bit: the
// initial weights and inputs of the transformer kernels (training and
// inference) are computed where they are used.
#ifndef RINGMASTER_KERNELS_TRANSFORMER_UNIFORM_CUH_
#define RINGMASTER_KERNELS_TRANSFORMER_UNIFORM_CUH_

#include <cuda_bf16.h>

#include <cstdint>

namespace ringmaster::tk {

__device__ inline double TransformerUniformOnDevice(uint64_t key,
                                                    uint64_t index) {
  uint64_t z = key * 0x9E3779B97F4A7C15ull + index + 0x632BE59BD9B4E019ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) * 0x1.0p-52 - 1.0;
}

// Element j of the decode input that SequenceInputs (decode_kernels.h)
// writes for sequence b at position `position` (sequences `capacity`
// positions apart, rows h wide): key 1's uniform at that element, in
// bfloat16.
__device__ inline __nv_bfloat16 SequenceInputOnDevice(int64_t b,
                                                      int64_t capacity,
                                                      int64_t position,
                                                      int64_t h, int64_t j) {
  const uint64_t at = static_cast<uint64_t>((b * capacity + position) * h + j);
  return __float2bfloat16(
      static_cast<float>(TransformerUniformOnDevice(1, at)));
}

}  // namespace ringmaster::tk

#endif  // RINGMASTER_KERNELS_TRANSFORMER_UNIFORM_CUH_
