#include "core/topology.h"

#include <gmock/gmock.h>
#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "core/yaml_proto.h"

namespace ringmaster {
namespace {

using ::testing::HasSubstr;

std::string TopologyPath(const std::string& name) {
  return std::string(RINGMASTER_SOURCE_DIR) + "/topologies/" + name;
}

TEST(Topologies, EveryFileLoadsAndValidates) {
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(
           std::string(RINGMASTER_SOURCE_DIR) + "/topologies")) {
    if (entry.path().extension() != ".yaml") continue;
    // The GPU datasheet table (core/datasheet_test.cc), not a system.
    if (entry.path().filename() == "datasheets.yaml") continue;
    auto t = LoadTopology(entry.path().string());
    ASSERT_TRUE(t.ok()) << t.status();
    EXPECT_EQ(t->id() + ".yaml", entry.path().filename().string())
        << "a file is named after its id";
    ++files;
  }
  EXPECT_GE(files, 8);
}

TEST(Topologies, SpeedOfLightOfThePathsWeMeasureOn) {
  auto pair = LoadTopology(TopologyPath("h200-nvlink-pair.yaml"));
  ASSERT_TRUE(pair.ok()) << pair.status();
  Ceilings c = PathCeilings(*pair);
  EXPECT_DOUBLE_EQ(c.nvlink_gbps, 450);
  EXPECT_NEAR(c.pcie_gbps, 63.0, 0.05);
  EXPECT_NEAR(PcieGbps(4, 16), 31.5, 0.05);
  auto ndr = LoadTopology(TopologyPath("hgx-h100-ndr-cluster.yaml"));
  ASSERT_TRUE(ndr.ok());
  EXPECT_DOUBLE_EQ(PathCeilings(*ndr).net_node_gbps, 400);
  EXPECT_DOUBLE_EQ(PathCeilings(*ndr).net_gpu_gbps, 50);
}

TEST(Topologies, ErrorsNameFileLineAndField) {
  auto bad = ParseTopology("id: x\nnode:\n  gpus: 8\n  gpux: 1\n", "t.yaml");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(),
              HasSubstr("t.yaml:4: node.gpux: unknown key"));
  bad = ParseTopology("id: x\nnode:\n  gpus: many\n", "t.yaml");
  EXPECT_THAT(bad.status().message(),
              HasSubstr("t.yaml:3: node.gpus: expected an integer"));
  bad = ParseTopology(
      "id: x\nnode: {gpus: 1, gpu: {model: g}, pcie: {generation: 5, width: "
      "16}, nics: [{kind: carrier-pigeon, gbit_s: 1, count: 1}]}\n",
      "t.yaml");
  EXPECT_THAT(bad.status().message(), HasSubstr("node.nics[0].kind"));
}

TEST(Topologies, YamlRoundTrip) {
  auto t = LoadTopology(TopologyPath("hgx-h100-ndr-cluster.yaml"));
  ASSERT_TRUE(t.ok());
  auto again = ParseTopology(MessageToYaml(*t), "again.yaml");
  ASSERT_TRUE(again.ok()) << again.status() << "\n" << MessageToYaml(*t);
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(*again, *t))
      << MessageToYaml(*again);
}

TEST(Model, LargeRingIsBandwidthBoundOnTheSlowerPath) {
  auto pair = LoadTopology(TopologyPath("h200-nvlink-pair.yaml"));
  ASSERT_TRUE(pair.ok());
  auto big = PredictCollective(*pair, 1, v1::ALL_REDUCE, int64_t{8} << 30);
  ASSERT_TRUE(big.ok());
  EXPECT_EQ(big->bottleneck, "nvlink");
  EXPECT_EQ(big->protocol, "Simple");
  // Approaches efficiency x speed of light from below as sizes grow.
  EXPECT_LT(big->busbw_gbps, 450 * 0.80);
  EXPECT_GT(big->busbw_gbps, 450 * 0.80 * 0.95);
  auto bigger = PredictCollective(*pair, 1, v1::ALL_REDUCE, int64_t{64} << 30);
  ASSERT_TRUE(bigger.ok());
  EXPECT_GT(bigger->busbw_gbps, big->busbw_gbps);
  auto small = PredictCollective(*pair, 1, v1::ALL_REDUCE, 8);
  ASSERT_TRUE(small.ok());
  EXPECT_EQ(small->protocol, "LL") << "latency-bound sizes take LL";
  EXPECT_LT(small->busbw_gbps, 1);

  auto pcie = LoadTopology(TopologyPath("l40s-pcie-8.yaml"));
  ASSERT_TRUE(pcie.ok());
  auto p = PredictCollective(*pcie, 1, v1::ALL_REDUCE, int64_t{1} << 30);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->bottleneck, "pcie");
  EXPECT_LT(p->busbw_gbps, PcieGbps(4, 16));

  // Across nodes the network decides once it is slower than NVLink.
  auto ndr = LoadTopology(TopologyPath("hgx-h100-ndr-cluster.yaml"));
  ASSERT_TRUE(ndr.ok());
  auto a2a = PredictCollective(*ndr, 64, v1::ALL_TO_ALL, int64_t{1} << 30);
  ASSERT_TRUE(a2a.ok());
  EXPECT_EQ(a2a->bottleneck, "network");
  EXPECT_LT(a2a->busbw_gbps, 50 * 1.0 + 1e-9)
      << "all-to-all across nodes: each GPU's share of the ports";
}

