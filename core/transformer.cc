#include "core/transformer.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/transformer_ops.h"

namespace ringmaster {
namespace {

using transformer_ops::AddMatMulAT;
using transformer_ops::AddMatMulBT;
using transformer_ops::Attention;
using transformer_ops::AttentionBackward;
using transformer_ops::MatMul;
using transformer_ops::RmsNorm;
using transformer_ops::RmsNormBackward;
using transformer_ops::Rope;
using transformer_ops::Sigmoid;

TransformerShape Llama3_8B() {
  TransformerShape s;
  s.name = "llama3-8b";
  s.source =
      "Meta Llama 3 8B: config.json of meta-llama/Meta-Llama-3-8B (32 "
      "layers, hidden 4096, 32 heads, 8 KV heads, FFN 14336, vocab 128256, "
      "rope_theta 500000, rms_norm_eps 1e-5)";
  s.layers = 32;
  s.hidden = 4096;
  s.heads = 32;
  s.kv_heads = 8;
  s.head_dim = 128;
  s.ffn_hidden = 14336;
  s.vocab = 128256;
  s.rope_theta = 500000;
  s.norm_eps = 1e-5;
  return s;
}

TransformerShape Llama3_70B() {
  TransformerShape s;
  s.name = "llama3-70b";
  s.source =
      "Meta Llama 3 70B: config.json of meta-llama/Meta-Llama-3-70B (80 "
      "layers, hidden 8192, 64 heads, 8 KV heads, FFN 28672, vocab 128256, "
      "rope_theta 500000, rms_norm_eps 1e-5)";
  s.layers = 80;
  s.hidden = 8192;
  s.heads = 64;
  s.kv_heads = 8;
  s.head_dim = 128;
  s.ffn_hidden = 28672;
  s.vocab = 128256;
  s.rope_theta = 500000;
  s.norm_eps = 1e-5;
  return s;
}

TransformerShape Gpt3_175B() {
  TransformerShape s;
  s.name = "gpt3-175b";
  s.source =
      "GPT-3 175B: Brown et al. 2020, \"Language Models are Few-Shot "
      "Learners\", Table 2.1 (96 layers, d_model 12288, 96 heads of 128, "
      "d_ff = 4 d_model) and its 50257-token vocabulary; here with this "
      "block's SwiGLU and RMSNorm";
  s.layers = 96;
  s.hidden = 12288;
  s.heads = 96;
  s.kv_heads = 96;
  s.head_dim = 128;
  s.ffn_hidden = 4 * 12288;
  s.vocab = 50257;
  s.rope_theta = 10000;
  s.norm_eps = 1e-5;
  return s;
}

}  // namespace

double TransformerUniform(uint64_t key, uint64_t index) {
  uint64_t z = key * 0x9E3779B97F4A7C15ull + index + 0x632BE59BD9B4E019ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) * 0x1.0p-52 - 1.0;
}

double TransformerWeight(const TransformerShape& s, int layer,
                         TransformerMatrix m, int64_t index) {
  const int64_t q = s.heads * s.head_dim;
  int64_t fan_in = s.hidden;
  if (m == TransformerMatrix::kO) fan_in = q;
  if (m == TransformerMatrix::kDown) fan_in = s.ffn_hidden;
  const uint64_t key =
      16 * static_cast<uint64_t>(layer + 1) + static_cast<uint64_t>(m);
  return TransformerUniform(key, static_cast<uint64_t>(index)) /
         std::sqrt(static_cast<double>(fan_in));
}

double TransformerInput(int64_t index) {
  return TransformerUniform(1, static_cast<uint64_t>(index));
}

double TransformerTarget(int64_t index) {
  return 0.5 * TransformerUniform(2, static_cast<uint64_t>(index));
}

std::string ParallelName(const TransformerParallel& p) {
  std::vector<std::string> parts;
  if (p.dp > 1 || p.tp == 1) parts.push_back(absl::StrFormat("dp%d", p.dp));
  if (p.tp > 1)
    parts.push_back(absl::StrFormat("tp%d%s", p.tp, p.sp ? "+sp" : ""));
  if (p.zero > 0) parts.push_back(absl::StrFormat("zero%d", p.zero));
  return absl::StrJoin(parts, " ");
}

