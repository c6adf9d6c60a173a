#include <cuda_bf16.h>

#include <algorithm>
#include <initializer_list>

#include "core/train_data.h"
#include "kernels/train_kernels.h"

namespace ringmaster {
namespace {

using bf16 = __nv_bfloat16;

int Grid(int64_t n, int threads = 256) {
  int64_t b = (n + threads - 1) / threads;
  return static_cast<int>(b > 65535 * 8 ? 65535 * 8 : (b < 1 ? 1 : b));
}

#define GRID_STRIDE(i, n)                                               \
  for (int64_t i =                                                      \
           static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; \
       i < (n); i += static_cast<int64_t>(gridDim.x) * blockDim.x)

__global__ void InitWeights(bf16* w, int layers, int64_t h) {
  const int64_t n = static_cast<int64_t>(layers) * h * h;
  GRID_STRIDE(i, n) {
    int l = static_cast<int>(i / (h * h));
    int64_t r = (i / h) % h, c = i % h;
    w[i] = __float2bfloat16(TrainWeight(l, r, c, h));
  }
}

__global__ void InitInputs(bf16* a, int64_t b, int64_t h, int64_t first) {
  GRID_STRIDE(i, b * h) {
    a[i] = __float2bfloat16(TrainInput(first + i / h, i % h));
  }
}

__device__ float GeluF(float x) {
  return 0.5f * x * (1.0f + erff(x * 0.70710678f));
}
__device__ float GeluGradF(float x) {
  return 0.5f * (1.0f + erff(x * 0.70710678f)) +
         x * 0.39894228f * __expf(-0.5f * x * x);
}

// 8 bf16 per 16-byte access, for the element-wise passes (memory-bound:
// wide accesses matter). Callers use these when n % 8 == 0 and the pointers
// are 16-byte aligned (cudaMalloc's are).
struct Bf16x8 {
  float v[8];
};
__device__ Bf16x8 Load8(const bf16* p, int64_t i) {
  uint4 raw = reinterpret_cast<const uint4*>(p)[i];
  const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&raw);
  Bf16x8 out;
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    float2 f = __bfloat1622float2(h[k]);
    out.v[2 * k] = f.x;
    out.v[2 * k + 1] = f.y;
  }
  return out;
}
__device__ void Store8(bf16* p, int64_t i, const Bf16x8& x) {
  uint4 raw;
  __nv_bfloat162* h = reinterpret_cast<__nv_bfloat162*>(&raw);
#pragma unroll
  for (int k = 0; k < 4; ++k)
    h[k] = __floats2bfloat162_rn(x.v[2 * k], x.v[2 * k + 1]);
  reinterpret_cast<uint4*>(p)[i] = raw;
}

__global__ void GeluFwd(const bf16* z, bf16* a, int64_t n) {
  GRID_STRIDE(i, n) { a[i] = __float2bfloat16(GeluF(__bfloat162float(z[i]))); }
}
__global__ void GeluFwd8(const bf16* z, bf16* a, int64_t n8) {
  GRID_STRIDE(i, n8) {
    Bf16x8 x = Load8(z, i);
#pragma unroll
    for (int k = 0; k < 8; ++k) x.v[k] = GeluF(x.v[k]);
    Store8(a, i, x);
  }
}

// A few blocks per SM, each reducing in shared memory to one atomic.
__global__ void LossGrad(const bf16* out, bf16* da, int64_t n, double count,
                         double* loss) {
  __shared__ double warp_sums[32];
  double local = 0;
  GRID_STRIDE(i, n) {
    float o = __bfloat162float(out[i]);
    local += static_cast<double>(o) * o;
    da[i] = __float2bfloat16(static_cast<float>(2.0 * o / count));
  }
  for (int off = 16; off > 0; off /= 2)
    local += __shfl_down_sync(0xffffffffu, local, off);
  if ((threadIdx.x & 31) == 0) warp_sums[threadIdx.x / 32] = local;
  __syncthreads();
  if (threadIdx.x == 0) {
    double block = 0;
    for (int w = 0; w < static_cast<int>(blockDim.x / 32); ++w)
      block += warp_sums[w];
    atomicAdd(loss, block);
  }
}

