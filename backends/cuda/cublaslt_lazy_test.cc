// The lazily bound cuBLASLt (cublaslt_lazy.cc): nothing of the library is in
// the process before the back end's first call, and that call loads it and
// reaches the real entry point. Runs without a GPU (a matrix layout is a host
// object).
#include <cublasLt.h>
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

namespace {

bool LibraryMapped() {
  std::ifstream maps("/proc/self/maps");
  std::stringstream text;
  text << maps.rdbuf();
  return text.str().find("libcublasLt") != std::string::npos;
}

TEST(CublasLtLazy, LoadedByTheFirstCallAndForwarded) {
  EXPECT_FALSE(LibraryMapped()) << "libcublasLt loaded at process start";

  cublasLtMatrixLayout_t layout = nullptr;
  ASSERT_EQ(cublasLtMatrixLayoutCreate(&layout, CUDA_R_16BF, 64, 32, 64),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_TRUE(LibraryMapped());
  uint64_t rows = 0;
  size_t written = 0;
  // Read back through the library (not forwarded here: resolved directly
  // from the loaded object, so the value proves the layout is the real
  // library's).
  using GetFn =
      cublasStatus_t(cublasLtMatrixLayout_t, cublasLtMatrixLayoutAttribute_t,
                     void*, size_t, size_t*);
  void* lib =
      dlopen(("libcublasLt.so." + std::to_string(CUBLAS_VER_MAJOR)).c_str(),
             RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(lib, nullptr);
  auto* get =
      reinterpret_cast<GetFn*>(dlsym(lib, "cublasLtMatrixLayoutGetAttribute"));
  ASSERT_NE(get, nullptr);
  ASSERT_EQ(
      get(layout, CUBLASLT_MATRIX_LAYOUT_ROWS, &rows, sizeof(rows), &written),
      CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(rows, 64u);
  dlclose(lib);
  EXPECT_EQ(cublasLtMatrixLayoutDestroy(layout), CUBLAS_STATUS_SUCCESS);
}

}  // namespace
