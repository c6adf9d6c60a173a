#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernels/decode_step.h"
#include "kernels/tensor_map_encoder.h"
#include "kernels/transformer_uniform.cuh"
#include "kernels/warp_reduce.cuh"

namespace ringmaster::tk {
namespace {

using bf16 = __nv_bfloat16;

// A block: kThreads threads; each warp a ring of kStages slots, each a box
// of kBox consecutive rows of the warp's 256-column slice (4 KiB), filled by
// one 3-D tensor copy through the product's tensor map (columns, rows,
// layers). A product y = x W (W row-major [k x m], m / kTileCols tiles of
// columns) is read a window of whole boxes at a time: with R = (warps in the
// grid) / tiles, warp g keeps tile g % tiles and reads boxes g / tiles, + R,
// + 2R, ..., so at each step the grid reads R * kBox consecutive rows (HBM
// serves such a window faster than a range per block), and each warp sums
// one tile's columns, added to the product's accumulator at the end. A box
// of 8 rows in 2 slots (128 KiB of ring per block) took the step less time
// than 4 rows in 5 slots, 2 in 11 or one in 21: the bytes per copy, more
// than the bytes in flight, set what one SM's copies pull.
constexpr int kThreads = 512;
constexpr int kWarps = kThreads / 32;
constexpr int kBox = 8;
constexpr int kStages = 2;
constexpr int kTileCols = 256;
constexpr int kSegBytes = kTileCols * 2;  // a warp's slice of a row
constexpr int kSlotBytes = kSegBytes * kBox;
constexpr int kSlotVecs = kSlotBytes / 16;
constexpr int kGroups = kThreads / 128;  // attention: groups of 4 warps
constexpr int kKeys = 32;                // keys per attention split
constexpr int kMaxGroup = 4;             // query heads per key head
constexpr int kProducts = 4;             // QKV, O, gate|up, down
constexpr int kTraceStamps = 15;         // per layer: 5 phases x 3

struct AttnSmem {
  float qs[kMaxGroup][128];
  float kcur[128], vcur[128];
  float sc[kMaxGroup][kKeys];
  float part[kMaxGroup * 512];  // pieces x group x head_dim
  float mx[kMaxGroup], sum[kMaxGroup];
};
// Staging (a product's inputs, the residual stream for a norm, the
// attention items' pieces) and attention share kScratchFloats.
constexpr int kScratchFloats = 12288;
constexpr size_t kScratchBytes = kScratchFloats * sizeof(float);
static_assert(kGroups * sizeof(AttnSmem) <= kScratchBytes);
constexpr size_t kRingBytes = size_t{kStages} * kWarps * kSlotBytes;
constexpr size_t kBarrierBytes = size_t{kStages} * kWarps * sizeof(uint64_t);
constexpr size_t kSmemBytes = kRingBytes + kScratchBytes + kBarrierBytes;

struct Params {
  DecodeStepModel m;
  const bf16* x;
  bf16* y;
  int* pos;
  // Views of DecodeStepState.
  float *h, *qkv, *gu, *partial;
  unsigned* barrier;
  int64_t* trace;
  int64_t w3, qw, kw, max_splits;
  // Per product (q as ProductOf): a 3-D tensor map (columns, rows, layers)
  // over its weights in every layer, boxes of kTileCols x kBox x 1.
  CUtensorMap maps[kProducts];
  bool advance;  // *pos + 1 written back once every block has read it
};

// Product q's (k inputs, n outputs) and its weights' offset in a layer,
// for the host (the tensor maps, DecodeStepSupports) and ProductOf.
struct ProductShape {
  int64_t k, n, off;
};
__host__ __device__ ProductShape ShapeOf(const DecodeStepModel& m, int q) {
  const int64_t qw = m.heads * m.head_dim, kw = m.kv_heads * m.head_dim;
  switch (q) {
    case 0:
      return {m.hidden, qw + 2 * kw, m.off_wqkv};
    case 1:
      return {qw, m.hidden, m.off_wo};
    case 2:
      return {m.hidden, 2 * m.ffn, m.off_wgu};
    default:
      return {m.ffn, m.hidden, m.off_wd};
  }
}

// Product q's shape (k inputs, m outputs) and accumulator; its weights
// are read through p.maps[q].
struct Product {
  int64_t k, m;
  float* out;
};

__device__ Product ProductOf(const Params& p, int q) {
  const ProductShape sh = ShapeOf(p.m, q);
  return {sh.k, sh.n, q == 0 ? p.qkv : q == 2 ? p.gu : p.h};
}

// Where warp `gw` of the grid reads product (k, m): its tile, first row
// and rows; the row step; the rows this block's warps start at (lo .. lo +
// starts - 1) and the most rows any warp reads (per).
struct Window {
  int tile = 0, first = 0, rows = 0, step = 0, lo = 0, starts = 0, per = 0;
};
__device__ Window WindowOf(int64_t k, int64_t m, int gw) {
  Window w;
  const int tiles = static_cast<int>(m / kTileCols),
            warps = static_cast<int>(gridDim.x) * kWarps;
  w.step = warps / tiles;
  const int active = w.step * tiles, b0 = static_cast<int>(blockIdx.x) * kWarps;
  const int kk = static_cast<int>(k);
  if (gw < active) {
    w.tile = gw % tiles;
    w.first = gw / tiles;
    w.rows = w.first < kk ? (kk - w.first + w.step - 1) / w.step : 0;
  }
  w.per = (kk + w.step - 1) / w.step;
  if (b0 < active) {
    w.lo = b0 / tiles;
    w.starts = min(b0 + kWarps, active) - 1;
    w.starts = w.starts / tiles - w.lo + 1;
  }
  return w;
}

// Each warp's window of each product (the same in every layer), filled
// once per launch: the producer and the phases read them here instead of
// redoing WindowOf's divisions.
__shared__ Window windows[kProducts][kWarps];
// With the kernel's static stat[kWarps] and the windows, within sm_90's
// 227 KiB a block may opt in to: the ring takes what staging and attention
// leave.
static_assert(kSmemBytes + kWarps * sizeof(float) + sizeof(windows) <=
              227 * 1024);

// A warp's ring slot is filled by one bulk copy (the tensor memory
// accelerator: global -> shared, completing on the slot's mbarrier).
__device__ __forceinline__ unsigned SmemAddress(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void BarrierInit(uint64_t* bar) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(SmemAddress(bar))
               : "memory");
}
__device__ __forceinline__ void BoxLoad(void* smem, const CUtensorMap* map,
                                        int col, int row, int layer,
                                        uint64_t* bar, uint64_t policy) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(
                   SmemAddress(bar)),
               "r"(kSlotBytes)
               : "memory");
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_"
      "tx::bytes.L2::cache_hint [%0], [%1, {%2, %3, %4}], [%5], %6;" ::"r"(
          SmemAddress(smem)),
      "l"(map), "r"(col), "r"(row), "r"(layer), "r"(SmemAddress(bar)),
      "l"(policy)
      : "memory");
}
__device__ __forceinline__ void BarrierWait(uint64_t* bar, unsigned parity) {
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "WAIT_%=:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT_%=;\n"
      "}" ::"r"(SmemAddress(bar)),
      "r"(parity)
      : "memory");
}
__device__ __forceinline__ uint64_t EvictFirst() {
  uint64_t policy;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;"
               : "=l"(policy));
  return policy;
}
__device__ __forceinline__ uint64_t GlobalNs() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
__device__ __forceinline__ unsigned LoadAcquire(const unsigned* p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];"
               : "=r"(v)
               : "l"(p)
               : "memory");
  return v;
}

