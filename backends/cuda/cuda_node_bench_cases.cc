// CudaNodeBench: preparing peer copies, latency chases, host<->device
// copies, local copies and triad, and verifying every case.
#include "backends/cuda/cuda_node_bench_impl.h"

namespace ringmaster {

absl::Status CudaNodeBench::Impl::PrepareP2p(const v1::Case& c,
                                             v1::CopyMethod m, bool latency) {
  if (c.pattern() != v1::PAIR && c.bidirectional()) {
    return absl::UnimplementedError(
        "bidirectional traffic is measured between pairs");
  }
  std::vector<Transfer> transfers = PatternTransfers(c, size_);
  // Every rank agrees on the peers before anyone maps memory.
  bool no_peer = false;
  absl::Status local = CheckPeers(transfers, &no_peer);
  auto bad =
      control.AllGatherStrings(local.ok() ? "" : std::string(local.message()));
  if (!bad.ok()) return bad.status();
  for (const auto& msg : *bad) {
    if (!msg.empty()) return absl::UnimplementedError(msg);
  }
  auto any_no_peer = control.Max(no_peer ? 1.0 : 0.0);
  if (!any_no_peer.ok()) return any_no_peer.status();
  if (*any_no_peer > 0) {
    if (c.pattern() != v1::PAIR || c.bidirectional() || latency) {
      return absl::UnimplementedError(
          absl::StrFormat("no peer access between GPUs %s and %s: the host "
                          "path is measured for one-way "
                          "pairs",
                          bus_ids_[c.src_rank() >= 0 ? c.src_rank() : 0],
                          bus_ids_[c.dst_rank() >= 0 ? c.dst_rank() : 0]));
    }
    return PrepareHostStaged(c);
  }
  const int slots = std::max(1, size_ - 1);
  if (auto s = EnsureCopyBuffers(c.size_bytes(), slots); !s.ok()) return s;
  if (auto s = EnsureIpc(); !s.ok()) return s;
  RM_CU(LaunchFillPattern(src_, buf_size_, Seed(c, rank_), nullptr));
  RM_CU(cudaMemset(dst_, 0, buf_size_ * buf_slots_));
  int mine = 0;
  double ceiling = 0;
  for (const Transfer& t : transfers) {
    if (t.issuer != rank_) continue;
    uint8_t* to = (t.to == rank_ ? dst_ : peer_dst_[t.to]) + t.slot * buf_size_;
    const uint8_t* from = t.from == rank_ ? src_ : peer_src_[t.from];
    work_.emplace_back();
    work_.back().push_back(CopyOp(m, to, from, buf_size_));
    int other = t.to == rank_ ? t.from : t.to;
    double g = 0;
    PeerPath(other, &setup_.path, &g, &setup_.ceiling_source);
    ceiling += g;
    ++mine;
  }
  if (auto s = EnsureStreams(static_cast<int>(work_.size())); !s.ok()) return s;
  setup_.active = mine > 0;
  // Latency cases report time per copy, not bandwidth.
  setup_.bytes_per_op = latency ? 0 : buf_size_ * mine;
  setup_.ceiling_gbps = latency ? 0 : ceiling;
  if (latency) setup_.hops_per_op = 1;
  return absl::OkStatus();
}

// GPUs without peer access: the source copies into pinned host memory
// shared by both ranks (POSIX shared memory registered with CUDA), the
// destination copies it out. The two copies run one after the other, as
// the host path of such a pair does without pipelining; one operation is
// timed on the source from the start of its copy to the end of the
// destination's.
absl::Status CudaNodeBench::Impl::PrepareHostStaged(const v1::Case& c) {
  const int64_t size = c.size_bytes();
  if (auto s = EnsureCopyBuffers(size, std::max(1, size_ - 1)); !s.ok())
    return s;
  ReleaseStaged();
  const bool src = rank_ == c.src_rank(), dst = rank_ == c.dst_rank();
  // /dev/shm must hold the buffer (a full one turns the first touch into
  // SIGBUS); every rank checks, so all agree.
  struct statvfs fs {};
  const double shm_free = statvfs("/dev/shm", &fs) == 0
                              ? static_cast<double>(fs.f_bavail) * fs.f_frsize
                              : 0;
  auto least = control.AllGather(shm_free);
  if (!least.ok()) return least.status();
  if (*std::min_element(least->begin(), least->end()) <
      static_cast<double>(size)) {
    return absl::UnimplementedError(absl::StrFormat(
        "the host path needs %d bytes of /dev/shm; less is free", size));
  }
  std::string name;
  if (src) {
    name = absl::StrFormat("/ringmaster-%d-%d-%d", getpid(), rank_,
                           static_cast<int>(c.seq()));
    int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0 || ftruncate(fd, size) != 0) {
      if (fd >= 0) close(fd);
      return absl::InternalError(
          absl::StrFormat("shm_open %s: %s", name, strerror(errno)));
    }
    staged_fd_ = fd;
  }
  auto names = control.AllGatherStrings(name);
  if (!names.ok()) return names.status();
  if (dst) {
    name = (*names)[c.src_rank()];
    staged_fd_ = shm_open(name.c_str(), O_RDWR, 0600);
    if (staged_fd_ < 0) {
      return absl::InternalError(
          absl::StrFormat("shm_open %s: %s", name, strerror(errno)));
    }
  }
  if (src || dst) {
    void* p =
        mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, staged_fd_, 0);
    if (p == MAP_FAILED)
      return absl::InternalError(absl::StrFormat("mmap: %s", strerror(errno)));
    staged_ = static_cast<uint8_t*>(p);
    staged_size_ = size;
    RM_CU(cudaHostRegister(staged_, size, cudaHostRegisterPortable));
  }
  if (auto b = control.Barrier(); !b.ok()) return b;
  if (src) shm_unlink(name.c_str());  // both have it mapped
  RM_CU(LaunchFillPattern(src_, buf_size_, Seed(c, rank_), nullptr));
  RM_CU(cudaMemset(dst_, 0, buf_size_ * buf_slots_));
  if (auto s = EnsureStreams(1); !s.ok()) return s;
  staged_case_ = true;
  staged_src_ = c.src_rank();
  staged_dst_ = c.dst_rank();
  setup_.active = src;
  setup_.bytes_per_op = size;
  setup_.path =
      "host-staged (no peer access: GPU -> shared pinned memory -> GPU)";
  double g = 0;
  PciePath(&g, &setup_.ceiling_source);
  setup_.ceiling_gbps = g / 2;  // two PCIe crossings in sequence
  setup_.ceiling_source += "; halved: two crossings one after the other";
  return absl::OkStatus();
}

