// The host back end's provider: MPI or TCP collectives, memcpy/MPI/OpenBLAS
// node benchmarks and the OpenBLAS trainer (backends/provider.h).
#ifndef RINGMASTER_BACKENDS_HOST_HOST_PROVIDER_H_
#define RINGMASTER_BACKENDS_HOST_HOST_PROVIDER_H_

#include <memory>

#include "backends/provider.h"

namespace ringmaster {

std::unique_ptr<BackendProvider> NewHostProvider();

}  // namespace ringmaster

#endif  // RINGMASTER_BACKENDS_HOST_HOST_PROVIDER_H_
