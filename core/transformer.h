// The decoder-only transformer that the transformer training and inference
// benchmarks run, independent of any backend: layer shapes of published
// models (presets, each with its source), parameter and FLOP counts, and a
// plain reference implementation of the block stack (forward, backward and
// optimizer step) on the CPU, templated on the scalar type, against which
// the backends' numerics are checked.
//
// The block (pre-norm, as Llama's): x += Wo Attn(RoPE(Wq n1), RoPE(Wk n1),
// Wv n1) with n1 = RMSNorm(x); x += Wd (silu(Wg n2) * (Wu n2)) with
// n2 = RMSNorm(x). Attention is causal with grouped-query heads (`kv_heads`
// key/value heads, each shared by heads / kv_heads query heads) and rotary
// position embedding on queries and keys. After the last layer, a final
// RMSNorm; the loss is 0.5 * mean((y - target)^2) over every element of
// the output (the benchmarks feed embeddings in and regress a target, so
// no vocabulary is needed; FLOP counts say whether they include the LM
// head).
#ifndef RINGMASTER_CORE_TRANSFORMER_H_
#define RINGMASTER_CORE_TRANSFORMER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ringmaster/v1/plan.pb.h"

namespace ringmaster {

// The layer shape of a model. head_dim * heads need not equal hidden
// (it does for every preset).
struct TransformerShape {
  std::string name;    // "llama3-8b", or "custom"
  std::string source;  // where the figures come from
  int layers = 0;      // layers of the published model (a plan runs fewer)
  int64_t hidden = 0;
  int64_t heads = 0;
  int64_t kv_heads = 0;
  int64_t head_dim = 0;
  int64_t ffn_hidden = 0;  // SwiGLU's inner width
  int64_t vocab = 0;       // for parameter counts and the LM head's FLOPs
  double rope_theta = 10000;
  double norm_eps = 1e-5;
};

// The presets by name: llama3-8b, llama3-70b, gpt3-175b. NotFound names
// them. gpt3-175b is GPT-3's shape (multi-head attention: kv_heads = heads)
// with this block's SwiGLU at GPT-3's 4 x hidden width (GPT-3 used GELU).
absl::StatusOr<TransformerShape> TransformerPreset(const std::string& name);
std::vector<std::string> TransformerPresetNames();

// InvalidArgument naming the field: every size positive, heads a multiple
// of kv_heads, head_dim even (rotary pairs).
absl::Status ValidateShape(const TransformerShape& s);

// Weights of one layer: Wq, Wk, Wv, Wo, Wg, Wu, Wd and the two norm gains.
int64_t LayerParams(const TransformerShape& s);
// Of the whole published model: its layers, the final norm, the embedding
// table and an untied LM head (vocab x hidden each).
int64_t ModelParams(const TransformerShape& s);

// Model FLOPs of one training step per token for `layers` layers at
// sequence length `seq` (forward 1x, backward 2x): 6 x the layers' matrix
// weights, plus causal attention's score and value products, 6 x 2 x
// seq/2 x heads x head_dim per layer (the computed half of the seq x seq
// scores: a causal kernel skips the rest). Without the LM head and
// embeddings (the benchmark has neither). Forward only: a third of it.
double TrainFlopsPerToken(const TransformerShape& s, int layers, int64_t seq);
double ForwardFlopsPerToken(const TransformerShape& s, int layers, int64_t seq);

// Initial values, the same on every backend and rank: a uniform number in
// [-1, 1) from a key and an index (splitmix64).
double TransformerUniform(uint64_t key, uint64_t index);

// The matrices of a layer, in the reference's parameter order. Each is
// stored [in x out] row-major (y = x W).
enum class TransformerMatrix { kQ = 1, kK, kV, kO, kGate, kUp, kDown };

// Element `index` (row-major in the whole [in x out] matrix) of matrix `m`
// of layer `layer` (0-based): uniform in +-1/sqrt(in). Gains start at 1.
double TransformerWeight(const TransformerShape& s, int layer,
                         TransformerMatrix m, int64_t index);

// Element `index` of the input and of the regression target, row-major
// [batch * seq x hidden] over the whole global batch.
double TransformerInput(int64_t index);
double TransformerTarget(int64_t index);

// How the ranks of one case share the model: dp x tp ranks, rank r at
// tensor-parallel rank r % tp of data-parallel replica r / tp (so that a
// tensor-parallel group is consecutive ranks, inside one node).
struct TransformerParallel {
  int dp = 1;
  int tp = 1;
  bool sp = false;  // sequence parallel: norms and residuals on a 1/tp
                    // share of the tokens (tp > 1)
  int zero = 0;     // 0: replicated; 1: optimizer state sharded over dp;
                    // 3: parameters, gradients and state sharded (FSDP)
  int ranks() const { return dp * tp; }
};

// "dp2", "tp2", "tp2+sp", "dp2 zero3", "dp2 tp2": the layout's name in
// tables.
std::string ParallelName(const TransformerParallel& p);

// InvalidArgument naming the field when `p` cannot split `s` with
// `micro_batch` sequences of `seq` tokens per data-parallel replica: tp
// must divide heads, kv_heads and ffn_hidden; sp needs tp > 1 and tokens
// divisible by tp; zero is 0, 1 or 3 and needs dp > 1.
absl::Status ValidateParallel(const TransformerShape& s,
                              const TransformerParallel& p, int64_t micro_batch,
                              int64_t seq);

// A plan's transformer spec as a shape (its layers the ones run) and a
// layout; a case's layout name ("tp2+sp").
TransformerShape ShapeOf(const v1::TransformerSpec& t);
TransformerParallel ParallelOf(const v1::ParallelLayout& p);
std::string LayoutName(const v1::Case& c);

// Bytes one rank of `t`'s layout holds during a step with `elem`-byte
// weights and activations: weights, gradients and AdamW state (float32
// moments, and a float32 master copy when elem < 4), sharded as zero
// says, and the activations kept for backward, including the attention
// probabilities when `saves_scores` (a kernel that recomputes them, as
// flash attention does, keeps none).
int64_t TransformerStepBytes(const v1::TransformerSpec& t, int elem,
                             bool saves_scores);

// Bytes of one rank of an inference case: its share of the weights
// (tensor-parallel over t.parallel().tp()) and of the key/value cache of
// micro_batch sequences of `cache_tokens` tokens, `elem` bytes each. With
// cache_tokens = seq, what the rank holds; at a decode step's length, what
// the step must read.
double ServeBytes(const v1::TransformerSpec& t, int64_t elem,
                  double cache_tokens);

// Rotary embedding's cos and sin for positions 0 .. positions - 1, [pos x
// head_dim / 2] each, computed in double as the reference's rotation and
// rounded to float (the tables the GPU kernels read).
void RotaryTables(const TransformerShape& s, int64_t positions,
                  std::vector<float>* cos_table, std::vector<float>* sin_table);

// The reference model on the CPU. Weights and data are deterministic
// functions of their position (the same on every backend), so a backend's
// loss after k steps can be compared with this one's.
template <typename T>
class ReferenceTransformer {
 public:
  // `layers` layers of `shape`; `batch` sequences of `seq` tokens.
  ReferenceTransformer(const TransformerShape& shape, int layers, int64_t batch,
                       int64_t seq);

