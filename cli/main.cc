// ringmaster: the command-line interface.
//
//   ringmaster run [PLAN] [--np N] [--out DIR] ...   the main job
//   ringmaster validate PLAN                          check a plan, run nothing
//   ringmaster serve [--listen ADDR] [--data DIR] ...  the coordinator service
//   ringmaster submit|status|watch|results|cancel ...  its clients
//   ringmaster report RESULTS... [--html F]       tables, CSV, JSON Lines, HTML
//   ringmaster compare BASE NEW                      noise-aware verdicts
//   ringmaster verdict RESULTS... --rules F          pass/fail per
//   node/GPU/pair ringmaster topo | predict | launch-spec | version
//
// The options live in cli/cli_args.cc; each subcommand's work in its file.
#include <iostream>

#include "CLI/CLI.hpp"
#include "absl/synchronization/mutex.h"
#include "cli/cli_args.h"
#include "core/build_info.h"

namespace {

// The first option or argument of the parsed command given as an empty
// string ("" names no file, folder, program or value), or "".
std::string EmptyValue(const CLI::App& app) {
  for (const CLI::App* sub : app.get_subcommands()) {
    for (const CLI::Option* opt : sub->get_options()) {
      if (opt->get_type_size() == 0) continue;  // a flag
      for (const std::string& value : opt->results()) {
        if (value.empty()) return sub->get_name() + " " + opt->get_name();
      }
    }
    if (std::string inner = EmptyValue(*sub); !inner.empty()) return inner;
  }
  return "";
}

// Runs the parsed subcommand.
int Dispatch(ringmaster::CliOptions& o, const ringmaster::CliCommands& c,
             const std::vector<std::string>& command_line) {
  using namespace ringmaster;  // NOLINT: one dispatch table
  if (c.version->parsed()) {
    std::cout << "ringmaster " << RingmasterVersion() << " (" << GitSha()
              << ")\n";
    return 0;
  }
  if (c.validate->parsed())
    return ValidateCommand(o.validate_path, o.validate_worker,
                           o.validate_topology, o.validate_np);
  if (c.report->parsed()) return ReportCommand(o.report);
  if (c.compare->parsed()) return CompareCommand(o.compare);
  if (c.verdict->parsed()) return VerdictCommand(o.verdict);
  if (c.topo->parsed()) return TopoCommand(o.topo);
  if (c.predict->parsed()) {
    if (o.predict.plan.empty() && o.predict.calibrate.empty()) {
      std::cerr << "ringmaster: error: predict needs a plan, --calibrate "
                   "results, or both\n";
      return kExitUsage;
    }
    return PredictCommand(o.predict);
  }
  if (c.serve->parsed()) return ServeCommand(o.serve);
  if (c.submit->parsed()) return SubmitCommand(o.client, o.submit);
  if (c.status->parsed()) return StatusCommand(o.client, o.job, o.list_limit);
  if (c.watch->parsed()) return WatchCommand(o.client, o.job);
  if (c.results->parsed())
    return ResultsCommand(o.client, o.job, o.results_format, o.results_status);
  if (c.cancel->parsed()) return CancelCommand(o.client, o.job);
  if (c.launch_spec->parsed()) return LaunchSpecCommand(o.launch_spec);
  return RunCommand(o.run, command_line);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> command_line(argv, argv + argc);
  CLI::App app{
      "Ringmaster: what does this GPU cluster really deliver, and why?\n"
      "Runs benchmark plans through mpirun and stores every result: at once "
      "(run), or through a long-running coordinator (serve, submit, watch).",
      // The name usage lines show, whatever path started the binary.
      "ringmaster"};
  app.set_version_flag("--version", std::string("ringmaster ") +
                                        ringmaster::RingmasterVersion() + " (" +
                                        ringmaster::GitSha() + ")");
  ringmaster::CliOptions options;
  ringmaster::CliCommands commands;
  ringmaster::AddCommands(app, &options, &commands);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? 0 : ringmaster::kExitUsage;
  }
  if (std::string empty = EmptyValue(app); !empty.empty()) {
    std::cerr << "ringmaster: error: " << empty
              << ": an empty value names nothing (give a value or leave the "
                 "option out)\n";
    return ringmaster::kExitUsage;
  }
  // Debian's Abseil runs its lock-order (deadlock) detector in every
  // build: a graph update on each lock taken, a few percent of a loaded
  // coordinator's CPU. Lock discipline is checked at build time instead
  // (clang's thread-safety analysis, -Werror=thread-safety).
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  return Dispatch(options, commands, command_line);
}
