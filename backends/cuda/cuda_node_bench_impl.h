// CudaNodeBench's implementation, shared by its files (internal to
// backends/cuda): cuda_node_bench.cc (set-up, streams, peer memory, path
// ceilings, timing), cuda_node_bench_cases.cc (copies, latency,
// host<->device, local memory and verification), cuda_node_bench_gemm.cc
// (cuBLASLt GEMM).
#ifndef RINGMASTER_BACKENDS_CUDA_CUDA_NODE_BENCH_IMPL_H_
#define RINGMASTER_BACKENDS_CUDA_CUDA_NODE_BENCH_IMPL_H_

#include <cublasLt.h>
#include <cuda_runtime.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <numeric>
#include <random>
#include <vector>

#include "absl/strings/str_format.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_node_bench.h"
#include "backends/cuda/nvml.h"
#include "core/names.h"
#include "core/placement.h"
#include "kernels/node_kernels.h"
#include "kernels/patterns.h"

namespace ringmaster {

// Errors name the call, file:line and this rank.
#define RM_CU(expr) RM_CUDA(expr, rank_)
#define RM_LT(expr) RM_CUBLAS(expr, rank_)

// Spin kernels give up after this much GPU time, so a rank that never
// releases its stream cannot hang the GPU forever.
inline constexpr uint64_t kSpinTimeoutNs = 60ull * 1000 * 1000 * 1000;
// Pointer chase: nodes 128 B apart in a random cycle over 2 MiB (fits the
// target's L2, so the figure is the path's latency, not DRAM's), and the
// dependent loads per operation.
inline constexpr int64_t kChaseBytes = 2 << 20;
inline constexpr int64_t kChaseStride = 128;
inline constexpr int64_t kChaseHops = 4096;
inline constexpr int kGemmSamples =
    256;  // output elements checked against float64

inline int EnvInt(const char* name, int fallback) {
  const char* v = std::getenv(name);
  int out = 0;
  if (v == nullptr || sscanf(v, "%d", &out) != 1 || out <= 0) return fallback;
  return out;
}

// Per-direction NVLink bandwidth of one link in GB/s, by the GPU's
// compute capability (NVLink 2, 3, 4 carry 25 GB/s per direction per link;
// NVLink 5 carries 50). 0 when unknown.
inline double NvlinkLinkGbps(int major) {
  if (major >= 10) return 50.0;
  if (major >= 7) return 25.0;
  return 0;
}

// Per-direction PCIe payload ceiling: lanes x transfer rate x encoding.
inline double PcieGbps(unsigned gen, unsigned width) {
  double gts = 0, enc = 128.0 / 130.0;
  switch (gen) {
    case 1:
      gts = 2.5;
      enc = 0.8;
      break;
    case 2:
      gts = 5.0;
      enc = 0.8;
      break;
    case 3:
      gts = 8.0;
      break;
    case 4:
      gts = 16.0;
      break;
    case 5:
      gts = 32.0;
      break;
    case 6:
      gts = 64.0;
      enc = 242.0 / 256.0;
      break;
    default:
      return 0;
  }
  return gts * width * enc / 8.0;
}

// One copy of a p2p pattern: bytes go from `from` rank's source buffer to
// `to` rank's destination buffer slot `slot`; `issuer` runs it.
struct Transfer {
  int issuer, to, slot, from;
};

inline std::vector<Transfer> PatternTransfers(const v1::Case& c, int n) {
  std::vector<Transfer> t;
  const bool write = c.direction() != v1::READ;
  auto add = [&](int from, int to, int slot) {
    t.push_back({write ? from : to, to, slot, from});
  };
  switch (c.pattern()) {
    case v1::ALL_TO_ONE:
      for (int r = 0; r < n; ++r) {
        if (r != c.dst_rank())
          add(r, c.dst_rank(), r < c.dst_rank() ? r : r - 1);
      }
      break;
    case v1::ONE_TO_ALL:
      for (int r = 0; r < n; ++r) {
        if (r != c.src_rank()) add(c.src_rank(), r, 0);
      }
      break;
    default:
      add(c.src_rank(), c.dst_rank(), 0);
      if (c.bidirectional()) add(c.dst_rank(), c.src_rank(), 0);
      break;
  }
  return t;
}

inline uint32_t Seed(const v1::Case& c, int rank) {
  return static_cast<uint32_t>(c.seq() * 131 + rank + 1);
}

struct CudaNodeBench::Impl {
  Control& control;
  int rank_ = 0, size_ = 1, device_ = 0, sms_ = 0, cc_major_ = 0;
  std::string bus_id_;
  std::vector<std::string> hosts_, bus_ids_;
  std::vector<int>
      peer_device_;  // each rank's GPU in this process's numbering, -1 if none

  v1::Case case_;
  BenchSetup setup_;

  // Streams and their start/stop events, created on first use.
  std::vector<cudaStream_t> streams_;
  std::vector<cudaEvent_t> starts_, stops_;
  volatile int* flag_ = nullptr;  // host-mapped: [0] release, [1] timed out
  int* flag_dev_ = nullptr;

  // Per-operation work: one list of enqueue functions per stream.
  std::vector<std::vector<std::function<cudaError_t(cudaStream_t)>>> work_;
  bool host_timed_ = false;  // pageable copies: host clock, no spin

