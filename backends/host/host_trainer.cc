#include "backends/host/host_trainer.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_format.h"
#include "backends/host/blas.h"
#include "core/names.h"
#include "core/training.h"

namespace ringmaster {
namespace {

double Now() { return MonotonicSeconds(); }

}  // namespace

HostTrainer::HostTrainer(HostComm& comm)
    : comm_(comm), rank_(comm.rank()), size_(comm.size()) {}

absl::Status HostTrainer::Prepare(const v1::Case& c, int64_t batch,
                                  int64_t first_sample) {
  if (c.dtype() != v1::FLOAT32) {
    return absl::UnimplementedError(absl::StrFormat(
        "the host backend trains in float32 (OpenBLAS); %s needs GPUs",
        DataTypeName(c.dtype())));
  }
  if (c.train().comm() == "ce") {
    return absl::UnimplementedError(
        "comm: ce reduces through GPU copy engines; not on the host");
  }
  if (auto d = Drain(); !d.ok()) return d;
  auto local = comm_.RanksOnHost();
  if (!local.ok()) return local.status();
  const Blas* blas = LoadBlas();
  if (blas == nullptr) {
    return absl::UnimplementedError(
        "no BLAS library with cblas_sgemm here (libopenblas.so.0)");
  }
  describe_ = "cpu (" + ShareCores(*blas, *local) + ")";
  spec_ = c.train();
  batch_ = batch;
  step_ = 0;
  const int L = spec_.layers();
  const int64_t H = spec_.hidden();
  w_.resize(L * H * H);
  for (int l = 0; l < L; ++l) {
    for (int64_t r = 0; r < H; ++r) {
      for (int64_t k = 0; k < H; ++k)
        w_[(l * H + r) * H + k] = TrainWeight(l, r, k, H);
    }
  }
  grad_.assign(L * H * H, 0.f);
  m_.assign(spec_.optimizer() == "adam" ? L * H * H : 0, 0.f);
  v_ = m_;
  a_.assign(L + 1, std::vector<float>(batch * H));
  z_.assign(L, std::vector<float>(batch * H));
  for (int64_t s = 0; s < batch; ++s) {
    for (int64_t f = 0; f < H; ++f)
      a_[0][s * H + f] = TrainInput(first_sample + s, f);
  }
  da_.resize(batch * H);
  dz_.resize(batch * H);
  const int64_t layer_bytes = H * H * static_cast<int64_t>(sizeof(float));
  pipelined_ = spec_.schedule() == "pipelined" && !spec_.inference();
  deferred_ = spec_.deferred_layers() > 0 ? std::min(spec_.deferred_layers(), L)
                                          : std::max(1, L / 2);
  buckets_ = pipelined_ ? PipelinedBuckets(L, deferred_, layer_bytes,
                                           spec_.bucket_bytes())
                        : GradientBuckets(L, layer_bytes, spec_.bucket_bytes());
  bucket_of_.assign(L, 0);
  for (size_t b = 0; b < buckets_.size(); ++b) {
    for (int l : buckets_[b]) bucket_of_[l] = static_cast<int>(b);
  }
  pending_.clear();
  pending_.resize(buckets_.size());
  if (pipelined_) {
    describe_ += absl::StrFormat("; pipelined, %d layers deferred", deferred_);
  }
  return absl::OkStatus();
}

absl::Status HostTrainer::Drain() {
  for (size_t b = 0; b < pending_.size(); ++b) {
    if (auto s = Settle(b); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::StatusOr<double> HostTrainer::GradientZeroFraction() {
  if (grad_.empty()) return absl::FailedPreconditionError("no case prepared");
  const auto zeros = std::count(grad_.begin(), grad_.end(), 0.0f);
  return static_cast<double>(zeros) / static_cast<double>(grad_.size());
}

void HostTrainer::ForwardLayer(int l) {
  const int H = static_cast<int>(spec_.hidden()), B = static_cast<int>(batch_);
  LoadBlas()->sgemm(kCblasRowMajor, kCblasNoTrans, kCblasTrans, B, H, H, 1.0f,
                    a_[l].data(), H, &w_[static_cast<int64_t>(l) * H * H], H,
                    0.0f, z_[l].data(), H);
  for (int64_t i = 0; i < static_cast<int64_t>(B) * H; ++i) {
    a_[l + 1][i] = static_cast<float>(Gelu(z_[l][i]));
  }
}

double HostTrainer::Loss() const {
  double loss = 0;
  for (float x : a_.back()) loss += static_cast<double>(x) * x;
  return loss / static_cast<double>(a_.back().size());
}

void HostTrainer::SeedGradient() {
  const double count = static_cast<double>(a_.back().size());
  for (size_t i = 0; i < da_.size(); ++i) {
    da_[i] = static_cast<float>(2.0 * a_.back()[i] / count);
  }
}

void HostTrainer::WeightGradient(int l, const float* dz) {
  const int H = static_cast<int>(spec_.hidden()), B = static_cast<int>(batch_);
  // dW[out][in] = sum_s dz[s][out] a[s][in]: dz^T a.
  LoadBlas()->sgemm(kCblasRowMajor, kCblasTrans, kCblasNoTrans, H, H, B, 1.0f,
                    dz, H, a_[l].data(), H, 0.0f,
                    &grad_[static_cast<int64_t>(l) * H * H], H);
}

void HostTrainer::InputGradient(int l, const float* dz) {
  const int H = static_cast<int>(spec_.hidden()), B = static_cast<int>(batch_);
  // da[s][in] = sum_out dz[s][out] W[out][in]: dz W.
  LoadBlas()->sgemm(kCblasRowMajor, kCblasNoTrans, kCblasNoTrans, B, H, H, 1.0f,
                    dz, H, &w_[static_cast<int64_t>(l) * H * H], H, 0.0f,
                    da_.data(), H);
}

void HostTrainer::UpdateRange(int64_t off, int64_t count, int step) {
  const float inv = 1.0f / static_cast<float>(size_);
  const float lr = static_cast<float>(spec_.lr());
  if (spec_.optimizer() == "adam") {
    const double c1 = 1 - std::pow(0.9, step), c2 = 1 - std::pow(0.999, step);
    for (int64_t k = off; k < off + count; ++k) {
      const float g = grad_[k] * inv;
      m_[k] = 0.9f * m_[k] + 0.1f * g;
      v_[k] = 0.999f * v_[k] + 0.001f * g * g;
      w_[k] -= static_cast<float>(lr * (m_[k] / c1) /
                                  (std::sqrt(v_[k] / c2) + 1e-8));
    }
  } else {
    for (int64_t k = off; k < off + count; ++k) w_[k] -= lr * grad_[k] * inv;
  }
}

absl::Status HostTrainer::Settle(size_t b) {
  Pending& p = pending_[b];
  if (p.step == 0) return absl::OkStatus();  // nothing to apply
  if (p.request && !p.done) {
    if (auto s = p.request->Wait(); !s.ok()) return s;
  }
  const int64_t hh = spec_.hidden() * spec_.hidden();
  const int lo = *std::min_element(buckets_[b].begin(), buckets_[b].end());
  UpdateRange(lo * hh, static_cast<int64_t>(buckets_[b].size()) * hh, p.step);
  p = Pending{};
  return absl::OkStatus();
}

// schedule: pipelined (the GPU trainer's order, docs/plans.md). One thread
// does everything here, so "waiting for the previous step's update" is the
// time spent completing that bucket's all-reduce (and progressing the
// others) inside this step; the update itself is work.
absl::StatusOr<StepTiming> HostTrainer::StepPipelined() {
  const int L = spec_.layers();
  const int H = static_cast<int>(spec_.hidden());
  const int B = static_cast<int>(batch_);
  const int64_t n = static_cast<int64_t>(B) * H;
  StepTiming t;
  t.pipelined = true;
  const double t0 = Now();
  double comm_s = 0;  // time inside communication calls
  auto progress = [&]() -> absl::Status {
    if (size_ < 2) return absl::OkStatus();  // nothing in flight
    const double from = Now();
    for (Pending& p : pending_) {
      if (p.request && !p.done) {
        auto done = p.request->Test();
        if (!done.ok()) return done.status();
        p.done = *done;
      }
    }
    comm_s += Now() - from;
    return absl::OkStatus();
  };
  ++step_;
  for (int l = 0; l < L; ++l) {
    const size_t b = bucket_of_[l];
    if (l == *std::min_element(buckets_[b].begin(), buckets_[b].end())) {
      if (pending_[b].request && !pending_[b].done) {
        const double from = Now();
        if (auto s = pending_[b].request->Wait(); !s.ok()) return s;
        pending_[b].done = true;
        comm_s += Now() - from;
      }
      if (auto s = Settle(b); !s.ok()) return s;
    }
    ForwardLayer(l);
    if (auto s = progress(); !s.ok()) return s;
  }
  t.loss = Loss();
  SeedGradient();
  auto start = [&](size_t b) -> absl::Status {
    pending_[b].step = step_;
    if (size_ < 2) return absl::OkStatus();  // the update alone, next forward
    const double from = Now();
    const int lo = *std::min_element(buckets_[b].begin(), buckets_[b].end());
    const int64_t hh = static_cast<int64_t>(H) * H;
    auto req = comm_.StartAllReduce(
        &grad_[lo * hh], static_cast<int64_t>(buckets_[b].size()) * hh,
        v1::FLOAT32, v1::SUM);
    if (!req.ok()) return req.status();
    pending_[b].request = std::move(*req);
    comm_s += Now() - from;
    return absl::OkStatus();
  };
  auto last_of = [&](int l) { return buckets_[bucket_of_[l]].back() == l; };
  // Upper layers as DDP; the lower ones: dZ in place of Z, the
  // input-gradient chain, then their weight gradients lowest first.
  for (int l = L - 1; l >= deferred_; --l) {
    for (int64_t i = 0; i < n; ++i) {
      dz_[i] = static_cast<float>(da_[i] * GeluGrad(z_[l][i]));
    }
    WeightGradient(l, dz_.data());
    if (l > 0) InputGradient(l, dz_.data());
    if (last_of(l)) {
      if (auto s = start(bucket_of_[l]); !s.ok()) return s;
    }
    if (auto s = progress(); !s.ok()) return s;
  }
  for (int l = deferred_ - 1; l >= 0; --l) {
    for (int64_t i = 0; i < n; ++i) {
      z_[l][i] = static_cast<float>(da_[i] * GeluGrad(z_[l][i]));
    }
    if (l > 0) InputGradient(l, z_[l].data());
    if (auto s = progress(); !s.ok()) return s;
  }
  for (int l = 0; l < deferred_; ++l) {
    WeightGradient(l, z_[l].data());
    if (last_of(l)) {
      if (auto s = start(bucket_of_[l]); !s.ok()) return s;
    }
    if (auto s = progress(); !s.ok()) return s;
  }
  t.backward_end_at = t.comm_done_at = Now();
  t.step_s = t.backward_end_at - t0;
  t.comm_in_backward_s = std::min(comm_s, t.step_s);
  t.compute_s = t.step_s - t.comm_in_backward_s;
  return t;
}

absl::StatusOr<StepTiming> HostTrainer::Step() {
  if (pipelined_) return StepPipelined();
  const int L = spec_.layers();
  const int H = static_cast<int>(spec_.hidden());
  const int B = static_cast<int>(batch_);
  StepTiming t;
  const double t0 = Now();
  // compute_s sums the work intervals only (GEMMs, element-wise passes,
  // optimizer), not MPI calls: measured apart from the step's wall time.
  double work_from = t0;
  auto work_end = [&] { t.compute_s += Now() - work_from; };
  auto work_begin = [&] { work_from = Now(); };
  for (int l = 0; l < L; ++l) ForwardLayer(l);
  t.loss = Loss();
  if (spec_.inference()) {  // forward only: no backward, reduction or update
    work_end();
    t.backward_end_at = t.comm_done_at = Now();
    t.step_s = t.backward_end_at - t0;
    return t;
  }
  SeedGradient();
  // Backward, last layer first; a bucket's all-reduce starts once its last
  // layer's gradient exists (with overlap), progressed between layers.
  std::vector<std::unique_ptr<HostComm::Request>> reqs;
  double comm_busy_from = 0;
  size_t next_bucket = 0;
  auto start_bucket = [&](const std::vector<int>& bucket) -> absl::Status {
    int lo = *std::min_element(bucket.begin(), bucket.end());
    int64_t n = static_cast<int64_t>(bucket.size()) * H * H;
    auto req = comm_.StartAllReduce(&grad_[static_cast<int64_t>(lo) * H * H], n,
                                    v1::FLOAT32, v1::SUM);
    if (!req.ok()) return req.status();
    reqs.push_back(std::move(*req));
    if (comm_busy_from == 0) comm_busy_from = Now();
    return absl::OkStatus();
  };
  for (int l = L - 1; l >= 0; --l) {
    for (int64_t i = 0; i < static_cast<int64_t>(B) * H; ++i) {
      dz_[i] = static_cast<float>(da_[i] * GeluGrad(z_[l][i]));
    }
    WeightGradient(l, dz_.data());
    if (l > 0) InputGradient(l, dz_.data());
    work_end();
    if (size_ > 1 && spec_.overlap()) {
      const double comm_from = Now();
      while (next_bucket < buckets_.size() &&
             *std::min_element(buckets_[next_bucket].begin(),
                               buckets_[next_bucket].end()) == l) {
        if (auto s = start_bucket(buckets_[next_bucket++]); !s.ok()) return s;
      }
      for (auto& r : reqs) {  // progress the ones in flight
        if (auto done = r->Test(); !done.ok()) return done.status();
      }
      t.comm_in_backward_s += Now() - comm_from;
    }
    if (l > 0) work_begin();
  }
  t.backward_end_at = Now();
  if (size_ > 1) {
    while (next_bucket < buckets_.size()) {
      if (auto s = start_bucket(buckets_[next_bucket++]); !s.ok()) return s;
    }
    for (auto& r : reqs) {
      if (auto s = r->Wait(); !s.ok()) return s;
    }
  }
  // One rank runs no collective: its communication ends with backward.
  t.comm_done_at = size_ > 1 ? Now() : t.backward_end_at;
  t.comm_busy_s = comm_busy_from > 0 ? t.comm_done_at - comm_busy_from : 0;
  // Optimizer on the averaged gradient.
  work_begin();
  ++step_;
  UpdateRange(0, static_cast<int64_t>(w_.size()), step_);
  work_end();
  t.step_s = Now() - t0;
  return t;
}

}  // namespace ringmaster
