#include "core/placement.h"

#include <sched.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

extern char** environ;

namespace ringmaster {

std::string HostName() {
  char buf[256] = {};
  gethostname(buf, sizeof buf - 1);
  return buf;
}

std::map<std::string, std::string> NcclEnvironment() {
  std::map<std::string, std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string kv = *e;
    const auto eq = kv.find('=');
    if (kv.rfind("NCCL_", 0) == 0 && eq != std::string::npos)
      env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return env;
}

std::string FormatCpuList(const std::vector<int>& cpus) {
  std::string out;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!out.empty()) out += ",";
    out += j == i ? absl::StrFormat("%d", cpus[i])
                  : absl::StrFormat("%d-%d", cpus[i], cpus[j]);
    i = j + 1;
  }
  return out;
}

std::string CpuPlacement() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (CPU_ISSET(c, &set)) cpus.push_back(c);
    }
  }
  std::set<int> nodes;
  namespace fs = std::filesystem;
  for (int c : cpus) {
    std::error_code ec;
    fs::path dir = absl::StrFormat("/sys/devices/system/cpu/cpu%d", c);
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end;
         it.increment(ec)) {
      std::string name = it->path().filename().string();
      int node = 0;
      if (name.rfind("node", 0) == 0 &&
          absl::SimpleAtoi(name.substr(4), &node)) {
        nodes.insert(node);
      }
    }
  }
  std::string out =
      "cpus " + (cpus.empty() ? std::string("?") : FormatCpuList(cpus));
  if (!nodes.empty()) out += " numa " + absl::StrJoin(nodes, ",");
  return out;
}

int PciNumaNode(const std::string& bus_id) {
  // /sys names the device by a 4-digit domain: "0000:07:00.0".
  std::string id = absl::AsciiStrToLower(bus_id);
  auto colon = id.find(':');
  if (colon != std::string::npos && colon > 4) id = id.substr(colon - 4);
  std::ifstream in("/sys/bus/pci/devices/" + id + "/numa_node");
  int node = -1;
  if (!(in >> node)) return -1;
  return node;
}

}  // namespace ringmaster