void CudaNodeBench::Impl::ReleaseStaged() {
  if (staged_) {
    cudaHostUnregister(staged_);
    munmap(staged_, staged_size_);
  }
  if (staged_fd_ >= 0) close(staged_fd_);
  staged_ = nullptr;
  staged_size_ = 0;
  staged_fd_ = -1;
}

absl::StatusOr<double> CudaNodeBench::Impl::TimeStaged(int iters) {
  if (auto b = control.Barrier(); !b.ok()) return b;
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) {
    if (rank_ == staged_src_) {
      RM_CU(cudaMemcpyAsync(staged_, src_, buf_size_, cudaMemcpyDeviceToHost,
                            streams_[0]));
      RM_CU(cudaStreamSynchronize(streams_[0]));
    }
    if (auto b = control.Barrier(); !b.ok()) return b;
    if (rank_ == staged_dst_) {
      RM_CU(cudaMemcpyAsync(dst_, staged_, buf_size_, cudaMemcpyHostToDevice,
                            streams_[0]));
      RM_CU(cudaStreamSynchronize(streams_[0]));
    }
    if (auto b = control.Barrier(); !b.ok()) return b;
  }
  double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
          .count();
  return rank_ == staged_src_ ? secs : 0.0;
}

absl::Status CudaNodeBench::Impl::PrepareLatency(const v1::Case& c,
                                                 v1::CopyMethod m) {
  if (c.latency_path() == v1::HOST) {
    setup_.active = rank_ == c.src_rank();
    setup_.path = "pcie-host";
    if (m == v1::COPY_ENGINE) {
      // Issue-to-completion time of one small host-to-device copy.
      if (auto s = EnsurePinned(std::max<int64_t>(c.size_bytes(), 8)); !s.ok())
        return s;
      // A small copy fits any buffer already there.
      const int64_t size = std::max<int64_t>(c.size_bytes(), buf_size_);
      if (auto s = EnsureCopyBuffers(size, SlotsFor(size)); !s.ok()) return s;
      if (auto s = EnsureStreams(1); !s.ok()) return s;
      if (setup_.active) {
        work_.emplace_back();
        work_.back().push_back(CopyOp(m, dst_, pinned_, c.size_bytes()));
      }
      setup_.hops_per_op = 1;
      return absl::OkStatus();
    }
    if (host_chain_ == nullptr) {
      std::vector<uint64_t> w = ChainWords();
      RM_CU(cudaHostAlloc(&host_chain_, kChaseBytes,
                          cudaHostAllocMapped | cudaHostAllocPortable));
      std::memcpy(host_chain_, w.data(), kChaseBytes);
      RM_CU(cudaHostGetDevicePointer(reinterpret_cast<void**>(&host_chain_dev_),
                                     host_chain_, 0));
    }
    chase_base_ = host_chain_dev_;
  } else {
    if (m == v1::COPY_ENGINE) {
      // Issue-to-completion time of one small peer copy.
      v1::Case pair = c;
      pair.set_pattern(v1::PAIR);
      pair.set_direction(v1::WRITE);
      pair.set_bidirectional(false);
      return PrepareP2p(pair, m, /*latency=*/true);
    }
    std::vector<Transfer> t = {{c.src_rank(), c.dst_rank(), 0, c.dst_rank()}};
    absl::Status local = CheckPeers(t);
    auto bad = control.AllGatherStrings(
        local.ok() ? "" : std::string(local.message()));
    if (!bad.ok()) return bad.status();
    for (const auto& msg : *bad) {
      if (!msg.empty()) return absl::UnimplementedError(msg);
    }
    if (buf_size_ == 0) {
      if (auto s = EnsureCopyBuffers(4096, std::max(1, size_ - 1)); !s.ok())
        return s;
    }
    if (auto s = EnsureIpc(); !s.ok()) return s;
    setup_.active = rank_ == c.src_rank();
    if (setup_.active) {
      double g = 0;
      std::string source;
      PeerPath(c.dst_rank(), &setup_.path, &g, &source);
      chase_base_ = peer_chain_[c.dst_rank()];
    }
  }
  setup_.path += absl::StrFormat(" (pointer chase, %d B stride over %d KiB)",
                                 kChaseStride, kChaseBytes >> 10);
  setup_.hops_per_op = kChaseHops;
  expected_chase_end_ = ChaseEnd(kChaseHops);
  if (auto s = EnsureStreams(1); !s.ok()) return s;
  if (setup_.active) {
    const uint64_t* base = chase_base_;
    uint64_t* sink = sink_;
    work_.emplace_back();
    work_.back().push_back([=](cudaStream_t s) {
      return LaunchPointerChase(base, kChaseHops, sink, s);
    });
  }
  return absl::OkStatus();
}

