// LLM inference on the host backend (float32, OpenBLAS): the transformer of
// core/transformer.h served with a key/value cache, tensor-parallel over
// the ranks of a HostComm (backends/host/tp_layer.h's split: one sum over
// the group after attention and one after the MLP per layer). Exists so
// that CI checks the numerics of prefill and incremental decode at every
// tensor-parallel width, not to measure a CPU.
//
// Sequence b's token at position t has the input row TransformerInput
// ((b * capacity + t) * hidden + j), so the outputs of a prefill of P
// tokens followed by decode steps are the rows of a full forward pass of
// the reference over `batch` sequences of `capacity` tokens.
#ifndef RINGMASTER_BACKENDS_HOST_HOST_INFERENCE_H_
#define RINGMASTER_BACKENDS_HOST_HOST_INFERENCE_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "backends/inference_engine.h"
#include "comm/host_comm.h"
#include "core/transformer.h"

namespace ringmaster {

class HostDecoder {
 public:
  // Every rank of `comm` is one tensor-parallel rank of the model.
  explicit HostDecoder(HostComm& comm);
  ~HostDecoder();

  // `shape.layers` layers, `batch` sequences of up to `capacity` tokens
  // (the cache's size). InvalidArgument when comm's size does not divide
  // heads, kv_heads and ffn_hidden; Unimplemented without a BLAS.
  // Collective.
  absl::Status Prepare(const TransformerShape& shape, int64_t batch,
                       int64_t capacity);
  // The first `prompt` tokens of every sequence, filling the cache from
  // position 0; out: the final norm's output [batch * prompt x hidden],
  // sequence-major. Collective.
  absl::Status Prefill(int64_t prompt, std::vector<float>* out);
  // The next token of every sequence; out [batch x hidden]. Collective.
  absl::Status Decode(std::vector<float>* out);

  // Drops the cache's contents: the next Prefill starts new sequences.
  void Reset() { length_ = 0; }
  int64_t length() const { return length_; }  // tokens per sequence so far
  // Seconds spent in the tensor-parallel sums since Prepare.
  double tp_seconds() const { return tp_s_; }
  // Bytes of weights and cache this rank holds.
  int64_t HeldBytes() const;

 private:
  // `m` new tokens of every sequence from position length_: x [batch * m x
  // hidden] in, the final norm's output out.
  absl::Status Forward(int64_t m, std::vector<float>& x,
                       std::vector<float>* out);
  absl::Status Sum(std::vector<float>& part);

  struct State;
  std::unique_ptr<State> st_;
  HostComm& comm_;
  int64_t length_ = 0;
  double tp_s_ = 0;
};

// The inference kind's engine on host ranks: a HostDecoder for each case
// (float32 only).
std::unique_ptr<InferenceEngine> NewHostInferenceEngine(HostComm& comm);

}  // namespace ringmaster

#endif  // RINGMASTER_BACKENDS_HOST_HOST_INFERENCE_H_
