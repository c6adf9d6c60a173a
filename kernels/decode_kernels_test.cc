// The decode kernels against float64 references computed here from the
// same bfloat16 inputs: the few-row products for each input transform,
// split and unsplit reductions, ragged edges, and a second launch on the
// same scratch (the arrival counters must have been left at zero); decode
// attention with rotary at the position, grouped-query heads, a partial
// last split and the cache append. Skips without a GPU (CI compiles it;
// the GPU machine runs it through bench/inference/device.sh).
#include "kernels/decode_kernels.h"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "kernels/kernel_test_values.h"

namespace ringmaster::tk {
namespace {

// A device copy of host bfloat16 (or any trivially copyable) values.
template <typename T>
class DeviceCopy {
 public:
  explicit DeviceCopy(const std::vector<T>& host) : n_(host.size()) {
    if (cudaMalloc(reinterpret_cast<void**>(&p_),
                   std::max<size_t>(1, n_) * sizeof(T)) != cudaSuccess)
      p_ = nullptr;
    if (p_ != nullptr && n_ > 0)
      cudaMemcpy(p_, host.data(), n_ * sizeof(T), cudaMemcpyHostToDevice);
  }
  ~DeviceCopy() { cudaFree(p_); }
  DeviceCopy(const DeviceCopy&) = delete;
  DeviceCopy& operator=(const DeviceCopy&) = delete;
  T* get() const { return p_; }
  std::vector<T> Read() const {
    std::vector<T> host(n_);
    cudaMemcpy(host.data(), p_, n_ * sizeof(T), cudaMemcpyDeviceToHost);
    return host;
  }

