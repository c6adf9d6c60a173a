// How fast one persistent block per SM streams a weight matrix from HBM
// through a per-thread cp.async ring of shared memory (the fused decode
// step's ring; it fills its slots by bulk copies, which measured the same),
// by how the matrix is dealt out: each block a contiguous range of 16-byte
// pieces (consecutive threads consecutive pieces; segments of `seg` bytes
// numbered tile-major, all rows of a column segment before the next), those
// ranges dealt out to the blocks in turn (interleaved), or a window of whole
// rows per step with a fixed 512-byte slice per warp (the decode step's
// way); then plain loads from every resident thread. Last, steady rates
// (each launch reads the matrix 4 times, so its ramp and tail weigh less):
// plain loads from 2,048 down to 512 threads per SM, the window through
// the cp.async ring, the window through bulk copies (the step's way)
// of 512 B to 4 KiB per warp and slot, and the window by plain loads
// into registers, 8 to 21 rows in flight per thread.
//   nvcc -std=c++17 -arch=sm_90 -O3 -o read_pattern read_pattern.cu
//   ./read_pattern [rows cols]   (bf16 elements; default 4096 x 28672)
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

namespace {

constexpr int kThreads = 512;
constexpr int kStages = 21;

__device__ __forceinline__ void CpAsync16(void* smem, const void* gmem) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(s), "l"(gmem)
               : "memory");
}

// A warp's part of the window (StreamWindow below): the column slice
// `tile` of `slice` bytes, rows first, first + step, ... with step = (warps
// in the grid) / tiles, so that at each step the grid reads `step` whole
// consecutive rows; `total` rows read, `passes` times over the matrix.
// Begin is false for a warp with no slice.
struct WindowWalk {
  int64_t tile = 0, first = 0, step = 0, rows = 0, total = 0, next = 0;
  __device__ bool Begin(int64_t gw, int64_t warps, int64_t n_rows,
                        int64_t row_bytes, int64_t slice, int passes) {
    const int64_t tiles = row_bytes / slice;
    step = warps / tiles;
    if (step == 0 || gw >= step * tiles) return false;
    tile = gw % tiles;
    first = gw / tiles;
    rows = n_rows;
    total = (rows - first + step - 1) / step * passes;
    next = first;
    return true;
  }
  // The row of the warp's next read, passes in turn.
  __device__ int64_t Next() {
    const int64_t r = next;
    next += step;
    if (next >= rows) next = first;
    return r;
  }
};

__global__ void __launch_bounds__(kThreads, 1)
    Stream(const char* w, int64_t rows, int64_t row_bytes, int64_t seg,
           bool interleaved, float* sink) {
  extern __shared__ uint4 ring[];
  const int64_t pieces = rows * row_bytes / 16, per_seg = seg / 16;
  // Interleaved: the blocks' ranges are dealt out kThreads pieces at a
  // time (block b's i-th group of pieces is group i * gridDim.x + b), so
  // the grid reads one window of the matrix at a time.
  const int64_t groups = pieces / kThreads;
  const int64_t s = interleaved ? 0 : pieces * blockIdx.x / gridDim.x,
                e = interleaved ? (groups - blockIdx.x + gridDim.x - 1) /
                                      gridDim.x * kThreads
                                : pieces * (blockIdx.x + 1) / gridDim.x;
  auto address = [&](int64_t c) {
    if (interleaved)
      c = (c / kThreads * gridDim.x + blockIdx.x) * kThreads + c % kThreads;
    const int64_t sl = c / per_seg, within = c % per_seg;
    const int64_t tile = sl / rows, row = sl % rows;
    return w + row * row_bytes + tile * seg + within * 16;
  };
  int64_t issue = s + threadIdx.x;
  for (int i = 0; i < kStages; ++i) {
    if (issue < e) CpAsync16(&ring[i * kThreads + threadIdx.x], address(issue));
    issue += kThreads;
    asm volatile("cp.async.commit_group;" ::: "memory");
  }
  float acc = 0;
  int slot = 0;
  for (int64_t c = s + threadIdx.x; c < e; c += kThreads) {
    asm volatile("cp.async.wait_group %0;" ::"n"(kStages - 1) : "memory");
    const uint4 v = ring[slot * kThreads + threadIdx.x];
    acc += __uint_as_float(v.x ^ v.y ^ v.z ^ v.w);
    if (issue < e)
      CpAsync16(&ring[slot * kThreads + threadIdx.x], address(issue));
    issue += kThreads;
    asm volatile("cp.async.commit_group;" ::: "memory");
    slot = slot + 1 == kStages ? 0 : slot + 1;
  }
  if (acc == 1.2345f) sink[0] = acc;  // keeps the reads
}

