#include "backends/cuda/cuda_inference.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/lt_gemms.h"
#include "backends/cuda/transformer_weights.h"
#include "core/names.h"
#include "core/status_macros.h"
#include "core/transformer.h"
#include "kernels/decode_kernels.h"
#include "kernels/decode_step.h"
#include "kernels/flash_attention.h"
#include "kernels/transformer_kernels.h"

namespace ringmaster {
namespace {

#define RM_CU(expr) RM_CUDA(expr, 0)

class CudaInferenceEngine : public InferenceEngine {
 public:
  explicit CudaInferenceEngine(int device) : device_(device) {}
  ~CudaInferenceEngine() override;

  absl::Status Prepare(const v1::Case& c) override;
  absl::StatusOr<double> Prefill(int64_t prompt,
                                 std::vector<float>* out) override;
  absl::StatusOr<double> Decode(std::vector<float>* out) override;
  double LastDecodeDeviceSeconds() const override { return device_s_; }
  double TpSeconds() const override { return 0; }  // one GPU: no sums
  int64_t HeldBytes() const override { return held_; }
  v1::DataType DefaultDtype() const override { return v1::BFLOAT16; }
  std::string Describe() const override { return describe_; }

 private:
  template <typename T>
  absl::Status Alloc(T** p, int64_t elems, size_t elem, bool held) {
    void* raw = nullptr;
    RM_CU(cudaMalloc(&raw, static_cast<size_t>(elems) * elem));
    allocations_.push_back(raw);
    if (held) held_ += elems * static_cast<int64_t>(elem);
    *p = static_cast<T*>(raw);
    return absl::OkStatus();
  }
  static void* At(void* base, int64_t i) {
    return static_cast<char*>(base) + i * 2;
  }
  void Free();
  // y[n x m] = x[n x k] W[k x m] (+ c when not null), row-major.
  absl::Status Mm(int64_t n, int64_t k, int64_t m, const void* w, const void* x,
                  const void* c, void* y) {
    return gemm_.Run(false, false, m, n, k, w, m, 0, x, k, 0, c, y, m, 0, 1,
                     1.0f, c != nullptr ? 1.0f : 0.0f, s_);
  }
  // One layer over n tokens (x in, x2 out): `attention` computes attn_
  // from qkv_ (rotary already applied) and fills the cache.
  absl::Status Layer(int l, int64_t n, const void* x, void* x2,
                     const std::function<absl::Status()>& attention);
  absl::Status PrefillChunk(int64_t b0, int64_t nb, int64_t prompt,
                            std::vector<float>* out);
  absl::Status DecodeStep();  // captured in graph_
  // DecodeStep between the records of step_start_ and step_end_ (as
  // external event nodes of the graph being captured).
  absl::Status CapturedStep();
  absl::Status ChooseDecodePath();
  // The fused step's model (its pointers) and state, after the weights and
  // caches are allocated.
  absl::Status PrepareFusedStep();
  // Decode attention of layer l (rotary and the cache append included).
  absl::Status DecodeAttention(int l, bool pdl);
  // One layer of a decode step of at most kDecodeGemvMaxRows sequences
  // through the decode products (norms and SwiGLU folded into them).
  absl::Status DecodeLayer(int l, const void* x, void* x2);

