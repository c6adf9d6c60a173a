#include "backends/cuda/cuda_transformer.h"

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/lt_gemms.h"
#include "backends/cuda/transformer_weights.h"
#include "core/datasheet.h"
#include "core/names.h"
#include "core/status_macros.h"
#include "core/transformer.h"
#include "kernels/flash_attention.h"
#include "kernels/transformer_kernels.h"

namespace ringmaster {
namespace {

#define RM_CU(expr) RM_CUDA(expr, 0)
#define RM_LT(expr) RM_CUBLAS(expr, 0)

// Where a step's time goes, for tuning (RINGMASTER_PHASE_TIMES set in the
// worker's environment): events around the matrix products outside
// attention, around attention (its products and softmax) and around the
// optimizer; the rest of the step is element-wise work. One line per step
// on standard error.
class PhaseTimes {
 public:
  enum Phase {
    kGemm = 0,
    kAttention = 1,
    kAttentionBackward = 2,
    kOptimizer = 3,
    kPhases = 4
  };
  PhaseTimes() {
    const char* e = std::getenv("RINGMASTER_PHASE_TIMES");
    on_ = e != nullptr && *e != '\0' && std::string(e) != "0";
  }
  ~PhaseTimes() {
    for (cudaEvent_t e : pool_) cudaEventDestroy(e);
  }
  void Begin(cudaStream_t s) {
    if (on_) open_ = Record(s);
  }
  void End(cudaStream_t s, Phase phase) {
    if (on_) spans_.push_back({phase, open_, Record(s)});
  }
  // After the step's stream synchronized: prints and resets.
  void Report(double step_ms) {
    if (!on_) return;
    double ms[kPhases] = {};
    for (const Span& sp : spans_) {
      float t = 0;
      cudaEventElapsedTime(&t, pool_[sp.begin], pool_[sp.end]);
      ms[sp.phase] += t;
    }
    std::fprintf(stderr,
                 "phase times (ms): step %.3f gemm %.3f attention %.3f "
                 "(backward %.3f) optimizer %.3f element-wise %.3f\n",
                 step_ms, ms[kGemm], ms[kAttention] + ms[kAttentionBackward],
                 ms[kAttentionBackward], ms[kOptimizer],
                 step_ms - ms[kGemm] - ms[kAttention] - ms[kAttentionBackward] -
                     ms[kOptimizer]);
    spans_.clear();
    used_ = 0;
  }

 private:
  struct Span {
    Phase phase;
    size_t begin, end;
  };
  size_t Record(cudaStream_t s) {
    if (used_ == pool_.size()) {
      cudaEvent_t e = nullptr;
      cudaEventCreate(&e);
      pool_.push_back(e);
    }
    cudaEventRecord(pool_[used_], s);
    return used_++;
  }
  bool on_ = false;
  std::vector<cudaEvent_t> pool_;
  size_t used_ = 0, open_ = 0;
  std::vector<Span> spans_;
};

// What forward keeps per layer for backward.
struct LayerActs {
  void *x, *n1, *qkv, *krep, *vrep, *p, *attn, *xmid, *n2, *gu, *hid;
  float *r1, *r2;
  float* lse;  // fused attention's log-sum-exp per query and head
};

// Causal attention computes the scores of a block of queries only against
// the keys up to its last query: queries in blocks of kChunk, block i's
// scores [heads][rows x (q0 + rows)] stored one after the other.
constexpr int64_t kChunk = 512;
struct Chunk {
  int64_t q0, rows, keys, offset;  // offset (elements) in a sequence's P
};

// The blocks of a sequence of `seq` tokens; *scores: the elements of the
// scores of all of them (every head's).
std::vector<Chunk> ChunksOf(int64_t seq, int64_t heads, int64_t* scores) {
  std::vector<Chunk> chunks;
  *scores = 0;
  for (int64_t q0 = 0; q0 < seq; q0 += kChunk) {
    const int64_t rows = std::min(kChunk, seq - q0);
    chunks.push_back({q0, rows, q0 + rows, *scores});
    *scores += heads * rows * (q0 + rows);
  }
  return chunks;
}

class CudaTransformer : public TransformerTrainer {
 public:
  CudaTransformer(int device, int ranks) : device_(device), ranks_(ranks) {}
  ~CudaTransformer() override { Free(); }

  absl::Status Prepare(const v1::Case& c) override;
  absl::StatusOr<TransformerStepTiming> Step() override;
  v1::DataType DefaultDtype() const override { return v1::BFLOAT16; }
  std::string Describe() const override {
    return absl::StrFormat("%s (cuBLASLt, bf16, %s attention)", describe_,
                           fused_ ? "fused" : "unfused");
  }
  double PeakFlops(v1::DataType dtype) const override;
  double MeasuredGemmFlops(v1::DataType dtype) override;

