// One transformer layer's tensor-parallel slice on the host backend, as the
// trainer and the decoder both hold it: tp rank r keeps its share of the
// columns of Wq, Wk, Wv, Wgate and Wup (its query heads, the key/value
// heads they read, its SwiGLU columns) and the matching rows of Wo and
// Wdown, so each layer needs one sum over the group after attention and
// one after the MLP (Megatron's split); and what both check before
// building (HostModelPath).
#ifndef RINGMASTER_BACKENDS_HOST_TP_LAYER_H_
#define RINGMASTER_BACKENDS_HOST_TP_LAYER_H_

#include <algorithm>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "backends/host/blas.h"
#include "comm/host_comm.h"
#include "core/names.h"
#include "core/transformer.h"

namespace ringmaster {

// Where each tensor sits in a layer's tp-local parameter vector.
struct TpLayerOffsets {
  int64_t attn_norm, wq, wk, wv, wo, mlp_norm, wg, wu, wd, size;
  // This rank's widths: query columns, key (and value) columns, SwiGLU
  // columns.
  int64_t qw, kw, fw;
};

inline TpLayerOffsets TpLayerLayout(const TransformerShape& s, int tp) {
  TpLayerOffsets o{};
  const int64_t h = s.hidden;
  o.qw = s.heads / tp * s.head_dim;
  o.kw = s.kv_heads / tp * s.head_dim;
  o.fw = s.ffn_hidden / tp;
  int64_t at = 0;
  auto take = [&](int64_t count) {
    const int64_t where = at;
    at += count;
    return where;
  };
  o.attn_norm = take(h);
  o.wq = take(h * o.qw);
  o.wk = take(h * o.kw);
  o.wv = take(h * o.kw);
  o.wo = take(o.qw * h);
  o.mlp_norm = take(h);
  o.wg = take(h * o.fw);
  o.wu = take(h * o.fw);
  o.wd = take(o.fw * h);
  o.size = at;
  return o;
}

// Layer `layer`'s weights as the reference's (core/transformer.h), tp rank
// `tp_rank`'s slice, into w[o.size]; gains 1. decay, if not null, gets 1
// on matrix entries and 0 on gains.
inline void FillTpLayer(const TransformerShape& s, int layer, int tp_rank,
                        const TpLayerOffsets& o, float* w, uint8_t* decay) {
  const int64_t h = s.hidden, q = s.heads * s.head_dim,
                kv = s.kv_heads * s.head_dim, f = s.ffn_hidden;
  std::fill(w + o.attn_norm, w + o.attn_norm + h, 1.0f);
  std::fill(w + o.mlp_norm, w + o.mlp_norm + h, 1.0f);
  if (decay != nullptr) std::fill(decay, decay + o.size, uint8_t{0});
  // Columns [c0, c0 + width) of an [rows x cols] matrix.
  auto columns = [&](int64_t at, TransformerMatrix m, int64_t rows,
                     int64_t cols, int64_t width) {
    const int64_t c0 = tp_rank * width;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < width; ++c) {
        w[at + r * width + c] = static_cast<float>(
            TransformerWeight(s, layer, m, r * cols + c0 + c));
        if (decay != nullptr) decay[at + r * width + c] = 1;
      }
  };
  // Rows [r0, r0 + height) of an [rows x cols] matrix.
  auto rows = [&](int64_t at, TransformerMatrix m, int64_t height,
                  int64_t cols) {
    const int64_t r0 = tp_rank * height;
    for (int64_t i = 0; i < height * cols; ++i) {
      w[at + i] =
          static_cast<float>(TransformerWeight(s, layer, m, r0 * cols + i));
      if (decay != nullptr) decay[at + i] = 1;
    }
  };
  columns(o.wq, TransformerMatrix::kQ, h, q, o.qw);
  columns(o.wk, TransformerMatrix::kK, h, kv, o.kw);
  columns(o.wv, TransformerMatrix::kV, h, kv, o.kw);
  rows(o.wo, TransformerMatrix::kO, o.qw, h);
  columns(o.wg, TransformerMatrix::kGate, h, f, o.fw);
  columns(o.wu, TransformerMatrix::kUp, h, f, o.fw);
  rows(o.wd, TransformerMatrix::kDown, o.fw, h);
}

// What a host model (trainer or decoder) checks before building: float32
// and a BLAS. Returns the result's path, "cpu (<BLAS and its cores>)";
// `verb` says what the model does ("trains", "serves").
inline absl::StatusOr<std::string> HostModelPath(HostComm& comm,
                                                 v1::DataType dtype,
                                                 const char* verb) {
  if (dtype != v1::FLOAT32) {
    return absl::UnimplementedError(
        absl::StrFormat("the host backend %s in float32 (OpenBLAS); %s needs "
                        "GPUs",
                        verb, DataTypeName(dtype)));
  }
  const Blas* blas = LoadBlas();
  if (blas == nullptr) {
    return absl::UnimplementedError(
        "no BLAS library with cblas_sgemm here (libopenblas.so.0)");
  }
  auto local = comm.RanksOnHost();
  if (!local.ok()) return local.status();
  return "cpu (" + ShareCores(*blas, *local) + ")";
}

}  // namespace ringmaster

#endif  // RINGMASTER_BACKENDS_HOST_TP_LAYER_H_
