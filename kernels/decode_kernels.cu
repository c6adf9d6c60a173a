#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernels/decode_kernels.h"
#include "kernels/transformer_uniform.cuh"
#include "kernels/warp_reduce.cuh"

namespace ringmaster::tk {
namespace {

using bf16 = __nv_bfloat16;

__global__ void SequenceInputsKernel(bf16* x, int64_t rows, int64_t h,
                                     int64_t capacity, int64_t first,
                                     const int* pos, int64_t n) {
  const int64_t start = pos != nullptr ? *pos : first;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t j = i % h, row = i / h, b = row / rows, t = row % rows;
    x[i] = SequenceInputOnDevice(b, capacity, start + t, h, j);
  }
}

// Programmatic dependent launch (sm_90): Trigger lets the next kernel in
// the stream start once every block of this one has; Wait blocks until the
// kernel before has finished and its writes are visible. Both are no-ops
// in a kernel not launched that way.
__device__ __forceinline__ void Trigger() {
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}
__device__ __forceinline__ void Wait() {
  asm volatile("griddepcontrol.wait;" ::: "memory");
}

__device__ __forceinline__ void Unpack8(const uint4& v, float out[8]) {
  const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&v);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 f = __bfloat1622float2(h[i]);
    out[2 * i] = f.x;
    out[2 * i + 1] = f.y;
  }
}

// Launches kernel on grid x threads, as a programmatic dependent of the
// stream's previous kernel when pdl.
template <typename... Params, typename... Args>
cudaError_t Launch(void (*kernel)(Params...), dim3 grid, int threads, bool pdl,
                   cudaStream_t s, Args... args) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = dim3(static_cast<unsigned>(threads));
  cfg.stream = s;
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr.val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = &attr;
  cfg.numAttrs = pdl ? 1 : 0;
  return cudaLaunchKernelEx(&cfg, kernel, static_cast<Params>(args)...);
}

// --- DecodeGemv -------------------------------------------------------------
// Block (tile, split): 256 columns of W (a warp reads 16 bytes per lane of
// one row: 512 contiguous bytes) over `span` rows starting at split * span;
// warp w takes rows w, w + 8, ... four at a time. The block's slice of
// in(x) is staged in shared memory as fp32.
constexpr int kGemvThreads = 256;
constexpr int kGemvCols = 256;
constexpr int kGemvMaxSpan = 512;
constexpr int kGemvUnroll = 4;
constexpr int kGemvRowStep = kGemvThreads / 32 * kGemvUnroll;  // 32

struct GemvParams {
  const bf16* x;
  const bf16* g;
  const bf16* w;
  const bf16* c;
  bf16* y;
  float* partial;
  unsigned* counters;
  int64_t k, m, span;
  int splits;
  float eps;
  DecodeInput input;
};

