// NVML loaded at run time: there is no nvml.h on build machines, and the
// driver (which provides libnvidia-ml.so.1) exists only on GPU machines.
#ifndef RINGMASTER_BACKENDS_CUDA_NVML_H_
#define RINGMASTER_BACKENDS_CUDA_NVML_H_

#include <optional>
#include <string>

namespace ringmaster {

// The driver version ("580.159.04"), or nullopt when NVML cannot be loaded.
std::optional<std::string> NvmlDriverVersion();

}  // namespace ringmaster

#endif  // RINGMASTER_BACKENDS_CUDA_NVML_H_
