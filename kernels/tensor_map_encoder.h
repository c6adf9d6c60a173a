// The driver's tensor map encoder (cuTensorMapEncodeTiled), looked up once
// through the CUDA runtime so that nothing links libcuda: null where the
// driver has none. Header-only, so that bench/ probes built by nvcc alone
// use the same lookup as the kernels.
#ifndef RINGMASTER_KERNELS_TENSOR_MAP_ENCODER_H_
#define RINGMASTER_KERNELS_TENSOR_MAP_ENCODER_H_

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>

namespace ringmaster::tk {

inline PFN_cuTensorMapEncodeTiled_v12000 TensorMapEncoder() {
  static const PFN_cuTensorMapEncodeTiled_v12000 encode = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000,
                                         cudaEnableDefault,
                                         &found) != cudaSuccess ||
        found != cudaDriverEntryPointSuccess) {
      fn = nullptr;
    }
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
  }();
  return encode;
}

}  // namespace ringmaster::tk

#endif  // RINGMASTER_KERNELS_TENSOR_MAP_ENCODER_H_
