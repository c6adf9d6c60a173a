#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <initializer_list>

#include "kernels/train_data.h"
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

// Conversions between the storage type and the fp32 the math runs in.
__device__ __forceinline__ float ToF(float x) { return x; }
__device__ __forceinline__ float ToF(__half x) { return __half2float(x); }
__device__ __forceinline__ float ToF(bf16 x) { return __bfloat162float(x); }
template <typename T>
__device__ __forceinline__ T FromF(float x);
template <>
__device__ __forceinline__ float FromF<float>(float x) {
  return x;
}
template <>
__device__ __forceinline__ __half FromF<__half>(float x) {
  return __float2half_rn(x);
}
template <>
__device__ __forceinline__ bf16 FromF<bf16>(float x) {
  return __float2bfloat16_rn(x);
}

// 16 bytes per access (8 16-bit or 4 32-bit elements) for the element-wise
// passes, which are memory-bound: wide accesses matter. Callers use them
// when n is a multiple of Vec<T>::N and the pointers are 16-byte aligned
// (cudaMalloc's are).
template <typename T>
struct Vec {
  static constexpr int N = 16 / sizeof(T);
  float v[N];
};
template <typename T>
__device__ __forceinline__ Vec<T> Load(const T* p, int64_t i) {
  alignas(16) T e[Vec<T>::N];
  *reinterpret_cast<uint4*>(e) = reinterpret_cast<const uint4*>(p)[i];
  Vec<T> out;
#pragma unroll
  for (int k = 0; k < Vec<T>::N; ++k) out.v[k] = ToF(e[k]);
  return out;
}
template <typename T>
__device__ __forceinline__ void Store(T* p, int64_t i, const Vec<T>& x) {
  alignas(16) T e[Vec<T>::N];
#pragma unroll
  for (int k = 0; k < Vec<T>::N; ++k) e[k] = FromF<T>(x.v[k]);
  reinterpret_cast<uint4*>(p)[i] = *reinterpret_cast<const uint4*>(e);
}

template <typename T>
__global__ void InitWeights(T* w, float* master, int layers, int64_t h) {
  const int64_t n = static_cast<int64_t>(layers) * h * h;
  GRID_STRIDE(i, n) {
    int l = static_cast<int>(i / (h * h));
    int64_t r = (i / h) % h, c = i % h;
    const float x = TrainWeight(l, r, c, h);
    w[i] = FromF<T>(x);
    if (master) master[i] = x;
  }
}

template <typename T>
__global__ void InitInputs(T* a, int64_t b, int64_t h, int64_t first) {
  GRID_STRIDE(i, b * h) { a[i] = FromF<T>(TrainInput(first + i / h, i % h)); }
}

__device__ float GeluF(float x) {
  return 0.5f * x * (1.0f + erff(x * 0.70710678f));
}
__device__ float GeluGradF(float x) {
  return 0.5f * (1.0f + erff(x * 0.70710678f)) +
         x * 0.39894228f * __expf(-0.5f * x * x);
}

template <typename T>
__global__ void GeluFwd(const T* z, T* a, int64_t n) {
  GRID_STRIDE(i, n) { a[i] = FromF<T>(GeluF(ToF(z[i]))); }
}
template <typename T>
__global__ void GeluFwdV(const T* z, T* a, int64_t nv) {
  GRID_STRIDE(i, nv) {
    Vec<T> x = Load(z, i);
#pragma unroll
    for (int k = 0; k < Vec<T>::N; ++k) x.v[k] = GeluF(x.v[k]);
    Store(a, i, x);
  }
}

