// Sums and maxima over the 32 lanes of a warp (every lane gets the
// result), shared by the decode kernels.
#ifndef RINGMASTER_KERNELS_WARP_REDUCE_CUH_
#define RINGMASTER_KERNELS_WARP_REDUCE_CUH_

namespace ringmaster::tk {

__device__ __forceinline__ float WarpSum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float WarpMax(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

}  // namespace ringmaster::tk

#endif  // RINGMASTER_KERNELS_WARP_REDUCE_CUH_
