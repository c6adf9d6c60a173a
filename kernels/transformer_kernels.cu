#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernels/transformer_kernels.h"
#include "kernels/transformer_uniform.cuh"

namespace ringmaster::tk {
namespace {

using bf16 = __nv_bfloat16;

__device__ __forceinline__ float F(bf16 v) { return __bfloat162float(v); }
__device__ __forceinline__ bf16 B(float v) { return __float2bfloat16(v); }

__device__ double Uniform(uint64_t key, uint64_t index) {
  return TransformerUniformOnDevice(key, index);
}

unsigned Blocks(int64_t n, int threads) {
  const int64_t b = (n + threads - 1) / threads;
  return static_cast<unsigned>(b < 65535 * 64 ? b : 65535 * 64);
}

// The sum of `v` over the block (every thread gets it); `shared` holds 32
// floats.
__device__ float BlockSum(float v, float* shared) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  const int warps = (blockDim.x + 31) >> 5;
  v = lane < warps ? shared[lane] : 0.0f;
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ float BlockMax(float v, float* shared) {
  for (int o = 16; o > 0; o >>= 1)
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  const int warps = (blockDim.x + 31) >> 5;
  v = lane < warps ? shared[lane] : -INFINITY;
  for (int o = 16; o > 0; o >>= 1)
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// 8 bfloat16 in one 16-byte access (callers keep widths and offsets
// multiples of 8 elements).
__device__ __forceinline__ void Load8(const bf16* p, float out[8]) {
  const uint4 u = *reinterpret_cast<const uint4*>(p);
  const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&u);
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const float2 f = __bfloat1622float2(h[k]);
    out[2 * k] = f.x;
    out[2 * k + 1] = f.y;
  }
}
__device__ __forceinline__ void Store8(bf16* p, const float in[8]) {
  uint4 u;
  __nv_bfloat162* h = reinterpret_cast<__nv_bfloat162*>(&u);
#pragma unroll
  for (int k = 0; k < 4; ++k)
    h[k] = __floats2bfloat162_rn(in[2 * k], in[2 * k + 1]);
  *reinterpret_cast<uint4*>(p) = u;
}

__global__ void InitMatrixKernel(bf16* dst, float* master, int64_t ld,
                                 int64_t rows, int64_t cols, int64_t row0,
                                 int64_t col0, int64_t full_cols, uint64_t key,
                                 double scale) {
  const int64_t n = rows * cols;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / cols, c = i % cols;
    const float v = static_cast<float>(
        Uniform(key, static_cast<uint64_t>((r + row0) * full_cols + col0 + c)) *
        scale);
    dst[r * ld + c] = B(v);
    if (master != nullptr) master[r * ld + c] = v;
  }
}

__global__ void FillKernel(bf16* dst, float* master, int64_t n, float value) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    dst[i] = B(value);
    if (master != nullptr) master[i] = value;
  }
}

__global__ void InitDataKernel(bf16* x, float* target, int64_t n,
                               int64_t first) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const uint64_t at = static_cast<uint64_t>(first + i);
    x[i] = B(static_cast<float>(Uniform(1, at)));
    target[i] = static_cast<float>(0.5 * Uniform(2, at));
  }
}

// One block per row; 8 elements per access (h a multiple of 8).
__global__ void RmsNormForwardKernel(const bf16* x, const bf16* g, bf16* y,
                                     float* rinv, int64_t h, float eps) {
  __shared__ float shared[32];
  const int64_t row = blockIdx.x;
  const bf16* xr = x + row * h;
  float ss = 0, v[8];
  for (int64_t j = threadIdx.x * 8; j < h; j += blockDim.x * 8) {
    Load8(xr + j, v);
#pragma unroll
    for (int k = 0; k < 8; ++k) ss += v[k] * v[k];
  }
  const float r = rsqrtf(BlockSum(ss, shared) / static_cast<float>(h) + eps);
  if (threadIdx.x == 0) rinv[row] = r;
  float gv[8];
  for (int64_t j = threadIdx.x * 8; j < h; j += blockDim.x * 8) {
    Load8(xr + j, v);
    Load8(g + j, gv);
#pragma unroll
    for (int k = 0; k < 8; ++k) v[k] = v[k] * r * gv[k];
    Store8(y + row * h + j, v);
  }
}

