#include <algorithm>
#include <map>

#include "core/names.h"
#include "worker/kinds/kind.h"

namespace ringmaster {
namespace {

// Filled by static initializers before main; read-only afterwards.
std::map<std::string, KindFactory, std::less<>>& Registry() {
  static auto* registry = new std::map<std::string, KindFactory, std::less<>>;
  return *registry;
}

}  // namespace

bool RegisterKind(std::string name, KindFactory factory) {
  return Registry().emplace(std::move(name), std::move(factory)).second;
}

std::unique_ptr<BenchmarkKind> MakeKind(std::string_view name) {
  auto it = Registry().find(name);
  if (it == Registry().end()) return nullptr;
  return it->second();
}

std::vector<std::string> KindNames() {
  std::vector<std::string> names;
  for (const auto& [name, factory] : Registry()) names.push_back(name);
  return names;
}

std::string KindNameOf(const v1::Case& c) {
  if (!c.kind().empty()) return c.kind();
  return std::string(BenchName(c.bench()));
}

v1::Result SkippedResult(const v1::Case& c, int nranks,
                         const std::string& why) {
  v1::Result result;
  *result.mutable_case_() = c;
  result.set_nranks(nranks);
  result.set_wrong_elements(-1);
  result.set_status(v1::SKIPPED);
  result.mutable_failure()->set_reason(v1::REJECTED);
  result.mutable_failure()->set_rank(-1);
  result.mutable_failure()->set_detail(why);
  return result;
}

v1::Result FailedResult(const v1::Case& c, int nranks,
                        const absl::Status& why) {
  v1::Result r = SkippedResult(c, nranks, std::string(why.message()));
  r.set_status(v1::FAILED);
  r.mutable_failure()->set_reason(v1::BACKEND_ERROR);
  return r;
}

}  // namespace ringmaster
