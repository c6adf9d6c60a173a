// OpenBLAS loaded at run time (dlopen), so the worker starts where no BLAS
// is installed; what needs it is then skipped with the reason. The CBLAS
// interface is declared by hand (no cblas.h needed to build).
#ifndef RINGMASTER_BACKENDS_HOST_BLAS_H_
#define RINGMASTER_BACKENDS_HOST_BLAS_H_

#include <cstdint>
#include <string>

namespace ringmaster {

constexpr int kCblasRowMajor = 101;
constexpr int kCblasNoTrans = 111;
constexpr int kCblasTrans = 112;

using SgemmFn = void (*)(int order, int trans_a, int trans_b, int m, int n,
                         int k, float alpha, const float* a, int lda,
                         const float* b, int ldb, float beta, float* c,
                         int ldc);

struct Blas {
  SgemmFn sgemm = nullptr;
  void (*set_threads)(int) = nullptr;  // openblas_set_num_threads, if any
  std::string name;                    // "libopenblas.so.0"
};

// The first of libopenblas.so.0, libopenblas.so, libblas.so.3 with
// cblas_sgemm; nullptr when none. Loaded once per process.
const Blas* LoadBlas();

// Sets the BLAS threads to the host's cores / `ranks_on_host` (ranks of
// one host share its cores: an idle rank's spinning OpenBLAS threads would
// slow the busy one's) and returns a description like
// "libopenblas.so.0, 8 threads".
std::string ShareCores(const Blas& blas, int ranks_on_host);

// y[n x m] = x[n x k] w[k x m], row-major, through LoadBlas() (which the
// caller has checked).
inline void Gemm(const float* x, const float* w, float* y, int64_t n, int64_t k,
                 int64_t m) {
  LoadBlas()->sgemm(kCblasRowMajor, kCblasNoTrans, kCblasNoTrans,
                    static_cast<int>(n), static_cast<int>(m),
                    static_cast<int>(k), 1.0f, x, static_cast<int>(k), w,
                    static_cast<int>(m), 0.0f, y, static_cast<int>(m));
}

}  // namespace ringmaster

#endif  // RINGMASTER_BACKENDS_HOST_BLAS_H_
