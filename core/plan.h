// Loading and validating benchmark plans written in YAML.
//
// A plan names cases (collective, sizes, dtypes, ops, placement, timing);
// see docs/plans.md for every key. Every error is one line of the form
//   <file>:<line>: <field>: <what was expected>
// returned as InvalidArgument (NotFound when the file cannot be read), so a
// caller can print it and exit 2 without having written anything.
#ifndef RINGMASTER_CORE_PLAN_H_
#define RINGMASTER_CORE_PLAN_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "ringmaster/v1/plan.pb.h"

namespace ringmaster {

// Limits that keep a plan from asking for absurd work. Each field's value
// is its default.
struct PlanLimits {
  int max_case_specs = 256;            // entries under `cases:`
  int64_t max_size_bytes = 1LL << 40;  // 1 TiB per buffer
  int max_list_entries = 1024;         // entries in any list
  int max_samples = 100000;
  int64_t max_plan_bytes = 1 << 20;  // plan file size
  int max_nesting = 32;              // flow brackets / indentation levels
  // Benchmark kinds a worker registers besides the built-in ones (what
  // `ringmaster-worker kinds` lists): `bench:` accepts these names too, as
  // plug-in kinds (Bench BENCH_PLUGIN, CaseSpec.kind) whose parameters are
  // a mapping of scalars under `params:`.
  std::vector<std::string> plugin_kinds;
};

// Timing used where a plan says nothing (also documented in docs/plans.md).
v1::Timing DefaultTiming();
// Timing of node benchmarks (bench: p2p, ...) where a plan says nothing.
v1::Timing DefaultBenchTiming();

// Parses and validates YAML text. `source_name` is used in error messages
// and recorded in the plan. Sets source_sha256 to the SHA-256 of `yaml`.
absl::StatusOr<v1::Plan> ParsePlanYaml(std::string_view yaml,
                                       const std::string& source_name,
                                       const PlanLimits& limits = {});

// Reads `path` ("-": standard input) and parses it with ParsePlanYaml.
// NotFound when the file is missing or unreadable; InvalidArgument for an
// empty path or a file over the size limit (checked before reading).
absl::StatusOr<v1::Plan> LoadPlanFile(const std::string& path,
                                      const PlanLimits& limits = {});

// Reads a whole text file ("-": standard input) of at most `max_bytes`,
// checking the size before reading (InvalidArgument when larger; NotFound
// when it cannot be read). `what` names it in messages.
absl::StatusOr<std::string> ReadBoundedText(const std::string& path,
                                            int64_t max_bytes,
                                            const std::string& what);

// Lowercase hex SHA-256 of `data`.
std::string Sha256Hex(std::string_view data);

}  // namespace ringmaster

#endif  // RINGMASTER_CORE_PLAN_H_
