#include "backends/host/host_node_bench.h"

#include <chrono>
#include <climits>
#include <cmath>
#include <cstring>
#include <thread>

#include "absl/strings/str_format.h"
#include "backends/host/blas.h"
#include "core/names.h"
#include "core/placement.h"
#include "core/status_macros.h"
#include "kernels/patterns.h"

namespace ringmaster {
namespace {

// The GEMM types the host backend computes (OpenBLAS sgemm).
bool HostGemmType(v1::DataType t) { return t == v1::FLOAT32; }

}  // namespace

HostNodeBench::HostNodeBench(HostComm& comm, std::vector<Fault> faults)
    : comm_(comm),
      faults_(std::move(faults)),
      rank_(comm.rank()),
      size_(comm.size()),
      slow_(SlowFactor(faults_, rank_)) {}

bool HostNodeBench::Active() const {
  const v1::Case& c = case_;
  switch (c.pattern()) {
    case v1::ALL_RANKS:
      return true;
    case v1::ONE_RANK:
      return c.src_rank() == rank_;
    case v1::ALL_TO_ONE:
      return rank_ != c.dst_rank();  // the senders
    case v1::ONE_TO_ALL:
      return rank_ == c.src_rank();
    default:  // PAIR
      return rank_ == c.src_rank() ||
             (c.bidirectional() && rank_ == c.dst_rank());
  }
}

void HostNodeBench::Fill() {
  uint32_t seed = static_cast<uint32_t>(case_.seq() * 131 + rank_);
  for (size_t i = 0; i < src_.size(); ++i)
    src_[i] = CopyPatternByte(seed, static_cast<int64_t>(i));
  std::fill(dst_.begin(), dst_.end(), 0);
}

absl::StatusOr<BenchSetup> HostNodeBench::Prepare(const v1::Case& c) {
  case_ = c;
  rel_error_ = 0;
  BenchSetup setup;
  setup.method = v1::CPU;
  setup.placement = CpuPlacement();
  if (c.method() == v1::COPY_ENGINE || c.method() == v1::SM) {
    return absl::UnimplementedError(
        absl::StrFormat("method %s needs GPUs; the host backend copies with "
                        "the CPU (method cpu)",
                        CopyMethodName(c.method())));
  }
  const int64_t size = c.size_bytes();
  if ((c.bench() == v1::BENCH_P2P || c.bench() == v1::BENCH_LATENCY) &&
      size > INT_MAX) {
    return absl::UnimplementedError(absl::StrFormat(
        "messages here are at most %d bytes (one MPI count)", INT_MAX));
  }
  switch (c.bench()) {
    case v1::BENCH_HOST_DEVICE:
      return absl::UnimplementedError("host<->device copies need GPUs");
    case v1::BENCH_P2P:
      if (c.direction() == v1::READ) {
        return absl::UnimplementedError(
            "the host backend measures send/recv (write); reads need GPUs "
            "(CUDA IPC)");
      }
      src_.assign(size, 0);
      dst_.assign(size, 0);
      Fill();
      setup.path = "mpi";
      setup.bytes_per_op = size;
      if (c.pattern() == v1::ONE_TO_ALL)
        setup.bytes_per_op = size * (size_ - 1);
      break;
    case v1::BENCH_LATENCY:
      if (c.latency_path() == v1::HOST) {
        return absl::UnimplementedError("host-to-device latency needs GPUs");
      }
      src_.assign(size, 0);
      dst_.assign(size, 0);
      Fill();
      setup.path = "mpi";
      setup.hops_per_op = 2;  // one round trip = two one-way messages
      break;
    case v1::BENCH_LOCAL_COPY:
      src_.assign(size, 0);
      dst_.assign(size, 0);
      Fill();
      setup.path = "dram";
      setup.bytes_per_op = size;
      break;
    case v1::BENCH_TRIAD: {
      int64_t n = size / static_cast<int64_t>(sizeof(float));
      if (n < 1)
        return absl::InvalidArgumentError(
            "triad needs at least one float per array");
      a_.assign(n, 0.f);
      b_.resize(n);
      c_.resize(n);
      for (int64_t i = 0; i < n; ++i) {
        b_[i] = GemmInputValue(1, i);
        c_[i] = GemmInputValue(2, i);
      }
      setup.path = "dram";
      setup.bytes_per_op = 3 * n * static_cast<int64_t>(sizeof(float));
      break;
    }
    case v1::BENCH_GEMM: {
      if (!HostGemmType(c.dtype())) {
        return absl::UnimplementedError(
            absl::StrFormat("%s GEMM needs GPUs; the host backend runs float32 "
                            "(OpenBLAS sgemm)",
                            DataTypeName(c.dtype())));
      }
      if (blas_ == nullptr) {
        // Collective: before any early return.
        auto local = comm_.RanksOnHost();
        if (!local.ok()) return local.status();
        blas_ = LoadBlas();
        if (blas_ == nullptr) {
          return absl::UnimplementedError(
              "no BLAS library with cblas_sgemm here (libopenblas.so.0, "
              "libblas.so.3)");
        }
        blas_name_ = ShareCores(*blas_, *local);
      }
      const v1::GemmShape& g = c.gemm();
      a_.resize(g.m() * g.k());
      b_.resize(g.k() * g.n());
      c_.assign(g.m() * g.n(), std::nanf(""));
      for (size_t i = 0; i < a_.size(); ++i)
        a_[i] = GemmInputValue(3, static_cast<int64_t>(i));
      for (size_t i = 0; i < b_.size(); ++i)
        b_[i] = GemmInputValue(4, static_cast<int64_t>(i));
      setup.path = "cpu (" + blas_name_ + " sgemm)";
      setup.flops_per_op = 2.0 * g.m() * g.n() * g.k();
      break;
    }
    default:
      return absl::InvalidArgumentError("not a node benchmark");
  }
  setup.active = Active();
  if (!setup.active) {
    setup.bytes_per_op = 0;
    setup.flops_per_op = 0;
    setup.hops_per_op = 0;
  }
  return setup;
}

absl::Status HostNodeBench::RunOps(int iters) {
  // A slow fault stretches the rank's share of the work by its factor.
  // (P2P stretches each transfer itself, in RunOpsInner.)
  if (slow_ <= 1 || case_.bench() == v1::BENCH_P2P) return RunOpsInner(iters);
  const auto start = std::chrono::steady_clock::now();
  absl::Status st = RunOpsInner(iters);
  SpinFor((slow_ - 1) * std::chrono::duration<double>(
                            std::chrono::steady_clock::now() - start)
                            .count());
  return st;
}

absl::Status HostNodeBench::RunOpsInner(int iters) {
  const v1::Case& c = case_;
  const int64_t size = c.size_bytes();
  const bool active = Active();
  switch (c.bench()) {
    case v1::BENCH_P2P: {
      // Receivers post receives for every message; senders send. A
      // zero-byte acknowledgement from each receiver marks the end, so a
      // sender's clock covers delivery, not just its send buffer's release.
      std::vector<int> to, from;
      if (c.pattern() == v1::PAIR) {
        if (rank_ == c.src_rank()) to.push_back(c.dst_rank());
        if (rank_ == c.dst_rank()) from.push_back(c.src_rank());
        if (c.bidirectional()) {
          if (rank_ == c.dst_rank()) to.push_back(c.src_rank());
          if (rank_ == c.src_rank()) from.push_back(c.dst_rank());
        }
      } else if (c.pattern() == v1::ALL_TO_ONE) {
        if (rank_ != c.dst_rank()) to.push_back(c.dst_rank());
        if (rank_ == c.dst_rank()) {
          for (int r = 0; r < size_; ++r)
            if (r != rank_) from.push_back(r);
        }
      } else if (c.pattern() == v1::ONE_TO_ALL) {
        if (rank_ == c.src_rank()) {
          for (int r = 0; r < size_; ++r)
            if (r != rank_) to.push_back(r);
        } else {
          from.push_back(c.src_rank());
        }
      }
      for (int it = 0; it < iters; ++it) {
        std::vector<SendOp> sends;
        std::vector<RecvOp> recvs;
        for (int peer : from) recvs.push_back(RecvOp{peer, dst_.data(), size});
        for (int peer : to) sends.push_back(SendOp{peer, src_.data(), size});
        const auto t0 = std::chrono::steady_clock::now();
        RM_RETURN_IF_ERROR(comm_.Exchange(sends, recvs));
        // A slow rank stretches each transfer, so its peers wait for it in
        // the next one, as behind a slow link.
        if (slow_ > 1 && !(sends.empty() && recvs.empty())) {
          SpinFor((slow_ - 1) * std::chrono::duration<double>(
                                    std::chrono::steady_clock::now() - t0)
                                    .count());
        }
      }
      // One-byte acknowledgements (TCP has no empty messages).
      char ack_out = 1;
      std::vector<char> ack_in(to.size());
      std::vector<SendOp> acks;
      std::vector<RecvOp> acked;
      for (int peer : from) acks.push_back(SendOp{peer, &ack_out, 1});
      for (size_t i = 0; i < to.size(); ++i)
        acked.push_back(RecvOp{to[i], &ack_in[i], 1});
      RM_RETURN_IF_ERROR(comm_.Exchange(acks, acked));
      return absl::OkStatus();
    }
    case v1::BENCH_LATENCY: {
      const int n = static_cast<int>(size);
      for (int it = 0; it < iters; ++it) {
        if (rank_ == c.src_rank()) {
          RM_RETURN_IF_ERROR(comm_.Send(src_.data(), n, c.dst_rank()));
          RM_RETURN_IF_ERROR(comm_.Recv(dst_.data(), n, c.dst_rank()));
        } else if (rank_ == c.dst_rank()) {
          RM_RETURN_IF_ERROR(comm_.Recv(dst_.data(), n, c.src_rank()));
          RM_RETURN_IF_ERROR(comm_.Send(dst_.data(), n, c.src_rank()));
        }
      }
      return absl::OkStatus();
    }
    case v1::BENCH_LOCAL_COPY:
      if (active) {
        for (int it = 0; it < iters; ++it)
          std::memcpy(dst_.data(), src_.data(), size);
      }
      return absl::OkStatus();
    case v1::BENCH_TRIAD:
      if (active) {
        const float s = 3.0f;
        const int64_t n = static_cast<int64_t>(a_.size());
        for (int it = 0; it < iters; ++it) {
          for (int64_t i = 0; i < n; ++i) a_[i] = b_[i] + s * c_[i];
        }
      }
      return absl::OkStatus();
    case v1::BENCH_GEMM:
      if (active) {
        const v1::GemmShape& g = c.gemm();
        for (int it = 0; it < iters; ++it) {
          // Row-major C[m,n] = A[m,k] * B[k,n].
          blas_->sgemm(kCblasRowMajor, kCblasNoTrans, kCblasNoTrans,
                       static_cast<int>(g.m()), static_cast<int>(g.n()),
                       static_cast<int>(g.k()), 1.0f, a_.data(),
                       static_cast<int>(g.k()), b_.data(),
                       static_cast<int>(g.n()), 0.0f, c_.data(),
                       static_cast<int>(g.n()));
        }
      }
      return absl::OkStatus();
    default:
      return absl::InvalidArgumentError("not a node benchmark");
  }
}

absl::StatusOr<double> HostNodeBench::TimeOps(int iters) {
  // Every rank starts together; idle ranks wait at the barrier only.
  RM_RETURN_IF_ERROR(comm_.Barrier());
  auto t0 = std::chrono::steady_clock::now();
  if (absl::Status s = RunOps(iters); !s.ok()) return s;
  double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
          .count();
  const bool timed =
      case_.bench() == v1::BENCH_LATENCY ? rank_ == case_.src_rank() : Active();
  return timed ? secs : 0.0;
}

absl::StatusOr<int64_t> HostNodeBench::Verify() {
  const v1::Case& c = case_;
  if (c.bench() == v1::BENCH_GEMM) {
    if (absl::Status s = RunOps(1); !s.ok()) return s;
    if (!Active()) return 0;
    // Corrupts the first sampled element, (0, 13 mod n).
    if (FindFault(faults_, Fault::Kind::kCorrupt, rank_))
      c_[13 % c.gemm().n()] += 1.0f;
    // Sampled elements against a float64 reference of the same inputs.
    const v1::GemmShape& g = c.gemm();
    double num = 0, den = 0;
    int64_t bad = 0;
    for (int s = 0; s < 64; ++s) {
      int64_t i = (s * 7919LL) % g.m(), j = (s * 104729LL + 13) % g.n();
      double ref = 0;
      for (int64_t k = 0; k < g.k(); ++k) {
        ref += static_cast<double>(a_[i * g.k() + k]) * b_[k * g.n() + j];
      }
      double got = c_[i * g.n() + j];
      if (!std::isfinite(got)) ++bad;
      num += (got - ref) * (got - ref);
      den += ref * ref;
    }
    rel_error_ = den > 0 ? std::sqrt(num / den) : (num > 0 ? 1 : 0);
    if (bad == 0 && !(rel_error_ <= 1e-5)) bad = 1;
    return bad;
  }
  if (c.bench() == v1::BENCH_TRIAD) {
    std::fill(a_.begin(), a_.end(), std::nanf(""));
    if (absl::Status s = RunOps(1); !s.ok()) return s;
    if (!Active()) return 0;
    if (FindFault(faults_, Fault::Kind::kCorrupt, rank_)) a_[0] += 1.0f;
    int64_t bad = 0;
    for (size_t i = 0; i < a_.size(); ++i) bad += a_[i] != b_[i] + 3.0f * c_[i];
    return bad;
  }
  // Copies: clear the destination, copy once, compare with the sender's
  // pattern (the receiver knows every sender's seed).
  std::fill(dst_.begin(), dst_.end(), 0);
  if (absl::Status s = RunOps(1); !s.ok()) return s;
  if (FindFault(faults_, Fault::Kind::kCorrupt, rank_) && !dst_.empty())
    dst_[0] ^= 0xff;
  int sender = -1;
  if (c.bench() == v1::BENCH_LOCAL_COPY) {
    sender = Active() ? rank_ : -1;
  } else if (c.bench() == v1::BENCH_LATENCY) {
    sender = rank_ == c.src_rank()
                 ? c.src_rank()
                 : (rank_ == c.dst_rank() ? c.src_rank() : -1);
  } else if (c.pattern() == v1::PAIR) {
    if (rank_ == c.dst_rank()) sender = c.src_rank();
    if (c.bidirectional() && rank_ == c.src_rank()) sender = c.dst_rank();
  } else if (c.pattern() == v1::ONE_TO_ALL) {
    if (rank_ != c.src_rank()) sender = c.src_rank();
  } else if (c.pattern() == v1::ALL_TO_ONE && rank_ == c.dst_rank()) {
    // Every sender wrote into one buffer: any sender's pattern may be last.
    // Check against the pattern of each and accept a full match of one.
    for (int r = 0; r < size_; ++r) {
      if (r == rank_) continue;
      uint32_t seed = static_cast<uint32_t>(c.seq() * 131 + r);
      bool all = true;
      for (size_t i = 0; i < dst_.size() && all; ++i) {
        all = dst_[i] == CopyPatternByte(seed, static_cast<int64_t>(i));
      }
      if (all) return 0;
    }
    return static_cast<int64_t>(dst_.size());
  }
  if (sender < 0) return 0;
  uint32_t seed = static_cast<uint32_t>(c.seq() * 131 + sender);
  int64_t bad = 0;
  for (size_t i = 0; i < dst_.size(); ++i) {
    bad += dst_[i] != CopyPatternByte(seed, static_cast<int64_t>(i));
  }
  return bad;
}

}  // namespace ringmaster
