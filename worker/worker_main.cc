// ringmaster-worker: one rank of a benchmark job, started by a launcher
// (mpirun, srun, an MPIJob) or, with --bootstrap, by anything at all.
//
//   ringmaster-worker run --coordinator HOST:PORT --job ID [--backend auto]
//   ringmaster-worker run --bootstrap --coordinator HOST:PORT --job ID
//       [--rank R --world-size N]   # no MPI: ranks meet through the
//                                   # coordinator and talk over TCP
//   ringmaster-worker probe        # prints what this machine has, as JSON
//   ringmaster-worker kinds        # the benchmark kinds it runs
//
// The run token comes from the RINGMASTER_TOKEN environment variable (not
// argv, which other users can read). Exit codes: 0 done, 3 fault-injected
// exit, 4 coordinator unreachable, 5 config mismatch, 6 failed case run.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iostream>

#include "CLI/CLI.hpp"
#include "backends/provider.h"
#include "core/build_info.h"
#include "core/placement.h"
#include "nlohmann/json.hpp"
#include "spdlog/spdlog.h"
#include "worker/bootstrap.h"
#include "worker/kinds/kind.h"
#include "worker/rank_session.h"

namespace ringmaster {
namespace {

// `probe`: what this machine has, as JSON; with `topology`, the GPUs and
// their links.
int Probe(bool topology) {
  if (topology) {
    std::cout << DescribeGpusAsJson() << std::endl;
    return 0;
  }
  nlohmann::json out;
  out["gpus"] = VisibleGpuCount();
  out["cuda_backend"] = HaveCudaBackend();
  if (HaveCudaBackend()) {
    const BackendInfo info = GpuLibraryInfo();
    out["nccl_version"] = info.nccl_version;
    out["cuda_runtime_version"] = info.cuda_runtime_version;
    out["driver_version"] = info.driver_version;
  }
  out["host"] = HostName();
  out["build"] = GitSha();
  out["kinds"] = KindNames();
  std::cout << out.dump() << std::endl;
  return 0;
}

// --local-ranks K: this process is a group (a Kubernetes pod) of K ranks,
// ranks INDEX*K ... INDEX*K+K-1, each in a forked child. Forwards SIGTERM
// and SIGINT; the first failing rank's exit code ends the group (the
// others are terminated).
pid_t g_children[4096];
int g_nchildren = 0;
void ForwardSignal(int sig) {
  for (int i = 0; i < g_nchildren; ++i)
    if (g_children[i] > 0) kill(g_children[i], sig);
}

int RunLocalRanks(RunArgs args, int argc, char** argv) {
  auto index =
      args.rank >= 0 ? absl::StatusOr<int>(args.rank) : RankFromEnvironment();
  if (!index.ok()) {
    spdlog::error(
        "--local-ranks needs the group index (--rank, "
        "RINGMASTER_RANK or JOB_COMPLETION_INDEX): {}",
        index.status().ToString());
    return 2;
  }
  const int k = args.local_ranks;
  if (k > static_cast<int>(sizeof g_children / sizeof g_children[0])) {
    spdlog::error("--local-ranks {}: at most 4096", k);
    return 2;
  }
  for (int i = 0; i < k; ++i) {
    pid_t pid = fork();
    if (pid < 0) {
      spdlog::error("fork: {}", std::strerror(errno));
      ForwardSignal(SIGTERM);
      return 1;
    }
    if (pid == 0) {  // no threads exist yet: safe to go on in the child
      args.rank = *index * k + i;
      args.local_ranks = 1;
      // This process's ranks share a node (its node leader is local 0).
      setenv("RINGMASTER_LOCAL_RANK", std::to_string(i).c_str(), 1);
      setenv("RINGMASTER_LOCAL_SIZE", std::to_string(k).c_str(), 1);
      std::_Exit(RunRank(args, argc, argv));
    }
    g_children[g_nchildren++] = pid;
  }
  signal(SIGTERM, ForwardSignal);
  signal(SIGINT, ForwardSignal);
  int first_failure = 0, left = k;
  while (left > 0) {
    int status = 0;
    pid_t pid = wait(&status);
    if (pid < 0) {
      if (errno == EINTR) continue;
      break;
    }
    --left;
    for (int i = 0; i < g_nchildren; ++i)
      if (g_children[i] == pid) g_children[i] = 0;
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (code != 0 && first_failure == 0) {
      first_failure = code;
      ForwardSignal(SIGTERM);
    }
  }
  return first_failure;
}

}  // namespace
}  // namespace ringmaster

