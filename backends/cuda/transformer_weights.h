// The transformer's weights on one GPU as the CUDA trainer and the CUDA
// inference engine hold them (bfloat16, flat): per layer the attention
// norm's gain, Wq Wk Wv side by side ([hidden x (q + 2 kv)] row-major, y =
// x W), Wo, the MLP norm's gain, Wgate and Wup side by side, Wdown; after
// the layers the final norm's gain.
#ifndef RINGMASTER_BACKENDS_CUDA_TRANSFORMER_WEIGHTS_H_
#define RINGMASTER_BACKENDS_CUDA_TRANSFORMER_WEIGHTS_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/status.h"
#include "core/transformer.h"

namespace ringmaster {

// Offsets (elements) of one layer's tensors; size: the layer's elements.
struct CudaLayerOffsets {
  int64_t g1, wqkv, wo, g2, wgu, wd, size;
};
CudaLayerOffsets CudaLayerLayout(const TransformerShape& s);

// `layers` layers' weights at w (and their fp32 copies at master when not
// null) as core/transformer.h's reference initializes them, gains 1, then
// the final gain. Asynchronous on `stream`.
absl::Status InitCudaTransformerWeights(const TransformerShape& s, int layers,
                                        const CudaLayerOffsets& off, void* w,
                                        float* master, cudaStream_t stream);

}  // namespace ringmaster

#endif  // RINGMASTER_BACKENDS_CUDA_TRANSFORMER_WEIGHTS_H_
