// CUDA, cuBLAS and NCCL return codes as absl::Status naming the call,
// file:line and rank; RM_CUDA / RM_CUBLAS / RM_NCCL return them from the
// enclosing function on failure. Shared by the CUDA backend's files.
#ifndef RINGMASTER_BACKENDS_CUDA_CUDA_CHECK_H_
#define RINGMASTER_BACKENDS_CUDA_CUDA_CHECK_H_

#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"

namespace ringmaster {

inline absl::Status CudaStatus(cudaError_t err, const char* expr,
                               const char* file, int line, int rank) {
  if (err == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(absl::StrFormat("%s:%d: rank %d: %s: %s", file,
                                             line, rank, expr,
                                             cudaGetErrorString(err)));
}

inline absl::Status CublasStatus(cublasStatus_t st, const char* expr,
                                 const char* file, int line, int rank) {
  if (st == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  return absl::InternalError(
      absl::StrFormat("%s:%d: rank %d: %s: cuBLAS status %d", file, line, rank,
                      expr, static_cast<int>(st)));
}

inline absl::Status NcclStatus(ncclResult_t res, const char* expr,
                               const char* file, int line, int rank) {
  if (res == ncclSuccess) return absl::OkStatus();
  return absl::InternalError(
      absl::StrFormat("%s:%d: rank %d: %s: %s (%s)", file, line, rank, expr,
                      ncclGetErrorString(res), ncclGetLastError(nullptr)));
}

}  // namespace ringmaster

#define RM_CHECK_STATUS_(fn, expr, rank)                           \
  do {                                                             \
    absl::Status rm_s_ =                                           \
        ::ringmaster::fn((expr), #expr, __FILE__, __LINE__, rank); \
    if (!rm_s_.ok()) return rm_s_;                                 \
  } while (0)
#define RM_CUDA(expr, rank) RM_CHECK_STATUS_(CudaStatus, expr, rank)
#define RM_CUBLAS(expr, rank) RM_CHECK_STATUS_(CublasStatus, expr, rank)
#define RM_NCCL(expr, rank) RM_CHECK_STATUS_(NcclStatus, expr, rank)

#endif  // RINGMASTER_BACKENDS_CUDA_CUDA_CHECK_H_
