// Kernels of LLM inference on GPUs beyond the training step's: inputs,
// rotary embedding and key/value cache appends at a position read from
// device memory (so that a decode step is one CUDA graph replayed as the
// position advances), and decode attention of one query per sequence
// against the cache. bfloat16 storage, fp32 math; layouts as
// transformer_kernels.h's.
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

// Rotary embedding of `heads` heads of hd at v + b * ld for b < batch, all
// at position *pos (tables as Rope's).
cudaError_t RopeAtPosition(void* v, int64_t ld, int64_t batch, int64_t heads,
                           int64_t hd, const float* cos_table,
                           const float* sin_table, const int* pos,
                           cudaStream_t s);

// cache[(b * capacity + *pos) * width + j] = rows[b * ld + j], j < width,
// for the key and the value cache (k and v at rows, rows + width).
cudaError_t AppendKv(const void* k, const void* v, int64_t ld, void* kcache,
                     void* vcache, int64_t batch, int64_t capacity,
                     int64_t width, const int* pos, cudaStream_t s);

// out[b * ld_out + h * hd ..] = softmax(scale q k^T) v over positions 0 ..
// *pos of sequence b's cache, query head h reading key/value head h /
// (heads / kv_heads); q at q + b * ld_q + h * hd. hd at most 128, capacity
// at most 8192.
cudaError_t DecodeAttention(const void* q, int64_t ld_q, const void* kcache,
                            const void* vcache, void* out, int64_t ld_out,
                            int64_t batch, int64_t heads, int64_t kv_heads,
                            int64_t hd, int64_t capacity, const int* pos,
                            float scale, cudaStream_t s);

// *pos += 1.
cudaError_t Advance(int* pos, cudaStream_t s);

}  // namespace ringmaster::tk

#endif  // RINGMASTER_KERNELS_DECODE_KERNELS_H_
