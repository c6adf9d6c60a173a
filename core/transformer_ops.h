// The transformer block's operations, plain loops templated on the scalar
// type: the reference model (core/transformer.h) is built from them, and
// the host backend composes the same ones (matrix products through BLAS)
// on its tensor-parallel slices. Activations are row-major [tokens x
// width]; token t sits at position t % seq of its sequence.
#ifndef RINGMASTER_CORE_TRANSFORMER_OPS_H_
#define RINGMASTER_CORE_TRANSFORMER_OPS_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace ringmaster::transformer_ops {

// c[n x m] = a[n x k] * b[k x m].
template <typename T>
inline void MatMul(const T* a, const T* b, T* c, int64_t n, int64_t k,
                   int64_t m) {
  std::fill(c, c + n * m, T(0));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t l = 0; l < k; ++l) {
      const T av = a[i * k + l];
      for (int64_t j = 0; j < m; ++j) c[i * m + j] += av * b[l * m + j];
    }
}

// dw[k x m] += a[n x k]^T * dy[n x m].
template <typename T>
inline void AddMatMulAT(const T* a, const T* dy, T* dw, int64_t n, int64_t k,
                        int64_t m) {
  for (int64_t i = 0; i < n; ++i)
    for (int64_t l = 0; l < k; ++l) {
      const T av = a[i * k + l];
      for (int64_t j = 0; j < m; ++j) dw[l * m + j] += av * dy[i * m + j];
    }
}

// dx[n x k] += dy[n x m] * w[k x m]^T.
template <typename T>
inline void AddMatMulBT(const T* dy, const T* w, T* dx, int64_t n, int64_t m,
                        int64_t k) {
  for (int64_t i = 0; i < n; ++i)
    for (int64_t l = 0; l < k; ++l) {
      T sum = 0;
      for (int64_t j = 0; j < m; ++j) sum += dy[i * m + j] * w[l * m + j];
      dx[i * k + l] += sum;
    }
}

// y = x / rms(x) * g per row; r holds each row's 1 / rms.
template <typename T>
inline void RmsNorm(const T* x, const T* g, T* y, T* r, int64_t n, int64_t h,
                    double eps) {
  for (int64_t i = 0; i < n; ++i) {
    T ss = 0;
    for (int64_t j = 0; j < h; ++j) ss += x[i * h + j] * x[i * h + j];
    r[i] = T(1) / std::sqrt(ss / T(h) + T(eps));
    for (int64_t j = 0; j < h; ++j) y[i * h + j] = x[i * h + j] * r[i] * g[j];
  }
}

// dx += d(RmsNorm)/dx . dy; dg += d/dg.
template <typename T>
inline void RmsNormBackward(const T* x, const T* g, const T* r, const T* dy,
                            T* dx, T* dg, int64_t n, int64_t h) {
  for (int64_t i = 0; i < n; ++i) {
    T dot = 0;  // mean over the row of dxhat * xhat
    for (int64_t j = 0; j < h; ++j) {
      const T xhat = x[i * h + j] * r[i];
      dg[j] += dy[i * h + j] * xhat;
      dot += dy[i * h + j] * g[j] * xhat;
    }
    dot /= T(h);
    for (int64_t j = 0; j < h; ++j) {
      const T xhat = x[i * h + j] * r[i];
      dx[i * h + j] += r[i] * (dy[i * h + j] * g[j] - xhat * dot);
    }
  }
}

// Rotary embedding of every head of `v` ([tokens x heads*hd], token t at
// position first + t % seq), rotate-half pairs (i, i + hd/2) as Llama's;
// `sign` -1 applies the inverse rotation (the backward pass of the forward
// one). first > 0: tokens that continue their sequences (decoding).
template <typename T>
inline void RopeAt(T* v, int64_t tokens, int64_t seq, int64_t first,
                   int64_t heads, int64_t hd, double theta, int sign) {
  const int64_t half = hd / 2;
  for (int64_t t = 0; t < tokens; ++t) {
    const double pos = static_cast<double>(first + t % seq);
    for (int64_t i = 0; i < half; ++i) {
      const double angle =
          pos * std::pow(theta, -2.0 * static_cast<double>(i) / hd);
      const T c = static_cast<T>(std::cos(angle));
      const T s = static_cast<T>(sign * std::sin(angle));
      for (int64_t h = 0; h < heads; ++h) {
        T* p = v + t * heads * hd + h * hd;
        const T a = p[i], b = p[i + half];
        p[i] = a * c - b * s;
        p[i + half] = a * s + b * c;
      }
    }
  }
}

// Token t at position t % seq.
template <typename T>
inline void Rope(T* v, int64_t tokens, int64_t seq, int64_t heads, int64_t hd,
                 double theta, int sign) {
  RopeAt(v, tokens, seq, int64_t{0}, heads, hd, theta, sign);
}