 private:
  template <typename T>
  absl::Status Alloc(T** p, int64_t elems, size_t elem = sizeof(T)) {
    const size_t bytes = static_cast<size_t>(elems) * elem;
    void* raw = nullptr;
    RM_CU(cudaMalloc(&raw, bytes));
    allocations_.push_back(raw);
    allocated_ += static_cast<int64_t>(bytes);
    *p = static_cast<T*>(raw);
    return absl::OkStatus();
  }
  void Free();
  absl::Status ChooseAttention(bool fusable);
  absl::Status Allocate();
  absl::Status InitWeights();
  absl::Status Forward(int l);
  absl::Status Attention(const LayerActs& a);
  absl::Status AttentionBackward(const LayerActs& a);
  absl::Status Backward(int l);
  absl::Status UpdateUnit(int unit);
  // A matrix product outside attention (timed as such when asked).
  absl::Status Mm(bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                  const void* a, int64_t lda, const void* b, int64_t ldb,
                  const void* c, void* d, int64_t ldc, float beta) {
    phases_.Begin(s_);
    absl::Status st = gemm_.Run(ta, tb, m, n, k, a, lda, 0, b, ldb, 0, c, d,
                                ldc, 0, 1, 1.0f, beta, s_);
    phases_.End(s_, PhaseTimes::kGemm);
    return st;
  }
  // The fp32 master weight at `i`, or nullptr without master weights.
  float* Master(int64_t i) const {
    return master_ != nullptr ? master_ + i : nullptr;
  }
  // Element `i` of a bfloat16 buffer.
  static void* At(void* base, int64_t i) {
    return static_cast<char*>(base) + i * 2;
  }