__global__ void GeluBwd(const bf16* da, const bf16* z, bf16* dz, int64_t n) {
  GRID_STRIDE(i, n) {
    dz[i] = __float2bfloat16(__bfloat162float(da[i]) *
                             GeluGradF(__bfloat162float(z[i])));
  }
}
__global__ void GeluBwd8(const bf16* da, const bf16* z, bf16* dz, int64_t n8) {
  GRID_STRIDE(i, n8) {
    Bf16x8 d = Load8(da, i), x = Load8(z, i);
#pragma unroll
    for (int k = 0; k < 8; ++k) d.v[k] *= GeluGradF(x.v[k]);
    Store8(dz, i, d);
  }
}

__global__ void Sgd(bf16* w, const bf16* g, int64_t n, float lr, float scale) {
  GRID_STRIDE(i, n) {
    w[i] = __float2bfloat16(__bfloat162float(w[i]) -
                            lr * scale * __bfloat162float(g[i]));
  }
}
__global__ void Sgd8(bf16* w, const bf16* g, int64_t n8, float lr,
                     float scale) {
  GRID_STRIDE(i, n8) {
    Bf16x8 x = Load8(w, i), d = Load8(g, i);
#pragma unroll
    for (int k = 0; k < 8; ++k) x.v[k] -= lr * scale * d.v[k];
    Store8(w, i, x);
  }
}

__global__ void Adam(bf16* w, const bf16* g, float* m, float* v, int64_t n,
                     float lr, float scale, float c1, float c2) {
  GRID_STRIDE(i, n) {
    float gi = scale * __bfloat162float(g[i]);
    float mi = 0.9f * m[i] + 0.1f * gi;
    float vi = 0.999f * v[i] + 0.001f * gi * gi;
    m[i] = mi;
    v[i] = vi;
    w[i] = __float2bfloat16(__bfloat162float(w[i]) -
                            lr * (mi / c1) / (sqrtf(vi / c2) + 1e-8f));
  }
}

__global__ void Signal(int* remote, int value) {
  __threadfence_system();  // the gradients written before are visible first
  *reinterpret_cast<volatile int*>(remote) = value;
  __threadfence_system();
}

// Gives up after 10 s of GPU time so a lost peer cannot hang the GPU (the
// step's data is then wrong, which the numerical check and the all-reduce
// results would show; the launcher's deadline ends the job).
__global__ void WaitFlag(const int* local, int value) {
  uint64_t start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  while (*reinterpret_cast<const volatile int*>(local) < value) {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    if (now - start > 10ull * 1000 * 1000 * 1000) break;
  }
  __threadfence_system();
}

__global__ void Add8(bf16* dst, const bf16* src, int64_t n8) {
  GRID_STRIDE(i, n8) {
    Bf16x8 a = Load8(dst, i), b = Load8(src, i);
#pragma unroll
    for (int k = 0; k < 8; ++k) a.v[k] += b.v[k];
    Store8(dst, i, a);
  }
}

__global__ void Add1(bf16* dst, const bf16* src, int64_t n) {
  GRID_STRIDE(i, n) {
    dst[i] =
        __float2bfloat16(__bfloat162float(dst[i]) + __bfloat162float(src[i]));
  }
}

bool Wide(int64_t n, std::initializer_list<const void*> ptrs) {
  if (n % 8 != 0) return false;
  for (const void* p : ptrs) {
    if (reinterpret_cast<uintptr_t>(p) % 16 != 0) return false;
  }
  return true;
}

int Sms() {
  static int sms = [] {
    int dev = 0, v = 0;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, dev);
    return v > 0 ? v : 1;
  }();
  return sms;
}

}  // namespace