  int device_;
  std::string describe_, gpu_name_;
  cudaStream_t s_ = nullptr;
  cudaEvent_t start_ = nullptr, end_ = nullptr;
  // Recorded by the decode graph itself, at its start and end (the step on
  // the device alone), and that time for the last step (-1: not timed).
  cudaEvent_t step_start_ = nullptr, step_end_ = nullptr;
  double device_s_ = -1;
  LtGemms gemm_;
  bool ready_ = false;
  TransformerShape shape_;
  float scale_ = 1;  // attention's 1 / sqrt(head_dim)
  int64_t batch_ = 0, chunk_ = 1, cap_ = 0, prompt_ = 0, h_ = 0, hd_ = 0,
          qw_ = 0, kw_ = 0, w3_ = 0, f_ = 0;
  CudaLayerOffsets off_{};
  std::vector<void*> allocations_;
  int64_t held_ = 0;
  void* w_ = nullptr;                   // weights, flat
  std::vector<void*> kcache_, vcache_;  // per layer
  void *x_ = nullptr, *x2_ = nullptr, *n_ = nullptr, *qkv_ = nullptr,
       *attn_ = nullptr, *mid_ = nullptr, *gu_ = nullptr, *hid_ = nullptr,
       *y_ = nullptr;
  float *rinv_ = nullptr, *lse_ = nullptr, *cos_ = nullptr, *sin_ = nullptr;
  tk::DecodeScratch scratch_;
  bool fused_ = false;  // a decode step as one tk::DecodeStep launch
  tk::DecodeStepModel step_;
  tk::DecodeStepState step_state_;
  bool gemv_ = false;   // decode products by tk::DecodeGemv
  bool pdl_ = true;     // decode kernels as programmatic dependents
  bool fold_ = true;    // the fused step makes its input itself
  int* pos_ = nullptr;  // the next position (device memory)
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
};

CudaInferenceEngine::~CudaInferenceEngine() {
  Free();
  if (!ready_) return;
  for (cudaEvent_t e : {start_, end_, step_start_, step_end_})
    if (e != nullptr) cudaEventDestroy(e);
  if (s_ != nullptr) cudaStreamDestroy(s_);
}

void CudaInferenceEngine::Free() {
  if (ready_) cudaSetDevice(device_);
  if (exec_ != nullptr) cudaGraphExecDestroy(exec_);
  if (graph_ != nullptr) cudaGraphDestroy(graph_);
  exec_ = nullptr;
  graph_ = nullptr;
  for (void* p : allocations_) cudaFree(p);
  allocations_.clear();
  held_ = 0;
}

absl::Status CudaInferenceEngine::Prepare(const v1::Case& c) {
  if (c.dtype() != v1::BFLOAT16) {
    return absl::UnimplementedError(
        absl::StrFormat("the CUDA inference engine serves in bfloat16, not %s",
                        DataTypeName(c.dtype())));
  }
  const v1::TransformerSpec& t = c.transformer();
  if (std::max(1, t.parallel().tp()) != 1) {
    return absl::UnimplementedError(absl::StrFormat(
        "layout tp%d: the CUDA inference engine runs on one GPU so far",
        t.parallel().tp()));
  }
  shape_ = ShapeOf(t);
  RM_RETURN_IF_ERROR(ValidateShape(shape_));
  batch_ = t.micro_batch();
  cap_ = t.seq();
  prompt_ = c.serve().prompt();
  h_ = shape_.hidden;
  hd_ = shape_.head_dim;
  scale_ = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd_)));
  qw_ = shape_.heads * hd_;
  kw_ = shape_.kv_heads * hd_;
  w3_ = qw_ + 2 * kw_;
  f_ = shape_.ffn_hidden;
  if (!tk::FlashAttentionSupports(prompt_, hd_) || cap_ > 8192 || h_ % 8 != 0 ||
      f_ % 8 != 0 || h_ > 12288) {
    return absl::UnimplementedError(
        "the CUDA inference engine needs head_dim 64 or 128, a prompt that "
        "is a multiple of 64, prompt + generate at most 8192, hidden and "
        "ffn_hidden multiples of 8 and hidden at most 12288");
  }
  RM_CU(cudaSetDevice(device_));
  if (!ready_) {
    RM_CU(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking));
    for (cudaEvent_t* e : {&start_, &end_, &step_start_, &step_end_})
      RM_CU(cudaEventCreate(e));
    RM_RETURN_IF_ERROR(gemm_.Init());
    cudaDeviceProp prop{};
    RM_CU(cudaGetDeviceProperties(&prop, device_));
    gpu_name_ = prop.name;
    ready_ = true;
  }
  // This case's layout before the decode path is chosen (it weighs a
  // layer's bytes).
  off_ = CudaLayerLayout(shape_);
  RM_RETURN_IF_ERROR(ChooseDecodePath());
  Free();
  const int L = shape_.layers;
  RM_RETURN_IF_ERROR(Alloc(&w_, off_.size * L + h_, 2, true));
  kcache_.assign(L, nullptr);
  vcache_.assign(L, nullptr);
  for (int l = 0; l < L; ++l) {
    RM_RETURN_IF_ERROR(Alloc(&kcache_[l], batch_ * cap_ * kw_, 2, true));
    RM_RETURN_IF_ERROR(Alloc(&vcache_[l], batch_ * cap_ * kw_, 2, true));
  }
  // Prefill runs chunk_ sequences at a time (at most 32768 tokens: the
  // element-wise kernels' grids, and activations of that size).
  chunk_ = std::max<int64_t>(1, std::min<int64_t>(batch_, 32768 / prompt_));
  const int64_t n = std::max(chunk_ * prompt_, batch_);  // tokens per pass
  for (void** p : {&x_, &x2_, &n_, &mid_, &y_})
    RM_RETURN_IF_ERROR(Alloc(p, n * h_, 2, false));
  RM_RETURN_IF_ERROR(Alloc(&qkv_, n * w3_, 2, false));
  RM_RETURN_IF_ERROR(Alloc(&attn_, n * qw_, 2, false));
  RM_RETURN_IF_ERROR(Alloc(&gu_, n * 2 * f_, 2, false));
  RM_RETURN_IF_ERROR(Alloc(&hid_, n * f_, 2, false));
  RM_RETURN_IF_ERROR(Alloc(&rinv_, n, 4, false));
  RM_RETURN_IF_ERROR(Alloc(&lse_, n * shape_.heads, 4, false));
  RM_RETURN_IF_ERROR(Alloc(&pos_, 1, 4, false));
  int64_t partial = tk::DecodeAttentionScratch(batch_, shape_.heads, hd_, cap_);
  if (gemv_) {
    for (auto [k, m] : {std::pair{h_, w3_}, std::pair{qw_, h_},
                        std::pair{h_, 2 * f_}, std::pair{f_, h_}}) {
      partial = std::max(partial, tk::DecodeGemvScratch(batch_, k, m));
    }
  }
  RM_RETURN_IF_ERROR(Alloc(&scratch_.partial, partial, 4, false));
  scratch_.partial_floats = partial;
  RM_RETURN_IF_ERROR(
      Alloc(&scratch_.counters, tk::kDecodeCounters, sizeof(unsigned), false));
  RM_CU(cudaMemsetAsync(scratch_.counters, 0,
                        tk::kDecodeCounters * sizeof(unsigned), s_));
  const int64_t half = hd_ / 2;
  std::vector<float> cos_h, sin_h;
  RotaryTables(shape_, cap_, &cos_h, &sin_h);
  RM_RETURN_IF_ERROR(Alloc(&cos_, cap_ * half, 4, false));
  RM_RETURN_IF_ERROR(Alloc(&sin_, cap_ * half, 4, false));
  RM_CU(cudaMemcpyAsync(cos_, cos_h.data(), cos_h.size() * 4,
                        cudaMemcpyHostToDevice, s_));
  RM_CU(cudaMemcpyAsync(sin_, sin_h.data(), sin_h.size() * 4,
                        cudaMemcpyHostToDevice, s_));
  if (fused_) RM_RETURN_IF_ERROR(PrepareFusedStep());
  RM_RETURN_IF_ERROR(
      InitCudaTransformerWeights(shape_, shape_.layers, off_, w_, nullptr, s_));
  RM_CU(cudaStreamSynchronize(s_));
  return absl::OkStatus();
}