absl::Status ValidateParallel(const TransformerShape& s,
                              const TransformerParallel& p, int64_t micro_batch,
                              int64_t seq) {
  auto bad = [](const std::string& field, const std::string& why) {
    return absl::InvalidArgumentError(field + ": " + why);
  };
  if (p.dp < 1) return bad("dp", "expected at least 1");
  if (p.tp < 1) return bad("tp", "expected at least 1");
  if (s.heads % p.tp != 0 || s.kv_heads % p.tp != 0 ||
      s.ffn_hidden % p.tp != 0) {
    return bad("tp", absl::StrFormat(
                         "%d does not divide heads (%d), kv_heads (%d) and "
                         "ffn_hidden (%d)",
                         p.tp, s.heads, s.kv_heads, s.ffn_hidden));
  }
  if (p.sp && p.tp < 2)
    return bad("sp", "sequence parallelism needs tp of 2 or more");
  if (p.sp && (micro_batch * seq) % p.tp != 0) {
    return bad("sp", absl::StrFormat("micro_batch x seq = %d tokens do not "
                                     "split over tp = %d ranks",
                                     micro_batch * seq, p.tp));
  }
  if (p.zero != 0 && p.zero != 1 && p.zero != 3)
    return bad("zero", "expected 0, 1 or 3");
  if (p.zero != 0 && p.dp < 2)
    return bad("zero",
               "shards over data-parallel ranks: needs dp of 2 or more");
  return absl::OkStatus();
}

TransformerShape ShapeOf(const v1::TransformerSpec& t) {
  TransformerShape s;
  if (!t.preset().empty()) {
    if (auto preset = TransformerPreset(t.preset()); preset.ok()) s = *preset;
  } else {
    s.name = "custom";
  }
  s.layers = t.layers();
  s.hidden = t.hidden();
  s.heads = t.heads();
  s.kv_heads = t.kv_heads();
  s.head_dim = t.head_dim();
  s.ffn_hidden = t.ffn_hidden();
  if (t.rope_theta() > 0) s.rope_theta = t.rope_theta();
  return s;
}

TransformerParallel ParallelOf(const v1::ParallelLayout& p) {
  TransformerParallel out;
  out.dp = std::max(1, p.dp());
  out.tp = std::max(1, p.tp());
  out.sp = p.sp();
  out.zero = p.zero();
  return out;
}

std::string LayoutName(const v1::Case& c) {
  if (c.bench() == v1::BENCH_INFERENCE) {
    return absl::StrFormat("tp%d",
                           std::max(1, c.transformer().parallel().tp()));
  }
  return ParallelName(ParallelOf(c.transformer().parallel()));
}

int64_t TransformerStepBytes(const v1::TransformerSpec& t, int elem,
                             bool saves_scores) {
  const TransformerShape s = ShapeOf(t);
  const TransformerParallel p = ParallelOf(t.parallel());
  const double params =
      static_cast<double>(LayerParams(s)) / p.tp * t.layers() + s.hidden;
  const double shard = p.zero >= 1 ? params / p.dp : params;
  const double state =
      (t.optimizer() == "sgd" ? 0.0 : 8.0) + (elem < 4 ? 4.0 : 0.0);
  const double weights = (p.zero == 3 ? shard : params) * elem;
  const double grads = (p.zero == 3 ? shard : params) * elem;
  const double n = static_cast<double>(t.micro_batch()) * t.seq();
  const double rows = p.sp ? n / p.tp : n;
  const double q = static_cast<double>(s.heads) * s.head_dim / p.tp;
  const double kv = static_cast<double>(s.kv_heads) * s.head_dim / p.tp;
  const double f = static_cast<double>(s.ffn_hidden) / p.tp;
  // Per layer: residual in and mid, two norms' outputs (rows, and all n
  // tokens), q, k, v, attention output, gate and up.
  double act =
      rows * s.hidden * 4 + n * s.hidden * 2 + n * (2 * q + 2 * kv) + n * 2 * f;
  if (saves_scores)
    act += static_cast<double>(t.micro_batch()) * s.heads / p.tp * t.seq() *
           t.seq();
  const double total =
      weights + grads + shard * state + act * elem * t.layers();
  return static_cast<int64_t>(std::min(total, 9e18));
}

