// The CUDA back end's provider: NCCL collectives, CUDA node benchmarks,
// the cuBLASLt trainer and NVML telemetry (backends/provider.h), with the
// machine facts the worker's probe reports.
#ifndef RINGMASTER_BACKENDS_CUDA_CUDA_PROVIDER_H_
#define RINGMASTER_BACKENDS_CUDA_CUDA_PROVIDER_H_

#include <memory>
#include <string>

#include "backends/provider.h"

namespace ringmaster {

std::unique_ptr<BackendProvider> NewCudaProvider();

// GPUs visible here, CUDA library versions and the GPUs' description as
// JSON (backends/provider.h's free functions, for this back end).
int CudaVisibleGpus();
BackendInfo CudaVersions();
std::string CudaGpusJson();

}  // namespace ringmaster

#endif  // RINGMASTER_BACKENDS_CUDA_CUDA_PROVIDER_H_
