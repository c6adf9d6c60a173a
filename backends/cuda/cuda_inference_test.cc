// The CUDA inference engine's decode path at batch 1: the fused decode
// step for a model with enough weight per layer, judged by the case being
// prepared (not the one before it), matrix-vector kernels for a small
// model, cuBLASLt beyond batch 1; a prefill and a decode step on the path
// chosen; the fused step's input made inside it, as the input kernel's. Skips
// without a GPU (CI compiles it; the GPU machine runs it through
// bench/inference/device.sh).
#include "backends/cuda/cuda_inference.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "kernels/kernel_test_values.h"
#include "ringmaster/v1/plan.pb.h"

namespace ringmaster {
namespace {

struct Shape {
  int64_t hidden, heads, kv_heads, head_dim, ffn;
};

v1::Case InferenceCase(const Shape& s, int64_t batch) {
  v1::Case c;
  c.set_dtype(v1::BFLOAT16);
  v1::TransformerSpec* t = c.mutable_transformer();
  t->set_layers(1);
  t->set_hidden(s.hidden);
  t->set_heads(s.heads);
  t->set_kv_heads(s.kv_heads);
  t->set_head_dim(s.head_dim);
  t->set_ffn_hidden(s.ffn);
  t->set_seq(128);
  t->set_micro_batch(batch);
  c.mutable_serve()->set_prompt(64);
  c.mutable_serve()->set_generate(64);
  return c;
}

// Under 1 MB of weights per layer, and about 90 MB.
constexpr Shape kSmall{256, 4, 2, 64, 512};
constexpr Shape kLarge{2048, 16, 4, 128, 5632};

bool Fused(const InferenceEngine& e) {
  return e.Describe().find("one persistent kernel") != std::string::npos;
}

TEST(CudaInferenceEngine, DecodePathFollowsTheCasePrepared) {
  if (!tk::HaveGpu()) GTEST_SKIP() << "no GPU";
  for (const char* v : {"RINGMASTER_DECODE_FUSED", "RINGMASTER_DECODE_GEMV",
                        "RINGMASTER_DECODE_PDL", "RINGMASTER_DECODE_FOLD"}) {
    unsetenv(v);
  }
  auto engine = NewCudaInferenceEngine(0, 1);
  ASSERT_TRUE(engine.ok()) << engine.status();
  InferenceEngine& e = **engine;

  ASSERT_TRUE(e.Prepare(InferenceCase(kSmall, 1)).ok());
  EXPECT_FALSE(Fused(e)) << e.Describe();
  EXPECT_NE(e.Describe().find("matrix-vector"), std::string::npos)
      << e.Describe();

  const absl::Status large = e.Prepare(InferenceCase(kLarge, 1));
  ASSERT_TRUE(large.ok()) << large;
  EXPECT_TRUE(Fused(e)) << e.Describe();
  ASSERT_TRUE(e.Prefill(64, nullptr).ok());
  for (int i = 0; i < 3; ++i) {
    const absl::StatusOr<double> s = e.Decode(nullptr);
    ASSERT_TRUE(s.ok()) << s.status();
    EXPECT_GT(*s, 0);
    // The first step runs uncaptured (no device time); replays are timed
    // inside their graph, within the step's time as the host saw it.
    const double device = e.LastDecodeDeviceSeconds();
    if (i == 0) {
      EXPECT_EQ(device, -1);
    } else {
      EXPECT_GT(device, 0);
      EXPECT_LE(device, *s);
    }
  }

  ASSERT_TRUE(e.Prepare(InferenceCase(kLarge, 2)).ok());
  EXPECT_FALSE(Fused(e)) << e.Describe();
  EXPECT_NE(e.Describe().find("cuBLASLt"), std::string::npos) << e.Describe();

  // Back to the small model after the large one.
  ASSERT_TRUE(e.Prepare(InferenceCase(kSmall, 1)).ok());
  EXPECT_FALSE(Fused(e)) << e.Describe();
}

// The fused step's own input equals the input kernel's (the outputs agree
// but for the order of the step's fp32 atomic sums), uncaptured and
// replayed.
TEST(CudaInferenceEngine, FusedStepMakesTheInputTheKernelWould) {
  if (!tk::HaveGpu()) GTEST_SKIP() << "no GPU";
  std::vector<std::vector<float>> outs[2];
  for (int fold = 0; fold < 2; ++fold) {
    setenv("RINGMASTER_DECODE_FOLD", fold == 1 ? "1" : "0", 1);
    auto engine = NewCudaInferenceEngine(0, 1);
    ASSERT_TRUE(engine.ok()) << engine.status();
    InferenceEngine& e = **engine;
    ASSERT_TRUE(e.Prepare(InferenceCase(kLarge, 1)).ok());
    ASSERT_TRUE(Fused(e)) << e.Describe();
    ASSERT_TRUE(e.Prefill(64, nullptr).ok());
    outs[fold].resize(3);
    for (std::vector<float>& out : outs[fold]) {
      ASSERT_TRUE(e.Decode(&out).ok());
    }
  }
  unsetenv("RINGMASTER_DECODE_FOLD");
  for (size_t i = 0; i < outs[0].size(); ++i) {
    ASSERT_EQ(outs[0][i].size(), outs[1][i].size());
    double worst = 0, top = 0;
    for (size_t j = 0; j < outs[0][i].size(); ++j) {
      worst = std::max(worst, std::abs(double{outs[0][i][j]} - outs[1][i][j]));
      top = std::max(top, std::abs(double{outs[0][i][j]}));
    }
    ASSERT_GT(top, 0) << "step " << i;
    EXPECT_LE(worst / top, 1e-2) << "step " << i;
  }
}

}  // namespace
}  // namespace ringmaster
