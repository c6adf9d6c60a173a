#include "backends/host/host_inference.h"

#include <numeric>
#include <string>
#include <utility>

#include "absl/strings/str_format.h"
#include "backends/host/blas.h"
#include "backends/host/group_comm.h"
#include "backends/host/tp_layer.h"
#include "backends/trainer.h"
#include "core/names.h"
#include "core/status_macros.h"
#include "core/transformer_ops.h"

namespace ringmaster {

namespace ops = transformer_ops;

struct HostDecoder::State {
  TransformerShape s;
  int tp = 1, tp_rank = 0;
  int64_t batch = 0, capacity = 0;
  TpLayerOffsets off{};
  std::vector<std::vector<float>> w;  // per layer, tp-local
  std::vector<float> final_gain;
  // Per layer: keys and values after RoPE, [batch x capacity x kw].
  std::vector<std::vector<float>> kcache, vcache;
  std::unique_ptr<GroupComm> group;
};

HostDecoder::HostDecoder(HostComm& comm) : comm_(comm) {}
HostDecoder::~HostDecoder() = default;

absl::Status HostDecoder::Prepare(const TransformerShape& shape, int64_t batch,
                                  int64_t capacity) {
  if (LoadBlas() == nullptr) {
    return absl::UnimplementedError(
        "no BLAS library with cblas_sgemm here (libopenblas.so.0)");
  }
  if (absl::Status v = ValidateShape(shape); !v.ok()) return v;
  const int tp = comm_.size();
  if (shape.heads % tp != 0 || shape.kv_heads % tp != 0 ||
      shape.ffn_hidden % tp != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "tp %d must divide heads (%d), kv_heads (%d) and ffn_hidden (%d)", tp,
        shape.heads, shape.kv_heads, shape.ffn_hidden));
  }
  if (batch < 1 || capacity < 1) {
    return absl::InvalidArgumentError("batch and capacity must be positive");
  }
  st_ = std::make_unique<State>();
  State& S = *st_;
  S.s = shape;
  S.tp = tp;
  S.tp_rank = comm_.rank();
  S.batch = batch;
  S.capacity = capacity;
  S.off = TpLayerLayout(shape, tp);
  std::vector<int> members(tp);
  std::iota(members.begin(), members.end(), 0);
  S.group = std::make_unique<GroupComm>(comm_, members);
  S.w.assign(shape.layers, std::vector<float>(S.off.size));
  for (int l = 0; l < shape.layers; ++l)
    FillTpLayer(shape, l, S.tp_rank, S.off, S.w[l].data(), nullptr);
  S.final_gain.assign(shape.hidden, 1.0f);
  S.kcache.assign(shape.layers,
                  std::vector<float>(batch * capacity * S.off.kw, 0.0f));
  S.vcache = S.kcache;
  length_ = 0;
  tp_s_ = 0;
  return comm_.Barrier();
}

int64_t HostDecoder::HeldBytes() const {
  if (!st_) return 0;
  const State& S = *st_;
  const int64_t per_layer =
      S.off.size + 2 * S.batch * S.capacity * S.off.kw;  // weights + cache
  return static_cast<int64_t>(sizeof(float)) *
         (per_layer * S.s.layers + S.s.hidden);
}

absl::Status HostDecoder::Sum(std::vector<float>& part) {
  if (st_->tp == 1) return absl::OkStatus();
  const double start = MonotonicSeconds();
  absl::Status s =
      st_->group->AllReduceSum(part.data(), static_cast<int64_t>(part.size()));
  tp_s_ += MonotonicSeconds() - start;
  return s;
}