template <int R>
__global__ void __launch_bounds__(kGemvThreads) DecodeGemvKernel(GemvParams p) {
  __shared__ float xs[R][kGemvMaxSpan];
  __shared__ float4 red[kGemvThreads / 32 * 64];
  __shared__ float stat[R][kGemvThreads / 32];
  __shared__ bool last;
  const int tid = static_cast<int>(threadIdx.x), warp = tid >> 5,
            lane = tid & 31;
  const int64_t tile = blockIdx.x, split = blockIdx.y;
  const int64_t col0 = tile * kGemvCols, col = col0 + lane * 8;
  const int64_t k0 = split * p.span;
  const int rows = static_cast<int>(min(p.span, p.k - k0));
  const bool colok = col < p.m;
  const bf16* wp = p.w + k0 * p.m + col;
  auto load = [&](uint4(&v)[kGemvUnroll], int r) {
#pragma unroll
    for (int u = 0; u < kGemvUnroll; ++u) {
      const int rr = r + u * (kGemvThreads / 32);
      v[u] = colok && rr < rows
                 ? __ldcs(reinterpret_cast<const uint4*>(wp + rr * p.m))
                 : make_uint4(0, 0, 0, 0);
    }
  };
  Trigger();
  // The first weights do not depend on the kernel before: in flight before
  // waiting for its results, and while in(x) is staged.
  uint4 cur[kGemvUnroll];
  load(cur, warp);
  Wait();
  const int padded = (rows + kGemvRowStep - 1) / kGemvRowStep * kGemvRowStep;
  // RMSNorm: in(x) W = rinv (x * g) W, so x * g is staged and the sums
  // are scaled by rinv at the end; each block sums the squares of the
  // whole rows itself (a few KiB from L2, in the same round trip as the
  // staging), which costs less than a kernel of its own.
  const bool norm = p.input == DecodeInput::kRmsNorm;
  if (norm) {
#pragma unroll
    for (int b = 0; b < R; ++b) {
      float ss = 0, v[8];
      for (int64_t j = tid * 8; j < p.k; j += kGemvThreads * 8) {
        Unpack8(*reinterpret_cast<const uint4*>(p.x + b * p.k + j), v);
#pragma unroll
        for (int c = 0; c < 8; ++c) ss += v[c] * v[c];
      }
      ss = WarpSum(ss);
      if (lane == 0) stat[b][warp] = ss;
    }
  }
  for (int i = tid; i < R * padded; i += kGemvThreads) {
    const int b = i / padded, r = i % padded;
    float v = 0;
    if (r < rows) {
      const int64_t j = k0 + r;
      if (p.input == DecodeInput::kSwiglu) {
        const float gate = __bfloat162float(p.x[b * 2 * p.k + j]),
                    up = __bfloat162float(p.x[b * 2 * p.k + p.k + j]);
        v = gate / (1.0f + __expf(-gate)) * up;
      } else {
        v = __bfloat162float(p.x[b * p.k + j]);
        if (norm) v *= __bfloat162float(p.g[j]);
      }
    }
    xs[b][r] = v;
  }
  __syncthreads();
  float rinv[R];
#pragma unroll
  for (int b = 0; b < R; ++b) {
    rinv[b] = 1.0f;
    if (norm) {
      float ss = 0;
      for (int w = 0; w < kGemvThreads / 32; ++w) ss += stat[b][w];
      rinv[b] = rsqrtf(ss / static_cast<float>(p.k) + p.eps);
    }
  }

  float acc[R][8];
#pragma unroll
  for (int b = 0; b < R; ++b)
#pragma unroll
    for (int c = 0; c < 8; ++c) acc[b][c] = 0;
  // The next rows' weights are loaded while the current ones are used.
  for (int r = warp; r < padded; r += kGemvRowStep) {
    uint4 next[kGemvUnroll];
    const bool more = r + kGemvRowStep < padded;
    if (more) load(next, r + kGemvRowStep);
#pragma unroll
    for (int u = 0; u < kGemvUnroll; ++u) {
      const int rr = r + u * (kGemvThreads / 32);
      float wf[8];
      Unpack8(cur[u], wf);
#pragma unroll
      for (int b = 0; b < R; ++b) {
        const float xv = xs[b][rr];
#pragma unroll
        for (int c = 0; c < 8; ++c) acc[b][c] = fmaf(xv, wf[c], acc[b][c]);
      }
    }
    if (more) {
#pragma unroll
      for (int u = 0; u < kGemvUnroll; ++u) cur[u] = next[u];
    }
  }

  // The 8 warps' sums per column; then this split's result.
  const int64_t mine = col0 + tid;
  float* redf = reinterpret_cast<float*>(red);
#pragma unroll
  for (int b = 0; b < R; ++b) {
    red[warp * 64 + lane * 2] =
        make_float4(acc[b][0], acc[b][1], acc[b][2], acc[b][3]);
    red[warp * 64 + lane * 2 + 1] =
        make_float4(acc[b][4], acc[b][5], acc[b][6], acc[b][7]);
    __syncthreads();
    float sum = 0;
#pragma unroll
    for (int w = 0; w < kGemvThreads / 32; ++w) sum += redf[w * 256 + tid];
    sum *= rinv[b];
    if (mine < p.m) {
      if (p.splits == 1) {
        if (p.c != nullptr) sum += __bfloat162float(p.c[b * p.m + mine]);
        p.y[b * p.m + mine] = __float2bfloat16(sum);
      } else {
        p.partial[(split * R + b) * p.m + mine] = sum;
      }
    }
    __syncthreads();
  }
  if (p.splits == 1) return;
  __threadfence();
  __syncthreads();
  if (tid == 0)
    last =
        atomicAdd(&p.counters[tile], 1u) == static_cast<unsigned>(p.splits - 1);
  __syncthreads();
  if (!last) return;
  __threadfence();
  if (mine < p.m) {
#pragma unroll
    for (int b = 0; b < R; ++b) {
      float sum = 0;
#pragma unroll 8
      for (int sp = 0; sp < p.splits; ++sp)
        sum += __ldcg(&p.partial[(sp * int64_t{R} + b) * p.m + mine]);
      if (p.c != nullptr) sum += __bfloat162float(p.c[b * p.m + mine]);
      p.y[b * p.m + mine] = __float2bfloat16(sum);
    }
  }
  if (tid == 0) p.counters[tile] = 0;
}

