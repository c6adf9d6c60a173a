#include "core/detected_topology.h"

#include <filesystem>
#include <fstream>

#include "gtest/gtest.h"

namespace ringmaster {
namespace {

namespace fs = std::filesystem;

constexpr char kTwoH200[] = R"({"devices": [
  {"index": 0, "name": "NVIDIA H200", "memory_gib": 140.4,
   "pcie_generation": 5, "pcie_width": 16},
  {"index": 1, "name": "NVIDIA H200", "memory_gib": 140.4,
   "pcie_generation": 5, "pcie_width": 16}],
 "pairs": [{"a": 0, "b": 1, "p2p": true, "nvlink_links": 18}],
 "nvlink_generation": 4})";

TEST(DetectedTopology, NodeFromTheGpuProbe) {
  v1::NodeSpec node = DetectedNode(kTwoH200, {{"ib0", "infiniband", 400},
                                              {"ib1", "infiniband", 400},
                                              {"eth0", "ethernet", 0}});
  EXPECT_EQ(node.gpus(), 2);
  EXPECT_EQ(node.gpu().model(), "NVIDIA H200");
  EXPECT_EQ(node.pcie().generation(), 5);
  EXPECT_EQ(node.nvlink().links(), 18);
  EXPECT_EQ(node.nvlink().generation(), 4);
  ASSERT_EQ(node.nics_size(), 1);  // the port of unknown speed is left out
  EXPECT_EQ(node.nics(0).count(), 2);
  EXPECT_EQ(node.nics(0).gbit_s(), 400);
}

TEST(DetectedTopology, IdNamesTheSystemAndChangesWithIt) {
  const v1::NodeSpec node = DetectedNode(kTwoH200, {});
  const std::string id = TopologyId(node, 16);
  EXPECT_EQ(id.rfind("2x-nvidia-h200-nv18-", 0), 0u) << id;
  EXPECT_EQ(id.size(), std::string("2x-nvidia-h200-nv18-").size() + 8);
  EXPECT_EQ(TopologyId(node, 16), id);  // stable
  v1::NodeSpec narrower = node;
  narrower.mutable_pcie()->set_width(8);
  EXPECT_NE(TopologyId(narrower, 16), id);
  EXPECT_NE(TopologyId(node, 32), id);

  const std::string cpu = TopologyId(DetectedNode("not json", {}), 2);
  EXPECT_EQ(cpu.rfind("cpu-2t-", 0), 0u) << cpu;
}

TEST(DetectedTopology, JobIdJoinsNodes) {
  EXPECT_EQ(JobTopologyId({"a", "a", "a", "a"}, 1), "a");
  EXPECT_EQ(JobTopologyId({"a", "a", "a", "a"}, 2), "2n-a");
  EXPECT_EQ(JobTopologyId({"b", "a", "a"}, 3), "a+b");
  EXPECT_EQ(JobTopologyId({"", ""}, 1), "");
}

TEST(DetectedTopology, NicsFromSys) {
  const fs::path sys = fs::path(testing::TempDir()) / "detected_topology_sys";
  fs::remove_all(sys);
  auto write = [](const fs::path& p, const std::string& text) {
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text << "\n";
  };
  write(sys / "class/infiniband/mlx5_0/ports/1/link_layer", "InfiniBand");
  write(sys / "class/infiniband/mlx5_0/ports/1/rate", "400 Gb/sec (4X NDR)");
  write(sys / "class/infiniband/mlx5_1/ports/1/link_layer", "Ethernet");
  write(sys / "class/infiniband/mlx5_1/ports/1/rate", "200 Gb/sec (4X HDR)");
  fs::create_directories(sys / "class/infiniband/mlx5_1/device/net/ens2");
  write(sys / "class/net/ens2/speed", "200000");
  fs::create_directories(sys / "class/net/ens2/device");
  write(sys / "class/net/eno1/speed", "25000");
  fs::create_directories(sys / "class/net/eno1/device");
  fs::create_directories(sys / "class/net/lo");
  fs::create_directories(sys / "class/net/veth0");  // virtual: no device

  const auto nics = DetectNics(sys.string());
  ASSERT_EQ(nics.size(), 3u);
  EXPECT_EQ(nics[0].name, "eno1");
  EXPECT_EQ(nics[0].kind, "ethernet");
  EXPECT_EQ(nics[0].gbit_s, 25);
  EXPECT_EQ(nics[1].name, "mlx5_0/1");
  EXPECT_EQ(nics[1].kind, "infiniband");
  EXPECT_EQ(nics[1].gbit_s, 400);
  EXPECT_EQ(nics[2].name, "mlx5_1/1");  // ens2 is listed as its RDMA device
  EXPECT_EQ(nics[2].kind, "roce");
  fs::remove_all(sys);
}

}  // namespace
}  // namespace ringmaster
