// Question (issue 5): PyTorch's float16 training step (L8 H8192 B4096) is
// ~8% faster than its bfloat16 step and than Ringmaster's float16 step,
// while Ringmaster's bfloat16 step is as fast as PyTorch's or faster. Which
// GEMM kernels make the difference, and can Ringmaster's cuBLASLt calls
// reach them (more heuristic candidates, cuBLAS's own GemmEx, reduced-
// precision reductions, another cuBLAS version)?
//
// For the step's three GEMMs with Ringmaster's layouts (forward
// Z = W^T X, dW = A dZ^T, dX = W dZ; column-major, H = 8192, B = 4096) in
// float16 and bfloat16: every cuBLASLt heuristic candidate (up to 32) with
// its configuration and median time, and cublasGemmEx with and without
// CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION. Built twice: as a
// program (-DFX_MAIN) that prints the table, and as a shared library that
// fp16_gemm.py loads into a PyTorch process to name the kernels under
// PyTorch's profiler. Not part of the build; written here for this question.
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <vector>

namespace {

constexpr int64_t kH = 8192, kB = 4096;
constexpr int kMaxCandidates = 32;
constexpr size_t kWorkspace = 64ull << 20;  // Ringmaster's trainer's

#define FX_CHECK(x)                                                           \
  do {                                                                        \
    auto e_ = (x);                                                            \
    if (static_cast<int>(e_) != 0) {                                          \
      std::fprintf(stderr, "%s:%d: %s failed (%d)\n", __FILE__, __LINE__, #x, \
                   static_cast<int>(e_));                                     \
      return -1;                                                              \
    }                                                                         \
  } while (0)

template <typename T>
__global__ void Fill(T* p, int64_t n, float scale, uint32_t seed) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    uint32_t h = static_cast<uint32_t>(i) * 2654435761u ^ seed;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    float u = (h & 0xffffff) / float(0x1000000) * 2.0f - 1.0f;
    p[i] = T(u * scale);
  }
}

struct State {
  cublasLtHandle_t lt = nullptr;
  cublasHandle_t blas = nullptr;
  cudaStream_t stream = nullptr;
  void* a = nullptr;  // H x H (weights) or H x B (activations)
  void* b = nullptr;  // H x B
  void* d = nullptr;  // H x H
  void* ws = nullptr;
  cudaEvent_t ev[2];
  // The prepared problem.
  cudaDataType_t type = CUDA_R_16F;
  cublasOperation_t ta = CUBLAS_OP_N, tb = CUBLAS_OP_N;
  int64_t m = 0, n = 0, k = 0, lda = 0, ldb = 0, ldd = 0;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, ld = nullptr;
  std::vector<cublasLtMatmulHeuristicResult_t> cand;
};
State g;

int Attr(const cublasLtMatmulAlgo_t& algo,
         cublasLtMatmulAlgoConfigAttributes_t a) {
  uint32_t v = 0;
  size_t written = 0;
  cublasLtMatmulAlgoConfigGetAttribute(&algo, a, &v, sizeof v, &written);
  return static_cast<int>(v);
}

}  // namespace

