// Fused causal attention written by hand on mma.sync m16n8k16 (bfloat16 in,
// fp32 accumulate): four warps per block of 64 rows, each warp 16 rows,
// operands staged through shared memory by cp.async and read into the
// products' register fragments by ldmatrix.
#include <cuda_bf16.h>

#include <cmath>
#include <cstdint>

#include "kernels/flash_attention.h"

namespace ringmaster::tk {
namespace {

using bf16 = __nv_bfloat16;
constexpr int kBlock = 64;     // queries or keys per tile
constexpr int kThreads = 128;  // four warps of 16 rows
constexpr float kLog2e = 1.4426950408889634f;

// Shared tiles are [rows][chunks] of 16-byte chunks; chunk c of row r sits
// at c ^ (r & 7), so the eight rows one ldmatrix reads hit distinct banks.
template <int kChunks>
__device__ __forceinline__ uint32_t Addr(uint32_t base, int row, int chunk) {
  return base +
         static_cast<uint32_t>((row * kChunks + (chunk ^ (row & 7))) * 16);
}

__device__ __forceinline__ uint32_t SmemAddr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void CpAsync16(uint32_t dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst),
               "l"(src));
}
__device__ __forceinline__ void CpAsyncCommit() {
  asm volatile("cp.async.commit_group;\n" ::);
}
__device__ __forceinline__ void CpAsyncWaitAll() {
  asm volatile("cp.async.wait_group 0;\n" ::: "memory");
}