absl::Status CudaNodeBench::Impl::PrepareHostDevice(const v1::Case& c,
                                                    v1::CopyMethod m) {
  const int64_t size = c.size_bytes();
  const bool pinned = c.host_memory() != v1::PAGEABLE;
  if (m == v1::SM && !pinned) {
    return absl::UnimplementedError(
        "an SM copy needs host memory the GPU can address: use memory: "
        "pinned");
  }
  setup_.active = c.pattern() == v1::ALL_RANKS || rank_ == c.src_rank();
  if (auto s = EnsureCopyBuffers(size, SlotsFor(size)); !s.ok()) return s;
  uint8_t* host = nullptr;
  if (pinned) {
    if (auto s = EnsurePinned(2 * size); !s.ok()) return s;
    host = pinned_;
  } else {
    pageable_.assign(2 * size, 0);  // touched: faulted in before timing
    host = pageable_.data();
  }
  uint8_t* host_dev = host;
  if (pinned && m == v1::SM)
    RM_CU(
        cudaHostGetDevicePointer(reinterpret_cast<void**>(&host_dev), host, 0));
  std::vector<bool> to_device = {c.direction() == v1::TO_DEVICE};
  if (c.bidirectional()) to_device = {true, false};
  if (setup_.active) {
    for (bool h2d : to_device) {
      work_.emplace_back();
      // H2D reads the host buffer's first half; D2H writes its second.
      if (h2d) {
        work_.back().push_back(CopyOp(m, dst_, host_dev, size));
      } else {
        work_.back().push_back(CopyOp(m, host_dev + size, src_, size));
      }
    }
  }
  if (auto s = EnsureStreams(2); !s.ok()) return s;
  host_timed_ = !pinned;
  setup_.bytes_per_op = size * static_cast<int64_t>(to_device.size());
  setup_.path = pinned ? "pcie" : "pcie (pageable, staged by the driver)";
  double g = 0;
  PciePath(&g, &setup_.ceiling_source);
  setup_.ceiling_gbps = g * static_cast<double>(to_device.size());
  return absl::OkStatus();
}

