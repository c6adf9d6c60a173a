// LLM inference on one GPU (bfloat16): prefill through the fused attention
// kernels, decode steps against a key/value cache captured once in a CUDA
// graph and replayed (backends/inference_engine.h).
#ifndef RINGMASTER_BACKENDS_CUDA_CUDA_INFERENCE_H_
#define RINGMASTER_BACKENDS_CUDA_CUDA_INFERENCE_H_

#include <memory>

#include "absl/status/statusor.h"
#include "backends/inference_engine.h"

namespace ringmaster {

// The engine of local GPU `device` for a group of `ranks` ranks (one so
// far: tensor parallelism over NCCL is not built yet).
absl::StatusOr<std::unique_ptr<InferenceEngine>> NewCudaInferenceEngine(
    int device, int ranks);

}  // namespace ringmaster

#endif  // RINGMASTER_BACKENDS_CUDA_CUDA_INFERENCE_H_
