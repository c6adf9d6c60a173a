// Kernels of the node benchmarks (copies, pointer chase, triad, GEMM
// inputs and reference), declared for host code that never includes CUDA
// headers beyond cuda_runtime_api.h. Each returns the launch's error.
#ifndef RINGMASTER_KERNELS_NODE_KERNELS_H_
#define RINGMASTER_KERNELS_NODE_KERNELS_H_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace ringmaster {

// Holds `stream` until *flag (host-mapped memory) becomes non-zero, or
// `timeout_ns` of GPU time passes; then sets flag[1] = 1 (timed out).
cudaError_t LaunchSpinWait(volatile int* flag, uint64_t timeout_ns,
                           cudaStream_t stream);

// SM copy of `bytes` bytes with 16-byte loads and stores when both
// pointers are 16-byte aligned; `blocks` x `threads` threads.
cudaError_t LaunchSmCopy(void* dst, const void* src, int64_t bytes, int blocks,
                         int threads, cudaStream_t stream);

// dst[i] = CopyPatternByte(seed, i), and the count of i with dst[i] !=
// CopyPatternByte(seed, i) added to *wrong (device memory).
cudaError_t LaunchFillPattern(uint8_t* dst, int64_t bytes, uint32_t seed,
                              cudaStream_t stream);
cudaError_t LaunchCountPattern(const uint8_t* data, int64_t bytes,
                               uint32_t seed, unsigned long long* wrong,
                               cudaStream_t stream);

// One thread follows `hops` offsets through `base` (offset = next offset)
// starting at offset 0; writes the final offset to *sink.
cudaError_t LaunchPointerChase(const uint64_t* base, int64_t hops,
                               uint64_t* sink, cudaStream_t stream);

// a[i] = b[i] + s * c[i] over n floats.
cudaError_t LaunchTriad(float* a, const float* b, const float* c, float s,
                        int64_t n, int blocks, cudaStream_t stream);
// Count of i with a[i] != b[i] + s * c[i], added to *wrong.
cudaError_t LaunchCheckTriad(const float* a, const float* b, const float* c,
                             float s, int64_t n, unsigned long long* wrong,
                             cudaStream_t stream);

// GEMM element types (kernel side): 0 float32, 1 bfloat16, 2 float16,
// 3 fp8 e4m3.
enum GemmElem : int {
  kGemmF32 = 0,
  kGemmBf16 = 1,
  kGemmF16 = 2,
  kGemmE4m3 = 3
};

// Fills n elements with GemmInputValue(seed, i) converted to `type`.
cudaError_t LaunchGemmFill(void* data, int type, int64_t n, uint32_t seed,
                           cudaStream_t stream);

// For `samples` pseudo-random (i, j): ref = sum_k A(i,k) B(k,j) in float64
// from the stored operands, got = D(i, j); element (r, c) of X is at
// X[r * sr + c * sc]. Writes ref and got to out[2*s], out[2*s+1].
struct GemmRefArgs {
  const void* a;
  int a_type;
  int64_t a_si, a_sk;
  const void* b;
  int b_type;
  int64_t b_sk, b_sj;
  const void* d;
  int d_type;
  int64_t d_si, d_sj;
  int64_t m, n, k;
};
cudaError_t LaunchGemmReference(const GemmRefArgs& args, int samples,
                                double* out, cudaStream_t stream);

}  // namespace ringmaster

#endif  // RINGMASTER_KERNELS_NODE_KERNELS_H_