absl::Status CudaNodeBench::Impl::PrepareLocalCopy(const v1::Case& c,
                                                   v1::CopyMethod m) {
  const int64_t size = c.size_bytes();
  if (auto s = EnsureCopyBuffers(size, SlotsFor(size)); !s.ok()) return s;
  RM_CU(LaunchFillPattern(src_, size, Seed(c, rank_), nullptr));
  setup_.active = c.pattern() == v1::ALL_RANKS || rank_ == c.src_rank();
  if (setup_.active) {
    work_.emplace_back();
    work_.back().push_back(CopyOp(m, dst_, src_, size));
  }
  if (auto s = EnsureStreams(1); !s.ok()) return s;
  setup_.bytes_per_op = size;
  setup_.path = "hbm";
  std::string source;
  double peak = HbmGbps(&source);
  // A copy reads and writes every byte it counts once.
  setup_.ceiling_gbps = peak / 2;
  setup_.ceiling_source = source + "; a copy moves each counted byte twice";
  return absl::OkStatus();
}

absl::Status CudaNodeBench::Impl::PrepareTriad(const v1::Case& c) {
  const int64_t n = c.size_bytes() / static_cast<int64_t>(sizeof(float));
  if (n < 1)
    return absl::InvalidArgumentError(
        "triad needs at least one float per array");
  if (n != triad_n_) {
    cudaFree(triad_);
    triad_ = nullptr;
    triad_n_ = 0;
    // One allocation, three arrays, each 256-byte aligned.
    int64_t padded = (n + 63) / 64 * 64;
    RM_CU(cudaMalloc(&triad_, 3 * padded * sizeof(float)));
    triad_n_ = n;
  }
  int64_t padded = (n + 63) / 64 * 64;
  float* a = triad_;
  float* b = triad_ + padded;
  float* cc = triad_ + 2 * padded;
  RM_CU(LaunchGemmFill(b, kGemmF32, n, 11, nullptr));
  RM_CU(LaunchGemmFill(cc, kGemmF32, n, 12, nullptr));
  setup_.active = c.pattern() == v1::ALL_RANKS || rank_ == c.src_rank();
  const int blocks = sms_ * 4;
  if (setup_.active) {
    work_.emplace_back();
    work_.back().push_back([=](cudaStream_t s) {
      return LaunchTriad(a, b, cc, 3.0f, n, blocks, s);
    });
  }
  if (auto s = EnsureStreams(1); !s.ok()) return s;
  setup_.bytes_per_op = 3 * n * static_cast<int64_t>(sizeof(float));
  setup_.path = "hbm";
  setup_.ceiling_gbps = HbmGbps(&setup_.ceiling_source);
  return absl::OkStatus();
}