// kNormRows rows per block; the block's share of dg summed in shared
// memory (h floats), then added to dg once.
constexpr int kNormRows = 16;
__global__ void RmsNormBackwardKernel(const bf16* x, const bf16* g,
                                      const float* rinv, const bf16* dy,
                                      const bf16* residual, bf16* dx, float* dg,
                                      int64_t rows, int64_t h) {
  extern __shared__ float dg_local[];
  __shared__ float shared[32];
  for (int64_t j = threadIdx.x; j < h; j += blockDim.x) dg_local[j] = 0;
  __syncthreads();
  const int64_t first = blockIdx.x * int64_t{kNormRows};
  float xv[8], dv[8], gv[8], out[8];
  for (int64_t row = first; row < first + kNormRows && row < rows; ++row) {
    const float r = rinv[row];
    const int64_t at = row * h;
    float dot = 0;
    for (int64_t j = threadIdx.x * 8; j < h; j += blockDim.x * 8) {
      Load8(x + at + j, xv);
      Load8(dy + at + j, dv);
      Load8(g + j, gv);
#pragma unroll
      for (int k = 0; k < 8; ++k) {
        const float xhat = xv[k] * r;
        dg_local[j + k] += dv[k] * xhat;
        dot += dv[k] * gv[k] * xhat;
      }
    }
    dot = BlockSum(dot, shared) / static_cast<float>(h);
    for (int64_t j = threadIdx.x * 8; j < h; j += blockDim.x * 8) {
      Load8(x + at + j, xv);
      Load8(dy + at + j, dv);
      Load8(g + j, gv);
      if (residual != nullptr) {
        Load8(residual + at + j, out);
      } else {
#pragma unroll
        for (int k = 0; k < 8; ++k) out[k] = 0;
      }
#pragma unroll
      for (int k = 0; k < 8; ++k)
        out[k] += r * (dv[k] * gv[k] - xv[k] * r * dot);
      Store8(dx + at + j, out);
    }
  }
  __syncthreads();
  for (int64_t j = threadIdx.x; j < h; j += blockDim.x)
    atomicAdd(dg + j, dg_local[j]);
}

// blockIdx.y: the token; threads over (head, 4 pairs).
__global__ void RopeKernel(bf16* v, int64_t ld, int64_t seq, int64_t first,
                           int heads, int hd, const float* cos_table,
                           const float* sin_table, float sign) {
  const int half = hd / 2, quads = half / 4;
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= heads * quads) return;
  const int head = i / quads, k = (i % quads) * 4;
  const int64_t t = first + blockIdx.y, pos = t % seq;
  bf16* p = v + t * ld + head * hd;
  const float4 c = *reinterpret_cast<const float4*>(cos_table + pos * half + k);
  const float4 s = *reinterpret_cast<const float4*>(sin_table + pos * half + k);
  const float cs[4] = {c.x, c.y, c.z, c.w};
  const float sn[4] = {sign * s.x, sign * s.y, sign * s.z, sign * s.w};
  uint2 ua = *reinterpret_cast<const uint2*>(p + k);
  uint2 ub = *reinterpret_cast<const uint2*>(p + k + half);
  __nv_bfloat162* a2 = reinterpret_cast<__nv_bfloat162*>(&ua);
  __nv_bfloat162* b2 = reinterpret_cast<__nv_bfloat162*>(&ub);
#pragma unroll
  for (int q = 0; q < 2; ++q) {
    const float2 a = __bfloat1622float2(a2[q]), b = __bfloat1622float2(b2[q]);
    const int e = 2 * q;
    a2[q] = __floats2bfloat162_rn(a.x * cs[e] - b.x * sn[e],
                                  a.y * cs[e + 1] - b.y * sn[e + 1]);
    b2[q] = __floats2bfloat162_rn(a.x * sn[e] + b.x * cs[e],
                                  a.y * sn[e + 1] + b.y * cs[e + 1]);
  }
  *reinterpret_cast<uint2*>(p + k) = ua;
  *reinterpret_cast<uint2*>(p + k + half) = ub;
}

