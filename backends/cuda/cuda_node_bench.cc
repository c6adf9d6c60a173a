#include "backends/cuda/cuda_node_bench_impl.h"

namespace ringmaster {

CudaNodeBench::Impl::~Impl() {
  cudaSetDevice(device_);
  cudaDeviceSynchronize();
  FreeGemm();
  ReleaseStaged();
  CloseIpc();
  cudaFree(src_);
  cudaFree(dst_);
  cudaFree(chain_);
  cudaFree(sink_);
  cudaFree(triad_);
  cudaFree(wrong_);
  cudaFree(gref_out_);
  cudaFree(workspace_);
  if (host_chain_) cudaFreeHost(host_chain_);
  if (pinned_) cudaFreeHost(pinned_);
  if (flag_) cudaFreeHost(const_cast<int*>(flag_));
  if (lt_) cublasLtDestroy(lt_);
  for (auto e : starts_) cudaEventDestroy(e);
  for (auto e : stops_) cudaEventDestroy(e);
  for (auto s : streams_) cudaStreamDestroy(s);
}

absl::Status CudaNodeBench::Impl::Init() {
  rank_ = control.rank();
  size_ = control.size();
  RM_CU(cudaSetDevice(device_));
  RM_CU(cudaDeviceGetAttribute(&sms_, cudaDevAttrMultiProcessorCount, device_));
  RM_CU(cudaDeviceGetAttribute(&cc_major_, cudaDevAttrComputeCapabilityMajor,
                               device_));
  char bus[32] = {};
  RM_CU(cudaDeviceGetPCIBusId(bus, sizeof bus, device_));
  bus_id_ = bus;
  auto hosts = control.AllGatherStrings(HostName());
  if (!hosts.ok()) return hosts.status();
  auto buses = control.AllGatherStrings(bus_id_);
  if (!buses.ok()) return buses.status();
  hosts_ = *hosts;
  bus_ids_ = *buses;
  peer_device_.assign(size_, -1);
  for (int r = 0; r < size_; ++r) {
    int d = -1;
    if (hosts_[r] == hosts_[rank_] &&
        cudaDeviceGetByPCIBusId(&d, bus_ids_[r].c_str()) == cudaSuccess) {
      peer_device_[r] = d;
    }
    cudaGetLastError();  // a GPU not visible here is not an error
  }
  int* flag = nullptr;
  RM_CU(cudaHostAlloc(&flag, 2 * sizeof(int),
                      cudaHostAllocMapped | cudaHostAllocPortable));
  flag_ = flag;
  RM_CU(
      cudaHostGetDevicePointer(reinterpret_cast<void**>(&flag_dev_), flag, 0));
  RM_CU(cudaMalloc(&wrong_, sizeof(unsigned long long)));
  RM_CU(cudaMalloc(&sink_, sizeof(uint64_t)));
  return absl::OkStatus();
}

absl::Status CudaNodeBench::Impl::EnsureStreams(int n) {
  while (static_cast<int>(streams_.size()) < n) {
    cudaStream_t s;
    cudaEvent_t a, b;
    RM_CU(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    RM_CU(cudaEventCreate(&a));
    RM_CU(cudaEventCreate(&b));
    streams_.push_back(s);
    starts_.push_back(a);
    stops_.push_back(b);
  }
  return absl::OkStatus();
}

std::string CudaNodeBench::Impl::Placement() const {
  int node = PciNumaNode(bus_id_);
  return absl::StrFormat(
      "%s; gpu %s numa %s", CpuPlacement(), bus_id_,
      node >= 0 ? absl::StrFormat("%d", node) : std::string("?"));
}

// ---- Copy buffers and IPC ---------------------------------------------

void CudaNodeBench::Impl::CloseIpc() {
  for (int r = 0; r < static_cast<int>(peer_src_.size()); ++r) {
    if (r == rank_) continue;
    if (peer_src_[r]) cudaIpcCloseMemHandle(peer_src_[r]);
    if (peer_dst_[r]) cudaIpcCloseMemHandle(peer_dst_[r]);
  }
  for (int r = 0; r < static_cast<int>(peer_chain_.size()); ++r) {
    if (r != rank_ && peer_chain_[r]) cudaIpcCloseMemHandle(peer_chain_[r]);
  }
  peer_src_.clear();
  peer_dst_.clear();
  peer_chain_.clear();
  ipc_ = false;
}

// Destination slots for cases that use one: the current count when the
// size is unchanged (no reallocation), else 1.
int CudaNodeBench::Impl::SlotsFor(int64_t size) const {
  return size == buf_size_ && buf_slots_ > 0 ? buf_slots_ : 1;
}

// Collective: every rank calls it with the same size and slots.
absl::Status CudaNodeBench::Impl::EnsureCopyBuffers(int64_t size, int slots) {
  if (size == buf_size_ && slots == buf_slots_) return absl::OkStatus();
  if (ipc_) {
    // Peers unmap before owners free.
    CloseIpc();
    RM_CU(cudaDeviceSynchronize());
    if (auto s = control.Barrier(); !s.ok()) return s;
  }
  cudaFree(src_);
  cudaFree(dst_);
  src_ = dst_ = nullptr;
  buf_size_ = buf_slots_ = 0;
  RM_CU(cudaMalloc(&src_, size));
  RM_CU(cudaMalloc(&dst_, size * slots));
  buf_size_ = size;
  buf_slots_ = slots;
  return absl::OkStatus();
}

// Collective: exports this rank's copy buffers and chain, maps the peers'
// of the same host.
absl::Status CudaNodeBench::Impl::EnsureIpc() {
  if (ipc_) return absl::OkStatus();
  if (chain_ == nullptr) {
    auto s = MakeChain();
    if (!s.ok()) return s;
  }
  cudaIpcMemHandle_t h[3];
  RM_CU(cudaIpcGetMemHandle(&h[0], src_));
  RM_CU(cudaIpcGetMemHandle(&h[1], dst_));
  RM_CU(cudaIpcGetMemHandle(&h[2], chain_));
  auto all = control.AllGatherStrings(
      std::string(reinterpret_cast<char*>(h), sizeof h));
  if (!all.ok()) return all.status();
  peer_src_.assign(size_, nullptr);
  peer_dst_.assign(size_, nullptr);
  peer_chain_.assign(size_, nullptr);
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) {
      peer_src_[r] = src_;
      peer_dst_[r] = dst_;
      peer_chain_[r] = chain_;
      continue;
    }
    if (hosts_[r] != hosts_[rank_]) continue;
    cudaIpcMemHandle_t ph[3];
    std::memcpy(ph, (*all)[r].data(), sizeof ph);
    void* p = nullptr;
    RM_CU(cudaIpcOpenMemHandle(&p, ph[0], cudaIpcMemLazyEnablePeerAccess));
    peer_src_[r] = static_cast<uint8_t*>(p);
    RM_CU(cudaIpcOpenMemHandle(&p, ph[1], cudaIpcMemLazyEnablePeerAccess));
    peer_dst_[r] = static_cast<uint8_t*>(p);
    RM_CU(cudaIpcOpenMemHandle(&p, ph[2], cudaIpcMemLazyEnablePeerAccess));
    peer_chain_[r] = static_cast<uint64_t*>(p);
  }
  ipc_ = true;
  return absl::OkStatus();
}

