#include "backends/cuda/cuda_trainer.h"

#include <cublasLt.h>
#include <cuda_runtime.h>
#include <nccl.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/nccl_comm.h"
#include "core/names.h"
#include "core/placement.h"
#include "core/stats.h"
#include "core/training.h"
#include "kernels/train_kernels.h"

namespace ringmaster {
namespace {

double Now() { return MonotonicSeconds(); }

// Seconds between two completed events.
double Seconds(cudaEvent_t a, cudaEvent_t b) {
  float ms = 0;
  cudaEventElapsedTime(&ms, a, b);
  return ms / 1e3;
}

// Errors name the call, file:line and this rank.
#define RM_CU(expr) RM_CUDA(expr, rank_)
#define RM_LT(expr) RM_CUBLAS(expr, rank_)
#define RM_NC(expr) RM_NCCL(expr, rank_)

// One cuBLASLt GEMM configuration (the storage type in and out, fp32
// accumulation; tf32 tensor cores for dtype tf32).
struct Gemm {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};
  // The heuristic's candidates, best first; `chosen` indexes the one in
  // use after Autotune (0 = the heuristic's first), `gain` its time saved.
  std::vector<cublasLtMatmulAlgo_t> candidates;
  int chosen = 0;
  double gain = 0;
  void Destroy() {
    if (desc) cublasLtMatmulDescDestroy(desc);
    for (auto* l : {&a, &b, &d}) {
      if (*l) cublasLtMatrixLayoutDestroy(*l);
      *l = nullptr;
    }
    desc = nullptr;
  }
};

}  // namespace

struct CudaTrainer::Impl {
  Control& control;
  int rank_ = 0, size_ = 1, device_ = 0;
  ncclComm_t comm_ = nullptr;
  cudaStream_t compute_ = nullptr, comm_stream_ = nullptr;
  cublasLtHandle_t lt_ = nullptr;
  void* workspace_ = nullptr;
  size_t workspace_size_ = 64ull << 20;

  v1::TrainSpec spec_;
  int64_t batch_ = 0;
  int step_ = 0;
  // The precision: storage type, its bytes, cuBLASLt's data and compute
  // types, NCCL's type; fp32 master weights (16-bit types, optional) and
  // the loss scale (the optimizer divides it out again).
  TrainType type_ = TrainType::kBFloat16;
  size_t elem_ = 2;
  cudaDataType_t data_type_ = CUDA_R_16BF;
  cublasComputeType_t compute_type_ = CUBLAS_COMPUTE_32F;
  ncclDataType_t nccl_type_ = ncclBfloat16;
  float* master_ = nullptr;
  float loss_scale_ = 1.0f;
  void* w_ = nullptr;
  void* g_ = nullptr;
  float* m_ = nullptr;
  float* v_ = nullptr;
  std::vector<void*> a_, z_;
  void* da_ = nullptr;
  void* dz_ = nullptr;
  double* loss_ = nullptr;
  unsigned long long* zeros_ = nullptr;  // GradientZeroFraction's count
  Gemm fwd_, dw_, dx_;
  std::vector<std::vector<int>> buckets_;
  cudaEvent_t start_ = nullptr, bwd_end_ = nullptr, joined_ = nullptr,
              end_ = nullptr, comm_first_ = nullptr;
  std::vector<cudaEvent_t> bucket_ready_;
  cudaEvent_t comm_done_ = nullptr;

  // comm: ce (2 GPUs of one host): the peer's gradients and flags mapped
  // through CUDA IPC, a scratch half-bucket, a step counter for the flags.
  bool ce_ = false;
  bool ce_same_gpu_ = false;
  void* scratch_ = nullptr;
  int* flags_ =
      nullptr;  // per bucket: ready, reduced, done (written by the peer)
  void* peer_g_ = nullptr;
  int* peer_flags_ = nullptr;
  int seq_ = 0;
  int last_slot_ = 0;
  bool comm_started_ = false;
  // The first layer's gradient comes last, with nothing after it to hide
  // its reduction behind: its dW GEMM runs in kSplit column chunks, each
  // reduced as soon as it exists (when that layer is a bucket of its own).
  static constexpr int kSplit = 4;
  // cuBLASLt algorithms tried per GEMM shape (Autotune).
  static constexpr int kCandidates = 8;
  bool split_first_ = false;
  Gemm dw_chunk_;

  // schedule: pipelined (StepPipelined). Buckets from PipelinedBuckets;
  // per bucket the event "its layers are updated" (the next forward waits
  // for it) and "its gradients may be overwritten" (the peer has read
  // them; the next backward waits for it). Per step parity: the event at
  // the start of the step's forward, and around each wait in that forward.
  bool pipelined_ = false;
  int deferred_ = 0;
  std::vector<int> bucket_of_;
  std::vector<cudaEvent_t> updated_, grads_free_;
  std::vector<cudaEvent_t> mark_, wait_pre_, wait_post_, comm_span_;
  std::vector<char> waited_;  // [parity * L + layer]
  int parity_ = 0;            // the parity of the step whose forward is next
  bool forward_queued_ = false;
  bool updates_pending_ = false;
  std::string dtype_name_ = "bfloat16";
  std::vector<cudaEvent_t> tune_;  // Autotune's timing events

  explicit Impl(Control& c) : control(c) {}
  ~Impl() {
    cudaSetDevice(device_);
    cudaDeviceSynchronize();
    Free();
    for (auto e : {start_, bwd_end_, joined_, end_, comm_first_, comm_done_}) {
      if (e) cudaEventDestroy(e);
    }
    for (auto* v : {&bucket_ready_, &updated_, &grads_free_, &mark_, &wait_pre_,
                    &wait_post_, &comm_span_, &tune_}) {
      for (auto e : *v) cudaEventDestroy(e);
    }
    if (comm_) ncclCommDestroy(comm_);
    if (lt_) cublasLtDestroy(lt_);
    cudaFree(workspace_);
    if (compute_) cudaStreamDestroy(compute_);
    if (comm_stream_) cudaStreamDestroy(comm_stream_);
  }

