// CudaTrainer's implementation, shared by its files (internal to
// backends/cuda): cuda_trainer.cc (set-up, cuBLASLt GEMMs and their
// autotuning, buffers, Prepare) and cuda_trainer_step.cc (the step: forward,
// backward, bucketed all-reduce or copy-engine reduction, the optimizer,
// both schedules).
#ifndef RINGMASTER_BACKENDS_CUDA_CUDA_TRAINER_IMPL_H_
#define RINGMASTER_BACKENDS_CUDA_CUDA_TRAINER_IMPL_H_

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
#include "backends/cuda/cuda_trainer.h"
#include "backends/cuda/nccl_comm.h"
#include "core/names.h"
#include "core/placement.h"
#include "core/stats.h"
#include "core/training.h"
#include "kernels/train_kernels.h"

namespace ringmaster {

inline double Now() { return MonotonicSeconds(); }

// Seconds between two completed events.
inline double Seconds(cudaEvent_t a, cudaEvent_t b) {
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
  ~Impl();

  void Free();

  absl::Status Init();

  // The NCCL communicator, on first need (collective: every rank prepares
  // the same case). comm: ce needs none.
  absl::Status EnsureNccl();

  absl::Status MakeGemm(Gemm* g, cublasOperation_t ta, cublasOperation_t tb,
                        int64_t m, int64_t n, int64_t k, int64_t rows_a,
                        int64_t cols_a, int64_t rows_b, int64_t cols_b);

  // With the leading dimensions of B and D given (sub-matrices).
  absl::Status MakeGemmLd(Gemm* g, cublasOperation_t ta, cublasOperation_t tb,
                          int64_t m, int64_t n, int64_t k, int64_t rows_a,
                          int64_t cols_a, int64_t rows_b, int64_t cols_b,
                          int64_t ld_b, int64_t ld_d);

  // Times each of the heuristic's candidates on the real operands (the
  // outputs are scratch until the first step writes them) and keeps the
  // fastest: the median of kReps runs after one warm-up each.
  absl::Status Autotune(Gemm* g, const void* a, const void* b, void* d);

  absl::Status Run(const Gemm& g, const void* a, const void* b, void* d);

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
  absl::Status SetPrecision(v1::DataType dtype);

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

  absl::Status Prepare(const v1::Case& c, int64_t batch, int64_t first_sample);

  // At least n events in *v (timing or not); kept across cases.
  absl::Status Events(std::vector<cudaEvent_t>* v, size_t n, bool timing);

  // comm: ce. Collective: both ranks map each other's gradients and flags.
  absl::Status PrepareCe();

  // A range of the gradients through the copy engines: each rank owns a
  // half. Read the peer's copy of my half (CE), add it into mine (a
  // kernel), then read the peer's reduced half (CE); flags in each other's
  // memory (slot `slot`, three per range) order it.
  absl::Status CeReduce(int64_t off, int64_t count, int slot);

  // Reduces gradient elements [off, off + count) once the compute stream
  // has produced them; `slot` indexes the ready event and the CE flags.
  absl::Status ReduceRange(int64_t off, int64_t count, int slot);

  absl::Status AllReduceBucket(size_t k);

  // The optimizer on gradient elements [off, off + count) (after their
  // all-reduce: the mean is scale * sum, the loss scale divided out).
  absl::Status Update(int64_t off, int64_t count, cudaStream_t s);

  // schedule: pipelined. Bucket b's gradients exist (compute stream): on
  // the communication stream, all-reduce them, update their layers, and
  // mark both; the last bucket closes the step's communication span.
  absl::Status ReduceAndUpdate(size_t b, int par);

  // schedule: pipelined. Queues a step's forward on the compute stream:
  // each bucket's first layer waits for the previous step's update of that
  // bucket (timed by events around the wait).
  absl::Status QueueForward();

  // Layer l's forward on the compute stream: Z = W'^T A, A' = GELU(Z).
  absl::Status ForwardLayer(int l);

  // Before backward writes bucket b's gradients: the previous step's
  // reduction has let go of them.
  absl::Status GradientsFree(int b);

  // schedule: pipelined. The loss, backward (upper layers in DDP's order,
  // then the lower layers' input-gradient chain, then their weight
  // gradients lowest first), each bucket reduced and updated as soon as it
  // exists; then the next step's forward is queued and this step ends when
  // the compute stream reaches it. The step is the time between the two
  // forwards' starts; what its forward waited for the previous step's
  // updates is returned as communication.
  absl::StatusOr<StepTiming> StepPipelined();

  absl::StatusOr<StepTiming> Step();
  // Of the gradient entries (reduced, as the optimizer used them), the
  // fraction exactly zero.
  absl::StatusOr<double> ZeroFraction();
};

}  // namespace ringmaster

#endif  // RINGMASTER_BACKENDS_CUDA_CUDA_TRAINER_IMPL_H_
