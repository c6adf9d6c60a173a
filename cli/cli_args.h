// The `ringmaster` command line: every subcommand's options, parsed into
// plain structs by CLI11. Kept apart from main() so that tests parse
// argument lists without running anything.
#ifndef RINGMASTER_CLI_CLI_ARGS_H_
#define RINGMASTER_CLI_CLI_ARGS_H_

#include <string>

#include "CLI/CLI.hpp"
#include "cli/model_commands.h"
#include "cli/report_commands.h"
#include "cli/run_command.h"
#include "cli/service_commands.h"

namespace ringmaster {

// What the command line says, one struct per subcommand (their defaults are
// the documented ones).
struct CliOptions {
  RunOptions run;
  std::string validate_path, validate_worker, validate_topology;
  int validate_np = 0;  // 0: the plan's ranks, else 2
  TopoOptions topo;
  PredictOptions predict;
  ReportOptions report;
  CompareCommandOptions compare;
  VerdictCommandOptions verdict;
  ServeOptions serve;
  ClientOptions client;
  SubmitOptions submit;
  std::string job;  // status, watch, results, cancel
  int list_limit = 20;
  std::string results_format = "text";
  std::string results_status;
  LaunchSpecOptions launch_spec;
};

// The subcommands, to ask which one was parsed.
struct CliCommands {
  CLI::App* run = nullptr;
  CLI::App* validate = nullptr;
  CLI::App* version = nullptr;
  CLI::App* topo = nullptr;
  CLI::App* predict = nullptr;
  CLI::App* report = nullptr;
  CLI::App* compare = nullptr;
  CLI::App* verdict = nullptr;
  CLI::App* serve = nullptr;
  CLI::App* submit = nullptr;
  CLI::App* status = nullptr;
  CLI::App* watch = nullptr;
  CLI::App* results = nullptr;
  CLI::App* cancel = nullptr;
  CLI::App* launch_spec = nullptr;
};

// Adds every subcommand and option to `app`, bound to `*o`; `*c` receives
// the subcommands. `o` and `c` must outlive `app`'s parsing.
void AddCommands(CLI::App& app, CliOptions* o, CliCommands* c);

}  // namespace ringmaster

#endif  // RINGMASTER_CLI_CLI_ARGS_H_
