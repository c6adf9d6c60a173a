// Element-wise kernels of the training step (fp32, fp16 or bf16 storage,
// fp32 math).
// GEMMs go through cuBLASLt; these are the passes between them.
#ifndef RINGMASTER_KERNELS_TRAIN_KERNELS_H_
#define RINGMASTER_KERNELS_TRAIN_KERNELS_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace ringmaster {

// The storage type of weights, activations and gradients (tf32 stores
// float32; the GEMMs' compute type makes the difference). Element-wise math
// is fp32 in every case.
enum class TrainType : int { kFloat32 = 0, kFloat16 = 1, kBFloat16 = 2 };
size_t TrainTypeBytes(TrainType t);

// Buffers of type `t` are passed as void* so host code needs no CUDA type
// headers. `master` (nullable): fp32 master weights, initialized and
// updated beside `w` (w is then their rounding).
cudaError_t LaunchTrainInitWeights(TrainType t, void* w, float* master,
                                   int layers, int64_t hidden, cudaStream_t s);
cudaError_t LaunchTrainInitInputs(TrainType t, void* a, int64_t batch,
                                  int64_t hidden, int64_t first_sample,
                                  cudaStream_t s);
// a = GELU(z) (exact, erf form).
cudaError_t LaunchGeluForward(TrainType t, const void* z, void* a, int64_t n,
                              cudaStream_t s);
// da = loss_scale * 2 * out / count; *loss_sum += sum(out^2) (double,
// device). A loss scale keeps float16 gradients out of the subnormals.
cudaError_t LaunchLossGrad(TrainType t, const void* out, void* da, int64_t n,
                           double count, float loss_scale, double* loss_sum,
                           cudaStream_t s);
// dz = da * GELU'(z).
cudaError_t LaunchGeluBackward(TrainType t, const void* da, const void* z,
                               void* dz, int64_t n, cudaStream_t s);
// w -= lr * scale * g.
cudaError_t LaunchSgd(TrainType t, void* w, float* master, const void* g,
                      int64_t n, float lr, float scale, cudaStream_t s);
// Adam on scale * g with fp32 moments; c1, c2 the bias corrections.
cudaError_t LaunchAdam(TrainType t, void* w, float* master, const void* g,
                       float* m, float* v, int64_t n, float lr, float scale,
                       float c1, float c2, cudaStream_t s);

// Cross-GPU handshakes for the copy-engine reduction: store `value` into a
// flag in the peer's memory (mapped through CUDA IPC) with a system fence;
// hold the stream until a local flag (written by the peer) reaches `value`.
cudaError_t LaunchSignal(int* remote_flag, int value, cudaStream_t s);
cudaError_t LaunchWaitFlag(const int* local_flag, int value, cudaStream_t s);
// dst += src, n elements of type t (fp32 math).
cudaError_t LaunchAdd(TrainType t, void* dst, const void* src, int64_t n,
                      cudaStream_t s);
// *count += the number of the n elements of type t that are zero (+0 or
// -0); *count is device memory.
cudaError_t LaunchCountZeros(TrainType t, const void* p, int64_t n,
                             unsigned long long* count, cudaStream_t s);

}  // namespace ringmaster

#endif  // RINGMASTER_KERNELS_TRAIN_KERNELS_H_