absl::Status HostDecoder::Forward(int64_t m, std::vector<float>& x,
                                  std::vector<float>* out) {
  State& S = *st_;
  if (length_ + m > S.capacity) {
    return absl::OutOfRangeError(absl::StrFormat(
        "%d more tokens exceed the cache of %d per sequence (%d held)", m,
        S.capacity, length_));
  }
  const int64_t h = S.s.hidden, hd = S.s.head_dim, f = S.off.fw;
  const int64_t qw = S.off.qw, kw = S.off.kw, n = S.batch * m;
  const int64_t heads = qw / hd, kvh = kw / hd;
  std::vector<float> norm(n * h), r(n), q(n * qw), k(n * kw), v(n * kw),
      attn(n * qw), proj(n * h), g(n * f), u(n * f);
  for (int l = 0; l < S.s.layers; ++l) {
    const float* w = S.w[l].data();
    ops::RmsNorm(x.data(), w + S.off.attn_norm, norm.data(), r.data(), n, h,
                 S.s.norm_eps);
    Gemm(norm.data(), w + S.off.wq, q.data(), n, h, qw);
    Gemm(norm.data(), w + S.off.wk, k.data(), n, h, kw);
    Gemm(norm.data(), w + S.off.wv, v.data(), n, h, kw);
    ops::RopeAt(q.data(), n, m, length_, heads, hd, S.s.rope_theta, 1);
    ops::RopeAt(k.data(), n, m, length_, kvh, hd, S.s.rope_theta, 1);
    for (int64_t b = 0; b < S.batch; ++b)
      for (int64_t i = 0; i < m; ++i) {
        const int64_t at = (b * S.capacity + length_ + i) * kw;
        std::copy_n(k.data() + (b * m + i) * kw, kw, S.kcache[l].data() + at);
        std::copy_n(v.data() + (b * m + i) * kw, kw, S.vcache[l].data() + at);
      }
    ops::AttentionCached(q.data(), S.kcache[l].data(), S.vcache[l].data(),
                         attn.data(), S.batch, m, length_, S.capacity, heads,
                         kvh, hd);
    Gemm(attn.data(), w + S.off.wo, proj.data(), n, qw, h);
    if (absl::Status s = Sum(proj); !s.ok()) return s;
    for (int64_t i = 0; i < n * h; ++i) x[i] += proj[i];
    ops::RmsNorm(x.data(), w + S.off.mlp_norm, norm.data(), r.data(), n, h,
                 S.s.norm_eps);
    Gemm(norm.data(), w + S.off.wg, g.data(), n, h, f);
    Gemm(norm.data(), w + S.off.wu, u.data(), n, h, f);
    for (int64_t i = 0; i < n * f; ++i) g[i] = g[i] * ops::Sigmoid(g[i]) * u[i];
    Gemm(g.data(), w + S.off.wd, proj.data(), n, f, h);
    if (absl::Status s = Sum(proj); !s.ok()) return s;
    for (int64_t i = 0; i < n * h; ++i) x[i] += proj[i];
  }
  out->resize(n * h);
  ops::RmsNorm(x.data(), S.final_gain.data(), out->data(), r.data(), n, h,
               S.s.norm_eps);
  length_ += m;
  return absl::OkStatus();
}

// The input rows of positions length_ .. length_ + m - 1 of every sequence.
absl::Status HostDecoder::Prefill(int64_t prompt, std::vector<float>* out) {
  if (!st_) return absl::FailedPreconditionError("Prepare first");
  if (length_ != 0) {
    return absl::FailedPreconditionError("prefill starts an empty cache");
  }
  const int64_t h = st_->s.hidden;
  std::vector<float> x(st_->batch * prompt * h);
  for (int64_t b = 0; b < st_->batch; ++b)
    for (int64_t i = 0; i < prompt * h; ++i)
      x[b * prompt * h + i] =
          static_cast<float>(TransformerInput(b * st_->capacity * h + i));
  return Forward(prompt, x, out);
}

absl::Status HostDecoder::Decode(std::vector<float>* out) {
  if (!st_) return absl::FailedPreconditionError("Prepare first");
  const int64_t h = st_->s.hidden;
  std::vector<float> x(st_->batch * h);
  for (int64_t b = 0; b < st_->batch; ++b)
    for (int64_t j = 0; j < h; ++j)
      x[b * h + j] = static_cast<float>(
          TransformerInput((b * st_->capacity + length_) * h + j));
  return Forward(1, x, out);
}

namespace {

class HostInferenceEngine : public InferenceEngine {
 public:
  explicit HostInferenceEngine(HostComm& comm) : comm_(comm), decoder_(comm) {}

  absl::Status Prepare(const v1::Case& c) override {
    auto path = HostModelPath(comm_, c.dtype(), "serves");
    if (!path.ok()) return path.status();
    describe_ = *path;
    const v1::TransformerSpec& t = c.transformer();
    if (std::max(1, t.parallel().tp()) != comm_.size()) {
      return absl::InvalidArgumentError(
          absl::StrFormat("layout tp%d needs %d ranks; the engine has %d",
                          t.parallel().tp(), t.parallel().tp(), comm_.size()));
    }
    return decoder_.Prepare(ShapeOf(t), t.micro_batch(), t.seq());
  }
  absl::StatusOr<double> Prefill(int64_t prompt,
                                 std::vector<float>* out) override {
    decoder_.Reset();
    std::vector<float> rows;
    const double start = MonotonicSeconds();
    RM_RETURN_IF_ERROR(decoder_.Prefill(prompt, out ? out : &rows));
    return MonotonicSeconds() - start;
  }
  absl::StatusOr<double> Decode(std::vector<float>* out) override {
    std::vector<float> rows;
    const double start = MonotonicSeconds();
    RM_RETURN_IF_ERROR(decoder_.Decode(out ? out : &rows));
    last_decode_s_ = MonotonicSeconds() - start;
    return last_decode_s_;
  }
  double LastDecodeDeviceSeconds() const override { return last_decode_s_; }
  double TpSeconds() const override { return decoder_.tp_seconds(); }
  int64_t HeldBytes() const override { return decoder_.HeldBytes(); }
  v1::DataType DefaultDtype() const override { return v1::FLOAT32; }
  std::string Describe() const override { return describe_; }

 private:
  HostComm& comm_;
  HostDecoder decoder_;
  std::string describe_;
  double last_decode_s_ = 0;
};

}  // namespace

std::unique_ptr<InferenceEngine> NewHostInferenceEngine(HostComm& comm) {
  return std::make_unique<HostInferenceEngine>(comm);
}

}  // namespace ringmaster
