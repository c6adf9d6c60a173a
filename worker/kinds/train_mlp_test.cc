#include "worker/kinds/train_mlp.h"

#include <gtest/gtest.h>

#include <barrier>
#include <cmath>
#include <cstring>
#include <deque>
#include <thread>
#include <vector>

namespace ringmaster {
namespace {

// Two ranks as two threads of one process: each collective writes this
// rank's value into a slot, meets the other thread, reads every slot and
// meets it again (so slots are not reused early).
class ThreadPair {
 public:
  std::barrier<> meet{2};
  double values[2] = {};
  std::string strings[2];
  std::vector<char> bytes;
};

class ThreadControl : public Control {
 public:
  ThreadControl(ThreadPair& pair, int rank) : pair_(pair), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return 2; }
  absl::Status Barrier() override {
    pair_.meet.arrive_and_wait();
    return absl::OkStatus();
  }
  absl::StatusOr<double> Max(double v) override {
    auto all = AllGather(v);
    return std::max((*all)[0], (*all)[1]);
  }
  absl::StatusOr<int64_t> Sum(int64_t v) override {
    auto all = AllGather(static_cast<double>(v));
    return static_cast<int64_t>((*all)[0] + (*all)[1]);
  }
  absl::Status MaxVector(std::vector<double>* v) override {
    for (double& x : *v) x = *Max(x);
    return absl::OkStatus();
  }
  absl::StatusOr<std::vector<double>> AllGather(double v) override {
    pair_.values[rank_] = v;
    pair_.meet.arrive_and_wait();
    std::vector<double> out(pair_.values, pair_.values + 2);
    pair_.meet.arrive_and_wait();
    return out;
  }
  absl::StatusOr<std::vector<std::string>> AllGatherStrings(
      const std::string& v) override {
    pair_.strings[rank_] = v;
    pair_.meet.arrive_and_wait();
    std::vector<std::string> out(pair_.strings, pair_.strings + 2);
    pair_.meet.arrive_and_wait();
    return out;
  }
  absl::Status Broadcast(void* data, int64_t bytes, int root) override {
    if (rank_ == root) {
      pair_.bytes.assign(static_cast<char*>(data),
                         static_cast<char*>(data) + bytes);
    }
    pair_.meet.arrive_and_wait();
    if (rank_ != root) std::memcpy(data, pair_.bytes.data(), bytes);
    pair_.meet.arrive_and_wait();
    return absl::OkStatus();
  }

 private:
  ThreadPair& pair_;
  int rank_;
};

// Returns the same scripted step every time.
class ScriptedTrainer : public Trainer {
 public:
  explicit ScriptedTrainer(StepTiming t) : t_(t) {}
  absl::Status Prepare(const v1::Case&, int64_t, int64_t) override {
    return absl::OkStatus();
  }
  absl::StatusOr<StepTiming> Step() override { return t_; }
  absl::StatusOr<double> GradientZeroFraction() override { return 0.25; }
  std::string Describe() const override { return "scripted"; }

