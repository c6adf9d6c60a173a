// The section of a plan case for a plug-in kind (bench: a name a worker
// registers).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "core/names.h"
#include "core/plan_parser.h"
#include "core/status_macros.h"
#include "core/units.h"

namespace ringmaster {
namespace plan_internal {

// A plug-in kind's case: its parameters (scalars, kept as written), and
// the keys every kind shares.
absl::Status PlanParser::ParsePluginCase(const YAML::Node& node,
                                         const std::string& prefix,
                                         const CaseKeys& get,
                                         v1::CaseSpec* spec) const {
  std::string f;
  for (const auto& kv : node) {
    const std::string key = kv.first.Scalar();
    if (std::find_if(std::begin(kPluginCaseKeys), std::end(kPluginCaseKeys),
                     [&](const char* k) { return key == k; }) ==
        std::end(kPluginCaseKeys)) {
      return Error(kv.first, prefix + "." + key,
                   absl::StrFormat("bench: %s (a plug-in kind) takes only "
                                   "name, params, timing, backend, verify "
                                   "and ladder",
                                   spec->kind()));
    }
  }
  if (YAML::Node params = get("params", &f)) {
    if (!params.IsMap()) {
      return Error(params, f, "expected a mapping of names to scalars");
    }
    for (const auto& kv : params) {
      if (!kv.second.IsScalar()) {
        return Error(kv.second, f + "." + kv.first.Scalar(),
                     "expected a scalar");
      }
      (*spec->mutable_params())[kv.first.Scalar()] = kv.second.Scalar();
    }
  }
  if (YAML::Node ladder = get("ladder", &f)) {
    RM_RETURN_IF_ERROR(ParseLadder(ladder, f, spec));
  }
  RM_RETURN_IF_ERROR(ParseVerifyAndBackend(get, spec));
  *spec->mutable_timing() = DefaultBenchTiming();
  if (YAML::Node timing = get("timing", &f)) {
    RM_ASSIGN_OR_RETURN(*spec->mutable_timing(),
                        ParseTiming(timing, f, spec->timing()));
  }
  return absl::OkStatus();
}

}  // namespace plan_internal
}  // namespace ringmaster