// One block of kSoftmaxThreads per row of one matrix; row r of a matrix is
// query q0 + r. The row stays in registers: up to kSoftmaxVecs x 8 x
// kSoftmaxThreads columns (cols a multiple of 8).
constexpr int kSoftmaxThreads = 256, kSoftmaxVecs = 4;
__global__ void SoftmaxCausalKernel(bf16* s, int64_t rows, int64_t cols,
                                    int64_t q0) {
  __shared__ float shared[32];
  const int64_t row = blockIdx.x, i = q0 + row % rows;
  bf16* p = s + row * cols;
  float v[kSoftmaxVecs][8];
  float mx = -INFINITY;
#pragma unroll
  for (int u = 0; u < kSoftmaxVecs; ++u) {
    const int64_t j = (u * kSoftmaxThreads + threadIdx.x) * 8;
    if (j < cols) Load8(p + j, v[u]);
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      if (j + k > i || j + k >= cols) v[u][k] = -INFINITY;
      mx = fmaxf(mx, v[u][k]);
    }
  }
  mx = BlockMax(mx, shared);
  float sum = 0;
#pragma unroll
  for (int u = 0; u < kSoftmaxVecs; ++u)
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      v[u][k] = __expf(v[u][k] - mx);  // 0 where masked
      sum += v[u][k];
    }
  const float inv = 1.0f / BlockSum(sum, shared);
#pragma unroll
  for (int u = 0; u < kSoftmaxVecs; ++u) {
    const int64_t j = (u * kSoftmaxThreads + threadIdx.x) * 8;
    if (j >= cols) continue;
#pragma unroll
    for (int k = 0; k < 8; ++k) v[u][k] *= inv;
    Store8(p + j, v[u]);
  }
}

__global__ void SoftmaxBackwardKernel(const bf16* p, bf16* dp, int64_t rows,
                                      int64_t cols, int64_t q0, float scale) {
  __shared__ float shared[32];
  const int64_t row = blockIdx.x;
  const bf16* pr = p + row * cols;
  bf16* dr = dp + row * cols;
  float pv[kSoftmaxVecs][8], dv[kSoftmaxVecs][8];
  float dot = 0;
#pragma unroll
  for (int u = 0; u < kSoftmaxVecs; ++u) {
    const int64_t j = (u * kSoftmaxThreads + threadIdx.x) * 8;
    if (j < cols) {
      Load8(pr + j, pv[u]);  // 0 above the diagonal already
      Load8(dr + j, dv[u]);
    } else {
#pragma unroll
      for (int k = 0; k < 8; ++k) pv[u][k] = dv[u][k] = 0;
    }
#pragma unroll
    for (int k = 0; k < 8; ++k) dot += pv[u][k] * dv[u][k];
  }
  dot = BlockSum(dot, shared);
#pragma unroll
  for (int u = 0; u < kSoftmaxVecs; ++u) {
    const int64_t j = (u * kSoftmaxThreads + threadIdx.x) * 8;
    if (j >= cols) continue;
#pragma unroll
    for (int k = 0; k < 8; ++k) dv[u][k] = pv[u][k] * (dv[u][k] - dot) * scale;
    Store8(dr + j, dv[u]);
  }
}

// blockIdx.y: the token; threads over (head, 8-element vector).
__global__ void ReplicateHeadsKernel(const bf16* src, int64_t ld_src, bf16* rep,
                                     int heads, int group, int hd) {
  const int vecs = hd / 8;
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= heads * vecs) return;
  const int h = i / vecs, v = i % vecs;
  const int64_t t = blockIdx.y;
  *reinterpret_cast<uint4*>(rep + (t * heads + h) * hd + v * 8) =
      *reinterpret_cast<const uint4*>(src + t * ld_src + (h / group) * hd +
                                      v * 8);
}

__global__ void SumHeadsKernel(const bf16* rep, bf16* dst, int64_t ld_dst,
                               int heads, int group, int hd) {
  const int vecs = hd / 8, kv = heads / group;
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= kv * vecs) return;
  const int j = i / vecs, v = i % vecs;
  const int64_t t = blockIdx.y;
  float sum[8] = {}, part[8];
  for (int g = 0; g < group; ++g) {
    Load8(rep + (t * heads + j * group + g) * hd + v * 8, part);
#pragma unroll
    for (int k = 0; k < 8; ++k) sum[k] += part[k];
  }
  Store8(dst + t * ld_dst + j * hd + v * 8, sum);
}

__device__ __forceinline__ float Sigmoid(float a) {
  return 1.0f / (1.0f + __expf(-a));
}

// blockIdx.y: the row; threads over 8-element vectors of f.
__global__ void SwigluForwardKernel(const bf16* gu, bf16* hidden, int64_t f) {
  const int64_t c = (blockIdx.x * int64_t{blockDim.x} + threadIdx.x) * 8;
  if (c >= f) return;
  const int64_t r = blockIdx.y;
  float g[8], u[8];
  Load8(gu + r * 2 * f + c, g);
  Load8(gu + r * 2 * f + f + c, u);
#pragma unroll
  for (int k = 0; k < 8; ++k) g[k] = g[k] * Sigmoid(g[k]) * u[k];
  Store8(hidden + r * f + c, g);
}

