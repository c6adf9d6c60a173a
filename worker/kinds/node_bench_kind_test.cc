#include "worker/kinds/node_bench_kind.h"

#include <gtest/gtest.h>

#include "core/plan.h"
#include "worker/kinds/find_slow.h"

namespace ringmaster {
namespace {

// Rank 0 of `n` ranks that all behave alike: gathers return n copies.
class MirrorControl : public Control {
 public:
  explicit MirrorControl(int n) : n_(n) {}
  int rank() const override { return 0; }
  int size() const override { return n_; }
  absl::Status Barrier() override { return absl::OkStatus(); }
  absl::StatusOr<double> Max(double v) override { return v; }
  absl::StatusOr<int64_t> Sum(int64_t v) override { return v * n_; }
  absl::Status MaxVector(std::vector<double>*) override {
    return absl::OkStatus();
  }
  absl::StatusOr<std::vector<double>> AllGather(double v) override {
    return std::vector<double>(n_, v);
  }
  absl::StatusOr<std::vector<std::string>> AllGatherStrings(
      const std::string& v) override {
    return std::vector<std::string>(n_, v);
  }
  absl::Status Broadcast(void*, int64_t, int) override {
    return absl::OkStatus();
  }

 private:
  int n_;
};

// Each operation takes `op_s`; records the operations run.
class FakeNodeBench : public NodeBench {
 public:
  BenchSetup setup;
  absl::Status prepare_status = absl::OkStatus();
  double op_s = 1e-3;
  int64_t wrong = 0;
  double error = 0;
  int64_t ops = 0;
  absl::StatusOr<BenchSetup> Prepare(const v1::Case&) override {
    if (!prepare_status.ok()) return prepare_status;
    return setup;
  }
  absl::StatusOr<double> TimeOps(int iters) override {
    ops += iters;
    return setup.active ? op_s * iters : 0.0;
  }
  absl::StatusOr<int64_t> Verify() override { return wrong; }
  double rel_error() const override { return error; }
};

v1::Case BenchCase() {
  v1::Case c;
  c.set_bench(v1::BENCH_P2P);
  c.set_pattern(v1::PAIR);
  c.set_size_bytes(1000000);
  c.set_verify(true);
  *c.mutable_timing() = DefaultBenchTiming();
  c.mutable_timing()->set_fixed_iters_per_sample(4);
  return c;
}

TEST(RunBench, BandwidthIsBytesOverMedianTimeSummedOverMovingRanks) {
  MirrorControl control(2);  // both ranks move 1 MB per op: bidirectional
  FakeNodeBench bench;
  bench.setup.active = true;
  bench.setup.bytes_per_op = 1000000;
  bench.setup.method = v1::COPY_ENGINE;
  bench.setup.path = "nvlink";
  bench.setup.ceiling_gbps = 2.0;
  bench.setup.placement = "cpus 0-3";
  v1::Result r = RunBench(BenchCase(), bench, control);
  ASSERT_EQ(r.status(), v1::OK) << r.failure().detail();
  EXPECT_EQ(r.case_().method(), v1::COPY_ENGINE);
  EXPECT_DOUBLE_EQ(r.stats().median_s(), 1e-3);
  EXPECT_EQ(r.stats().iters_per_sample(), 4);
  // Constant times: the median's CI (bench default) exists from 6 samples.
  EXPECT_EQ(r.stats().samples(), 6);
  ASSERT_EQ(r.rank_bandwidth_gbps_size(), 2);
  EXPECT_NEAR(r.rank_bandwidth_gbps(0), 1.0, 1e-12);  // 1e6 B / 1 ms
  EXPECT_NEAR(r.bandwidth_gbps(), 2.0, 1e-12);        // both directions
  EXPECT_NEAR(r.ceiling_gbps(), 4.0, 1e-12);          // both ranks' paths
  EXPECT_NEAR(r.pct_of_ceiling(), 50.0, 1e-9);
  EXPECT_EQ(r.path(), "nvlink");
  EXPECT_EQ(r.placement(), "rank 0: cpus 0-3; rank 1: cpus 0-3");
  EXPECT_EQ(r.wrong_elements(), 0);
  EXPECT_EQ(r.latency_ns(), 0);
  // warm-up 2 + 6 samples x 4.
  EXPECT_EQ(bench.ops, 2 + 6 * 4);
}

TEST(RunBench, LatencyIsTimePerDependentAccess) {
  MirrorControl control(1);
  FakeNodeBench bench;
  bench.setup.active = true;
  bench.setup.hops_per_op = 1000;
  bench.op_s = 850e-6;  // 1000 hops
  v1::Result r = RunBench(BenchCase(), bench, control);
  ASSERT_EQ(r.status(), v1::OK);
  EXPECT_NEAR(r.latency_ns(), 850.0, 1e-6);
  EXPECT_EQ(r.bandwidth_gbps(), 0);
  EXPECT_EQ(r.pct_of_ceiling(), 0);  // no ceiling for latency
}

TEST(RunBench, GemmRateAndError) {
  MirrorControl control(1);
  FakeNodeBench bench;
  bench.setup.active = true;
  bench.setup.flops_per_op = 2.0 * 1024 * 1024 * 1024;
  bench.op_s = 2.0 * 1024 * 1024 * 1024 / 500e12;  // 500 TFLOP/s
  bench.error = 3e-3;
  v1::Case c = BenchCase();
  c.set_bench(v1::BENCH_GEMM);
  v1::Result r = RunBench(c, bench, control);
  ASSERT_EQ(r.status(), v1::OK);
  EXPECT_NEAR(r.tflops(), 500.0, 1e-6);
  EXPECT_DOUBLE_EQ(r.rel_error(), 3e-3);
}

TEST(RunBench, IdleRanksAddNothing) {
  MirrorControl control(3);
  FakeNodeBench bench;  // not active: every rank idles
  bench.setup.bytes_per_op = 0;
  v1::Result r = RunBench(BenchCase(), bench, control);
  ASSERT_EQ(r.status(), v1::OK);
  EXPECT_EQ(r.bandwidth_gbps(), 0);
  EXPECT_EQ(r.placement(), "");
}

TEST(RunBench, UnimplementedIsSkippedWithTheReason) {
  MirrorControl control(2);
  FakeNodeBench bench;
  bench.prepare_status = absl::UnimplementedError("no peer access from A to B");
  v1::Result r = RunBench(BenchCase(), bench, control);
  EXPECT_EQ(r.status(), v1::SKIPPED);
  EXPECT_EQ(r.failure().detail(), "no peer access from A to B");
  EXPECT_EQ(r.failure().rank(), 0);
  EXPECT_EQ(bench.ops, 0);
}

TEST(RunBench, BackendErrorFails) {
  MirrorControl control(2);
  FakeNodeBench bench;
  bench.prepare_status = absl::InternalError("cudaMalloc: out of memory");
  v1::Result r = RunBench(BenchCase(), bench, control);
  EXPECT_EQ(r.status(), v1::FAILED);
  EXPECT_EQ(r.failure().reason(), v1::BACKEND_ERROR);
}

TEST(RunBench, WrongBytesFailAsDataMismatchBeforeTiming) {
  MirrorControl control(2);
  FakeNodeBench bench;
  bench.setup.active = true;
  bench.setup.bytes_per_op = 1;
  bench.wrong = 7;
  v1::Result r = RunBench(BenchCase(), bench, control);
  EXPECT_EQ(r.status(), v1::FAILED);
  EXPECT_EQ(r.failure().reason(), v1::DATA_MISMATCH);
  EXPECT_EQ(r.wrong_elements(), 14);  // 7 on each rank
  EXPECT_EQ(r.bandwidth_gbps(), 0);
  EXPECT_EQ(bench.ops, 0);
}

TEST(SkippedResult, CarriesTheCaseAndReason) {
  v1::Result r = SkippedResult(BenchCase(), 2, "a GPU case on host ranks");
  EXPECT_EQ(r.status(), v1::SKIPPED);
  EXPECT_EQ(r.case_().size_bytes(), 1000000);
  EXPECT_EQ(r.failure().detail(), "a GPU case on host ranks");
}

}  // namespace
}  // namespace ringmaster