// The ring again, each warp keeping one 512-byte column slice (tile) and
// reading every R-th row of it, R = (warps in the grid) / tiles, so that at
// each step the grid reads R whole consecutive rows: a window of the matrix
// at a time, with a fixed slice (one accumulator) per warp; `passes` times
// over the matrix in one launch.
__global__ void __launch_bounds__(kThreads, 1)
    StreamWindow(const char* w, int64_t rows, int64_t row_bytes, int passes,
                 float* sink) {
  extern __shared__ uint4 ring[];
  WindowWalk walk;
  if (!walk.Begin(blockIdx.x * int64_t{kThreads / 32} + threadIdx.x / 32,
                  gridDim.x * int64_t{kThreads / 32}, rows, row_bytes, 512,
                  passes))
    return;
  const char* base = w + walk.tile * 512 + (threadIdx.x % 32) * 16;
  const int64_t total = walk.total;
  for (int i = 0; i < kStages; ++i) {
    const int64_t r = walk.Next();
    if (i < total)
      CpAsync16(&ring[i * kThreads + threadIdx.x], base + r * row_bytes);
    asm volatile("cp.async.commit_group;" ::: "memory");
  }
  float acc = 0;
  int slot = 0;
  for (int64_t n = 0; n < total; ++n) {
    asm volatile("cp.async.wait_group %0;" ::"n"(kStages - 1) : "memory");
    const uint4 v = ring[slot * kThreads + threadIdx.x];
    acc += __uint_as_float(v.x ^ v.y ^ v.z ^ v.w);
    const int64_t r = walk.Next();
    if (n + kStages < total)
      CpAsync16(&ring[slot * kThreads + threadIdx.x], base + r * row_bytes);
    asm volatile("cp.async.commit_group;" ::: "memory");
    slot = slot + 1 == kStages ? 0 : slot + 1;
  }
  if (acc == 1.2345f) sink[0] = acc;
}