absl::Status CudaInferenceEngine::Layer(
    int l, int64_t n, const void* x, void* x2,
    const std::function<absl::Status()>& attention) {
  void* w = At(w_, l * off_.size);
  const float eps = static_cast<float>(shape_.norm_eps);
  RM_CU(tk::RmsNormForward(x, At(w, off_.g1), n_, rinv_, n, h_, eps, s_));
  RM_RETURN_IF_ERROR(Mm(n, h_, w3_, At(w, off_.wqkv), n_, nullptr, qkv_));
  RM_RETURN_IF_ERROR(attention());
  RM_RETURN_IF_ERROR(Mm(n, qw_, h_, At(w, off_.wo), attn_, x, mid_));
  RM_CU(tk::RmsNormForward(mid_, At(w, off_.g2), n_, rinv_, n, h_, eps, s_));
  RM_RETURN_IF_ERROR(Mm(n, h_, 2 * f_, At(w, off_.wgu), n_, nullptr, gu_));
  RM_CU(tk::SwigluForward(gu_, hid_, n, f_, s_));
  return Mm(n, f_, h_, At(w, off_.wd), hid_, mid_, x2);
}

absl::StatusOr<double> CudaInferenceEngine::Prefill(int64_t prompt,
                                                    std::vector<float>* out) {
  if (prompt != prompt_) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "prepared for a prompt of %d tokens, not %d", prompt_, prompt));
  }
  RM_CU(cudaSetDevice(device_));
  RM_CU(cudaEventRecord(start_, s_));
  if (out != nullptr) out->clear();
  for (int64_t b0 = 0; b0 < batch_; b0 += chunk_) {
    RM_RETURN_IF_ERROR(
        PrefillChunk(b0, std::min(chunk_, batch_ - b0), prompt, out));
  }
  const int next = static_cast<int>(prompt);
  RM_CU(cudaMemcpyAsync(pos_, &next, sizeof(int), cudaMemcpyHostToDevice, s_));
  RM_CU(cudaEventRecord(end_, s_));
  RM_CU(cudaEventSynchronize(end_));
  float ms = 0;
  RM_CU(cudaEventElapsedTime(&ms, start_, end_));
  return ms / 1e3;
}