// A random cycle through kChaseBytes / kChaseStride nodes; entry values
// are offsets in 8-byte words from the chain's base. The same on every
// rank (fixed seed), so an issuer can predict where a chase ends.
std::vector<uint64_t> CudaNodeBench::Impl::ChainWords() const {
  const int64_t nodes = kChaseBytes / kChaseStride;
  const int64_t step = kChaseStride / 8;
  std::vector<int64_t> order(nodes);
  std::iota(order.begin(), order.end(), 0);
  std::mt19937_64 rng(12345);
  std::shuffle(order.begin() + 1, order.end(), rng);
  std::vector<uint64_t> words(kChaseBytes / 8, 0);
  for (int64_t i = 0; i < nodes; ++i) {
    words[order[i] * step] =
        static_cast<uint64_t>(order[(i + 1) % nodes] * step);
  }
  return words;
}

uint64_t CudaNodeBench::Impl::ChaseEnd(int64_t hops) const {
  std::vector<uint64_t> w = ChainWords();
  uint64_t off = 0;
  for (int64_t h = 0; h < hops; ++h) off = w[off];
  return off;
}

absl::Status CudaNodeBench::Impl::MakeChain() {
  std::vector<uint64_t> w = ChainWords();
  RM_CU(cudaMalloc(&chain_, kChaseBytes));
  RM_CU(cudaMemcpy(chain_, w.data(), kChaseBytes, cudaMemcpyHostToDevice));
  return absl::OkStatus();
}