  // One forward and backward over the batch; returns the loss. Gradients
  // are kept for Update().
  T ForwardBackward();
  // The loss of a forward pass alone (weights unchanged).
  T Loss();
  // optimizer "sgd" (plain), or "adamw" (beta1 0.9, beta2 0.95, eps 1e-8,
  // weight decay `weight_decay` on the matrices, not on the norm gains).
  void Update(const std::string& optimizer, double lr,
              double weight_decay = 0.0);

  // Every parameter, flattened in a fixed order, and its gradient after
  // ForwardBackward (for gradient checks and backend comparisons).
  std::vector<T*> Parameters();
  std::vector<T*> Gradients();
  int64_t ParameterCount() const {
    return static_cast<int64_t>(params_.size());
  }
  // The final norm's output [batch * seq x hidden] of the last forward
  // pass (Loss or ForwardBackward): what inference calls the logits (the
  // model has no vocabulary head).
  const std::vector<T>& Output() const { return out_y_; }

 private:
  struct Layer {
    int64_t attn_norm, wq, wk, wv, wo, mlp_norm, wg, wu, wd;  // offsets
  };
  T Forward(bool keep);
  void Backward();

  TransformerShape s_;
  int layers_;
  int64_t batch_, seq_;
  std::vector<T> params_, grads_, adam_m_, adam_v_;
  std::vector<bool> decays_;  // per parameter: matrices decay, gains do not
  int64_t final_norm_ = 0;
  std::vector<Layer> layer_;
  int64_t step_ = 0;
  std::vector<T> input_, target_;
  // Saved by Forward for Backward, per layer: the block input, both norms'
  // outputs and inverse RMS, q (after RoPE), k (after RoPE), v, the
  // attention probabilities and output, the MLP's gate and up products.
  struct Saved {
    std::vector<T> x, n1, r1, q, k, v, p, attn, x_mid, n2, r2, g, u;
  };
  std::vector<Saved> saved_;
  std::vector<T> out_x_, out_r_, out_y_;
};

}  // namespace ringmaster

#endif  // RINGMASTER_CORE_TRANSFORMER_H_