// A few blocks per SM, each reducing in shared memory to one atomic.
template <typename T>
__global__ void LossGrad(const T* out, T* da, int64_t n, double count,
                         float loss_scale, double* loss) {
  __shared__ double warp_sums[32];
  double local = 0;
  GRID_STRIDE(i, n) {
    float o = ToF(out[i]);
    local += static_cast<double>(o) * o;
    da[i] = FromF<T>(static_cast<float>(2.0 * loss_scale * o / count));
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

// Zero test on the bits (sign ignored): U is the storage type's width.
template <typename U>
__global__ void CountZeros(const U* p, int64_t n, unsigned long long* count) {
  constexpr U kMagnitude = static_cast<U>(static_cast<U>(~U{0}) >> 1);
  unsigned long long local = 0;
  GRID_STRIDE(i, n) { local += (p[i] & kMagnitude) == 0; }
  for (int off = 16; off > 0; off /= 2)
    local += __shfl_down_sync(0xffffffffu, local, off);
  if ((threadIdx.x & 31) == 0 && local > 0) atomicAdd(count, local);
}

template <typename T>
__global__ void GeluBwd(const T* da, const T* z, T* dz, int64_t n) {
  GRID_STRIDE(i, n) { dz[i] = FromF<T>(ToF(da[i]) * GeluGradF(ToF(z[i]))); }
}
template <typename T>
__global__ void GeluBwdV(const T* da, const T* z, T* dz, int64_t nv) {
  GRID_STRIDE(i, nv) {
    Vec<T> d = Load(da, i), x = Load(z, i);
#pragma unroll
    for (int k = 0; k < Vec<T>::N; ++k) d.v[k] *= GeluGradF(x.v[k]);
    Store(dz, i, d);
  }
}

// With master weights the fp32 copy is updated and w is its rounding.
template <typename T>
__global__ void Sgd(T* w, float* master, const T* g, int64_t n, float lr,
                    float scale) {
  GRID_STRIDE(i, n) {
    const float x = (master ? master[i] : ToF(w[i])) - lr * scale * ToF(g[i]);
    if (master) master[i] = x;
    w[i] = FromF<T>(x);
  }
}
template <typename T>
__global__ void SgdV(T* w, float* master, const T* g, int64_t nv, float lr,
                     float scale) {
  constexpr int N = Vec<T>::N;
  GRID_STRIDE(i, nv) {
    Vec<T> x = Load(w, i), d = Load(g, i);
#pragma unroll
    for (int k = 0; k < N; ++k) {
      const float cur = master ? master[i * N + k] : x.v[k];
      x.v[k] = cur - lr * scale * d.v[k];
      if (master) master[i * N + k] = x.v[k];
    }
    Store(w, i, x);
  }
}

template <typename T>
__global__ void Adam(T* w, float* master, const T* g, float* m, float* v,
                     int64_t n, float lr, float scale, float c1, float c2) {
  GRID_STRIDE(i, n) {
    float gi = scale * ToF(g[i]);
    float mi = 0.9f * m[i] + 0.1f * gi;
    float vi = 0.999f * v[i] + 0.001f * gi * gi;
    m[i] = mi;
    v[i] = vi;
    const float x = (master ? master[i] : ToF(w[i])) -
                    lr * (mi / c1) / (sqrtf(vi / c2) + 1e-8f);
    if (master) master[i] = x;
    w[i] = FromF<T>(x);
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

template <typename T>
__global__ void AddV(T* dst, const T* src, int64_t nv) {
  GRID_STRIDE(i, nv) {
    Vec<T> a = Load(dst, i), b = Load(src, i);
#pragma unroll
    for (int k = 0; k < Vec<T>::N; ++k) a.v[k] += b.v[k];
    Store(dst, i, a);
  }
}

template <typename T>
__global__ void Add1(T* dst, const T* src, int64_t n) {
  GRID_STRIDE(i, n) { dst[i] = FromF<T>(ToF(dst[i]) + ToF(src[i])); }
}

// n elements of T in 16-byte vectors from 16-byte aligned pointers.
template <typename T>
bool Wide(int64_t n, std::initializer_list<const void*> ptrs) {
  if (n % Vec<T>::N != 0) return false;
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

// Runs `body` with T the storage type of `t`.
template <typename F>
cudaError_t Dispatch(TrainType t, F&& body) {
  switch (t) {
    case TrainType::kFloat32:
      body(float{});
      break;
    case TrainType::kFloat16:
      body(__half{});
      break;
    case TrainType::kBFloat16:
      body(bf16{});
      break;
    default:
      return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

}  // namespace

size_t TrainTypeBytes(TrainType t) { return t == TrainType::kFloat32 ? 4 : 2; }

cudaError_t LaunchTrainInitWeights(TrainType t, void* w, float* master,
                                   int layers, int64_t hidden, cudaStream_t s) {
  return Dispatch(t, [&](auto x) {
    using T = decltype(x);
    InitWeights<<<Grid(static_cast<int64_t>(layers) * hidden * hidden), 256, 0,
                  s>>>(static_cast<T*>(w), master, layers, hidden);
  });
}
cudaError_t LaunchTrainInitInputs(TrainType t, void* a, int64_t batch,
                                  int64_t hidden, int64_t first_sample,
                                  cudaStream_t s) {
  return Dispatch(t, [&](auto x) {
    using T = decltype(x);
    InitInputs<<<Grid(batch * hidden), 256, 0, s>>>(static_cast<T*>(a), batch,
                                                    hidden, first_sample);
  });
}

cudaError_t LaunchGeluForward(TrainType t, const void* z, void* a, int64_t n,
                              cudaStream_t s) {
  return Dispatch(t, [&](auto x) {
    using T = decltype(x);
    const T* zt = static_cast<const T*>(z);
    T* at = static_cast<T*>(a);
    if (Wide<T>(n, {z, a})) {
      const int64_t nv = n / Vec<T>::N;
      GeluFwdV<<<Grid(nv), 256, 0, s>>>(zt, at, nv);
    } else {
      GeluFwd<<<Grid(n), 256, 0, s>>>(zt, at, n);
    }
  });
}
cudaError_t LaunchLossGrad(TrainType t, const void* out, void* da, int64_t n,
                           double count, float loss_scale, double* loss_sum,
                           cudaStream_t s) {
  const int blocks = std::min<int64_t>(Grid(n), 4 * Sms());
  return Dispatch(t, [&](auto x) {
    using T = decltype(x);
    LossGrad<<<blocks, 256, 0, s>>>(static_cast<const T*>(out),
                                    static_cast<T*>(da), n, count, loss_scale,
                                    loss_sum);
  });
}
cudaError_t LaunchGeluBackward(TrainType t, const void* da, const void* z,
                               void* dz, int64_t n, cudaStream_t s) {
  return Dispatch(t, [&](auto x) {
    using T = decltype(x);
    const T *dat = static_cast<const T*>(da), *zt = static_cast<const T*>(z);
    T* dzt = static_cast<T*>(dz);
    if (Wide<T>(n, {da, z, dz})) {
      const int64_t nv = n / Vec<T>::N;
      GeluBwdV<<<Grid(nv), 256, 0, s>>>(dat, zt, dzt, nv);
    } else {
      GeluBwd<<<Grid(n), 256, 0, s>>>(dat, zt, dzt, n);
    }
  });
}
cudaError_t LaunchSgd(TrainType t, void* w, float* master, const void* g,
                      int64_t n, float lr, float scale, cudaStream_t s) {
  return Dispatch(t, [&](auto x) {
    using T = decltype(x);
    T* wt = static_cast<T*>(w);
    const T* gt = static_cast<const T*>(g);
    if (Wide<T>(n, {w, g, master})) {
      const int64_t nv = n / Vec<T>::N;
      SgdV<<<Grid(nv), 256, 0, s>>>(wt, master, gt, nv, lr, scale);
    } else {
      Sgd<<<Grid(n), 256, 0, s>>>(wt, master, gt, n, lr, scale);
    }
  });
}
cudaError_t LaunchAdam(TrainType t, void* w, float* master, const void* g,
                       float* m, float* v, int64_t n, float lr, float scale,
                       float c1, float c2, cudaStream_t s) {
  return Dispatch(t, [&](auto x) {
    using T = decltype(x);
    Adam<<<Grid(n), 256, 0, s>>>(static_cast<T*>(w), master,
                                 static_cast<const T*>(g), m, v, n, lr, scale,
                                 c1, c2);
  });
}

cudaError_t LaunchSignal(int* remote_flag, int value, cudaStream_t s) {
  Signal<<<1, 1, 0, s>>>(remote_flag, value);
  return cudaGetLastError();
}
cudaError_t LaunchWaitFlag(const int* local_flag, int value, cudaStream_t s) {
  WaitFlag<<<1, 1, 0, s>>>(local_flag, value);
  return cudaGetLastError();
}
cudaError_t LaunchAdd(TrainType t, void* dst, const void* src, int64_t n,
                      cudaStream_t s) {
  return Dispatch(t, [&](auto x) {
    using T = decltype(x);
    T* d = static_cast<T*>(dst);
    const T* sp = static_cast<const T*>(src);
    if (Wide<T>(n, {dst, src})) {
      // Few blocks: the add shares the GPU with backward's GEMMs.
      const int64_t nv = n / Vec<T>::N;
      AddV<<<std::min(Grid(nv), 2 * Sms()), 256, 0, s>>>(d, sp, nv);
    } else {
      Add1<<<Grid(n), 256, 0, s>>>(d, sp, n);
    }
  });
}

cudaError_t LaunchCountZeros(TrainType t, const void* p, int64_t n,
                             unsigned long long* count, cudaStream_t s) {
  const int blocks = std::min<int64_t>(Grid(n), 4 * Sms());
  if (t == TrainType::kFloat32) {
    CountZeros<<<blocks, 256, 0, s>>>(static_cast<const uint32_t*>(p), n,
                                      count);
  } else {
    CountZeros<<<blocks, 256, 0, s>>>(static_cast<const uint16_t*>(p), n,
                                      count);
  }
  return cudaGetLastError();
}

}  // namespace ringmaster
