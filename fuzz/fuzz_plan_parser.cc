// S3 fuzz target: the plan parser and expander, as `ringmaster run` and the
// coordinator's SubmitPlan use them on untrusted YAML. Any input must give
// a plan or a field-precise error; never a crash, a leak or a hang.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/plan.h"
#include "core/sweep.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto plan = ringmaster::ParsePlanYaml(text, "fuzz.yaml");
  if (!plan.ok()) {
    // Errors name the source: a message without it is a bug.
    if (plan.status().message().find("fuzz.yaml") == std::string_view::npos)
      __builtin_trap();
    return 0;
  }
  // The same bounds the coordinator applies (cases, ranks).
  (void)ringmaster::ExpandPlan(*plan, 100000, 4);
  return 0;
}