// Four 8x8 matrices: lanes 8i .. 8i + 7 give the row addresses of matrix
// i; r[i] holds this lane's two elements of matrix i (transposed: .trans).
__device__ __forceinline__ void Ldsm4(uint32_t r[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void Ldsm4T(uint32_t r[4], uint32_t addr) {
  asm volatile(
      "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
      : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
      : "r"(addr));
}

// c (16x8) += a (16x16, row-major fragment) b (16x8, column-major).
__device__ __forceinline__ void Mma(float c[4], const uint32_t a[4],
                                    uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
      "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint32_t Pack(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

// The A fragment of a 16x16 block made of two 16x8 accumulators side by
// side (an accumulator's layout is the left or right half of A's).
__device__ __forceinline__ void AccToA(uint32_t a[4], const float left[4],
                                       const float right[4]) {
  a[0] = Pack(left[0], left[1]);
  a[1] = Pack(left[2], left[3]);
  a[2] = Pack(right[0], right[1]);
  a[3] = Pack(right[2], right[3]);
}

// A [64][hd] tile from rows of ld elements into shared memory (async).
template <int kHd>
__device__ __forceinline__ void LoadTile(uint32_t dst, const bf16* src,
                                         int64_t ld) {
  constexpr int kChunks = kHd / 8;
  for (int i = threadIdx.x; i < kBlock * kChunks; i += kThreads) {
    const int r = i / kChunks, c = i % kChunks;
    CpAsync16(Addr<kChunks>(dst, r, c), src + r * ld + c * 8);
  }
}

// Starts loading key/value block kb (64 rows) into buffers kb & 1.
template <int kHd>
__device__ __forceinline__ void LoadKv(const uint32_t sk[2],
                                       const uint32_t sv[2], const bf16* kg,
                                       const bf16* vg, int kb, int64_t ld) {
  const int64_t at = static_cast<int64_t>(kb) * kBlock * ld;
  LoadTile<kHd>(sk[kb & 1], kg + at, ld);
  LoadTile<kHd>(sv[kb & 1], vg + at, ld);
  CpAsyncCommit();
}

// Lane address helpers for the three fragment kinds read from a tile:
// A from row-major rows (16 rows from `row0`, 16 columns from chunk 2 kk);
// B from rows that are B's columns (16 of them from `row0`: two products'
// worth); B from rows that are B's rows (.trans: 16 rows from `row0`, 16
// columns from chunk 2 kk).
template <int kChunks>
__device__ __forceinline__ uint32_t AOf(uint32_t tile, int row0, int kk,
                                        int lane) {
  return Addr<kChunks>(tile, row0 + (lane & 15), kk * 2 + (lane >> 4));
}
template <int kChunks>
__device__ __forceinline__ uint32_t BColsOf(uint32_t tile, int row0, int kk,
                                            int lane) {
  return Addr<kChunks>(tile, row0 + (lane & 7) + ((lane >> 4) << 3),
                       kk * 2 + ((lane >> 3) & 1));
}
template <int kChunks>
__device__ __forceinline__ uint32_t BRowsOf(uint32_t tile, int row0, int kk,
                                            int lane) {
  return Addr<kChunks>(tile, row0 + (lane & 7) + ((lane >> 3) & 1) * 8,
                       kk * 2 + (lane >> 4));
}

// x = A1 B1^T and y = A2 B2^T for this warp's 16 rows of the [64][hd]
// tiles a1, a2 (from row0) against the 64 rows of the tiles b1, b2.
template <int kHd>
__device__ __forceinline__ void TwoProducts(uint32_t a1, uint32_t b1,
                                            uint32_t a2, uint32_t b2, int row0,
                                            int lane, float x[8][4],
                                            float y[8][4]) {
  constexpr int kChunks = kHd / 8;
#pragma unroll
  for (int i = 0; i < 8; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e) x[i][e] = y[i][e] = 0;
#pragma unroll
  for (int kk = 0; kk < kHd / 16; ++kk) {
    uint32_t a[4], c[4];
    Ldsm4(a, AOf<kChunks>(a1, row0, kk, lane));
    Ldsm4(c, AOf<kChunks>(a2, row0, kk, lane));
#pragma unroll
    for (int np = 0; np < 4; ++np) {
      uint32_t bb[4];
      Ldsm4(bb, BColsOf<kChunks>(b1, np * 16, kk, lane));
      Mma(x[2 * np], a, bb[0], bb[1]);
      Mma(x[2 * np + 1], a, bb[2], bb[3]);
      Ldsm4(bb, BColsOf<kChunks>(b2, np * 16, kk, lane));
      Mma(y[2 * np], c, bb[0], bb[1]);
      Mma(y[2 * np + 1], c, bb[2], bb[3]);
    }
  }
}

// acc (this warp's 16 x hd) += p b: p this warp's 16 x 64 accumulators,
// b a [64][hd] tile.
template <int kHd>
__device__ __forceinline__ void AddProduct(float acc[kHd / 8][4],
                                           const float p[8][4], uint32_t b,
                                           int lane) {
  constexpr int kChunks = kHd / 8;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    uint32_t a[4];
    AccToA(a, p[2 * j], p[2 * j + 1]);
#pragma unroll
    for (int dp = 0; dp < kHd / 16; ++dp) {
      uint32_t bb[4];
      Ldsm4T(bb, BRowsOf<kChunks>(b, j * 16, dp, lane));
      Mma(acc[2 * dp], a, bb[0], bb[1]);
      Mma(acc[2 * dp + 1], a, bb[2], bb[3]);
    }
  }
}

// Grid (query blocks, heads, batch); the blocks with the most keys first.
// Each warp keeps its 16 queries' fragments, running maxima and sums and
// output in registers; keys and values come in double-buffered tiles.
template <int kHd>
__global__ void __launch_bounds__(kThreads)
    ForwardKernel(const bf16* __restrict__ q, const bf16* __restrict__ k,
                  const bf16* __restrict__ v, int64_t ld, bf16* __restrict__ o,
                  int64_t ldo, float* __restrict__ lse, int seq, int heads,
                  int group, float scale) {
  constexpr int kChunks = kHd / 8, kTileBytes = kBlock * kHd * 2;
  extern __shared__ __align__(128) unsigned char smem[];
  const uint32_t sq = SmemAddr(smem);
  const uint32_t sk[2] = {sq + kTileBytes, sq + 2 * kTileBytes};
  const uint32_t sv[2] = {sq + 3 * kTileBytes, sq + 4 * kTileBytes};
  const int qb = static_cast<int>(gridDim.x) - 1 - static_cast<int>(blockIdx.x);
  const int h = static_cast<int>(blockIdx.y), b = static_cast<int>(blockIdx.z);
  const int kvh = h / group;
  const int64_t t0 = static_cast<int64_t>(b) * seq;
  const bf16* kg = k + t0 * ld + kvh * kHd;
  const bf16* vg = v + t0 * ld + kvh * kHd;
  LoadTile<kHd>(sq, q + (t0 + qb * kBlock) * ld + h * kHd, ld);
  LoadKv<kHd>(sk, sv, kg, vg, 0, ld);  // with the tiles above
  const int warp = static_cast<int>(threadIdx.x) >> 5;
  const int lane = static_cast<int>(threadIdx.x) & 31;
  const int g = lane >> 2, t = lane & 3;
  const float sl2 = scale * kLog2e;  // scores in log2 units
  uint32_t qf[kHd / 16][4];
  float of[kHd / 8][4];
#pragma unroll
  for (int i = 0; i < kHd / 8; ++i)
    of[i][0] = of[i][1] = of[i][2] = of[i][3] = 0;
  float mx[2] = {-INFINITY, -INFINITY}, sum[2] = {0.0f, 0.0f};
  for (int kb = 0; kb <= qb; ++kb) {
    CpAsyncWaitAll();
    __syncthreads();
    if (kb == 0) {
#pragma unroll
      for (int kk = 0; kk < kHd / 16; ++kk)
        Ldsm4(qf[kk], AOf<kChunks>(sq, warp * 16, kk, lane));
    }
    if (kb < qb) LoadKv<kHd>(sk, sv, kg, vg, kb + 1, ld);
    const uint32_t ks = sk[kb & 1], vs = sv[kb & 1];
    float sf[8][4];
#pragma unroll
    for (int i = 0; i < 8; ++i) sf[i][0] = sf[i][1] = sf[i][2] = sf[i][3] = 0;
#pragma unroll
    for (int kk = 0; kk < kHd / 16; ++kk) {
#pragma unroll
      for (int np = 0; np < 4; ++np) {
        uint32_t bb[4];
        Ldsm4(bb, BColsOf<kChunks>(ks, np * 16, kk, lane));
        Mma(sf[2 * np], qf[kk], bb[0], bb[1]);
        Mma(sf[2 * np + 1], qf[kk], bb[2], bb[3]);
      }
    }
    // Row maxima over this block (the diagonal block masked).
    const int r0 = warp * 16 + g;
    float bm[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int nt = 0; nt < 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        float x = sf[nt][e] * sl2;
        if (kb == qb && nt * 8 + 2 * t + (e & 1) > r0 + (e >> 1) * 8)
          x = -INFINITY;
        sf[nt][e] = x;
        bm[e >> 1] = fmaxf(bm[e >> 1], x);
      }
    float corr[2];
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      bm[i] = fmaxf(bm[i], __shfl_xor_sync(0xffffffffu, bm[i], 1));
      bm[i] = fmaxf(bm[i], __shfl_xor_sync(0xffffffffu, bm[i], 2));
      // Every row has a key in the first block, so the maximum is finite.
      const float m_new = fmaxf(mx[i], bm[i]);
      corr[i] = exp2f(mx[i] - m_new);
      mx[i] = m_new;
      sum[i] *= corr[i];
    }
#pragma unroll
    for (int nt = 0; nt < 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        sf[nt][e] = exp2f(sf[nt][e] - mx[e >> 1]);
        sum[e >> 1] += sf[nt][e];
      }
#pragma unroll
    for (int dn = 0; dn < kHd / 8; ++dn) {
      of[dn][0] *= corr[0];
      of[dn][1] *= corr[0];
      of[dn][2] *= corr[1];
      of[dn][3] *= corr[1];
    }
    AddProduct<kHd>(of, sf, vs, lane);  // O += P V
  }
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    sum[i] += __shfl_xor_sync(0xffffffffu, sum[i], 1);
    sum[i] += __shfl_xor_sync(0xffffffffu, sum[i], 2);
  }
  const float inv0 = 1.0f / sum[0], inv1 = 1.0f / sum[1];
  const int64_t row = t0 + qb * kBlock + warp * 16 + g;
  bf16* og = o + row * ldo + h * kHd + 2 * t;
#pragma unroll
  for (int dn = 0; dn < kHd / 8; ++dn) {
    *reinterpret_cast<uint32_t*>(og + dn * 8) =
        Pack(of[dn][0] * inv0, of[dn][1] * inv0);
    *reinterpret_cast<uint32_t*>(og + 8 * ldo + dn * 8) =
        Pack(of[dn][2] * inv1, of[dn][3] * inv1);
  }
  if (t == 0) {
    float* lg = lse + (static_cast<int64_t>(b) * heads + h) * seq +
                qb * kBlock + warp * 16 + g;
    lg[0] = (mx[0] + log2f(sum[0])) / kLog2e;
    lg[8] = (mx[1] + log2f(sum[1])) / kLog2e;
  }
}

