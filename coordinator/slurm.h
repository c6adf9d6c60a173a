// The Slurm launcher: a job attempt becomes one `sbatch` job whose script
// runs `srun --mpi=pmix ringmaster-worker ...`; it is followed with
// squeue (then scontrol/sacct for the final state) and ended with scancel.
// The worker token reaches the ranks through sbatch's environment
// (--export=ALL), never through the script, which Slurm keeps on disk.
#ifndef RINGMASTER_COORDINATOR_SLURM_H_
#define RINGMASTER_COORDINATOR_SLURM_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace ringmaster {

struct SlurmSpec {
  std::string job_name;  // ringmaster-<job id>
  int nranks = 1;
  int ranks_per_node = 0;      // 0: every rank on one node
  int gpus_per_node = 0;       // --gpus-per-node (0: none requested)
  std::string partition;       // empty: the cluster's default
  double time_limit_s = 3600;  // --time, rounded up to whole minutes
  std::string output;          // --output path (%j = Slurm job id)
  std::string worker;          // ringmaster-worker path on the nodes
  std::string coordinator;     // address the ranks dial
  std::string job_id;          // Ringmaster job id
  std::string backend = "auto";
  std::vector<std::string> extra_sbatch;  // more #SBATCH lines' options
};

// The sbatch script for `spec`. Every value is checked: one that would
// break the script (newline, quote, shell metacharacter in a name or
// path) is an InvalidArgument, never quoted into a shell.
absl::StatusOr<std::string> BuildSbatchScript(const SlurmSpec& spec);

// "12345" or "12345;cluster" (sbatch --parsable) -> 12345.
std::optional<long> ParseSbatchJobId(const std::string& output);

// Final state from `scontrol show job -o` output: JobState=... ExitCode=a:b.
struct SlurmEnd {
  std::string state;  // COMPLETED, FAILED, CANCELLED, TIMEOUT, NODE_FAIL, ...
  int exit_code = 0;
  int signal = 0;
};
std::optional<SlurmEnd> ParseScontrolJob(const std::string& output);

}  // namespace ringmaster

#endif  // RINGMASTER_COORDINATOR_SLURM_H_