// Attention at position pos: pos / kKeys + 1 splits of kKeys keys per key
// head, kGroups consecutive splits to an item (a group each), and this
// many items (one merged piece each) per key head.
__device__ __forceinline__ int ItemsPerHead(int pos) {
  return (pos / kKeys + kGroups) / kGroups;
}
// Attention item `item` at position pos: its key head, its first split
// and its piece (of the head's ItemsPerHead) in p.partial.
struct ItemPlace {
  int kvh, first, piece;
};
__device__ __forceinline__ ItemPlace PlaceOf(int item, int pos) {
  const int per_head = ItemsPerHead(pos), piece = item % per_head;
  return {item / per_head, kGroups * piece, piece};
}

__device__ __forceinline__ float RoundBf16(float v) {
  return __bfloat162float(__float2bfloat16(v));
}

// A grid-wide barrier over launches: w[0] counts arrivals and only
// grows (wrapping), w[1] holds its value when the launch started (every
// block reads it before its first arrival; block 0 moves it on after the
// last barrier). Barrier n of a launch is passed once w[0] has reached
// w[1] + n * gridDim.x. A block that waits more than 5 s (a block that
// never became resident) traps instead of hanging the GPU. Thread 0
// arrives with a release reduction, which after the block's __syncthreads
// publishes every thread's earlier writes, and its acquire loads order the
// block's later reads (after the closing __syncthreads); no full fences.
__device__ void GridSync(unsigned* w, unsigned target) {
  __syncthreads();
  if (threadIdx.x == 0) {
    asm volatile("red.release.gpu.global.add.u32 [%0], 1;" ::"l"(&w[0])
                 : "memory");
    const uint64_t start = GlobalNs();
    unsigned spins = 0;
    while (static_cast<int>(LoadAcquire(&w[0]) - target) < 0) {
      if ((++spins & 1023u) == 0 && GlobalNs() - start > 5000000000ull)
        __trap();
    }
  }
  __syncthreads();
}

// The 128 threads of attention group `group` (named barrier 1 + group).
__device__ __forceinline__ void GroupSync(int group) {
  asm volatile("bar.sync %0, 128;" ::"r"(group + 1) : "memory");
}

// Sum over the block of one value per thread (all threads get it).
__device__ float BlockSum(float v, float* stat) {
  v = WarpSum(v);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  __syncthreads();
  if (lane == 0) stat[warp] = v;
  __syncthreads();
  float s = 0;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) s += stat[w];
  return s;
}

// Value j of the step's input at position pos: x[j], or with x null the
// value SequenceInputs gives one sequence there, rounded to bf16 alike.
__device__ __forceinline__ float InputValue(const Params& p, int pos,
                                            int64_t j) {
  if (p.x != nullptr) return __bfloat162float(p.x[j]);
  return __bfloat162float(SequenceInputOnDevice(0, 0, pos, p.m.hidden, j));
}

// Values 8i .. 8i + 7 of the residual stream: the step's input for layer 0
// (at position pos), else the fp32 stream the other blocks add to (from
// L2).
__device__ __forceinline__ void LoadResidual8(const Params& p, bool input,
                                              int pos, int64_t i, float v[8]) {
  if (input && p.x == nullptr) {
#pragma unroll
    for (int c = 0; c < 8; ++c) v[c] = InputValue(p, pos, 8 * i + c);
  } else if (input) {
    const uint4 raw = reinterpret_cast<const uint4*>(p.x)[i];
    const __nv_bfloat162* h2 = reinterpret_cast<const __nv_bfloat162*>(&raw);
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      const float2 f = __bfloat1622float2(h2[c]);
      v[2 * c] = f.x;
      v[2 * c + 1] = f.y;
    }
  } else {
    const float4 a = __ldcg(reinterpret_cast<const float4*>(p.h) + 2 * i),
                 b = __ldcg(reinterpret_cast<const float4*>(p.h) + 2 * i + 1);
    v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w;
    v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
  }
}