// Sequences b0 .. b0 + nb - 1: their caches filled; their outputs appended
// to `out` when not null (the check's request only: a copy mid-prefill).
absl::Status CudaInferenceEngine::PrefillChunk(int64_t b0, int64_t nb,
                                               int64_t prompt,
                                               std::vector<float>* out) {
  const int64_t n = nb * prompt;
  tk::FlashShape fs{nb, prompt, shape_.heads, shape_.kv_heads, hd_, scale_};
  // Sequence b0 + b's rows are those at position b0 * capacity + t of
  // sequence b.
  RM_CU(tk::SequenceInputs(x_, nb, prompt, h_, cap_, b0 * cap_, nullptr, s_));
  void *in = x_, *other = x2_;
  for (int l = 0; l < shape_.layers; ++l) {
    auto attention = [&]() -> absl::Status {
      RM_CU(
          tk::Rope(qkv_, w3_, n, prompt, shape_.heads, hd_, cos_, sin_, 1, s_));
      RM_CU(tk::Rope(At(qkv_, qw_), w3_, n, prompt, shape_.kv_heads, hd_, cos_,
                     sin_, 1, s_));
      for (int64_t b = 0; b < nb; ++b) {
        for (auto [cache, col] :
             {std::pair{kcache_[l], qw_}, std::pair{vcache_[l], qw_ + kw_}}) {
          RM_CU(cudaMemcpy2DAsync(At(cache, (b0 + b) * cap_ * kw_), kw_ * 2,
                                  At(qkv_, b * prompt * w3_ + col), w3_ * 2,
                                  kw_ * 2, prompt, cudaMemcpyDeviceToDevice,
                                  s_));
        }
      }
      RM_CU(tk::FlashAttentionForward(fs, qkv_, At(qkv_, qw_),
                                      At(qkv_, qw_ + kw_), w3_, attn_, qw_,
                                      lse_, s_));
      return absl::OkStatus();
    };
    RM_RETURN_IF_ERROR(Layer(l, n, in, other, attention));
    std::swap(in, other);
  }
  RM_CU(tk::RmsNormForward(in, At(w_, shape_.layers * off_.size), y_, rinv_, n,
                           h_, static_cast<float>(shape_.norm_eps), s_));
  if (out != nullptr) {
    std::vector<__nv_bfloat16> rows(n * h_);
    RM_CU(cudaMemcpyAsync(rows.data(), y_, rows.size() * 2,
                          cudaMemcpyDeviceToHost, s_));
    RM_CU(cudaStreamSynchronize(s_));
    for (const __nv_bfloat16& v : rows) out->push_back(__bfloat162float(v));
  }
  return absl::OkStatus();
}