  // Copy buffers (device) and their peers' IPC mappings.
  int64_t buf_size_ = 0;
  int buf_slots_ = 0;
  uint8_t* src_ = nullptr;
  uint8_t* dst_ = nullptr;
  bool ipc_ = false;
  std::vector<uint8_t*> peer_src_, peer_dst_;

  // Pointer-chase chains: device (shared over IPC) and pinned host.
  uint64_t* chain_ = nullptr;
  std::vector<uint64_t*> peer_chain_;
  uint64_t* host_chain_ = nullptr;
  uint64_t* host_chain_dev_ = nullptr;
  uint64_t* sink_ = nullptr;
  uint64_t expected_chase_end_ = 0;
  const uint64_t* chase_base_ = nullptr;

  // Host buffers for host<->device.
  uint8_t* pinned_ = nullptr;
  int64_t pinned_size_ = 0;
  std::vector<uint8_t> pageable_;

  // Triad arrays.
  float* triad_ = nullptr;
  int64_t triad_n_ = 0;

  // GEMM.
  cublasLtHandle_t lt_ = nullptr;
  void* workspace_ = nullptr;
  size_t workspace_size_ = 64ull << 20;
  void *ga_ = nullptr, *gb_ = nullptr, *gd_ = nullptr;
  cublasLtMatmulDesc_t gdesc_ = nullptr;
  cublasLtMatrixLayout_t la_ = nullptr, lb_ = nullptr, ld_ = nullptr;
  cublasLtMatmulAlgo_t galgo_{};
  GemmRefArgs gref_{};
  double* gref_out_ = nullptr;
  double rel_error_ = 0;

  unsigned long long* wrong_ = nullptr;  // device counter

  // Host-staged path of pairs without peer access.
  bool staged_case_ = false;
  int staged_src_ = -1, staged_dst_ = -1;
  uint8_t* staged_ = nullptr;
  int64_t staged_size_ = 0;
  int staged_fd_ = -1;

  explicit Impl(Control& c) : control(c) {}

  ~Impl();

  absl::Status Init();

  absl::Status EnsureStreams(int n);

  std::string Placement() const;

  // ---- Copy buffers and IPC ---------------------------------------------

  void CloseIpc();

  // Destination slots for cases that use one: the current count when the
  // size is unchanged (no reallocation), else 1.
  int SlotsFor(int64_t size) const;

  // Collective: every rank calls it with the same size and slots.
  absl::Status EnsureCopyBuffers(int64_t size, int slots);

  // Collective: exports this rank's copy buffers and chain, maps the peers'
  // of the same host.
  absl::Status EnsureIpc();

  // A random cycle through kChaseBytes / kChaseStride nodes; entry values
  // are offsets in 8-byte words from the chain's base. The same on every
  // rank (fixed seed), so an issuer can predict where a chase ends.
  std::vector<uint64_t> ChainWords() const;

  uint64_t ChaseEnd(int64_t hops) const;

  absl::Status MakeChain();

  absl::Status EnsurePinned(int64_t bytes);

  // ---- Path ceilings --------------------------------------------------------

  // NVLink (links x per-link rate) or PCIe between this GPU and rank r's.
  void PeerPath(int r, std::string* path, double* gbps,
                std::string* source) const;

  void PciePath(double* gbps, std::string* source) const;

  double HbmGbps(std::string* source) const;

  // ---- Prepare ------------------------------------------------------------

  absl::StatusOr<BenchSetup> Prepare(const v1::Case& c);

  std::function<cudaError_t(cudaStream_t)> CopyOp(v1::CopyMethod m, void* dst,
                                                  const void* src,
                                                  int64_t bytes);

  // Checks that `c`'s ranks are on this host with peer access; the same
  // decision on every rank.
  absl::Status CheckPeers(const std::vector<Transfer>& transfers,
                          bool* no_peer_access = nullptr);

  absl::Status PrepareP2p(const v1::Case& c, v1::CopyMethod m, bool latency);

  // GPUs without peer access: the source copies into pinned host memory
  // shared by both ranks (POSIX shared memory registered with CUDA), the
  // destination copies it out. The two copies run one after the other, as
  // the host path of such a pair does without pipelining; one operation is
  // timed on the source from the start of its copy to the end of the
  // destination's.
  absl::Status PrepareHostStaged(const v1::Case& c);

  void ReleaseStaged();

  absl::StatusOr<double> TimeStaged(int iters);

  absl::Status PrepareLatency(const v1::Case& c, v1::CopyMethod m);

  absl::Status PrepareHostDevice(const v1::Case& c, v1::CopyMethod m);

  absl::Status PrepareLocalCopy(const v1::Case& c, v1::CopyMethod m);

  absl::Status PrepareTriad(const v1::Case& c);

  void FreeGemm();

  cudaError_t RunGemm(cudaStream_t s, const cublasLtMatmulAlgo_t* algo);

  absl::Status PrepareGemm(const v1::Case& c);

  // ---- Timing -------------------------------------------------------------

  absl::StatusOr<double> TimeOps(int iters);

  // ---- Verification -----------------------------------------------------

  absl::StatusOr<int64_t> CountDevice(const uint8_t* data, int64_t bytes,
                                      uint32_t seed);

  absl::StatusOr<int64_t> Verify();
};

}  // namespace ringmaster

#endif  // RINGMASTER_BACKENDS_CUDA_CUDA_NODE_BENCH_IMPL_H_
