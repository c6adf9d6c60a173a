#include "backends/collective_layout.h"

#include <gtest/gtest.h>

#include <vector>

namespace ringmaster {
namespace {

CollectiveConfig Config(v1::Collective c, int64_t count, bool in_place,
                        int root = 0) {
  CollectiveConfig cfg;
  cfg.collective = c;
  cfg.dtype = v1::FLOAT32;
  cfg.op = v1::SUM;
  cfg.count = count;
  cfg.in_place = in_place;
  cfg.root = root;
  return cfg;
}

// Simulates a collective on plain vectors with the layout's rules and
// checks every rank's output against PatternExpected: the layout, the fill
// and the expectations must agree for the backends' verification to work.
std::vector<std::vector<double>> Inputs(v1::Collective c, int64_t count,
                                        int n) {
  std::vector<std::vector<double>> in(n);
  for (int r = 0; r < n; ++r) {
    auto l = MakeLayout(Config(c, count, false), r, n);
    for (int64_t j = 0; j < l->send_count; ++j) {
      in[r].push_back(
          PatternInput(l->fill_op, r, n, l->range, j + l->fill_offset));
    }
  }
  return in;
}

TEST(MakeLayout, AllGatherIsConsistent) {
  const int n = 4;
  auto in = Inputs(v1::ALL_GATHER, 12, n);
  std::vector<double> gathered;
  for (int r = 0; r < n; ++r)
    gathered.insert(gathered.end(), in[r].begin(), in[r].end());
  for (int r = 0; r < n; ++r) {
    auto l = MakeLayout(Config(v1::ALL_GATHER, 12, true), r, n);
    ASSERT_TRUE(l.ok());
    EXPECT_EQ(l->chunk, 3);
    EXPECT_EQ(l->in_offset, 3 * r);
    for (int64_t i = 0; i < l->recv_count; ++i) {
      EXPECT_EQ(gathered[i], PatternExpected(l->check, i)) << r << " " << i;
    }
  }
}

TEST(MakeLayout, ReduceScatterIsConsistent) {
  const int n = 3;
  auto in = Inputs(v1::REDUCE_SCATTER, 9, n);
  for (int r = 0; r < n; ++r) {
    auto l = MakeLayout(Config(v1::REDUCE_SCATTER, 9, false), r, n);
    ASSERT_TRUE(l.ok());
    for (int64_t i = 0; i < l->recv_count; ++i) {
      double sum = 0;
      for (int p = 0; p < n; ++p) sum += in[p][r * l->chunk + i];
      EXPECT_EQ(sum, PatternExpected(l->check, i));
    }
  }
}

TEST(MakeLayout, AllToAllIsConsistent) {
  const int n = 3;
  auto in = Inputs(v1::ALL_TO_ALL, 12, n);
  for (int r = 0; r < n; ++r) {
    auto l = MakeLayout(Config(v1::ALL_TO_ALL, 12, false), r, n);
    ASSERT_TRUE(l.ok());
    // Chunk p of rank r's output is chunk r of rank p's input.
    for (int64_t i = 0; i < l->recv_count; ++i) {
      int p = static_cast<int>(i / l->chunk);
      EXPECT_EQ(in[p][r * l->chunk + i % l->chunk],
                PatternExpected(l->check, i));
    }
  }
}

TEST(MakeLayout, SendRecvAndBroadcast) {
  const int n = 4;
  auto in = Inputs(v1::SEND_RECV, 5, n);
  for (int r = 0; r < n; ++r) {
    auto l = MakeLayout(Config(v1::SEND_RECV, 5, false), r, n);
    EXPECT_EQ(l->send_peer, (r + 1) % n);
    EXPECT_EQ(l->recv_peer, (r + 3) % n);
    for (int64_t i = 0; i < 5; ++i)
      EXPECT_EQ(in[l->recv_peer][i], PatternExpected(l->check, i));
  }
  auto root = MakeLayout(Config(v1::BROADCAST, 8, true, 2), 2, n);
  auto leaf = MakeLayout(Config(v1::BROADCAST, 8, true, 2), 1, n);
  EXPECT_TRUE(root->fill_input);
  EXPECT_FALSE(leaf->fill_input);  // in-place leaves start poisoned
  EXPECT_EQ(leaf->check.src, 2);
  auto reduce_leaf = MakeLayout(Config(v1::REDUCE, 8, false, 0), 3, n);
  EXPECT_FALSE(reduce_leaf->check_output);
}

TEST(MakeLayout, Rejections) {
  EXPECT_EQ(MakeLayout(Config(v1::ALL_GATHER, 3, false), 0, 4).status().code(),
            absl::StatusCode::kInvalidArgument);  // no element per rank
  EXPECT_EQ(MakeLayout(Config(v1::ALL_TO_ALL, 8, true), 0, 2).status().code(),
            absl::StatusCode::kUnimplemented);
  EXPECT_EQ(MakeLayout(Config(v1::SEND_RECV, 8, true), 0, 2).status().code(),
            absl::StatusCode::kUnimplemented);
  EXPECT_EQ(
      MakeLayout(Config(v1::BROADCAST, 8, false, 5), 0, 2).status().code(),
      absl::StatusCode::kInvalidArgument);  // root out of range
  EXPECT_EQ(EffectiveCount(v1::ALL_GATHER, 10, 4), 8);
  EXPECT_EQ(EffectiveCount(v1::ALL_REDUCE, 10, 4), 10);
}

TEST(PatternMatches, ExactUnlessAverage) {
  PatternCheck c;
  EXPECT_TRUE(PatternMatches(3.0, 3.0, c, 1));
  EXPECT_FALSE(PatternMatches(3.001, 3.0, c, 1));
  c.op = kPatternAvg;
  EXPECT_TRUE(PatternMatches(1.504, 1.5, c, 2));   // bfloat16: 1e-2
  EXPECT_FALSE(PatternMatches(1.504, 1.5, c, 1));  // float32: 1e-6
  EXPECT_FALSE(PatternMatches(0.0 / 0.0, 1.5, c, 2));
}

}  // namespace
}  // namespace ringmaster