// Causal attention with grouped-query heads over `batch` sequences of
// `seq` tokens: q [tokens x heads*hd] and k, v [tokens x kv*hd] (q and k
// after RoPE); p [batch x heads x seq x seq] the probabilities (0 above
// the diagonal); o [tokens x heads*hd].
template <typename T>
inline void Attention(const T* q, const T* k, const T* v, T* p, T* o,
                      int64_t batch, int64_t seq, int64_t heads, int64_t kvh,
                      int64_t hd) {
  const int64_t group = heads / kvh, qw = heads * hd, kw = kvh * hd;
  const T scale = T(1) / std::sqrt(static_cast<T>(hd));
  std::fill(o, o + batch * seq * qw, T(0));
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < heads; ++h) {
      const int64_t kv = h / group;
      for (int64_t i = 0; i < seq; ++i) {
        T* row = p + ((b * heads + h) * seq + i) * seq;
        const T* qi = q + (b * seq + i) * qw + h * hd;
        T mx = -std::numeric_limits<T>::infinity();
        for (int64_t j = 0; j <= i; ++j) {
          const T* kj = k + (b * seq + j) * kw + kv * hd;
          T dot = 0;
          for (int64_t d = 0; d < hd; ++d) dot += qi[d] * kj[d];
          row[j] = dot * scale;
          mx = std::max(mx, row[j]);
        }
        T sum = 0;
        for (int64_t j = 0; j <= i; ++j) {
          row[j] = std::exp(row[j] - mx);
          sum += row[j];
        }
        for (int64_t j = 0; j < seq; ++j) row[j] = j <= i ? row[j] / sum : T(0);
        T* oi = o + (b * seq + i) * qw + h * hd;
        for (int64_t j = 0; j <= i; ++j) {
          const T* vj = v + (b * seq + j) * kw + kv * hd;
          for (int64_t d = 0; d < hd; ++d) oi[d] += row[j] * vj[d];
        }
      }
    }
}

// Attention of `m` new tokens per sequence (positions first .. first + m -
// 1) against a key/value cache: q [batch*m x heads*hd] (row b*m + i), the
// caches [batch x capacity x kvh*hd] holding positions 0 .. first + m - 1
// (the new tokens' keys and values included), o [batch*m x heads*hd].
// Causal: position first + i sees positions up to its own. The same
// arithmetic as Attention's rows.
template <typename T>
inline void AttentionCached(const T* q, const T* kcache, const T* vcache, T* o,
                            int64_t batch, int64_t m, int64_t first,
                            int64_t capacity, int64_t heads, int64_t kvh,
                            int64_t hd) {
  const int64_t group = heads / kvh, qw = heads * hd, kw = kvh * hd;
  const T scale = T(1) / std::sqrt(static_cast<T>(hd));
  std::vector<T> row(first + m);
  std::fill(o, o + batch * m * qw, T(0));
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < heads; ++h) {
      const int64_t kv = h / group;
      for (int64_t i = 0; i < m; ++i) {
        const int64_t pos = first + i;
        const T* qi = q + (b * m + i) * qw + h * hd;
        T mx = -std::numeric_limits<T>::infinity();
        for (int64_t j = 0; j <= pos; ++j) {
          const T* kj = kcache + (b * capacity + j) * kw + kv * hd;
          T dot = 0;
          for (int64_t d = 0; d < hd; ++d) dot += qi[d] * kj[d];
          row[j] = dot * scale;
          mx = std::max(mx, row[j]);
        }
        T sum = 0;
        for (int64_t j = 0; j <= pos; ++j) {
          row[j] = std::exp(row[j] - mx);
          sum += row[j];
        }
        T* oi = o + (b * m + i) * qw + h * hd;
        for (int64_t j = 0; j <= pos; ++j) {
          const T* vj = vcache + (b * capacity + j) * kw + kv * hd;
          for (int64_t d = 0; d < hd; ++d) oi[d] += row[j] / sum * vj[d];
        }
      }
    }
}

// Accumulates the gradients of Attention's inputs from `dout`.
template <typename T>
inline void AttentionBackward(const T* q, const T* k, const T* v, const T* p,
                              const T* dout, T* dq, T* dk, T* dv, int64_t batch,
                              int64_t seq, int64_t heads, int64_t kvh,
                              int64_t hd) {
  const int64_t group = heads / kvh, qw = heads * hd, kw = kvh * hd;
  const T scale = T(1) / std::sqrt(static_cast<T>(hd));
  std::vector<T> dp(seq);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < heads; ++h) {
      const int64_t kv = h / group;
      for (int64_t i = 0; i < seq; ++i) {
        const T* row = p + ((b * heads + h) * seq + i) * seq;
        const T* doi = dout + (b * seq + i) * qw + h * hd;
        const T* qi = q + (b * seq + i) * qw + h * hd;
        T* dqi = dq + (b * seq + i) * qw + h * hd;
        T weighted = 0;  // sum_j p_ij dp_ij
        for (int64_t j = 0; j <= i; ++j) {
          const T* vj = v + (b * seq + j) * kw + kv * hd;
          T dot = 0;
          for (int64_t d = 0; d < hd; ++d) dot += doi[d] * vj[d];
          dp[j] = dot;
          weighted += row[j] * dot;
        }
        for (int64_t j = 0; j <= i; ++j) {
          const T ds = row[j] * (dp[j] - weighted) * scale;
          const T* kj = k + (b * seq + j) * kw + kv * hd;
          T* dkj = dk + (b * seq + j) * kw + kv * hd;
          T* dvj = dv + (b * seq + j) * kw + kv * hd;
          for (int64_t d = 0; d < hd; ++d) {
            dvj[d] += row[j] * doi[d];
            dqi[d] += ds * kj[d];
            dkj[d] += ds * qi[d];
          }
        }
      }
    }
}

template <typename T>
inline T Sigmoid(T a) {
  return T(1) / (T(1) + std::exp(-a));
}

}  // namespace ringmaster::transformer_ops

#endif  // RINGMASTER_CORE_TRANSFORMER_OPS_H_
