// The fused attention kernels against a float64 reference computed here
// from the same bfloat16 inputs: output, log-sum-exp and the three input
// gradients, for both head sizes, grouped-query heads and several query
// blocks per sequence. Skips without a GPU (CI compiles it; the GPU
// machine runs it through bench/transformer/device.sh).
#include "kernels/flash_attention.h"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <ostream>
#include <string>
#include <vector>

#include "kernels/kernel_test_values.h"

namespace ringmaster::tk {
namespace {

struct Case {
  int64_t batch, seq, heads, kv_heads, hd;
};

std::string Name(const Case& c) {
  return "b" + std::to_string(c.batch) + "_seq" + std::to_string(c.seq) + "_h" +
         std::to_string(c.heads) + "_kv" + std::to_string(c.kv_heads) + "_hd" +
         std::to_string(c.hd);
}
void PrintTo(const Case& c, std::ostream* os) { *os << Name(c); }

class FlashAttention : public testing::TestWithParam<Case> {};

TEST_P(FlashAttention, MatchesFloat64ForwardAndBackward) {
  if (!HaveGpu()) GTEST_SKIP() << "no GPU";
  const Case c = GetParam();
  ASSERT_TRUE(FlashAttentionSupports(c.seq, c.hd));
  const int64_t tokens = c.batch * c.seq, qw = c.heads * c.hd,
                kw = c.kv_heads * c.hd, w3 = qw + 2 * kw,
                group = c.heads / c.kv_heads;
  const double scale = 1.0 / std::sqrt(static_cast<double>(c.hd));
  std::vector<uint16_t> qkv(tokens * w3), d_o(tokens * qw);
  for (int64_t i = 0; i < tokens * w3; ++i) qkv[i] = ToBf16(2 * Value(i));
  for (int64_t i = 0; i < tokens * qw; ++i)
    d_o[i] = ToBf16(Value(i + (1 << 30)));
  auto q = [&](int64_t t, int64_t h, int64_t d) {
    return FromBf16(qkv[t * w3 + h * c.hd + d]);
  };
  auto k = [&](int64_t t, int64_t j, int64_t d) {
    return FromBf16(qkv[t * w3 + qw + j * c.hd + d]);
  };
  auto v = [&](int64_t t, int64_t j, int64_t d) {
    return FromBf16(qkv[t * w3 + qw + kw + j * c.hd + d]);
  };
  // The reference, row by row.
  std::vector<double> o(tokens * qw, 0), lse(c.batch * c.heads * c.seq),
      dq(tokens * qw, 0), dk(tokens * kw, 0), dv(tokens * kw, 0);
  for (int64_t b = 0; b < c.batch; ++b)
    for (int64_t h = 0; h < c.heads; ++h)
      for (int64_t i = 0; i < c.seq; ++i) {
        const int64_t ti = b * c.seq + i, j = h / group;
        std::vector<double> p(i + 1), dp(i + 1);
        double mx = -INFINITY;
        for (int64_t n = 0; n <= i; ++n) {
          double s = 0;
          for (int64_t d = 0; d < c.hd; ++d)
            s += q(ti, h, d) * k(b * c.seq + n, j, d);
          p[n] = s * scale;
          mx = std::max(mx, p[n]);
        }
        double sum = 0;
        for (double& x : p) sum += (x = std::exp(x - mx));
        lse[(b * c.heads + h) * c.seq + i] = mx + std::log(sum);
        for (double& x : p) x /= sum;
        double delta = 0;
        for (int64_t n = 0; n <= i; ++n) {
          const int64_t tn = b * c.seq + n;
          double acc = 0;
          for (int64_t d = 0; d < c.hd; ++d) {
            o[ti * qw + h * c.hd + d] += p[n] * v(tn, j, d);
            acc += FromBf16(d_o[ti * qw + h * c.hd + d]) * v(tn, j, d);
          }
          dp[n] = acc;
          delta += p[n] * acc;
        }
        for (int64_t n = 0; n <= i; ++n) {
          const int64_t tn = b * c.seq + n;
          const double ds = p[n] * (dp[n] - delta) * scale;
          for (int64_t d = 0; d < c.hd; ++d) {
            dq[ti * qw + h * c.hd + d] += ds * k(tn, j, d);
            dk[tn * kw + j * c.hd + d] += ds * q(ti, h, d);
            dv[tn * kw + j * c.hd + d] +=
                p[n] * FromBf16(d_o[ti * qw + h * c.hd + d]);
          }
        }
      }

  FlashShape shape;
  shape.batch = c.batch;
  shape.seq = c.seq;
  shape.heads = c.heads;
  shape.kv_heads = c.kv_heads;
  shape.head_dim = c.hd;
  shape.scale = static_cast<float>(scale);
  void *d_qkv = nullptr, *d_out = nullptr, *d_do = nullptr, *d_grad = nullptr,
       *scratch = nullptr;
  float* d_lse = nullptr;
  const size_t half = 2;
  ASSERT_EQ(cudaMalloc(&d_qkv, tokens * w3 * half), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&d_out, tokens * qw * half), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&d_do, tokens * qw * half), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&d_grad, tokens * w3 * half), cudaSuccess);
  ASSERT_EQ(
      cudaMalloc(reinterpret_cast<void**>(&d_lse), lse.size() * sizeof(float)),
      cudaSuccess);
  ASSERT_EQ(cudaMalloc(&scratch, FlashAttentionScratchBytes(shape)),
            cudaSuccess);
  ASSERT_EQ(
      cudaMemcpy(d_qkv, qkv.data(), qkv.size() * half, cudaMemcpyHostToDevice),
      cudaSuccess);
  ASSERT_EQ(
      cudaMemcpy(d_do, d_o.data(), d_o.size() * half, cudaMemcpyHostToDevice),
      cudaSuccess);
  auto at = [](void* p, int64_t elems) {
    return static_cast<char*>(p) + elems * 2;
  };
  ASSERT_EQ(
      FlashAttentionForward(shape, d_qkv, at(d_qkv, qw), at(d_qkv, qw + kw), w3,
                            d_out, qw, d_lse, nullptr),
      cudaSuccess);
  ASSERT_EQ(
      FlashAttentionBackward(shape, d_qkv, at(d_qkv, qw), at(d_qkv, qw + kw),
                             w3, d_out, d_do, qw, d_lse, d_grad, at(d_grad, qw),
                             at(d_grad, qw + kw), w3, scratch, nullptr),
      cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<uint16_t> out(tokens * qw), grad(tokens * w3);
  std::vector<float> lse_got(lse.size());
  ASSERT_EQ(
      cudaMemcpy(out.data(), d_out, out.size() * half, cudaMemcpyDeviceToHost),
      cudaSuccess);
  ASSERT_EQ(cudaMemcpy(grad.data(), d_grad, grad.size() * half,
                       cudaMemcpyDeviceToHost),
            cudaSuccess);
  ASSERT_EQ(cudaMemcpy(lse_got.data(), d_lse, lse_got.size() * sizeof(float),
                       cudaMemcpyDeviceToHost),
            cudaSuccess);
  for (void* p : {d_qkv, d_out, d_do, d_grad, scratch}) cudaFree(p);
  cudaFree(d_lse);

  double lse_err = 0;
  for (size_t i = 0; i < lse.size(); ++i)
    lse_err = std::max(lse_err, std::abs(lse_got[i] - lse[i]));
  // bfloat16 keeps 8 bits: the probabilities and outputs are rounded once
  // each, the products accumulate in fp32.
  EXPECT_LT(lse_err, 1e-3);
  EXPECT_LT(Error(out, qw, 0, o, tokens, qw), 1e-2);
  EXPECT_LT(Error(grad, w3, 0, dq, tokens, qw), 2e-2);
  EXPECT_LT(Error(grad, w3, qw, dk, tokens, kw), 2e-2);
  EXPECT_LT(Error(grad, w3, qw + kw, dv, tokens, kw), 2e-2);
}

INSTANTIATE_TEST_SUITE_P(Shapes, FlashAttention,
                         testing::Values(Case{2, 384, 4, 2, 64},
                                         Case{1, 256, 4, 1, 128},
                                         Case{2, 128, 2, 2, 128}),
                         [](const testing::TestParamInfo<Case>& info) {
                           return Name(info.param);
                         });

}  // namespace
}  // namespace ringmaster::tk
