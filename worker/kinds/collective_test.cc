#include "worker/kinds/collective.h"

#include <gtest/gtest.h>

#include <deque>

#include "core/plan.h"

namespace ringmaster {
namespace {

// One-rank control: every collective returns the local value.
class SoloControl : public Control {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  absl::Status Barrier() override { return absl::OkStatus(); }
  absl::StatusOr<double> Max(double v) override { return v; }
  absl::StatusOr<int64_t> Sum(int64_t v) override { return v; }
  absl::Status MaxVector(std::vector<double>*) override {
    return absl::OkStatus();
  }
  absl::StatusOr<std::vector<double>> AllGather(double v) override {
    return std::vector<double>{v};
  }
  absl::StatusOr<std::vector<std::string>> AllGatherStrings(
      const std::string& v) override {
    return std::vector<std::string>{v};
  }
  absl::Status Broadcast(void*, int64_t, int) override {
    return absl::OkStatus();
  }
};

// Each op takes `op_s` seconds; records how many ops ran.
class FakeBackend : public CollectiveBackend {
 public:
  double op_s = 1e-4;
  int64_t wrong = 0;
  absl::Status prepare_status = absl::OkStatus();
  int64_t ops = 0;
  BackendInfo Info() const override {
    BackendInfo info;
    info.name = "fake";
    return info;
  }
  absl::Status Prepare(const CollectiveConfig&) override {
    return prepare_status;
  }
  absl::StatusOr<std::vector<double>> TimeWindows(int iters, int windows,
                                                  bool) override {
    ops += static_cast<int64_t>(iters) * windows;
    return std::vector<double>(windows, op_s * iters);
  }
  absl::StatusOr<std::vector<double>> TimeEachOp(int iters) override {
    ops += iters;
    return std::vector<double>(iters, op_s);
  }
  absl::StatusOr<int64_t> Verify() override {
    ops += 1;
    return wrong;
  }
  absl::StatusOr<std::unique_ptr<CollectiveBackend>> Split(bool, HostComm*,
                                                           double*) override {
    return absl::UnimplementedError("a fake backend does not split");
  }
};

v1::Case TestCase() {
  v1::Case c;
  c.set_collective(v1::ALL_REDUCE);
  c.set_dtype(v1::FLOAT32);
  c.set_op(v1::SUM);
  c.set_size_bytes(1000000);
  c.set_count(250000);
  c.set_verify(true);
  *c.mutable_timing() = DefaultTiming();
  c.mutable_timing()->set_sample_target_s(1e-3);
  return c;
}

TEST(RunCase, ConstantTimeStopsAtMinSamples) {
  SoloControl control;
  FakeBackend backend;
  v1::Result r = RunCase(TestCase(), backend, control);
  ASSERT_EQ(r.status(), v1::OK) << r.failure().detail();
  EXPECT_EQ(r.stats().samples(), 5);  // constant: the CI is 0 at min_samples
  EXPECT_EQ(r.stats().iters_per_sample(), 10);  // 1 ms / 100 us
  EXPECT_DOUBLE_EQ(r.stats().median_s(), 1e-4);
  EXPECT_TRUE(r.stats().ci_target_met());
  EXPECT_EQ(r.wrong_elements(), 0);
  EXPECT_NEAR(r.algbw_gbps(), 10.0, 1e-9);  // 1e6 B / 1e-4 s
  EXPECT_DOUBLE_EQ(r.busbw_gbps(), 0.0);    // one rank moves nothing
  // verify 1 + warm-up 5 (which also sizes the samples) + 5 samples of 10
  // ops, after one discarded settling window of 10.
  EXPECT_EQ(backend.ops, 1 + 5 + (5 + 1) * 10);
  ASSERT_EQ(r.rank_median_s_size(), 1);
}

TEST(RunCase, WrongDataFailsWithoutBandwidth) {
  SoloControl control;
  FakeBackend backend;
  backend.wrong = 3;
  v1::Result r = RunCase(TestCase(), backend, control);
  EXPECT_EQ(r.status(), v1::FAILED);
  EXPECT_EQ(r.failure().reason(), v1::DATA_MISMATCH);
  EXPECT_EQ(r.failure().rank(), 0);
  EXPECT_EQ(r.wrong_elements(), 3);
  EXPECT_EQ(r.busbw_gbps(), 0);
  EXPECT_EQ(r.stats().samples(), 0);
}

TEST(RunCase, UnsupportedConfigurationIsRejected) {
  SoloControl control;
  FakeBackend backend;
  backend.prepare_status = absl::UnimplementedError("no such thing");
  v1::Result r = RunCase(TestCase(), backend, control);
  EXPECT_EQ(r.status(), v1::FAILED);
  EXPECT_EQ(r.failure().reason(), v1::REJECTED);
  EXPECT_NE(r.failure().detail().find("no such thing"), std::string::npos);
}

TEST(RunCase, VerificationOffReportsMinusOne) {
  SoloControl control;
  FakeBackend backend;
  v1::Case c = TestCase();
  c.set_verify(false);
  v1::Result r = RunCase(c, backend, control);
  EXPECT_EQ(r.status(), v1::OK);
  EXPECT_EQ(r.wrong_elements(), -1);
}

}  // namespace
}  // namespace ringmaster