  int device_, ranks_;
  std::string describe_, device_name_;  // device_name_: as the driver names it
  cudaStream_t s_ = nullptr;
  cudaEvent_t start_ = nullptr, end_ = nullptr;
  LtGemms gemm_;
  PhaseTimes phases_;
  bool ready_ = false;
  TransformerShape shape_;
  v1::TransformerSpec spec_;
  int64_t n_ = 0, h_ = 0, qw_ = 0, kw_ = 0, w3_ = 0, f_ = 0, hd_ = 0;
  int64_t params_ = 0, step_ = 0;
  CudaLayerOffsets off_{};
  std::vector<void*> allocations_;
  int64_t allocated_ = 0;
  void* w_ = nullptr;  // bfloat16 weights, flat
  void* g_ = nullptr;  // bfloat16 gradients
  float *master_ = nullptr, *m_ = nullptr, *v_ = nullptr;
  float* gains32_ = nullptr;  // the norm gains' gradients, fp32
  std::vector<LayerActs> acts_;
  // Attention's path (ChooseAttention): kernels/flash_attention.h both
  // ways, or the products and softmax of the blocks below, every layer's
  // scores kept for backward.
  bool fused_ = false;
  tk::FlashShape flash_{};
  void* flash_scratch_ = nullptr;
  std::vector<Chunk> chunks_;
  int64_t scores_per_seq_ = 0;  // elements of one sequence's chunks
  void *dkrep_ = nullptr, *dvrep_ = nullptr;
  void *x_out_ = nullptr, *y_ = nullptr, *dy_ = nullptr;
  float *r_out_ = nullptr, *target_ = nullptr, *cos_ = nullptr, *sin_ = nullptr;
  void *dx_ = nullptr, *dmid_ = nullptr, *dn_ = nullptr, *dhid_ = nullptr,
       *dgu_ = nullptr, *dattn_ = nullptr, *dqkv_ = nullptr, *dp_ = nullptr;
  double* loss_ = nullptr;
  double gemm_flops_ = -1;  // measured once; -1 not yet
};

void CudaTransformer::Free() {
  if (ready_) cudaSetDevice(device_);
  for (void* p : allocations_) cudaFree(p);
  allocations_.clear();
  allocated_ = 0;
}

double CudaTransformer::PeakFlops(v1::DataType dtype) const {
  // The device's datasheet dense peak (core/datasheet.h); 0 where the
  // table has no entry for it.
  const v1::Datasheet* d = FindDatasheet(device_name_);
  return d != nullptr ? DatasheetPeakTflops(*d, dtype) * 1e12 : 0;
}

// Square bfloat16 products of 8192 (random values: zeros draw less power
// and run faster under a power cap) through the same cuBLASLt path as the
// step's: 3 warm-ups, then the median of 10 timed one by one.
double CudaTransformer::MeasuredGemmFlops(v1::DataType dtype) {
  if (dtype != v1::BFLOAT16 || !ready_) return 0;
  if (gemm_flops_ >= 0) return gemm_flops_;
  gemm_flops_ = 0;
  constexpr int64_t kN = 8192;
  constexpr int kWarmup = 3, kTimed = 10;
  if (cudaSetDevice(device_) != cudaSuccess) return 0;
  void* buf[3] = {};
  bool ok = true;
  for (void*& b : buf) ok = ok && cudaMalloc(&b, kN * kN * 2) == cudaSuccess;
  for (int i = 0; ok && i < 2; ++i) {
    ok = tk::InitMatrix(buf[i], nullptr, kN, kN, kN, 0, 0, kN, 991 + i, 1.0,
                        s_) == cudaSuccess;
  }
  std::vector<float> ms;
  for (int i = 0; ok && i < kWarmup + kTimed; ++i) {
    ok = cudaEventRecord(start_, s_) == cudaSuccess &&
         gemm_
             .Run(false, false, kN, kN, kN, buf[0], kN, 0, buf[1], kN, 0,
                  nullptr, buf[2], kN, 0, 1, 1.0f, 0.0f, s_)
             .ok() &&
         cudaEventRecord(end_, s_) == cudaSuccess &&
         cudaEventSynchronize(end_) == cudaSuccess;
    float t = 0;
    if (ok && i >= kWarmup &&
        cudaEventElapsedTime(&t, start_, end_) == cudaSuccess) {
      ms.push_back(t);
    }
  }
  for (void* b : buf) cudaFree(b);
  if (!ok || ms.empty()) {
    cudaGetLastError();  // leave no sticky error for the next case
    return 0;
  }
  std::sort(ms.begin(), ms.end());
  const double median_s = ms[ms.size() / 2] / 1e3;
  gemm_flops_ = 2.0 * kN * kN * kN / median_s;
  return gemm_flops_;
}

absl::Status CudaTransformer::Prepare(const v1::Case& c) {
  const TransformerParallel p = ParallelOf(c.transformer().parallel());
  if (p.ranks() != 1 || ranks_ != 1) {
    return absl::UnimplementedError(absl::StrFormat(
        "layout %s: the CUDA transformer runs on one GPU so far "
        "(dp = tp = 1)",
        ParallelName(p)));
  }
  if (c.dtype() != v1::BFLOAT16) {
    return absl::UnimplementedError(
        absl::StrFormat("the CUDA transformer trains in bfloat16, not %s",
                        DataTypeName(c.dtype())));
  }
  RM_CU(cudaSetDevice(device_));
  if (!ready_) {
    RM_CU(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking));
    RM_CU(cudaEventCreate(&start_));
    RM_CU(cudaEventCreate(&end_));
    if (absl::Status s = gemm_.Init(); !s.ok()) return s;
    cudaDeviceProp prop{};
    RM_CU(cudaGetDeviceProperties(&prop, device_));
    describe_ = absl::StrFormat("GPU %d %s", device_, prop.name);
    device_name_ = prop.name;
    ready_ = true;
  }
  Free();
  spec_ = c.transformer();
  shape_ = ShapeOf(spec_);
  if (absl::Status v = ValidateShape(shape_); !v.ok()) return v;
  // The kernels move 8 bfloat16 at a time and keep a row of gain
  // gradients in shared memory; the unfused softmax keeps a score row in
  // registers (seq at most 8192 without the fused kernels).
  const bool fusable = tk::FlashAttentionSupports(spec_.seq(), shape_.head_dim);
  if (shape_.hidden > 12288 || (spec_.seq() > 8192 && !fusable) ||
      shape_.hidden % 8 != 0 || shape_.head_dim % 8 != 0 ||
      shape_.ffn_hidden % 8 != 0 || spec_.seq() % 8 != 0) {
    return absl::UnimplementedError(
        "the CUDA transformer needs hidden, head_dim, ffn_hidden and seq "
        "multiples of 8, hidden at most 12288 and seq at most 8192 (longer "
        "with head_dim 64 or 128 and seq a multiple of 64)");
  }
  n_ = spec_.micro_batch() * spec_.seq();
  h_ = shape_.hidden;
  hd_ = shape_.head_dim;
  qw_ = shape_.heads * hd_;
  kw_ = shape_.kv_heads * hd_;
  w3_ = qw_ + 2 * kw_;
  f_ = shape_.ffn_hidden;
  RM_RETURN_IF_ERROR(ChooseAttention(fusable));
  flash_ = {spec_.micro_batch(),
            spec_.seq(),
            shape_.heads,
            shape_.kv_heads,
            hd_,
            static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd_)))};
  off_ = CudaLayerLayout(shape_);
  params_ = off_.size * spec_.layers() + h_;
  RM_RETURN_IF_ERROR(Allocate());
  RM_RETURN_IF_ERROR(InitWeights());
  RM_CU(tk::InitData(acts_[0].x, target_, n_ * h_, 0, s_));
  const size_t state = master_ != nullptr ? 4 : 2;
  RM_CU(cudaMemsetAsync(m_, 0, params_ * state, s_));
  RM_CU(cudaMemsetAsync(v_, 0, params_ * state, s_));
  step_ = 0;
  RM_CU(cudaStreamSynchronize(s_));
  return absl::OkStatus();
}