TEST(Model, CalibrationRecoversTheParametersItWasGeneratedWith) {
  auto t = LoadTopology(TopologyPath("h200-nvlink-pair.yaml"));
  ASSERT_TRUE(t.ok());
  v1::Topology truth = *t;
  truth.mutable_model()->set_nvlink_efficiency(0.7625);
  truth.mutable_model()->set_intra_step_us(3.0);
  std::vector<Measurement> points;
  for (int64_t s = 1 << 20; s <= (int64_t{4} << 30); s *= 2) {
    auto p = PredictCollective(truth, 1, v1::ALL_REDUCE, s);
    ASSERT_TRUE(p.ok());
    points.push_back({v1::ALL_REDUCE, s, 2, p->time_s, ""});
  }
  auto fit = Calibrate(*t, 1, points, 1 << 20);
  ASSERT_TRUE(fit.ok()) << fit.status();
  EXPECT_NEAR(fit->nvlink_efficiency(), 0.7625, 0.003);
  EXPECT_NEAR(fit->intra_step_us(), 3.0, 0.3);
  EXPECT_THAT(fit->source(), HasSubstr("calibrated on 13 measurement"));
}

// Labelled with NCCL's protocol (as --nccl-algorithms results are), the
// calibration finds where NCCL switches from LL to Simple and what Simple
// costs on top: a jump the fastest-protocol model cannot produce.
TEST(Model, LabelledCalibrationFollowsNcclsProtocolSwitch) {
  auto t = LoadTopology(TopologyPath("h200-nvlink-pair.yaml"));
  ASSERT_TRUE(t.ok());
  v1::Topology truth = *t;
  truth.mutable_model()->set_nvlink_efficiency(0.72);
  truth.mutable_model()->set_intra_step_us(0.8);
  truth.mutable_model()->set_simple_base_us(14);
  truth.mutable_model()->set_ll_max_bytes(int64_t{3} << 19);  // 1.5 MiB
  std::vector<Measurement> points;
  for (int64_t s = 1 << 20; s <= (int64_t{1} << 30); s += s / 2) {
    auto p = PredictCollective(truth, 1, v1::ALL_REDUCE, s);
    ASSERT_TRUE(p.ok());
    points.push_back(
        {v1::ALL_REDUCE, s, 2, p->time_s, CanonicalProtocol(p->protocol)});
  }
  EXPECT_EQ(points[0].protocol, "LL");
  EXPECT_EQ(points.back().protocol, "Simple");
  auto fit = Calibrate(*t, 1, points, 1 << 20);
  ASSERT_TRUE(fit.ok()) << fit.status();
  // The switch lies between the largest LL and the smallest Simple size.
  EXPECT_GE(fit->ll_max_bytes(), int64_t{3} << 19);
  EXPECT_LT(fit->ll_max_bytes(), (int64_t{3} << 19) * 3 / 2);
  EXPECT_NEAR(fit->simple_base_us(), 14, 1.0);
  EXPECT_THAT(fit->source(), HasSubstr("NCCL's switch LL -> Simple"));
  v1::Topology fitted = *t;
  *fitted.mutable_model() = *fit;
  for (const Measurement& m : points) {
    auto p = PredictCollective(fitted, 1, v1::ALL_REDUCE, m.size_bytes);
    ASSERT_TRUE(p.ok());
    EXPECT_NEAR(p->time_s / m.time_s, 1.0, 0.02) << m.size_bytes;
    EXPECT_EQ(CanonicalProtocol(p->protocol), m.protocol) << m.size_bytes;
  }
  EXPECT_EQ(CanonicalProtocol("SIMPLE"), "Simple");
  EXPECT_EQ(CanonicalProtocol("ll128"), "LL128");
  EXPECT_EQ(CanonicalProtocol("ring"), "");
}

TEST(Model, DataParallelStepHidesAllButTheLastBucket) {
  auto pair = LoadTopology(TopologyPath("h200-nvlink-pair.yaml"));
  ASSERT_TRUE(pair.ok());
  DpStepSpec s;
  s.layers = 8;
  s.hidden = 8192;
  s.batch = 4096;
  s.compute_s = 0.020;
  auto one = PredictDpStep(*pair, 1, s);  // the topology's 2 GPUs
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(one->buckets, 8) << "128 MiB layers each fill a 25 MiB bucket";
  auto last = PredictCollective(*pair, 1, v1::ALL_REDUCE, int64_t{128} << 20);
  ASSERT_TRUE(last.ok());
  EXPECT_NEAR(one->exposed_comm_s, last->time_s, 1e-9)
      << "only the first layer's bucket is left after backward";
  EXPECT_NEAR(one->step_s, 0.020 + last->time_s, 1e-9);
  s.overlap = false;
  auto serial = PredictDpStep(*pair, 1, s);
  ASSERT_TRUE(serial.ok());
  EXPECT_NEAR(serial->step_s, 0.020 + serial->comm_s, 1e-9);
  EXPECT_NEAR(serial->comm_s, 8 * last->time_s, 1e-9);
  auto flops = ComputeSeconds(*pair, s, "bf16", 0.5);
  ASSERT_TRUE(flops.ok());
  EXPECT_NEAR(*flops, 6.0 * 4096 * 8192.0 * 8192 * 8 / (989.5e12 * 0.5), 1e-9);
  EXPECT_FALSE(ComputeSeconds(*pair, s, "fp4", 0.5).ok());
}

}  // namespace
}  // namespace ringmaster