 private:
  T* p_ = nullptr;
  size_t n_;
};

// A scratch of `floats` partial results and zeroed counters.
struct Scratch {
  explicit Scratch(int64_t floats)
      : partial(std::vector<float>(std::max<int64_t>(1, floats))),
        counters(std::vector<unsigned>(kDecodeCounters, 0)) {
    view.partial = partial.get();
    view.partial_floats = floats;
    view.counters = counters.get();
  }
  DeviceCopy<float> partial;
  DeviceCopy<unsigned> counters;
  DecodeScratch view;
};

struct GemvCase {
  DecodeInput input;
  int64_t rows, k, m;
  bool residual;
};

std::string Name(const GemvCase& c) {
  const char* in = c.input == DecodeInput::kPlain     ? "plain"
                   : c.input == DecodeInput::kRmsNorm ? "rmsnorm"
                                                      : "swiglu";
  return std::string(in) + "_r" + std::to_string(c.rows) + "_k" +
         std::to_string(c.k) + "_m" + std::to_string(c.m) +
         (c.residual ? "_residual" : "");
}
void PrintTo(const GemvCase& c, std::ostream* os) { *os << Name(c); }

class DecodeGemvTest : public testing::TestWithParam<GemvCase> {};

TEST_P(DecodeGemvTest, MatchesFloat64AndRepeatsExactly) {
  if (!HaveGpu()) GTEST_SKIP() << "no GPU";
  const GemvCase c = GetParam();
  const int64_t xw = c.input == DecodeInput::kSwiglu ? 2 * c.k : c.k;
  const std::vector<uint16_t> x = Bf16Values(c.rows * xw, 1, 2.0f),
                              g = Bf16Values(c.k, 1 << 20, 1.0f),
                              w = Bf16Values(c.k * c.m, 1 << 24, 0.5f),
                              res = Bf16Values(c.rows * c.m, 1 << 28, 1.0f);
  std::vector<double> want(c.rows * c.m, 0);
  for (int64_t b = 0; b < c.rows; ++b) {
    double ss = 0;
    for (int64_t j = 0; j < c.k; ++j)
      ss += FromBf16(x[b * xw + j]) * FromBf16(x[b * xw + j]);
    const double rinv = 1.0 / std::sqrt(ss / static_cast<double>(c.k) + 1e-5);
    for (int64_t j = 0; j < c.k; ++j) {
      double in = FromBf16(x[b * xw + j]);
      if (c.input == DecodeInput::kRmsNorm) in *= rinv * FromBf16(g[j]);
      if (c.input == DecodeInput::kSwiglu)
        in = in / (1.0 + std::exp(-in)) * FromBf16(x[b * xw + c.k + j]);
      for (int64_t i = 0; i < c.m; ++i)
        want[b * c.m + i] += in * FromBf16(w[j * c.m + i]);
    }
    if (c.residual)
      for (int64_t i = 0; i < c.m; ++i)
        want[b * c.m + i] += FromBf16(res[b * c.m + i]);
  }
  DeviceCopy<uint16_t> dx(x), dg(g), dw(w), dres(res),
      dy(std::vector<uint16_t>(c.rows * c.m, 0));
  Scratch scratch(DecodeGemvScratch(c.rows, c.k, c.m));
  std::vector<uint16_t> first;
  for (int launch = 0; launch < 2; ++launch) {
    ASSERT_EQ(DecodeGemv(c.input, dx.get(), dg.get(), 1e-5f, dw.get(),
                         c.residual ? dres.get() : nullptr, dy.get(), c.rows,
                         c.k, c.m, scratch.view, /*pdl=*/true, nullptr),
              cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const std::vector<uint16_t> got = dy.Read();
    // fp32 sums of bfloat16 operands, the result rounded once.
    EXPECT_LT(Error(got, c.m, 0, want, c.rows, c.m), 8e-3)
        << "launch " << launch;
    if (launch == 0) {
      first = got;
    } else {
      EXPECT_EQ(got, first) << "not deterministic";
    }
  }
  EXPECT_EQ(scratch.counters.Read(), std::vector<unsigned>(kDecodeCounters, 0));
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, DecodeGemvTest,
    testing::Values(GemvCase{DecodeInput::kRmsNorm, 1, 4096, 6144, false},
                    GemvCase{DecodeInput::kPlain, 3, 1000, 520, true},
                    GemvCase{DecodeInput::kSwiglu, 8, 1536, 256, true},
                    GemvCase{DecodeInput::kPlain, 2, 32, 64, false},
                    GemvCase{DecodeInput::kRmsNorm, 5, 256, 4104, true}),
    [](const testing::TestParamInfo<GemvCase>& info) {
      return Name(info.param);
    });

TEST(DecodeGemvTest, RefusesMoreRowsThanItTakes) {
  if (!HaveGpu()) GTEST_SKIP() << "no GPU";
  Scratch scratch(1 << 20);
  EXPECT_EQ(DecodeGemv(DecodeInput::kPlain, nullptr, nullptr, 0, nullptr,
                       nullptr, nullptr, kDecodeGemvMaxRows + 1, 64, 64,
                       scratch.view, false, nullptr),
            cudaErrorInvalidValue);
}

struct AttnCase {
  int64_t batch, heads, kv_heads, hd, capacity, pos;
};

std::string Name(const AttnCase& c) {
  return "b" + std::to_string(c.batch) + "_h" + std::to_string(c.heads) +
         "_kv" + std::to_string(c.kv_heads) + "_hd" + std::to_string(c.hd) +
         "_cap" + std::to_string(c.capacity) + "_pos" + std::to_string(c.pos);
}
void PrintTo(const AttnCase& c, std::ostream* os) { *os << Name(c); }

class DecodeAttentionTest : public testing::TestWithParam<AttnCase> {};

TEST_P(DecodeAttentionTest, MatchesFloat64AndAppendsTheKey) {
  if (!HaveGpu()) GTEST_SKIP() << "no GPU";
  const AttnCase c = GetParam();
  const int64_t qw = c.heads * c.hd, kw = c.kv_heads * c.hd, w3 = qw + 2 * kw,
                half = c.hd / 2, group = c.heads / c.kv_heads;
  const std::vector<uint16_t> qkv = Bf16Values(c.batch * w3, 3, 2.0f);
  std::vector<uint16_t> kc = Bf16Values(c.batch * c.capacity * kw, 1 << 22, 1),
                        vc = Bf16Values(c.batch * c.capacity * kw, 1 << 26, 1);
  std::vector<float> cosines(c.capacity * half), sines(c.capacity * half);
  for (int64_t i = 0; i < c.capacity * half; ++i) {
    const double angle = 3.0 * Value((1ull << 30) + i);
    cosines[i] = static_cast<float>(std::cos(angle));
    sines[i] = static_cast<float>(std::sin(angle));
  }
  auto rotated = [&](const uint16_t* v, int64_t d) {
    const int64_t p = d % half, at = c.pos * half + p;
    const double a = FromBf16(v[p]), e = FromBf16(v[p + half]);
    return d < half ? a * cosines[at] - e * sines[at]
                    : a * sines[at] + e * cosines[at];
  };
  std::vector<double> want(c.batch * qw, 0), knew(c.batch * kw);
  for (int64_t b = 0; b < c.batch; ++b) {
    for (int64_t d = 0; d < kw; ++d)
      knew[b * kw + d] = rotated(&qkv[b * w3 + qw + d / c.hd * c.hd], d % c.hd);
    for (int64_t h = 0; h < c.heads; ++h) {
      const int64_t j = h / group;
      auto key = [&](int64_t t, int64_t d) {
        return t == c.pos
                   ? knew[b * kw + j * c.hd + d]
                   : FromBf16(kc[(b * c.capacity + t) * kw + j * c.hd + d]);
      };
      auto value = [&](int64_t t, int64_t d) {
        return FromBf16(t == c.pos
                            ? qkv[b * w3 + qw + kw + j * c.hd + d]
                            : vc[(b * c.capacity + t) * kw + j * c.hd + d]);
      };
      std::vector<double> p(c.pos + 1);
      double mx = -INFINITY, sum = 0;
      for (int64_t t = 0; t <= c.pos; ++t) {
        double s = 0;
        for (int64_t d = 0; d < c.hd; ++d)
          s += rotated(&qkv[b * w3 + h * c.hd], d) * key(t, d);
        p[t] = s / std::sqrt(static_cast<double>(c.hd));
        mx = std::max(mx, p[t]);
      }
      for (double& x : p) sum += (x = std::exp(x - mx));
      for (int64_t t = 0; t <= c.pos; ++t)
        for (int64_t d = 0; d < c.hd; ++d)
          want[b * qw + h * c.hd + d] += p[t] / sum * value(t, d);
    }
  }
  DeviceCopy<uint16_t> dqkv(qkv), dk(kc), dv(vc),
      dout(std::vector<uint16_t>(c.batch * qw, 0));
  DeviceCopy<float> dcos(cosines), dsin(sines);
  DeviceCopy<int> dpos(std::vector<int>{static_cast<int>(c.pos)});
  Scratch scratch(DecodeAttentionScratch(c.batch, c.heads, c.hd, c.capacity));
  ASSERT_EQ(DecodeAttention(dqkv.get(), w3, dk.get(), dv.get(), dout.get(), qw,
                            c.batch, c.heads, c.kv_heads, c.hd, c.capacity,
                            dcos.get(), dsin.get(), dpos.get(),
                            static_cast<float>(1.0 / std::sqrt(double(c.hd))),
                            scratch.view, /*pdl=*/true, nullptr),
            cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_LT(Error(dout.Read(), qw, 0, want, c.batch, qw), 1e-2);
  const std::vector<uint16_t> kgot = dk.Read(), vgot = dv.Read();
  std::vector<uint16_t> kat(c.batch * kw), vat(c.batch * kw);
  for (int64_t b = 0; b < c.batch; ++b)
    for (int64_t d = 0; d < kw; ++d) {
      kat[b * kw + d] = kgot[(b * c.capacity + c.pos) * kw + d];
      vat[b * kw + d] = vgot[(b * c.capacity + c.pos) * kw + d];
      EXPECT_EQ(vat[b * kw + d], qkv[b * w3 + qw + kw + d]) << b << " " << d;
    }
  EXPECT_LT(Error(kat, kw, 0, knew, c.batch, kw), 8e-3);
  // Only position pos changed.
  for (int64_t i = 0; i < c.batch * c.capacity * kw; ++i) {
    if ((i / kw) % c.capacity == c.pos) continue;
    ASSERT_EQ(kgot[i], kc[i]) << i;
  }
  EXPECT_EQ(scratch.counters.Read(), std::vector<unsigned>(kDecodeCounters, 0));
}

INSTANTIATE_TEST_SUITE_P(Shapes, DecodeAttentionTest,
                         testing::Values(AttnCase{2, 8, 2, 128, 200, 150},
                                         AttnCase{1, 4, 4, 64, 64, 0},
                                         AttnCase{3, 4, 4, 64, 64, 63},
                                         AttnCase{1, 32, 4, 128, 1280, 1279},
                                         AttnCase{2, 16, 2, 64, 300, 64}),
                         [](const testing::TestParamInfo<AttnCase>& info) {
                           return Name(info.param);
                         });

}  // namespace
}  // namespace ringmaster::tk