cudaError_t LaunchTrainInitWeights(void* w, int layers, int64_t hidden,
                                   cudaStream_t s) {
  InitWeights<<<Grid(static_cast<int64_t>(layers) * hidden * hidden), 256, 0,
                s>>>(static_cast<bf16*>(w), layers, hidden);
  return cudaGetLastError();
}
cudaError_t LaunchTrainInitInputs(void* a, int64_t batch, int64_t hidden,
                                  int64_t first_sample, cudaStream_t s) {
  InitInputs<<<Grid(batch * hidden), 256, 0, s>>>(static_cast<bf16*>(a), batch,
                                                  hidden, first_sample);
  return cudaGetLastError();
}

cudaError_t LaunchGeluForward(const void* z, void* a, int64_t n,
                              cudaStream_t s) {
  if (Wide(n, {z, a})) {
    GeluFwd8<<<Grid(n / 8), 256, 0, s>>>(static_cast<const bf16*>(z),
                                         static_cast<bf16*>(a), n / 8);
  } else {
    GeluFwd<<<Grid(n), 256, 0, s>>>(static_cast<const bf16*>(z),
                                    static_cast<bf16*>(a), n);
  }
  return cudaGetLastError();
}
cudaError_t LaunchLossGrad(const void* out, void* da, int64_t n, double count,
                           double* loss_sum, cudaStream_t s) {
  const int blocks = std::min<int64_t>(Grid(n), 4 * Sms());
  LossGrad<<<blocks, 256, 0, s>>>(static_cast<const bf16*>(out),
                                  static_cast<bf16*>(da), n, count, loss_sum);
  return cudaGetLastError();
}
cudaError_t LaunchGeluBackward(const void* da, const void* z, void* dz,
                               int64_t n, cudaStream_t s) {
  if (Wide(n, {da, z, dz})) {
    GeluBwd8<<<Grid(n / 8), 256, 0, s>>>(static_cast<const bf16*>(da),
                                         static_cast<const bf16*>(z),
                                         static_cast<bf16*>(dz), n / 8);
  } else {
    GeluBwd<<<Grid(n), 256, 0, s>>>(static_cast<const bf16*>(da),
                                    static_cast<const bf16*>(z),
                                    static_cast<bf16*>(dz), n);
  }
  return cudaGetLastError();
}
cudaError_t LaunchSgd(void* w, const void* g, int64_t n, float lr, float scale,
                      cudaStream_t s) {
  if (Wide(n, {w, g})) {
    Sgd8<<<Grid(n / 8), 256, 0, s>>>(
        static_cast<bf16*>(w), static_cast<const bf16*>(g), n / 8, lr, scale);
  } else {
    Sgd<<<Grid(n), 256, 0, s>>>(static_cast<bf16*>(w),
                                static_cast<const bf16*>(g), n, lr, scale);
  }
  return cudaGetLastError();
}
cudaError_t LaunchAdam(void* w, const void* g, float* m, float* v, int64_t n,
                       float lr, float scale, float c1, float c2,
                       cudaStream_t s) {
  Adam<<<Grid(n), 256, 0, s>>>(static_cast<bf16*>(w),
                               static_cast<const bf16*>(g), m, v, n, lr, scale,
                               c1, c2);
  return cudaGetLastError();
}

cudaError_t LaunchSignal(int* remote_flag, int value, cudaStream_t s) {
  Signal<<<1, 1, 0, s>>>(remote_flag, value);
  return cudaGetLastError();
}
cudaError_t LaunchWaitFlag(const int* local_flag, int value, cudaStream_t s) {
  WaitFlag<<<1, 1, 0, s>>>(local_flag, value);
  return cudaGetLastError();
}
cudaError_t LaunchAddBf16(void* dst, const void* src, int64_t n,
                          cudaStream_t s) {
  if (Wide(n, {dst, src})) {
    // Few blocks: the add shares the GPU with backward's GEMMs.
    Add8<<<std::min(Grid(n / 8), 2 * Sms()), 256, 0, s>>>(
        static_cast<bf16*>(dst), static_cast<const bf16*>(src), n / 8);
  } else {
    Add1<<<Grid(n), 256, 0, s>>>(static_cast<bf16*>(dst),
                                 static_cast<const bf16*>(src), n);
  }
  return cudaGetLastError();
}

}  // namespace ringmaster