extern "C" {

int fx_version() { return static_cast<int>(cublasLtGetVersion()); }

int fx_init() {
  if (g.lt != nullptr) return 0;
  FX_CHECK(cublasLtCreate(&g.lt));
  FX_CHECK(cublasCreate(&g.blas));
  FX_CHECK(cudaStreamCreateWithFlags(&g.stream, cudaStreamNonBlocking));
  FX_CHECK(cublasSetStream(g.blas, g.stream));
  FX_CHECK(cudaMalloc(&g.a, kH * kH * 2));
  FX_CHECK(cudaMalloc(&g.b, kH * kB * 2));
  FX_CHECK(cudaMalloc(&g.d, kH * kH * 2));
  FX_CHECK(cudaMalloc(&g.ws, kWorkspace));
  FX_CHECK(cudaEventCreate(&g.ev[0]));
  FX_CHECK(cudaEventCreate(&g.ev[1]));
  return 0;
}

// dtype 0 float16, 1 bfloat16; gemm 0 forward, 1 dW, 2 dX. Returns the
// number of candidates the heuristic offered.
int fx_prepare(int dtype, int gemm) {
  if (fx_init() != 0) return -1;
  g.type = dtype == 0 ? CUDA_R_16F : CUDA_R_16BF;
  // Ringmaster's layouts (backends/cuda/cuda_trainer.cc): operands scaled
  // like its weights (1/sqrt(H)) and activations (O(1)).
  float scale_a = 1.0f;
  switch (gemm) {
    case 0:  // Z[H,B] = W^T[H,H] X[H,B]
      g.ta = CUBLAS_OP_T, g.tb = CUBLAS_OP_N;
      g.m = kH, g.n = kB, g.k = kH, g.lda = kH, g.ldb = kH, g.ldd = kH;
      scale_a = 0.019f;
      break;
    case 1:  // dW[H,H] = A[H,B] dZ^T (dZ stored H x B)
      g.ta = CUBLAS_OP_N, g.tb = CUBLAS_OP_T;
      g.m = kH, g.n = kH, g.k = kB, g.lda = kH, g.ldb = kH, g.ldd = kH;
      break;
    default:  // dX[H,B] = W[H,H] dZ[H,B]
      g.ta = CUBLAS_OP_N, g.tb = CUBLAS_OP_N;
      g.m = kH, g.n = kB, g.k = kH, g.lda = kH, g.ldb = kH, g.ldd = kH;
      scale_a = 0.019f;
      break;
  }
  const int64_t na = gemm == 1 ? kH * kB : kH * kH;
  if (dtype == 0) {
    Fill<<<1024, 256, 0, g.stream>>>(static_cast<__half*>(g.a), na, scale_a, 1);
    Fill<<<1024, 256, 0, g.stream>>>(static_cast<__half*>(g.b), kH * kB, 1.0f,
                                     2);
  } else {
    Fill<<<1024, 256, 0, g.stream>>>(static_cast<__nv_bfloat16*>(g.a), na,
                                     scale_a, 1);
    Fill<<<1024, 256, 0, g.stream>>>(static_cast<__nv_bfloat16*>(g.b), kH * kB,
                                     1.0f, 2);
  }
  FX_CHECK(cudaStreamSynchronize(g.stream));
  if (g.desc) cublasLtMatmulDescDestroy(g.desc);
  for (auto* l : {g.la, g.lb, g.ld})
    if (l) cublasLtMatrixLayoutDestroy(l);
  FX_CHECK(cublasLtMatmulDescCreate(&g.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  FX_CHECK(cublasLtMatmulDescSetAttribute(g.desc, CUBLASLT_MATMUL_DESC_TRANSA,
                                          &g.ta, sizeof g.ta));
  FX_CHECK(cublasLtMatmulDescSetAttribute(g.desc, CUBLASLT_MATMUL_DESC_TRANSB,
                                          &g.tb, sizeof g.tb));
  const bool at = g.ta == CUBLAS_OP_T, bt = g.tb == CUBLAS_OP_T;
  FX_CHECK(cublasLtMatrixLayoutCreate(&g.la, g.type, at ? g.k : g.m,
                                      at ? g.m : g.k, g.lda));
  FX_CHECK(cublasLtMatrixLayoutCreate(&g.lb, g.type, bt ? g.n : g.k,
                                      bt ? g.k : g.n, g.ldb));
  FX_CHECK(cublasLtMatrixLayoutCreate(&g.ld, g.type, g.m, g.n, g.ldd));
  cublasLtMatmulPreference_t pref;
  FX_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  size_t ws = kWorkspace;
  FX_CHECK(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
  g.cand.assign(kMaxCandidates, {});
  int found = 0;
  FX_CHECK(cublasLtMatmulAlgoGetHeuristic(g.lt, g.desc, g.la, g.lb, g.ld, g.ld,
                                          pref, kMaxCandidates, g.cand.data(),
                                          &found));
  cublasLtMatmulPreferenceDestroy(pref);
  g.cand.resize(found);
  return found;
}

// Candidate i's configuration, one line.
int fx_describe(int i, char* buf, int len) {
  const cublasLtMatmulAlgo_t& a = g.cand[i].algo;
  int cluster = Attr(a, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID);
  std::snprintf(buf, len,
                "algo %d tile %d stages %d splitk %d reduction %d swizzle %d "
                "custom %d inner %d cluster %d ws %zu waves %.2f",
                Attr(a, CUBLASLT_ALGO_CONFIG_ID),
                Attr(a, CUBLASLT_ALGO_CONFIG_TILE_ID),
                Attr(a, CUBLASLT_ALGO_CONFIG_STAGES_ID),
                Attr(a, CUBLASLT_ALGO_CONFIG_SPLITK_NUM),
                Attr(a, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME),
                Attr(a, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING),
                Attr(a, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION),
                Attr(a, CUBLASLT_ALGO_CONFIG_INNER_SHAPE_ID), cluster,
                g.cand[i].workspaceSize, g.cand[i].wavesCount);
  return 0;
}

// Runs candidate i (-1: cublasGemmEx allowing reduced-precision
// reductions, -2: disallowing them) reps times.
int fx_run(int i, int reps) {
  const float alpha = 1.0f, beta = 0.0f;
  for (int r = 0; r < reps; ++r) {
    if (i >= 0) {
      FX_CHECK(cublasLtMatmul(g.lt, g.desc, &alpha, g.a, g.la, g.b, g.lb, &beta,
                              g.d, g.ld, g.d, g.ld, &g.cand[i].algo, g.ws,
                              kWorkspace, g.stream));
    } else {
      cublasMath_t math =
          i == -1 ? CUBLAS_DEFAULT_MATH
                  : static_cast<cublasMath_t>(
                        CUBLAS_DEFAULT_MATH |
                        CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION);
      FX_CHECK(cublasSetMathMode(g.blas, math));
      FX_CHECK(cublasGemmEx(g.blas, g.ta, g.tb, g.m, g.n, g.k, &alpha, g.a,
                            g.type, g.lda, g.b, g.type, g.ldb, &beta, g.d,
                            g.type, g.ldd, CUBLAS_COMPUTE_32F,
                            CUBLAS_GEMM_DEFAULT_TENSOR_OP));
    }
  }
  return 0;
}

// The median of `samples` timings of `reps` back-to-back runs, in ms per
// run (after one warm-up sample). Negative on failure.
double fx_time(int i, int samples, int reps) {
  if (fx_run(i, reps) != 0) return -1;
  std::vector<float> t;
  for (int s = 0; s < samples; ++s) {
    cudaEventRecord(g.ev[0], g.stream);
    if (fx_run(i, reps) != 0) return -1;
    cudaEventRecord(g.ev[1], g.stream);
    if (cudaEventSynchronize(g.ev[1]) != cudaSuccess) return -1;
    float ms = 0;
    cudaEventElapsedTime(&ms, g.ev[0], g.ev[1]);
    t.push_back(ms / reps);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

int fx_sync() { return static_cast<int>(cudaStreamSynchronize(g.stream)); }

}  // extern "C"

#ifdef FX_MAIN
int main() {
  std::printf("cublasLt version %d\n", fx_version());
  const char* dn[] = {"float16", "bfloat16"};
  const char* gn[] = {"forward", "dW", "dX"};
  char line[256];
  for (int dtype = 0; dtype < 2; ++dtype) {
    for (int gemm = 0; gemm < 3; ++gemm) {
      int n = fx_prepare(dtype, gemm);
      if (n < 0) return 1;
      const double flop = 2.0 * g.m * g.n * g.k;
      std::printf("== %s %s (%ld x %ld x %ld): %d candidates\n", dn[dtype],
                  gn[gemm], static_cast<long>(g.m), static_cast<long>(g.n),
                  static_cast<long>(g.k), n);
      for (int i = -2; i < n; ++i) {
        double ms = fx_time(i, 7, 10);
        if (i >= 0) {
          fx_describe(i, line, sizeof line);
        } else {
          std::snprintf(line, sizeof line, "cublasGemmEx %s",
                        i == -1 ? "reduced-precision reduction allowed"
                                : "reduced-precision reduction disallowed");
        }
        std::printf("%3d %8.4f ms %6.1f TFLOP/s  %s\n", i, ms,
                    ms > 0 ? flop / (ms * 1e9) : 0.0, line);
      }
    }
  }
  return 0;
}
#endif
