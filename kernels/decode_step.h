// A whole decode step of one sequence as one persistent kernel: a thread
// block per SM runs every layer's products, decode attention and norms in
// turn, with a grid-wide barrier between dependent phases. The weights do
// not depend on the activations, so each warp streams its share of them
// into shared memory (tensor copies of 8-row boxes of 256 columns into a
// ring of slots, each completing on its own mbarrier) as far ahead as the ring
// allows, across phase boundaries: HBM keeps reading the next product's
// weights while the blocks wait at a barrier, reduce, or run attention.
// The grid reads each matrix a window of whole rows at a time (each warp
// keeping one slice of columns), which HBM serves faster than a separate
// range per block.
// Layouts as transformer_weights.h's.
//
// Partial sums are added to fp32 accumulators atomically, so the last bits
// of a result may differ from one run to the next; the residual stream is
// kept in fp32 between layers. Shapes it takes: DecodeStepSupports.
#ifndef RINGMASTER_KERNELS_DECODE_STEP_H_
#define RINGMASTER_KERNELS_DECODE_STEP_H_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace ringmaster::tk {

// The model, as the engine holds it on the device (bfloat16 weights).
struct DecodeStepModel {
  int layers = 0;
  int64_t hidden = 0, heads = 0, kv_heads = 0, head_dim = 0, ffn = 0;
  int64_t capacity = 0;  // positions per cache
  // Layer l's tensors at weights + l * layer_elems + off_* (elements).
  const void* weights = nullptr;
  int64_t layer_elems = 0, off_g1 = 0, off_wqkv = 0, off_wo = 0, off_g2 = 0,
          off_wgu = 0, off_wd = 0;
  const void* final_gain = nullptr;  // [hidden]
  // Device arrays of `layers` cache pointers, each [capacity x kv_heads *
  // head_dim].
  void* const* kcache = nullptr;
  void* const* vcache = nullptr;
  const float* cos_table = nullptr;  // as Rope's: [capacity x head_dim / 2]
  const float* sin_table = nullptr;
  float eps = 1e-5f, scale = 1;
};

// Device memory the step keeps between launches: `floats` fp32 values and
// `words` unsigned counters (its grid barrier's), both zeroed once before
// the first launch (the step leaves them as it needs them for the next).
// `trace`, when not null, receives block 0's %globaltimer (ns):
// DecodeStepTraceValues values, the step's start (its first weight copies
// issued), then per layer and per phase (QKV, attention, O, gate|up, down)
// three: its inputs staged (for attention: the block's items done), its
// work done, the grid barrier after it passed; last the kernel's entry and
// block 0's end (its share of the output written).
struct DecodeStepState {
  float* floats = nullptr;
  unsigned* words = nullptr;
  int64_t* trace = nullptr;
};
int64_t DecodeStepFloats(const DecodeStepModel& m);
int64_t DecodeStepWords(const DecodeStepModel& m);
int64_t DecodeStepTraceValues(const DecodeStepModel& m);

// Whether the current device runs DecodeStep for this shape: head_dim 64
// or 128, heads / kv_heads at most 4, every product's outputs (hidden,
// (heads + 2 kv_heads) head_dim, 2 ffn) multiples of 256 wide and at most
// one 256-column tile per warp of the grid, each block's staged inputs
// within shared memory (with the residual stream for a norm, and with
// every attention item's pieces for the O product: this bounds capacity,
// to about 4,000 positions for Llama 3 8B), and a block per SM resident
// with the ring. It also readies the kernel (its shared memory size) on
// the current device, so it must have returned true there before
// DecodeStep is launched or captured.
bool DecodeStepSupports(const DecodeStepModel& m);

// y[hidden] (bf16) = the final norm of the stack applied to x[hidden]
// (bf16) at position *pos: appends each layer's key and value at *pos to
// its cache, and with `advance` adds one to *pos (in the same launch, so a
// captured step is one graph node). With x null the step makes its input
// itself: what SequenceInputs (decode_kernels.h) writes for one sequence
// at *pos, so no kernel need run before it.
cudaError_t DecodeStep(const DecodeStepModel& m, const DecodeStepState& st,
                       const void* x, void* y, int* pos, bool advance,
                       cudaStream_t s);

}  // namespace ringmaster::tk

#endif  // RINGMASTER_KERNELS_DECODE_STEP_H_
