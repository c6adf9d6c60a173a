// The fused decode step against a float64 decode step computed here from
// the same bfloat16 weights, cache and input: two steps in a row on the
// same state (the accumulators and counters must be left as the next step
// needs them; the second makes its input itself), the new key and value
// appended to every layer's cache, a small shape (blocks with a handful of
// rows, several tiles) and a 4-layer slice of the Llama 3 8B shape, whose phase
// timeline it prints. Skips without a GPU (CI compiles it; the GPU machine runs
// it through bench/inference/device.sh).
#include "kernels/decode_step.h"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "kernels/decode_kernels.h"
#include "kernels/kernel_test_values.h"

namespace ringmaster::tk {
namespace {

template <typename T>
T* Upload(const std::vector<T>& host, std::vector<void*>* owned) {
  void* p = nullptr;
  if (cudaMalloc(&p, std::max<size_t>(1, host.size()) * sizeof(T)) !=
      cudaSuccess) {
    return nullptr;
  }
  owned->push_back(p);
  if (!host.empty())
    cudaMemcpy(p, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice);
  return static_cast<T*>(p);
}
template <typename T>
std::vector<T> Download(const T* p, size_t n) {
  std::vector<T> host(n);
  cudaMemcpy(host.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost);
  return host;
}

struct Shape {
  const char* name;
  int layers;
  int64_t hidden, heads, kv_heads, head_dim, ffn, capacity;
  int pos;  // the first step's position
};
void PrintTo(const Shape& s, std::ostream* os) { *os << s.name; }

// Offsets of one layer's tensors, as transformer_weights.h lays them out.
struct Layout {
  int64_t g1, wqkv, wo, g2, wgu, wd, size;
};
Layout LayoutOf(const Shape& s) {
  const int64_t qw = s.heads * s.head_dim, kw = s.kv_heads * s.head_dim;
  Layout o{};
  o.g1 = 0;
  o.wqkv = o.g1 + s.hidden;
  o.wo = o.wqkv + s.hidden * (qw + 2 * kw);
  o.g2 = o.wo + qw * s.hidden;
  o.wgu = o.g2 + s.hidden;
  o.wd = o.wgu + s.hidden * 2 * s.ffn;
  o.size = o.wd + s.ffn * s.hidden;
  return o;
}

// The float64 step: y = final norm of the stack at position pos, the new
// keys and values (as bfloat16) appended to the host caches.
std::vector<double> ReferenceStep(const Shape& s, const Layout& o,
                                  const std::vector<uint16_t>& w,
                                  std::vector<std::vector<uint16_t>>* kc,
                                  std::vector<std::vector<uint16_t>>* vc,
                                  const std::vector<float>& cs,
                                  const std::vector<float>& sn,
                                  const std::vector<uint16_t>& x, int pos) {
  const int64_t h = s.hidden, hd = s.head_dim, half = hd / 2, qw = s.heads * hd,
                kw = s.kv_heads * hd, w3 = qw + 2 * kw,
                g = s.heads / s.kv_heads;
  auto W = [&](int64_t i) { return FromBf16(w[i]); };
  auto norm = [&](const std::vector<double>& v, int64_t gain) {
    double ss = 0;
    for (double e : v) ss += e * e;
    const double r = 1.0 / std::sqrt(ss / static_cast<double>(h) + 1e-5);
    std::vector<double> out(h);
    for (int64_t j = 0; j < h; ++j) out[j] = v[j] * r * W(gain + j);
    return out;
  };
  auto matmul = [&](const std::vector<double>& in, int64_t at, int64_t k,
                    int64_t m) {
    std::vector<double> out(m, 0.0);
    for (int64_t r = 0; r < k; ++r) {
      const double a = in[r];
      const uint16_t* row = &w[at + r * m];
      for (int64_t c = 0; c < m; ++c) out[c] += a * FromBf16(row[c]);
    }
    return out;
  };
  std::vector<double> res(h);
  for (int64_t j = 0; j < h; ++j) res[j] = FromBf16(x[j]);
  const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
  for (int l = 0; l < s.layers; ++l) {
    const int64_t base = l * o.size;
    std::vector<double> qkv =
        matmul(norm(res, base + o.g1), base + o.wqkv, h, w3);
    auto rotate = [&](double* v) {
      for (int64_t d = 0; d < half; ++d) {
        const double a = v[d], e = v[d + half];
        const double c = cs[pos * half + d], sgn = sn[pos * half + d];
        v[d] = a * c - e * sgn;
        v[d + half] = a * sgn + e * c;
      }
    };
    for (int64_t hh = 0; hh < s.heads; ++hh) rotate(&qkv[hh * hd]);
    for (int64_t kh = 0; kh < s.kv_heads; ++kh) {
      rotate(&qkv[qw + kh * hd]);
      for (int64_t d = 0; d < hd; ++d) {
        (*kc)[l][pos * kw + kh * hd + d] =
            ToBf16(static_cast<float>(qkv[qw + kh * hd + d]));
        (*vc)[l][pos * kw + kh * hd + d] =
            ToBf16(static_cast<float>(qkv[qw + kw + kh * hd + d]));
      }
    }
    std::vector<double> attn(qw, 0.0);
    for (int64_t hh = 0; hh < s.heads; ++hh) {
      const int64_t kh = hh / g;
      std::vector<double> sc(pos + 1);
      double mx = -1e300;
      for (int j = 0; j <= pos; ++j) {
        double dot = 0;
        for (int64_t d = 0; d < hd; ++d)
          dot += qkv[hh * hd + d] * FromBf16((*kc)[l][j * kw + kh * hd + d]);
        sc[j] = dot * scale;
        mx = std::max(mx, sc[j]);
      }
      double sum = 0;
      for (double& e : sc) sum += (e = std::exp(e - mx));
      for (int j = 0; j <= pos; ++j)
        for (int64_t d = 0; d < hd; ++d)
          attn[hh * hd + d] +=
              sc[j] / sum * FromBf16((*vc)[l][j * kw + kh * hd + d]);
    }
    const std::vector<double> o1 = matmul(attn, base + o.wo, qw, h);
    for (int64_t j = 0; j < h; ++j) res[j] += o1[j];
    const std::vector<double> gu =
        matmul(norm(res, base + o.g2), base + o.wgu, h, 2 * s.ffn);
    std::vector<double> act(s.ffn);
    for (int64_t j = 0; j < s.ffn; ++j)
      act[j] = gu[j] / (1.0 + std::exp(-gu[j])) * gu[s.ffn + j];
    const std::vector<double> o2 = matmul(act, base + o.wd, s.ffn, h);
    for (int64_t j = 0; j < h; ++j) res[j] += o2[j];
  }
  return norm(res, s.layers * o.size);
}

class DecodeStepTest : public testing::TestWithParam<Shape> {};

TEST_P(DecodeStepTest, MatchesFloat64TwoStepsInARow) {
  if (!HaveGpu()) GTEST_SKIP() << "no GPU";
  const Shape s = GetParam();
  const Layout o = LayoutOf(s);
  const int64_t hd = s.head_dim, half = hd / 2, kw = s.kv_heads * hd;
  DecodeStepModel m;
  m.layers = s.layers;
  m.hidden = s.hidden;
  m.heads = s.heads;
  m.kv_heads = s.kv_heads;
  m.head_dim = hd;
  m.ffn = s.ffn;
  m.capacity = s.capacity;
  m.layer_elems = o.size;
  m.off_g1 = o.g1;
  m.off_wqkv = o.wqkv;
  m.off_wo = o.wo;
  m.off_g2 = o.g2;
  m.off_wgu = o.wgu;
  m.off_wd = o.wd;
  m.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd)));
  ASSERT_TRUE(DecodeStepSupports(m));

  // Weights ~ U(-1, 1) / sqrt(fan-in), gains near 1; earlier keys and
  // values ~ U(-1, 1).
  std::vector<uint16_t> w(o.size * s.layers + s.hidden);
  for (int l = 0; l <= s.layers; ++l) {
    const int64_t base = l * o.size;
    auto fill = [&](int64_t at, int64_t n, double sc, double off,
                    uint64_t seed) {
      for (int64_t i = 0; i < n; ++i)
        w[at + i] =
            ToBf16(static_cast<float>(off + sc * Value(seed * 1000003 + i)));
    };
    fill(base + o.g1, s.hidden, 0.2, 1.0, 10 * l + 1);
    if (l == s.layers) break;
    fill(base + o.wqkv, o.wo - o.wqkv, 1.0 / std::sqrt(s.hidden), 0,
         10 * l + 2);
    fill(base + o.wo, o.g2 - o.wo, 1.0 / std::sqrt(s.heads * hd), 0,
         10 * l + 3);
    fill(base + o.g2, s.hidden, 0.2, 1.0, 10 * l + 4);
    fill(base + o.wgu, o.wd - o.wgu, 1.0 / std::sqrt(s.hidden), 0, 10 * l + 5);
    fill(base + o.wd, o.size - o.wd, 1.0 / std::sqrt(s.ffn), 0, 10 * l + 6);
  }
  std::vector<float> cs(s.capacity * half), sn(s.capacity * half);
  for (int64_t p = 0; p < s.capacity; ++p)
    for (int64_t d = 0; d < half; ++d) {
      const double a = p * std::pow(10000.0, -2.0 * d / hd);
      cs[p * half + d] = static_cast<float>(std::cos(a));
      sn[p * half + d] = static_cast<float>(std::sin(a));
    }
  std::vector<std::vector<uint16_t>> kc(s.layers), vc(s.layers);
  for (int l = 0; l < s.layers; ++l) {
    kc[l] = Bf16Values(s.capacity * kw, 5000000 + 2 * l, 1.0f);
    vc[l] = Bf16Values(s.capacity * kw, 7000000 + 2 * l, 1.0f);
  }

  std::vector<void*> owned;
  m.weights = Upload(w, &owned);
  m.final_gain = static_cast<const uint16_t*>(m.weights) + s.layers * o.size;
  std::vector<void*> caches;
  for (int l = 0; l < s.layers; ++l) caches.push_back(Upload(kc[l], &owned));
  for (int l = 0; l < s.layers; ++l) caches.push_back(Upload(vc[l], &owned));
  void** dev_caches = Upload(caches, &owned);
  m.kcache = dev_caches;
  m.vcache = dev_caches + s.layers;
  m.cos_table = Upload(cs, &owned);
  m.sin_table = Upload(sn, &owned);
  DecodeStepState st;
  st.floats = Upload(std::vector<float>(DecodeStepFloats(m), 0.0f), &owned);
  st.words = Upload(std::vector<unsigned>(DecodeStepWords(m), 0u), &owned);
  const int64_t stamps = DecodeStepTraceValues(m);
  st.trace = Upload(std::vector<int64_t>(stamps, 0), &owned);
  uint16_t* y = Upload(std::vector<uint16_t>(s.hidden, 0), &owned);
  int* pos = Upload(std::vector<int>{s.pos}, &owned);
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);

  // Each step advances the position it finds in device memory. The second
  // makes its input itself: SequenceInputs' for one sequence there.
  for (int step = 0; step < 2; ++step) {
    const int at = s.pos + step;
    std::vector<uint16_t> x = Bf16Values(s.hidden, 900000 + 7 * step, 1.0f);
    uint16_t* xd = Upload(x, &owned);
    if (step == 0) {
      ASSERT_EQ(DecodeStep(m, st, xd, y, pos, true, stream), cudaSuccess);
    } else {
      ASSERT_EQ(SequenceInputs(xd, 1, 1, s.hidden, s.capacity, 0, pos, stream),
                cudaSuccess);
      x = Download(xd, s.hidden);
      ASSERT_EQ(DecodeStep(m, st, nullptr, y, pos, true, stream), cudaSuccess);
    }
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    const std::vector<double> want =
        ReferenceStep(s, o, w, &kc, &vc, cs, sn, x, at);
    const std::vector<uint16_t> got = Download(y, s.hidden);
    const double err = Error(got, s.hidden, 0, want, 1, s.hidden);
    EXPECT_LE(err, 1e-2) << "step " << step << " at position " << at;
    // The appended keys and values: within one bfloat16 step of float64's.
    for (int l = 0; l < s.layers; ++l) {
      const std::vector<uint16_t> k =
          Download(static_cast<const uint16_t*>(caches[l]), s.capacity * kw);
      const std::vector<uint16_t> v = Download(
          static_cast<const uint16_t*>(caches[s.layers + l]), s.capacity * kw);
      double worst = 0;
      for (int64_t i = at * kw; i < (at + 1) * kw; ++i) {
        for (auto [a, b] :
             {std::pair{k[i], kc[l][i]}, std::pair{v[i], vc[l][i]}}) {
          const double d = std::abs(FromBf16(a) - FromBf16(b));
          worst = std::max(worst, d / std::max(1e-3, std::abs(FromBf16(b))));
        }
      }
      EXPECT_LE(worst, 1.6e-2) << "layer " << l << " cache at " << at;
    }
    std::printf("%s step %d: rel error %.2e\n", s.name, step, err);
  }
  EXPECT_EQ(Download(pos, 1)[0], s.pos + 2);
  // Block 0's timeline, per phase averaged over the layers: inputs staged
  // (from the barrier before), work done, the barrier after it passed; the
  // median of 5 steps at the last position, with that step's kernel entry
  // to the timeline's start, the timeline's end to block 0's end, and its
  // launch timed by events (not checked: the figures are printed for
  // bench/).
  const char* names[] = {"QKV", "attn", "O", "gate|up", "down"};
  const int64_t last = stamps - 3;  // the last barrier passed
  cudaEvent_t ev[2];
  for (cudaEvent_t& e : ev) ASSERT_EQ(cudaEventCreate(&e), cudaSuccess);
  std::vector<std::pair<std::vector<int64_t>, float>> runs;
  for (int r = 0; r < 5; ++r) {
    ASSERT_EQ(cudaEventRecord(ev[0], stream), cudaSuccess);
    ASSERT_EQ(DecodeStep(m, st, nullptr, y, pos, false, stream), cudaSuccess);
    ASSERT_EQ(cudaEventRecord(ev[1], stream), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    float ms = 0;
    ASSERT_EQ(cudaEventElapsedTime(&ms, ev[0], ev[1]), cudaSuccess);
    runs.emplace_back(Download(st.trace, stamps), ms);
  }
  for (cudaEvent_t e : ev) cudaEventDestroy(e);
  std::sort(runs.begin(), runs.end(), [&](const auto& a, const auto& b) {
    return a.first[last] - a.first[0] < b.first[last] - b.first[0];
  });
  const std::vector<int64_t>& t = runs[runs.size() / 2].first;
  std::printf("%s timeline: total %.1f us | stage work wait:", s.name,
              static_cast<double>(t[last] - t[0]) / 1e3);
  const int64_t per_layer = (stamps - 3) / s.layers;
  for (int ph = 0; ph < 5; ++ph) {
    double part[3] = {0, 0, 0};
    for (int l = 0; l < s.layers; ++l) {
      const int64_t* at = &t[1 + per_layer * l + 3 * ph];
      const int64_t before = at[-1];
      part[0] += static_cast<double>(at[0] - before);
      part[1] += static_cast<double>(at[1] - at[0]);
      part[2] += static_cast<double>(at[2] - at[1]);
    }
    std::printf(" | %s %.1f %.1f %.1f", names[ph], part[0] / s.layers / 1e3,
                part[1] / s.layers / 1e3, part[2] / s.layers / 1e3);
  }
  std::printf(" | entry %.1f end %.1f | events %.1f us",
              static_cast<double>(t[0] - t[last + 1]) / 1e3,
              static_cast<double>(t[last + 2] - t[last]) / 1e3,
              runs[runs.size() / 2].second * 1e3);
  std::printf("\n");
  cudaStreamDestroy(stream);
  for (void* p : owned) cudaFree(p);
}

INSTANTIATE_TEST_SUITE_P(Shapes, DecodeStepTest,
                         testing::Values(Shape{"small", 2, 256, 4, 2, 64, 512,
                                               80, 70},
                                         Shape{"llama3_8b_l4", 4, 4096, 32, 8,
                                               128, 14336, 1280, 1100}),
                         [](const testing::TestParamInfo<Shape>& i) {
                           return std::string(i.param.name);
                         });

}  // namespace
}  // namespace ringmaster::tk
