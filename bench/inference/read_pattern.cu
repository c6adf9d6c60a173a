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
// into registers, 8 to 21 rows in flight per thread; then what one SM
// pulls when a quarter or a half of the SMs read (bulk copies by size,
// plain loads, tensor copies of 4 or 8 rows of a warp's slice).
//   nvcc -std=c++17 -arch=sm_90 -O3 -I . -o read_pattern \
//     bench/inference/read_pattern.cu   (from the repository root)
//   ./read_pattern [rows cols]   (bf16 elements; default 4096 x 28672)
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "kernels/tensor_map_encoder.h"

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

__device__ __forceinline__ unsigned SharedAddress(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// A warp's ring of kSt slots of kSlot bytes at `mine` (mbarriers `bar`),
// read `walk.total` times: lane 0 fills slot s by copy(slot's shared
// address, its mbarrier's, the walk's next index), a copy that completes
// kSlot bytes on the mbarrier; every lane reads its 16-byte pieces of each
// slot as it completes, then the slot is filled again. Returns a value of
// the bytes read (so that the reads stay).
template <int kSlot, int kSt, typename Copy>
__device__ uint32_t RunRing(WindowWalk& walk, char* mine, uint64_t* bar,
                            Copy copy) {
  const int lane = threadIdx.x % 32;
  const int64_t total = walk.total;
  if (lane == 0) {
    for (int i = 0; i < kSt; ++i)
      asm volatile(
          "mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(SharedAddress(&bar[i]))
          : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncwarp();
  auto issue = [&](int64_t n, int slot) {
    const int64_t next = walk.Next();
    if (lane != 0 || n >= total) return;
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(
                     SharedAddress(&bar[slot])),
                 "r"(kSlot)
                 : "memory");
    copy(SharedAddress(mine + slot * kSlot), SharedAddress(&bar[slot]), next);
  };
  for (int i = 0; i < kSt; ++i) issue(i, i);
  uint32_t acc = 0;
  int slot = 0;
  unsigned parity = 0;
  for (int64_t n = 0; n < total; ++n) {
    asm volatile(
        "{\n.reg .pred done;\nW_%=:\n"
        "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
        "@!done bra W_%=;\n}" ::"r"(SharedAddress(&bar[slot])),
        "r"(parity)
        : "memory");
    const uint4* v = reinterpret_cast<const uint4*>(mine + slot * kSlot);
#pragma unroll
    for (int c = 0; c < kSlot / 512; ++c) {
      const uint4 x = v[lane + 32 * c];
      acc ^= x.x ^ x.y ^ x.z ^ x.w;
    }
    __syncwarp();
    issue(n + kSt, slot);
    if (++slot == kSt) slot = 0, parity ^= 1u;
  }
  return acc;
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
  const int warp = threadIdx.x / 32;
  WindowWalk walk;
  if (!walk.Begin(blockIdx.x * int64_t{kWarps} + warp,
                  gridDim.x * int64_t{kWarps}, rows, row_bytes, kSeg, passes))
    return;
  const char* base = w + walk.tile * kSeg;
  const uint32_t acc = RunRing<kSeg, kSt>(
      walk, reinterpret_cast<char*>(ring) + int64_t{warp} * kSt * kSeg,
      bars + warp * kSt, [&](unsigned dst, unsigned bar, int64_t r) {
        asm volatile(
            "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes "
            "[%0], [%1], %2, [%3];" ::"r"(dst),
            "l"(base + r * row_bytes), "r"(kSeg), "r"(bar)
            : "memory");
      });
  if (acc == 0x12345u) sink[0] = 1;
}

// The window of BulkWindow with each slot a box of kBox consecutive rows of
// the warp's 512-byte slice, one tensor copy (a 2-D tensor map over the
// matrix) per slot: as many bytes per copy as a kBox * 512-byte bulk copy,
// from the row-major matrix as it is. Rows are read in groups of kBox, every
// R-th group per warp.
template <int kBox, int kSt>
__global__ void __launch_bounds__(kThreads, 1)
    TensorWindow(const __grid_constant__ CUtensorMap map, int64_t rows,
                 int64_t row_bytes, int passes, float* sink) {
  constexpr int kWarps = kThreads / 32, kSlot = 512 * kBox;
  extern __shared__ __align__(128) uint4 ring[];
  __shared__ uint64_t bars[kSt * kWarps];
  const int warp = threadIdx.x / 32;
  WindowWalk walk;
  if (!walk.Begin(blockIdx.x * int64_t{kWarps} + warp,
                  gridDim.x * int64_t{kWarps}, rows / kBox, row_bytes, 512,
                  passes))
    return;
  const int col = static_cast<int>(walk.tile * 256);
  const uint32_t acc = RunRing<kSlot, kSt>(
      walk, reinterpret_cast<char*>(ring) + int64_t{warp} * kSt * kSlot,
      bars + warp * kSt, [&](unsigned dst, unsigned bar, int64_t g) {
        asm volatile(
            "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::"
            "complete_tx::bytes [%0], [%1, {%2, %3}], [%4];" ::"r"(dst),
            "l"(&map), "r"(col), "r"(static_cast<int>(g * kBox)), "r"(bar)
            : "memory");
      });
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
  // BulkWindow<seg, stages> on `blocks` blocks: its name, and the
  // microseconds per launch.
  auto bulk_name = [](int seg, int stages) {
    char name[64];
    std::snprintf(name, sizeof(name), "bulk window, %d B x %d", seg, stages);
    return std::string(name);
  };
  auto bulk_run = [&](auto kernel, int seg, int stages, int blocks) {
    const size_t ring_bytes = size_t{16} * seg * stages;
    cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                         static_cast<int>(ring_bytes));
    return timed([&] {
      kernel<<<blocks, kThreads, ring_bytes>>>(w, rows, row_bytes, kPasses,
                                               sink);
    });
  };
  auto bulk = [&](auto kernel, int seg, int stages) {
    steady(bulk_name(seg, stages).c_str(), bulk_run(kernel, seg, stages, sms));
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
  // A 2-D tensor map over the matrix (bf16, row-major), boxes of 256
  // columns by `box` rows, for TensorWindow (false where the driver has no
  // encoder).
  auto tensor_map = [&](int box, CUtensorMap* map) {
    const auto encode = ringmaster::tk::TensorMapEncoder();
    if (encode == nullptr) return false;
    const cuuint64_t dims[2] = {static_cast<cuuint64_t>(cols),
                                static_cast<cuuint64_t>(rows)};
    const cuuint64_t strides[1] = {static_cast<cuuint64_t>(row_bytes)};
    const cuuint32_t boxes[2] = {256, static_cast<cuuint32_t>(box)};
    const cuuint32_t steps[2] = {1, 1};
    return encode(map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, w, dims, strides,
                  boxes, steps, CU_TENSOR_MAP_INTERLEAVE_NONE,
                  CU_TENSOR_MAP_SWIZZLE_NONE,
                  CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                  CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
  };
  // TensorWindow<box, stages> on `blocks` blocks: microseconds per launch,
  // or a negative value where the map could not be made.
  auto tensor_run = [&](auto kernel, int box, int stages, int blocks) {
    CUtensorMap map;
    if (!tensor_map(box, &map)) return -1.0;
    const size_t ring_bytes = size_t{16} * 512 * box * stages;
    cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                         static_cast<int>(ring_bytes));
    return timed([&] {
      kernel<<<blocks, kThreads, ring_bytes>>>(map, rows, row_bytes, kPasses,
                                               sink);
    });
  };
  auto tensor_name = [](int box, int stages) {
    char name[64];
    std::snprintf(name, sizeof(name), "tensor window, %d rows x %d", box,
                  stages);
    return std::string(name);
  };
  auto tensor_full = [&](auto kernel, int box, int stages) {
    const std::string name = tensor_name(box, stages);
    const double us = tensor_run(kernel, box, stages, sms);
    if (us < 0) {
      std::printf("steady (%d passes per launch), %-38s: no tensor map\n",
                  kPasses, name.c_str());
      return;
    }
    steady(name.c_str(), us);
  };
  tensor_full(TensorWindow<4, 5>, 4, 5);
  tensor_full(TensorWindow<8, 3>, 8, 3);
  // Per-SM rates: the same reads from a quarter and a half of the SMs, so
  // that HBM has room to spare and what one SM can pull shows, by the size
  // of each copy (a 512-byte bulk copy is the decode step's) and by plain
  // loads.
  for (const int blocks : {sms / 4, sms / 2}) {
    // `active`: the SMs' worth of warps that read (a window leaves the
    // warps past (warps / tiles) * tiles idle).
    auto per_sm = [&](const char* name, double active, double us) {
      const cudaError_t e = cudaGetLastError();
      if (e != cudaSuccess) {
        std::printf("%3d SMs, %-38s: failed: %s\n", blocks, name,
                    cudaGetErrorString(e));
        return;
      }
      const double gbps = kPasses * bytes / us / 1e3;
      std::printf(
          "%3d SMs, %-38s: %7.1f GB/s read, %5.1f GB/s per SM (%.1f SMs "
          "reading)\n",
          blocks, name, gbps, gbps / active, active);
    };
    auto window_sms = [&](int seg) {
      const int64_t tiles = row_bytes / seg, warps = blocks * (kThreads / 32);
      return static_cast<double>(warps / tiles * tiles) / (kThreads / 32);
    };
    auto bulk_on = [&](auto kernel, int seg, int stages) {
      per_sm(bulk_name(seg, stages).c_str(), window_sms(seg),
             bulk_run(kernel, seg, stages, blocks));
    };
    bulk_on(BulkWindow<512, 21>, 512, 21);
    bulk_on(BulkWindow<1024, 10>, 1024, 10);
    bulk_on(BulkWindow<2048, 5>, 2048, 5);
    bulk_on(BulkWindow<4096, 3>, 4096, 3);
    auto tensor_on = [&](auto kernel, int box, int stages) {
      const std::string name = tensor_name(box, stages);
      const double us = tensor_run(kernel, box, stages, blocks);
      if (us < 0) {
        std::printf("%3d SMs, %-38s: no tensor map\n", blocks, name.c_str());
        return;
      }
      per_sm(name.c_str(), window_sms(512), us);
    };
    tensor_on(TensorWindow<4, 5>, 4, 5);
    tensor_on(TensorWindow<8, 3>, 8, 3);
    per_sm("cp.async window, 16 B x 21 per thread", window_sms(512), timed([&] {
             StreamWindow<<<blocks, kThreads, smem>>>(w, rows, row_bytes,
                                                      kPasses, sink);
           }));
    per_sm("plain window, 8 rows in flight", window_sms(512), timed([&] {
             PlainWindow<8>
                 <<<blocks, kThreads>>>(w, rows, row_bytes, kPasses, sink);
           }));
    per_sm("plain window, 16 rows in flight", window_sms(512), timed([&] {
             PlainWindow<16>
                 <<<blocks, kThreads>>>(w, rows, row_bytes, kPasses, sink);
           }));
    per_sm("plain loads, 512 thr/SM, 16 in flight", blocks, timed([&] {
             Plain<16><<<blocks, 512>>>(reinterpret_cast<const uint4*>(w),
                                        bytes / 16, kPasses, sink);
           }));
    per_sm("plain loads, 1024 thr/SM, 8 in flight", blocks, timed([&] {
             Plain<8><<<blocks, 1024>>>(reinterpret_cast<const uint4*>(w),
                                        bytes / 16, kPasses, sink);
           }));
  }
  const cudaError_t err = cudaDeviceSynchronize();
  if (err != cudaSuccess) {
    std::fprintf(stderr, "%s\n", cudaGetErrorString(err));
    return 1;
  }
  return 0;
}