 private:
  StepTiming t_;
};

v1::Case TrainCase() {
  v1::Case c;
  c.set_bench(v1::BENCH_TRAIN);
  c.set_dtype(v1::FLOAT32);
  v1::TrainSpec* t = c.mutable_train();
  t->set_layers(2);
  t->set_hidden(8);
  t->set_batch(4);
  t->set_optimizer("sgd");
  t->set_lr(0.1);
  t->set_bucket_bytes(25 << 20);
  t->set_overlap(true);
  t->set_steps(5);
  c.mutable_timing()->set_warmup_iters(1);
  return c;
}

// Runs the case on two threaded ranks with one scripted step each;
// returns rank 0's result.
v1::Result RunPair(const StepTiming& r0, const StepTiming& r1) {
  ThreadPair pair;
  v1::Result results[2];
  std::vector<std::thread> threads;
  const StepTiming timings[2] = {r0, r1};
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      ThreadControl control(pair, r);
      ScriptedTrainer trainer(timings[r]);
      results[r] = RunTrain(TrainCase(), trainer, control);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(results[0].train().compute_s(), results[1].train().compute_s());
  return results[0];
}

double Sum(const v1::TrainFigures& f) {
  return f.compute_s() + f.exposed_comm_s() + f.skew_s();
}

TEST(RunTrain, DdpBreakdownTakesTheSlowestRankAndAddsUp) {
  // Rank 1 ends backward 2 ms after rank 0; rank 0's all-reduces end 1 ms
  // after that. Rank 0 (the slower step): skew 2 ms, exposed 1 ms.
  StepTiming r0, r1;
  r0.step_s = 0.010;
  r0.compute_s = 0.007;
  r0.backward_end_at = 100.000;
  r0.comm_done_at = 100.003;
  r1.step_s = 0.0095;
  r1.compute_s = 0.0085;
  r1.backward_end_at = 100.002;
  r1.comm_done_at = 100.003;
  v1::Result r = RunPair(r0, r1);
  ASSERT_EQ(r.status(), v1::OK) << r.failure().detail();
  EXPECT_DOUBLE_EQ(r.stats().median_s(), 0.010);
  EXPECT_NEAR(r.train().compute_s(), 0.007, 1e-12);
  EXPECT_NEAR(r.train().skew_s(), 0.002, 1e-9);
  EXPECT_NEAR(r.train().exposed_comm_s(), 0.001, 1e-9);
  EXPECT_NEAR(Sum(r.train()), r.train().step_of_breakdown_s(), 1e-9);
  // The trainer's count of zero gradient entries, after the case.
  EXPECT_EQ(r.train().grad_zero_fraction(), 0.25);
}

TEST(RunTrain, PipelinedWaitsSplitIntoSkewAndExposed) {
  // Pipelined: rank 0's forward waited 3 ms; rank 1 finished backward 2 ms
  // later, which explains 2 ms of the wait; 1 ms is communication.
  StepTiming r0, r1;
  r0.pipelined = r1.pipelined = true;
  r0.step_s = 0.010;
  r0.comm_in_backward_s = 0.003;
  r0.compute_s = 0.007;
  r0.backward_end_at = r0.comm_done_at = 100.000;
  r1.step_s = 0.0099;
  r1.comm_in_backward_s = 0.0005;
  r1.compute_s = 0.0094;
  r1.backward_end_at = r1.comm_done_at = 100.002;
  v1::Result r = RunPair(r0, r1);
  ASSERT_EQ(r.status(), v1::OK) << r.failure().detail();
  EXPECT_NEAR(r.train().compute_s(), 0.007, 1e-12);
  EXPECT_NEAR(r.train().skew_s(), 0.002, 1e-9);
  EXPECT_NEAR(r.train().exposed_comm_s(), 0.001, 1e-9);
  EXPECT_NEAR(Sum(r.train()), 0.010, 1e-9);

  // A peer 5 ms behind explains at most the 3 ms waited: skew 3, exposed 0
  // (no double counting; the parts still add up to the step).
  r1.backward_end_at = r1.comm_done_at = 100.005;
  r = RunPair(r0, r1);
  ASSERT_EQ(r.status(), v1::OK);
  EXPECT_NEAR(r.train().skew_s(), 0.003, 1e-9);
  EXPECT_NEAR(r.train().exposed_comm_s(), 0.0, 1e-12);
  EXPECT_NEAR(Sum(r.train()), 0.010, 1e-9);

  // The faster rank ahead (this rank finished last): no skew, all exposed.
  r1.backward_end_at = r1.comm_done_at = 99.999;
  r = RunPair(r0, r1);
  ASSERT_EQ(r.status(), v1::OK);
  EXPECT_NEAR(r.train().skew_s(), 0.0, 1e-12);
  EXPECT_NEAR(r.train().exposed_comm_s(), 0.003, 1e-9);
  EXPECT_NEAR(Sum(r.train()), 0.010, 1e-9);
}

}  // namespace
}  // namespace ringmaster
