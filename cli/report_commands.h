// `ringmaster report` (stored results as text, CSV, JSON Lines or one
// self-contained HTML file with plots) and `ringmaster compare` (noise-aware
// verdicts between two sets of results).
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
};
// Exit 0 when nothing got worse or failed, 1 when something did, 2 on bad
// input.
int CompareCommand(const CompareCommandOptions& options);

}  // namespace ringmaster

#endif  // RINGMASTER_CLI_REPORT_COMMANDS_H_
