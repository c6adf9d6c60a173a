#include "core/curves.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringmaster {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// An OK all-reduce point whose time's 95% interval is +-ci of its mean.
v1::Result Point(int64_t size, double busbw, double ci = 0.02,
                 v1::DataType dtype = v1::FLOAT32,
                 const std::string& algorithm = "") {
  v1::Result r;
  r.mutable_case_()->set_bench(v1::BENCH_COLLECTIVE);
  r.mutable_case_()->set_collective(v1::ALL_REDUCE);
  r.mutable_case_()->set_spec_name("allreduce");
  r.mutable_case_()->set_size_bytes(size);
  r.mutable_case_()->set_dtype(dtype);
  r.set_status(v1::OK);
  r.set_nranks(2);
  r.set_timing_mode(v1::PIPELINED);
  r.set_busbw_gbps(busbw);
  const double t = size / (busbw * 1e9);
  r.mutable_stats()->set_mean_s(t);
  r.mutable_stats()->set_median_s(t);
  r.mutable_stats()->set_ci95_half_width_s(ci * t);
  if (!algorithm.empty()) {
    r.set_nccl_algorithm(algorithm);
    r.set_nccl_protocol("Simple");
  }
  return r;
}

constexpr int64_t kKiB = 1024, kMiB = 1024 * 1024;

TEST(BusbwCurves, PeakAndTheSizesThatReachHalfAndNinetyPercent) {
  std::vector<v1::Result> rs = {Point(64 * kKiB, 10), Point(256 * kKiB, 40),
                                Point(1 * kMiB, 80), Point(4 * kMiB, 95),
                                Point(16 * kMiB, 100)};
  auto curves = BusbwCurves(rs);
  ASSERT_EQ(curves.size(), 1u);
  const BusbwCurve& c = curves[0];
  EXPECT_EQ(c.group, "all_reduce, 2 ranks, pipelined timing");
  EXPECT_EQ(c.series, "allreduce");
  EXPECT_EQ(c.points, 5);
  EXPECT_DOUBLE_EQ(c.peak_gbps, 100);
  EXPECT_EQ(c.peak_size, 16 * kMiB);
  EXPECT_EQ(c.half_size, 1 * kMiB);    // 80 >= 50; 40 is not
  EXPECT_EQ(c.ninety_size, 4 * kMiB);  // 95 >= 90; 80 is not
  EXPECT_TRUE(c.drops.empty());
}

TEST(BusbwCurves, AClearFallIsADropWithTheNcclChoiceOnBothSides) {
  std::vector<v1::Result> rs = {
      Point(1 * kMiB, 50, 0.02, v1::FLOAT32, "Ring"),
      Point(8 * kMiB, 60, 0.02, v1::FLOAT32, "Ring"),
      Point(32 * kMiB, 6, 0.05, v1::FLOAT32, "Tree"),
      Point(128 * kMiB, 70, 0.02, v1::FLOAT32, "Ring")};
  auto curves = BusbwCurves(rs);
  ASSERT_EQ(curves.size(), 1u);
  ASSERT_EQ(curves[0].drops.size(), 1u);
  const CurveDrop& d = curves[0].drops[0];
  EXPECT_EQ(d.from_size, 8 * kMiB);
  EXPECT_EQ(d.to_size, 32 * kMiB);
  EXPECT_DOUBLE_EQ(d.from_gbps, 60);
  EXPECT_DOUBLE_EQ(d.to_gbps, 6);
  EXPECT_EQ(d.from_choice, "Ring/Simple");
  EXPECT_EQ(d.to_choice, "Tree/Simple");
  // The recovery after it is a rise, not a drop; the peak is the last size.
  EXPECT_EQ(curves[0].peak_size, 128 * kMiB);
  const std::string text = RenderBusbwCurves(rs);
  EXPECT_THAT(text, HasSubstr("drop 8 MiB -> 32 MiB: 60 -> 6 GB/s (-90%); "
                              "NCCL Ring/Simple -> Tree/Simple"));
  EXPECT_THAT(text, HasSubstr("<- drops"));
}

