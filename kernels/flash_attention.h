// Fused causal attention with grouped-query heads (bfloat16 in and out,
// fp32 accumulation): the forward pass keeps one row's running maximum and
// sum instead of the score matrix and stores per query only the log-sum-exp
// of its scores; the backward pass recomputes each block of probabilities
// from it. Written by hand on the tensor cores' warp-level products
// (mma.sync), blocks of 64 queries against 64 keys.
//
// Layout: token t of sequence b is row b * seq + t of row-major buffers
// with leading dimension ld; query head h occupies columns h * hd .. h * hd
// + hd - 1 of q (and of o, dq), its key/value head h / group those of k and
// v (and dk, dv). Log-sum-exps and the backward pass's row sums are fp32
// [batch][heads][seq].
#ifndef RINGMASTER_KERNELS_FLASH_ATTENTION_H_
#define RINGMASTER_KERNELS_FLASH_ATTENTION_H_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace ringmaster::tk {

// Whether the fused kernels take this shape: head_dim 64 or 128, seq a
// multiple of 64, the leading dimensions multiples of 8.
bool FlashAttentionSupports(int64_t seq, int64_t head_dim);

struct FlashShape {
  int64_t batch = 0, seq = 0, heads = 0, kv_heads = 0, head_dim = 0;
  float scale = 0;  // of the scores, usually 1 / sqrt(head_dim)
};

// o = softmax(scale q k^T, causal) v; lse[b][h][i] = log of the sum of
// exp(scale s) over row i's keys (natural logarithm).
cudaError_t FlashAttentionForward(const FlashShape& shape, const void* q,
                                  const void* k, const void* v, int64_t ld_qkv,
                                  void* o, int64_t ld_o, float* lse,
                                  cudaStream_t s);

// Scratch the backward pass needs: bytes of fp32 for the row sums.
int64_t FlashAttentionScratchBytes(const FlashShape& shape);

// dq, dk, dv (bfloat16, overwritten, leading dimension ld_dqkv) from the
// forward pass's q, k, v, o, lse and the output gradient do (ld_o).
cudaError_t FlashAttentionBackward(const FlashShape& shape, const void* q,
                                   const void* k, const void* v, int64_t ld_qkv,
                                   const void* o, const void* d_o, int64_t ld_o,
                                   const float* lse, void* dq, void* dk,
                                   void* dv, int64_t ld_dqkv, void* scratch,
                                   cudaStream_t s);

}  // namespace ringmaster::tk

#endif  // RINGMASTER_KERNELS_FLASH_ATTENTION_H_