// The products and softmax where they apply (seq at most 8192) and every
// layer's scores take at most a quarter of the free device memory: on an
// H200 at the llama3-8b shape they measured slightly faster than the fused
// kernels (bench/results/h200x1/transformer). Else the fused kernels, whose
// memory grows with seq, not its square. RINGMASTER_ATTENTION = fused or
// unfused forces one (to compare them).
absl::Status CudaTransformer::ChooseAttention(bool fusable) {
  const char* env = std::getenv("RINGMASTER_ATTENTION");
  const std::string forced = env != nullptr ? env : "";
  const bool rows_fit = spec_.seq() <= 8192;
  if (forced == "fused" && !fusable) {
    return absl::UnimplementedError(absl::StrFormat(
        "RINGMASTER_ATTENTION=fused: the fused kernels need head_dim 64 or "
        "128 and seq a multiple of 64 (head_dim %d, seq %d)",
        hd_, spec_.seq()));
  }
  if (forced == "unfused" && !rows_fit) {
    return absl::UnimplementedError(
        "RINGMASTER_ATTENTION=unfused: the unfused softmax takes seq up to "
        "8192");
  }
  if (!forced.empty() && forced != "fused" && forced != "unfused") {
    return absl::InvalidArgumentError(absl::StrFormat(
        "RINGMASTER_ATTENTION=%s: expected fused or unfused", forced));
  }
  int64_t scores = 0;
  ChunksOf(spec_.seq(), shape_.heads, &scores);
  const double bytes = 2.0 * static_cast<double>(spec_.micro_batch()) *
                       static_cast<double>(scores) * (spec_.layers() + 1);
  size_t free = 0, total = 0;
  RM_CU(cudaMemGetInfo(&free, &total));
  fused_ = forced == "fused" ||
           (forced.empty() && fusable &&
            (!rows_fit || bytes > 0.25 * static_cast<double>(free)));
  return absl::OkStatus();
}