__global__ void SwigluBackwardKernel(const bf16* gu, const bf16* dh, bf16* dgu,
                                     int64_t f) {
  const int64_t c = (blockIdx.x * int64_t{blockDim.x} + threadIdx.x) * 8;
  if (c >= f) return;
  const int64_t r = blockIdx.y;
  float g[8], u[8], d[8], dgate[8], dup[8];
  Load8(gu + r * 2 * f + c, g);
  Load8(gu + r * 2 * f + f + c, u);
  Load8(dh + r * f + c, d);
#pragma unroll
  for (int k = 0; k < 8; ++k) {
    const float sg = Sigmoid(g[k]);
    dgate[k] = d[k] * u[k] * sg * (1.0f + g[k] * (1.0f - sg));
    dup[k] = d[k] * g[k] * sg;
  }
  Store8(dgu + r * 2 * f + c, dgate);
  Store8(dgu + r * 2 * f + f + c, dup);
}

__global__ void LossKernel(const bf16* y, const float* target, bf16* dy,
                           double* loss, int64_t n, double inv_total) {
  __shared__ float shared[32];
  float sum = 0;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const float d = F(y[i]) - target[i];
    sum += 0.5f * d * d;
    dy[i] = B(static_cast<float>(d * inv_total));
  }
  sum = BlockSum(sum, shared);
  if (threadIdx.x == 0) atomicAdd(loss, static_cast<double>(sum) * inv_total);
}

__global__ void ToBf16Kernel(const float* src, bf16* dst, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x)
    dst[i] = B(src[i]);
}

__global__ void AdamWKernel(bf16* w, float* master, const bf16* g, float* m,
                            float* v, int64_t n, float lr, float wd, float c1,
                            float c2, bool sgd) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const float gi = F(g[i]);
    float p = master[i];
    if (sgd) {
      p -= lr * gi;
    } else {
      const float mi = 0.9f * m[i] + 0.1f * gi;
      const float vi = 0.95f * v[i] + 0.05f * gi * gi;
      m[i] = mi;
      v[i] = vi;
      p -= lr * wd * p;
      p -= lr * (mi / c1) / (sqrtf(vi / c2) + 1e-8f);
    }
    master[i] = p;
    w[i] = B(p);
  }
}

// 8 elements per thread step (n a multiple of 8, 16-byte aligned).
__global__ void AdamWBf16Kernel(bf16* w, const bf16* g, bf16* m, bf16* v,
                                int64_t n, float lr, float wd, float c1,
                                float c2, bool sgd) {
  for (int64_t i = (blockIdx.x * int64_t{blockDim.x} + threadIdx.x) * 8; i < n;
       i += int64_t{gridDim.x} * blockDim.x * 8) {
    float gi[8], p[8], mi[8], vi[8];
    Load8(g + i, gi);
    Load8(w + i, p);
    if (sgd) {
#pragma unroll
      for (int k = 0; k < 8; ++k) p[k] -= lr * gi[k];
    } else {
      Load8(m + i, mi);
      Load8(v + i, vi);
#pragma unroll
      for (int k = 0; k < 8; ++k) {
        mi[k] = 0.9f * mi[k] + 0.1f * gi[k];
        vi[k] = 0.95f * vi[k] + 0.05f * gi[k] * gi[k];
        p[k] -= lr * wd * p[k];
        p[k] -= lr * (mi[k] / c1) / (sqrtf(vi[k] / c2) + 1e-8f);
      }
      Store8(m + i, mi);
      Store8(v + i, vi);
    }
    Store8(w + i, p);
  }
}

constexpr int kThreads = 256;

}  // namespace

cudaError_t InitMatrix(void* dst, float* master, int64_t ld, int64_t rows,
                       int64_t cols, int64_t row0, int64_t col0,
                       int64_t full_cols, uint64_t key, double scale,
                       cudaStream_t s) {
  InitMatrixKernel<<<Blocks(rows * cols, kThreads), kThreads, 0, s>>>(
      static_cast<bf16*>(dst), master, ld, rows, cols, row0, col0, full_cols,
      key, scale);
  return cudaGetLastError();
}

