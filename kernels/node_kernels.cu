#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include "kernels/node_kernels.h"
#include "kernels/patterns.h"

namespace ringmaster {
namespace {

__device__ uint64_t GlobalTimerNs() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void SpinWaitKernel(volatile int* flag, uint64_t timeout_ns) {
  uint64_t start = GlobalTimerNs();
  while (flag[0] == 0) {
    if (GlobalTimerNs() - start > timeout_ns) {
      flag[1] = 1;
      break;
    }
  }
}

// Each thread moves 16-byte words t, t + T, t + 2T ... (T = all threads),
// kUnroll loads in flight before their stores.
constexpr int kUnroll = 8;
__global__ void SmCopy16Kernel(uint4* __restrict__ dst,
                               const uint4* __restrict__ src, int64_t words) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (; i + (kUnroll - 1) * stride < words; i += kUnroll * stride) {
    uint4 v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) v[u] = src[i + u * stride];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) dst[i + u * stride] = v[u];
  }
  for (; i < words; i += stride) dst[i] = src[i];
}

__global__ void SmCopyBytesKernel(uint8_t* dst, const uint8_t* src,
                                  int64_t bytes) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < bytes; i += stride) {
    dst[i] = src[i];
  }
}

__global__ void FillPatternKernel(uint8_t* dst, int64_t bytes, uint32_t seed) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < bytes; i += stride) {
    dst[i] = CopyPatternByte(seed, i);
  }
}

__global__ void CountPatternKernel(const uint8_t* data, int64_t bytes,
                                   uint32_t seed, unsigned long long* wrong) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  unsigned long long local = 0;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < bytes; i += stride) {
    local += data[i] != CopyPatternByte(seed, i);
  }
  if (local) atomicAdd(wrong, local);
}

__global__ void PointerChaseKernel(const uint64_t* base, int64_t hops,
                                   uint64_t* sink) {
  uint64_t off = 0;
  const volatile uint64_t* p = base;
  for (int64_t h = 0; h < hops; ++h) off = p[off];
  *sink = off;
}

__global__ void TriadKernel(float4* __restrict__ a,
                            const float4* __restrict__ b,
                            const float4* __restrict__ c, float s, int64_t n4) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < n4; i += stride) {
    float4 x = b[i], y = c[i];
    a[i] =
        make_float4(x.x + s * y.x, x.y + s * y.y, x.z + s * y.z, x.w + s * y.w);
  }
}

__global__ void TriadTailKernel(float* a, const float* b, const float* c,
                                float s, int64_t from, int64_t n) {
  int64_t i =
      from + static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) a[i] = b[i] + s * c[i];
}

__global__ void CheckTriadKernel(const float* a, const float* b, const float* c,
                                 float s, int64_t n,
                                 unsigned long long* wrong) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  unsigned long long local = 0;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < n; i += stride) {
    local += a[i] != __fadd_rn(b[i], __fmul_rn(s, c[i])) &&
             a[i] != fmaf(s, c[i], b[i]);
  }
  if (local) atomicAdd(wrong, local);
}

__device__ double LoadElem(const void* p, int type, int64_t i) {
  switch (type) {
    case kGemmBf16:
      return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
    case kGemmF16:
      return __half2float(static_cast<const __half*>(p)[i]);
    case kGemmE4m3:
      return static_cast<float>(static_cast<const __nv_fp8_e4m3*>(p)[i]);
    default:
      return static_cast<const float*>(p)[i];
  }
}

__global__ void GemmFillKernel(void* data, int type, int64_t n, uint32_t seed) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < n; i += stride) {
    float v = GemmInputValue(seed, i);
    switch (type) {
      case kGemmBf16:
        static_cast<__nv_bfloat16*>(data)[i] = __float2bfloat16(v);
        break;
      case kGemmF16:
        static_cast<__half*>(data)[i] = __float2half(v);
        break;
      case kGemmE4m3:
        static_cast<__nv_fp8_e4m3*>(data)[i] = __nv_fp8_e4m3(v);
        break;
      default:
        static_cast<float*>(data)[i] = v;
        break;
    }
  }
}

// One block per sample; threads split k and reduce in shared memory.
__global__ void GemmReferenceKernel(GemmRefArgs g, double* out) {
  __shared__ double partial[256];
  const int s = blockIdx.x;
  const int64_t i = (static_cast<int64_t>(s) * 7919 + 17) % g.m;
  const int64_t j = (static_cast<int64_t>(s) * 104729 + 13) % g.n;
  double acc = 0;
  for (int64_t k = threadIdx.x; k < g.k; k += blockDim.x) {
    acc += LoadElem(g.a, g.a_type, i * g.a_si + k * g.a_sk) *
           LoadElem(g.b, g.b_type, k * g.b_sk + j * g.b_sj);
  }
  partial[threadIdx.x] = acc;
  __syncthreads();
  for (int w = blockDim.x / 2; w > 0; w /= 2) {
    if (threadIdx.x < w) partial[threadIdx.x] += partial[threadIdx.x + w];
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    out[2 * s] = partial[0];
    out[2 * s + 1] = LoadElem(g.d, g.d_type, i * g.d_si + j * g.d_sj);
  }
}