absl::Status CudaNodeBench::Impl::EnsurePinned(int64_t bytes) {
  if (pinned_size_ >= bytes) return absl::OkStatus();
  if (pinned_) cudaFreeHost(pinned_);
  pinned_ = nullptr;
  pinned_size_ = 0;
  RM_CU(cudaHostAlloc(&pinned_, bytes,
                      cudaHostAllocMapped | cudaHostAllocPortable));
  std::memset(pinned_, 0, bytes);  // first touch: this rank's NUMA node
  pinned_size_ = bytes;
  return absl::OkStatus();
}

// ---- Path ceilings --------------------------------------------------------

// NVLink (links x per-link rate) or PCIe between this GPU and rank r's.
void CudaNodeBench::Impl::PeerPath(int r, std::string* path, double* gbps,
                                   std::string* source) const {
  auto nv = NvmlNvlink(bus_id_, bus_ids_[r]);
  const double rate = NvlinkLinkGbps(cc_major_);
  if (nv && rate > 0 && NvlinkLinksToPeer(*nv) > 0) {
    *path = "nvlink";
    if (nv->links_to_peer > 0) {
      *gbps = nv->links_to_peer * rate;
      *source = absl::StrFormat(
          "NVML: %d active NVLink links to the peer x %.0f GB/s per "
          "direction "
          "(NVLink of compute capability %d.x; NVML version code %u)",
          nv->links_to_peer, rate, cc_major_, nv->version);
    } else {
      // The remote ends do not name the peer (an NVSwitch, or bus ids
      // remapped by a hypervisor): the GPU's whole NVLink bandwidth.
      *gbps = nv->active_links * rate;
      *source = absl::StrFormat(
          "NVML: NVLink P2P to the peer; %d active links (remote ends %s, "
          "not the peer's id) "
          "x %.0f GB/s per direction (compute capability %d.x; NVML version "
          "code %u)",
          nv->active_links,
          nv->remote_ends.empty() ? "unknown" : nv->remote_ends, rate,
          cc_major_, nv->version);
    }
    return;
  }
  *path = "pcie";
  PciePath(gbps, source);
  if (nv) {
    *source += absl::StrFormat(
        "; NVML: %d active NVLink links, none to the peer", nv->active_links);
  }
}

void CudaNodeBench::Impl::PciePath(double* gbps, std::string* source) const {
  auto link = NvmlPcieMaxLink(bus_id_);
  if (!link) {
    *gbps = 0;
    *source = "PCIe link unknown (NVML unavailable)";
    return;
  }
  *gbps = PcieGbps(link->first, link->second);
  *source = absl::StrFormat(
      "NVML: PCIe gen %u x%u max link, per direction after encoding",
      link->first, link->second);
  if (auto now = NvmlPcieCurrentLink(bus_id_)) {
    *source += absl::StrFormat("; gen %u x%u when the case was set up",
                               now->first, now->second);
  }
}

double CudaNodeBench::Impl::HbmGbps(std::string* source) const {
  int khz = 0, bits = 0;
  if (cudaDeviceGetAttribute(&khz, cudaDevAttrMemoryClockRate, device_) !=
          cudaSuccess ||
      cudaDeviceGetAttribute(&bits, cudaDevAttrGlobalMemoryBusWidth, device_) !=
          cudaSuccess ||
      khz <= 0 || bits <= 0) {
    cudaGetLastError();
    *source = "memory clock unknown";
    return 0;
  }
  double gbps = 2.0 * khz * 1e3 * bits / 8 / 1e9;  // double data rate
  *source =
      absl::StrFormat("%d-bit bus x %d MHz x 2 (DDR) = %.0f GB/s read+write",
                      bits, khz / 1000, gbps);
  return gbps;
}