// --- DecodeAttention --------------------------------------------------------
// Block (kv head, sequence, split): the group's query heads (at most 8)
// against keys split * 64 .. + 63 (of 0 .. *pos): scores by warps (a key
// per warp at a time, lanes over the head dimension), the block's softmax
// pieces (max, sum of exponentials, unnormalized output), then the last
// block of the (sequence, kv head) merges the splits.
constexpr int kAttnThreads = 128;
constexpr int kAttnKeys = 64;
constexpr int kAttnMaxGroup = 8;
constexpr int kAttnCounterBase = kDecodeCounters / 2;

struct AttnParams {
  const bf16* qkv;
  bf16* kcache;
  bf16* vcache;
  bf16* out;
  const float* cos_table;
  const float* sin_table;
  const int* pos;
  float* partial;
  unsigned* counters;
  int64_t ld, ld_out, capacity;
  int heads, kv_heads, hd, splits;
  float scale;
};

__global__ void __launch_bounds__(kAttnThreads)
    DecodeAttentionKernel(AttnParams p) {
  __shared__ float qs[kAttnMaxGroup][128];
  __shared__ float kcur[128], vcur[128];
  __shared__ float sc[kAttnMaxGroup][kAttnKeys];
  __shared__ float part[kAttnMaxGroup * 128];
  __shared__ bool last;
  Trigger();
  Wait();
  const int tid = static_cast<int>(threadIdx.x), warp = tid >> 5,
            lane = tid & 31;
  const int kvh = static_cast<int>(blockIdx.x), split = blockIdx.z;
  const int64_t b = blockIdx.y;
  const int g = p.heads / p.kv_heads, hd = p.hd, half = hd / 2;
  const int64_t kw = int64_t{p.kv_heads} * hd;
  const int pos = *p.pos;
  const int j0 = split * kAttnKeys, j1 = min(j0 + kAttnKeys, pos + 1);
  const bf16* row = p.qkv + b * p.ld;
  const bf16* krow = row + int64_t{p.heads} * hd + kvh * hd;
  const bf16* vrow = krow + kw;
  const float* cs = p.cos_table + int64_t{pos} * half;
  const float* sn = p.sin_table + int64_t{pos} * half;
  for (int i = tid; i < g * half; i += kAttnThreads) {
    const int h = i / half, d = i % half;
    const bf16* q = row + (int64_t{kvh} * g + h) * hd;
    const float a = __bfloat162float(q[d]), e = __bfloat162float(q[d + half]);
    qs[h][d] = a * cs[d] - e * sn[d];
    qs[h][d + half] = a * sn[d] + e * cs[d];
  }
  // The new key as the cache will hold it (rounded to bfloat16).
  for (int d = tid; d < half; d += kAttnThreads) {
    const float a = __bfloat162float(krow[d]),
                e = __bfloat162float(krow[d + half]);
    kcur[d] = __bfloat162float(__float2bfloat16(a * cs[d] - e * sn[d]));
    kcur[d + half] = __bfloat162float(__float2bfloat16(a * sn[d] + e * cs[d]));
  }
  for (int d = tid; d < hd; d += kAttnThreads)
    vcur[d] = __bfloat162float(vrow[d]);
  __syncthreads();
  const int64_t at = (b * p.capacity) * kw + kvh * hd;  // key 0 of this head
  if (split == 0) {
    for (int d = tid; d < hd; d += kAttnThreads) {
      p.kcache[at + int64_t{pos} * kw + d] = __float2bfloat16(kcur[d]);
      p.vcache[at + int64_t{pos} * kw + d] = vrow[d];
    }
  }
  // Scores: lane holds dimensions lane * per .. + per - 1 of each query.
  const int per = hd / 32;  // 2 or 4
  float qr[kAttnMaxGroup][4];
#pragma unroll
  for (int h = 0; h < kAttnMaxGroup; ++h)
#pragma unroll
    for (int c = 0; c < 4; ++c)
      qr[h][c] = h < g && c < per ? qs[h][lane * per + c] : 0.0f;
  for (int j = j0 + warp; j < j1; j += kAttnThreads / 32) {
    float kv[4] = {0, 0, 0, 0};
    if (j == pos) {
      for (int c = 0; c < per; ++c) kv[c] = kcur[lane * per + c];
    } else {
      const bf16* kp = p.kcache + at + int64_t{j} * kw + lane * per;
      if (per == 4) {
        const uint2 raw = *reinterpret_cast<const uint2*>(kp);
        const __nv_bfloat162* h2 =
            reinterpret_cast<const __nv_bfloat162*>(&raw);
        const float2 a = __bfloat1622float2(h2[0]),
                     e = __bfloat1622float2(h2[1]);
        kv[0] = a.x, kv[1] = a.y, kv[2] = e.x, kv[3] = e.y;
      } else {
        const float2 a =
            __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(kp));
        kv[0] = a.x, kv[1] = a.y;
      }
    }
#pragma unroll
    for (int h = 0; h < kAttnMaxGroup; ++h) {
      if (h >= g) break;
      float dot = 0;
#pragma unroll
      for (int c = 0; c < 4; ++c) dot = fmaf(qr[h][c], kv[c], dot);
      dot = WarpSum(dot);
      if (lane == 0) sc[h][j - j0] = dot * p.scale;
    }
  }
  __syncthreads();
  // The block's max and sum of exponentials per query head (warp per head).
  __shared__ float mx_s[kAttnMaxGroup], sum_s[kAttnMaxGroup];
  for (int h = warp; h < g; h += kAttnThreads / 32) {
    float mx = -INFINITY;
    for (int t = lane; t < j1 - j0; t += 32) mx = fmaxf(mx, sc[h][t]);
    mx = WarpMax(mx);
    float sum = 0;
    for (int t = lane; t < j1 - j0; t += 32) {
      const float e = __expf(sc[h][t] - mx);
      sc[h][t] = e;
      sum += e;
    }
    sum = WarpSum(sum);
    if (lane == 0) {
      mx_s[h] = mx;
      sum_s[h] = sum;
    }
  }
  __syncthreads();
  // Unnormalized outputs: thread (piece, d) over keys j0 + piece, + pieces.
  const int pieces = kAttnThreads / hd, piece = tid / hd, d = tid % hd;
  float acc[kAttnMaxGroup];
