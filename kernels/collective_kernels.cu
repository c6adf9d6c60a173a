#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/collective_kernels.h"

namespace ringmaster {
namespace {

// Values of v1::DataType (proto/ringmaster/v1/plan.proto).
enum : int {
  kF32 = 1,
  kBF16 = 2,
  kF16 = 3,
  kI32 = 4,
  kF64 = 5,
  kI64 = 6,
  kI8 = 7,
  kU8 = 8
};

template <typename T>
__device__ T FromDouble(double v) {
  return static_cast<T>(v);
}
template <>
__device__ __nv_bfloat16 FromDouble(double v) {
  return __double2bfloat16(v);
}
template <>
__device__ __half FromDouble(double v) {
  return __double2half(v);
}
template <typename T>
__device__ double ToDouble(T v) {
  return static_cast<double>(v);
}
template <>
__device__ double ToDouble(__nv_bfloat16 v) {
  return __bfloat162float(v);
}
template <>
__device__ double ToDouble(__half v) {
  return __half2float(v);
}

template <typename T>
__global__ void FillKernel(T* buf, int64_t count, int op, int rank, int nranks,
                           int range, int64_t offset) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
       i < count; i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    buf[i] = FromDouble<T>(PatternInput(op, rank, nranks, range, i + offset));
  }
}

template <typename T>
__global__ void CountWrongKernel(const T* buf, int64_t count,
                                 PatternCheck check, int dtype,
                                 unsigned long long* wrong) {
  unsigned long long local = 0;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
       i < count; i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    if (!PatternMatches(ToDouble(buf[i]), PatternExpected(check, i), check,
                        dtype))
      ++local;
  }
  if (local) atomicAdd(wrong, local);
}

template <typename T>
__global__ void CorruptKernel(T* buf, int64_t index) {
  buf[index] = FromDouble<T>(ToDouble(buf[index]) + 1.0);
}

constexpr int kThreads = 256;

int Blocks(int64_t count) {
  int64_t blocks = (count + kThreads - 1) / kThreads;
  if (blocks > 132 * 16)
    blocks = 132 * 16;  // grid-stride beyond a full H100/H200
  return blocks < 1 ? 1 : static_cast<int>(blocks);
}

template <typename F>
cudaError_t Dispatch(int dtype, F&& f) {
  switch (dtype) {
    case kF32:
      return f(float{});
    case kBF16:
      return f(__nv_bfloat16{});
    case kF16:
      return f(__half{});
    case kI32:
      return f(int32_t{});
    case kF64:
      return f(double{});
    case kI64:
      return f(int64_t{});
    case kI8:
      return f(int8_t{});
    case kU8:
      return f(uint8_t{});
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace

cudaError_t LaunchFillPattern(void* buf, int dtype, int64_t count, int op,
                              int rank, int nranks, int range, int64_t offset,
                              cudaStream_t stream) {
  if (count <= 0) return cudaSuccess;
  return Dispatch(dtype, [&](auto tag) {
    using T = decltype(tag);
    FillKernel<T><<<Blocks(count), kThreads, 0, stream>>>(
        static_cast<T*>(buf), count, op, rank, nranks, range, offset);
    return cudaGetLastError();
  });
}

cudaError_t LaunchCountWrong(const void* buf, int dtype, int64_t count,
                             const PatternCheck& check,
                             unsigned long long* d_wrong, cudaStream_t stream) {
  if (count <= 0) return cudaSuccess;
  return Dispatch(dtype, [&](auto tag) {
    using T = decltype(tag);
    CountWrongKernel<T><<<Blocks(count), kThreads, 0, stream>>>(
        static_cast<const T*>(buf), count, check, dtype, d_wrong);
    return cudaGetLastError();
  });
}

cudaError_t LaunchCorruptElement(void* buf, int dtype, int64_t index,
                                 cudaStream_t stream) {
  return Dispatch(dtype, [&](auto tag) {
    using T = decltype(tag);
    CorruptKernel<T><<<1, 1, 0, stream>>>(static_cast<T*>(buf), index);
    return cudaGetLastError();
  });
}

}  // namespace ringmaster