// ---- Prepare ------------------------------------------------------------

absl::StatusOr<BenchSetup> CudaNodeBench::Impl::Prepare(const v1::Case& c) {
  RM_CU(cudaSetDevice(device_));
  case_ = c;
  work_.clear();
  host_timed_ = false;
  staged_case_ = false;
  rel_error_ = 0;
  setup_ = BenchSetup{};
  setup_.placement = Placement();
  v1::CopyMethod m = c.method();
  if (m == v1::CPU) {
    return absl::UnimplementedError(
        "method cpu runs on the host backend (backend: host)");
  }
  if (m == v1::COPY_METHOD_UNSPECIFIED) {
    switch (c.bench()) {
      case v1::BENCH_LATENCY:
      case v1::BENCH_TRIAD:
        m = v1::SM;
        break;
      case v1::BENCH_GEMM:
        break;
      default:
        m = v1::COPY_ENGINE;
        break;
    }
  }
  setup_.method = m;
  absl::Status s;
  switch (c.bench()) {
    case v1::BENCH_P2P:
      s = PrepareP2p(c, m, /*latency=*/false);
      break;
    case v1::BENCH_LATENCY:
      s = PrepareLatency(c, m);
      break;
    case v1::BENCH_HOST_DEVICE:
      s = PrepareHostDevice(c, m);
      break;
    case v1::BENCH_LOCAL_COPY:
      s = PrepareLocalCopy(c, m);
      break;
    case v1::BENCH_TRIAD:
      s = PrepareTriad(c);
      break;
    case v1::BENCH_GEMM:
      s = PrepareGemm(c);
      break;
    default:
      s = absl::InvalidArgumentError("not a node benchmark");
  }
  if (!s.ok()) return s;
  RM_CU(cudaDeviceSynchronize());
  if (!setup_.active) {
    setup_.bytes_per_op = 0;
    setup_.flops_per_op = 0;
    setup_.hops_per_op = 0;
  }
  return setup_;
}

std::function<cudaError_t(cudaStream_t)> CudaNodeBench::Impl::CopyOp(
    v1::CopyMethod m, void* dst, const void* src, int64_t bytes) {
  if (m == v1::SM) {
    const int threads = EnvInt("RINGMASTER_SM_COPY_THREADS", 512);
    const int blocks = sms_ * EnvInt("RINGMASTER_SM_COPY_BLOCKS_PER_SM", 1);
    return [=](cudaStream_t s) {
      return LaunchSmCopy(dst, src, bytes, blocks, threads, s);
    };
  }
  return [=](cudaStream_t s) {
    return cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, s);
  };
}

// Checks that `c`'s ranks are on this host with peer access; the same
// decision on every rank.
absl::Status CudaNodeBench::Impl::CheckPeers(
    const std::vector<Transfer>& transfers, bool* no_peer_access) {
  for (const Transfer& t : transfers) {
    for (int r : {t.to, t.from}) {
      if (r < 0 || r >= size_) {
        return absl::UnimplementedError(absl::StrFormat(
            "rank %d does not exist in this launch of %d ranks", r, size_));
      }
      if (hosts_[r] != hosts_[t.issuer]) {
        return absl::UnimplementedError(
            absl::StrFormat("ranks %d and %d are on different hosts (%s, "
                            "%s): P2P copies measure GPU pairs "
                            "within a node",
                            t.issuer, r, hosts_[t.issuer], hosts_[r]));
      }
    }
  }
  // Peer access as this rank sees it, for the transfers it issues.
  for (const Transfer& t : transfers) {
    if (t.issuer != rank_) continue;
    int other = t.to == rank_ ? t.from : t.to;
    int dev = peer_device_[other];
    if (dev < 0) {
      return absl::UnimplementedError(
          absl::StrFormat("rank %d's GPU (%s) is not visible to rank %d "
                          "(CUDA_VISIBLE_DEVICES?): peer "
                          "copies need every GPU of the node visible",
                          other, bus_ids_[other], rank_));
    }
    int can = 0;
    RM_CU(cudaDeviceCanAccessPeer(&can, device_, dev));
    // RINGMASTER_P2P_HOST_PATH=1 takes the host path even with peer
    // access (to test it on machines where every pair has P2P).
    if (no_peer_access != nullptr &&
        (!can || EnvInt("RINGMASTER_P2P_HOST_PATH", 0) == 1)) {
      *no_peer_access = true;
      continue;
    }
    if (!can) {
      return absl::UnimplementedError(
          absl::StrFormat("no peer access from GPU %s to GPU %s "
                          "(cudaDeviceCanAccessPeer = 0); their host "
                          "path is what bench: host_device measures",
                          bus_id_, bus_ids_[other]));
    }
  }
  return absl::OkStatus();
}