// 1 / rms of the fp32 residual stream: loads of 8 values, all of a
// thread's in flight before the sums.
__device__ float ResidualRinv(const Params& p, float* stat) {
  float ss = 0;
  const int64_t n8 = p.m.hidden / 8;
#pragma unroll 4
  for (int64_t i = threadIdx.x; i < n8; i += kThreads) {
    float v[8];
    LoadResidual8(p, false, 0, i, v);
#pragma unroll
    for (int c = 0; c < 8; ++c) ss += v[c] * v[c];
  }
  ss = BlockSum(ss, stat);
  return rsqrtf(ss / static_cast<float>(p.m.hidden) + p.m.eps);
}

// The producer's position in this warp's sequence of weight slices: every
// product of every layer in order, this warp's rows of each.
// Rows go kBox at a time: a product's window is over its k / kBox boxes.
struct Stream {
  int l = 0, q = 0, left = 0;
  int col = 0, row = 0, step = 0;  // step: rows between the warp's boxes

  __device__ void Begin(const Params& p) {
    for (; l < p.m.layers; q == kProducts - 1 ? (q = 0, ++l) : ++q) {
      const Window& w = windows[q][threadIdx.x >> 5];
      left = w.rows;
      if (left == 0) continue;
      step = w.step * kBox;
      row = w.first * kBox;
      col = w.tile * kTileCols;
      return;
    }
  }
  // Fills the warp's `slot` with its next box (lane 0 issues the copy;
  // nothing past the last box) and advances.
  __device__ __forceinline__ void Issue(const Params& p, uint4* slot,
                                        uint64_t* bar, uint64_t policy) {
    if (l >= p.m.layers) return;
    if ((threadIdx.x & 31) == 0)
      BoxLoad(slot, &p.maps[q], col, row, l, bar, policy);
    if (--left == 0) {
      q == kProducts - 1 ? (q = 0, ++l) : ++q;
      Begin(p);
    } else {
      row += step;
    }
  }
};

// Row j of this block's staged inputs of window w: xs[(start - w.lo) *
// w.per + i] holds input row start + i * w.step.
__device__ __forceinline__ int StagedRow(const Window& w, int e) {
  const int b = e / kBox;
  return (w.lo + b / w.per + (b % w.per) * w.step) * kBox + e % kBox;
}

// The attention outputs this block needs (xs[e], e < count, of window w
// over k = heads * head_dim rows), merged from the attention items' pieces
// at position pos: every (output, item) pair's maximum, sum and partial
// output loaded at once into `pieces`, then a warp per output.
__device__ void MergedAttention(const Params& p, int pos, const Window& w,
                                int64_t k, int count, float* pieces,
                                float* xs) {
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int per_head = ItemsPerHead(pos);  // pieces per key head
  const int g = static_cast<int>(p.m.heads / p.m.kv_heads),
            hd = static_cast<int>(p.m.head_dim);
  const int64_t stride = int64_t{g} * (hd + 2);
  // kBatch pairs per thread loaded before any is stored (the stores to
  // shared memory would otherwise order each pair's loads after the last).
  constexpr int kBatch = 4;
  const int total = count * per_head;
  for (int i0 = tid; i0 < total; i0 += kBatch * kThreads) {
    float v[kBatch][3];
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int i = i0 + u * kThreads, e = i / per_head, sp = i % per_head;
      const int j = i < total ? StagedRow(w, e) : static_cast<int>(k);
      // Rows past k (no warp reads them) merge to 0.
      v[u][0] = 0, v[u][1] = 1, v[u][2] = 0;
      if (j < k) {
        const int hh = j / hd, d = j % hd;
        const float* item = p.partial + ((hh / g) * p.max_splits + sp) * stride;
        v[u][0] = __ldcg(&item[g * hd + hh % g]);
        v[u][1] = __ldcg(&item[g * hd + g + hh % g]);
        v[u][2] = __ldcg(&item[(hh % g) * hd + d]);
      }
    }
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int i = i0 + u * kThreads;
      if (i < total) {
#pragma unroll
        for (int c = 0; c < 3; ++c) pieces[3 * i + c] = v[u][c];
      }
    }
  }
  __syncthreads();
  for (int e = warp; e < count; e += kWarps) {
    const float* pe = pieces + 3 * e * per_head;
    float mx = -INFINITY;
    for (int sp = lane; sp < per_head; sp += 32) mx = fmaxf(mx, pe[3 * sp]);
    mx = WarpMax(mx);
    float l = 0, o = 0;
    for (int sp = lane; sp < per_head; sp += 32) {
      const float f = __expf(pe[3 * sp] - mx);
      l += f * pe[3 * sp + 1];
      o += f * pe[3 * sp + 2];
    }
    l = WarpSum(l);
    o = WarpSum(o);
    if (lane == 0) xs[e] = o / l;
  }
}

