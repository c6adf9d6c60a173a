// What a back end offers one rank, and the one place that knows which back
// ends this build has.
//
// A BackendProvider makes the primitives that benchmark kinds compose:
// collective backends (NCCL, or MPI/TCP on the host), node benchmarks
// (copies, latency, GEMM), trainers and the telemetry source of this rank's
// device. The worker and the kinds only ever see this interface; the host
// provider is always built, the CUDA one where the toolkit was found.
#ifndef RINGMASTER_BACKENDS_PROVIDER_H_
#define RINGMASTER_BACKENDS_PROVIDER_H_

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "backends/backend.h"
#include "backends/inference_engine.h"
#include "backends/node_bench.h"
#include "backends/trainer.h"
#include "backends/transformer_trainer.h"
#include "comm/host_comm.h"
#include "core/faults.h"
#include "core/memory_need.h"
#include "core/telemetry.h"
#include "ringmaster/v1/plan.pb.h"

namespace ringmaster {

// Where one rank runs: its communicators and identity. Everything here
// outlives the objects a provider makes from it.
struct RankResources {
  HostComm* comm = nullptr;    // the ranks the object spans
  Control* control = nullptr;  // over the same ranks
  int local_rank = 0;          // rank on its host: picks the GPU
  std::vector<Fault> faults;   // RINGMASTER_FAULT, for this rank
};

class BackendProvider {
 public:
  virtual ~BackendProvider() = default;

  // BACKEND_HOST or BACKEND_CUDA, and its plan spelling ("host", "cuda").
  virtual v1::Backend kind() const = 0;
  virtual std::string name() const = 0;

  // Library versions that need no device (NCCL, CUDA runtime, driver), for
  // fingerprints; empty fields on the host.
  virtual BackendInfo LibraryInfo() const = 0;

  // What rank 0 relays to every rank when ranks meet through the
  // coordinator (the NCCL unique id); empty where nothing is needed.
  virtual absl::StatusOr<std::string> NewBootstrapBlob() { return ""; }

  // The collective backend over `r`'s ranks. `relayed_blob` is rank 0's
  // NewBootstrapBlob() when every rank has it already (else empty: the
  // backend agrees on what it needs through `r.control`). Collective.
  virtual absl::StatusOr<std::unique_ptr<CollectiveBackend>>
  NewCollectiveBackend(const RankResources& r,
                       const std::string& relayed_blob) = 0;

  // Node benchmarks (copies, latency, host<->device, GEMM) over `r`'s
  // ranks. Collective.
  virtual absl::StatusOr<std::unique_ptr<NodeBench>> NewNodeBench(
      const RankResources& r) = 0;

  // A trainer over `r`'s ranks. Collective.
  virtual absl::StatusOr<std::unique_ptr<Trainer>> NewTrainer(
      const RankResources& r) = 0;

  // A transformer trainer over `r`'s ranks (Unimplemented where the back
  // end has none). Collective.
  virtual absl::StatusOr<std::unique_ptr<TransformerTrainer>>
  NewTransformerTrainer(const RankResources& r) {
    return absl::UnimplementedError("this back end has no transformer trainer");
  }
  // An LLM inference engine over `r`'s ranks (Unimplemented where the back
  // end has none). Collective.
  virtual absl::StatusOr<std::unique_ptr<InferenceEngine>> NewInferenceEngine(
      const RankResources& r) {
    return absl::UnimplementedError(
        "this back end has no inference engine yet");
  }
  // Memory the buffers of a case may take on local rank `local_rank`, one
  // of `local_ranks` on this host (host memory: MemAvailable shared by the
  // local ranks; a GPU: its free memory), 0 when unknown; and its name in
  // messages.
  virtual int64_t FreeMemoryPerRank(int local_rank, int local_ranks) {
    return HostMemoryPerRank(local_ranks);
  }
  virtual std::string MemoryName() const { return "host memory"; }

  // Telemetry of the device rank `local_rank` uses (NVML on GPUs, the CPUs
  // on the host); nullptr when none can be read.
  virtual std::unique_ptr<TelemetrySource> NewTelemetrySource(
      int local_rank) = 0;
};

// Whether this build has the CUDA backend.
bool HaveCudaBackend();

// GPUs visible to this process: 0 without the CUDA backend, a driver or a
// GPU.
int VisibleGpuCount();

// Library versions of the CUDA backend (NCCL, CUDA runtime, driver) that
// need no GPU; empty without the CUDA backend.
BackendInfo GpuLibraryInfo();

// The GPUs and their links as JSON (what `ringmaster topo` reads); without
// the CUDA backend, no devices and a note saying so.
std::string DescribeGpusAsJson();

// "host" or "cuda"; "auto" is cuda where a GPU is visible, else host.
// InvalidArgument for another name, Unimplemented for cuda in a build
// without the CUDA backend.
absl::StatusOr<std::unique_ptr<BackendProvider>> MakeBackendProvider(
    std::string_view name);

}  // namespace ringmaster

#endif  // RINGMASTER_BACKENDS_PROVIDER_H_
