#include <cuda_bf16.h>

#include <cmath>
#include <cstdint>

#include "kernels/decode_kernels.h"
#include "kernels/transformer_uniform.cuh"

namespace ringmaster::tk {
namespace {

using bf16 = __nv_bfloat16;

__device__ double Uniform(uint64_t key, uint64_t index) {
  return TransformerUniformOnDevice(key, index);
}

__global__ void SequenceInputsKernel(bf16* x, int64_t rows, int64_t h,
                                     int64_t capacity, int64_t first,
                                     const int* pos, int64_t n) {
  const int64_t start = pos != nullptr ? *pos : first;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t j = i % h, row = i / h, b = row / rows, t = row % rows;
    const uint64_t at =
        static_cast<uint64_t>(((b * capacity) + start + t) * h + j);
    x[i] = __float2bfloat16(static_cast<float>(Uniform(1, at)));
  }
}

// One thread per rotation pair of one head of one sequence.
__global__ void RopeAtPositionKernel(bf16* v, int64_t ld, int64_t heads,
                                     int64_t hd, const float* cos_table,
                                     const float* sin_table, const int* pos,
                                     int64_t n) {
  const int64_t half = hd / 2;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t p = i % half, head = (i / half) % heads,
                  b = i / (half * heads);
    bf16* row = v + b * ld + head * hd;
    const float c = cos_table[*pos * half + p], s = sin_table[*pos * half + p];
    const float a = __bfloat162float(row[p]),
                e = __bfloat162float(row[p + half]);
    row[p] = __float2bfloat16(a * c - e * s);
    row[p + half] = __float2bfloat16(a * s + e * c);
  }
}

__global__ void AppendKvKernel(const bf16* k, const bf16* v, int64_t ld,
                               bf16* kcache, bf16* vcache, int64_t capacity,
                               int64_t width, const int* pos, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t b = i / width, j = i % width;
    const int64_t at = (b * capacity + *pos) * width + j;
    kcache[at] = k[b * ld + j];
    vcache[at] = v[b * ld + j];
  }
}

constexpr int kAttnThreads = 128;

__device__ float BlockReduce(float v, float* shared, bool max) {
  for (int o = 16; o > 0; o >>= 1) {
    const float other = __shfl_xor_sync(0xffffffffu, v, o);
    v = max ? fmaxf(v, other) : v + other;
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  v = shared[0];
  for (int w = 1; w < kAttnThreads / 32; ++w)
    v = max ? fmaxf(v, shared[w]) : v + shared[w];
  return v;
}

// Grid (heads, batch): the scores of the query against keys 0 .. *pos in
// shared memory, their softmax, then output dimension d = thread.
__global__ void DecodeAttentionKernel(const bf16* q, int64_t ld_q,
                                      const bf16* kcache, const bf16* vcache,
                                      bf16* out, int64_t ld_out, int64_t heads,
                                      int64_t group, int64_t hd,
                                      int64_t capacity, const int* pos,
                                      float scale) {
  extern __shared__ float scores[];  // capacity floats
  __shared__ float qs[128];
  __shared__ float red[kAttnThreads / 32];
  const int64_t h = blockIdx.x, b = blockIdx.y, kvh = h / group;
  const int64_t kw = heads / group * hd, keys = *pos + 1;
  const bf16* qh = q + b * ld_q + h * hd;
  for (int64_t d = threadIdx.x; d < hd; d += kAttnThreads)
    qs[d] = __bfloat162float(qh[d]);
  __syncthreads();
  const bf16* kb = kcache + b * capacity * kw + kvh * hd;
  float mx = -INFINITY;
  for (int64_t j = threadIdx.x; j < keys; j += kAttnThreads) {
    const __nv_bfloat162* kr =
        reinterpret_cast<const __nv_bfloat162*>(kb + j * kw);
    float dot = 0;
    for (int64_t d = 0; d < hd / 2; ++d) {
      const float2 kv = __bfloat1622float2(kr[d]);
      dot += qs[2 * d] * kv.x + qs[2 * d + 1] * kv.y;
    }
    scores[j] = dot * scale;
    mx = fmaxf(mx, scores[j]);
  }
  mx = BlockReduce(mx, red, true);
  float sum = 0;
  for (int64_t j = threadIdx.x; j < keys; j += kAttnThreads) {
    scores[j] = __expf(scores[j] - mx);
    sum += scores[j];
  }
  sum = BlockReduce(sum, red, false);
  __syncthreads();
  const bf16* vb = vcache + b * capacity * kw + kvh * hd;
  for (int64_t d = threadIdx.x; d < hd; d += kAttnThreads) {
    float acc = 0;
    for (int64_t j = 0; j < keys; ++j)
      acc += scores[j] * __bfloat162float(vb[j * kw + d]);
    out[b * ld_out + h * hd + d] = __float2bfloat16(acc / sum);
  }
}

__global__ void AdvanceKernel(int* pos) { *pos += 1; }

unsigned Blocks(int64_t n, int threads) {
  const int64_t b = (n + threads - 1) / threads;
  return static_cast<unsigned>(b < 65535 * 64 ? b : 65535 * 64);
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

cudaError_t RopeAtPosition(void* v, int64_t ld, int64_t batch, int64_t heads,
                           int64_t hd, const float* cos_table,
                           const float* sin_table, const int* pos,
                           cudaStream_t s) {
  const int64_t n = batch * heads * (hd / 2);
  RopeAtPositionKernel<<<Blocks(n, 256), 256, 0, s>>>(
      static_cast<bf16*>(v), ld, heads, hd, cos_table, sin_table, pos, n);
  return cudaGetLastError();
}

cudaError_t AppendKv(const void* k, const void* v, int64_t ld, void* kcache,
                     void* vcache, int64_t batch, int64_t capacity,
                     int64_t width, const int* pos, cudaStream_t s) {
  const int64_t n = batch * width;
  AppendKvKernel<<<Blocks(n, 256), 256, 0, s>>>(
      static_cast<const bf16*>(k), static_cast<const bf16*>(v), ld,
      static_cast<bf16*>(kcache), static_cast<bf16*>(vcache), capacity, width,
      pos, n);
  return cudaGetLastError();
}

cudaError_t DecodeAttention(const void* q, int64_t ld_q, const void* kcache,
                            const void* vcache, void* out, int64_t ld_out,
                            int64_t batch, int64_t heads, int64_t kv_heads,
                            int64_t hd, int64_t capacity, const int* pos,
                            float scale, cudaStream_t s) {
  if (hd > 128 || hd % 2 != 0 || capacity > 8192) return cudaErrorInvalidValue;
  const dim3 grid(static_cast<unsigned>(heads), static_cast<unsigned>(batch));
  DecodeAttentionKernel<<<grid, kAttnThreads, capacity * sizeof(float), s>>>(
      static_cast<const bf16*>(q), ld_q, static_cast<const bf16*>(kcache),
      static_cast<const bf16*>(vcache), static_cast<bf16*>(out), ld_out, heads,
      heads / kv_heads, hd, capacity, pos, scale);
  return cudaGetLastError();
}

cudaError_t Advance(int* pos, cudaStream_t s) {
  AdvanceKernel<<<1, 1, 0, s>>>(pos);
  return cudaGetLastError();
}

}  // namespace ringmaster::tk
