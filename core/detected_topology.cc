#include "core/detected_topology.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <openssl/sha.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "nlohmann/json.hpp"

namespace ringmaster {
namespace {

namespace fs = std::filesystem;

std::string ReadSysFile(const fs::path& p) {
  std::ifstream in(p);
  std::string s;
  std::getline(in, s);
  return std::string(absl::StripAsciiWhitespace(s));
}

std::string Slug(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (std::isalnum(static_cast<unsigned char>(c))) {
      out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    } else if (!out.empty() && out.back() != '-') {
      out += '-';
    }
  }
  while (!out.empty() && out.back() == '-') out.pop_back();
  return out;
}

}  // namespace

std::vector<DetectedNic> DetectNics(const std::string& sys) {
  std::vector<DetectedNic> nics;
  std::error_code ec;
  std::set<std::string> rdma_netdevs;
  const fs::path root(sys);
  for (const auto& dev :
       fs::directory_iterator(root / "class/infiniband", ec)) {
    for (const auto& port : fs::directory_iterator(dev.path() / "ports", ec)) {
      DetectedNic nic;
      nic.name = dev.path().filename().string() + "/" +
                 port.path().filename().string();
      const std::string layer = ReadSysFile(port.path() / "link_layer");
      nic.kind = layer == "Ethernet" ? "roce" : "infiniband";
      // "400 Gb/sec (4X NDR)"
      const std::string rate = ReadSysFile(port.path() / "rate");
      double gbit = 0;
      if (absl::SimpleAtod(rate.substr(0, rate.find(' ')), &gbit))
        nic.gbit_s = gbit;
      nics.push_back(nic);
    }
    for (const auto& nd :
         fs::directory_iterator(dev.path() / "device" / "net", ec))
      rdma_netdevs.insert(nd.path().filename().string());
  }
  for (const auto& dev : fs::directory_iterator(root / "class/net", ec)) {
    const std::string name = dev.path().filename().string();
    if (name == "lo" || !fs::exists(dev.path() / "device")) continue;
    if (rdma_netdevs.count(name)) continue;  // listed as its RDMA device
    DetectedNic nic;
    nic.name = name;
    nic.kind = "ethernet";
    double mbit = 0;
    if (absl::SimpleAtod(ReadSysFile(dev.path() / "speed"), &mbit) && mbit > 0)
      nic.gbit_s = mbit / 1000;
    nics.push_back(nic);
  }
  std::sort(nics.begin(), nics.end(),
            [](const DetectedNic& a, const DetectedNic& b) {
              return a.name < b.name;
            });
  return nics;
}

v1::NodeSpec DetectedNode(const std::string& gpu_probe_json,
                          const std::vector<DetectedNic>& nics) {
  v1::NodeSpec node;
  nlohmann::json gpus = nlohmann::json::parse(gpu_probe_json, nullptr,
                                              /*allow_exceptions=*/false);
  if (!gpus.is_object()) gpus = nlohmann::json::object();
  const auto devices = gpus.value("devices", nlohmann::json::array());
  node.set_gpus(static_cast<int>(devices.size()));
  if (!devices.empty()) {
    const auto& d0 = devices[0];
    node.mutable_gpu()->set_model(d0.value("name", ""));
    node.mutable_gpu()->set_hbm_gib(d0.value("memory_gib", 0.0));
    node.mutable_pcie()->set_generation(d0.value("pcie_generation", 0));
    node.mutable_pcie()->set_width(d0.value("pcie_width", 0));
    int links = 0;
    for (const auto& p : gpus.value("pairs", nlohmann::json::array()))
      links = std::max(links, p.value("nvlink_links", 0));
    if (links > 0) {
      node.mutable_nvlink()->set_generation(gpus.value("nvlink_generation", 0));
      node.mutable_nvlink()->set_links(links);
      // NVLink 3 and 4: 25 GB/s per link per direction (data rate).
      node.mutable_nvlink()->set_link_gbps(25);
    }
  }
  std::map<std::pair<std::string, double>, int> ports;
  for (const DetectedNic& n : nics)
    if (n.gbit_s > 0) ++ports[{n.kind, n.gbit_s}];
  for (const auto& [key, count] : ports) {
    v1::NicSpec* nic = node.add_nics();
    nic->set_kind(key.first);
    nic->set_gbit_s(key.second);
    nic->set_count(count);
  }
  return node;
}

std::string TopologyId(const v1::NodeSpec& node, int cpu_threads) {
  std::string prefix =
      node.gpus() > 0
          ? absl::StrFormat("%dx-%s", node.gpus(), Slug(node.gpu().model()))
          : absl::StrFormat("cpu-%dt", cpu_threads);
  if (node.has_nvlink() && node.nvlink().links() > 0)
    absl::StrAppendFormat(&prefix, "-nv%d", node.nvlink().links());
  // The hash covers everything described (deterministic serialization of
  // the node) and the thread count.
  std::string bytes;
  {
    google::protobuf::io::StringOutputStream raw(&bytes);
    google::protobuf::io::CodedOutputStream coded(&raw);
    coded.SetSerializationDeterministic(true);
    node.SerializeToCodedStream(&coded);
  }
  absl::StrAppend(&bytes, "/threads=", cpu_threads);
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(),
         digest);
  return absl::StrFormat("%s-%02x%02x%02x%02x", prefix, digest[0], digest[1],
                         digest[2], digest[3]);
}

std::string JobTopologyId(const std::vector<std::string>& node_ids, int nodes) {
  std::set<std::string> distinct(node_ids.begin(), node_ids.end());
  distinct.erase("");
  if (distinct.empty()) return "";
  if (distinct.size() == 1) {
    return nodes > 1 ? absl::StrFormat("%dn-%s", nodes, *distinct.begin())
                     : *distinct.begin();
  }
  return absl::StrJoin(distinct, "+");
}

}  // namespace ringmaster
