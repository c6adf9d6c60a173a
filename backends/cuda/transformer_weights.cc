#include "backends/cuda/transformer_weights.h"

#include <cmath>

#include "backends/cuda/cuda_check.h"
#include "kernels/transformer_kernels.h"

namespace ringmaster {

CudaLayerOffsets CudaLayerLayout(const TransformerShape& s) {
  const int64_t h = s.hidden, qw = s.heads * s.head_dim,
                w3 = qw + 2 * s.kv_heads * s.head_dim, f = s.ffn_hidden;
  CudaLayerOffsets off{};
  int64_t at = 0;
  auto take = [&](int64_t count) {
    const int64_t where = at;
    at += count;
    return where;
  };
  off.g1 = take(h);
  off.wqkv = take(h * w3);
  off.wo = take(qw * h);
  off.g2 = take(h);
  off.wgu = take(h * 2 * f);
  off.wd = take(f * h);
  off.size = at;
  return off;
}

absl::Status InitCudaTransformerWeights(const TransformerShape& s, int layers,
                                        const CudaLayerOffsets& off, void* w,
                                        float* master, cudaStream_t stream) {
  const int64_t h = s.hidden, qw = s.heads * s.head_dim,
                kw = s.kv_heads * s.head_dim, w3 = qw + 2 * kw,
                f = s.ffn_hidden;
  auto at = [&](int64_t i) { return static_cast<char*>(w) + i * 2; };
  auto copy = [&](int64_t i) {
    return master != nullptr ? master + i : nullptr;
  };
  for (int l = 0; l < layers; ++l) {
    const int64_t base = l * off.size;
    auto block = [&](int64_t where, int64_t ld, int64_t rows, int64_t cols,
                     int64_t col0, TransformerMatrix m) -> absl::Status {
      const uint64_t key =
          16 * static_cast<uint64_t>(l + 1) + static_cast<uint64_t>(m);
      const int64_t fan_in = m == TransformerMatrix::kO      ? qw
                             : m == TransformerMatrix::kDown ? f
                                                             : h;
      const double scale = 1.0 / std::sqrt(static_cast<double>(fan_in));
      const int64_t i = base + where + col0;
      RM_CUDA(tk::InitMatrix(at(i), copy(i), ld, rows, cols, 0, 0, cols, key,
                             scale, stream),
              0);
      return absl::OkStatus();
    };
    RM_CUDA(tk::Fill(at(base + off.g1), copy(base + off.g1), h, 1.0f, stream),
            0);
    RM_CUDA(tk::Fill(at(base + off.g2), copy(base + off.g2), h, 1.0f, stream),
            0);
    for (absl::Status st :
         {block(off.wqkv, w3, h, qw, 0, TransformerMatrix::kQ),
          block(off.wqkv, w3, h, kw, qw, TransformerMatrix::kK),
          block(off.wqkv, w3, h, kw, qw + kw, TransformerMatrix::kV),
          block(off.wo, h, qw, h, 0, TransformerMatrix::kO),
          block(off.wgu, 2 * f, h, f, 0, TransformerMatrix::kGate),
          block(off.wgu, 2 * f, h, f, f, TransformerMatrix::kUp),
          block(off.wd, h, f, h, 0, TransformerMatrix::kDown)}) {
      if (!st.ok()) return st;
    }
  }
  const int64_t fin = layers * off.size;
  RM_CUDA(tk::Fill(at(fin), copy(fin), h, 1.0f, stream), 0);
  return absl::OkStatus();
}

}  // namespace ringmaster
