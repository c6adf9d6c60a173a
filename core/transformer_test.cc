#include "core/transformer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

namespace ringmaster {
namespace {

using ::testing::HasSubstr;

// A shape small enough for finite differences: 2 query heads sharing one
// key/value head, rotary pairs of 2.
TransformerShape Tiny() {
  TransformerShape s;
  s.name = "tiny";
  s.layers = 2;
  s.hidden = 8;
  s.heads = 2;
  s.kv_heads = 1;
  s.head_dim = 4;
  s.ffn_hidden = 12;
  s.rope_theta = 10000;
  return s;
}

// Hand-counted: Llama 3 8B has 8.03 billion parameters (Meta's figure).
TEST(TransformerShape, PresetsMatchTheirPublishedSizes) {
  auto s = TransformerPreset("llama3-8b");
  ASSERT_TRUE(s.ok());
  // q 4096^2, k and v 4096 x 1024, o 4096^2, MLP 3 x 4096 x 14336, 2 gains.
  EXPECT_EQ(LayerParams(*s), 218112000);
  EXPECT_EQ(ModelParams(*s), 8030261248);
  EXPECT_THAT(s->source, HasSubstr("Meta-Llama-3-8B"));
  auto big = TransformerPreset("llama3-70b");
  ASSERT_TRUE(big.ok());
  EXPECT_EQ(ModelParams(*big), 70553706496);  // 70.6 B
  auto gpt = TransformerPreset("gpt3-175b");
  ASSERT_TRUE(gpt.ok());
  // 12 d^2 per layer x 96 layers: 174 B in the layers (GPT-3's 175 B with
  // embeddings; SwiGLU's third matrix adds 4 d^2 here).
  EXPECT_EQ(gpt->heads * gpt->head_dim, gpt->hidden);
  for (const std::string& name : TransformerPresetNames()) {
    auto p = TransformerPreset(name);
    ASSERT_TRUE(p.ok()) << name;
    EXPECT_TRUE(ValidateShape(*p).ok()) << name;
    EXPECT_FALSE(p->source.empty()) << name;
  }
  auto none = TransformerPreset("llama9");
  EXPECT_FALSE(none.ok());
  EXPECT_THAT(std::string(none.status().message()), HasSubstr("llama3-8b"));
}

TEST(TransformerShape, ValidationNamesTheField) {
  TransformerShape s = Tiny();
  s.kv_heads = 3;
  EXPECT_THAT(std::string(ValidateShape(s).message()), HasSubstr("kv_heads"));
  s = Tiny();
  s.head_dim = 3;
  EXPECT_THAT(std::string(ValidateShape(s).message()), HasSubstr("head_dim"));
}

TEST(TransformerParallel, NamesAndLimits) {
  EXPECT_EQ(ParallelName({}), "dp1");
  EXPECT_EQ(ParallelName({2, 1, false, 0}), "dp2");
  EXPECT_EQ(ParallelName({1, 2, true, 0}), "tp2+sp");
  EXPECT_EQ(ParallelName({4, 2, false, 1}), "dp4 tp2 zero1");
  const TransformerShape s = Tiny();  // 2 heads, 1 kv head, ffn 12
  EXPECT_TRUE(ValidateParallel(s, {2, 1, false, 3}, 1, 6).ok());
  EXPECT_THAT(
      std::string(ValidateParallel(s, {1, 2, false, 0}, 1, 6).message()),
      HasSubstr("kv_heads (1)"));
  TransformerShape wide = s;
  wide.kv_heads = 2;
  EXPECT_TRUE(ValidateParallel(wide, {1, 2, true, 0}, 1, 6).ok());
  // 1 x 5 tokens do not split over 2 ranks.
  EXPECT_THAT(
      std::string(ValidateParallel(wide, {1, 2, true, 0}, 1, 5).message()),
      HasSubstr("sp:"));
  EXPECT_THAT(
      std::string(ValidateParallel(s, {2, 1, false, 2}, 1, 6).message()),
      HasSubstr("zero:"));
}

// Sharding shrinks what a rank holds: tp splits weights and most
// activations, zero 3 the weights, gradients and optimizer state.
TEST(TransformerStepBytes, ShardingShrinksARanksShare) {
  v1::TransformerSpec t;
  t.set_preset("llama3-8b");
  t.set_layers(4);
  t.set_hidden(4096);
  t.set_heads(32);
  t.set_kv_heads(8);
  t.set_head_dim(128);
  t.set_ffn_hidden(14336);
  t.set_seq(4096);
  t.set_micro_batch(1);
  t.set_optimizer("adamw");
  const int64_t one = TransformerStepBytes(t, 2, false);
  // 4 layers x 218 M weights x (2 + 2 + 8 + 4) bytes: 13.96 GB, plus
  // activations.
  EXPECT_GT(one, int64_t{13960000000});
  EXPECT_LT(one, int64_t{20000000000});
  t.mutable_parallel()->set_tp(2);
  const int64_t tp2 = TransformerStepBytes(t, 2, false);
  EXPECT_LT(tp2, one * 6 / 10);
  t.mutable_parallel()->set_tp(1);
  t.mutable_parallel()->set_dp(4);
  t.mutable_parallel()->set_zero(3);
  EXPECT_LT(TransformerStepBytes(t, 2, false), one / 2);
  // The host's float32 step also keeps 32 heads x 4096^2 scores a layer.
  t.mutable_parallel()->set_zero(0);
  EXPECT_GT(
      TransformerStepBytes(t, 4, true) - TransformerStepBytes(t, 4, false),
      int64_t{4} * 32 * 4096 * 4096 * 4 - 1);
}

// Hand-computed for the tiny shape at seq 6: matrices per layer 8x8 + 2 x
// 8x4 + 8x8 + 3 x 8x12 = 480; attention 2 x 2 x 2 heads x 4 x 6/2 = 96;
// per layer 3 x (2 x 480 + 96) = 3168; two layers 6336.
TEST(TransformerShape, FlopsPerTokenCountMatricesAndCausalAttention) {
  EXPECT_DOUBLE_EQ(TrainFlopsPerToken(Tiny(), 2, 6), 6336);
  EXPECT_DOUBLE_EQ(ForwardFlopsPerToken(Tiny(), 2, 6), 2112);
}

// Backward against central differences of the loss, in float64, over
// parameters of every kind (gains, attention and MLP matrices, the final
// norm).
TEST(ReferenceTransformer, GradientsMatchFiniteDifferences) {
  ReferenceTransformer<double> m(Tiny(), 2, 2, 5);
  m.ForwardBackward();
  std::vector<double*> p = m.Parameters();
  std::vector<double> g;
  for (double* x : m.Gradients()) g.push_back(*x);
  ASSERT_EQ(p.size(), g.size());
  double worst = 0;
  int checked = 0;
  for (size_t i = 0; i < p.size(); i += 7) {
    const double keep = *p[i];
    constexpr double kEps = 1e-6;
    *p[i] = keep + kEps;
    const double up = m.Loss();
    *p[i] = keep - kEps;
    const double down = m.Loss();
    *p[i] = keep;
    const double numeric = (up - down) / (2 * kEps);
    const double err =
        std::abs(numeric - g[i]) / std::max(1e-6, std::abs(numeric));
    worst = std::max(worst, err);
    ++checked;
  }
  EXPECT_GT(checked, 80);
  EXPECT_LT(worst, 1e-5);
  // Not a comparison of zeros: most checked gradients are far from 0.
  int large = 0;
  for (size_t i = 0; i < g.size(); i += 7) large += std::abs(g[i]) > 1e-4;
  EXPECT_GT(large, checked / 2) << large << " of " << checked;
}

// The same model in float32 follows float64 within float32's rounding,
// and both learn (the loss falls) under SGD and AdamW.
TEST(ReferenceTransformer, Float32FollowsFloat64AndLearns) {
  for (const std::string optimizer : {"sgd", "adamw"}) {
    ReferenceTransformer<double> ref(Tiny(), 2, 2, 5);
    ReferenceTransformer<float> f32(Tiny(), 2, 2, 5);
    const double lr = optimizer == "sgd" ? 0.5 : 1e-2;
    double first = 0, last = 0;
    for (int step = 0; step < 6; ++step) {
      const double a = ref.ForwardBackward();
      const double b = f32.ForwardBackward();
      EXPECT_NEAR(b, a, 1e-5 * std::abs(a)) << optimizer << " step " << step;
      ref.Update(optimizer, lr, 0.01);
      f32.Update(optimizer, lr, 0.01);
      if (step == 0) first = a;
      last = a;
    }
    EXPECT_LT(last, first) << optimizer;
  }
}

}  // namespace
}  // namespace ringmaster
