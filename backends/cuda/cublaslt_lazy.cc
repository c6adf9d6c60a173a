// cuBLASLt bound at first use instead of at process start.
//
// Loading libcublasLt runs its static initialisation, a third of a second of
// CPU or more; linked the usual way, every worker process paid it, whether it
// ran GPU work or not (host ranks, `ringmaster-worker kinds` and `probe`).
// The back end is not linked against the library: these definitions of the
// entry points it calls stand in for the library's, and the first call loads
// it (dlopen with the executable's run path and LD_LIBRARY_PATH, as the
// loader would) and forwards every call to the real symbol. Written by hand:
// the entry points are the thirteen the back end uses; a call to one not
// listed here fails to link, which is the reminder to add it.
#include <cublasLt.h>
#include <dlfcn.h>

#include <cstdio>
#include <string>

namespace {

// The library, loaded once; nullptr (and one line on stderr) where it cannot
// be: every entry point then answers CUBLAS_STATUS_NOT_INITIALIZED, which the
// callers report as a failed cuBLASLt call.
void* Library() {
  static void* const handle = [] {
    const std::string name =
        "libcublasLt.so." + std::to_string(CUBLAS_VER_MAJOR);
    void* h = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (h == nullptr) {
      const char* why = dlerror();
      std::fprintf(stderr, "ringmaster: cannot load %s: %s\n", name.c_str(),
                   why != nullptr ? why : "unknown error");
    }
    return h;
  }();
  return handle;
}

template <typename Fn>
Fn* Resolve(const char* name) {
  void* lib = Library();
  return lib != nullptr ? reinterpret_cast<Fn*>(dlsym(lib, name)) : nullptr;
}

}  // namespace

// One forwarding definition per entry point: the symbol is resolved once
// (a function-local static), then called with the arguments as given.
#define RM_LT_FORWARD(name, params, args)                      \
  extern "C" cublasStatus_t CUBLASWINAPI name params {         \
    static auto* const real = Resolve<decltype(name)>(#name);  \
    if (real == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED; \
    return real args;                                          \
  }

RM_LT_FORWARD(cublasLtCreate, (cublasLtHandle_t * handle), (handle))
RM_LT_FORWARD(cublasLtDestroy, (cublasLtHandle_t handle), (handle))
RM_LT_FORWARD(cublasLtMatmulDescCreate,
              (cublasLtMatmulDesc_t * desc, cublasComputeType_t compute,
               cudaDataType_t scale),
              (desc, compute, scale))
RM_LT_FORWARD(cublasLtMatmulDescDestroy, (cublasLtMatmulDesc_t desc), (desc))
RM_LT_FORWARD(cublasLtMatmulDescSetAttribute,
              (cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr,
               const void* buf, size_t size),
              (desc, attr, buf, size))
RM_LT_FORWARD(cublasLtMatrixLayoutCreate,
              (cublasLtMatrixLayout_t * layout, cudaDataType type,
               uint64_t rows, uint64_t cols, int64_t ld),
              (layout, type, rows, cols, ld))
RM_LT_FORWARD(cublasLtMatrixLayoutDestroy, (cublasLtMatrixLayout_t layout),
              (layout))
RM_LT_FORWARD(cublasLtMatrixLayoutSetAttribute,
              (cublasLtMatrixLayout_t layout,
               cublasLtMatrixLayoutAttribute_t attr, const void* buf,
               size_t size),
              (layout, attr, buf, size))
RM_LT_FORWARD(cublasLtMatmulPreferenceCreate,
              (cublasLtMatmulPreference_t * pref), (pref))
RM_LT_FORWARD(cublasLtMatmulPreferenceDestroy,
              (cublasLtMatmulPreference_t pref), (pref))
RM_LT_FORWARD(cublasLtMatmulPreferenceSetAttribute,
              (cublasLtMatmulPreference_t pref,
               cublasLtMatmulPreferenceAttributes_t attr, const void* buf,
               size_t size),
              (pref, attr, buf, size))
RM_LT_FORWARD(cublasLtMatmulAlgoGetHeuristic,
              (cublasLtHandle_t handle, cublasLtMatmulDesc_t desc,
               cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
               cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
               cublasLtMatmulPreference_t pref, int requested,
               cublasLtMatmulHeuristicResult_t results[], int* returned),
              (handle, desc, a, b, c, d, pref, requested, results, returned))
RM_LT_FORWARD(cublasLtMatmulAlgoConfigGetAttribute,
              (const cublasLtMatmulAlgo_t* algo,
               cublasLtMatmulAlgoConfigAttributes_t attr, void* buf,
               size_t size, size_t* written),
              (algo, attr, buf, size, written))
RM_LT_FORWARD(cublasLtMatmul,
              (cublasLtHandle_t handle, cublasLtMatmulDesc_t desc,
               const void* alpha, const void* a, cublasLtMatrixLayout_t a_desc,
               const void* b, cublasLtMatrixLayout_t b_desc, const void* beta,
               const void* c, cublasLtMatrixLayout_t c_desc, void* d,
               cublasLtMatrixLayout_t d_desc, const cublasLtMatmulAlgo_t* algo,
               void* workspace, size_t workspace_size, cudaStream_t stream),
              (handle, desc, alpha, a, a_desc, b, b_desc, beta, c, c_desc, d,
               d_desc, algo, workspace, workspace_size, stream))

#undef RM_LT_FORWARD