  void Free() {
    if (peer_g_) cudaIpcCloseMemHandle(peer_g_);
    if (peer_flags_) cudaIpcCloseMemHandle(peer_flags_);
    peer_g_ = nullptr;
    peer_flags_ = nullptr;
    cudaFree(scratch_);
    cudaFree(flags_);
    scratch_ = nullptr;
    flags_ = nullptr;
    for (Gemm* g : {&fwd_, &dw_, &dx_, &dw_chunk_}) g->Destroy();
    for (void* p : a_) cudaFree(p);
    for (void* p : z_) cudaFree(p);
    a_.clear();
    z_.clear();
    for (void** p : {&w_, &g_, &da_, &dz_}) {
      cudaFree(*p);
      *p = nullptr;
    }
    cudaFree(m_);
    cudaFree(v_);
    cudaFree(master_);
    cudaFree(loss_);
    cudaFree(zeros_);
    m_ = v_ = master_ = nullptr;
    loss_ = nullptr;
    zeros_ = nullptr;
  }

  absl::Status Init() {
    rank_ = control.rank();
    size_ = control.size();
    RM_CU(cudaSetDevice(device_));
    int lo = 0, hi = 0;
    RM_CU(cudaDeviceGetStreamPriorityRange(&lo, &hi));
    RM_CU(cudaStreamCreateWithPriority(&compute_, cudaStreamNonBlocking, lo));
    // The all-reduce's kernels are scheduled ahead of backward's when both
    // wait.
    RM_CU(
        cudaStreamCreateWithPriority(&comm_stream_, cudaStreamNonBlocking, hi));
    for (auto* e :
         {&start_, &bwd_end_, &joined_, &end_, &comm_first_, &comm_done_}) {
      RM_CU(cudaEventCreate(e));
    }
    RM_LT(cublasLtCreate(&lt_));
    RM_CU(cudaMalloc(&workspace_, workspace_size_));
    return absl::OkStatus();
  }

  // The NCCL communicator, on first need (collective: every rank prepares
  // the same case). comm: ce needs none.
  absl::Status EnsureNccl() {
    if (size_ < 2 || comm_ != nullptr) return absl::OkStatus();
    return CreateNcclComm(control, "", &comm_);
  }

  absl::Status MakeGemm(Gemm* g, cublasOperation_t ta, cublasOperation_t tb,
                        int64_t m, int64_t n, int64_t k, int64_t rows_a,
                        int64_t cols_a, int64_t rows_b, int64_t cols_b) {
    return MakeGemmLd(g, ta, tb, m, n, k, rows_a, cols_a, rows_b, cols_b,
                      rows_b, m);
  }

  // With the leading dimensions of B and D given (sub-matrices).
  absl::Status MakeGemmLd(Gemm* g, cublasOperation_t ta, cublasOperation_t tb,
                          int64_t m, int64_t n, int64_t k, int64_t rows_a,
                          int64_t cols_a, int64_t rows_b, int64_t cols_b,
                          int64_t ld_b, int64_t ld_d) {
    RM_LT(cublasLtMatmulDescCreate(&g->desc, compute_type_, CUDA_R_32F));
    RM_LT(cublasLtMatmulDescSetAttribute(g->desc, CUBLASLT_MATMUL_DESC_TRANSA,
                                         &ta, sizeof ta));
    RM_LT(cublasLtMatmulDescSetAttribute(g->desc, CUBLASLT_MATMUL_DESC_TRANSB,
                                         &tb, sizeof tb));
    RM_LT(
        cublasLtMatrixLayoutCreate(&g->a, data_type_, rows_a, cols_a, rows_a));
    RM_LT(cublasLtMatrixLayoutCreate(&g->b, data_type_, rows_b, cols_b, ld_b));
    RM_LT(cublasLtMatrixLayoutCreate(&g->d, data_type_, m, n, ld_d));
    cublasLtMatmulPreference_t pref;
    RM_LT(cublasLtMatmulPreferenceCreate(&pref));
    RM_LT(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_size_,
        sizeof workspace_size_));
    cublasLtMatmulHeuristicResult_t res[kCandidates];
    int found = 0;
    cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(
        lt_, g->desc, g->a, g->b, g->d, g->d, pref, kCandidates, res, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    if (st != CUBLAS_STATUS_SUCCESS || found == 0) {
      return absl::UnimplementedError(absl::StrFormat(
          "cuBLASLt has no %s algorithm for %dx%dx%d", dtype_name_, m, n, k));
    }
    g->candidates.clear();
    for (int i = 0; i < found; ++i) {
      if (res[i].state == CUBLAS_STATUS_SUCCESS)
        g->candidates.push_back(res[i].algo);
    }
    g->algo = g->candidates.empty() ? res[0].algo : g->candidates[0];
    g->chosen = 0;
    g->gain = 0;
    return absl::OkStatus();
  }