// The same bytes by plain 16-byte loads (ld.global.cs), U per thread in
// flight, a grid-stride loop over every resident thread, `passes` times
// over the matrix in one launch: the read rate the ring is measured
// against.
template <int U>
__global__ void Plain(const uint4* w, int64_t n, int passes, float* sink) {
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  uint32_t acc = 0;
  for (int p = 0; p < passes; ++p) {
    int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
    for (; i + (U - 1) * stride < n; i += U * stride) {
      uint4 v[U];
#pragma unroll
      for (int u = 0; u < U; ++u) v[u] = __ldcs(w + i + u * stride);
#pragma unroll
      for (int u = 0; u < U; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
    }
    for (; i < n; i += stride) {
      const uint4 v = __ldcs(w + i);
      acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
  }
  if (acc == 0x12345u) sink[0] = 1;
}

// The decode step's ring as it fills it: one bulk copy (tensor memory
// accelerator) of kSeg bytes per warp and slot, completing on the slot's
// mbarrier, each warp keeping one kSeg-byte column slice and reading every
// R-th row (the window above), in a ring of kSt slots; the matrix read
// `passes` times in one launch, so the rate is the steady one, without a
// launch's ramp and tail.
template <int kSeg, int kSt>
__global__ void __launch_bounds__(kThreads, 1)
    BulkWindow(const char* w, int64_t rows, int64_t row_bytes, int passes,
               float* sink) {
  constexpr int kWarps = kThreads / 32;
  extern __shared__ uint4 ring[];
  __shared__ uint64_t bars[kSt * kWarps];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  WindowWalk walk;
  if (!walk.Begin(blockIdx.x * int64_t{kWarps} + warp,
                  gridDim.x * int64_t{kWarps}, rows, row_bytes, kSeg, passes))
    return;
  const int64_t total = walk.total;
  char* mine = reinterpret_cast<char*>(ring) + int64_t{warp} * kSt * kSeg;
  uint64_t* bar = bars + warp * kSt;
  auto saddr = [](const void* p) {
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
  };
  if (lane == 0) {
    for (int i = 0; i < kSt; ++i)
      asm volatile(
          "mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(saddr(&bar[i]))
          : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncwarp();
  const char* base = w + walk.tile * kSeg;
  auto issue = [&](int64_t n, int slot) {
    const int64_t r = walk.Next();
    if (lane != 0 || n >= total) return;
    const char* src = base + r * row_bytes;
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(
                     saddr(&bar[slot])),
                 "r"(kSeg)
                 : "memory");
    asm volatile(
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes "
        "[%0], [%1], %2, [%3];" ::"r"(saddr(mine + slot * kSeg)),
        "l"(src), "r"(kSeg), "r"(saddr(&bar[slot]))
        : "memory");
  };
  for (int i = 0; i < kSt; ++i) issue(i, i);
  uint32_t acc = 0;
  int slot = 0;
  unsigned parity = 0;
  for (int64_t n = 0; n < total; ++n) {
    asm volatile(
        "{\n.reg .pred done;\nW_%=:\n"
        "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
        "@!done bra W_%=;\n}" ::"r"(saddr(&bar[slot])),
        "r"(parity)
        : "memory");
    const uint4* v = reinterpret_cast<const uint4*>(mine + slot * kSeg);
#pragma unroll
    for (int c = 0; c < kSeg / 512; ++c) {
      const uint4 x = v[lane + 32 * c];
      acc ^= x.x ^ x.y ^ x.z ^ x.w;
    }
    __syncwarp();
    issue(n + kSt, slot);
    if (++slot == kSt) slot = 0, parity ^= 1u;
  }
  if (acc == 0x12345u) sink[0] = 1;
}

// The window of BulkWindow (512-byte slices, a warp per slice, every
// R-th row) read by plain 16-byte loads into registers instead of a ring
// of shared memory: each thread keeps D rows in flight, loading row n + D
// as it uses row n; the matrix read `passes` times in one launch.
template <int D>
__global__ void __launch_bounds__(kThreads, 1)
    PlainWindow(const char* w, int64_t rows, int64_t row_bytes, int passes,
                float* sink) {
  constexpr int kWarps = kThreads / 32;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  WindowWalk walk;
  if (!walk.Begin(blockIdx.x * int64_t{kWarps} + warp,
                  gridDim.x * int64_t{kWarps}, rows, row_bytes, 512, passes))
    return;
  const int64_t total = walk.total;
  const char* base = w + walk.tile * 512 + lane * 16;
  auto load = [&](int64_t n) {
    const int64_t r = walk.Next();
    return n < total
               ? __ldcs(reinterpret_cast<const uint4*>(base + r * row_bytes))
               : make_uint4(0, 0, 0, 0);
  };
  uint4 buf[D];
#pragma unroll
  for (int u = 0; u < D; ++u) buf[u] = load(u);
  uint32_t acc = 0;
  for (int64_t n = 0; n < total; n += D) {
#pragma unroll
    for (int u = 0; u < D; ++u) {
      acc ^= buf[u].x ^ buf[u].y ^ buf[u].z ^ buf[u].w;
      buf[u] = load(n + u + D);
    }
  }
  if (acc == 0x12345u) sink[0] = 1;
}

}  // namespace

int main(int argc, char** argv) {
  const int64_t rows = argc > 2 ? std::atoll(argv[1]) : 4096;
  const int64_t cols = argc > 2 ? std::atoll(argv[2]) : 28672;
  const int64_t row_bytes = cols * 2, bytes = rows * row_bytes;
  char* w = nullptr;
  float* sink = nullptr;
  if (cudaMalloc(&w, bytes) != cudaSuccess ||
      cudaMalloc(&sink, sizeof(float)) != cudaSuccess) {
    std::fprintf(stderr, "cudaMalloc failed\n");
    return 1;
  }
  cudaMemset(w, 1, bytes);
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  const size_t smem = size_t{kStages} * kThreads * 16;
  cudaFuncSetAttribute(Stream, cudaFuncAttributeMaxDynamicSharedMemorySize,
                       static_cast<int>(smem));
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  std::printf(
      "matrix %lld x %lld bf16 (%.1f MB), %d blocks x %d threads, "
      "ring %d x 16 B per thread\n",
      static_cast<long long>(rows), static_cast<long long>(cols), bytes / 1e6,
      sms, kThreads, kStages);
  // Microseconds per pass of `launch` (3 warm-up passes, 20 timed).
  auto timed = [&](auto&& launch) {
    for (int i = 0; i < 3; ++i) launch();
    constexpr int kReps = 20;
    cudaEventRecord(a);
    for (int i = 0; i < kReps; ++i) launch();
    cudaEventRecord(b);
    cudaEventSynchronize(b);
    float ms = 0;
    cudaEventElapsedTime(&ms, a, b);
    return ms * 1e3 / kReps;
  };
  const int64_t segs[] = {512, 1024, 2048, 4096, 8192, row_bytes};
  for (int il = 0; il < 2; ++il)
    for (int64_t seg : segs) {
      if (row_bytes % seg != 0 || (il == 1 && seg != 512 && seg != row_bytes))
        continue;
      const double us = timed([&] {
        Stream<<<sms, kThreads, smem>>>(w, rows, row_bytes, seg, il, sink);
      });
      std::printf(
          "ring, %s, segment %6lld B: %8.2f us per pass, %7.1f GB/s "
          "read\n",
          il ? "blocks interleaved" : "a range per block ",
          static_cast<long long>(seg), us, bytes / us / 1e3);
    }
  cudaFuncSetAttribute(StreamWindow,
                       cudaFuncAttributeMaxDynamicSharedMemorySize,
                       static_cast<int>(smem));
  const double window_us = timed([&] {
    StreamWindow<<<sms, kThreads, smem>>>(w, rows, row_bytes, 1, sink);
  });
  std::printf(
      "ring, a window per step   , segment    512 B: %8.2f us per "
      "pass, %7.1f GB/s read\n",
      window_us, bytes / window_us / 1e3);
  auto plain = [&](auto kernel, int blocks_per_sm, int threads,
                   const char* name) {
    const double us = timed([&] {
      kernel<<<sms * blocks_per_sm, threads>>>(
          reinterpret_cast<const uint4*>(w), bytes / 16, 1, sink);
    });
    std::printf("plain loads %-28s: %8.2f us per pass, %7.1f GB/s read\n", name,
                us, bytes / us / 1e3);
  };
  plain(Plain<4>, 4, 512, "(4 in flight, 2048 thr/SM)");
  plain(Plain<8>, 4, 512, "(8 in flight, 2048 thr/SM)");
  plain(Plain<8>, 2, 512, "(8 in flight, 1024 thr/SM)");
  plain(Plain<16>, 1, 512, "(16 in flight, 512 thr/SM)");
  // Steady rates: each launch reads the matrix 4 times.
  constexpr int kPasses = 4;
  // A launch that failed (too much shared memory, say) is named, not timed.
  auto steady = [&](const char* name, double us) {
    const cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) {
      std::printf("steady (%d passes per launch), %-38s: failed: %s\n", kPasses,
                  name, cudaGetErrorString(e));
      return;
    }
    std::printf(
        "steady (%d passes per launch), %-38s: %8.2f us per pass, "
        "%7.1f GB/s read\n",
        kPasses, name, us / kPasses, kPasses * bytes / us / 1e3);
  };
  auto plain_steady = [&](auto kernel, int blocks_per_sm, const char* name) {
    steady(name, timed([&] {
             kernel<<<sms * blocks_per_sm, 512>>>(
                 reinterpret_cast<const uint4*>(w), bytes / 16, kPasses, sink);
           }));
  };
  plain_steady(Plain<4>, 4, "plain loads, 2048 thr/SM, 4 in flight");
  plain_steady(Plain<8>, 2, "plain loads, 1024 thr/SM, 8 in flight");
  plain_steady(Plain<8>, 1, "plain loads, 512 thr/SM, 8 in flight");
  plain_steady(Plain<16>, 1, "plain loads, 512 thr/SM, 16 in flight");
  // The ring's bytes per SM: 21 x 512 B x 16 warps (the decode step's),
  // then as many as shared memory holds.
  auto bulk = [&](auto kernel, int seg, int stages) {
    const size_t ring_bytes = size_t{16} * seg * stages;
    cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                         static_cast<int>(ring_bytes));
    char name[64];
    std::snprintf(name, sizeof(name), "bulk window, %d B x %d", seg, stages);
    steady(name, timed([&] {
             kernel<<<sms, kThreads, ring_bytes>>>(w, rows, row_bytes, kPasses,
                                                   sink);
           }));
  };
  steady("cp.async window, 16 B x 21 per thread", timed([&] {
           StreamWindow<<<sms, kThreads, smem>>>(w, rows, row_bytes, kPasses,
                                                 sink);
         }));
  bulk(BulkWindow<512, 21>, 512, 21);
  bulk(BulkWindow<1024, 10>, 1024, 10);
  bulk(BulkWindow<2048, 5>, 2048, 5);
  bulk(BulkWindow<512, 27>, 512, 27);
  bulk(BulkWindow<2048, 6>, 2048, 6);
  bulk(BulkWindow<4096, 3>, 4096, 3);
  auto plain_window = [&](auto kernel, const char* name) {
    steady(name, timed([&] {
             kernel<<<sms, kThreads>>>(w, rows, row_bytes, kPasses, sink);
           }));
  };
  plain_window(PlainWindow<8>, "plain window, 8 rows in flight");
  plain_window(PlainWindow<12>, "plain window, 12 rows in flight");
  plain_window(PlainWindow<16>, "plain window, 16 rows in flight");
  plain_window(PlainWindow<21>, "plain window, 21 rows in flight");
  const cudaError_t err = cudaDeviceSynchronize();
  if (err != cudaSuccess) {
    std::fprintf(stderr, "%s\n", cudaGetErrorString(err));
    return 1;
  }
  return 0;
}
