#include "coordinator/slurm.h"

#include <cmath>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "coordinator/launcher.h"

namespace ringmaster {
namespace {

// Characters a value may hold to be written into the script unquoted:
// names, paths, host:port addresses. (Hand-written on purpose: the script
// must never depend on shell quoting rules.)
absl::Status CheckWord(const std::string& what, const std::string& value,
                       bool allow_empty = false) {
  if (value.empty() && !allow_empty)
    return absl::InvalidArgumentError(what + ": empty");
  for (char c : value) {
    const bool ok = std::isalnum(static_cast<unsigned char>(c)) || c == '/' ||
                    c == '.' || c == '_' || c == '-' || c == ':' || c == '%' ||
                    c == '=' || c == ',' || c == '+';
    if (!ok) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: character '%s' is not allowed in a Slurm script value (%s)",
          what, std::string(1, c), value));
    }
  }
  return absl::OkStatus();
}

std::string SlurmTime(double seconds) {
  long minutes = static_cast<long>(std::ceil(std::max(60.0, seconds) / 60.0));
  return absl::StrFormat("%d:%02d:00", minutes / 60, minutes % 60);
}

}  // namespace

absl::StatusOr<std::string> BuildSbatchScript(const SlurmSpec& s) {
  for (const auto& [what, value] :
       std::vector<std::pair<std::string, std::string>>{
           {"job_name", s.job_name},
           {"output", s.output},
           {"worker", s.worker},
           {"backend", s.backend}}) {
    absl::Status st = CheckWord(what, value);
    if (!st.ok()) return st;
  }
  absl::Status st = CheckWord("partition", s.partition, true);
  if (st.ok()) st = CheckWord("coordinator", s.coordinator, true);
  if (st.ok()) st = CheckWord("job_id", s.job_id, true);
  if (!st.ok()) return st;
  for (const auto& extra : s.extra_sbatch) {
    st = CheckWord("sbatch option", extra);
    if (!st.ok()) return st;
  }
  if (s.nranks < 1) return absl::InvalidArgumentError("nranks: at least 1");
  const int per_node = s.ranks_per_node > 0 ? s.ranks_per_node : s.nranks;
  if (s.nranks % per_node != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%d ranks do not fill nodes of %d ranks each", s.nranks, per_node));
  }
  const int nodes = s.nranks / per_node;
  std::string out = "#!/bin/bash\n";
  out += absl::StrFormat(
      "# Ringmaster job %s: %d rank(s), %d per node. Generated; the worker\n"
      "# token comes from the environment sbatch exports.\n",
      s.job_id.empty() ? "(from $RINGMASTER_JOB)" : s.job_id, s.nranks,
      per_node);
  out += absl::StrFormat("#SBATCH --job-name=%s\n", s.job_name);
  out += absl::StrFormat("#SBATCH --nodes=%d\n", nodes);
  out += absl::StrFormat("#SBATCH --ntasks-per-node=%d\n", per_node);
  if (s.gpus_per_node > 0)
    out += absl::StrFormat("#SBATCH --gpus-per-node=%d\n", s.gpus_per_node);
  if (!s.partition.empty())
    out += absl::StrFormat("#SBATCH --partition=%s\n", s.partition);
  out += absl::StrFormat("#SBATCH --time=%s\n", SlurmTime(s.time_limit_s));
  out += absl::StrFormat("#SBATCH --output=%s\n", s.output);
  out += "#SBATCH --export=ALL\n";
  for (const auto& extra : s.extra_sbatch)
    out += absl::StrFormat("#SBATCH %s\n", extra);
  out += "set -eu\n";
  // Without a job id or coordinator (a script written for submitting by
  // hand) they come from the environment sbatch exports, with the token.
  const std::string coordinator =
      s.coordinator.empty()
          ? "\"${RINGMASTER_COORDINATOR:?export RINGMASTER_COORDINATOR}\""
          : s.coordinator;
  const std::string job = s.job_id.empty()
                              ? "\"${RINGMASTER_JOB:?export RINGMASTER_JOB}\""
                              : s.job_id;
  out +=
      ": \"${RINGMASTER_TOKEN:?export RINGMASTER_TOKEN, the worker token "
      "of the job}\"\n";
  out += absl::StrFormat(
      "exec srun --mpi=pmix --kill-on-bad-exit=1 %s run --coordinator %s "
      "--job %s --backend %s\n",
      s.worker, coordinator, job, s.backend);
  return out;
}

std::optional<long> ParseSbatchJobId(const std::string& output) {
  std::string first = output.substr(0, output.find_first_of(";\n"));
  long id = 0;
  if (!absl::SimpleAtoi(first, &id) || id <= 0) return std::nullopt;
  return id;
}

std::optional<SlurmEnd> ParseScontrolJob(const std::string& output) {
  SlurmEnd end;
  bool found = false;
  for (absl::string_view field :
       absl::StrSplit(output, absl::ByAnyChar(" \n"), absl::SkipEmpty())) {
    if (absl::ConsumePrefix(&field, "JobState=")) {
      end.state = std::string(field);
      found = true;
    } else if (absl::ConsumePrefix(&field, "ExitCode=")) {
      std::vector<std::string> parts = absl::StrSplit(field, ':');
      if (parts.size() == 2) {
        (void)absl::SimpleAtoi(parts[0], &end.exit_code);
        (void)absl::SimpleAtoi(parts[1], &end.signal);
      }
    }
  }
  if (!found) return std::nullopt;
  return end;
}

}  // namespace ringmaster