absl::StatusOr<int64_t> CudaNodeBench::Impl::Verify() {
  RM_CU(cudaSetDevice(device_));
  const v1::Case& c = case_;
  switch (c.bench()) {
    case v1::BENCH_P2P:
    case v1::BENCH_LOCAL_COPY:
      break;
    case v1::BENCH_LATENCY:
      if (setup_.method != v1::COPY_ENGINE) {
        auto t = TimeOps(1);
        if (!t.ok()) return t.status();
        if (!setup_.active) return 0;
        uint64_t end = 0;
        RM_CU(cudaMemcpy(&end, sink_, sizeof end, cudaMemcpyDeviceToHost));
        return end == expected_chase_end_ ? 0 : 1;
      }
      if (c.latency_path() == v1::HOST) {
        std::memset(pinned_, 0x5a, c.size_bytes());
        RM_CU(cudaMemset(dst_, 0, c.size_bytes()));
        auto t = TimeOps(1);
        if (!t.ok()) return t.status();
        if (!setup_.active) return 0;
        std::vector<uint8_t> got(c.size_bytes());
        RM_CU(cudaMemcpy(got.data(), dst_, got.size(), cudaMemcpyDeviceToHost));
        return std::count_if(got.begin(), got.end(),
                             [](uint8_t v) { return v != 0x5a; });
      }
      break;  // a small peer copy: checked like P2P
    case v1::BENCH_HOST_DEVICE: {
      const int64_t size = c.size_bytes();
      uint8_t* host =
          c.host_memory() == v1::PAGEABLE ? pageable_.data() : pinned_;
      const uint32_t seed = Seed(c, rank_);
      for (int64_t i = 0; i < size; ++i) host[i] = CopyPatternByte(seed, i);
      std::memset(host + size, 0, size);
      RM_CU(LaunchFillPattern(src_, size, seed, nullptr));
      RM_CU(cudaMemset(dst_, 0, size));
      RM_CU(cudaDeviceSynchronize());
      auto t = TimeOps(1);
      if (!t.ok()) return t.status();
      if (!setup_.active) return 0;
      int64_t bad = 0;
      const bool h2d = c.bidirectional() || c.direction() == v1::TO_DEVICE;
      const bool d2h = c.bidirectional() || c.direction() == v1::TO_HOST;
      if (h2d) {
        auto w = CountDevice(dst_, size, seed);
        if (!w.ok()) return w.status();
        bad += *w;
      }
      if (d2h) {
        for (int64_t i = 0; i < size; ++i)
          bad += host[size + i] != CopyPatternByte(seed, i);
      }
      return bad;
    }
    case v1::BENCH_TRIAD: {
      int64_t padded = (triad_n_ + 63) / 64 * 64;
      RM_CU(cudaMemset(triad_, 0xff,
                       triad_n_ * sizeof(float)));  // NaN: unwritten shows
      auto t = TimeOps(1);
      if (!t.ok()) return t.status();
      if (!setup_.active) return 0;
      RM_CU(cudaMemset(wrong_, 0, sizeof *wrong_));
      RM_CU(LaunchCheckTriad(triad_, triad_ + padded, triad_ + 2 * padded, 3.0f,
                             triad_n_, wrong_, nullptr));
      unsigned long long w = 0;
      RM_CU(cudaMemcpy(&w, wrong_, sizeof w, cudaMemcpyDeviceToHost));
      return static_cast<int64_t>(w);
    }
    case v1::BENCH_GEMM: {
      if (setup_.active) {
        RM_CU(cudaMemset(
            gd_, 0xff,
            c.gemm().m() * c.gemm().n() *
                (c.dtype() == v1::FLOAT32 || c.dtype() == v1::TFLOAT32 ? 4
                                                                       : 2)));
      }
      auto t = TimeOps(1);
      if (!t.ok()) return t.status();
      if (!setup_.active) return 0;
      RM_CU(LaunchGemmReference(gref_, kGemmSamples, gref_out_, nullptr));
      std::vector<double> out(2 * kGemmSamples);
      RM_CU(cudaMemcpy(out.data(), gref_out_, out.size() * sizeof(double),
                       cudaMemcpyDeviceToHost));
      double num = 0, den = 0;
      int64_t bad = 0;
      for (int s = 0; s < kGemmSamples; ++s) {
        double ref = out[2 * s], got = out[2 * s + 1];
        if (!std::isfinite(got)) ++bad;
        num += (got - ref) * (got - ref);
        den += ref * ref;
      }
      rel_error_ = den > 0 ? std::sqrt(num / den) : 1;
      double tol = 1e-5;
      switch (c.dtype()) {
        case v1::TFLOAT32:
          tol = 2e-3;
          break;
        case v1::BFLOAT16:
        case v1::FLOAT8_E4M3:
          tol = 8e-3;
          break;
        case v1::FLOAT16:
          tol = 2e-3;
          break;
        default:
          break;
      }
      if (bad == 0 && !(rel_error_ <= tol)) bad = 1;
      return bad;
    }
    default:
      return absl::InvalidArgumentError("not a node benchmark");
  }
  // Copies: clear destinations, copy once, compare every destination slot
  // with its sender's pattern.
  RM_CU(cudaMemset(dst_, 0, buf_size_ * buf_slots_));
  RM_CU(cudaDeviceSynchronize());
  if (auto b = control.Barrier(); !b.ok()) return b;
  auto t = TimeOps(1);
  if (!t.ok()) return t.status();
  RM_CU(cudaDeviceSynchronize());
  if (auto b = control.Barrier(); !b.ok()) return b;  // peers' writes are done
  int64_t bad = 0;
  if (c.bench() == v1::BENCH_LOCAL_COPY) {
    if (!setup_.active) return 0;
    auto w = CountDevice(dst_, buf_size_, Seed(c, rank_));
    if (!w.ok()) return w.status();
    return *w;
  }
  v1::Case pc = c;
  if (c.bench() == v1::BENCH_LATENCY) {
    pc.set_pattern(v1::PAIR);
    pc.set_direction(v1::WRITE);
    pc.set_bidirectional(false);
  }
  for (const Transfer& tr : PatternTransfers(pc, size_)) {
    if (tr.to != rank_) continue;
    auto w =
        CountDevice(dst_ + tr.slot * buf_size_, buf_size_, Seed(c, tr.from));
    if (!w.ok()) return w.status();
    bad += *w;
  }
  return bad;
}

}  // namespace ringmaster
