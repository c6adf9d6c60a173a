// The back-end factory: the one place that knows whether this build has
// the CUDA back end.
#include "backends/provider.h"

#include "backends/host/host_provider.h"
#ifdef RINGMASTER_HAVE_CUDA
#include "backends/cuda/cuda_provider.h"
#endif

namespace ringmaster {

#ifdef RINGMASTER_HAVE_CUDA
bool HaveCudaBackend() { return true; }
int VisibleGpuCount() { return CudaVisibleGpus(); }
BackendInfo GpuLibraryInfo() { return CudaVersions(); }
std::string DescribeGpusAsJson() { return CudaGpusJson(); }
static std::unique_ptr<BackendProvider> NewGpuProvider() {
  return NewCudaProvider();
}
#else
bool HaveCudaBackend() { return false; }
int VisibleGpuCount() { return 0; }
BackendInfo GpuLibraryInfo() { return {}; }
std::string DescribeGpusAsJson() {
  return R"({"devices": [], "pairs": [], "note": "this worker was )"
         R"(built without the CUDA backend"})";
}
static std::unique_ptr<BackendProvider> NewGpuProvider() { return nullptr; }
#endif

absl::StatusOr<std::unique_ptr<BackendProvider>> MakeBackendProvider(
    std::string_view name) {
  if (name == "auto") name = VisibleGpuCount() > 0 ? "cuda" : "host";
  if (name == "host") return NewHostProvider();
  if (name != "cuda") {
    return absl::InvalidArgumentError(
        "backend: expected auto, host or cuda, got " + std::string(name));
  }
  std::unique_ptr<BackendProvider> gpu = NewGpuProvider();
  if (!gpu) {
    return absl::UnimplementedError(
        "this worker was built without the CUDA backend");
  }
  return gpu;
}

}  // namespace ringmaster
