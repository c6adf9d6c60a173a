#include "core/fingerprint.h"

#include <algorithm>
#include <functional>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace ringmaster {
namespace {

std::string EnvString(const v1::Fingerprint& f) {
  std::vector<std::string> kv;
  for (const auto& [k, v] : f.nccl_env()) kv.push_back(k + "=" + v);
  std::sort(kv.begin(), kv.end());
  return absl::StrJoin(kv, " ");
}

struct Field {
  const char* name;
  std::function<std::string(const v1::Fingerprint&)> get;
};

}  // namespace

std::optional<FingerprintMismatch> CompareFingerprints(
    const std::vector<v1::Fingerprint>& fps) {
  if (fps.size() < 2) return std::nullopt;
  const Field fields[] = {
      {"plan_sha256", [](const auto& f) { return f.plan_sha256(); }},
      {"build_id", [](const auto& f) { return f.build_id(); }},
      {"backend", [](const auto& f) { return f.backend(); }},
      {"nccl_version", [](const auto& f) { return f.nccl_version(); }},
      {"cuda_runtime_version",
       [](const auto& f) { return f.cuda_runtime_version(); }},
      {"driver_version", [](const auto& f) { return f.driver_version(); }},
      {"gpu_model", [](const auto& f) { return f.gpu_model(); }},
      {"mpi_version", [](const auto& f) { return f.mpi_version(); }},
      {"nccl_env", EnvString},
  };
  FingerprintMismatch m;
  std::vector<std::string> details;
  for (const Field& field : fields) {
    std::string base = field.get(fps[0]);
    bool differs = false;
    for (size_t r = 1; r < fps.size(); ++r) {
      std::string v = field.get(fps[r]);
      if (v == base) continue;
      if (!differs) {
        m.fields.push_back(field.name);
        details.push_back(absl::StrFormat("%s: rank 0 \"%s\" vs rank %d \"%s\"",
                                          field.name, base, r, v));
        differs = true;
      }
      if (std::find(m.ranks.begin(), m.ranks.end(), static_cast<int>(r)) ==
          m.ranks.end()) {
        m.ranks.push_back(static_cast<int>(r));
      }
    }
  }
  if (m.fields.empty()) return std::nullopt;
  std::sort(m.ranks.begin(), m.ranks.end());
  m.detail = absl::StrFormat(
      "%s differ on rank(s) %s (%s)", absl::StrJoin(m.fields, ", "),
      absl::StrJoin(m.ranks, ", "), absl::StrJoin(details, "; "));
  return m;
}

}  // namespace ringmaster
