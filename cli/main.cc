// ringmaster: the command-line interface.
//
//   ringmaster run [PLAN] [--np N] [--out DIR] ...   the main job
//   ringmaster validate PLAN                          check a plan, run nothing
//   ringmaster version
#include <iostream>

#include "CLI/CLI.hpp"
#include "cli/run_command.h"
#include "core/build_info.h"

int main(int argc, char** argv) {
  std::vector<std::string> command_line(argv, argv + argc);
  CLI::App app{
      "Ringmaster: what does this GPU cluster really deliver, and why?\n"
      "Runs benchmark plans (NCCL/MPI collectives today) through mpirun and "
      "stores every "
      "result."};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("ringmaster ") +
                                        ringmaster::RingmasterVersion() + " (" +
                                        ringmaster::GitSha() + ")");

  ringmaster::RunOptions run_opts;
  auto* run = app.add_subcommand(
      "run",
      "Run a plan: embedded coordinator + mpirun launch. Without PLAN runs "
      "plans/quickstart.yaml on all visible GPUs, or on 2 host ranks without "
      "GPUs.");
  run->add_option("plan", run_opts.plan_path, "Plan file (YAML)");
  run->add_option("--np", run_opts.np,
                  "Number of ranks (default: plan's, else #GPUs, else 2)")
      ->check(CLI::Range(1, 65536));
  run->add_option("--out", run_opts.out_dir,
                  "Results folder: <out>/ringmaster.db and "
                  "<out>/<job-id>/results.{jsonl,csv}")
      ->capture_default_str();
  run->add_option("--backend", run_opts.backend,
                  "auto, host (MPI on CPUs) or cuda (NCCL)")
      ->check(CLI::IsMember({"auto", "host", "cuda"}))
      ->capture_default_str();
  run->add_option("--hostfile", run_opts.hostfile,
                  "mpirun hostfile for multi-node runs")
      ->check(CLI::ExistingFile);
  run->add_option("--mpirun", run_opts.mpirun, "mpirun executable")
      ->capture_default_str();
  run->add_option("--mpirun-arg", run_opts.mpirun_args,
                  "Extra argument passed to mpirun (repeatable)");
  run->add_option("--timeout", run_opts.timeout_s,
                  "Job deadline in seconds (default: derived from the plan)")
      ->check(CLI::PositiveNumber);
  run->add_option(
         "--heartbeat-timeout", run_opts.heartbeat_timeout_s,
         "Seconds without a heartbeat before a rank counts as unreachable")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  run->add_flag("--quiet", run_opts.quiet, "Do not echo the launcher's output");
  run->add_flag("--nccl-algorithms", run_opts.nccl_algorithms,
                "Label every result with NCCL's algorithm, protocol and "
                "channels, read from "
                "NCCL's tuning log in a one-operation probe launch before the "
                "measured one");

  std::string validate_path;
  auto* validate = app.add_subcommand(
      "validate", "Check a plan and print its expansion; runs nothing");
  validate->add_option("plan", validate_path, "Plan file (YAML)")->required();

  auto* version = app.add_subcommand("version", "Print the version and build");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? 0 : ringmaster::kExitUsage;
  }
  if (version->parsed()) {
    std::cout << "ringmaster " << ringmaster::RingmasterVersion() << " ("
              << ringmaster::GitSha() << ")\n";
    return 0;
  }
  if (validate->parsed()) return ringmaster::ValidateCommand(validate_path);
  return ringmaster::RunCommand(run_opts, command_line);
}
