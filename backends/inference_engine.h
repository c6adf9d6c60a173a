// What serves one LLM inference case for the inference kind
// (worker/kinds/inference.cc): the block stack of core/transformer.h with a
// key/value cache, tensor-parallel over the engine's ranks, on the host
// (float32, OpenBLAS) or a GPU.
#ifndef RINGMASTER_BACKENDS_INFERENCE_ENGINE_H_
#define RINGMASTER_BACKENDS_INFERENCE_ENGINE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ringmaster/v1/plan.pb.h"

namespace ringmaster {

class InferenceEngine {
 public:
  virtual ~InferenceEngine() = default;
  // Loads case `c`'s model (c.transformer(): the shape and layers run,
  // micro_batch sequences with a cache of seq tokens each, parallel.tp the
  // engine's ranks), weights as core/transformer.h's reference. Unimplemented
  // for what the engine cannot serve. Collective.
  virtual absl::Status Prepare(const v1::Case& c) = 0;
  // A new request batch: empties the cache and runs the first `prompt`
  // tokens of every sequence. Returns its seconds; `out`, if not null,
  // gets the final norm's rows [batch * prompt x hidden]. Collective.
  virtual absl::StatusOr<double> Prefill(int64_t prompt,
                                         std::vector<float>* out) = 0;
  // The next token of every sequence: its seconds; `out` [batch x hidden].
  // Collective.
  virtual absl::StatusOr<double> Decode(std::vector<float>* out) = 0;
  // The last Decode's seconds on the device alone: from the step's first
  // kernel to its last, without the host's launch gap before them; the
  // step's whole seconds where the engine runs on the host; -1 for a step
  // it could not time so (the GPU engine's first, run before its graph is
  // captured).
  virtual double LastDecodeDeviceSeconds() const = 0;
  // Seconds spent in tensor-parallel sums since Prepare.
  virtual double TpSeconds() const = 0;
  // Bytes of weights and cache this rank holds.
  virtual int64_t HeldBytes() const = 0;
  // The precision it serves in when a plan names none.
  virtual v1::DataType DefaultDtype() const = 0;
  virtual std::string Describe() const = 0;
};

}  // namespace ringmaster

#endif  // RINGMASTER_BACKENDS_INFERENCE_ENGINE_H_