// Weights, gradients, optimizer state, what forward keeps for backward,
// backward's scratch and the rotary tables.
absl::Status CudaTransformer::Allocate() {
  const int L = spec_.layers();
  RM_RETURN_IF_ERROR(Alloc(&w_, params_, 2));
  RM_RETURN_IF_ERROR(Alloc(&g_, params_, 2));
  // Master weights: fp32 copies and moments; else bfloat16 moments in the
  // same buffers (half of each used).
  master_ = nullptr;
  if (spec_.master_weights()) RM_RETURN_IF_ERROR(Alloc(&master_, params_));
  const size_t state = spec_.master_weights() ? 4 : 2;
  RM_RETURN_IF_ERROR(Alloc(&m_, params_, state));
  RM_RETURN_IF_ERROR(Alloc(&v_, params_, state));
  RM_RETURN_IF_ERROR(Alloc(&gains32_, (2 * L + 1) * h_));
  scores_per_seq_ = 0;
  chunks_.clear();
  if (!fused_) chunks_ = ChunksOf(spec_.seq(), shape_.heads, &scores_per_seq_);
  const int64_t scores = spec_.micro_batch() * scores_per_seq_;
  acts_.assign(L, LayerActs{});
  for (LayerActs& a : acts_) {
    RM_RETURN_IF_ERROR(Alloc(&a.x, n_ * h_, 2));
    RM_RETURN_IF_ERROR(Alloc(&a.n1, n_ * h_, 2));
    RM_RETURN_IF_ERROR(Alloc(&a.qkv, n_ * w3_, 2));
    if (fused_) {
      RM_RETURN_IF_ERROR(Alloc(&a.lse, n_ * shape_.heads));
    } else {
      RM_RETURN_IF_ERROR(Alloc(&a.krep, n_ * qw_, 2));
      RM_RETURN_IF_ERROR(Alloc(&a.vrep, n_ * qw_, 2));
      RM_RETURN_IF_ERROR(Alloc(&a.p, scores, 2));
    }
    RM_RETURN_IF_ERROR(Alloc(&a.attn, n_ * qw_, 2));
    RM_RETURN_IF_ERROR(Alloc(&a.xmid, n_ * h_, 2));
    RM_RETURN_IF_ERROR(Alloc(&a.n2, n_ * h_, 2));
    RM_RETURN_IF_ERROR(Alloc(&a.gu, n_ * 2 * f_, 2));
    RM_RETURN_IF_ERROR(Alloc(&a.hid, n_ * f_, 2));
    RM_RETURN_IF_ERROR(Alloc(&a.r1, n_));
    RM_RETURN_IF_ERROR(Alloc(&a.r2, n_));
  }
  RM_RETURN_IF_ERROR(Alloc(&x_out_, n_ * h_, 2));
  RM_RETURN_IF_ERROR(Alloc(&y_, n_ * h_, 2));
  RM_RETURN_IF_ERROR(Alloc(&dy_, n_ * h_, 2));
  RM_RETURN_IF_ERROR(Alloc(&r_out_, n_));
  RM_RETURN_IF_ERROR(Alloc(&target_, n_ * h_));
  RM_RETURN_IF_ERROR(Alloc(&dx_, n_ * h_, 2));
  RM_RETURN_IF_ERROR(Alloc(&dmid_, n_ * h_, 2));
  RM_RETURN_IF_ERROR(Alloc(&dn_, n_ * h_, 2));
  RM_RETURN_IF_ERROR(Alloc(&dhid_, n_ * f_, 2));
  RM_RETURN_IF_ERROR(Alloc(&dgu_, n_ * 2 * f_, 2));
  RM_RETURN_IF_ERROR(Alloc(&dattn_, n_ * qw_, 2));
  RM_RETURN_IF_ERROR(Alloc(&dqkv_, n_ * w3_, 2));
  if (fused_) {
    RM_RETURN_IF_ERROR(
        Alloc(&flash_scratch_, tk::FlashAttentionScratchBytes(flash_), 1));
  } else {
    RM_RETURN_IF_ERROR(Alloc(&dp_, scores, 2));
    RM_RETURN_IF_ERROR(Alloc(&dkrep_, n_ * qw_, 2));
    RM_RETURN_IF_ERROR(Alloc(&dvrep_, n_ * qw_, 2));
  }
  RM_RETURN_IF_ERROR(Alloc(&loss_, 1));
  const int64_t half = hd_ / 2, seq = spec_.seq();
  std::vector<float> cos_h, sin_h;
  RotaryTables(shape_, seq, &cos_h, &sin_h);
  RM_RETURN_IF_ERROR(Alloc(&cos_, seq * half));
  RM_RETURN_IF_ERROR(Alloc(&sin_, seq * half));
  RM_CU(cudaMemcpyAsync(cos_, cos_h.data(), cos_h.size() * sizeof(float),
                        cudaMemcpyHostToDevice, s_));
  RM_CU(cudaMemcpyAsync(sin_, sin_h.data(), sin_h.size() * sizeof(float),
                        cudaMemcpyHostToDevice, s_));
  return absl::OkStatus();
}

// As the reference's: Wq, Wk, Wv side by side in Wqkv, gate and up in
// Wgu; gains 1.
absl::Status CudaTransformer::InitWeights() {
  return InitCudaTransformerWeights(shape_, spec_.layers(), off_, w_, master_,
                                    s_);
}

// Causal grouped-query attention of every micro-batch sequence, query
// head h against its key/value head h / group: fused (ChooseAttention)
// or (keys and values copied per
// query head, so that one batched product covers every head): per block of
// queries, the scaled scores against the keys up to its last query, the
// causal softmax, the weighted values straight into attn's columns.
absl::Status CudaTransformer::Attention(const LayerActs& a) {
  if (fused_) {
    RM_CU(tk::FlashAttentionForward(flash_, a.qkv, At(a.qkv, qw_),
                                    At(a.qkv, qw_ + kw_), w3_, a.attn, qw_,
                                    a.lse, s_));
    return absl::OkStatus();
  }
  const int64_t seq = spec_.seq(), heads = shape_.heads,
                group = heads / shape_.kv_heads;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd_));
  const int batch = static_cast<int>(heads);
  RM_CU(tk::ReplicateHeads(At(a.qkv, qw_), w3_, a.krep, n_, heads, group, hd_,
                           s_));
  RM_CU(tk::ReplicateHeads(At(a.qkv, qw_ + kw_), w3_, a.vrep, n_, heads, group,
                           hd_, s_));
  for (int64_t b = 0; b < spec_.micro_batch(); ++b) {
    const int64_t t0 = b * seq;
    for (const Chunk& ch : chunks_) {
      void* p = At(a.p, b * scores_per_seq_ + ch.offset);
      const int64_t sp = ch.rows * ch.keys;
      RM_RETURN_IF_ERROR(
          gemm_.Run(true, false, ch.keys, ch.rows, hd_, At(a.krep, t0 * qw_),
                    qw_, hd_, At(a.qkv, (t0 + ch.q0) * w3_), w3_, hd_, nullptr,
                    p, ch.keys, sp, batch, scale, 0.0f, s_));
      RM_CU(tk::SoftmaxCausal(p, heads, ch.rows, ch.keys, ch.q0, s_));
      RM_RETURN_IF_ERROR(gemm_.Run(false, false, hd_, ch.rows, ch.keys,
                                   At(a.vrep, t0 * qw_), qw_, hd_, p, ch.keys,
                                   sp, nullptr, At(a.attn, (t0 + ch.q0) * qw_),
                                   qw_, hd_, batch, 1.0f, 0.0f, s_));
    }
  }
  return absl::OkStatus();
}