// Decode at batch 1: the whole step as one persistent kernel
// (tk::DecodeStep) where it takes the shape, else the products by
// tk::DecodeGemv, where it reads each weight once at close to the memory's
// bandwidth and a general product of one row does not; cuBLASLt beyond (on
// an H200 it measured faster from batch 2 on: the kernel's fp32 FMAs and
// registers grow with the rows). RINGMASTER_DECODE_FUSED=0 leaves the
// fused step out (1 requires it); RINGMASTER_DECODE_GEMV=1 takes the
// matrix-vector kernels up to their row limit, 0 never (both without the
// fused step); RINGMASTER_DECODE_PDL=0 launches the decode kernels without
// programmatic dependence; RINGMASTER_DECODE_FOLD=0 writes the fused step's
// input with a kernel of its own before it (all to compare them).
constexpr int64_t kGemvBatches = 1;
constexpr int64_t kFusedMinLayerBytes = int64_t{32} << 20;

absl::Status CudaInferenceEngine::ChooseDecodePath() {
  const char* fused = std::getenv("RINGMASTER_DECODE_FUSED");
  const char* gemv = std::getenv("RINGMASTER_DECODE_GEMV");
  const char* pdl = std::getenv("RINGMASTER_DECODE_PDL");
  const char* fold = std::getenv("RINGMASTER_DECODE_FOLD");
  for (const char* v : {fused, gemv, pdl, fold}) {
    if (v != nullptr && std::string(v) != "0" && std::string(v) != "1") {
      return absl::InvalidArgumentError(absl::StrFormat(
          "RINGMASTER_DECODE_FUSED / RINGMASTER_DECODE_GEMV / "
          "RINGMASTER_DECODE_PDL / RINGMASTER_DECODE_FOLD: expected 0 or 1, "
          "not %s",
          v));
    }
  }
  const std::string forced = gemv != nullptr ? gemv : "";
  const std::string want_fused = fused != nullptr ? fused : "";
  step_ = tk::DecodeStepModel{};
  step_.layers = shape_.layers;
  step_.hidden = h_;
  step_.heads = shape_.heads;
  step_.kv_heads = shape_.kv_heads;
  step_.head_dim = hd_;
  step_.ffn = f_;
  step_.capacity = cap_;
  step_.eps = static_cast<float>(shape_.norm_eps);
  step_.scale = scale_;
  // With little weight per layer the step's barriers, not its reads, set
  // its time: on an H200 the per-product kernels were faster at 0.8 MB per
  // layer and slower at 436 MB (the threshold between is a guess, not a
  // measurement). RINGMASTER_DECODE_FUSED=1 takes the fused step anyway.
  const int64_t layer_bytes = 2 * off_.size;  // a layer's bf16 tensors
  fused_ = batch_ == 1 && forced.empty() && want_fused != "0" &&
           (want_fused == "1" || layer_bytes >= kFusedMinLayerBytes) &&
           tk::DecodeStepSupports(step_);
  if (want_fused == "1" && !fused_) {
    return absl::InvalidArgumentError(
        "RINGMASTER_DECODE_FUSED=1: the fused decode step takes batch 1 only, "
        "without RINGMASTER_DECODE_GEMV, and a shape it supports (head_dim "
        "64 or 128, at most 4 query heads per key/value head, every "
        "product's outputs a multiple of 256, prompt + generate within its "
        "shared memory: about 4,000 positions for Llama 3 8B)");
  }
  gemv_ = forced == "1"   ? batch_ <= tk::kDecodeGemvMaxRows
          : forced == "0" ? false
                          : batch_ <= kGemvBatches;
  pdl_ = pdl == nullptr || std::string(pdl) == "1";
  fold_ = fold == nullptr || std::string(fold) == "1";
  describe_ = absl::StrFormat(
      "GPU %d %s (bf16, decode steps as a CUDA graph, %s)", device_, gpu_name_,
      fused_  ? "each decode step one persistent kernel"
      : gemv_ ? (pdl_ ? "decode products by matrix-vector kernels, "
                        "dependent launches"
                      : "decode products by matrix-vector kernels")
              : "decode products by cuBLASLt");
  return absl::OkStatus();
}

