// Sums and maxima over the 32 lanes of a warp, shared by the decode
// kernels.
#ifndef RINGMASTER_KERNELS_WARP_REDUCE_CUH_
#define RINGMASTER_KERNELS_WARP_REDUCE_CUH_

namespace ringmaster::tk {

// Every lane gets the sum (the maximum) of the lanes' v.
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

// One step of WarpSumsOfLanes: lanes with bit N/2 set keep the upper half
// of their N values, the others the lower half, each adding the half its
// partner (lane ^ N/2) gives up.
template <int N>
__device__ __forceinline__ void WarpHalve(float (&v)[32], int lane) {
  constexpr int h = N / 2;
  const bool upper = (lane & h) != 0;
#pragma unroll
  for (int k = 0; k < h; ++k) {
    const float give = upper ? v[k] : v[k + h];
    const float keep = upper ? v[k + h] : v[k];
    v[k] = keep + __shfl_xor_sync(0xffffffffu, give, h);
  }
}

// 32 sums over the warp at once: lane L gets the sum over the lanes of
// their v[L] (v is left as scratch). 31 shuffles, where 32 WarpSums take
// 160.
__device__ __forceinline__ float WarpSumsOfLanes(float (&v)[32]) {
  const int lane = static_cast<int>(threadIdx.x & 31);
  WarpHalve<32>(v, lane);
  WarpHalve<16>(v, lane);
  WarpHalve<8>(v, lane);
  WarpHalve<4>(v, lane);
  WarpHalve<2>(v, lane);
  return v[0];
}

}  // namespace ringmaster::tk

#endif  // RINGMASTER_KERNELS_WARP_REDUCE_CUH_