#pragma unroll
  for (int h = 0; h < kAttnMaxGroup; ++h) acc[h] = 0;
  for (int j = j0 + piece; j < j1; j += pieces) {
    const float v = j == pos
                        ? vcur[d]
                        : __bfloat162float(p.vcache[at + int64_t{j} * kw + d]);
#pragma unroll
    for (int h = 0; h < kAttnMaxGroup; ++h)
      if (h < g) acc[h] = fmaf(sc[h][j - j0], v, acc[h]);
  }
  for (int h = 0; h < g; ++h) part[(piece * g + h) * hd + d] = acc[h];
  __syncthreads();
  const int64_t stride = int64_t{g} * (hd + 2);
  float* mine =
      p.partial + ((b * p.kv_heads + kvh) * p.splits + split) * stride;
  for (int i = tid; i < g * hd; i += kAttnThreads) {
    float o = 0;
    for (int q = 0; q < pieces; ++q) o += part[q * g * hd + i];
    mine[i] = o;
  }
  if (tid < g) {
    mine[g * hd + tid] = j1 > j0 ? mx_s[tid] : -INFINITY;
    mine[g * hd + g + tid] = j1 > j0 ? sum_s[tid] : 0.0f;
  }
  __threadfence();
  __syncthreads();
  unsigned* counter = &p.counters[kAttnCounterBase + b * p.kv_heads + kvh];
  if (tid == 0)
    last = atomicAdd(counter, 1u) == static_cast<unsigned>(p.splits - 1);
  __syncthreads();
  if (!last) return;
  __threadfence();
  const float* all = p.partial + (b * p.kv_heads + kvh) * p.splits * stride;
  const int used = (pos + kAttnKeys) / kAttnKeys;  // splits holding keys
  for (int i = tid; i < g * hd; i += kAttnThreads) {
    const int h = i / hd;
    float m = -INFINITY;
    for (int sp = 0; sp < used; ++sp)
      m = fmaxf(m, __ldcg(&all[sp * stride + g * hd + h]));
    float l = 0, o = 0;
    for (int sp = 0; sp < used; ++sp) {
      const float f = __expf(__ldcg(&all[sp * stride + g * hd + h]) - m);
      l += f * __ldcg(&all[sp * stride + g * hd + g + h]);
      o += f * __ldcg(&all[sp * stride + i]);
    }
    p.out[b * p.ld_out + int64_t{kvh} * g * hd + i] = __float2bfloat16(o / l);
  }
  if (tid == 0) *counter = 0;
}