// delta[b][h][i] = sum over d of do * o (the softmax backward's row term),
// one warp per (token, head).
template <int kHd>
__global__ void DeltaKernel(const bf16* __restrict__ o,
                            const bf16* __restrict__ d_o, int64_t ld,
                            float* __restrict__ delta, int64_t tokens, int seq,
                            int heads) {
  const int64_t w =
      (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
  const int lane = static_cast<int>(threadIdx.x) & 31;
  if (w >= tokens * heads) return;
  const int64_t tok = w / heads;
  const int h = static_cast<int>(w % heads);
  const bf16* op = o + tok * ld + h * kHd;
  const bf16* dp = d_o + tok * ld + h * kHd;
  float acc = 0;
  for (int d = 2 * lane; d < kHd; d += 64) {
    const float2 a =
        __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(op + d));
    const float2 c =
        __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(dp + d));
    acc += a.x * c.x + a.y * c.y;
  }
  for (int off = 16; off > 0; off >>= 1)
    acc += __shfl_xor_sync(0xffffffffu, acc, off);
  if (lane == 0) {
    const int64_t b = tok / seq, i = tok % seq;
    delta[(b * heads + h) * seq + i] = acc;
  }
}

// Grid (key blocks, key/value heads, batch): a block owns 64 keys of one
// key/value head and goes through every query head of its group and every
// query block at or after its own, keeping dk and dv in registers (dq is
// DqKernel's). The blocks with the most queries first.
template <int kHd>
__global__ void __launch_bounds__(kThreads, 2)
    BackwardKernel(const bf16* __restrict__ q, const bf16* __restrict__ k,
                   const bf16* __restrict__ v, int64_t ld,
                   const bf16* __restrict__ d_o, int64_t ldo,
                   const float* __restrict__ lse,
                   const float* __restrict__ delta, bf16* __restrict__ dk,
                   bf16* __restrict__ dv, int64_t ldd, int seq, int heads,
                   int group, float scale) {
  constexpr int kTileBytes = kBlock * kHd * 2;
  extern __shared__ __align__(128) unsigned char smem[];
  const uint32_t sk = SmemAddr(smem), sv = sk + kTileBytes;
  const uint32_t sq[2] = {sk + 2 * kTileBytes, sk + 3 * kTileBytes};
  const uint32_t sdo[2] = {sk + 4 * kTileBytes, sk + 5 * kTileBytes};
  float* rows = reinterpret_cast<float*>(smem + 6 * kTileBytes);
  // rows: lse[2][64] then delta[2][64].
  const int kb = static_cast<int>(blockIdx.x);
  const int kvh = static_cast<int>(blockIdx.y),
            b = static_cast<int>(blockIdx.z);
  const int nq = seq / kBlock, per_head = nq - kb, iters = group * per_head;
  const int64_t t0 = static_cast<int64_t>(b) * seq;
  const int warp = static_cast<int>(threadIdx.x) >> 5;
  const int lane = static_cast<int>(threadIdx.x) & 31;
  const int g = lane >> 2, t = lane & 3;
  const float sl2 = scale * kLog2e;

  auto load_rows = [&](int it, int buf) {
    const int h = kvh * group + it / per_head, qb = kb + it % per_head;
    const int64_t row0 = t0 + static_cast<int64_t>(qb) * kBlock;
    LoadTile<kHd>(sq[buf], q + row0 * ld + h * kHd, ld);
    LoadTile<kHd>(sdo[buf], d_o + row0 * ldo + h * kHd, ldo);
    const int64_t r = (static_cast<int64_t>(b) * heads + h) * seq +
                      static_cast<int64_t>(qb) * kBlock;
    const int i = static_cast<int>(threadIdx.x);
    if (i < 16) {
      CpAsync16(SmemAddr(rows + buf * kBlock + 4 * i), lse + r + 4 * i);
    } else if (i < 32) {
      CpAsync16(SmemAddr(rows + (2 + buf) * kBlock + 4 * (i - 16)),
                delta + r + 4 * (i - 16));
    }
  };
  const int64_t key0 = t0 + static_cast<int64_t>(kb) * kBlock;
  LoadTile<kHd>(sk, k + key0 * ld + kvh * kHd, ld);
  LoadTile<kHd>(sv, v + key0 * ld + kvh * kHd, ld);
  load_rows(0, 0);
  CpAsyncCommit();

  float dkf[kHd / 8][4], dvf[kHd / 8][4];
#pragma unroll
  for (int i = 0; i < kHd / 8; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e) dkf[i][e] = dvf[i][e] = 0;

  for (int it = 0; it < iters; ++it) {
    const int qb = kb + it % per_head;
    const int cur = it & 1;
    CpAsyncWaitAll();
    __syncthreads();
    if (it + 1 < iters) {
      load_rows(it + 1, cur ^ 1);
      CpAsyncCommit();
    }
    const float* ls = rows + cur * kBlock;
    const float* dl = rows + (2 + cur) * kBlock;
    // S^T = K Q^T and dP^T = V dO^T: this warp's 16 keys against the 64
    // queries.
    float st[8][4], dpt[8][4];
    TwoProducts<kHd>(sk, sq[cur], sv, sdo[cur], warp * 16, lane, st, dpt);
    // P^T from the forward pass's log-sum-exp; dS^T = P^T (dP^T - delta).
    const int r0 = warp * 16 + g;
#pragma unroll
    for (int nt = 0; nt < 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int col = nt * 8 + 2 * t + (e & 1);
        const bool masked = qb == kb && col < r0 + (e >> 1) * 8;
        const float p =
            masked ? 0.0f : exp2f(st[nt][e] * sl2 - ls[col] * kLog2e);
        st[nt][e] = p;
        dpt[nt][e] = p * (dpt[nt][e] - dl[col]) * scale;
      }
    AddProduct<kHd>(dvf, st, sdo[cur], lane);  // dV += P^T dO
    AddProduct<kHd>(dkf, dpt, sq[cur], lane);  // dK += dS^T Q
  }
  const int64_t row = key0 + warp * 16 + g;
  bf16* dkg = dk + row * ldd + kvh * kHd + 2 * t;
  bf16* dvg = dv + row * ldd + kvh * kHd + 2 * t;
#pragma unroll
  for (int dn = 0; dn < kHd / 8; ++dn) {
    *reinterpret_cast<uint32_t*>(dkg + dn * 8) = Pack(dkf[dn][0], dkf[dn][1]);
    *reinterpret_cast<uint32_t*>(dkg + 8 * ldd + dn * 8) =
        Pack(dkf[dn][2], dkf[dn][3]);
    *reinterpret_cast<uint32_t*>(dvg + dn * 8) = Pack(dvf[dn][0], dvf[dn][1]);
    *reinterpret_cast<uint32_t*>(dvg + 8 * ldd + dn * 8) =
        Pack(dvf[dn][2], dvf[dn][3]);
  }
}

