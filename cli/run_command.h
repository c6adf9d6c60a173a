// `ringmaster run`: the main job. Validates a plan, starts an embedded
// coordinator on loopback, launches the workers through mpirun, shows
// results as they arrive, stores them, and ends with a verdict.
#ifndef RINGMASTER_CLI_RUN_COMMAND_H_
#define RINGMASTER_CLI_RUN_COMMAND_H_

#include <string>
#include <vector>

namespace ringmaster {

struct RunOptions {
  std::string plan_path;  // empty: plans/quickstart.yaml
  int np = 0;             // 0: plan's ranks, else GPUs, else 2
  std::string out_dir = "ringmaster-results";
  std::string backend = "auto";  // auto, host, cuda
  std::string hostfile;
  std::string mpirun = "mpirun";
  std::vector<std::string> mpirun_args;
  double timeout_s = 0;  // 0: derived from the plan
  double registration_timeout_s = 60;
  double heartbeat_timeout_s = 15;
  double op_timeout_s = 60;  // no rank made progress for this long: rank_hung
  bool quiet = false;        // no launcher output echoed
  // Label results with NCCL's algorithm/protocol (a tuning probe launch).
  bool nccl_algorithms = false;
  // Jobs per variant, interleaved: each round runs every variant once, so
  // two variants run A B A B ... (an A/B benchmark for compare).
  int rounds = 1;
  // The worker binary (empty: ringmaster-worker beside this one); one built
  // with benchmark kinds of its own runs them too.
  std::string worker;
  // More local host ranks than cores (also OMPI_MCA_rmaps_base_oversubscribe
  // in the environment); passed to mpirun.
  bool oversubscribe = false;
};

// Exit codes of the `ringmaster` binary.
inline constexpr int kExitOk = 0;
inline constexpr int kExitJobFailed = 1;
inline constexpr int kExitUsage = 2;  // bad plan or arguments; nothing written
inline constexpr int kExitInternal = 3;

// Runs the job; returns the process exit code. `command_line` is recorded
// in every result's provenance.
int RunCommand(const RunOptions& options,
               const std::vector<std::string>& command_line);

// Validates a plan (with the plug-in kinds of `worker`, empty: the default
// worker) and prints its expansion summary; exit code as above.
// Cases are counted as a launch of `np` ranks runs them (0: the plan's
// ranks, else 2).
int ValidateCommand(const std::string& plan_path, const std::string& worker,
                    const std::string& topology_path = "", int np = 0);

// Prints "ringmaster: error: MESSAGE" on stderr.
void Error(const std::string& message);

// ringmaster-worker next to this binary.
std::string DefaultWorkerPath();

// The shipped plan `name` (e.g. "quickstart", "server-card"): its path in
// $RINGMASTER_PLANS_DIR, ./plans, or the plans folder next to the installed
// or built binary; "" when none has it.
std::string FindShippedPlan(const std::string& name);

// The quickstart plan's path (FindShippedPlan, else plans/quickstart.yaml).
std::string FindDefaultPlan();

}  // namespace ringmaster

#endif  // RINGMASTER_CLI_RUN_COMMAND_H_
