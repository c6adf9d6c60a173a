// Kernels of LLM inference on GPUs beyond the training step's: the inputs
// of a decode step at a position read from device memory (so that a decode
// step is one CUDA graph replayed as the position advances), products of a
// few rows against a weight matrix at the memory's speed, and decode
// attention of one query per sequence against the key/value cache.
// bfloat16 storage, fp32 math; layouts as transformer_kernels.h's.
//
// The product and the attention split their reduction across thread
// blocks; the last block of each output tile to finish sums the partial
// results in a fixed order (so results are deterministic) and leaves its
// arrival counter at zero for the next launch. Both may be launched as
// programmatic dependents of the kernel before them (`pdl`): the product
// issues its first weight loads and then waits for that kernel's results,
// so one kernel's tail overlaps the next one's start. They must not run
// concurrently with each other on the same DecodeScratch.
#ifndef RINGMASTER_KERNELS_DECODE_KERNELS_H_
#define RINGMASTER_KERNELS_DECODE_KERNELS_H_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace ringmaster::tk {

// x[(b * rows + i) * h + j] = TransformerInput(((b * capacity) + first + i)
// * h + j) for b < batch, i < rows; first = *pos when pos is not null.
cudaError_t SequenceInputs(void* x, int64_t batch, int64_t rows, int64_t h,
                           int64_t capacity, int64_t first, const int* pos,
                           cudaStream_t s);

// Scratch shared by DecodeGemv and DecodeAttention: fp32 partial results
// (`partial_floats` of them) and kDecodeCounters arrival counters, zeroed
// once before the first launch.
inline constexpr int kDecodeCounters = 4096;
struct DecodeScratch {
  float* partial = nullptr;
  int64_t partial_floats = 0;
  unsigned* counters = nullptr;
};

// The most rows DecodeGemv takes (beyond it a tensor-core product wins).
inline constexpr int64_t kDecodeGemvMaxRows = 8;

// What DecodeGemv multiplies: x itself ([rows x k]), x / rms(x) * g with
// rms over the k columns of a row (RMSNorm, eps added to the mean square),
// or silu(gate) * up for x = [gate | up] ([rows x 2k]).
enum class DecodeInput { kPlain, kRmsNorm, kSwiglu };

// y[rows x m] = in(x) W + c (c may be null), W row-major [k x m]; rows at
// most kDecodeGemvMaxRows, m a multiple of 8, y not aliasing x or c.
cudaError_t DecodeGemv(DecodeInput input, const void* x, const void* g,
                       float eps, const void* w, const void* c, void* y,
                       int64_t rows, int64_t k, int64_t m,
                       const DecodeScratch& scratch, bool pdl, cudaStream_t s);
// The partial floats DecodeGemv(rows, k, m) needs on the current device.
int64_t DecodeGemvScratch(int64_t rows, int64_t k, int64_t m);

// One new token per sequence b < batch: qkv rows [q heads | k | v] at
// qkv + b * ld, before rotary. Rotates q and k at position *pos (tables as
// Rope's), writes that key and value into the caches ([batch x capacity x
// kv_heads * hd] each) and sets out[b * ld_out + h * hd ..] =
// softmax(scale q k^T) v over positions 0 .. *pos, query head h reading
// key/value head h / (heads / kv_heads). qkv is not modified. hd 64 or
// 128, heads / kv_heads at most 8, batch * kv_heads at most 2048.
cudaError_t DecodeAttention(const void* qkv, int64_t ld, void* kcache,
                            void* vcache, void* out, int64_t ld_out,
                            int64_t batch, int64_t heads, int64_t kv_heads,
                            int64_t hd, int64_t capacity,
                            const float* cos_table, const float* sin_table,
                            const int* pos, float scale,
                            const DecodeScratch& scratch, bool pdl,
                            cudaStream_t s);
// The partial floats DecodeAttention needs.
int64_t DecodeAttentionScratch(int64_t batch, int64_t heads, int64_t hd,
                               int64_t capacity);

// *pos += 1.
cudaError_t Advance(int* pos, cudaStream_t s);

}  // namespace ringmaster::tk

#endif  // RINGMASTER_KERNELS_DECODE_KERNELS_H_
