#include "core/datasheet.h"

#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/str_format.h"
#include "core/yaml_proto.h"

namespace ringmaster {

extern const char kDatasheetsYaml[];  // generated from the YAML file

namespace {

absl::Status Invalid(const std::string& file, int i, const std::string& what) {
  return absl::InvalidArgumentError(
      absl::StrFormat("%s: gpus[%d]: %s", file, i, what));
}

}  // namespace

absl::StatusOr<v1::Datasheets> ParseDatasheets(const std::string& text,
                                               const std::string& file) {
  v1::Datasheets table;
  if (absl::Status s = YamlToMessage(text, file, &table); !s.ok()) return s;
  if (table.gpus_size() == 0) {
    return absl::InvalidArgumentError(file + ": gpus: expected entries");
  }
  std::set<std::string> names;
  for (int i = 0; i < table.gpus_size(); ++i) {
    const v1::Datasheet& d = table.gpus(i);
    if (d.names_size() == 0) {
      return Invalid(file, i, "names: the device names the driver reports");
    }
    for (const std::string& n : d.names()) {
      if (!names.insert(n).second) {
        return Invalid(file, i, "names: \"" + n + "\" is in two entries");
      }
    }
    const v1::GpuSpec& g = d.gpu();
    if (g.model().empty()) return Invalid(file, i, "gpu.model: required");
    if (!(g.hbm_gib() > 0) || !(g.hbm_gbps() > 0)) {
      return Invalid(file, i,
                     "gpu.hbm_gib and gpu.hbm_gbps: the memory's size and "
                     "bandwidth");
    }
    if (!(g.peak_tflops().fp32() > 0) || !(g.peak_tflops().bf16() > 0)) {
      return Invalid(file, i, "gpu.peak_tflops: fp32 and bf16 at least");
    }
    if (d.pcie().generation() < 3 || d.pcie().width() < 1) {
      return Invalid(file, i, "pcie: generation (3 or later) and width");
    }
    if (d.nvlink().links() > 0 && !(d.nvlink().link_gbps() > 0)) {
      return Invalid(file, i, "nvlink.link_gbps: required with links");
    }
    if (!(d.tdp_w() > 0)) return Invalid(file, i, "tdp_w: required");
    if (d.source().empty()) return Invalid(file, i, "source: required");
  }
  return table;
}

const v1::Datasheets& BuiltInDatasheets() {
  static const v1::Datasheets* table = [] {
    auto parsed = ParseDatasheets(kDatasheetsYaml, "datasheets.yaml");
    return new v1::Datasheets(parsed.ok() ? *parsed : v1::Datasheets());
  }();
  return *table;
}

const v1::Datasheet* FindDatasheet(std::string_view device) {
  std::string name(device);
  absl::StripAsciiWhitespace(&name);
  // Telemetry writes "GPU 0000:19:00.0 NVIDIA H200": skip to the name.
  if (name.rfind("GPU ", 0) == 0) {
    const size_t at = name.find(' ', 4);
    if (at != std::string::npos) name = name.substr(at + 1);
  }
  for (const v1::Datasheet& d : BuiltInDatasheets().gpus()) {
    for (const std::string& n : d.names())
      if (n == name) return &d;
  }
  return nullptr;
}

double DatasheetPeakTflops(const v1::Datasheet& d, v1::DataType dtype) {
  const v1::PeakTflops& p = d.gpu().peak_tflops();
  switch (dtype) {
    case v1::FLOAT64:
      return p.fp64();
    case v1::FLOAT32:
      return p.fp32();
    case v1::TFLOAT32:
      return p.tf32();
    case v1::BFLOAT16:
      return p.bf16();
    case v1::FLOAT16:
      return p.fp16();
    case v1::FLOAT8_E4M3:
      return p.fp8();
    case v1::INT8:
      return p.int8();
    default:
      return 0;
  }
}

}  // namespace ringmaster