TEST(BusbwCurves, NoiseAndSmallDipsAreNotDrops) {
  // 30% lower, but the intervals overlap (+-30% on each time).
  std::vector<v1::Result> noisy = {Point(1 * kMiB, 50, 0.3),
                                   Point(2 * kMiB, 60, 0.3),
                                   Point(4 * kMiB, 42, 0.3)};
  auto curves = BusbwCurves(noisy);
  ASSERT_EQ(curves.size(), 1u);
  EXPECT_TRUE(curves[0].drops.empty());
  // Tight intervals, but only 10% lower.
  std::vector<v1::Result> small = {Point(1 * kMiB, 50, 0.001),
                                   Point(2 * kMiB, 60, 0.001),
                                   Point(4 * kMiB, 54, 0.001)};
  curves = BusbwCurves(small);
  ASSERT_EQ(curves.size(), 1u);
  EXPECT_TRUE(curves[0].drops.empty());
  // The same 30% with tight intervals is one.
  std::vector<v1::Result> clear = {Point(1 * kMiB, 50, 0.01),
                                   Point(2 * kMiB, 60, 0.01),
                                   Point(4 * kMiB, 42, 0.01)};
  curves = BusbwCurves(clear);
  ASSERT_EQ(curves.size(), 1u);
  EXPECT_EQ(curves[0].drops.size(), 1u);
  EXPECT_THAT(RenderBusbwCurves(clear), Not(HasSubstr("NCCL")));
}

TEST(BusbwCurves, SeriesByWhatDiffersRepeatsByTheirMedian) {
  std::vector<v1::Result> rs;
  for (int64_t s : {1 * kMiB, 2 * kMiB, 4 * kMiB}) {
    rs.push_back(Point(s, 10.0 * (s / kMiB)));
    rs.push_back(Point(s, 2.0 * (s / kMiB), 0.02, v1::BFLOAT16));
  }
  // Two more runs of float32 at 4 MiB: the median of 40, 10 and 41 is 40,
  // so one slow run neither lowers the peak nor makes a drop.
  rs.push_back(Point(4 * kMiB, 10));
  rs.push_back(Point(4 * kMiB, 41));
  auto curves = BusbwCurves(rs);
  ASSERT_EQ(curves.size(), 2u);
  EXPECT_EQ(curves[0].series, "float32");
  EXPECT_DOUBLE_EQ(curves[0].peak_gbps, 40);
  EXPECT_EQ(curves[0].half_size, 2 * kMiB);  // 20 of 40
  EXPECT_TRUE(curves[0].drops.empty());
  EXPECT_EQ(curves[1].series, "bfloat16");
  EXPECT_DOUBLE_EQ(curves[1].peak_gbps, 8);
}

// Two plans' all-reduces in one report: case names that differ in spelling
// only are told apart by their jobs; one job's series need no job.
TEST(BusbwCurves, CurvesOfTwoPlansNameTheirJobs) {
  std::vector<v1::Result> rs;
  for (int64_t s : {1 * kMiB, 2 * kMiB, 4 * kMiB}) {
    rs.push_back(Point(s, 10));
    rs.back().set_job_id("job-a");
    rs.push_back(Point(s, 10));
    rs.back().mutable_case_()->set_spec_name("all_reduce");
    rs.back().set_job_id("job-b");
  }
  auto curves = BusbwCurves(rs);
  ASSERT_EQ(curves.size(), 2u);
  EXPECT_EQ(curves[0].series, "allreduce (job job-a)");
  EXPECT_EQ(curves[1].series, "all_reduce (job job-b)");
  // Several runs of one plan (jobs differ, the case name does not).
  for (auto& r : rs) r.mutable_case_()->set_spec_name("allreduce");
  curves = BusbwCurves(rs);
  ASSERT_EQ(curves.size(), 1u);
  EXPECT_EQ(curves[0].series, "allreduce");
}

TEST(BusbwCurves, TooFewSizesOrFailedPointsMakeNoCurve) {
  std::vector<v1::Result> rs = {Point(1 * kMiB, 50), Point(2 * kMiB, 60)};
  v1::Result failed = Point(4 * kMiB, 70);
  failed.set_status(v1::FAILED);
  rs.push_back(failed);
  EXPECT_TRUE(BusbwCurves(rs).empty());
  EXPECT_EQ(RenderBusbwCurves(rs), "");
}

}  // namespace
}  // namespace ringmaster