cudaError_t Fill(void* dst, float* master, int64_t n, float value,
                 cudaStream_t s) {
  FillKernel<<<Blocks(n, kThreads), kThreads, 0, s>>>(static_cast<bf16*>(dst),
                                                      master, n, value);
  return cudaGetLastError();
}

cudaError_t InitData(void* x, float* target, int64_t n, int64_t first,
                     cudaStream_t s) {
  InitDataKernel<<<Blocks(n, kThreads), kThreads, 0, s>>>(static_cast<bf16*>(x),
                                                          target, n, first);
  return cudaGetLastError();
}

cudaError_t RmsNormForward(const void* x, const void* g, void* y, float* rinv,
                           int64_t rows, int64_t h, float eps, cudaStream_t s) {
  if (h % 8 != 0) return cudaErrorInvalidValue;
  RmsNormForwardKernel<<<static_cast<unsigned>(rows), kThreads, 0, s>>>(
      static_cast<const bf16*>(x), static_cast<const bf16*>(g),
      static_cast<bf16*>(y), rinv, h, eps);
  return cudaGetLastError();
}

cudaError_t RmsNormBackward(const void* x, const void* g, const float* rinv,
                            const void* dy, const void* residual, void* dx,
                            float* dg, int64_t rows, int64_t h,
                            cudaStream_t s) {
  const size_t shared = static_cast<size_t>(h) * sizeof(float);
  if (shared > 48 * 1024 || h % 8 != 0) return cudaErrorInvalidValue;
  const unsigned blocks =
      static_cast<unsigned>((rows + kNormRows - 1) / kNormRows);
  RmsNormBackwardKernel<<<blocks, kThreads, shared, s>>>(
      static_cast<const bf16*>(x), static_cast<const bf16*>(g), rinv,
      static_cast<const bf16*>(dy), static_cast<const bf16*>(residual),
      static_cast<bf16*>(dx), dg, rows, h);
  return cudaGetLastError();
}