absl::Status CudaInferenceEngine::PrepareFusedStep() {
  step_.weights = w_;
  step_.layer_elems = off_.size;
  step_.off_g1 = off_.g1;
  step_.off_wqkv = off_.wqkv;
  step_.off_wo = off_.wo;
  step_.off_g2 = off_.g2;
  step_.off_wgu = off_.wgu;
  step_.off_wd = off_.wd;
  step_.final_gain = At(w_, shape_.layers * off_.size);
  step_.cos_table = cos_;
  step_.sin_table = sin_;
  std::vector<void*> caches(kcache_);
  caches.insert(caches.end(), vcache_.begin(), vcache_.end());
  void** dev = nullptr;
  RM_RETURN_IF_ERROR(
      Alloc(&dev, static_cast<int64_t>(caches.size()), sizeof(void*), false));
  RM_CU(cudaMemcpyAsync(dev, caches.data(), caches.size() * sizeof(void*),
                        cudaMemcpyHostToDevice, s_));
  step_.kcache = dev;
  step_.vcache = dev + shape_.layers;
  const int64_t floats = tk::DecodeStepFloats(step_),
                words = tk::DecodeStepWords(step_);
  RM_RETURN_IF_ERROR(Alloc(&step_state_.floats, floats, 4, false));
  RM_RETURN_IF_ERROR(Alloc(&step_state_.words, words, 4, false));
  RM_CU(cudaMemsetAsync(step_state_.floats, 0, floats * 4, s_));
  RM_CU(cudaMemsetAsync(step_state_.words, 0, words * 4, s_));
  return absl::OkStatus();
}

absl::Status CudaInferenceEngine::DecodeLayer(int l, const void* x, void* x2) {
  void* w = At(w_, l * off_.size);
  const float eps = static_cast<float>(shape_.norm_eps);
  using tk::DecodeInput;
  RM_CU(tk::DecodeGemv(DecodeInput::kRmsNorm, x, At(w, off_.g1), eps,
                       At(w, off_.wqkv), nullptr, qkv_, batch_, h_, w3_,
                       scratch_, pdl_, s_));
  RM_RETURN_IF_ERROR(DecodeAttention(l, pdl_));
  RM_CU(tk::DecodeGemv(DecodeInput::kPlain, attn_, nullptr, eps, At(w, off_.wo),
                       x, mid_, batch_, qw_, h_, scratch_, pdl_, s_));
  RM_CU(tk::DecodeGemv(DecodeInput::kRmsNorm, mid_, At(w, off_.g2), eps,
                       At(w, off_.wgu), nullptr, gu_, batch_, h_, 2 * f_,
                       scratch_, pdl_, s_));
  RM_CU(tk::DecodeGemv(DecodeInput::kSwiglu, gu_, nullptr, eps, At(w, off_.wd),
                       mid_, x2, batch_, f_, h_, scratch_, pdl_, s_));
  return absl::OkStatus();
}

absl::Status CudaInferenceEngine::DecodeAttention(int l, bool pdl) {
  RM_CU(tk::DecodeAttention(qkv_, w3_, kcache_[l], vcache_[l], attn_, qw_,
                            batch_, shape_.heads, shape_.kv_heads, hd_, cap_,
                            cos_, sin_, pos_, scale_, scratch_, pdl, s_));
  return absl::OkStatus();
}