  // Times each of the heuristic's candidates on the real operands (the
  // outputs are scratch until the first step writes them) and keeps the
  // fastest: the median of kReps runs after one warm-up each.
  absl::Status Autotune(Gemm* g, const void* a, const void* b, void* d) {
    if (g->candidates.size() < 2 || spec_.gemm() == "heuristic")
      return absl::OkStatus();
    constexpr int kReps = 5;
    if (auto s = Events(&tune_, kReps + 1, true); !s.ok()) return s;
    const std::vector<cudaEvent_t>& ev = tune_;
    std::vector<double> median(g->candidates.size(), 0);
    for (size_t i = 0; i < g->candidates.size(); ++i) {
      g->algo = g->candidates[i];
      // A candidate the library offers but cannot run is never chosen.
      bool ran = Run(*g, a, b, d).ok();  // warm-up
      RM_CU(cudaEventRecord(ev[0], compute_));
      for (int r = 0; r < kReps && ran; ++r) {
        ran = Run(*g, a, b, d).ok();
        RM_CU(cudaEventRecord(ev[r + 1], compute_));
      }
      RM_CU(cudaStreamSynchronize(compute_));
      if (!ran) {
        median[i] = std::numeric_limits<double>::infinity();
        continue;
      }
      std::vector<double> t(kReps);
      for (int r = 0; r < kReps; ++r) t[r] = Seconds(ev[r], ev[r + 1]);
      median[i] = Median(std::move(t));
    }
    const size_t best =
        std::min_element(median.begin(), median.end()) - median.begin();
    if (std::isinf(median[best])) {
      return absl::InternalError(absl::StrFormat(
          "rank %d: no cuBLASLt candidate algorithm ran", rank_));
    }
    g->algo = g->candidates[best];
    g->chosen = static_cast<int>(best);
    g->gain = std::isinf(median[0]) ? 0 : 1 - median[best] / median[0];
    return absl::OkStatus();
  }

  absl::Status Run(const Gemm& g, const void* a, const void* b, void* d) {
    const float alpha = 1.0f, beta = 0.0f;
    RM_LT(cublasLtMatmul(lt_, g.desc, &alpha, a, g.a, b, g.b, &beta, d, g.d, d,
                         g.d, &g.algo, workspace_, workspace_size_, compute_));
    return absl::OkStatus();
  }

  void* W(int l) const {
    return static_cast<char*>(w_) + static_cast<int64_t>(l) * Layer();
  }
  void* G(int l) const {
    return static_cast<char*>(g_) + static_cast<int64_t>(l) * Layer();
  }
  int64_t Layer() const {
    return spec_.hidden() * spec_.hidden() * static_cast<int64_t>(elem_);
  }

  // The case's precision (fields above).
  absl::Status SetPrecision(v1::DataType dtype) {
    compute_type_ = CUBLAS_COMPUTE_32F;
    switch (dtype) {
      case v1::FLOAT32:
      case v1::TFLOAT32:
        type_ = TrainType::kFloat32;
        data_type_ = CUDA_R_32F;
        nccl_type_ = ncclFloat32;
        if (dtype == v1::TFLOAT32) compute_type_ = CUBLAS_COMPUTE_32F_FAST_TF32;
        break;
      case v1::FLOAT16:
        type_ = TrainType::kFloat16;
        data_type_ = CUDA_R_16F;
        nccl_type_ = ncclFloat16;
        break;
      case v1::BFLOAT16:
        type_ = TrainType::kBFloat16;
        data_type_ = CUDA_R_16BF;
        nccl_type_ = ncclBfloat16;
        break;
      default:
        return absl::UnimplementedError(absl::StrFormat(
            "the GPU trainer computes in float32, tf32, float16 or bfloat16, "
            "not %s",
            DataTypeName(dtype)));
    }
    elem_ = TrainTypeBytes(type_);
    dtype_name_ = std::string(DataTypeName(dtype));
    return absl::OkStatus();
  }

  // cudaMalloc; running out of memory is a skipped case, not an error.
  absl::Status Alloc(void** p, size_t bytes) {
    cudaError_t e = cudaMalloc(p, bytes);
    if (e == cudaErrorMemoryAllocation) {
      cudaGetLastError();
      size_t free_b = 0, total_b = 0;
      cudaMemGetInfo(&free_b, &total_b);
      return absl::UnimplementedError(absl::StrFormat(
          "out of memory: allocating %.2f GiB failed with %.2f GiB free",
          bytes / double(1 << 30), free_b / double(1 << 30)));
    }
    RM_CU(e);
    return absl::OkStatus();
  }
  template <typename T>
  absl::Status Alloc(T** p, size_t bytes) {
    void* v = nullptr;
    absl::Status s = Alloc(&v, bytes);
    *p = static_cast<T*>(v);
    return s;
  }

