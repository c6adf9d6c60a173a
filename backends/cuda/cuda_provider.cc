#include "backends/cuda/cuda_provider.h"

#include <algorithm>

#include "absl/strings/str_format.h"
#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_inference.h"
#include "backends/cuda/cuda_node_bench.h"
#include "backends/cuda/cuda_topology.h"
#include "backends/cuda/cuda_trainer.h"
#include "backends/cuda/cuda_transformer.h"
#include "backends/cuda/nvml.h"

namespace ringmaster {
namespace {

// The GPU a rank uses: its local rank, wrapped over the visible GPUs.
int DeviceOf(int local_rank) {
  return local_rank % std::max(1, CudaDeviceCount());
}

class CudaProvider : public BackendProvider {
 public:
  v1::Backend kind() const override { return v1::BACKEND_CUDA; }
  std::string name() const override { return "cuda"; }
  BackendInfo LibraryInfo() const override { return CudaLibraryInfo(); }
  absl::StatusOr<std::string> NewBootstrapBlob() override {
    return NewNcclUniqueId();
  }

  absl::StatusOr<std::unique_ptr<CollectiveBackend>> NewCollectiveBackend(
      const RankResources& r, const std::string& relayed_blob) override {
    auto created =
        CudaBackend::Create(*r.control, r.local_rank, r.faults, relayed_blob);
    if (!created.ok()) return created.status();
    return std::unique_ptr<CollectiveBackend>(std::move(*created));
  }
  absl::StatusOr<std::unique_ptr<NodeBench>> NewNodeBench(
      const RankResources& r) override {
    auto created = CudaNodeBench::Create(*r.control, DeviceOf(r.local_rank));
    if (!created.ok()) return created.status();
    return std::unique_ptr<NodeBench>(std::move(*created));
  }
  absl::StatusOr<std::unique_ptr<Trainer>> NewTrainer(
      const RankResources& r) override {
    auto created = CudaTrainer::Create(*r.control, DeviceOf(r.local_rank));
    if (!created.ok()) return created.status();
    return std::unique_ptr<Trainer>(std::move(*created));
  }
  absl::StatusOr<std::unique_ptr<TransformerTrainer>> NewTransformerTrainer(
      const RankResources& r) override {
    return NewCudaTransformer(DeviceOf(r.local_rank), r.control->size());
  }
  absl::StatusOr<std::unique_ptr<InferenceEngine>> NewInferenceEngine(
      const RankResources& r) override {
    return NewCudaInferenceEngine(DeviceOf(r.local_rank), r.control->size());
  }
  int64_t FreeMemoryPerRank(int local_rank, int /*local_ranks*/) override {
    return CudaFreeMemory(DeviceOf(local_rank));
  }
  std::string MemoryName() const override { return "GPU memory"; }
  std::unique_ptr<TelemetrySource> NewTelemetrySource(int local_rank) override {
    const int dev = DeviceOf(local_rank);
    const std::string bus = CudaBusId(dev);
    return NvmlTelemetrySource(
        bus, absl::StrFormat("GPU %s %s", bus, CudaDeviceName(dev)));
  }
};

}  // namespace

std::unique_ptr<BackendProvider> NewCudaProvider() {
  return std::make_unique<CudaProvider>();
}

int CudaVisibleGpus() { return CudaDeviceCount(); }
BackendInfo CudaVersions() { return CudaLibraryInfo(); }
std::string CudaGpusJson() { return DescribeGpusJson(); }

}  // namespace ringmaster
