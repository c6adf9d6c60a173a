// Element-wise kernels of the training step (bf16 storage, fp32 math).
// GEMMs go through cuBLASLt; these are the passes between them.
#ifndef RINGMASTER_KERNELS_TRAIN_KERNELS_H_
#define RINGMASTER_KERNELS_TRAIN_KERNELS_H_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace ringmaster {

// Buffers are bf16 (__nv_bfloat16), passed as void* so host code needs no
// CUDA type headers.
cudaError_t LaunchTrainInitWeights(void* w, int layers, int64_t hidden,
                                   cudaStream_t s);
cudaError_t LaunchTrainInitInputs(void* a, int64_t batch, int64_t hidden,
                                  int64_t first_sample, cudaStream_t s);
// a = GELU(z) (exact, erf form).
cudaError_t LaunchGeluForward(const void* z, void* a, int64_t n,
                              cudaStream_t s);
// da = 2 * out / count; *loss_sum += sum(out^2) (double, device).
cudaError_t LaunchLossGrad(const void* out, void* da, int64_t n, double count,
                           double* loss_sum, cudaStream_t s);
// dz = da * GELU'(z).
cudaError_t LaunchGeluBackward(const void* da, const void* z, void* dz,
                               int64_t n, cudaStream_t s);
// w -= lr * scale * g.
cudaError_t LaunchSgd(void* w, const void* g, int64_t n, float lr, float scale,
                      cudaStream_t s);
// Adam on scale * g with fp32 moments; c1, c2 the bias corrections.
cudaError_t LaunchAdam(void* w, const void* g, float* m, float* v, int64_t n,
                       float lr, float scale, float c1, float c2,
                       cudaStream_t s);

// Cross-GPU handshakes for the copy-engine reduction: store `value` into a
// flag in the peer's memory (mapped through CUDA IPC) with a system fence;
// hold the stream until a local flag (written by the peer) reaches `value`.
cudaError_t LaunchSignal(int* remote_flag, int value, cudaStream_t s);
cudaError_t LaunchWaitFlag(const int* local_flag, int value, cudaStream_t s);
// dst += src, n bf16 elements (fp32 math).
cudaError_t LaunchAddBf16(void* dst, const void* src, int64_t n,
                          cudaStream_t s);

}  // namespace ringmaster

#endif  // RINGMASTER_KERNELS_TRAIN_KERNELS_H_
