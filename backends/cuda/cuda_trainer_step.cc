// CudaTrainer: one training step (forward, backward, bucketed NCCL
// all-reduce or the copy engines' reduction, optimizer), DDP-ordered or
// pipelined into the next forward.
#include "backends/cuda/cuda_trainer_impl.h"

namespace ringmaster {

// comm: ce. Collective: both ranks map each other's gradients and flags.
absl::Status CudaTrainer::Impl::PrepareCe() {
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
  RM_CU(cudaIpcOpenMemHandle(&peer_g_, ph[0], cudaIpcMemLazyEnablePeerAccess));
  void* pf = nullptr;
  RM_CU(cudaIpcOpenMemHandle(&pf, ph[1], cudaIpcMemLazyEnablePeerAccess));
  peer_flags_ = static_cast<int*>(pf);
  return absl::OkStatus();
}

// A range of the gradients through the copy engines: each rank owns a
// half. Read the peer's copy of my half (CE), add it into mine (a
// kernel), then read the peer's reduced half (CE); flags in each other's
// memory (slot `slot`, three per range) order it.
absl::Status CudaTrainer::Impl::CeReduce(int64_t off, int64_t count, int slot) {
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
absl::Status CudaTrainer::Impl::ReduceRange(int64_t off, int64_t count,
                                            int slot) {
  RM_CU(cudaEventRecord(bucket_ready_[slot], compute_));
  RM_CU(cudaStreamWaitEvent(comm_stream_, bucket_ready_[slot], 0));
  if (!comm_started_) RM_CU(cudaEventRecord(comm_first_, comm_stream_));
  comm_started_ = true;
  if (ce_) return CeReduce(off, count, slot);
  void* p = static_cast<char*>(g_) + off * elem_;
  RM_NC(ncclAllReduce(p, p, count, nccl_type_, ncclSum, comm_, comm_stream_));
  return absl::OkStatus();
}

absl::Status CudaTrainer::Impl::AllReduceBucket(size_t k) {
  const std::vector<int>& b = buckets_[k];
  const int64_t hh = spec_.hidden() * spec_.hidden();
  // Backward order: the bucket's last layer is its lowest.
  return ReduceRange(static_cast<int64_t>(b.back()) * hh,
                     static_cast<int64_t>(b.size()) * hh, static_cast<int>(k));
}

// The optimizer on gradient elements [off, off + count) (after their
// all-reduce: the mean is scale * sum, the loss scale divided out).
absl::Status CudaTrainer::Impl::Update(int64_t off, int64_t count,
                                       cudaStream_t s) {
  const float scale = 1.0f / (static_cast<float>(size_) * loss_scale_);
  const float lr = static_cast<float>(spec_.lr());
  void* w = static_cast<char*>(w_) + off * elem_;
  const void* g = static_cast<const char*>(g_) + off * elem_;
  float* master = master_ ? master_ + off : nullptr;
  if (spec_.optimizer() == "adam") {
    const float c1 = 1.0f - std::pow(0.9f, step_),
                c2 = 1.0f - std::pow(0.999f, step_);
    RM_CU(LaunchAdam(type_, w, master, g, m_ + off, v_ + off, count, lr, scale,
                     c1, c2, s));
  } else {
    RM_CU(LaunchSgd(type_, w, master, g, count, lr, scale, s));
  }
  return absl::OkStatus();
}

// schedule: pipelined. Bucket b's gradients exist (compute stream): on
// the communication stream, all-reduce them, update their layers, and
// mark both; the last bucket closes the step's communication span.
absl::Status CudaTrainer::Impl::ReduceAndUpdate(size_t b, int par) {
  const std::vector<int>& layers = buckets_[b];
  const int64_t hh = spec_.hidden() * spec_.hidden();
  const int lo = *std::min_element(layers.begin(), layers.end());
  const int64_t off = lo * hh, count = static_cast<int64_t>(layers.size()) * hh;
  RM_CU(cudaEventRecord(bucket_ready_[b], compute_));
  RM_CU(cudaStreamWaitEvent(comm_stream_, bucket_ready_[b], 0));
  if (b == 0) RM_CU(cudaEventRecord(comm_span_[2 * par], comm_stream_));
  if (size_ > 1) {
    if (ce_) {
      if (auto s = CeReduce(off, count, static_cast<int>(b)); !s.ok()) return s;
    } else {
      void* p = static_cast<char*>(g_) + off * elem_;
      RM_NC(
          ncclAllReduce(p, p, count, nccl_type_, ncclSum, comm_, comm_stream_));
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
absl::Status CudaTrainer::Impl::QueueForward() {
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
absl::Status CudaTrainer::Impl::ForwardLayer(int l) {
  if (auto s = Run(fwd_, W(l), a_[l], z_[l]); !s.ok()) return s;
  RM_CU(LaunchGeluForward(type_, z_[l], a_[l + 1], batch_ * spec_.hidden(),
                          compute_));
  return absl::OkStatus();
}

// Before backward writes bucket b's gradients: the previous step's
// reduction has let go of them.
absl::Status CudaTrainer::Impl::GradientsFree(int b) {
  if (updates_pending_) RM_CU(cudaStreamWaitEvent(compute_, grads_free_[b], 0));
  return absl::OkStatus();
}

// schedule: pipelined. The loss, backward (upper layers in DDP's order,
// then the lower layers' input-gradient chain, then their weight
// gradients lowest first), each bucket reduced and updated as soon as it
// exists; then the next step's forward is queued and this step ends when
// the compute stream reaches it. The step is the time between the two
// forwards' starts; what its forward waited for the previous step's
// updates is returned as communication.
absl::StatusOr<StepTiming> CudaTrainer::Impl::StepPipelined() {
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

absl::StatusOr<StepTiming> CudaTrainer::Impl::Step() {
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
        void* dz =
            static_cast<char*>(dz_) + j * cols * elem_;  // rows j*cols.. of dZ
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
absl::StatusOr<double> CudaTrainer::Impl::ZeroFraction() {
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

}  // namespace ringmaster
