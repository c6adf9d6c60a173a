// Kernels of the transformer training step on GPUs (bfloat16 storage,
// fp32 math): initial values from core/transformer.h's hash, RMSNorm,
// rotary embedding, causal softmax, SwiGLU, the loss and AdamW, forward
// and backward. Matrix products go through cuBLASLt; these are the passes
// between them. bfloat16 buffers are void* so host code needs no CUDA
// type headers; activations are row-major [tokens x width] with a leading
// dimension where a buffer holds several (q, k and v side by side).
#ifndef RINGMASTER_KERNELS_TRANSFORMER_KERNELS_H_
#define RINGMASTER_KERNELS_TRANSFORMER_KERNELS_H_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace ringmaster::tk {

// dst[r * ld + c] (and master, if not null, at the same index) for r <
// rows, c < cols: TransformerUniform(key, (r + row0) * full_cols + col0 +
// c) * scale — a block of a full [? x full_cols] matrix.
cudaError_t InitMatrix(void* dst, float* master, int64_t ld, int64_t rows,
                       int64_t cols, int64_t row0, int64_t col0,
                       int64_t full_cols, uint64_t key, double scale,
                       cudaStream_t s);
// dst[i] = value (and master[i]), i < n.
cudaError_t Fill(void* dst, float* master, int64_t n, float value,
                 cudaStream_t s);
// x[i] = TransformerInput(first + i) (bfloat16); target[i] =
// TransformerTarget(first + i) (fp32).
cudaError_t InitData(void* x, float* target, int64_t n, int64_t first,
                     cudaStream_t s);

// y = x / rms(x) * g per row of h; rinv[row] = 1 / rms.
cudaError_t RmsNormForward(const void* x, const void* g, void* y, float* rinv,
                           int64_t rows, int64_t h, float eps, cudaStream_t s);
// dx = (residual ? residual : 0) + d(RmsNorm)/dx . dy; dg (fp32) += d/dg.
// dx may alias residual.
cudaError_t RmsNormBackward(const void* x, const void* g, const float* rinv,
                            const void* dy, const void* residual, void* dx,
                            float* dg, int64_t rows, int64_t h, cudaStream_t s);

// Rotary embedding in place on `heads` heads of hd at v + t * ld (token t
// at position t % seq), pairs (i, i + hd/2); cos/sin tables [seq x hd/2]
// (fp32). sign -1 rotates back (the backward pass).
cudaError_t Rope(void* v, int64_t ld, int64_t tokens, int64_t seq,
                 int64_t heads, int64_t hd, const float* cos_table,
                 const float* sin_table, int sign, cudaStream_t s);

// Causal softmax in place over `matrices` row-major [rows x cols] score
// matrices, the scores of queries q0 .. q0 + rows - 1 against keys 0 ..
// cols - 1: row r keeps columns j <= q0 + r, the rest become 0.
cudaError_t SoftmaxCausal(void* scores, int64_t matrices, int64_t rows,
                          int64_t cols, int64_t q0, cudaStream_t s);
// dp -> ds in place: ds = p * (dp - sum_j p dp) * scale (same shapes).
cudaError_t SoftmaxBackward(const void* p, void* dp, int64_t matrices,
                            int64_t rows, int64_t cols, int64_t q0, float scale,
                            cudaStream_t s);

// Grouped-query attention's keys and values per query head: rep[t][h]
// = src[t][h / group] for `heads` heads of hd, src rows of ld_src, rep
// rows of heads * hd.
cudaError_t ReplicateHeads(const void* src, int64_t ld_src, void* rep,
                           int64_t tokens, int64_t heads, int64_t group,
                           int64_t hd, cudaStream_t s);
// The reverse for gradients: dst[t][j] = sum over the group's heads of
// rep[t][j * group + g] (dst rows of ld_dst).
cudaError_t SumHeads(const void* rep, void* dst, int64_t ld_dst, int64_t tokens,
                     int64_t heads, int64_t group, int64_t hd, cudaStream_t s);

// hidden[n x f] = silu(gate) * up with gu = [gate | up] ([n x 2f]).
cudaError_t SwigluForward(const void* gu, void* hidden, int64_t n, int64_t f,
                          cudaStream_t s);
// dgu = [d gate | d up] from dhidden.
cudaError_t SwigluBackward(const void* gu, const void* dhidden, void* dgu,
                           int64_t n, int64_t f, cudaStream_t s);

// loss (fp64, accumulated) += sum 0.5 (y - target)^2 * inv_total;
// dy = (y - target) * inv_total.
cudaError_t Loss(const void* y, const float* target, void* dy, double* loss,
                 int64_t n, double inv_total, cudaStream_t s);

// dst (bfloat16) = src (fp32).
cudaError_t ToBf16(const float* src, void* dst, int64_t n, cudaStream_t s);

// AdamW (beta1 0.9, beta2 0.95, eps 1e-8) on fp32 master weights with
// bfloat16 gradients; w (bfloat16) = the rounded master. decay: weight
// decay lr * wd applied first (matrices; 0 for gains). c1, c2: the bias
// corrections 1 - beta^t. sgd: master -= lr * g.
cudaError_t AdamW(void* w, float* master, const void* g, float* m, float* v,
                  int64_t n, float lr, float wd, float c1, float c2, bool sgd,
                  cudaStream_t s);
// The same on bfloat16 weights and bfloat16 moments (fp32 arithmetic,
// rounded once per element and step).
cudaError_t AdamWBf16(void* w, const void* g, void* m, void* v, int64_t n,
                      float lr, float wd, float c1, float c2, bool sgd,
                      cudaStream_t s);

}  // namespace ringmaster::tk

#endif  // RINGMASTER_KERNELS_TRANSFORMER_KERNELS_H_