void RotaryTables(const TransformerShape& s, int64_t positions,
                  std::vector<float>* cos_table,
                  std::vector<float>* sin_table) {
  const int64_t half = s.head_dim / 2;
  cos_table->resize(positions * half);
  sin_table->resize(positions * half);
  for (int64_t p = 0; p < positions; ++p)
    for (int64_t i = 0; i < half; ++i) {
      const double angle =
          static_cast<double>(p) *
          std::pow(s.rope_theta, -2.0 * static_cast<double>(i) /
                                     static_cast<double>(s.head_dim));
      (*cos_table)[p * half + i] = static_cast<float>(std::cos(angle));
      (*sin_table)[p * half + i] = static_cast<float>(std::sin(angle));
    }
}

double ServeBytes(const v1::TransformerSpec& t, int64_t elem,
                  double cache_tokens) {
  const TransformerShape s = ShapeOf(t);
  const int64_t tp = std::max(1, t.parallel().tp());
  const int64_t weights = LayerParams(s) * s.layers / tp + s.hidden;
  const double cache = 2.0 * static_cast<double>(s.layers * t.micro_batch()) *
                       cache_tokens *
                       static_cast<double>(s.kv_heads / tp * s.head_dim);
  return (static_cast<double>(weights) + cache) * static_cast<double>(elem);
}

absl::StatusOr<TransformerShape> TransformerPreset(const std::string& name) {
  if (name == "llama3-8b") return Llama3_8B();
  if (name == "llama3-70b") return Llama3_70B();
  if (name == "gpt3-175b") return Gpt3_175B();
  return absl::NotFoundError(
      absl::StrFormat("no model preset \"%s\" (presets: %s)", name,
                      absl::StrJoin(TransformerPresetNames(), ", ")));
}

std::vector<std::string> TransformerPresetNames() {
  return {"llama3-8b", "llama3-70b", "gpt3-175b"};
}

absl::Status ValidateShape(const TransformerShape& s) {
  auto bad = [](const std::string& field, const std::string& why) {
    return absl::InvalidArgumentError(field + ": " + why);
  };
  if (s.layers < 1) return bad("layers", "expected at least 1");
  if (s.hidden < 1) return bad("hidden", "expected at least 1");
  if (s.heads < 1) return bad("heads", "expected at least 1");
  if (s.kv_heads < 1 || s.heads % s.kv_heads != 0)
    return bad("kv_heads", "expected a divisor of heads");
  if (s.head_dim < 2 || s.head_dim % 2 != 0)
    return bad("head_dim", "expected an even number (rotary pairs)");
  if (s.ffn_hidden < 1) return bad("ffn_hidden", "expected at least 1");
  if (!(s.rope_theta > 0)) return bad("rope_theta", "expected > 0");
  return absl::OkStatus();
}

int64_t LayerParams(const TransformerShape& s) {
  const int64_t q = s.heads * s.head_dim, kv = s.kv_heads * s.head_dim;
  return s.hidden * q + 2 * s.hidden * kv + q * s.hidden +
         3 * s.hidden * s.ffn_hidden + 2 * s.hidden;
}

int64_t ModelParams(const TransformerShape& s) {
  return s.layers * LayerParams(s) + s.hidden + 2 * s.vocab * s.hidden;
}

double TrainFlopsPerToken(const TransformerShape& s, int layers, int64_t seq) {
  const double matrices =
      static_cast<double>(LayerParams(s) - 2 * s.hidden);  // no gains
  // Scores (q . k) and values (p . v): 2 x 2 x heads x head_dim per pair
  // of tokens forward; a token attends to seq/2 positions on average.
  const double attention = 2.0 * 2.0 * static_cast<double>(s.heads) *
                           s.head_dim * (static_cast<double>(seq) / 2.0);
  return 3.0 * layers * (2.0 * matrices + attention);
}