// Grid (query blocks, heads, batch): dq of a block of 64 queries, its
// probabilities and their gradients recomputed against every key block up
// to its own (two products more than a single backward kernel, no
// atomics). The blocks with the most keys first.
template <int kHd>
__global__ void __launch_bounds__(kThreads, 2)
    DqKernel(const bf16* __restrict__ q, const bf16* __restrict__ k,
             const bf16* __restrict__ v, int64_t ld,
             const bf16* __restrict__ d_o, int64_t ldo,
             const float* __restrict__ lse, const float* __restrict__ delta,
             bf16* __restrict__ dq, int64_t ldd, int seq, int heads, int group,
             float scale) {
  constexpr int kTileBytes = kBlock * kHd * 2;
  extern __shared__ __align__(128) unsigned char smem[];
  const uint32_t sq = SmemAddr(smem), sdo = sq + kTileBytes;
  const uint32_t sk[2] = {sq + 2 * kTileBytes, sq + 3 * kTileBytes};
  const uint32_t sv[2] = {sq + 4 * kTileBytes, sq + 5 * kTileBytes};
  const int qb = static_cast<int>(gridDim.x) - 1 - static_cast<int>(blockIdx.x);
  const int h = static_cast<int>(blockIdx.y), b = static_cast<int>(blockIdx.z);
  const int kvh = h / group;
  const int64_t t0 = static_cast<int64_t>(b) * seq;
  const int64_t row0 = t0 + static_cast<int64_t>(qb) * kBlock;
  const bf16* kg = k + t0 * ld + kvh * kHd;
  const bf16* vg = v + t0 * ld + kvh * kHd;
  LoadTile<kHd>(sq, q + row0 * ld + h * kHd, ld);
  LoadTile<kHd>(sdo, d_o + row0 * ldo + h * kHd, ldo);
  LoadKv<kHd>(sk, sv, kg, vg, 0, ld);  // with the tiles above
  const int warp = static_cast<int>(threadIdx.x) >> 5;
  const int lane = static_cast<int>(threadIdx.x) & 31;
  const int g = lane >> 2, t = lane & 3;
  const float sl2 = scale * kLog2e;
  const int r0 = warp * 16 + g;
  const int64_t stats = (static_cast<int64_t>(b) * heads + h) * seq +
                        static_cast<int64_t>(qb) * kBlock + r0;
  const float lse2[2] = {lse[stats] * kLog2e, lse[stats + 8] * kLog2e};
  const float dl[2] = {delta[stats], delta[stats + 8]};
  float dqf[kHd / 8][4];
#pragma unroll
  for (int i = 0; i < kHd / 8; ++i)
    dqf[i][0] = dqf[i][1] = dqf[i][2] = dqf[i][3] = 0;
  for (int kb = 0; kb <= qb; ++kb) {
    CpAsyncWaitAll();
    __syncthreads();
    if (kb < qb) LoadKv<kHd>(sk, sv, kg, vg, kb + 1, ld);
    const uint32_t ks = sk[kb & 1], vs = sv[kb & 1];
    // S = Q K^T and dP = dO V^T.
    float sf[8][4], dpf[8][4];
    TwoProducts<kHd>(sq, ks, sdo, vs, warp * 16, lane, sf, dpf);
    // dS = P (dP - delta) scale, P from the log-sum-exp.
#pragma unroll
    for (int nt = 0; nt < 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int i = e >> 1;
        const bool masked = kb == qb && nt * 8 + 2 * t + (e & 1) > r0 + i * 8;
        const float p = masked ? 0.0f : exp2f(sf[nt][e] * sl2 - lse2[i]);
        dpf[nt][e] = p * (dpf[nt][e] - dl[i]) * scale;
      }
    AddProduct<kHd>(dqf, dpf, ks, lane);  // dQ += dS K
  }
  bf16* dqg = dq + (row0 + r0) * ldd + h * kHd + 2 * t;
#pragma unroll
  for (int dn = 0; dn < kHd / 8; ++dn) {
    *reinterpret_cast<uint32_t*>(dqg + dn * 8) = Pack(dqf[dn][0], dqf[dn][1]);
    *reinterpret_cast<uint32_t*>(dqg + 8 * ldd + dn * 8) =
        Pack(dqf[dn][2], dqf[dn][3]);
  }
}

