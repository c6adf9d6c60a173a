// Which GELU does cuBLASLt's epilogue compute: the exact (erf) form or the
// tanh approximation? An fp32 GEMM (values of a few units, where the two
// forms differ by up to ~5e-4) with CUBLASLT_EPILOGUE_GELU_AUX writes
// GELU(x) and x (aux); one with CUBLASLT_EPILOGUE_DGELU writes
// (A B) * GELU'(aux). Both are compared, on the host, with the erf form
// and the tanh form of the same aux values. Run on a GPU machine:
//   bench/experiments/gelu_epilogue   (built by hand, see the README there)
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CK(x)                                                           \
  do {                                                                  \
    auto e = (x);                                                       \
    if (static_cast<int>(e) != 0) {                                     \
      std::fprintf(stderr, "%s:%d: %s -> %d\n", __FILE__, __LINE__, #x, \
                   static_cast<int>(e));                                \
      std::exit(1);                                                     \
    }                                                                   \
  } while (0)

static double GeluErf(double x) {
  return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
}
static double GeluTanh(double x) {
  return 0.5 * x *
         (1 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
}
static double Deriv(double (*f)(double), double x) {
  const double h = 1e-5;
  return (f(x + h) - f(x - h)) / (2 * h);
}

int main() {
  const int n = 256;
  std::vector<float> ha(n * n), hb(n * n), hd(n * n), haux(n * n);
  srand(7);
  for (int i = 0; i < n * n; ++i) {
    ha[i] = ((rand() / (float)RAND_MAX - 0.5f) * 1.22f);
    hb[i] = ((rand() / (float)RAND_MAX - 0.5f) * 1.22f);
  }
  void *a, *b, *d, *aux, *ws;
  const size_t bytes = n * n * sizeof(float), wsb = 32 << 20;
  for (void** p : {&a, &b, &d, &aux}) CK(cudaMalloc(p, bytes));
  CK(cudaMalloc(&ws, wsb));
  CK(cudaMemcpy(a, ha.data(), bytes, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(b, hb.data(), bytes, cudaMemcpyHostToDevice));
  cublasLtHandle_t lt;
  CK(cublasLtCreate(&lt));
  auto run = [&](cublasLtEpilogue_t epi) {
    cublasLtMatmulDesc_t desc;
    CK(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    CK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi,
                                      sizeof epi));
    CK(cublasLtMatmulDescSetAttribute(
        desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof aux));
    int64_t ld = n;
    CK(cublasLtMatmulDescSetAttribute(
        desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld, sizeof ld));
    cudaDataType_t t = CUDA_R_32F;
    CK(cublasLtMatmulDescSetAttribute(
        desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE, &t, sizeof t));
    cublasLtMatrixLayout_t la, lb, ld_;
    CK(cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, n, n, n));
    CK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_32F, n, n, n));
    CK(cublasLtMatrixLayoutCreate(&ld_, CUDA_R_32F, n, n, n));
    cublasLtMatmulPreference_t pref;
    CK(cublasLtMatmulPreferenceCreate(&pref));
    CK(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb, sizeof wsb));
    cublasLtMatmulHeuristicResult_t res;
    int found = 0;
    CK(cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, ld_, ld_, pref, 1, &res,
                                      &found));
    if (!found) {
      std::printf("no algorithm\n");
      std::exit(1);
    }
    const float one = 1, zero = 0;
    CK(cublasLtMatmul(lt, desc, &one, a, la, b, lb, &zero, d, ld_, d, ld_,
                      &res.algo, ws, wsb, 0));
    CK(cudaDeviceSynchronize());
  };
  // Forward: D = GELU(AB), aux = AB.
  run(CUBLASLT_EPILOGUE_GELU_AUX);
  CK(cudaMemcpy(hd.data(), d, bytes, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(haux.data(), aux, bytes, cudaMemcpyDeviceToHost));
  double e_erf = 0, e_tanh = 0, gap = 0;
  for (int i = 0; i < n * n; ++i) {
    double x = (haux[i]), y = (hd[i]);
    e_erf = std::max(e_erf, std::fabs(y - GeluErf(x)));
    e_tanh = std::max(e_tanh, std::fabs(y - GeluTanh(x)));
    gap = std::max(gap, std::fabs(GeluErf(x) - GeluTanh(x)));
  }
  std::printf(
      "GELU_AUX: max |D - erf GELU(aux)| %.3g, max |D - tanh GELU(aux)| %.3g "
      "(the two forms differ by up to %.3g here)\n",
      e_erf, e_tanh, gap);
  // Backward: D = (AB) * GELU'(aux), aux kept from above.
  std::vector<float> hab(n * n);
  run(CUBLASLT_EPILOGUE_DEFAULT);
  CK(cudaMemcpy(hab.data(), d, bytes, cudaMemcpyDeviceToHost));
  run(CUBLASLT_EPILOGUE_DGELU);
  CK(cudaMemcpy(hd.data(), d, bytes, cudaMemcpyDeviceToHost));
  double d_erf = 0, d_tanh = 0, dgap = 0;
  for (int i = 0; i < n * n; ++i) {
    double x = (haux[i]), g = (hab[i]), y = (hd[i]);
    d_erf = std::max(d_erf, std::fabs(y - g * Deriv(GeluErf, x)));
    d_tanh = std::max(d_tanh, std::fabs(y - g * Deriv(GeluTanh, x)));
    dgap =
        std::max(dgap, std::fabs(g * (Deriv(GeluErf, x) - Deriv(GeluTanh, x))));
  }
  std::printf(
      "DGELU: max |D - AB erf GELU'(aux)| %.3g, max |D - AB tanh GELU'(aux)| "
      "%.3g "
      "(forms differ by up to %.3g)\n",
      d_erf, d_tanh, dgap);
  return 0;
}
