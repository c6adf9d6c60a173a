// The host decoder against the float64 reference's full forward pass over
// the same tokens: a prefill then incremental decode steps with the
// key/value cache give the reference's output rows, at tp 1 and 2 (ranks
// as threads over TcpComm), and tp 2 gives tp 1's outputs.
#include "backends/host/host_inference.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <mutex>
#include <vector>

#include "backends/host/blas.h"
#include "backends/host/test_ranks.h"
#include "core/transformer.h"

namespace ringmaster {
namespace {

using testing::OnRanks;

// 4 query heads over 2 key/value heads, so tp 2 splits both.
TransformerShape Tiny() {
  TransformerShape s;
  s.name = "tiny";
  s.layers = 2;
  s.hidden = 16;
  s.heads = 4;
  s.kv_heads = 2;
  s.head_dim = 4;
  s.ffn_hidden = 24;
  return s;
}

constexpr int64_t kBatch = 2, kPrompt = 5, kGenerate = 4;
constexpr int64_t kCapacity = kPrompt + kGenerate;

// Every position's output, [batch x capacity x hidden], as rank 0 of a tp
// group produced it: the prefill's rows, then each decode step's.
std::vector<float> Decoded(int tp) {
  const int64_t h = Tiny().hidden;
  std::vector<float> all(kBatch * kCapacity * h, NAN);
  std::mutex mu;
  OnRanks(tp, [&](HostComm& comm) {
    HostDecoder decoder(comm);
    absl::Status prepared = decoder.Prepare(Tiny(), kBatch, kCapacity);
    ASSERT_TRUE(prepared.ok()) << prepared;
    std::vector<float> out;
    ASSERT_TRUE(decoder.Prefill(kPrompt, &out).ok());
    ASSERT_EQ(out.size(), static_cast<size_t>(kBatch * kPrompt * h));
    std::vector<std::vector<float>> steps;
    for (int64_t i = 0; i < kGenerate; ++i) {
      std::vector<float> step;
      absl::Status s = decoder.Decode(&step);
      ASSERT_TRUE(s.ok()) << s;
      steps.push_back(step);
    }
    EXPECT_EQ(decoder.length(), kCapacity);
    std::vector<float> extra;
    EXPECT_EQ(decoder.Decode(&extra).code(), absl::StatusCode::kOutOfRange);
    if (tp > 1) {
      EXPECT_GT(decoder.tp_seconds(), 0);
    }
    if (comm.rank() != 0) return;
    std::lock_guard<std::mutex> lock(mu);
    for (int64_t b = 0; b < kBatch; ++b) {
      std::copy_n(out.data() + b * kPrompt * h, kPrompt * h,
                  all.data() + b * kCapacity * h);
      for (int64_t i = 0; i < kGenerate; ++i)
        std::copy_n(steps[i].data() + b * h, h,
                    all.data() + (b * kCapacity + kPrompt + i) * h);
    }
  });
  return all;
}

// max |a - b| / max |b|.
double RelError(const std::vector<float>& a, const std::vector<double>& b) {
  double err = 0, scale = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    err = std::max(err, std::abs(static_cast<double>(a[i]) - b[i]));
    scale = std::max(scale, std::abs(b[i]));
  }
  return err / scale;
}

class HostDecoderTp : public ::testing::TestWithParam<int> {};

TEST_P(HostDecoderTp, PrefillAndDecodeMatchTheFullForwardPass) {
  if (LoadBlas() == nullptr) GTEST_SKIP() << "no BLAS";
  ReferenceTransformer<double> ref(Tiny(), Tiny().layers, kBatch, kCapacity);
  ref.Loss();
  const std::vector<double>& want = ref.Output();
  const std::vector<float> got = Decoded(GetParam());
  ASSERT_EQ(got.size(), want.size());
  // float32 against float64 over two layers of a tiny model.
  EXPECT_LT(RelError(got, want), 1e-5);
  // The decode rows alone (the cache's path), not only the prefill's.
  std::vector<float> decoded;
  std::vector<double> decoded_want;
  const int64_t h = Tiny().hidden;
  for (int64_t b = 0; b < kBatch; ++b)
    for (int64_t i = kPrompt; i < kCapacity; ++i)
      for (int64_t j = 0; j < h; ++j) {
        decoded.push_back(got[(b * kCapacity + i) * h + j]);
        decoded_want.push_back(want[(b * kCapacity + i) * h + j]);
      }
  EXPECT_LT(RelError(decoded, decoded_want), 1e-5);
}

INSTANTIATE_TEST_SUITE_P(Widths, HostDecoderTp, ::testing::Values(1, 2),
                         [](const ::testing::TestParamInfo<int>& i) {
                           return "tp" + std::to_string(i.param);
                         });

TEST(HostDecoder, TensorParallelGivesTheSameOutputsAsOneRank) {
  if (LoadBlas() == nullptr) GTEST_SKIP() << "no BLAS";
  const std::vector<float> one = Decoded(1), two = Decoded(2);
  std::vector<double> ref(one.begin(), one.end());
  EXPECT_LT(RelError(two, ref), 1e-6);
}

TEST(HostDecoder, RejectsWidthsThatDoNotSplitTheHeads) {
  if (LoadBlas() == nullptr) GTEST_SKIP() << "no BLAS";
  OnRanks(3, [](HostComm& comm) {
    HostDecoder decoder(comm);
    absl::Status s = decoder.Prepare(Tiny(), 1, 4);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(s.message().find("tp 3 must divide heads"), std::string::npos)
        << s;
  });
}

}  // namespace
}  // namespace ringmaster