double ForwardFlopsPerToken(const TransformerShape& s, int layers,
                            int64_t seq) {
  return TrainFlopsPerToken(s, layers, seq) / 3.0;
}

// ------------------------------------------------------------ reference

template <typename T>
ReferenceTransformer<T>::ReferenceTransformer(const TransformerShape& shape,
                                              int layers, int64_t batch,
                                              int64_t seq)
    : s_(shape), layers_(layers), batch_(batch), seq_(seq) {
  const int64_t h = s_.hidden, q = s_.heads * s_.head_dim,
                kv = s_.kv_heads * s_.head_dim, f = s_.ffn_hidden;
  int64_t offset = 0;
  auto take = [&](int64_t n) {
    const int64_t at = offset;
    offset += n;
    return at;
  };
  for (int l = 0; l < layers_; ++l) {
    Layer L;
    L.attn_norm = take(h);
    L.wq = take(h * q);
    L.wk = take(h * kv);
    L.wv = take(h * kv);
    L.wo = take(q * h);
    L.mlp_norm = take(h);
    L.wg = take(h * f);
    L.wu = take(h * f);
    L.wd = take(f * h);
    layer_.push_back(L);
  }
  final_norm_ = take(h);
  params_.assign(offset, T(0));
  decays_.assign(offset, true);
  // Gains 1 (not decayed); matrices uniform in +-1/sqrt(fan_in).
  auto fill = [&](int64_t at, int64_t n, int l, TransformerMatrix m) {
    for (int64_t i = 0; i < n; ++i)
      params_[at + i] = static_cast<T>(TransformerWeight(s_, l, m, i));
  };
  auto gain = [&](int64_t at) {
    for (int64_t i = 0; i < h; ++i) {
      params_[at + i] = T(1);
      decays_[at + i] = false;
    }
  };
  for (int l = 0; l < layers_; ++l) {
    const Layer& L = layer_[l];
    gain(L.attn_norm);
    fill(L.wq, h * q, l, TransformerMatrix::kQ);
    fill(L.wk, h * kv, l, TransformerMatrix::kK);
    fill(L.wv, h * kv, l, TransformerMatrix::kV);
    fill(L.wo, q * h, l, TransformerMatrix::kO);
    gain(L.mlp_norm);
    fill(L.wg, h * f, l, TransformerMatrix::kGate);
    fill(L.wu, h * f, l, TransformerMatrix::kUp);
    fill(L.wd, f * h, l, TransformerMatrix::kDown);
  }
  gain(final_norm_);
  grads_.assign(offset, T(0));
  const int64_t n = batch_ * seq_ * h;
  input_.resize(n);
  target_.resize(n);
  for (int64_t i = 0; i < n; ++i) {
    input_[i] = static_cast<T>(TransformerInput(i));
    target_[i] = static_cast<T>(TransformerTarget(i));
  }
  saved_.resize(layers_);
}