cudaError_t Rope(void* v, int64_t ld, int64_t tokens, int64_t seq,
                 int64_t heads, int64_t hd, const float* cos_table,
                 const float* sin_table, int sign, cudaStream_t s) {
  if (hd % 8 != 0 || ld % 8 != 0) return cudaErrorInvalidValue;
  const int64_t quads = heads * hd / 8;
  // Tokens in launches of at most 65535 (the grid's y limit).
  for (int64_t first = 0; first < tokens; first += 65535) {
    const dim3 grid(
        static_cast<unsigned>((quads + 127) / 128),
        static_cast<unsigned>(std::min<int64_t>(65535, tokens - first)));
    RopeKernel<<<grid, 128, 0, s>>>(
        static_cast<bf16*>(v), ld, seq, first, static_cast<int>(heads),
        static_cast<int>(hd), cos_table, sin_table, static_cast<float>(sign));
    if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

cudaError_t SoftmaxCausal(void* scores, int64_t matrices, int64_t rows,
                          int64_t cols, int64_t q0, cudaStream_t s) {
  if (cols % 8 != 0 || cols > int64_t{kSoftmaxVecs} * 8 * kSoftmaxThreads)
    return cudaErrorInvalidValue;
  SoftmaxCausalKernel<<<static_cast<unsigned>(matrices * rows), kSoftmaxThreads,
                        0, s>>>(static_cast<bf16*>(scores), rows, cols, q0);
  return cudaGetLastError();
}

cudaError_t SoftmaxBackward(const void* p, void* dp, int64_t matrices,
                            int64_t rows, int64_t cols, int64_t q0, float scale,
                            cudaStream_t s) {
  if (cols % 8 != 0 || cols > int64_t{kSoftmaxVecs} * 8 * kSoftmaxThreads)
    return cudaErrorInvalidValue;
  SoftmaxBackwardKernel<<<static_cast<unsigned>(matrices * rows),
                          kSoftmaxThreads, 0, s>>>(static_cast<const bf16*>(p),
                                                   static_cast<bf16*>(dp), rows,
                                                   cols, q0, scale);
  return cudaGetLastError();
}

cudaError_t ReplicateHeads(const void* src, int64_t ld_src, void* rep,
                           int64_t tokens, int64_t heads, int64_t group,
                           int64_t hd, cudaStream_t s) {
  if (hd % 8 != 0 || ld_src % 8 != 0 ||
      reinterpret_cast<uintptr_t>(src) % 16 != 0 ||
      reinterpret_cast<uintptr_t>(rep) % 16 != 0 || tokens > 65535 * 64) {
    return cudaErrorInvalidValue;
  }
  const int64_t vecs = heads * hd / 8;
  const dim3 grid(static_cast<unsigned>((vecs + 127) / 128),
                  static_cast<unsigned>(tokens));
  ReplicateHeadsKernel<<<grid, 128, 0, s>>>(
      static_cast<const bf16*>(src), ld_src, static_cast<bf16*>(rep),
      static_cast<int>(heads), static_cast<int>(group), static_cast<int>(hd));
  return cudaGetLastError();
}

cudaError_t SumHeads(const void* rep, void* dst, int64_t ld_dst, int64_t tokens,
                     int64_t heads, int64_t group, int64_t hd, cudaStream_t s) {
  if (hd % 8 != 0 || ld_dst % 8 != 0 || tokens > 65535 * 64)
    return cudaErrorInvalidValue;
  const int64_t vecs = heads / group * hd / 8;
  const dim3 grid(static_cast<unsigned>((vecs + 127) / 128),
                  static_cast<unsigned>(tokens));
  SumHeadsKernel<<<grid, 128, 0, s>>>(
      static_cast<const bf16*>(rep), static_cast<bf16*>(dst), ld_dst,
      static_cast<int>(heads), static_cast<int>(group), static_cast<int>(hd));
  return cudaGetLastError();
}

cudaError_t SwigluForward(const void* gu, void* hidden, int64_t n, int64_t f,
                          cudaStream_t s) {
  if (f % 8 != 0 || n > 65535 * 64) return cudaErrorInvalidValue;
  const dim3 grid(static_cast<unsigned>((f / 8 + 127) / 128),
                  static_cast<unsigned>(n));
  SwigluForwardKernel<<<grid, 128, 0, s>>>(static_cast<const bf16*>(gu),
                                           static_cast<bf16*>(hidden), f);
  return cudaGetLastError();
}

cudaError_t SwigluBackward(const void* gu, const void* dhidden, void* dgu,
                           int64_t n, int64_t f, cudaStream_t s) {
  if (f % 8 != 0 || n > 65535 * 64) return cudaErrorInvalidValue;
  const dim3 grid(static_cast<unsigned>((f / 8 + 127) / 128),
                  static_cast<unsigned>(n));
  SwigluBackwardKernel<<<grid, 128, 0, s>>>(static_cast<const bf16*>(gu),
                                            static_cast<const bf16*>(dhidden),
                                            static_cast<bf16*>(dgu), f);
  return cudaGetLastError();
}

cudaError_t Loss(const void* y, const float* target, void* dy, double* loss,
                 int64_t n, double inv_total, cudaStream_t s) {
  LossKernel<<<Blocks(n, kThreads) < 1024 ? Blocks(n, kThreads) : 1024,
               kThreads, 0, s>>>(static_cast<const bf16*>(y), target,
                                 static_cast<bf16*>(dy), loss, n, inv_total);
  return cudaGetLastError();
}

cudaError_t ToBf16(const float* src, void* dst, int64_t n, cudaStream_t s) {
  ToBf16Kernel<<<Blocks(n, kThreads), kThreads, 0, s>>>(
      src, static_cast<bf16*>(dst), n);
  return cudaGetLastError();
}

cudaError_t AdamW(void* w, float* master, const void* g, float* m, float* v,
                  int64_t n, float lr, float wd, float c1, float c2, bool sgd,
                  cudaStream_t s) {
  AdamWKernel<<<Blocks(n, kThreads), kThreads, 0, s>>>(
      static_cast<bf16*>(w), master, static_cast<const bf16*>(g), m, v, n, lr,
      wd, c1, c2, sgd);
  return cudaGetLastError();
}

cudaError_t AdamWBf16(void* w, const void* g, void* m, void* v, int64_t n,
                      float lr, float wd, float c1, float c2, bool sgd,
                      cudaStream_t s) {
  if (n % 8 != 0 || reinterpret_cast<uintptr_t>(w) % 16 != 0)
    return cudaErrorInvalidValue;
  AdamWBf16Kernel<<<Blocks(n / 8, kThreads), kThreads, 0, s>>>(
      static_cast<bf16*>(w), static_cast<const bf16*>(g), static_cast<bf16*>(m),
      static_cast<bf16*>(v), n, lr, wd, c1, c2, sgd);
  return cudaGetLastError();
}

}  // namespace ringmaster::tk
