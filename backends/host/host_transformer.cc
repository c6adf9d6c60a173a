#include "backends/host/host_transformer.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "backends/host/blas.h"
#include "backends/host/group_comm.h"
#include "backends/host/tp_layer.h"
#include "backends/trainer.h"
#include "core/names.h"
#include "core/transformer.h"
#include "core/transformer_ops.h"

namespace ringmaster {
namespace {

namespace ops = transformer_ops;

// dw[k x m] += x[n x k]^T dy[n x m].
void GemmAddAT(const float* x, const float* dy, float* dw, int64_t n, int64_t k,
               int64_t m) {
  LoadBlas()->sgemm(kCblasRowMajor, kCblasTrans, kCblasNoTrans,
                    static_cast<int>(k), static_cast<int>(m),
                    static_cast<int>(n), 1.0f, x, static_cast<int>(k), dy,
                    static_cast<int>(m), 1.0f, dw, static_cast<int>(m));
}

// dx[n x k] = beta dx + dy[n x m] w[k x m]^T.
void GemmBT(const float* dy, const float* w, float* dx, int64_t n, int64_t m,
            int64_t k, float beta) {
  LoadBlas()->sgemm(kCblasRowMajor, kCblasNoTrans, kCblasTrans,
                    static_cast<int>(n), static_cast<int>(k),
                    static_cast<int>(m), 1.0f, dy, static_cast<int>(m), w,
                    static_cast<int>(m), beta, dx, static_cast<int>(k));
}

// One layer's (or the final norm's) parameters on this rank.
struct Unit {
  int64_t size = 0;            // tp-local elements
  int64_t padded = 0;          // size rounded up to a multiple of dp
  std::vector<float> w;        // tp-local weights (zero 3: while gathered)
  std::vector<float> grad;     // padded
  std::vector<float> shard;    // zero 1, 3: this dp rank's share of w
  std::vector<float> m, v;     // AdamW state: of w (zero 0) or of shard
  std::vector<uint8_t> decay;  // padded: 1 for matrix entries
};

// What forward keeps for backward, per layer.
struct Saved {
  std::vector<float> x, n1s, r1, n1, q, k, v, p, attn, x_mid, n2s, r2, n2, g, u;
};

class HostTransformer : public TransformerTrainer {
 public:
  explicit HostTransformer(HostComm& comm) : comm_(comm) {}

  absl::Status Prepare(const v1::Case& c) override;
  absl::StatusOr<TransformerStepTiming> Step() override;
  v1::DataType DefaultDtype() const override { return v1::FLOAT32; }
  std::string Describe() const override { return describe_; }

 private:
  void InitUnits();
  // The communication of one step, timed into `*bucket`; the time since
  // the previous mark is compute.
  absl::Status Timed(double* bucket, const std::function<absl::Status()>& f);
  absl::Status Gather(int unit);  // zero 3: w from the shards
  absl::Status ForwardLayer(int l, std::vector<float>& x);
  absl::Status BackwardLayer(int l, std::vector<float>& dx);
  // Tensor-parallel reduction of a partial [n x h] product into the
  // residual's rows (all-reduce, or reduce-scatter with sp).
  absl::Status TpReduce(std::vector<float>& part, std::vector<float>* out);
  // The residual's rows to all n tokens (sp: all-gather; else a copy).
  absl::Status TpGather(const std::vector<float>& rows,
                        std::vector<float>* full);
  absl::Status ReduceGradients(int unit);
  absl::Status Update();
  void Adam(float* w, const float* g, float* m, float* v, const uint8_t* decay,
            int64_t n) const;
  int64_t BufferBytes() const;