int GridFor(int64_t n, int threads) {
  int64_t blocks = (n + threads - 1) / threads;
  if (blocks > 65535) blocks = 65535;
  return blocks < 1 ? 1 : static_cast<int>(blocks);
}

}  // namespace

cudaError_t LaunchSpinWait(volatile int* flag, uint64_t timeout_ns,
                           cudaStream_t stream) {
  SpinWaitKernel<<<1, 1, 0, stream>>>(flag, timeout_ns);
  return cudaGetLastError();
}

cudaError_t LaunchSmCopy(void* dst, const void* src, int64_t bytes, int blocks,
                         int threads, cudaStream_t stream) {
  const bool aligned = (reinterpret_cast<uintptr_t>(dst) % 16 == 0) &&
                       (reinterpret_cast<uintptr_t>(src) % 16 == 0);
  int64_t words = aligned ? bytes / 16 : 0;
  if (words > 0) {
    SmCopy16Kernel<<<blocks, threads, 0, stream>>>(
        static_cast<uint4*>(dst), static_cast<const uint4*>(src), words);
  }
  int64_t done = words * 16;
  if (done < bytes) {
    SmCopyBytesKernel<<<GridFor(bytes - done, 256), 256, 0, stream>>>(
        static_cast<uint8_t*>(dst) + done,
        static_cast<const uint8_t*>(src) + done, bytes - done);
  }
  return cudaGetLastError();
}

cudaError_t LaunchFillPattern(uint8_t* dst, int64_t bytes, uint32_t seed,
                              cudaStream_t stream) {
  FillPatternKernel<<<GridFor(bytes, 256), 256, 0, stream>>>(dst, bytes, seed);
  return cudaGetLastError();
}

cudaError_t LaunchCountPattern(const uint8_t* data, int64_t bytes,
                               uint32_t seed, unsigned long long* wrong,
                               cudaStream_t stream) {
  CountPatternKernel<<<GridFor(bytes, 256), 256, 0, stream>>>(data, bytes, seed,
                                                              wrong);
  return cudaGetLastError();
}

cudaError_t LaunchPointerChase(const uint64_t* base, int64_t hops,
                               uint64_t* sink, cudaStream_t stream) {
  PointerChaseKernel<<<1, 1, 0, stream>>>(base, hops, sink);
  return cudaGetLastError();
}

cudaError_t LaunchTriad(float* a, const float* b, const float* c, float s,
                        int64_t n, int blocks, cudaStream_t stream) {
  const bool aligned =
      (reinterpret_cast<uintptr_t>(a) | reinterpret_cast<uintptr_t>(b) |
       reinterpret_cast<uintptr_t>(c)) %
          16 ==
      0;
  int64_t n4 = aligned ? n / 4 : 0;
  if (n4 > 0) {
    TriadKernel<<<blocks, 512, 0, stream>>>(
        reinterpret_cast<float4*>(a), reinterpret_cast<const float4*>(b),
        reinterpret_cast<const float4*>(c), s, n4);
  }
  if (n4 * 4 < n) {
    TriadTailKernel<<<GridFor(n - n4 * 4, 256), 256, 0, stream>>>(a, b, c, s,
                                                                  n4 * 4, n);
  }
  return cudaGetLastError();
}

cudaError_t LaunchCheckTriad(const float* a, const float* b, const float* c,
                             float s, int64_t n, unsigned long long* wrong,
                             cudaStream_t stream) {
  CheckTriadKernel<<<GridFor(n, 256), 256, 0, stream>>>(a, b, c, s, n, wrong);
  return cudaGetLastError();
}

cudaError_t LaunchGemmFill(void* data, int type, int64_t n, uint32_t seed,
                           cudaStream_t stream) {
  GemmFillKernel<<<GridFor(n, 256), 256, 0, stream>>>(data, type, n, seed);
  return cudaGetLastError();
}

cudaError_t LaunchGemmReference(const GemmRefArgs& args, int samples,
                                double* out, cudaStream_t stream) {
  GemmReferenceKernel<<<samples, 256, 0, stream>>>(args, out);
  return cudaGetLastError();
}

}  // namespace ringmaster
