#include "backends/cuda/cuda_trainer_impl.h"

namespace ringmaster {

CudaTrainer::Impl::~Impl() {
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

void CudaTrainer::Impl::Free() {
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

absl::Status CudaTrainer::Impl::Init() {
  rank_ = control.rank();
  size_ = control.size();
  RM_CU(cudaSetDevice(device_));
  int lo = 0, hi = 0;
  RM_CU(cudaDeviceGetStreamPriorityRange(&lo, &hi));
  RM_CU(cudaStreamCreateWithPriority(&compute_, cudaStreamNonBlocking, lo));
  // The all-reduce's kernels are scheduled ahead of backward's when both
  // wait.
  RM_CU(cudaStreamCreateWithPriority(&comm_stream_, cudaStreamNonBlocking, hi));
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
absl::Status CudaTrainer::Impl::EnsureNccl() {
  if (size_ < 2 || comm_ != nullptr) return absl::OkStatus();
  return CreateNcclComm(control, "", &comm_);
}

absl::Status CudaTrainer::Impl::MakeGemm(Gemm* g, cublasOperation_t ta,
                                         cublasOperation_t tb, int64_t m,
                                         int64_t n, int64_t k, int64_t rows_a,
                                         int64_t cols_a, int64_t rows_b,
                                         int64_t cols_b) {
  return MakeGemmLd(g, ta, tb, m, n, k, rows_a, cols_a, rows_b, cols_b, rows_b,
                    m);
}

// With the leading dimensions of B and D given (sub-matrices).
absl::Status CudaTrainer::Impl::MakeGemmLd(Gemm* g, cublasOperation_t ta,
                                           cublasOperation_t tb, int64_t m,
                                           int64_t n, int64_t k, int64_t rows_a,
                                           int64_t cols_a, int64_t rows_b,
                                           int64_t cols_b, int64_t ld_b,
                                           int64_t ld_d) {
  RM_LT(cublasLtMatmulDescCreate(&g->desc, compute_type_, CUDA_R_32F));
  RM_LT(cublasLtMatmulDescSetAttribute(g->desc, CUBLASLT_MATMUL_DESC_TRANSA,
                                       &ta, sizeof ta));
  RM_LT(cublasLtMatmulDescSetAttribute(g->desc, CUBLASLT_MATMUL_DESC_TRANSB,
                                       &tb, sizeof tb));
  RM_LT(cublasLtMatrixLayoutCreate(&g->a, data_type_, rows_a, cols_a, rows_a));
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
absl::Status CudaTrainer::Impl::Autotune(Gemm* g, const void* a, const void* b,
                                         void* d) {
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
    return absl::InternalError(
        absl::StrFormat("rank %d: no cuBLASLt candidate algorithm ran", rank_));
  }
  g->algo = g->candidates[best];
  g->chosen = static_cast<int>(best);
  g->gain = std::isinf(median[0]) ? 0 : 1 - median[best] / median[0];
  return absl::OkStatus();
}

absl::Status CudaTrainer::Impl::Run(const Gemm& g, const void* a, const void* b,
                                    void* d) {
  const float alpha = 1.0f, beta = 0.0f;
  RM_LT(cublasLtMatmul(lt_, g.desc, &alpha, a, g.a, b, g.b, &beta, d, g.d, d,
                       g.d, &g.algo, workspace_, workspace_size_, compute_));
  return absl::OkStatus();
}

// The case's precision (fields above).
absl::Status CudaTrainer::Impl::SetPrecision(v1::DataType dtype) {
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

absl::Status CudaTrainer::Impl::Prepare(const v1::Case& c, int64_t batch,
                                        int64_t first_sample) {
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
  deferred_ = spec_.deferred_layers() > 0 ? std::min(spec_.deferred_layers(), L)
                                          : std::max(1, L / 2);
  buckets_ = pipelined_
                 ? PipelinedBuckets(L, deferred_, Layer(), spec_.bucket_bytes())
                 : GradientBuckets(L, Layer(), spec_.bucket_bytes());
  split_first_ = !pipelined_ && size_ > 1 && spec_.overlap() &&
                 buckets_.back().size() == 1 && H % (8 * kSplit) == 0;
  bucket_of_.assign(L, 0);
  for (size_t b = 0; b < buckets_.size(); ++b) {
    for (int l : buckets_[b]) bucket_of_[l] = static_cast<int>(b);
  }
  if (auto s = Events(&updated_, buckets_.size(), false); !s.ok()) return s;
  if (auto s = Events(&grads_free_, buckets_.size(), false); !s.ok()) return s;
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
    if (auto s = MakeGemmLd(&dw_chunk_, CUBLAS_OP_N, CUBLAS_OP_T, H, H / kSplit,
                            B, H, B, H / kSplit, B, /*ld_b=*/H, /*ld_d=*/H);
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
  for (auto [g, a, b, d] : {std::tuple<Gemm*, const void*, const void*, void*>{
                                &fwd_, W(0), a_[0], z_[0]},
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
absl::Status CudaTrainer::Impl::Events(std::vector<cudaEvent_t>* v, size_t n,
                                       bool timing) {
  while (v->size() < n) {
    cudaEvent_t e;
    RM_CU(cudaEventCreateWithFlags(
        &e, timing ? cudaEventDefault : cudaEventDisableTiming));
    v->push_back(e);
  }
  return absl::OkStatus();
}

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