  absl::Status Prepare(const v1::Case& c, int64_t batch, int64_t first_sample) {
    if (auto s = SetPrecision(c.dtype()); !s.ok()) return s;
    RM_CU(cudaSetDevice(device_));
    RM_CU(cudaDeviceSynchronize());
    const bool had_peer = peer_g_ != nullptr;
    if (had_peer) {
      // Unmap the peer's memory, and let it unmap ours, before anyone frees.
      cudaIpcCloseMemHandle(peer_g_);
      cudaIpcCloseMemHandle(peer_flags_);
      peer_g_ = nullptr;
      peer_flags_ = nullptr;
      if (auto s = control.Barrier(); !s.ok()) return s;
    }
    Free();
    spec_ = c.train();
    batch_ = batch;
    step_ = 0;
    const int L = spec_.layers();
    const int64_t H = spec_.hidden(), B = batch;
    const bool adam = spec_.optimizer() == "adam";
    const bool master = spec_.master_weights() && elem_ < 4;
    // A float16 loss gradient of a unit output is 2 / (B H): subnormal at
    // these sizes. Auto: the power of two nearest B H / 64 (~1/32 then).
    loss_scale_ = static_cast<float>(spec_.loss_scale());
    if (loss_scale_ <= 0) {
      loss_scale_ =
          type_ == TrainType::kFloat16
              ? std::exp2(std::max(0.0, std::round(std::log2(B * H / 64.0))))
              : 1.0f;
    }
    // Memory: weights, gradients, (Adam moments), (master weights), L+1
    // activations, L pre-activations, two gradient buffers.
    const double need = 2.0 * L * Layer() + (adam ? 2.0 * L * H * H * 4 : 0) +
                        (master ? 1.0 * L * H * H * 4 : 0) +
                        (2.0 * L + 3) * B * H * elem_ + workspace_size_;
    size_t free_b = 0, total_b = 0;
    RM_CU(cudaMemGetInfo(&free_b, &total_b));
    if (need > 0.95 * free_b) {
      return absl::UnimplementedError(absl::StrFormat(
          "out of memory: the step needs %.1f GiB, %.1f GiB are free",
          need / (1 << 30), free_b / double(1 << 30)));
    }
    const size_t params = static_cast<size_t>(L) * H * H;
    std::vector<std::pair<void**, size_t>> allocs = {{&w_, L * Layer()},
                                                     {&g_, L * Layer()}};
    if (adam) {
      allocs.push_back({reinterpret_cast<void**>(&m_), params * 4});
      allocs.push_back({reinterpret_cast<void**>(&v_), params * 4});
    }
    if (master) {
      allocs.push_back({reinterpret_cast<void**>(&master_), params * 4});
    }
    a_.assign(L + 1, nullptr);
    z_.assign(L, nullptr);
    for (auto& p : a_) allocs.push_back({&p, B * H * elem_});
    for (auto& p : z_) allocs.push_back({&p, B * H * elem_});
    allocs.push_back({&da_, B * H * elem_});
    allocs.push_back({&dz_, B * H * elem_});
    allocs.push_back({reinterpret_cast<void**>(&loss_), sizeof(double)});
    allocs.push_back(
        {reinterpret_cast<void**>(&zeros_), sizeof(unsigned long long)});
    for (auto& [p, bytes] : allocs) {
      if (auto s = Alloc(p, bytes); !s.ok()) return s;
    }
    if (adam) {
      RM_CU(cudaMemset(m_, 0, params * 4));
      RM_CU(cudaMemset(v_, 0, params * 4));
    }
    RM_CU(LaunchTrainInitWeights(type_, w_, master_, L, H, compute_));
    RM_CU(LaunchTrainInitInputs(type_, a_[0], B, H, first_sample, compute_));
    // Column-major views: activations are H x B, weights (and gradients)
    // H_in x H_out, both with leading dimension H.
    // forward  Z = W'^T A        (m H, n B, k H)
    // dW       G = A dZ^T        (m H, n H, k B)
    // dA       dA = W' dZ        (m H, n B, k H)
    if (auto s = MakeGemm(&fwd_, CUBLAS_OP_T, CUBLAS_OP_N, H, B, H, H, H, H, B);
        !s.ok())
      return s;
    if (auto s = MakeGemm(&dw_, CUBLAS_OP_N, CUBLAS_OP_T, H, H, B, H, B, H, B);
        !s.ok())
      return s;
    if (auto s = MakeGemm(&dx_, CUBLAS_OP_N, CUBLAS_OP_N, H, B, H, H, H, H, B);
        !s.ok())
      return s;
    pipelined_ = spec_.schedule() == "pipelined" && !spec_.inference();
    deferred_ = spec_.deferred_layers() > 0
                    ? std::min(spec_.deferred_layers(), L)
                    : std::max(1, L / 2);
    buckets_ = pipelined_ ? PipelinedBuckets(L, deferred_, Layer(),
                                             spec_.bucket_bytes())
                          : GradientBuckets(L, Layer(), spec_.bucket_bytes());
    split_first_ = !pipelined_ && size_ > 1 && spec_.overlap() &&
                   buckets_.back().size() == 1 && H % (8 * kSplit) == 0;
    bucket_of_.assign(L, 0);
    for (size_t b = 0; b < buckets_.size(); ++b) {
      for (int l : buckets_[b]) bucket_of_[l] = static_cast<int>(b);
    }
    if (auto s = Events(&updated_, buckets_.size(), false); !s.ok()) return s;
    if (auto s = Events(&grads_free_, buckets_.size(), false); !s.ok())
      return s;
    if (auto s = Events(&mark_, 2, true); !s.ok()) return s;
    if (auto s = Events(&comm_span_, 4, true); !s.ok()) return s;
    if (auto s = Events(&wait_pre_, 2 * L, true); !s.ok()) return s;
    if (auto s = Events(&wait_post_, 2 * L, true); !s.ok()) return s;
    waited_.assign(2 * L, 0);
    parity_ = 0;
    forward_queued_ = false;
    updates_pending_ = false;
    if (split_first_) {
      // G[:, chunk] = A dZ[chunk, :]^T: dZ's rows o0..o1 (ld H), G's columns.
      if (auto s =
              MakeGemmLd(&dw_chunk_, CUBLAS_OP_N, CUBLAS_OP_T, H, H / kSplit, B,
                         H, B, H / kSplit, B, /*ld_b=*/H, /*ld_d=*/H);
          !s.ok()) {
        return s;
      }
    }
    while (bucket_ready_.size() < buckets_.size() + kSplit) {
      cudaEvent_t e;
      RM_CU(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
      bucket_ready_.push_back(e);
    }
    ce_ = spec_.comm() == "ce" && size_ > 1;
    seq_ = 0;
    if (ce_) {
      if (auto s = PrepareCe(); !s.ok()) return s;
    } else if (auto s = EnsureNccl(); !s.ok()) {
      return s;
    }
    // The GEMMs' algorithms, timed on this case's operands (dZ holds a
    // copy of the inputs meanwhile).
    RM_CU(cudaMemcpyAsync(dz_, a_[0], B * H * elem_, cudaMemcpyDeviceToDevice,
                          compute_));
    for (auto [g, a, b, d] :
         {std::tuple<Gemm*, const void*, const void*, void*>{&fwd_, W(0), a_[0],
                                                             z_[0]},
          {&dw_, a_[0], dz_, G(0)},
          {&dx_, W(0), dz_, da_}}) {
      if (auto s = Autotune(g, a, b, d); !s.ok()) return s;
    }
    if (split_first_) {
      if (auto s = Autotune(&dw_chunk_, a_[0], dz_, G(0)); !s.ok()) return s;
    }
    RM_CU(cudaStreamSynchronize(compute_));
    return absl::OkStatus();
  }

  // At least n events in *v (timing or not); kept across cases.
  absl::Status Events(std::vector<cudaEvent_t>* v, size_t n, bool timing) {
    while (v->size() < n) {
      cudaEvent_t e;
      RM_CU(cudaEventCreateWithFlags(
          &e, timing ? cudaEventDefault : cudaEventDisableTiming));
      v->push_back(e);
    }
    return absl::OkStatus();
  }

  // comm: ce. Collective: both ranks map each other's gradients and flags.
  absl::Status PrepareCe() {
    if (size_ != 2) {
      return absl::UnimplementedError(
          absl::StrFormat("comm: ce reduces between 2 GPUs of one host; this "
                          "group has %d ranks",
                          size_));
    }
    const int peer = 1 - rank_;
    char bus[32] = {};
    RM_CU(cudaDeviceGetPCIBusId(bus, sizeof bus, device_));
    const std::string host = HostName();
    auto ids = control.AllGatherStrings(host + "|" + bus);
    if (!ids.ok()) return ids.status();
    const std::string& other = (*ids)[peer];
    const std::string other_host = other.substr(0, other.find('|'));
    if (other_host != host) {
      return absl::UnimplementedError("comm: ce needs both GPUs on one host");
    }
    int peer_dev = -1, can = 0;
    if (cudaDeviceGetByPCIBusId(&peer_dev,
                                other.substr(other.find('|') + 1).c_str()) !=
        cudaSuccess) {
      cudaGetLastError();
      return absl::UnimplementedError(
          "comm: ce cannot find the peer's GPU on this host");
    }
    // Both ranks on one GPU (a check of the arithmetic where one GPU is
    // all there is): IPC within the device, no peer access needed.
    ce_same_gpu_ = peer_dev == device_;
    if (!ce_same_gpu_ &&
        (cudaDeviceCanAccessPeer(&can, device_, peer_dev) != cudaSuccess ||
         !can)) {
      cudaGetLastError();
      return absl::UnimplementedError(
          "comm: ce needs peer access between the two GPUs");
    }
    int64_t max_half = 0;
    for (const auto& b : buckets_) {
      int64_t count =
          static_cast<int64_t>(b.size()) * spec_.hidden() * spec_.hidden();
      max_half = std::max(max_half, count - count / 2);
    }
    if (auto s = Alloc(&scratch_, max_half * elem_); !s.ok()) return s;
    const size_t slots = buckets_.size() + kSplit;
    if (auto s = Alloc(&flags_, 3 * slots * sizeof(int)); !s.ok()) return s;
    RM_CU(cudaMemset(flags_, 0, 3 * slots * sizeof(int)));
    RM_CU(cudaDeviceSynchronize());
    cudaIpcMemHandle_t h[2];
    RM_CU(cudaIpcGetMemHandle(&h[0], g_));
    RM_CU(cudaIpcGetMemHandle(&h[1], flags_));
    auto all = control.AllGatherStrings(
        std::string(reinterpret_cast<char*>(h), sizeof h));
    if (!all.ok()) return all.status();
    cudaIpcMemHandle_t ph[2];
    std::memcpy(ph, (*all)[peer].data(), sizeof ph);
    RM_CU(
        cudaIpcOpenMemHandle(&peer_g_, ph[0], cudaIpcMemLazyEnablePeerAccess));
    void* pf = nullptr;
    RM_CU(cudaIpcOpenMemHandle(&pf, ph[1], cudaIpcMemLazyEnablePeerAccess));
    peer_flags_ = static_cast<int*>(pf);
    return absl::OkStatus();
  }

  // A range of the gradients through the copy engines: each rank owns a
  // half. Read the peer's copy of my half (CE), add it into mine (a
  // kernel), then read the peer's reduced half (CE); flags in each other's
  // memory (slot `slot`, three per range) order it.
  absl::Status CeReduce(int64_t off, int64_t count, int slot) {
    const int64_t half = count / 2;
    const int64_t mine_off = off + (rank_ == 0 ? 0 : half),
                  mine_len = rank_ == 0 ? half : count - half;
    const int64_t peer_off = off + (rank_ == 0 ? half : 0),
                  peer_len = count - mine_len;
    auto at = [&](void* base, int64_t elems) {
      return static_cast<char*>(base) + elems * elem_;
    };
    int* my_flags = flags_ + 3 * slot;
    int* their_flags = peer_flags_ + 3 * slot;
    RM_CU(LaunchSignal(their_flags + 0, seq_, comm_stream_));
    RM_CU(LaunchWaitFlag(my_flags + 0, seq_, comm_stream_));
    RM_CU(cudaMemcpyAsync(scratch_, at(peer_g_, mine_off), mine_len * elem_,
                          cudaMemcpyDeviceToDevice, comm_stream_));
    RM_CU(LaunchAdd(type_, at(g_, mine_off), scratch_, mine_len, comm_stream_));
    RM_CU(LaunchSignal(their_flags + 1, seq_, comm_stream_));
    RM_CU(LaunchWaitFlag(my_flags + 1, seq_, comm_stream_));
    RM_CU(cudaMemcpyAsync(at(g_, peer_off), at(peer_g_, peer_off),
                          peer_len * elem_, cudaMemcpyDeviceToDevice,
                          comm_stream_));
    RM_CU(LaunchSignal(their_flags + 2, seq_, comm_stream_));
    last_slot_ = slot;
    return absl::OkStatus();
  }

  // Reduces gradient elements [off, off + count) once the compute stream
  // has produced them; `slot` indexes the ready event and the CE flags.
  absl::Status ReduceRange(int64_t off, int64_t count, int slot) {
    RM_CU(cudaEventRecord(bucket_ready_[slot], compute_));
    RM_CU(cudaStreamWaitEvent(comm_stream_, bucket_ready_[slot], 0));
    if (!comm_started_) RM_CU(cudaEventRecord(comm_first_, comm_stream_));
    comm_started_ = true;
    if (ce_) return CeReduce(off, count, slot);
    void* p = static_cast<char*>(g_) + off * elem_;
    RM_NC(ncclAllReduce(p, p, count, nccl_type_, ncclSum, comm_, comm_stream_));
    return absl::OkStatus();
  }

  absl::Status AllReduceBucket(size_t k) {
    const std::vector<int>& b = buckets_[k];
    const int64_t hh = spec_.hidden() * spec_.hidden();
    // Backward order: the bucket's last layer is its lowest.
    return ReduceRange(static_cast<int64_t>(b.back()) * hh,
                       static_cast<int64_t>(b.size()) * hh,
                       static_cast<int>(k));
  }

  // The optimizer on gradient elements [off, off + count) (after their
  // all-reduce: the mean is scale * sum, the loss scale divided out).
  absl::Status Update(int64_t off, int64_t count, cudaStream_t s) {
    const float scale = 1.0f / (static_cast<float>(size_) * loss_scale_);
    const float lr = static_cast<float>(spec_.lr());
    void* w = static_cast<char*>(w_) + off * elem_;
    const void* g = static_cast<const char*>(g_) + off * elem_;
    float* master = master_ ? master_ + off : nullptr;
    if (spec_.optimizer() == "adam") {
      const float c1 = 1.0f - std::pow(0.9f, step_),
                  c2 = 1.0f - std::pow(0.999f, step_);
      RM_CU(LaunchAdam(type_, w, master, g, m_ + off, v_ + off, count, lr,
                       scale, c1, c2, s));
    } else {
      RM_CU(LaunchSgd(type_, w, master, g, count, lr, scale, s));
    }
    return absl::OkStatus();
  }

  // schedule: pipelined. Bucket b's gradients exist (compute stream): on
  // the communication stream, all-reduce them, update their layers, and
  // mark both; the last bucket closes the step's communication span.
  absl::Status ReduceAndUpdate(size_t b, int par) {
    const std::vector<int>& layers = buckets_[b];
    const int64_t hh = spec_.hidden() * spec_.hidden();
    const int lo = *std::min_element(layers.begin(), layers.end());
    const int64_t off = lo * hh,
                  count = static_cast<int64_t>(layers.size()) * hh;
    RM_CU(cudaEventRecord(bucket_ready_[b], compute_));
    RM_CU(cudaStreamWaitEvent(comm_stream_, bucket_ready_[b], 0));
    if (b == 0) RM_CU(cudaEventRecord(comm_span_[2 * par], comm_stream_));
    if (size_ > 1) {
      if (ce_) {
        if (auto s = CeReduce(off, count, static_cast<int>(b)); !s.ok())
          return s;
      } else {
        void* p = static_cast<char*>(g_) + off * elem_;
        RM_NC(ncclAllReduce(p, p, count, nccl_type_, ncclSum, comm_,
                            comm_stream_));
      }
    }
    if (auto s = Update(off, count, comm_stream_); !s.ok()) return s;
    RM_CU(cudaEventRecord(updated_[b], comm_stream_));
    if (b + 1 == buckets_.size()) {
      RM_CU(cudaEventRecord(comm_span_[2 * par + 1], comm_stream_));
    }
    // comm: ce: the peer reads our reduced half until it signals "done".
    if (ce_) {
      RM_CU(LaunchWaitFlag(flags_ + 3 * b + 2, seq_, comm_stream_));
    }
    RM_CU(cudaEventRecord(grads_free_[b], comm_stream_));
    return absl::OkStatus();
  }

  // schedule: pipelined. Queues a step's forward on the compute stream:
  // each bucket's first layer waits for the previous step's update of that
  // bucket (timed by events around the wait).
  absl::Status QueueForward() {
    const int L = spec_.layers();
    const int par = parity_;
    RM_CU(cudaEventRecord(mark_[par], compute_));
    for (int l = 0; l < L; ++l) {
      const int b = bucket_of_[l];
      const auto& layers = buckets_[b];
      const bool first = l == *std::min_element(layers.begin(), layers.end());
      waited_[par * L + l] = updates_pending_ && first;
      if (waited_[par * L + l]) {
        RM_CU(cudaEventRecord(wait_pre_[par * L + l], compute_));
        RM_CU(cudaStreamWaitEvent(compute_, updated_[b], 0));
        RM_CU(cudaEventRecord(wait_post_[par * L + l], compute_));
      }
      if (auto s = ForwardLayer(l); !s.ok()) return s;
    }
    return absl::OkStatus();
  }

  // Layer l's forward on the compute stream: Z = W'^T A, A' = GELU(Z).
  absl::Status ForwardLayer(int l) {
    if (auto s = Run(fwd_, W(l), a_[l], z_[l]); !s.ok()) return s;
    RM_CU(LaunchGeluForward(type_, z_[l], a_[l + 1], batch_ * spec_.hidden(),
                            compute_));
    return absl::OkStatus();
  }

  // Before backward writes bucket b's gradients: the previous step's
  // reduction has let go of them.
  absl::Status GradientsFree(int b) {
    if (updates_pending_)
      RM_CU(cudaStreamWaitEvent(compute_, grads_free_[b], 0));
    return absl::OkStatus();
  }

  // schedule: pipelined. The loss, backward (upper layers in DDP's order,
  // then the lower layers' input-gradient chain, then their weight
  // gradients lowest first), each bucket reduced and updated as soon as it
  // exists; then the next step's forward is queued and this step ends when
  // the compute stream reaches it. The step is the time between the two
  // forwards' starts; what its forward waited for the previous step's
  // updates is returned as communication.
  absl::StatusOr<StepTiming> StepPipelined() {
    const int L = spec_.layers();
    const int64_t H = spec_.hidden(), B = batch_, n = B * H;
    ++seq_;
    ++step_;
    const int par = parity_;
    if (!forward_queued_) {
      if (auto s = QueueForward(); !s.ok()) return s;
    }
    RM_CU(cudaMemsetAsync(loss_, 0, sizeof(double), compute_));
    RM_CU(LaunchLossGrad(type_, a_[L], da_, n, static_cast<double>(n),
                         loss_scale_, loss_, compute_));
    auto last_of = [&](int l) {  // l completes its bucket (production order)
      return buckets_[bucket_of_[l]].back() == l;
    };
    auto first_of = [&](int l) { return buckets_[bucket_of_[l]].front() == l; };
    for (int l = L - 1; l >= deferred_; --l) {
      RM_CU(LaunchGeluBackward(type_, da_, z_[l], dz_, n, compute_));
      if (first_of(l)) {
        if (auto s = GradientsFree(bucket_of_[l]); !s.ok()) return s;
      }
      if (auto s = Run(dw_, a_[l], dz_, G(l)); !s.ok()) return s;
      if (l > 0) {
        if (auto s = Run(dx_, W(l), dz_, da_); !s.ok()) return s;
      }
      // After dX: the update rewrites W(l).
      if (last_of(l)) {
        if (auto s = ReduceAndUpdate(bucket_of_[l], par); !s.ok()) return s;
      }
    }
    // The lower layers: dZ in place of Z (Z is dead once dZ exists), the
    // input gradients down to layer 1, then the weight gradients.
    for (int l = deferred_ - 1; l >= 0; --l) {
      RM_CU(LaunchGeluBackward(type_, da_, z_[l], z_[l], n, compute_));
      if (l > 0) {
        if (auto s = Run(dx_, W(l), z_[l], da_); !s.ok()) return s;
      }
    }
    for (int l = 0; l < deferred_; ++l) {
      if (first_of(l)) {
        if (auto s = GradientsFree(bucket_of_[l]); !s.ok()) return s;
      }
      if (auto s = Run(dw_, a_[l], z_[l], G(l)); !s.ok()) return s;
      if (last_of(l)) {
        if (auto s = ReduceAndUpdate(bucket_of_[l], par); !s.ok()) return s;
      }
    }
    updates_pending_ = true;
    parity_ = 1 - par;
    if (auto s = QueueForward(); !s.ok()) return s;  // the next step's
    forward_queued_ = true;
    RM_CU(cudaEventSynchronize(mark_[parity_]));
    StepTiming t;
    t.pipelined = true;
    t.backward_end_at = t.comm_done_at = Now();
    double loss = 0;
    RM_CU(cudaMemcpy(&loss, loss_, sizeof loss, cudaMemcpyDeviceToHost));
    t.step_s = Seconds(mark_[par], mark_[parity_]);
    double waits = 0;
    for (int l = 0; l < L; ++l) {
      if (waited_[par * L + l]) {
        waits += Seconds(wait_pre_[par * L + l], wait_post_[par * L + l]);
      }
    }
    t.comm_in_backward_s = std::min(waits, t.step_s);
    t.compute_s = t.step_s - t.comm_in_backward_s;
    // The previous step's reduction span (this one's is still running).
    const int prev = parity_;
    if (step_ > 1 && cudaEventQuery(comm_span_[2 * prev + 1]) == cudaSuccess) {
      t.comm_busy_s = Seconds(comm_span_[2 * prev], comm_span_[2 * prev + 1]);
    }
    cudaGetLastError();  // a not-ready query is not an error
    t.loss = loss / static_cast<double>(n);
    return t;
  }

  absl::StatusOr<StepTiming> Step() {
    RM_CU(cudaSetDevice(device_));
    if (pipelined_) return StepPipelined();
    const int L = spec_.layers();
    const int64_t H = spec_.hidden(), B = batch_, n = B * H;
    StepTiming t;
    RM_CU(cudaMemsetAsync(loss_, 0, sizeof(double), compute_));
    ++seq_;
    const double host_start = Now();
    RM_CU(cudaEventRecord(start_, compute_));
    for (int l = 0; l < L; ++l) {
      if (auto s = ForwardLayer(l); !s.ok()) return s;
    }
    RM_CU(LaunchLossGrad(type_, a_[L], da_, n, static_cast<double>(n),
                         loss_scale_, loss_, compute_));
    if (spec_.inference()) {  // forward only: no backward, reduction or update
      RM_CU(cudaEventRecord(end_, compute_));
      RM_CU(cudaEventSynchronize(end_));
      double loss = 0;
      RM_CU(cudaMemcpy(&loss, loss_, sizeof loss, cudaMemcpyDeviceToHost));
      float ms = 0;
      RM_CU(cudaEventElapsedTime(&ms, start_, end_));
      t.step_s = t.compute_s = ms / 1e3;
      t.backward_end_at = t.comm_done_at = host_start + t.step_s;
      t.loss = loss / static_cast<double>(n);
      return t;
    }
    const bool dp = size_ > 1;
    size_t next = 0;
    comm_started_ = false;
    for (int l = L - 1; l >= 0; --l) {
      RM_CU(LaunchGeluBackward(type_, da_, z_[l], dz_, n, compute_));
      if (l == 0 && split_first_) {
        const int64_t cols = H / kSplit;
        for (int j = 0; j < kSplit; ++j) {
          void* dz = static_cast<char*>(dz_) +
                     j * cols * elem_;  // rows j*cols.. of dZ
          void* g =
              static_cast<char*>(G(0)) + j * cols * H * elem_;  // columns of G
          if (auto s = Run(dw_chunk_, a_[0], dz, g); !s.ok()) return s;
          if (auto s = ReduceRange(j * cols * H, cols * H,
                                   static_cast<int>(buckets_.size()) + j);
              !s.ok()) {
            return s;
          }
        }
        next = buckets_.size();  // the first layer's bucket is done in chunks
        continue;
      }
      if (auto s = Run(dw_, a_[l], dz_, G(l)); !s.ok()) return s;
      if (l > 0) {
        if (auto s = Run(dx_, W(l), dz_, da_); !s.ok()) return s;
      }
      if (dp && spec_.overlap()) {
        while (next < buckets_.size() && buckets_[next].back() == l) {
          if (auto s = AllReduceBucket(next); !s.ok()) return s;
          ++next;
        }
      }
    }
    RM_CU(cudaEventRecord(bwd_end_, compute_));
    if (dp) {
      while (next < buckets_.size()) {
        if (auto s = AllReduceBucket(next); !s.ok()) return s;
        ++next;
      }
      // comm: ce: the peer has finished reading our gradients (its signals
      // come in bucket order) before our next backward overwrites them.
      if (ce_)
        RM_CU(LaunchWaitFlag(flags_ + 3 * last_slot_ + 2, seq_, comm_stream_));
      RM_CU(cudaEventRecord(comm_done_, comm_stream_));
      RM_CU(cudaStreamWaitEvent(compute_, comm_done_, 0));
    }
    RM_CU(cudaEventRecord(joined_, compute_));
    ++step_;
    if (auto s = Update(0, L * H * H, compute_); !s.ok()) return s;
    RM_CU(cudaEventRecord(end_, compute_));
    RM_CU(cudaEventSynchronize(end_));
    double loss = 0;
    RM_CU(cudaMemcpy(&loss, loss_, sizeof loss, cudaMemcpyDeviceToHost));
    t.step_s = Seconds(start_, end_);
    const double to_bwd = Seconds(start_, bwd_end_),
                 to_joined = Seconds(start_, joined_);
    t.compute_s = to_bwd + (t.step_s - to_joined);
    t.backward_end_at = host_start + to_bwd;
    t.comm_done_at = host_start + to_joined;
    t.comm_busy_s = dp ? Seconds(comm_first_, comm_done_) : 0;
    t.loss = loss / static_cast<double>(n);
    return t;
  }
  // Of the gradient entries (reduced, as the optimizer used them), the
  // fraction exactly zero.
  absl::StatusOr<double> ZeroFraction() {
    if (g_ == nullptr) return absl::FailedPreconditionError("no case prepared");
    RM_CU(cudaSetDevice(device_));
    // Every stream's work (a pipelined step's last reductions) first.
    RM_CU(cudaDeviceSynchronize());
    const int64_t n =
        static_cast<int64_t>(spec_.layers()) * spec_.hidden() * spec_.hidden();
    RM_CU(cudaMemsetAsync(zeros_, 0, sizeof *zeros_, compute_));
    RM_CU(LaunchCountZeros(type_, g_, n, zeros_, compute_));
    unsigned long long zeros = 0;
    RM_CU(cudaMemcpyAsync(&zeros, zeros_, sizeof zeros, cudaMemcpyDeviceToHost,
                          compute_));
    RM_CU(cudaStreamSynchronize(compute_));
    return n > 0 ? static_cast<double>(zeros) / static_cast<double>(n) : 0.0;
  }
};

CudaTrainer::CudaTrainer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CudaTrainer::~CudaTrainer() = default;

absl::StatusOr<std::unique_ptr<CudaTrainer>> CudaTrainer::Create(
    Control& control, int device) {
  auto impl = std::make_unique<Impl>(control);
  impl->device_ = device;
  if (absl::Status s = impl->Init(); !s.ok()) return s;
  return std::unique_ptr<CudaTrainer>(new CudaTrainer(std::move(impl)));
}
absl::Status CudaTrainer::Prepare(const v1::Case& c, int64_t batch,
                                  int64_t first) {
  return impl_->Prepare(c, batch, first);
}
absl::StatusOr<StepTiming> CudaTrainer::Step() { return impl_->Step(); }
absl::StatusOr<double> CudaTrainer::GradientZeroFraction() {
  return impl_->ZeroFraction();
}
std::string CudaTrainer::Describe() const {
  const Impl& m = *impl_;
  std::string precision = "cuBLASLt " + m.dtype_name_;
  if (m.master_) precision += ", fp32 master weights";
  if (m.loss_scale_ != 1.0f)
    precision += absl::StrFormat(", loss scale %g", m.loss_scale_);
  // Which of the heuristic's candidates Autotune kept (1 = its first) and
  // the time that saved, for the forward, dW and dX GEMMs.
  std::vector<std::string> picks;
  for (const Gemm* g : {&m.fwd_, &m.dw_, &m.dx_}) {
    picks.push_back(absl::StrFormat("%d/%d", g->chosen + 1,
                                    static_cast<int>(g->candidates.size())));
    if (g->gain > 0.005)
      picks.back() += absl::StrFormat(" -%.0f%%", 100 * g->gain);
  }
  precision +=
      ", algorithms fwd " + picks[0] + ", dW " + picks[1] + ", dX " + picks[2];
  const std::string sched =
      m.pipelined_
          ? absl::StrFormat("; pipelined, %d layers deferred", m.deferred_)
          : "";
  const char* comm =
      m.size_ < 2 ? "one GPU"
      : m.ce_     ? (m.ce_same_gpu_ ? "copy-engine bucket reduction, both "
                                      "ranks on one GPU"
                                    : "copy-engine bucket reduction over NVLink")
                  : "NCCL buckets on a high-priority stream";
  return absl::StrFormat("cuda (%s, %s%s)", precision, comm, sched);
}

}  // namespace ringmaster