template <int kHd>
constexpr int ForwardSmem() {
  return 5 * kBlock * kHd * 2;
}
template <int kHd>
constexpr int DqSmem() {
  return 6 * kBlock * kHd * 2;
}
template <int kHd>
constexpr int BackwardSmem() {
  return 6 * kBlock * kHd * 2 + 4 * kBlock * 4;
}

template <int kHd>
cudaError_t Forward(const FlashShape& sh, const void* q, const void* k,
                    const void* v, int64_t ld, void* o, int64_t ldo, float* lse,
                    cudaStream_t s) {
  static const cudaError_t attr = cudaFuncSetAttribute(
      ForwardKernel<kHd>, cudaFuncAttributeMaxDynamicSharedMemorySize,
      ForwardSmem<kHd>());
  if (attr != cudaSuccess) return attr;
  const dim3 grid(static_cast<unsigned>(sh.seq / kBlock),
                  static_cast<unsigned>(sh.heads),
                  static_cast<unsigned>(sh.batch));
  ForwardKernel<kHd><<<grid, kThreads, ForwardSmem<kHd>(), s>>>(
      static_cast<const bf16*>(q), static_cast<const bf16*>(k),
      static_cast<const bf16*>(v), ld, static_cast<bf16*>(o), ldo, lse,
      static_cast<int>(sh.seq), static_cast<int>(sh.heads),
      static_cast<int>(sh.heads / sh.kv_heads), sh.scale);
  return cudaGetLastError();
}

