// References and rules (`ringmaster verdict`): expected values with
// tolerances, per system or per fleet, turned into a pass/fail verdict per
// node, GPU (rank) and GPU pair, each with its evidence.
//
// A rules file (YAML):
//
//   name: h200 acceptance
//   failures: true              # a failed result fails what it names
//   rules:
//     - name: nvlink
//       match: {bench: p2p, method: ce}     # which results (all keys optional)
//       min_pct_of_ceiling: 80  # >= 80% of the result's speed of light
//     - name: gemm-floor
//       match: {bench: gemm, dtype: bfloat16}
//       min: 600                # in the metric's unit (see below)
//     - name: gemm-fleet
//       match: {bench: gemm}
//       fleet_within: 10%       # no more than 10% worse than the median of
//                               # the same measurement over the fleet
//     - name: same-as-last-week
//       baseline_within: 5%     # against --baseline, same measurement and
//                               # subject (repeated runs on either side:
//                               # their median)
//
// Metrics: collectives busbw GB/s, copies and GEMM-free node benchmarks GB/s,
// latency ns (lower is better), GEMM TFLOP/s, training step ms (lower is
// better). Subjects: a pair result is about its GPU pair, a one-rank result
// (or one rank of an all-ranks copy) about that GPU, collectives and
// training about the group of ranks; a node's verdict gathers every subject
// on it.
#ifndef RINGMASTER_CORE_VERDICT_H_
#define RINGMASTER_CORE_VERDICT_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ringmaster/v1/result.pb.h"

namespace ringmaster {

struct RuleMatch {
  std::string spec;  // the plan case's name ("" = any)
  std::optional<v1::Bench> bench;
  std::optional<v1::Collective> collective;
  std::optional<v1::CopyMethod> method;
  std::optional<v1::DataType> dtype;
  std::optional<v1::TransferPattern> pattern;
  int64_t min_size = 0, max_size = 0;  // bytes (0 = no bound)
  std::optional<int> ranks;
  std::string backend;  // "host" or "cuda" ("" = any): where it ran
  bool Matches(const v1::Result& r) const;
};

struct Rule {
  std::string name;
  std::string where;  // "file:line" of the rule, for messages
  RuleMatch match;
  std::optional<double> min, max;            // absolute, metric units
  std::optional<double> min_pct_of_ceiling;  // percent
  std::optional<double> fleet_within;        // fraction worse than median
  std::optional<double> baseline_within;     // fraction worse than baseline
  int fleet_min_members = 3;
};

struct Rules {
  std::string name;
  bool failures = true;
  std::vector<Rule> rules;
  bool NeedsBaseline() const;
};

// Errors name file:line, the field and what was expected.
absl::StatusOr<Rules> ParseRulesYaml(const std::string& text,
                                     const std::string& file);
absl::StatusOr<Rules> LoadRules(const std::string& path);

enum class SubjectKind { kGpu, kPair, kGroup };

struct Finding {
  SubjectKind kind = SubjectKind::kGroup;
  std::string subject;             // "rank 5", "pair 0->5", "ranks 0-7"
  std::vector<std::string> hosts;  // the hosts the subject is on
  std::vector<int> ranks;          // the GPU's rank, the pair's two ranks
  std::string rule;                // rule name, or "failures"
  std::string measurement;         // what was measured (readable)
  std::string metric;              // "GB/s", "TFLOP/s", "ns", "ms", ""
  double value = 0;
  std::string expected;  // e.g. ">= 631 (fleet median 701 - 10%)"
  bool pass = true;
};

// A rule that matches no result, or whose fleet has too few members, is
// not applicable to these results: noted, neither a pass nor a failure.
// With `failures: true` every result that ran is checked for having
// succeeded (`results_checked`), so a verdict over results always checks
// something; a verdict that checked nothing at all is not a pass.
struct VerdictReport {
  std::string rules_name;
  int results = 0, skipped = 0;
  int results_checked = 0;  // results that ran, under `failures: true`
  std::vector<Finding> findings;
  std::vector<std::string> notes;           // rules not applicable, etc.
  std::vector<std::string> not_applicable;  // names of those rules
  int Failed() const;
  bool Checked() const { return !findings.empty() || results_checked > 0; }
  bool Pass() const { return Failed() == 0 && Checked(); }
};

VerdictReport Evaluate(const Rules& rules,
                       const std::vector<v1::Result>& results,
                       const std::vector<v1::Result>& baseline);

// Ranks that the failed pair checks point at: a rank in more than half of
// its checked pairs' failures and in the most failed pairs of any rank
// (one bad GPU or link end fails every pair it is in).
struct Suspect {
  int rank = -1;
  std::string host;
  int failed_pairs = 0, pairs = 0;
};
std::vector<Suspect> PairSuspects(const VerdictReport& report);

// Per node, GPU, pair and group: checks, failures and the worst failure's
// evidence; the suspects; every failed check; then the verdict line.
std::string RenderVerdict(const VerdictReport& report);

}  // namespace ringmaster

#endif  // RINGMASTER_CORE_VERDICT_H_
