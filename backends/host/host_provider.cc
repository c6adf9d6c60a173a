#include "backends/host/host_provider.h"

#include "backends/host/host_backend.h"
#include "backends/host/host_inference.h"
#include "backends/host/host_node_bench.h"
#include "backends/host/host_trainer.h"
#include "backends/host/host_transformer.h"

namespace ringmaster {
namespace {

class HostProvider : public BackendProvider {
 public:
  v1::Backend kind() const override { return v1::BACKEND_HOST; }
  std::string name() const override { return "host"; }
  BackendInfo LibraryInfo() const override { return {}; }

  absl::StatusOr<std::unique_ptr<CollectiveBackend>> NewCollectiveBackend(
      const RankResources& r, const std::string& /*relayed_blob*/) override {
    return std::unique_ptr<CollectiveBackend>(
        std::make_unique<HostBackend>(*r.comm, r.faults));
  }
  absl::StatusOr<std::unique_ptr<NodeBench>> NewNodeBench(
      const RankResources& r) override {
    return std::unique_ptr<NodeBench>(
        std::make_unique<HostNodeBench>(*r.comm, r.faults));
  }
  absl::StatusOr<std::unique_ptr<Trainer>> NewTrainer(
      const RankResources& r) override {
    return std::unique_ptr<Trainer>(std::make_unique<HostTrainer>(*r.comm));
  }
  absl::StatusOr<std::unique_ptr<TransformerTrainer>> NewTransformerTrainer(
      const RankResources& r) override {
    return NewHostTransformer(*r.comm);
  }
  absl::StatusOr<std::unique_ptr<InferenceEngine>> NewInferenceEngine(
      const RankResources& r) override {
    return NewHostInferenceEngine(*r.comm);
  }
  std::unique_ptr<TelemetrySource> NewTelemetrySource(
      int /*local_rank*/) override {
    return HostTelemetrySource();
  }
};

}  // namespace

std::unique_ptr<BackendProvider> NewHostProvider() {
  return std::make_unique<HostProvider>();
}

}  // namespace ringmaster