template <int kHd>
cudaError_t Backward(const FlashShape& sh, const void* q, const void* k,
                     const void* v, int64_t ld, const void* o, const void* d_o,
                     int64_t ldo, const float* lse, void* dq, void* dk,
                     void* dv, int64_t ldd, void* scratch, cudaStream_t s) {
  static const cudaError_t attr = [] {
    cudaError_t e = cudaFuncSetAttribute(
        BackwardKernel<kHd>, cudaFuncAttributeMaxDynamicSharedMemorySize,
        BackwardSmem<kHd>());
    if (e == cudaSuccess) {
      e = cudaFuncSetAttribute(DqKernel<kHd>,
                               cudaFuncAttributeMaxDynamicSharedMemorySize,
                               DqSmem<kHd>());
    }
    return e;
  }();
  if (attr != cudaSuccess) return attr;
  const int64_t tokens = sh.batch * sh.seq;
  float* delta = static_cast<float*>(scratch);
  const int64_t warps = tokens * sh.heads;
  DeltaKernel<kHd><<<static_cast<unsigned>((warps + 3) / 4), 128, 0, s>>>(
      static_cast<const bf16*>(o), static_cast<const bf16*>(d_o), ldo, delta,
      tokens, static_cast<int>(sh.seq), static_cast<int>(sh.heads));
  const dim3 grid(static_cast<unsigned>(sh.seq / kBlock),
                  static_cast<unsigned>(sh.kv_heads),
                  static_cast<unsigned>(sh.batch));
  BackwardKernel<kHd><<<grid, kThreads, BackwardSmem<kHd>(), s>>>(
      static_cast<const bf16*>(q), static_cast<const bf16*>(k),
      static_cast<const bf16*>(v), ld, static_cast<const bf16*>(d_o), ldo, lse,
      delta, static_cast<bf16*>(dk), static_cast<bf16*>(dv), ldd,
      static_cast<int>(sh.seq), static_cast<int>(sh.heads),
      static_cast<int>(sh.heads / sh.kv_heads), sh.scale);
  const dim3 qgrid(static_cast<unsigned>(sh.seq / kBlock),
                   static_cast<unsigned>(sh.heads),
                   static_cast<unsigned>(sh.batch));
  DqKernel<kHd><<<qgrid, kThreads, DqSmem<kHd>(), s>>>(
      static_cast<const bf16*>(q), static_cast<const bf16*>(k),
      static_cast<const bf16*>(v), ld, static_cast<const bf16*>(d_o), ldo, lse,
      delta, static_cast<bf16*>(dq), ldd, static_cast<int>(sh.seq),
      static_cast<int>(sh.heads), static_cast<int>(sh.heads / sh.kv_heads),
      sh.scale);
  return cudaGetLastError();
}

}  // namespace

