// cuBLASLt products for the transformer's GPU paths (training and
// inference), shared by backends/cuda/cuda_transformer.cc and
// cuda_inference.cc.
#ifndef RINGMASTER_BACKENDS_CUDA_LT_GEMMS_H_
#define RINGMASTER_BACKENDS_CUDA_LT_GEMMS_H_

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <array>
#include <cstdint>
#include <map>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "backends/cuda/cuda_check.h"

namespace ringmaster {

// cuBLASLt products of bfloat16 column-major operands with fp32
// accumulation, optionally strided-batched: D = alpha op(A) op(B) + beta C.
// Each shape's descriptors and the heuristic's first algorithm are made
// once and kept. (Timing the heuristic's first 8 candidates on the real
// operands measured no faster step on an H200.)
class LtGemms {
 public:
  ~LtGemms() {
    for (auto& [key, p] : plans_) {
      cublasLtMatmulDescDestroy(p.desc);
      for (auto l : {p.a, p.b, p.c}) cublasLtMatrixLayoutDestroy(l);
    }
    if (workspace_ != nullptr) cudaFree(workspace_);
    if (handle_ != nullptr) cublasLtDestroy(handle_);
  }
  absl::Status Init() {
    RM_CUBLAS(cublasLtCreate(&handle_), 0);
    RM_CUDA(cudaMalloc(&workspace_, kWorkspace), 0);
    return absl::OkStatus();
  }
  // Leading dimensions lda, ldb, ldc (C and D share theirs); strides
  // between batch entries sa, sb, sc (elements).
  absl::Status Run(bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                   const void* a, int64_t lda, int64_t sa, const void* b,
                   int64_t ldb, int64_t sb, const void* c, void* d, int64_t ldc,
                   int64_t sc, int batch, float alpha, float beta,
                   cudaStream_t s) {
    const std::array<int64_t, 12> key{ta,  tb,  m,  n,  k,  lda,
                                      ldb, ldc, sa, sb, sc, batch};
    if (c == nullptr) c = d;  // beta is 0: C is not read
    auto it = plans_.find(key);
    if (it == plans_.end()) {
      Plan p;
      absl::Status made = Make(key, &p);
      if (!made.ok()) return made;
      it = plans_.emplace(key, p).first;
    }
    const Plan& p = it->second;
    RM_CUBLAS(cublasLtMatmul(handle_, p.desc, &alpha, a, p.a, b, p.b, &beta, c,
                             p.c, d, p.c, &p.algo, workspace_, kWorkspace, s),
              0);
    return absl::OkStatus();
  }

 private:
  struct Plan {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulAlgo_t algo{};
  };
  static constexpr size_t kWorkspace = 64ull << 20;

  static absl::Status Layout(cublasLtMatrixLayout_t* l, int64_t rows,
                             int64_t cols, int64_t ld, int batch,
                             int64_t stride) {
    RM_CUBLAS(cublasLtMatrixLayoutCreate(l, CUDA_R_16BF, rows, cols, ld), 0);
    if (batch > 1) {
      RM_CUBLAS(
          cublasLtMatrixLayoutSetAttribute(
              *l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof(batch)),
          0);
      RM_CUBLAS(cublasLtMatrixLayoutSetAttribute(
                    *l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                    sizeof(stride)),
                0);
    }
    return absl::OkStatus();
  }

  absl::Status Make(const std::array<int64_t, 12>& key, Plan* p) {
    const bool ta = key[0], tb = key[1];
    const int64_t m = key[2], n = key[3], k = key[4];
    const int batch = static_cast<int>(key[11]);
    RM_CUBLAS(
        cublasLtMatmulDescCreate(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), 0);
    const cublasOperation_t opa = ta ? CUBLAS_OP_T : CUBLAS_OP_N,
                            opb = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    RM_CUBLAS(cublasLtMatmulDescSetAttribute(
                  p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof(opa)),
              0);
    RM_CUBLAS(cublasLtMatmulDescSetAttribute(
                  p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof(opb)),
              0);
    absl::Status s =
        Layout(&p->a, ta ? k : m, ta ? m : k, key[5], batch, key[8]);
    if (s.ok())
      s = Layout(&p->b, tb ? n : k, tb ? k : n, key[6], batch, key[9]);
    if (s.ok()) s = Layout(&p->c, m, n, key[7], batch, key[10]);
    if (!s.ok()) return s;
    cublasLtMatmulPreference_t pref = nullptr;
    RM_CUBLAS(cublasLtMatmulPreferenceCreate(&pref), 0);
    size_t ws = kWorkspace;
    cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws));
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(
        handle_, p->desc, p->a, p->b, p->c, p->c, pref, 1, &result, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    RM_CUBLAS(st, 0);
    if (found == 0) {
      return absl::InternalError(absl::StrFormat(
          "cuBLASLt has no algorithm for a %dx%dx%d product (batch %d)", m, n,
          k, batch));
    }
    p->algo = result.algo;
    return absl::OkStatus();
  }

  cublasLtHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
  std::map<std::array<int64_t, 12>, Plan> plans_;
};

}  // namespace ringmaster

#endif  // RINGMASTER_BACKENDS_CUDA_LT_GEMMS_H_
