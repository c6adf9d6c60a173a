// `ringmaster report` (stored results as text, CSV, JSON Lines or one
// self-contained HTML file with plots), `ringmaster compare` (noise-aware
// verdicts between two sets of results) and `ringmaster verdict` (rules and
// references: pass/fail per node, GPU and pair).
#ifndef RINGMASTER_CLI_REPORT_COMMANDS_H_
#define RINGMASTER_CLI_REPORT_COMMANDS_H_

#include <string>
#include <vector>

namespace ringmaster {

struct ReportOptions {
  std::vector<std::string> inputs;  // JSON Lines files or `--out` folders
  std::string html;                 // write the HTML report here
  std::string format;  // text, csv or jsonl ("" = text unless --html)
  std::vector<std::string> topologies;  // predicted overlays on these systems
  std::string title = "Ringmaster report";
  std::vector<std::string> command_line;
};
int ReportCommand(const ReportOptions& options);

struct CompareCommandOptions {
  std::string base, next;  // files or folders (repeated runs pool samples)
  double alpha = 0.01;
  double threshold = 0.05;
  std::string format = "text";  // text or json
  bool all = false;             // list "same" metrics too
  // Only results of these variants (empty: all); the variant then no
  // longer tells measurements apart, so A's and B's match.
  std::string base_variant, new_variant;
};
// Exit 0 when nothing got worse or failed (or, with fewer than 3 base runs,
// when slower figures cannot be told from noise: "INCONCLUSIVE"), 1 when a
// result failed or got worse beyond the noise, 2 on bad input,
// kExitNothingCompared when no measurement of one side matches the other.
inline constexpr int kExitNothingCompared = 9;
int CompareCommand(const CompareCommandOptions& options);

struct VerdictCommandOptions {
  std::vector<std::string> inputs;    // results: files or folders
  std::string rules;                  // rules file (YAML, core/verdict.h)
  std::vector<std::string> baseline;  // results for baseline_within rules
  std::string format = "text";        // text or json
};
// Exit 0 when every check passed, 1 when one failed or a rule matched
// nothing, 2 on bad input.
int VerdictCommand(const VerdictCommandOptions& options);

}  // namespace ringmaster

#endif  // RINGMASTER_CLI_REPORT_COMMANDS_H_