absl::Status CudaTransformer::Forward(int l) {
  LayerActs& a = acts_[l];
  void* w = At(w_, l * off_.size);
  void* next = l + 1 < spec_.layers() ? acts_[l + 1].x : x_out_;
  RM_CU(tk::RmsNormForward(a.x, At(w, off_.g1), a.n1, a.r1, n_, h_,
                           static_cast<float>(shape_.norm_eps), s_));
  RM_RETURN_IF_ERROR(Mm(false, false, w3_, n_, h_, At(w, off_.wqkv), w3_, a.n1,
                        h_, nullptr, a.qkv, w3_, 0.0f));
  RM_CU(tk::Rope(a.qkv, w3_, n_, spec_.seq(), shape_.heads, hd_, cos_, sin_, 1,
                 s_));
  RM_CU(tk::Rope(At(a.qkv, qw_), w3_, n_, spec_.seq(), shape_.kv_heads, hd_,
                 cos_, sin_, 1, s_));
  phases_.Begin(s_);
  RM_RETURN_IF_ERROR(Attention(a));
  phases_.End(s_, PhaseTimes::kAttention);
  // xmid = x + attn Wo; x_next = xmid + hidden Wd: the residuals as C.
  RM_RETURN_IF_ERROR(Mm(false, false, h_, n_, qw_, At(w, off_.wo), h_, a.attn,
                        qw_, a.x, a.xmid, h_, 1.0f));
  RM_CU(tk::RmsNormForward(a.xmid, At(w, off_.g2), a.n2, a.r2, n_, h_,
                           static_cast<float>(shape_.norm_eps), s_));
  RM_RETURN_IF_ERROR(Mm(false, false, 2 * f_, n_, h_, At(w, off_.wgu), 2 * f_,
                        a.n2, h_, nullptr, a.gu, 2 * f_, 0.0f));
  RM_CU(tk::SwigluForward(a.gu, a.hid, n_, f_, s_));
  RM_RETURN_IF_ERROR(Mm(false, false, h_, n_, f_, At(w, off_.wd), h_, a.hid, f_,
                        a.xmid, next, h_, 1.0f));
  return absl::OkStatus();
}