// Stages this block's inputs of product q of layer l (window w, k input
// rows) into xs and does the phase's side work: zeroing the accumulators
// the next products add to, and (layer 0) copying the step's input into
// the residual stream. `spare`: shared memory past xs.
__device__ void StageInputs(const Params& p, int l, int q, int pos,
                            const Window& w, int64_t k, float* xs, float* spare,
                            float* stat) {
  const int tid = threadIdx.x;
  const int count = w.starts * w.per * kBox;
  const int64_t g = gridDim.x, b = blockIdx.x;
  auto slice = [&](int64_t n, auto&& f) {
    for (int64_t j = n * b / g + tid; j < n * (b + 1) / g; j += kThreads) f(j);
  };
  const bf16* base =
      static_cast<const bf16*>(p.m.weights) + l * p.m.layer_elems;
  if (q == 0 || q == 2) {
    // The whole residual stream (for the norm) and this block's gains, in
    // one round trip; the inputs picked from the stream in shared memory.
    const bool input = q == 0 && l == 0;
    const bf16* gain = base + (q == 0 ? p.m.off_g1 : p.m.off_g2);
    float* hs = spare;
    float ss = 0;
    const int n8 = static_cast<int>(p.m.hidden / 8);
    for (int i = tid; i < n8; i += kThreads) {
      float v[8];
      LoadResidual8(p, input, pos, i, v);
#pragma unroll
      for (int c = 0; c < 8; ++c) {
        hs[8 * i + c] = v[c];
        ss += v[c] * v[c];
      }
    }
    float gn[2] = {0, 0};
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int e = tid + r * kThreads, j = e < count ? StagedRow(w, e) : k;
      if (j < k) gn[r] = __bfloat162float(gain[j]);
    }
    const float rinv =
        rsqrtf(BlockSum(ss, stat) / static_cast<float>(p.m.hidden) + p.m.eps);
    for (int e = tid; e < count; e += kThreads) {
      const int j = StagedRow(w, e);
      const float gj = e < kThreads       ? gn[0]
                       : e < 2 * kThreads ? gn[1]
                       : j < k            ? __bfloat162float(gain[j])
                                          : 0.0f;
      xs[e] = j < k ? hs[j] * rinv * gj : 0.0f;
    }
    if (q == 0) {
      slice(2 * p.m.ffn, [&](int64_t j) { p.gu[j] = 0; });
      if (input) {
        slice(p.m.hidden, [&](int64_t j) { p.h[j] = InputValue(p, pos, j); });
      }
    }
  } else if (q == 1) {
    MergedAttention(p, pos, w, k, count, spare, xs);
    slice(p.w3, [&](int64_t j) { p.qkv[j] = 0; });
  } else {
    for (int e = tid; e < count; e += kThreads) {
      const int j = StagedRow(w, e);
      float v = 0;
      if (j < k) {
        const float gate = __ldcg(&p.gu[j]), up = __ldcg(&p.gu[p.m.ffn + j]);
        v = gate / (1.0f + __expf(-gate)) * up;
      }
      xs[e] = v;
    }
  }
}

// Product q of layer l: this warp's rows from the ring, its tile's sums
// added to the product's accumulator. `ready`, when not null, receives
// the time the inputs were staged.
__device__ __forceinline__ void RunProduct(const Params& p, int l, int q,
                                           int pos, uint4* ring, uint64_t* bars,
                                           int* slot, unsigned* parity,
                                           Stream* stream, uint64_t policy,
                                           float* scratch, float* stat,
                                           int64_t* ready) {
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const Product pr = ProductOf(p, q);
  const Window w = windows[q][warp];
  float* xs = scratch;
  StageInputs(p, l, q, pos, w, pr.k, xs, scratch + w.starts * w.per * kBox,
              stat);
  __syncthreads();
  if (ready != nullptr) *ready = static_cast<int64_t>(GlobalNs());
  if (w.rows > 0) {
    const float* x = xs + (w.first - w.lo) * w.per * kBox;
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int i = 0; i < w.rows; ++i) {
      uint64_t* bar = &bars[*slot * kWarps + warp];
      BarrierWait(bar, *parity);
      const uint4* box = &ring[(*slot * kWarps + warp) * kSlotVecs];
      uint4 v[kBox];
#pragma unroll
      for (int j = 0; j < kBox; ++j) v[j] = box[j * 32 + lane];
      // Every lane's values are in registers: refill the slot.
      __syncwarp();
      stream->Issue(p, &ring[(*slot * kWarps + warp) * kSlotVecs], bar, policy);
      if (++*slot == kStages) *slot = 0, *parity ^= 1u;
#pragma unroll
      for (int j = 0; j < kBox; ++j) {
        const float xv = x[i * kBox + j];
        const __nv_bfloat162* h2 =
            reinterpret_cast<const __nv_bfloat162*>(&v[j]);
#pragma unroll
        for (int c = 0; c < 4; ++c) {
          const float2 f = __bfloat1622float2(h2[c]);
          acc[2 * c] = fmaf(xv, f.x, acc[2 * c]);
          acc[2 * c + 1] = fmaf(xv, f.y, acc[2 * c + 1]);
        }
      }
    }
    float* out = pr.out + int64_t{w.tile} * kTileCols + lane * 8;
#pragma unroll
    for (int c = 0; c < 8; c += 4) {
      asm volatile(
          "red.global.add.v4.f32 [%0], {%1, %2, %3, %4};" ::"l"(out + c),
          "f"(acc[c]), "f"(acc[c + 1]), "f"(acc[c + 2]), "f"(acc[c + 3])
          : "memory");
    }
  }
}

