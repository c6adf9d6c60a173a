// Launchers for the kernels that fill and check collective buffers.
//
// Plain declarations: callers need only the CUDA runtime header. `dtype`
// and `op` take v1::DataType / v1::ReduceOp values; patterns are those of
// kernels/patterns.h.
#ifndef RINGMASTER_KERNELS_COLLECTIVE_KERNELS_H_
#define RINGMASTER_KERNELS_COLLECTIVE_KERNELS_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/patterns.h"

namespace ringmaster {

// Writes PatternInput(op, rank, nranks, range, i + offset) to element i.
cudaError_t LaunchFillPattern(void* buf, int dtype, int64_t count, int op,
                              int rank, int nranks, int range, int64_t offset,
                              cudaStream_t stream);

// Adds to *d_wrong the number of elements i of `buf` for which
// PatternMatches(buf[i], PatternExpected(check, i)) is false. *d_wrong
// must be zeroed by the caller.
cudaError_t LaunchCountWrong(const void* buf, int dtype, int64_t count,
                             const PatternCheck& check,
                             unsigned long long* d_wrong, cudaStream_t stream);

// Adds 1 to element `index` (fault injection for tests).
cudaError_t LaunchCorruptElement(void* buf, int dtype, int64_t index,
                                 cudaStream_t stream);

}  // namespace ringmaster

#endif  // RINGMASTER_KERNELS_COLLECTIVE_KERNELS_H_