// dattn_ -> dqkv_ (the inverse rotation is left to the caller). Blocks of
// queries from the last (which reaches every key, so it initializes the
// per-head key and value gradients) to the first.
absl::Status CudaTransformer::AttentionBackward(const LayerActs& a) {
  if (fused_) {
    RM_CU(tk::FlashAttentionBackward(
        flash_, a.qkv, At(a.qkv, qw_), At(a.qkv, qw_ + kw_), w3_, a.attn,
        dattn_, qw_, a.lse, dqkv_, At(dqkv_, qw_), At(dqkv_, qw_ + kw_), w3_,
        flash_scratch_, s_));
    return absl::OkStatus();
  }
  const int64_t seq = spec_.seq(), heads = shape_.heads,
                group = heads / shape_.kv_heads;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd_));
  const int batch = static_cast<int>(heads);
  for (int64_t b = 0; b < spec_.micro_batch(); ++b) {
    const int64_t t0 = b * seq;
    for (auto it = chunks_.rbegin(); it != chunks_.rend(); ++it) {
      const Chunk& ch = *it;
      const float accumulate = it == chunks_.rbegin() ? 0.0f : 1.0f;
      void* p = At(a.p, b * scores_per_seq_ + ch.offset);
      void* ds = At(dp_, b * scores_per_seq_ + ch.offset);
      void* dout = At(dattn_, (t0 + ch.q0) * qw_);
      const int64_t sp = ch.rows * ch.keys;
      // dP = dO V^T; dV += P^T dO.
      RM_RETURN_IF_ERROR(gemm_.Run(
          true, false, ch.keys, ch.rows, hd_, At(a.vrep, t0 * qw_), qw_, hd_,
          dout, qw_, hd_, nullptr, ds, ch.keys, sp, batch, 1.0f, 0.0f, s_));
      RM_RETURN_IF_ERROR(gemm_.Run(false, true, hd_, ch.keys, ch.rows, dout,
                                   qw_, hd_, p, ch.keys, sp,
                                   At(dvrep_, t0 * qw_), At(dvrep_, t0 * qw_),
                                   qw_, hd_, batch, 1.0f, accumulate, s_));
      RM_CU(tk::SoftmaxBackward(p, ds, heads, ch.rows, ch.keys, ch.q0, scale,
                                s_));
      // dQ = dS K; dK += dS^T Q.
      RM_RETURN_IF_ERROR(gemm_.Run(false, false, hd_, ch.rows, ch.keys,
                                   At(a.krep, t0 * qw_), qw_, hd_, ds, ch.keys,
                                   sp, nullptr, At(dqkv_, (t0 + ch.q0) * w3_),
                                   w3_, hd_, batch, 1.0f, 0.0f, s_));
      RM_RETURN_IF_ERROR(gemm_.Run(
          false, true, hd_, ch.keys, ch.rows, At(a.qkv, (t0 + ch.q0) * w3_),
          w3_, hd_, ds, ch.keys, sp, At(dkrep_, t0 * qw_), At(dkrep_, t0 * qw_),
          qw_, hd_, batch, 1.0f, accumulate, s_));
    }
  }
  RM_CU(tk::SumHeads(dkrep_, At(dqkv_, qw_), w3_, n_, heads, group, hd_, s_));
  RM_CU(tk::SumHeads(dvrep_, At(dqkv_, qw_ + kw_), w3_, n_, heads, group, hd_,
                     s_));
  return absl::OkStatus();
}

// dx_ holds the gradient of the layer's output; on return, of its input.
absl::Status CudaTransformer::Backward(int l) {
  const LayerActs& a = acts_[l];
  void* w = At(w_, l * off_.size);
  void* dw = At(g_, l * off_.size);
  float* dg1 = gains32_ + (2 * l) * h_;
  float* dg2 = gains32_ + (2 * l + 1) * h_;
  // MLP.
  RM_RETURN_IF_ERROR(Mm(false, true, h_, f_, n_, dx_, h_, a.hid, f_, nullptr,
                        At(dw, off_.wd), h_, 0.0f));
  RM_RETURN_IF_ERROR(Mm(true, false, f_, n_, h_, At(w, off_.wd), h_, dx_, h_,
                        nullptr, dhid_, f_, 0.0f));
  RM_CU(tk::SwigluBackward(a.gu, dhid_, dgu_, n_, f_, s_));
  RM_RETURN_IF_ERROR(Mm(false, true, 2 * f_, h_, n_, dgu_, 2 * f_, a.n2, h_,
                        nullptr, At(dw, off_.wgu), 2 * f_, 0.0f));
  RM_RETURN_IF_ERROR(Mm(true, false, h_, n_, 2 * f_, At(w, off_.wgu), 2 * f_,
                        dgu_, 2 * f_, nullptr, dn_, h_, 0.0f));
  RM_CU(tk::RmsNormBackward(a.xmid, At(w, off_.g2), a.r2, dn_, dx_, dmid_, dg2,
                            n_, h_, s_));
  // Attention.
  RM_RETURN_IF_ERROR(Mm(false, true, h_, qw_, n_, dmid_, h_, a.attn, qw_,
                        nullptr, At(dw, off_.wo), h_, 0.0f));
  RM_RETURN_IF_ERROR(Mm(true, false, qw_, n_, h_, At(w, off_.wo), h_, dmid_, h_,
                        nullptr, dattn_, qw_, 0.0f));
  phases_.Begin(s_);
  RM_RETURN_IF_ERROR(AttentionBackward(a));
  phases_.End(s_, PhaseTimes::kAttentionBackward);
  RM_CU(tk::Rope(dqkv_, w3_, n_, spec_.seq(), shape_.heads, hd_, cos_, sin_, -1,
                 s_));
  RM_CU(tk::Rope(At(dqkv_, qw_), w3_, n_, spec_.seq(), shape_.kv_heads, hd_,
                 cos_, sin_, -1, s_));
  RM_RETURN_IF_ERROR(Mm(false, true, w3_, h_, n_, dqkv_, w3_, a.n1, h_, nullptr,
                        At(dw, off_.wqkv), w3_, 0.0f));
  RM_RETURN_IF_ERROR(Mm(true, false, h_, n_, w3_, At(w, off_.wqkv), w3_, dqkv_,
                        w3_, nullptr, dn_, h_, 0.0f));
  RM_CU(tk::RmsNormBackward(a.x, At(w, off_.g1), a.r1, dn_, dmid_, dx_, dg1, n_,
                            h_, s_));
  return absl::OkStatus();
}