// Attention split (key head kvh, keys split * kKeys ..) of layer l at
// position pos, by the 128 threads of `group`: the group's query heads'
// unnormalized outputs (a.part, a piece per thread row), score maxima
// and sums of exponentials over those keys (a.mx, a.sum), left in `a`
// for AttendItem. Every load (the cached keys and values, the queries,
// the new key and value) is issued before the first is used, so a split
// costs one round trip to memory.
__device__ void AttendSplit(const Params& p, int l, int kvh, int split, int pos,
                            AttnSmem& a, int group) {
  const int t = threadIdx.x & 127, warp = t >> 5, lane = t & 31;
  const int hd = static_cast<int>(p.m.head_dim), half = hd / 2;
  const int g = static_cast<int>(p.m.heads / p.m.kv_heads);
  const int64_t kw = p.kw;
  const float* qsrc = p.qkv + int64_t{kvh} * g * hd;
  const float* ksrc = p.qkv + p.qw + int64_t{kvh} * hd;
  const float* vsrc = ksrc + kw;
  bf16* kc = static_cast<bf16*>(p.m.kcache[l]) + int64_t{kvh} * hd;
  bf16* vc = static_cast<bf16*>(p.m.vcache[l]) + int64_t{kvh} * hd;
  const float* cs = p.m.cos_table + int64_t{pos} * half;
  const float* sn = p.m.sin_table + int64_t{pos} * half;
  const int j0 = split * kKeys, j1 = min(j0 + kKeys, pos + 1);
  // Scores: warp w takes keys j0 + w + 4i, each lane `per` dimensions.
  // Values: thread (piece, 4 dimensions from d) takes keys j0 + piece +
  // pieces * i.
  const int per = hd / 32;  // 2 or 4
  const int quads = hd / 4, pieces = 128 / quads, piece = t / quads,
            d = (t % quads) * 4;
  constexpr int kWarpKeys = kKeys / 4;
  constexpr int kThreadValues = kKeys / 4;  // pieces is 4 or 8
  uint2 kraw[kWarpKeys], vraw[kThreadValues];
#pragma unroll
  for (int i = 0; i < kWarpKeys; ++i) {
    const int j = j0 + warp + 4 * i;
    kraw[i] = make_uint2(0, 0);
    if (j < j1 && j != pos) {
      const bf16* kp = kc + int64_t{j} * kw + lane * per;
      if (per == 4) {
        kraw[i] = *reinterpret_cast<const uint2*>(kp);
      } else {
        kraw[i].x = *reinterpret_cast<const unsigned*>(kp);
      }
    }
  }
#pragma unroll
  for (int i = 0; i < kThreadValues; ++i) {
    const int j = j0 + piece + pieces * i;
    vraw[i] = make_uint2(0, 0);
    if (i < kKeys / pieces && j < j1 && j != pos)
      vraw[i] = *reinterpret_cast<const uint2*>(vc + int64_t{j} * kw + d);
  }
  // The group's queries (at most 4 pairs per thread), the new key's pair
  // and value, the rotary factors.
  constexpr int kQPairs = kMaxGroup * 64 / 128;
  float qa[kQPairs], qb[kQPairs], qc[kQPairs], qsn[kQPairs];
#pragma unroll
  for (int r = 0; r < kQPairs; ++r) {
    const int i = t + 128 * r, hh = i / half, dd = i % half;
    if (i < g * half) {
      qa[r] = __ldcg(&qsrc[hh * hd + dd]);
      qb[r] = __ldcg(&qsrc[hh * hd + dd + half]);
      qc[r] = cs[dd];
      qsn[r] = sn[dd];
    }
  }
  const bool kpair = t < half, vmine = t < hd;
  const float ka = kpair ? __ldcg(&ksrc[t]) : 0.0f,
              kb = kpair ? __ldcg(&ksrc[t + half]) : 0.0f,
              kcs = kpair ? cs[t] : 0.0f, ksn = kpair ? sn[t] : 0.0f,
              vv = vmine ? __ldcg(&vsrc[t]) : 0.0f;
#pragma unroll
  for (int r = 0; r < kQPairs; ++r) {
    const int i = t + 128 * r, hh = i / half, dd = i % half;
    if (i < g * half) {
      a.qs[hh][dd] = qa[r] * qc[r] - qb[r] * qsn[r];
      a.qs[hh][dd + half] = qa[r] * qsn[r] + qb[r] * qc[r];
    }
  }
  // The new key and value as the cache holds them (bfloat16).
  if (kpair) {
    a.kcur[t] = RoundBf16(ka * kcs - kb * ksn);
    a.kcur[t + half] = RoundBf16(ka * ksn + kb * kcs);
  }
  if (vmine) a.vcur[t] = RoundBf16(vv);
  GroupSync(group);
  if (split == 0) {
    for (int dd = t; dd < hd; dd += 128) {
      kc[int64_t{pos} * kw + dd] = __float2bfloat16(a.kcur[dd]);
      vc[int64_t{pos} * kw + dd] = __float2bfloat16(a.vcur[dd]);
    }
  }
  float qr[kMaxGroup][4];
#pragma unroll
  for (int hh = 0; hh < kMaxGroup; ++hh)
#pragma unroll
    for (int c = 0; c < 4; ++c)
      qr[hh][c] = hh < g && c < per ? a.qs[hh][lane * per + c] : 0.0f;
  // Every key's dot products (dot[i * kMaxGroup + hh]: key i, query head
  // hh), then their sums across the warp: lane L gets key L / kMaxGroup's
  // with head L % kMaxGroup.
  static_assert(kWarpKeys * kMaxGroup == 32);
  float dot[kWarpKeys * kMaxGroup];
#pragma unroll
  for (int i = 0; i < kWarpKeys; ++i) {
    const int j = j0 + warp + 4 * i;
    float kv[4];
    const __nv_bfloat162* h2 =
        reinterpret_cast<const __nv_bfloat162*>(&kraw[i]);
    const float2 x0 = __bfloat1622float2(h2[0]), x1 = __bfloat1622float2(h2[1]);
    kv[0] = x0.x, kv[1] = x0.y, kv[2] = x1.x, kv[3] = x1.y;
    if (j == pos) {
#pragma unroll
      for (int c = 0; c < 4; ++c) kv[c] = c < per ? a.kcur[lane * per + c] : 0;
    }
#pragma unroll
    for (int hh = 0; hh < kMaxGroup; ++hh) {
      float s = 0;
#pragma unroll
      for (int c = 0; c < 4; ++c) s = fmaf(qr[hh][c], kv[c], s);
      dot[i * kMaxGroup + hh] = s;
    }
  }
  {
    const float s = WarpSumsOfLanes(dot);
    const int i = lane / kMaxGroup, hh = lane % kMaxGroup,
              j = j0 + warp + 4 * i;
    if (hh < g && j < j1) a.sc[hh][j - j0] = s * p.m.scale;
  }
  GroupSync(group);
  for (int hh = warp; hh < g; hh += 4) {
    float mx = -INFINITY;
    for (int i = lane; i < j1 - j0; i += 32) mx = fmaxf(mx, a.sc[hh][i]);
    mx = WarpMax(mx);
    float sum = 0;
    for (int i = lane; i < j1 - j0; i += 32) {
      const float ex = __expf(a.sc[hh][i] - mx);
      a.sc[hh][i] = ex;
      sum += ex;
    }
    sum = WarpSum(sum);
    if (lane == 0) {
      a.mx[hh] = mx;
      a.sum[hh] = sum;
    }
  }
  GroupSync(group);
  // Unnormalized outputs over this thread's keys.
  float acc[kMaxGroup][4];
#pragma unroll
  for (int hh = 0; hh < kMaxGroup; ++hh)
#pragma unroll
    for (int c = 0; c < 4; ++c) acc[hh][c] = 0;
#pragma unroll
  for (int i = 0; i < kThreadValues; ++i) {
    const int j = j0 + piece + pieces * i;
    if (i >= kKeys / pieces || j >= j1) break;
    float vx[4];
    if (j == pos) {
#pragma unroll
      for (int c = 0; c < 4; ++c) vx[c] = a.vcur[d + c];
    } else {
      const __nv_bfloat162* h2 =
          reinterpret_cast<const __nv_bfloat162*>(&vraw[i]);
      const float2 x0 = __bfloat1622float2(h2[0]),
                   x1 = __bfloat1622float2(h2[1]);
      vx[0] = x0.x, vx[1] = x0.y, vx[2] = x1.x, vx[3] = x1.y;
    }
#pragma unroll
    for (int hh = 0; hh < kMaxGroup; ++hh) {
      if (hh >= g) break;
      const float w = a.sc[hh][j - j0];
#pragma unroll
      for (int c = 0; c < 4; ++c) acc[hh][c] = fmaf(w, vx[c], acc[hh][c]);
    }
  }
#pragma unroll
  for (int hh = 0; hh < kMaxGroup; ++hh) {
    if (hh < g) {
      *reinterpret_cast<float4*>(&a.part[(piece * g + hh) * hd + d]) =
          make_float4(acc[hh][0], acc[hh][1], acc[hh][2], acc[hh][3]);
    }
  }
}

