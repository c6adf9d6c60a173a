// The host transformer's layouts against the float64 reference of the
// whole global batch: n ranks as n threads of one process over TcpComm.
#include "backends/host/host_transformer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "backends/host/blas.h"
#include "backends/host/test_ranks.h"
#include "core/transformer.h"

namespace ringmaster {
namespace {

using testing::OnRanks;

// 4 query heads over 2 key/value heads, so tp = 2 splits both.
v1::Case TinyCase(int dp, int tp, bool sp, int zero,
                  const std::string& optimizer = "adamw") {
  v1::Case c;
  c.set_bench(v1::BENCH_TRANSFORMER);
  c.set_dtype(v1::FLOAT32);
  v1::TransformerSpec* t = c.mutable_transformer();
  t->set_layers(2);
  t->set_hidden(16);
  t->set_heads(4);
  t->set_kv_heads(2);
  t->set_head_dim(4);
  t->set_ffn_hidden(24);
  t->set_seq(6);
  t->set_micro_batch(2);
  t->set_optimizer(optimizer);
  t->set_lr(optimizer == "sgd" ? 0.05 : 1e-3);
  t->set_weight_decay(0.1);
  t->mutable_parallel()->set_dp(dp);
  t->mutable_parallel()->set_tp(tp);
  t->mutable_parallel()->set_sp(sp);
  t->mutable_parallel()->set_zero(zero);
  return c;
}

// The global loss of each of `steps` steps (each step's forward).
std::vector<double> Losses(const v1::Case& c, int steps) {
  const v1::ParallelLayout& p = c.transformer().parallel();
  std::vector<double> total(steps, 0.0);
  std::mutex mu;
  OnRanks(p.dp() * p.tp(), [&](HostComm& comm) {
    auto trainer = NewHostTransformer(comm);
    absl::Status prepared = trainer->Prepare(c);
    ASSERT_TRUE(prepared.ok()) << prepared;
    for (int s = 0; s < steps; ++s) {
      auto t = trainer->Step();
      ASSERT_TRUE(t.ok()) << t.status();
      EXPECT_GT(t->step_s, 0);
      std::lock_guard<std::mutex> lock(mu);
      total[s] += t->loss_part;
    }
  });
  return total;
}

std::vector<double> Reference(const v1::Case& c, int steps) {
  const v1::TransformerSpec& t = c.transformer();
  ReferenceTransformer<double> ref(
      ShapeOf(t), t.layers(), t.parallel().dp() * t.micro_batch(), t.seq());
  std::vector<double> out;
  for (int s = 0; s < steps; ++s) {
    out.push_back(ref.ForwardBackward());
    ref.Update(t.optimizer(), t.lr(), t.weight_decay());
  }
  return out;
}

class HostTransformerLayouts
    : public ::testing::TestWithParam<std::tuple<int, int, bool, int>> {};

// Every layout's losses over 4 steps (3 updates) equal the reference's
// for the same global batch; the updates moved the loss by far more than
// the tolerance, so a layout that dropped a gradient share or a
// communication would fail.
TEST_P(HostTransformerLayouts, MatchTheReferenceOfTheGlobalBatch) {
  if (LoadBlas() == nullptr) GTEST_SKIP() << "no OpenBLAS here";
  const auto [dp, tp, sp, zero] = GetParam();
  for (const std::string optimizer : {"adamw", "sgd"}) {
    v1::Case c = TinyCase(dp, tp, sp, zero, optimizer);
    std::vector<double> got = Losses(c, 4), want = Reference(c, 4);
    ASSERT_EQ(got.size(), want.size());
    for (size_t s = 0; s < got.size(); ++s) {
      EXPECT_NEAR(got[s], want[s], 2e-5 * want[s])
          << optimizer << " step " << s;
    }
    EXPECT_GT(std::abs(want[3] - want[0]), 1e-3 * want[0]) << optimizer;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, HostTransformerLayouts,
    ::testing::Values(std::tuple{1, 1, false, 0}, std::tuple{2, 1, false, 0},
                      std::tuple{1, 2, false, 0}, std::tuple{1, 2, true, 0},
                      std::tuple{2, 1, false, 1}, std::tuple{2, 1, false, 3},
                      std::tuple{2, 2, true, 3}, std::tuple{2, 2, false, 1}));

TEST(HostTransformer, RefusesWhatItCannotRun) {
  if (LoadBlas() == nullptr) GTEST_SKIP() << "no OpenBLAS here";
  OnRanks(1, [](HostComm& comm) {
    auto trainer = NewHostTransformer(comm);
    v1::Case c = TinyCase(1, 1, false, 0);
    c.set_dtype(v1::BFLOAT16);
    absl::Status s = trainer->Prepare(c);
    EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented);
    c = TinyCase(2, 1, false, 0);  // 2 ranks' layout on one
    EXPECT_EQ(trainer->Prepare(c).code(), absl::StatusCode::kInvalidArgument);
  });
}

}  // namespace
}  // namespace ringmaster
