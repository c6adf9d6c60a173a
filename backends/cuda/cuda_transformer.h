// The transformer training step on one GPU (backends/transformer_trainer.h):
// bfloat16 weights and activations with fp32 master weights and AdamW
// state; matrix products through cuBLASLt (the residual adds fused as its
// C operand; q, k, v and gate, up each one product); attention as
// batched cuBLASLt products around a causal softmax kernel (the scores of
// each layer are materialized: seq x seq per head); RMSNorm, rotary,
// SwiGLU, the loss and AdamW as kernels (kernels/transformer_kernels.h).
// Layouts of one rank (dp = tp = 1) only: the others are Unimplemented.
#ifndef RINGMASTER_BACKENDS_CUDA_CUDA_TRANSFORMER_H_
#define RINGMASTER_BACKENDS_CUDA_CUDA_TRANSFORMER_H_

#include <memory>

#include "absl/status/statusor.h"
#include "backends/transformer_trainer.h"

namespace ringmaster {

absl::StatusOr<std::unique_ptr<TransformerTrainer>> NewCudaTransformer(
    int device, int ranks);

}  // namespace ringmaster

#endif  // RINGMASTER_BACKENDS_CUDA_CUDA_TRANSFORMER_H_