// Prefetches into L2 the cache lines this block's first attention item of
// layer l at position pos will read (its splits' cached keys and values;
// a line per thread), so that the item's loads, issued after QKV's
// barrier, do not queue behind the weights' copies at HBM.
__device__ void PrefetchItem(const Params& p, int l, int pos) {
  const int item = blockIdx.x;
  if (item >= static_cast<int>(p.m.kv_heads) * ItemsPerHead(pos)) return;
  const int tid = threadIdx.x, t = tid & 127;
  const int hd = static_cast<int>(p.m.head_dim), lines = hd / 64;
  const ItemPlace place = PlaceOf(item, pos);
  const int kvh = place.kvh, split = place.first + (tid >> 7);
  const int key = t / 4, part = t % 4;  // part: 2 lines of K, then of V
  const int j = split * kKeys + key, line = part % 2;
  if (j >= pos || line >= lines) return;
  const bf16* cache =
      static_cast<const bf16*>(part < 2 ? p.m.kcache[l] : p.m.vcache[l]);
  const bf16* at = cache + int64_t{j} * p.kw + int64_t{kvh} * hd + line * 64;
  asm volatile("prefetch.global.L2 [%0];" ::"l"(at));
}

// Attention item `item` of layer l at position pos, by the whole block:
// its key head's splits from its first (PlaceOf), one per group, those
// below pos / kKeys + 1, the groups' results merged into the item's piece
// of p.partial: the query heads' unnormalized outputs, score
// maxima and sums of exponentials (merged again by the blocks of the next
// product: MergedAttention). A piece per item, not per split, keeps that
// merge's scattered loads few.
__device__ void AttendItem(const Params& p, int l, int item, int pos,
                           AttnSmem* a) {
  const int tid = threadIdx.x, group = tid >> 7;
  const int used = pos / kKeys + 1;
  const ItemPlace place = PlaceOf(item, pos);
  const int kvh = place.kvh, first = place.first, split = first + group;
  if (split < used) AttendSplit(p, l, kvh, split, pos, a[group], group);
  __syncthreads();
  const int hd = static_cast<int>(p.m.head_dim);
  const int g = static_cast<int>(p.m.heads / p.m.kv_heads);
  const int parts = 128 / (hd / 4);  // AttendSplit's pieces per group
  const int groups = min(kGroups, used - first);
  const int64_t stride = int64_t{g} * (hd + 2);
  float* mine = p.partial + (kvh * p.max_splits + place.piece) * stride;
  for (int i = tid; i < g * hd; i += kThreads) {
    const int hh = i / hd;
    float mx = -INFINITY;
    for (int k = 0; k < groups; ++k) mx = fmaxf(mx, a[k].mx[hh]);
    float o = 0;
    for (int k = 0; k < groups; ++k) {
      float ok = 0;
      for (int pc = 0; pc < parts; ++pc) ok += a[k].part[pc * g * hd + i];
      o += __expf(a[k].mx[hh] - mx) * ok;
    }
    mine[i] = o;
  }
  if (tid < g) {
    float mx = -INFINITY, sum = 0;
    for (int k = 0; k < groups; ++k) mx = fmaxf(mx, a[k].mx[tid]);
    for (int k = 0; k < groups; ++k)
      sum += __expf(a[k].mx[tid] - mx) * a[k].sum[tid];
    mine[g * hd + tid] = mx;
    mine[g * hd + g + tid] = sum;
  }
  // The groups' shared memory is reused by the block's next item.
  __syncthreads();
}