__global__ void AdvanceKernel(int* pos) { *pos += 1; }

unsigned Blocks(int64_t n, int threads) {
  const int64_t b = (n + threads - 1) / threads;
  return static_cast<unsigned>(b < 65535 * 64 ? b : 65535 * 64);
}

int Sms() {
  int device = 0, sms = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) !=
          cudaSuccess) {
    return 132;
  }
  return sms;
}

// Rows of W per block: enough blocks for four per SM, each a multiple of
// kGemvRowStep rows and at most kGemvMaxSpan.
int64_t GemvSpan(int64_t k, int64_t m) {
  const int64_t tiles = (m + kGemvCols - 1) / kGemvCols;
  const int64_t want = std::max<int64_t>(1, (4 * Sms() + tiles - 1) / tiles);
  int64_t span = (k + want - 1) / want;
  span = (span + kGemvRowStep - 1) / kGemvRowStep * kGemvRowStep;
  return std::min<int64_t>(span, kGemvMaxSpan);
}

template <int R>
cudaError_t LaunchGemv(const GemvParams& p, bool pdl, cudaStream_t s) {
  const dim3 grid(static_cast<unsigned>((p.m + kGemvCols - 1) / kGemvCols),
                  static_cast<unsigned>(p.splits));
  return Launch(DecodeGemvKernel<R>, grid, kGemvThreads, pdl, s, p);
}

}  // namespace

cudaError_t SequenceInputs(void* x, int64_t batch, int64_t rows, int64_t h,
                           int64_t capacity, int64_t first, const int* pos,
                           cudaStream_t s) {
  const int64_t n = batch * rows * h;
  SequenceInputsKernel<<<Blocks(n, 256), 256, 0, s>>>(
      static_cast<bf16*>(x), rows, h, capacity, first, pos, n);
  return cudaGetLastError();
}

int64_t DecodeGemvScratch(int64_t rows, int64_t k, int64_t m) {
  const int64_t splits = (k + GemvSpan(k, m) - 1) / GemvSpan(k, m);
  return splits > 1 ? splits * rows * m : 0;
}

