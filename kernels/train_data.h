// Deterministic inputs and initial weights of the training benchmark, as
// inline functions usable from host code and from CUDA kernels (RM_TRAIN_HD),
// so every rank, every backend and the float64 reference build the same
// model. Plain C++ beside the kernels (no CUDA headers are needed to
// include it): core/training.h uses it for the host and the reference,
// kernels/train_kernels.cu on the device.
#ifndef RINGMASTER_KERNELS_TRAIN_DATA_H_
#define RINGMASTER_KERNELS_TRAIN_DATA_H_

#include <cmath>
#include <cstdint>

#ifdef __CUDACC__
#define RM_TRAIN_HD __host__ __device__
#else
#define RM_TRAIN_HD
#endif

namespace ringmaster {

RM_TRAIN_HD inline uint32_t TrainMix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return static_cast<uint32_t>(x);
}

// [-1, 1) from a key.
RM_TRAIN_HD inline float TrainUnit(uint64_t key) {
  return static_cast<float>(TrainMix(key) >> 8) / 8388608.0f - 1.0f;
}

// Input feature `f` of global sample `s`.
RM_TRAIN_HD inline float TrainInput(int64_t s, int64_t f) {
  return TrainUnit((static_cast<uint64_t>(s) << 24) ^ static_cast<uint64_t>(f) ^
                   0x5151000000000000ULL);
}

// Weight (row r = output, column c = input) of `layer`: uniform in
// [-sqrt(3/H), sqrt(3/H)), unit variance through a layer.
RM_TRAIN_HD inline float TrainWeight(int layer, int64_t r, int64_t c,
                                     int64_t hidden) {
  const float scale = sqrtf(3.0f / static_cast<float>(hidden));
  uint64_t key = (static_cast<uint64_t>(layer) << 48) ^
                 (static_cast<uint64_t>(r) << 24) ^ static_cast<uint64_t>(c) ^
                 0xA11CE00000000000ULL;
  return scale * TrainUnit(key);
}

}  // namespace ringmaster

#endif  // RINGMASTER_KERNELS_TRAIN_DATA_H_