  HostComm& comm_;
  std::unique_ptr<GroupComm> tp_, dp_;
  std::string describe_;
  TransformerShape s_;
  v1::TransformerSpec spec_;
  TransformerParallel p_;
  int tp_rank_ = 0, dp_rank_ = 0;
  int64_t n_ = 0, rows_ = 0;  // tokens of the replica; residual rows here
  int64_t qw_ = 0, kw_ = 0, fw_ = 0;  // tp-local widths
  TpLayerOffsets off_{};
  std::vector<Unit> units_;  // layers, then the final norm
  std::vector<Saved> saved_;
  std::vector<float> input_, target_, out_x_, out_y_, out_r_;
  int64_t step_ = 0;
  TransformerStepTiming t_;
  double mark_ = 0;
};

absl::Status HostTransformer::Timed(double* bucket,
                                    const std::function<absl::Status()>& f) {
  const double start = MonotonicSeconds();
  t_.compute_s += start - mark_;
  absl::Status s = f();
  mark_ = MonotonicSeconds();
  *bucket += mark_ - start;
  return s;
}

absl::Status HostTransformer::Prepare(const v1::Case& c) {
  auto path = HostModelPath(comm_, c.dtype(), "trains");
  if (!path.ok()) return path.status();
  describe_ = *path;
  spec_ = c.transformer();
  p_ = ParallelOf(spec_.parallel());
  if (p_.ranks() != comm_.size()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("layout %s needs %d ranks; the trainer has %d",
                        ParallelName(p_), p_.ranks(), comm_.size()));
  }
  s_ = ShapeOf(spec_);
  if (absl::Status v = ValidateShape(s_); !v.ok()) return v;
  if (absl::Status v =
          ValidateParallel(s_, p_, spec_.micro_batch(), spec_.seq());
      !v.ok()) {
    return v;
  }
  const int rank = comm_.rank();
  tp_rank_ = rank % p_.tp;
  dp_rank_ = rank / p_.tp;
  std::vector<int> tp_members, dp_members;
  for (int i = 0; i < p_.tp; ++i) tp_members.push_back(dp_rank_ * p_.tp + i);
  for (int i = 0; i < p_.dp; ++i) dp_members.push_back(i * p_.tp + tp_rank_);
  tp_ = std::make_unique<GroupComm>(comm_, tp_members);
  dp_ = std::make_unique<GroupComm>(comm_, dp_members);
  const int64_t h = s_.hidden;
  n_ = spec_.micro_batch() * spec_.seq();
  rows_ = p_.sp ? n_ / p_.tp : n_;
  off_ = TpLayerLayout(s_, p_.tp);
  qw_ = off_.qw;
  kw_ = off_.kw;
  fw_ = off_.fw;
  InitUnits();
  // This rank's residual rows: its replica's sequences, and with sp its
  // 1/tp share of their tokens.
  const int64_t first_token =
      dp_rank_ * n_ + (p_.sp ? tp_rank_ * rows_ : int64_t{0});
  input_.resize(rows_ * h);
  target_.resize(rows_ * h);
  for (int64_t i = 0; i < rows_ * h; ++i) {
    input_[i] = static_cast<float>(TransformerInput(first_token * h + i));
    target_[i] = static_cast<float>(TransformerTarget(first_token * h + i));
  }
  saved_.assign(s_.layers, Saved{});
  step_ = 0;
  return comm_.Barrier();
}

// Weights as the reference's, this rank's slice (backends/host/tp_layer.h);
// the final norm's gain 1.
void HostTransformer::InitUnits() {
  const int64_t h = s_.hidden;
  units_.assign(s_.layers + 1, Unit{});
  for (int u = 0; u <= s_.layers; ++u) {
    Unit& U = units_[u];
    U.size = u < s_.layers ? off_.size : h;
    U.padded = (U.size + p_.dp - 1) / p_.dp * p_.dp;
    U.w.assign(U.padded, 0.0f);
    U.decay.assign(U.padded, 0);
    U.grad.assign(U.padded, 0.0f);
    if (u == s_.layers) {
      std::fill(U.w.begin(), U.w.begin() + h, 1.0f);
      continue;
    }
    FillTpLayer(s_, u, tp_rank_, off_, U.w.data(), U.decay.data());
  }
  for (Unit& U : units_) {
    const int64_t per = U.padded / p_.dp;
    const int64_t state = p_.zero == 0 ? U.padded : per;
    U.m.assign(state, 0.0f);
    U.v.assign(state, 0.0f);
    if (p_.zero > 0) {
      U.shard.assign(U.w.begin() + dp_rank_ * per,
                     U.w.begin() + (dp_rank_ + 1) * per);
    }
    if (p_.zero == 3) {
      U.w.clear();
      U.w.shrink_to_fit();
    }
  }
}

absl::Status HostTransformer::Gather(int unit) {
  if (p_.zero != 3) return absl::OkStatus();
  Unit& U = units_[unit];
  U.w.resize(U.padded);
  return Timed(&t_.gather_s, [&] {
    return dp_->AllGather(U.shard.data(), U.w.data(), U.padded / p_.dp);
  });
}

absl::Status HostTransformer::TpReduce(std::vector<float>& part,
                                       std::vector<float>* out) {
  const int64_t h = s_.hidden;
  if (p_.tp == 1) {
    *out = part;
    return absl::OkStatus();
  }
  if (!p_.sp) {
    absl::Status s =
        Timed(&t_.tp_s, [&] { return tp_->AllReduceSum(part.data(), n_ * h); });
    *out = part;
    return s;
  }
  out->resize(rows_ * h);
  return Timed(&t_.tp_s, [&] {
    return tp_->ReduceScatterSum(part.data(), out->data(), rows_ * h);
  });
}

absl::Status HostTransformer::TpGather(const std::vector<float>& rows,
                                       std::vector<float>* full) {
  if (!p_.sp) {
    *full = rows;
    return absl::OkStatus();
  }
  full->resize(n_ * s_.hidden);
  return Timed(&t_.tp_s, [&] {
    return tp_->AllGather(rows.data(), full->data(), rows_ * s_.hidden);
  });
}

absl::Status HostTransformer::ForwardLayer(int l, std::vector<float>& x) {
  const int64_t h = s_.hidden, hd = s_.head_dim, n = n_;
  const int64_t batch = spec_.micro_batch(), seq = spec_.seq();
  if (absl::Status s = Gather(l); !s.ok()) return s;
  const float* w = units_[l].w.data();
  Saved& S = saved_[l];
  S.x = x;
  S.n1s.resize(rows_ * h);
  S.r1.resize(rows_);
  ops::RmsNorm(x.data(), w + off_.attn_norm, S.n1s.data(), S.r1.data(), rows_,
               h, s_.norm_eps);
  if (absl::Status s = TpGather(S.n1s, &S.n1); !s.ok()) return s;
  S.q.resize(n * qw_);
  S.k.resize(n * kw_);
  S.v.resize(n * kw_);
  Gemm(S.n1.data(), w + off_.wq, S.q.data(), n, h, qw_);
  Gemm(S.n1.data(), w + off_.wk, S.k.data(), n, h, kw_);
  Gemm(S.n1.data(), w + off_.wv, S.v.data(), n, h, kw_);
  const int64_t heads = qw_ / hd, kvh = kw_ / hd;
  ops::Rope(S.q.data(), n, seq, heads, hd, s_.rope_theta, 1);
  ops::Rope(S.k.data(), n, seq, kvh, hd, s_.rope_theta, 1);
  S.p.resize(batch * heads * seq * seq);
  S.attn.resize(n * qw_);
  ops::Attention(S.q.data(), S.k.data(), S.v.data(), S.p.data(), S.attn.data(),
                 batch, seq, heads, kvh, hd);
  std::vector<float> part(n * h), proj;
  Gemm(S.attn.data(), w + off_.wo, part.data(), n, qw_, h);
  if (absl::Status s = TpReduce(part, &proj); !s.ok()) return s;
  for (int64_t i = 0; i < rows_ * h; ++i) x[i] += proj[i];
  S.x_mid = x;
  S.n2s.resize(rows_ * h);
  S.r2.resize(rows_);
  ops::RmsNorm(x.data(), w + off_.mlp_norm, S.n2s.data(), S.r2.data(), rows_, h,
               s_.norm_eps);
  if (absl::Status s = TpGather(S.n2s, &S.n2); !s.ok()) return s;
  S.g.resize(n * fw_);
  S.u.resize(n * fw_);
  Gemm(S.n2.data(), w + off_.wg, S.g.data(), n, h, fw_);
  Gemm(S.n2.data(), w + off_.wu, S.u.data(), n, h, fw_);
  std::vector<float> hidden(n * fw_);
  for (int64_t i = 0; i < n * fw_; ++i)
    hidden[i] = S.g[i] * ops::Sigmoid(S.g[i]) * S.u[i];
  Gemm(hidden.data(), w + off_.wd, part.data(), n, fw_, h);
  if (absl::Status s = TpReduce(part, &proj); !s.ok()) return s;
  for (int64_t i = 0; i < rows_ * h; ++i) x[i] += proj[i];
  if (p_.zero == 3) units_[l].w = {};  // released until backward
  return absl::OkStatus();
}

absl::Status HostTransformer::BackwardLayer(int l, std::vector<float>& dx) {
  const int64_t h = s_.hidden, hd = s_.head_dim, n = n_;
  const int64_t batch = spec_.micro_batch(), seq = spec_.seq();
  if (absl::Status s = Gather(l); !s.ok()) return s;
  Unit& U = units_[l];
  const float* w = U.w.data();
  float* g = U.grad.data();
  const Saved& S = saved_[l];
  // MLP: out = x_mid + Wd (silu(gate) * up).
  std::vector<float> dproj, hidden(n * fw_), dh(n * fw_), da(n * fw_),
      du(n * fw_), dn(n * h);
  if (absl::Status s = TpGather(dx, &dproj); !s.ok()) return s;
  for (int64_t i = 0; i < n * fw_; ++i)
    hidden[i] = S.g[i] * ops::Sigmoid(S.g[i]) * S.u[i];
  GemmAddAT(hidden.data(), dproj.data(), g + off_.wd, n, fw_, h);
  GemmBT(dproj.data(), w + off_.wd, dh.data(), n, h, fw_, 0.0f);
  for (int64_t i = 0; i < n * fw_; ++i) {
    const float sg = ops::Sigmoid(S.g[i]);
    da[i] = dh[i] * S.u[i] * sg * (1.0f + S.g[i] * (1.0f - sg));
    du[i] = dh[i] * S.g[i] * sg;
  }
  GemmAddAT(S.n2.data(), da.data(), g + off_.wg, n, h, fw_);
  GemmAddAT(S.n2.data(), du.data(), g + off_.wu, n, h, fw_);
  GemmBT(da.data(), w + off_.wg, dn.data(), n, fw_, h, 0.0f);
  GemmBT(du.data(), w + off_.wu, dn.data(), n, fw_, h, 1.0f);
  std::vector<float> dns;
  if (absl::Status s = TpReduce(dn, &dns); !s.ok()) return s;
  std::vector<float> dmid = dx;
  ops::RmsNormBackward(S.x_mid.data(), w + off_.mlp_norm, S.r2.data(),
                       dns.data(), dmid.data(), g + off_.mlp_norm, rows_, h);
  // Attention: x_mid = x + Wo attn.
  const int64_t heads = qw_ / hd, kvh = kw_ / hd;
  std::vector<float> dattn(n * qw_), dq(n * qw_, 0.0f), dk(n * kw_, 0.0f),
      dv(n * kw_, 0.0f);
  if (absl::Status s = TpGather(dmid, &dproj); !s.ok()) return s;
  GemmAddAT(S.attn.data(), dproj.data(), g + off_.wo, n, qw_, h);
  GemmBT(dproj.data(), w + off_.wo, dattn.data(), n, h, qw_, 0.0f);
  ops::AttentionBackward(S.q.data(), S.k.data(), S.v.data(), S.p.data(),
                         dattn.data(), dq.data(), dk.data(), dv.data(), batch,
                         seq, heads, kvh, hd);
  ops::Rope(dq.data(), n, seq, heads, hd, s_.rope_theta, -1);
  ops::Rope(dk.data(), n, seq, kvh, hd, s_.rope_theta, -1);
  GemmAddAT(S.n1.data(), dq.data(), g + off_.wq, n, h, qw_);
  GemmAddAT(S.n1.data(), dk.data(), g + off_.wk, n, h, kw_);
  GemmAddAT(S.n1.data(), dv.data(), g + off_.wv, n, h, kw_);
  GemmBT(dq.data(), w + off_.wq, dn.data(), n, qw_, h, 0.0f);
  GemmBT(dk.data(), w + off_.wk, dn.data(), n, kw_, h, 1.0f);
  GemmBT(dv.data(), w + off_.wv, dn.data(), n, kw_, h, 1.0f);
  if (absl::Status s = TpReduce(dn, &dns); !s.ok()) return s;
  dx = dmid;
  ops::RmsNormBackward(S.x.data(), w + off_.attn_norm, S.r1.data(), dns.data(),
                       dx.data(), g + off_.attn_norm, rows_, h);
  if (p_.zero == 3) U.w = {};
  return ReduceGradients(l);
}

// With sp, each tensor-parallel rank saw only its tokens: the norm gains'
// gradients are partial sums over tp. Then the sum over dp ranks.
absl::Status HostTransformer::ReduceGradients(int unit) {
  Unit& U = units_[unit];
  const int64_t h = s_.hidden;
  if (p_.sp) {
    std::vector<int64_t> gains =
        unit < s_.layers ? std::vector<int64_t>{off_.attn_norm, off_.mlp_norm}
                         : std::vector<int64_t>{0};
    for (int64_t at : gains) {
      absl::Status s = Timed(
          &t_.tp_s, [&] { return tp_->AllReduceSum(U.grad.data() + at, h); });
      if (!s.ok()) return s;
    }
  }
  if (p_.dp == 1) return absl::OkStatus();
  if (p_.zero == 0) {
    return Timed(&t_.allreduce_s,
                 [&] { return dp_->AllReduceSum(U.grad.data(), U.padded); });
  }
  // This rank's share of the summed gradient, at the front of grad.
  const int64_t per = U.padded / p_.dp;
  std::vector<float> mine(per);
  absl::Status s = Timed(&t_.reduce_scatter_s, [&] {
    return dp_->ReduceScatterSum(U.grad.data(), mine.data(), per);
  });
  std::copy(mine.begin(), mine.end(), U.grad.begin());
  return s;
}

// AdamW as the reference's (beta1 0.9, beta2 0.95, eps 1e-8, decay on
// matrices only), or plain SGD.
void HostTransformer::Adam(float* w, const float* g, float* m, float* v,
                           const uint8_t* decay, int64_t n) const {
  const double lr = spec_.lr();
  if (spec_.optimizer() == "sgd") {
    for (int64_t i = 0; i < n; ++i) w[i] = static_cast<float>(w[i] - lr * g[i]);
    return;
  }
  constexpr double kB1 = 0.9, kB2 = 0.95, kEps = 1e-8;
  const double c1 = 1 - std::pow(kB1, static_cast<double>(step_));
  const double c2 = 1 - std::pow(kB2, static_cast<double>(step_));
  for (int64_t i = 0; i < n; ++i) {
    const double gi = g[i];
    m[i] = static_cast<float>(kB1 * m[i] + (1 - kB1) * gi);
    v[i] = static_cast<float>(kB2 * v[i] + (1 - kB2) * gi * gi);
    double p = w[i];
    if (decay[i]) p -= lr * spec_.weight_decay() * p;
    p -= lr * (m[i] / c1) / (std::sqrt(v[i] / c2) + kEps);
    w[i] = static_cast<float>(p);
  }
}

absl::Status HostTransformer::Update() {
  ++step_;
  for (Unit& U : units_) {
    if (p_.zero == 0) {
      Adam(U.w.data(), U.grad.data(), U.m.data(), U.v.data(), U.decay.data(),
           U.padded);
      continue;
    }
    const int64_t per = U.padded / p_.dp;
    Adam(U.shard.data(), U.grad.data(), U.m.data(), U.v.data(),
         U.decay.data() + dp_rank_ * per, per);
    if (p_.zero == 1) {
      absl::Status s = Timed(&t_.gather_s, [&] {
        return dp_->AllGather(U.shard.data(), U.w.data(), per);
      });
      if (!s.ok()) return s;
    }
  }
  return absl::OkStatus();
}

int64_t HostTransformer::BufferBytes() const {
  int64_t floats = 0;
  for (const Unit& U : units_) {
    floats += static_cast<int64_t>(U.w.size() + U.grad.size() + U.shard.size() +
                                   U.m.size() + U.v.size());
  }
  for (const Saved& S : saved_) {
    for (const auto* v : {&S.x, &S.n1s, &S.r1, &S.n1, &S.q, &S.k, &S.v, &S.p,
                          &S.attn, &S.x_mid, &S.n2s, &S.r2, &S.n2, &S.g, &S.u})
      floats += static_cast<int64_t>(v->size());
  }
  return floats * static_cast<int64_t>(sizeof(float));
}

absl::StatusOr<TransformerStepTiming> HostTransformer::Step() {
  t_ = TransformerStepTiming{};
  const double start = MonotonicSeconds();
  mark_ = start;
  const int64_t h = s_.hidden;
  for (Unit& U : units_) std::fill(U.grad.begin(), U.grad.end(), 0.0f);
  std::vector<float> x = input_;
  for (int l = 0; l < s_.layers; ++l) {
    if (absl::Status s = ForwardLayer(l, x); !s.ok()) return s;
  }
  // Final norm and loss: 0.5 x mean squared error over the global batch.
  const int fin = s_.layers;
  if (absl::Status s = Gather(fin); !s.ok()) return s;
  out_x_ = x;
  out_y_.resize(rows_ * h);
  out_r_.resize(rows_);
  ops::RmsNorm(x.data(), units_[fin].w.data(), out_y_.data(), out_r_.data(),
               rows_, h, s_.norm_eps);
  const double total = static_cast<double>(p_.dp) * static_cast<double>(n_) * h;
  double loss = 0;
  std::vector<float> dy(rows_ * h), dx(rows_ * h, 0.0f);
  for (int64_t i = 0; i < rows_ * h; ++i) {
    const double d = static_cast<double>(out_y_[i]) - target_[i];
    loss += 0.5 * d * d;
    dy[i] = static_cast<float>(d / total);
  }
  // Without sp every tensor-parallel rank computed the same loss.
  t_.loss_part = (p_.sp || tp_rank_ == 0) ? loss / total : 0.0;
  ops::RmsNormBackward(out_x_.data(), units_[fin].w.data(), out_r_.data(),
                       dy.data(), dx.data(), units_[fin].grad.data(), rows_, h);
  if (p_.zero == 3) units_[fin].w = {};
  if (absl::Status s = ReduceGradients(fin); !s.ok()) return s;
  for (int l = s_.layers - 1; l >= 0; --l) {
    if (absl::Status s = BackwardLayer(l, dx); !s.ok()) return s;
  }
  // Zero 3 holds one unit's gathered weights at a time on top of these.
  int64_t gathered = 0;
  if (p_.zero == 3) {
    for (const Unit& U : units_) gathered = std::max(gathered, U.padded);
  }
  t_.peak_memory_bytes =
      BufferBytes() + gathered * static_cast<int64_t>(sizeof(float));
  if (absl::Status s = Update(); !s.ok()) return s;
  const double end = MonotonicSeconds();
  t_.compute_s += end - mark_;
  t_.step_s = end - start;
  return t_;
}

}  // namespace

std::unique_ptr<TransformerTrainer> NewHostTransformer(HostComm& comm) {
  return std::make_unique<HostTransformer>(comm);
}

}  // namespace ringmaster