__global__ void __launch_bounds__(kThreads, 1)
    DecodeStepKernel(const __grid_constant__ Params p) {
  extern __shared__ __align__(128) uint4 smem[];
  __shared__ float stat[kWarps];
  // Block 0's timeline (thread 0): the kernel's entry and end (the last
  // two values), and from the ring's first copies on, per phase, its
  // inputs staged, its work done, the barrier after it passed
  // (kTraceStamps per layer).
  const bool tracing =
      p.trace != nullptr && blockIdx.x == 0 && threadIdx.x == 0;
  int64_t* const ends =
      tracing ? p.trace + 1 + p.m.layers * kTraceStamps : nullptr;
  if (tracing) ends[0] = static_cast<int64_t>(GlobalNs());
  uint4* ring = smem;
  float* scratch =
      reinterpret_cast<float*>(smem + kStages * kWarps * kSlotVecs);
  uint64_t* bars = reinterpret_cast<uint64_t*>(
      reinterpret_cast<char*>(scratch) + kScratchBytes);
  const int warp = threadIdx.x >> 5;
  if ((threadIdx.x & 31) == 0) {
    for (int i = 0; i < kStages; ++i) BarrierInit(&bars[i * kWarps + warp]);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  if ((threadIdx.x & 31) < kProducts) {
    const int q = threadIdx.x & 31;
    const Product pr = ProductOf(p, q);
    windows[q][warp] = WindowOf(pr.k / kBox, pr.m, blockIdx.x * kWarps + warp);
  }
  __syncthreads();
  const uint64_t policy = EvictFirst();
  Stream stream;
  stream.Begin(p);
  for (int i = 0; i < kStages; ++i) {
    stream.Issue(p, &ring[(i * kWarps + warp) * kSlotVecs],
                 &bars[i * kWarps + warp], policy);
  }
  int slot = 0;
  unsigned parity = 0;
  // Where stamp k (0 staged, 1 work done, 2 barrier passed) of phase
  // `phase` of layer l goes; null on the threads that do not trace.
  auto at = [&](int l, int phase, int k) -> int64_t* {
    return tracing ? p.trace + 1 + l * kTraceStamps + 3 * phase + k : nullptr;
  };
  auto stamp = [](int64_t* t) {
    if (t != nullptr) *t = static_cast<int64_t>(GlobalNs());
  };
  stamp(tracing ? p.trace : nullptr);
  const unsigned base = *reinterpret_cast<volatile unsigned*>(&p.barrier[1]);
  unsigned barriers = 0;
  // Phase `phase` of layer l done: stamps and the grid barrier.
  auto sync = [&](int l, int phase) {
    __syncthreads();
    stamp(at(l, phase, 1));
    GridSync(p.barrier, base + ++barriers * gridDim.x);
    stamp(at(l, phase, 2));
  };
  const int pos = *p.pos;
  for (int l = 0; l < p.m.layers; ++l) {
    RunProduct(p, l, 0, pos, ring, bars, &slot, &parity, &stream, policy,
               scratch, stat, at(l, 0, 0));
    PrefetchItem(p, l, pos);
    sync(l, 0);
    const int items = static_cast<int>(p.m.kv_heads) * ItemsPerHead(pos);
    AttnSmem* a = reinterpret_cast<AttnSmem*>(scratch);
    for (int it = blockIdx.x; it < items; it += gridDim.x)
      AttendItem(p, l, it, pos, a);
    // For attention, "staged" is when the block finished its items.
    stamp(at(l, 1, 0));
    sync(l, 1);
    for (int q = 1; q < kProducts; ++q) {
      RunProduct(p, l, q, pos, ring, bars, &slot, &parity, &stream, policy,
                 scratch, stat, at(l, q + 1, 0));
      sync(l, q + 1);
    }
  }
  // Every block read *pos and the barrier's base before the first
  // barrier; the next launch starts after this one ends.
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    p.barrier[1] = base + barriers * gridDim.x;
    if (p.advance) *p.pos = pos + 1;
  }
  // The final norm, a slice per block.
  const float rinv = ResidualRinv(p, stat);
  const bf16* gain = static_cast<const bf16*>(p.m.final_gain);
  const int64_t g = gridDim.x, b = blockIdx.x, hid = p.m.hidden;
  for (int64_t j = hid * b / g + threadIdx.x; j < hid * (b + 1) / g;
       j += kThreads) {
    p.y[j] =
        __float2bfloat16(__ldcg(&p.h[j]) * rinv * __bfloat162float(gain[j]));
  }
  if (tracing) ends[1] = static_cast<int64_t>(GlobalNs());
}

int Sms() {
  int device = 0, sms = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) !=
          cudaSuccess) {
    return 0;
  }
  return sms;
}

