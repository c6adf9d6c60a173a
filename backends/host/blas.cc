#include "backends/host/blas.h"

#include <dlfcn.h>

#include <algorithm>
#include <mutex>
#include <thread>

#include "absl/strings/str_format.h"

namespace ringmaster {

const Blas* LoadBlas() {
  static std::once_flag once;
  static Blas blas;
  std::call_once(once, [] {
    for (const char* name :
         {"libopenblas.so.0", "libopenblas.so", "libblas.so.3"}) {
      void* lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
      if (lib == nullptr) continue;
      if (void* fn = dlsym(lib, "cblas_sgemm")) {
        blas.sgemm = reinterpret_cast<SgemmFn>(fn);  // the library stays loaded
        blas.set_threads = reinterpret_cast<void (*)(int)>(
            dlsym(lib, "openblas_set_num_threads"));
        blas.name = name;
        return;
      }
      dlclose(lib);
    }
  });
  return blas.sgemm ? &blas : nullptr;
}

std::string ShareCores(const Blas& blas, int ranks_on_host) {
  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  const int threads = std::max(1, cores / std::max(1, ranks_on_host));
  if (blas.set_threads == nullptr) return blas.name;
  blas.set_threads(threads);
  return absl::StrFormat("%s, %d threads", blas.name, threads);
}

}  // namespace ringmaster