// ---- Timing -------------------------------------------------------------

absl::StatusOr<double> CudaNodeBench::Impl::TimeOps(int iters) {
  RM_CU(cudaSetDevice(device_));
  if (staged_case_) return TimeStaged(iters);
  const bool active = setup_.active && !work_.empty();
  if (host_timed_) {
    if (auto s = control.Barrier(); !s.ok()) return s;
    if (!active) return 0.0;
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) {
      for (size_t k = 0; k < work_.size(); ++k) {
        for (auto& op : work_[k]) RM_CU(op(streams_[k]));
      }
    }
    for (size_t k = 0; k < work_.size(); ++k)
      RM_CU(cudaStreamSynchronize(streams_[k]));
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
        .count();
  }
  flag_[0] = 0;
  flag_[1] = 0;
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (active) {
    for (size_t k = 0; k < work_.size(); ++k) {
      cudaStream_t s = streams_[k];
      RM_CU(LaunchSpinWait(flag_dev_, kSpinTimeoutNs, s));
      RM_CU(cudaEventRecord(starts_[k], s));
      for (int i = 0; i < iters; ++i) {
        for (auto& op : work_[k]) RM_CU(op(s));
      }
      RM_CU(cudaEventRecord(stops_[k], s));
    }
  }
  // Every rank's work is queued: release all at once.
  absl::Status b = control.Barrier();
  flag_[0] = 1;
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (!b.ok()) return b;
  if (!active) return 0.0;
  double secs = 0;
  for (size_t k = 0; k < work_.size(); ++k) {
    RM_CU(cudaEventSynchronize(stops_[k]));
    float ms = 0;
    RM_CU(cudaEventElapsedTime(&ms, starts_[k], stops_[k]));
    secs = std::max(secs, ms / 1e3);
  }
  if (flag_[1] != 0)
    return absl::DeadlineExceededError("the spin kernel timed out");
  return secs;
}

// ---- Verification -----------------------------------------------------

absl::StatusOr<int64_t> CudaNodeBench::Impl::CountDevice(const uint8_t* data,
                                                         int64_t bytes,
                                                         uint32_t seed) {
  RM_CU(cudaMemset(wrong_, 0, sizeof *wrong_));
  RM_CU(LaunchCountPattern(data, bytes, seed, wrong_, nullptr));
  unsigned long long w = 0;
  RM_CU(cudaMemcpy(&w, wrong_, sizeof w, cudaMemcpyDeviceToHost));
  return static_cast<int64_t>(w);
}

CudaNodeBench::CudaNodeBench(std::unique_ptr<Impl> impl)
    : impl_(std::move(impl)) {}
CudaNodeBench::~CudaNodeBench() = default;

absl::StatusOr<std::unique_ptr<CudaNodeBench>> CudaNodeBench::Create(
    Control& control, int device) {
  auto impl = std::make_unique<Impl>(control);
  impl->device_ = device;
  if (absl::Status s = impl->Init(); !s.ok()) return s;
  return std::unique_ptr<CudaNodeBench>(new CudaNodeBench(std::move(impl)));
}

absl::StatusOr<BenchSetup> CudaNodeBench::Prepare(const v1::Case& c) {
  return impl_->Prepare(c);
}
absl::StatusOr<double> CudaNodeBench::TimeOps(int iters) {
  return impl_->TimeOps(iters);
}
absl::StatusOr<int64_t> CudaNodeBench::Verify() { return impl_->Verify(); }
double CudaNodeBench::rel_error() const { return impl_->rel_error_; }

}  // namespace ringmaster