int main(int argc, char** argv) {
  spdlog::set_pattern("[%H:%M:%S.%e] [worker] [%l] %v");
  CLI::App app{
      "ringmaster-worker: one rank of a Ringmaster job (started by a "
      "launcher)"};
  app.require_subcommand(1);
  ringmaster::RunArgs args;
  auto* run = app.add_subcommand(
      "run", "Register with the coordinator and run the job's cases");
  run->add_option("--coordinator", args.coordinator,
                  "Coordinator address host:port")
      ->required();
  run->add_option("--job", args.job_id, "Job id")->required();
  run->add_option("--backend", args.backend, "auto, host or cuda")
      ->check(CLI::IsMember({"auto", "host", "cuda"}));
  run->add_option("--attempt", args.attempt, "Attempt number");
  run->add_flag("--bootstrap", args.bootstrap,
                "Start without MPI: meet the other ranks through the "
                "coordinator and talk over TCP");
  run->add_option("--rank", args.rank,
                  "This rank (--bootstrap; default RINGMASTER_RANK or "
                  "JOB_COMPLETION_INDEX)")
      ->check(CLI::NonNegativeNumber);
  run->add_option("--world-size", args.world_size,
                  "Ranks in the job (--bootstrap; default "
                  "RINGMASTER_WORLD_SIZE)")
      ->check(CLI::PositiveNumber);
  run->add_option("--bind", args.bind,
                  "Address the rank's TCP listener binds (--bootstrap)")
      ->capture_default_str();
  run->add_option("--advertise", args.advertise,
                  "Address other ranks dial (--bootstrap; default: the "
                  "local address that routes to the coordinator)");
  run->add_option("--local-ranks", args.local_ranks,
                  "Start this many ranks here (--bootstrap): ranks "
                  "INDEX*N ... INDEX*N+N-1, INDEX from --rank or the "
                  "environment (a pod with N GPUs)")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  run->add_option("--bootstrap-timeout", args.bootstrap_timeout_s,
                  "Seconds to wait for every rank to start (--bootstrap)")
      ->capture_default_str();
  run->add_flag("--node-leader", args.node_leader,
                "Node leaders: local rank 0 of each node registers, meets, "
                "heartbeats and reports for the node's ranks over one "
                "connection (where the launcher gives local ranks)")
      ->envname("RINGMASTER_NODE_LEADER");
  run->add_option("--telemetry-ms", args.telemetry_ms,
                  "Sample this rank's GPU (NVML) or CPUs every N ms while "
                  "cases run; 0: off")
      ->envname("RINGMASTER_TELEMETRY_MS")
      ->check(CLI::Range(0, 60000))
      ->capture_default_str();
  run->allow_extras();  // MPI may append its own arguments
  auto* probe =
      app.add_subcommand("probe", "Print GPUs and library versions as JSON");
  bool probe_topology = false;
  probe->add_flag(
      "--topology", probe_topology,
      "Describe the GPUs and their links instead (ringmaster topo)");
  auto* kinds = app.add_subcommand(
      "kinds", "List the benchmark kinds this worker runs, one a line");
  CLI11_PARSE(app, argc, argv);
  if (probe->parsed()) return ringmaster::Probe(probe_topology);
  if (kinds->parsed()) {
    for (const std::string& name : ringmaster::KindNames())
      std::cout << name << "\n";
    return 0;
  }
  if (args.local_ranks > 1) {
    if (!args.bootstrap) {
      spdlog::error(
          "--local-ranks needs --bootstrap (MPI starts its own ranks)");
      return 2;
    }
    return ringmaster::RunLocalRanks(args, argc, argv);
  }
  return ringmaster::RunRank(args, argc, argv);
}