template <typename T>
T ReferenceTransformer<T>::Forward(bool keep) {
  const int64_t n = batch_ * seq_, h = s_.hidden, hd = s_.head_dim;
  const int64_t qw = s_.heads * hd, kw = s_.kv_heads * hd, f = s_.ffn_hidden;
  const T* w = params_.data();
  std::vector<T> x = input_, proj(n * h), hidden(n * f);
  Saved scratch;
  for (int l = 0; l < layers_; ++l) {
    const Layer& L = layer_[l];
    Saved& S = keep ? saved_[l] : scratch;
    S.x = x;
    S.n1.resize(n * h);
    S.r1.resize(n);
    RmsNorm(x.data(), w + L.attn_norm, S.n1.data(), S.r1.data(), n, h,
            s_.norm_eps);
    S.q.resize(n * qw);
    S.k.resize(n * kw);
    S.v.resize(n * kw);
    MatMul(S.n1.data(), w + L.wq, S.q.data(), n, h, qw);
    MatMul(S.n1.data(), w + L.wk, S.k.data(), n, h, kw);
    MatMul(S.n1.data(), w + L.wv, S.v.data(), n, h, kw);
    Rope(S.q.data(), n, seq_, s_.heads, hd, s_.rope_theta, 1);
    Rope(S.k.data(), n, seq_, s_.kv_heads, hd, s_.rope_theta, 1);
    S.p.resize(batch_ * s_.heads * seq_ * seq_);
    S.attn.resize(n * qw);
    Attention(S.q.data(), S.k.data(), S.v.data(), S.p.data(), S.attn.data(),
              batch_, seq_, s_.heads, s_.kv_heads, hd);
    MatMul(S.attn.data(), w + L.wo, proj.data(), n, qw, h);
    for (int64_t i = 0; i < n * h; ++i) x[i] += proj[i];
    S.x_mid = x;
    S.n2.resize(n * h);
    S.r2.resize(n);
    RmsNorm(x.data(), w + L.mlp_norm, S.n2.data(), S.r2.data(), n, h,
            s_.norm_eps);
    S.g.resize(n * f);
    S.u.resize(n * f);
    MatMul(S.n2.data(), w + L.wg, S.g.data(), n, h, f);
    MatMul(S.n2.data(), w + L.wu, S.u.data(), n, h, f);
    for (int64_t i = 0; i < n * f; ++i)
      hidden[i] = S.g[i] * Sigmoid(S.g[i]) * S.u[i];
    MatMul(hidden.data(), w + L.wd, proj.data(), n, f, h);
    for (int64_t i = 0; i < n * h; ++i) x[i] += proj[i];
  }
  out_x_ = x;
  out_y_.resize(n * h);
  out_r_.resize(n);
  RmsNorm(x.data(), w + final_norm_, out_y_.data(), out_r_.data(), n, h,
          s_.norm_eps);
  double loss = 0;
  for (int64_t i = 0; i < n * h; ++i) {
    const double d = static_cast<double>(out_y_[i]) - target_[i];
    loss += 0.5 * d * d;
  }
  return static_cast<T>(loss / static_cast<double>(n * h));
}

template <typename T>
void ReferenceTransformer<T>::Backward() {
  const int64_t n = batch_ * seq_, h = s_.hidden, hd = s_.head_dim;
  const int64_t qw = s_.heads * hd, kw = s_.kv_heads * hd, f = s_.ffn_hidden;
  const T* w = params_.data();
  T* g = grads_.data();
  std::fill(grads_.begin(), grads_.end(), T(0));
  std::vector<T> dy(n * h), dx(n * h, T(0));
  for (int64_t i = 0; i < n * h; ++i)
    dy[i] = (out_y_[i] - target_[i]) / static_cast<T>(n * h);
  RmsNormBackward(out_x_.data(), w + final_norm_, out_r_.data(), dy.data(),
                  dx.data(), g + final_norm_, n, h);
  std::vector<T> hidden(n * f), dh(n * f), da(n * f), du(n * f);
  for (int l = layers_ - 1; l >= 0; --l) {
    const Layer& L = layer_[l];
    const Saved& S = saved_[l];
    // MLP: x_out = x_mid + Wd (silu(g) * u).
    for (int64_t i = 0; i < n * f; ++i)
      hidden[i] = S.g[i] * Sigmoid(S.g[i]) * S.u[i];
    std::fill(dh.begin(), dh.end(), T(0));
    AddMatMulBT(dx.data(), w + L.wd, dh.data(), n, h, f);
    AddMatMulAT(hidden.data(), dx.data(), g + L.wd, n, f, h);
    for (int64_t i = 0; i < n * f; ++i) {
      const T sg = Sigmoid(S.g[i]);
      da[i] = dh[i] * S.u[i] * sg * (T(1) + S.g[i] * (T(1) - sg));
      du[i] = dh[i] * S.g[i] * sg;
    }
    AddMatMulAT(S.n2.data(), da.data(), g + L.wg, n, h, f);
    AddMatMulAT(S.n2.data(), du.data(), g + L.wu, n, h, f);
    std::vector<T> dn(n * h, T(0));
    AddMatMulBT(da.data(), w + L.wg, dn.data(), n, f, h);
    AddMatMulBT(du.data(), w + L.wu, dn.data(), n, f, h);
    std::vector<T> dmid = dx;
    RmsNormBackward(S.x_mid.data(), w + L.mlp_norm, S.r2.data(), dn.data(),
                    dmid.data(), g + L.mlp_norm, n, h);
    // Attention: x_mid = x + Wo attn.
    std::vector<T> dattn(n * qw, T(0)), dq(n * qw, T(0)), dk(n * kw, T(0)),
        dv(n * kw, T(0));
    AddMatMulBT(dmid.data(), w + L.wo, dattn.data(), n, h, qw);
    AddMatMulAT(S.attn.data(), dmid.data(), g + L.wo, n, qw, h);
    AttentionBackward(S.q.data(), S.k.data(), S.v.data(), S.p.data(),
                      dattn.data(), dq.data(), dk.data(), dv.data(), batch_,
                      seq_, s_.heads, s_.kv_heads, hd);
    Rope(dq.data(), n, seq_, s_.heads, hd, s_.rope_theta, -1);
    Rope(dk.data(), n, seq_, s_.kv_heads, hd, s_.rope_theta, -1);
    AddMatMulAT(S.n1.data(), dq.data(), g + L.wq, n, h, qw);
    AddMatMulAT(S.n1.data(), dk.data(), g + L.wk, n, h, kw);
    AddMatMulAT(S.n1.data(), dv.data(), g + L.wv, n, h, kw);
    std::fill(dn.begin(), dn.end(), T(0));
    AddMatMulBT(dq.data(), w + L.wq, dn.data(), n, qw, h);
    AddMatMulBT(dk.data(), w + L.wk, dn.data(), n, kw, h);
    AddMatMulBT(dv.data(), w + L.wv, dn.data(), n, kw, h);
    dx = dmid;
    RmsNormBackward(S.x.data(), w + L.attn_norm, S.r1.data(), dn.data(),
                    dx.data(), g + L.attn_norm, n, h);
  }
}