int64_t MaxSplits(const DecodeStepModel& m) {
  return (m.capacity + kKeys - 1) / kKeys;
}

}  // namespace

int64_t DecodeStepFloats(const DecodeStepModel& m) {
  const int64_t qw = m.heads * m.head_dim, kw = m.kv_heads * m.head_dim;
  const int64_t g = m.kv_heads > 0 ? m.heads / m.kv_heads : 0;
  return m.hidden + (qw + 2 * kw) + 2 * m.ffn +
         m.kv_heads * MaxSplits(m) * g * (m.head_dim + 2);
}

int64_t DecodeStepWords(const DecodeStepModel&) { return 2; }

int64_t DecodeStepTraceValues(const DecodeStepModel& m) {
  return 3 + int64_t{kTraceStamps} * m.layers;
}

// The tensor map of product q (Params::maps): false where the driver has
// no encoder or the weights' layout does not suit one. With map null, only
// what does not need the weights is checked (the shapes and the encoder).
bool EncodeMap(const DecodeStepModel& m, int q, CUtensorMap* map) {
  const PFN_cuTensorMapEncodeTiled_v12000 encode = TensorMapEncoder();
  const ProductShape sh = ShapeOf(m, q);
  if (encode == nullptr || sh.off % 8 != 0 || m.layer_elems % 8 != 0 ||
      sh.n % 8 != 0 || sh.k % kBox != 0) {
    return false;
  }
  if (map == nullptr) return true;
  const cuuint64_t dims[3] = {static_cast<cuuint64_t>(sh.n),
                              static_cast<cuuint64_t>(sh.k),
                              static_cast<cuuint64_t>(m.layers)};
  const cuuint64_t strides[2] = {static_cast<cuuint64_t>(sh.n * 2),
                                 static_cast<cuuint64_t>(m.layer_elems * 2)};
  const cuuint32_t box[3] = {kTileCols, kBox, 1};
  const cuuint32_t steps[3] = {1, 1, 1};
  void* base = const_cast<bf16*>(static_cast<const bf16*>(m.weights) + sh.off);
  return encode(map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 3, base, dims, strides,
                box, steps, CU_TENSOR_MAP_INTERLEAVE_NONE,
                CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_NONE,
                CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

bool DecodeStepSupports(const DecodeStepModel& m) {
  if (m.layers < 1 || (m.head_dim != 64 && m.head_dim != 128) ||
      m.kv_heads < 1 || m.heads % m.kv_heads != 0 ||
      m.heads / m.kv_heads > kMaxGroup || m.capacity < 1) {
    return false;
  }
  const int64_t qw = m.heads * m.head_dim;
  const int64_t sms = Sms();
  if (sms < 1 || m.hidden % 8 != 0 ||
      std::max({m.hidden, qw, 2 * m.ffn, m.ffn}) > (int64_t{1} << 30)) {
    return false;
  }
  const int64_t warps = sms * kWarps;
  for (int q = 0; q < kProducts; ++q) {
    const auto [k, n, off] = ShapeOf(m, q);
    const int64_t tiles = n / kTileCols;
    if (n % kTileCols != 0 || k < 1 || tiles > warps ||
        !EncodeMap(m, q, nullptr))
      return false;
    // The most inputs a block stages (as WindowOf and StageInputs, boxes of
    // kBox rows), and what else staging holds beside them.
    const int64_t step = warps / tiles, active = step * tiles,
                  per = (k / kBox + step - 1) / step * kBox;
    int64_t count = 0;
    for (int64_t b0 = 0; b0 < active; b0 += kWarps) {
      const int64_t lo = b0 / tiles,
                    hi = (std::min(b0 + kWarps, active) - 1) / tiles;
      count = std::max(count, (hi - lo + 1) * per);
    }
    const int64_t beside = q == 0 || q == 2 ? m.hidden
                           : q == 1         ? 3 * count * MaxSplits(m)
                                            : 0;
    if (count + beside > kScratchFloats) return false;
  }
  if (cudaFuncSetAttribute(DecodeStepKernel,
                           cudaFuncAttributeMaxDynamicSharedMemorySize,
                           static_cast<int>(kSmemBytes)) != cudaSuccess) {
    return false;
  }
  int blocks = 0;
  return cudaOccupancyMaxActiveBlocksPerMultiprocessor(
             &blocks, DecodeStepKernel, kThreads, kSmemBytes) == cudaSuccess &&
         blocks >= 1;
}

cudaError_t DecodeStep(const DecodeStepModel& m, const DecodeStepState& st,
                       const void* x, void* y, int* pos, bool advance,
                       cudaStream_t s) {
  const int sms = Sms();
  if (sms < 1 || m.layers < 1 || m.kv_heads < 1) return cudaErrorInvalidValue;
  Params p{};
  p.m = m;
  p.x = static_cast<const bf16*>(x);
  p.y = static_cast<bf16*>(y);
  p.pos = pos;
  p.qw = m.heads * m.head_dim;
  p.kw = m.kv_heads * m.head_dim;
  p.w3 = p.qw + 2 * p.kw;
  p.max_splits = MaxSplits(m);
  p.h = st.floats;
  p.qkv = p.h + m.hidden;
  p.gu = p.qkv + p.w3;
  p.partial = p.gu + 2 * m.ffn;
  p.trace = st.trace;
  p.barrier = st.words;
  p.advance = advance;
  for (int q = 0; q < kProducts; ++q) {
    if (!EncodeMap(m, q, &p.maps[q])) return cudaErrorInvalidValue;
  }
  DecodeStepKernel<<<sms, kThreads, kSmemBytes, s>>>(p);
  return cudaGetLastError();
}

}  // namespace ringmaster::tk