bool FlashAttentionSupports(int64_t seq, int64_t head_dim) {
  return seq > 0 && seq % kBlock == 0 && (head_dim == 64 || head_dim == 128);
}

int64_t FlashAttentionScratchBytes(const FlashShape& sh) {
  return sh.batch * sh.seq * sh.heads * static_cast<int64_t>(sizeof(float));
}

cudaError_t FlashAttentionForward(const FlashShape& sh, const void* q,
                                  const void* k, const void* v, int64_t ld_qkv,
                                  void* o, int64_t ld_o, float* lse,
                                  cudaStream_t s) {
  if (!FlashAttentionSupports(sh.seq, sh.head_dim))
    return cudaErrorInvalidValue;
  return sh.head_dim == 128 ? Forward<128>(sh, q, k, v, ld_qkv, o, ld_o, lse, s)
                            : Forward<64>(sh, q, k, v, ld_qkv, o, ld_o, lse, s);
}

cudaError_t FlashAttentionBackward(const FlashShape& sh, const void* q,
                                   const void* k, const void* v, int64_t ld_qkv,
                                   const void* o, const void* d_o, int64_t ld_o,
                                   const float* lse, void* dq, void* dk,
                                   void* dv, int64_t ld_dqkv, void* scratch,
                                   cudaStream_t s) {
  if (!FlashAttentionSupports(sh.seq, sh.head_dim))
    return cudaErrorInvalidValue;
  return sh.head_dim == 128
             ? Backward<128>(sh, q, k, v, ld_qkv, o, d_o, ld_o, lse, dq, dk, dv,
                             ld_dqkv, scratch, s)
             : Backward<64>(sh, q, k, v, ld_qkv, o, d_o, ld_o, lse, dq, dk, dv,
                            ld_dqkv, scratch, s);
}

}  // namespace ringmaster::tk