template <typename T>
T ReferenceTransformer<T>::Loss() {
  return Forward(/*keep=*/false);
}

template <typename T>
T ReferenceTransformer<T>::ForwardBackward() {
  const T loss = Forward(/*keep=*/true);
  Backward();
  return loss;
}

template <typename T>
std::vector<T*> ReferenceTransformer<T>::Parameters() {
  std::vector<T*> out;
  for (T& p : params_) out.push_back(&p);
  return out;
}

template <typename T>
std::vector<T*> ReferenceTransformer<T>::Gradients() {
  std::vector<T*> out;
  for (T& g : grads_) out.push_back(&g);
  return out;
}

template <typename T>
void ReferenceTransformer<T>::Update(const std::string& optimizer, double lr,
                                     double weight_decay) {
  ++step_;
  if (optimizer == "adamw") {
    constexpr double kB1 = 0.9, kB2 = 0.95, kEps = 1e-8;
    adam_m_.resize(params_.size(), T(0));
    adam_v_.resize(params_.size(), T(0));
    const double c1 = 1 - std::pow(kB1, static_cast<double>(step_));
    const double c2 = 1 - std::pow(kB2, static_cast<double>(step_));
    for (size_t i = 0; i < params_.size(); ++i) {
      const double g = grads_[i];
      adam_m_[i] = static_cast<T>(kB1 * adam_m_[i] + (1 - kB1) * g);
      adam_v_[i] = static_cast<T>(kB2 * adam_v_[i] + (1 - kB2) * g * g);
      const double mhat = adam_m_[i] / c1, vhat = adam_v_[i] / c2;
      double p = params_[i];
      if (decays_[i]) p -= lr * weight_decay * p;
      p -= lr * mhat / (std::sqrt(vhat) + kEps);
      params_[i] = static_cast<T>(p);
    }
    return;
  }
  for (size_t i = 0; i < params_.size(); ++i)
    params_[i] = static_cast<T>(params_[i] - lr * grads_[i]);
}

template class ReferenceTransformer<float>;
template class ReferenceTransformer<double>;

}  // namespace ringmaster