absl::Status CudaInferenceEngine::DecodeStep() {
  if (fused_ && fold_) {  // one launch: the step makes its input
    RM_CU(tk::DecodeStep(step_, step_state_, nullptr, y_, pos_, true, s_));
    return absl::OkStatus();
  }
  RM_CU(tk::SequenceInputs(x_, batch_, 1, h_, cap_, 0, pos_, s_));
  if (fused_) {
    RM_CU(tk::DecodeStep(step_, step_state_, x_, y_, pos_, true, s_));
    return absl::OkStatus();
  }
  void *in = x_, *other = x2_;
  for (int l = 0; l < shape_.layers; ++l) {
    if (gemv_) {
      RM_RETURN_IF_ERROR(DecodeLayer(l, in, other));
    } else {
      RM_RETURN_IF_ERROR(Layer(l, batch_, in, other,
                               [&] { return DecodeAttention(l, false); }));
    }
    std::swap(in, other);
  }
  RM_CU(tk::RmsNormForward(in, At(w_, shape_.layers * off_.size), y_, rinv_,
                           batch_, h_, static_cast<float>(shape_.norm_eps),
                           s_));
  RM_CU(tk::Advance(pos_, s_));
  return absl::OkStatus();
}

absl::Status CudaInferenceEngine::CapturedStep() {
  RM_CU(cudaEventRecordWithFlags(step_start_, s_, cudaEventRecordExternal));
  RM_RETURN_IF_ERROR(DecodeStep());
  RM_CU(cudaEventRecordWithFlags(step_end_, s_, cudaEventRecordExternal));
  return absl::OkStatus();
}

// The first step runs directly (cuBLASLt picks its algorithms outside any
// capture) and is then captured, between two event records of its own (the
// device's time of the step); later steps replay the graph.
absl::StatusOr<double> CudaInferenceEngine::Decode(std::vector<float>* out) {
  RM_CU(cudaSetDevice(device_));
  RM_CU(cudaEventRecord(start_, s_));
  const bool replay = exec_ != nullptr;
  if (replay) {
    RM_CU(cudaGraphLaunch(exec_, s_));
  } else {
    RM_RETURN_IF_ERROR(DecodeStep());
  }
  RM_CU(cudaEventRecord(end_, s_));
  RM_CU(cudaEventSynchronize(end_));
  float ms = 0;
  RM_CU(cudaEventElapsedTime(&ms, start_, end_));
  device_s_ = -1;
  if (replay) {
    // An auxiliary figure: where the graph's events cannot be timed, the
    // step stays untimed on the device (and the error is cleared).
    float step_ms = 0;
    if (cudaEventElapsedTime(&step_ms, step_start_, step_end_) == cudaSuccess) {
      device_s_ = step_ms / 1e3;
    } else {
      cudaGetLastError();
    }
  } else {
    RM_CU(cudaStreamBeginCapture(s_, cudaStreamCaptureModeThreadLocal));
    absl::Status captured = CapturedStep();
    cudaGraph_t graph = nullptr;
    const cudaError_t ended = cudaStreamEndCapture(s_, &graph);
    RM_RETURN_IF_ERROR(captured);
    RM_CU(ended);
    graph_ = graph;
    RM_CU(cudaGraphInstantiate(&exec_, graph_, 0));
  }
  if (out != nullptr) {
    std::vector<__nv_bfloat16> rows(batch_ * h_);
    RM_CU(cudaMemcpy(rows.data(), y_, rows.size() * 2, cudaMemcpyDeviceToHost));
    out->resize(rows.size());
    for (size_t i = 0; i < rows.size(); ++i)
      (*out)[i] = __bfloat162float(rows[i]);
  }
  return ms / 1e3;
}

}  // namespace

absl::StatusOr<std::unique_ptr<InferenceEngine>> NewCudaInferenceEngine(
    int device, int ranks) {
  if (ranks != 1) {
    return absl::UnimplementedError(
        "the CUDA inference engine runs on one GPU so far");
  }
  return std::unique_ptr<InferenceEngine>(
      std::make_unique<CudaInferenceEngine>(device));
}

}  // namespace ringmaster
