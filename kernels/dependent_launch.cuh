// Programmatic dependent launch (sm_90), shared by the decode kernels: a
// kernel launched as a dependent of the stream's previous kernel may start
// while that one still runs, and must wait for it before it reads what it
// wrote.
#ifndef RINGMASTER_KERNELS_DEPENDENT_LAUNCH_CUH_
#define RINGMASTER_KERNELS_DEPENDENT_LAUNCH_CUH_

#include <cuda_runtime_api.h>

#include <cstddef>

namespace ringmaster::tk {

// Trigger lets the next kernel in the stream start once every block of
// this one has; Wait blocks until the kernel before has finished and its
// writes are visible. Both are no-ops in a kernel not launched that way.
__device__ __forceinline__ void Trigger() {
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}
__device__ __forceinline__ void Wait() {
  asm volatile("griddepcontrol.wait;" ::: "memory");
}

// Launches kernel on grid x threads with `smem` bytes of dynamic shared
// memory, as a programmatic dependent of the stream's previous kernel
// when pdl.
template <typename... Params, typename... Args>
cudaError_t Launch(void (*kernel)(Params...), dim3 grid, int threads,
                   size_t smem, bool pdl, cudaStream_t s, Args... args) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = dim3(static_cast<unsigned>(threads));
  cfg.dynamicSmemBytes = smem;
  cfg.stream = s;
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr.val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = &attr;
  cfg.numAttrs = pdl ? 1 : 0;
  return cudaLaunchKernelEx(&cfg, kernel, static_cast<Params>(args)...);
}

}  // namespace ringmaster::tk

#endif  // RINGMASTER_KERNELS_DEPENDENT_LAUNCH_CUH_