cudaError_t DecodeGemv(DecodeInput input, const void* x, const void* g,
                       float eps, const void* w, const void* c, void* y,
                       int64_t rows, int64_t k, int64_t m,
                       const DecodeScratch& scratch, bool pdl, cudaStream_t s) {
  if (rows < 1 || rows > kDecodeGemvMaxRows || m % 8 != 0 || k < 1 ||
      (input == DecodeInput::kRmsNorm && k % 8 != 0) ||
      (m + kGemvCols - 1) / kGemvCols > kAttnCounterBase ||
      DecodeGemvScratch(rows, k, m) > scratch.partial_floats) {
    return cudaErrorInvalidValue;
  }
  GemvParams p{};
  p.x = static_cast<const bf16*>(x);
  p.g = static_cast<const bf16*>(g);
  p.w = static_cast<const bf16*>(w);
  p.c = static_cast<const bf16*>(c);
  p.y = static_cast<bf16*>(y);
  p.partial = scratch.partial;
  p.counters = scratch.counters;
  p.k = k;
  p.m = m;
  p.span = GemvSpan(k, m);
  p.splits = static_cast<int>((k + p.span - 1) / p.span);
  p.eps = eps;
  p.input = input;
  switch (rows) {
    case 1:
      return LaunchGemv<1>(p, pdl, s);
    case 2:
      return LaunchGemv<2>(p, pdl, s);
    case 3:
      return LaunchGemv<3>(p, pdl, s);
    case 4:
      return LaunchGemv<4>(p, pdl, s);
    case 5:
      return LaunchGemv<5>(p, pdl, s);
    case 6:
      return LaunchGemv<6>(p, pdl, s);
    case 7:
      return LaunchGemv<7>(p, pdl, s);
    default:
      return LaunchGemv<8>(p, pdl, s);
  }
}

int64_t DecodeAttentionScratch(int64_t batch, int64_t heads, int64_t hd,
                               int64_t capacity) {
  const int64_t splits = (capacity + kAttnKeys - 1) / kAttnKeys;
  // Per (sequence, kv head, split): the group's outputs, maxima and sums;
  // heads * (hd + 2) over the kv heads.
  return batch * splits * heads * (hd + 2);
}

cudaError_t DecodeAttention(const void* qkv, int64_t ld, void* kcache,
                            void* vcache, void* out, int64_t ld_out,
                            int64_t batch, int64_t heads, int64_t kv_heads,
                            int64_t hd, int64_t capacity,
                            const float* cos_table, const float* sin_table,
                            const int* pos, float scale,
                            const DecodeScratch& scratch, bool pdl,
                            cudaStream_t s) {
  if ((hd != 64 && hd != 128) || kv_heads < 1 || heads % kv_heads != 0 ||
      heads / kv_heads > kAttnMaxGroup ||
      batch * kv_heads > kDecodeCounters - kAttnCounterBase ||
      DecodeAttentionScratch(batch, heads, hd, capacity) >
          scratch.partial_floats) {
    return cudaErrorInvalidValue;
  }
  AttnParams p{};
  p.qkv = static_cast<const bf16*>(qkv);
  p.kcache = static_cast<bf16*>(kcache);
  p.vcache = static_cast<bf16*>(vcache);
  p.out = static_cast<bf16*>(out);
  p.cos_table = cos_table;
  p.sin_table = sin_table;
  p.pos = pos;
  p.partial = scratch.partial;
  p.counters = scratch.counters;
  p.ld = ld;
  p.ld_out = ld_out;
  p.capacity = capacity;
  p.heads = static_cast<int>(heads);
  p.kv_heads = static_cast<int>(kv_heads);
  p.hd = static_cast<int>(hd);
  p.splits = static_cast<int>((capacity + kAttnKeys - 1) / kAttnKeys);
  p.scale = scale;
  const dim3 grid(static_cast<unsigned>(kv_heads), static_cast<unsigned>(batch),
                  static_cast<unsigned>(p.splits));
  return Launch(DecodeAttentionKernel, grid, kAttnThreads, pdl, s, p);
}

cudaError_t Advance(int* pos, cudaStream_t s) {
  AdvanceKernel<<<1, 1, 0, s>>>(pos);
  return cudaGetLastError();
}

}  // namespace ringmaster::tk