// One unit's optimizer step: unit l < layers is layer l, unit layers the
// final norm. (Run on a second stream beside the backward of the layers
// below, the updates measured no faster on a power-capped H200: the GEMMs
// slowed by about what the overlap saved.)
absl::Status CudaTransformer::UpdateUnit(int unit) {
  const bool sgd = spec_.optimizer() == "sgd";
  const float lr = static_cast<float>(spec_.lr());
  const float wd = static_cast<float>(spec_.weight_decay());
  const float c1 = static_cast<float>(1 - std::pow(0.9, step_));
  const float c2 = static_cast<float>(1 - std::pow(0.95, step_));
  auto update = [&](int64_t at, int64_t count, float decay) -> absl::Status {
    if (master_ != nullptr) {
      RM_CU(tk::AdamW(At(w_, at), master_ + at, At(g_, at), m_ + at, v_ + at,
                      count, lr, decay, c1, c2, sgd, s_));
    } else {
      RM_CU(tk::AdamWBf16(At(w_, at), At(g_, at), At(m_, at), At(v_, at), count,
                          lr, decay, c1, c2, sgd, s_));
    }
    return absl::OkStatus();
  };
  const int64_t base = unit * off_.size;
  if (unit == spec_.layers()) {
    RM_CU(tk::ToBf16(gains32_ + 2 * unit * h_, At(g_, base), h_, s_));
    return update(base, h_, 0.0f);
  }
  RM_CU(tk::ToBf16(gains32_ + 2 * unit * h_, At(g_, base + off_.g1), h_, s_));
  RM_CU(tk::ToBf16(gains32_ + (2 * unit + 1) * h_, At(g_, base + off_.g2), h_,
                   s_));
  RM_RETURN_IF_ERROR(update(base + off_.g1, h_, 0.0f));
  RM_RETURN_IF_ERROR(update(base + off_.wqkv, off_.g2 - off_.wqkv, wd));
  RM_RETURN_IF_ERROR(update(base + off_.g2, h_, 0.0f));
  return update(base + off_.wgu, off_.size - off_.wgu, wd);
}

absl::StatusOr<TransformerStepTiming> CudaTransformer::Step() {
  RM_CU(cudaSetDevice(device_));
  const int L = spec_.layers();
  RM_CU(cudaEventRecord(start_, s_));
  RM_CU(cudaMemsetAsync(loss_, 0, sizeof(double), s_));
  RM_CU(cudaMemsetAsync(gains32_, 0, (2 * L + 1) * h_ * sizeof(float), s_));
  for (int l = 0; l < L; ++l) RM_RETURN_IF_ERROR(Forward(l));
  const int64_t fin = L * off_.size;
  RM_CU(tk::RmsNormForward(x_out_, At(w_, fin), y_, r_out_, n_, h_,
                           static_cast<float>(shape_.norm_eps), s_));
  RM_CU(tk::Loss(y_, target_, dy_, loss_, n_ * h_,
                 1.0 / static_cast<double>(n_ * h_), s_));
  RM_CU(tk::RmsNormBackward(x_out_, At(w_, fin), r_out_, dy_, nullptr, dx_,
                            gains32_ + 2 * L * h_, n_, h_, s_));
  for (int l = L - 1; l >= 0; --l) RM_RETURN_IF_ERROR(Backward(l));
  ++step_;
  phases_.Begin(s_);
  for (int unit = 0; unit <= L; ++unit) RM_RETURN_IF_ERROR(UpdateUnit(unit));
  phases_.End(s_, PhaseTimes::kOptimizer);
  RM_CU(cudaEventRecord(end_, s_));
  double loss = 0;
  RM_CU(cudaMemcpyAsync(&loss, loss_, sizeof(double), cudaMemcpyDeviceToHost,
                        s_));
  RM_CU(cudaStreamSynchronize(s_));
  float ms = 0;
  RM_CU(cudaEventElapsedTime(&ms, start_, end_));
  phases_.Report(ms);
  TransformerStepTiming t;
  t.step_s = ms / 1e3;
  t.compute_s = t.step_s;  // one GPU: no communication
  t.loss_part = loss;
  t.peak_memory_bytes = allocated_ + (64 << 20);  // + cuBLASLt's workspace
  return t;
}

}  // namespace

absl::StatusOr<std::unique_ptr<TransformerTrainer>> NewCudaTransformer(
    int device, int ranks) {
  return std::unique_ptr<TransformerTrainer>(
      std::make_unique<CudaTransformer>(device, ranks));
}

}  // namespace ringmaster
