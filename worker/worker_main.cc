// ringmaster-worker: one rank of a benchmark job, started by a launcher
// (mpirun, srun, an MPIJob) or, with --bootstrap, by anything at all.
//
//   ringmaster-worker run --coordinator HOST:PORT --job ID [--backend auto]
//   ringmaster-worker run --bootstrap --coordinator HOST:PORT --job ID
//       [--rank R --world-size N]   # no MPI: ranks meet through the
//                                   # coordinator and talk over TCP
//   ringmaster-worker probe        # prints what this machine has, as JSON
//
// The run token comes from the RINGMASTER_TOKEN environment variable (not
// argv, which other users can read). Exit codes: 0 done, 3 fault-injected
// exit, 4 coordinator unreachable, 5 config mismatch, 6 failed case run.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <thread>

#include "CLI/CLI.hpp"
#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "backends/host/host_backend.h"
#include "backends/host/host_comm.h"
#include "backends/host/host_node_bench.h"
#include "backends/host/host_trainer.h"
#include "backends/host/mpi_comm.h"
#include "core/build_info.h"
#include "core/detected_topology.h"
#include "core/faults.h"
#include "core/fingerprint.h"
#include "core/names.h"
#include "core/placement.h"
#include "core/progress.h"
#include "core/telemetry.h"
#include "nlohmann/json.hpp"
#include "spdlog/spdlog.h"
#include "worker/bench_runner.h"
#include "worker/bootstrap.h"
#include "worker/case_runner.h"
#include "worker/coordinator_client.h"
#include "worker/train_runner.h"
#ifdef RINGMASTER_HAVE_CUDA
#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_node_bench.h"
#include "backends/cuda/cuda_topology.h"
#include "backends/cuda/cuda_trainer.h"
#include "backends/cuda/nvml.h"
#endif

extern char** environ;

namespace ringmaster {
namespace {

constexpr int kExitCoordinator = 4;
constexpr int kExitMismatch = 5;
constexpr int kExitFailed = 6;

int GpuCount() {
#ifdef RINGMASTER_HAVE_CUDA
  return CudaDeviceCount();
#else
  return 0;
#endif
}

int Probe(bool topology) {
  if (topology) {
#ifdef RINGMASTER_HAVE_CUDA
    std::cout << DescribeGpusJson() << std::endl;
#else
    std::cout << R"({"devices": [], "pairs": [], "note": "this worker was )"
                 R"(built without the CUDA backend"})"
              << std::endl;
#endif
    return 0;
  }
  nlohmann::json out;
  out["gpus"] = GpuCount();
#ifdef RINGMASTER_HAVE_CUDA
  BackendInfo info = CudaLibraryInfo();
  out["cuda_backend"] = true;
  out["nccl_version"] = info.nccl_version;
  out["cuda_runtime_version"] = info.cuda_runtime_version;
  out["driver_version"] = info.driver_version;
#else
  out["cuda_backend"] = false;
#endif
  out["host"] = HostName();
  out["build"] = GitSha();
  std::cout << out.dump() << std::endl;
  return 0;
}

// Sends heartbeats with the rank's progress until stopped; raises
// `cancelled` when the coordinator says the job is over.
class HeartbeatThread {
 public:
  HeartbeatThread(CoordinatorClient* client, std::string job_id, int rank,
                  int attempt, absl::Duration interval)
      : client_(client),
        job_id_(std::move(job_id)),
        rank_(rank),
        attempt_(attempt),
        interval_(interval) {
    thread_ = std::thread([this] { Loop(); });
  }
  ~HeartbeatThread() {
    stop_.Notify();
    thread_.join();
  }
  void SetProgress(int64_t seq) { progress_.store(seq); }
  void SetEntered(int64_t seq) { entered_.store(seq); }
  bool cancelled() const { return cancelled_.load(); }

 private:
  void Loop() {
    while (!stop_.WaitForNotificationWithTimeout(interval_)) {
      v1::HeartbeatRequest req;
      req.set_job_id(job_id_);
      req.set_rank(rank_);
      req.set_attempt(attempt_);
      req.set_progress_seq(progress_.load());
      req.set_entered_seq(entered_.load());
      req.set_ops(OpsCounter().load(std::memory_order_relaxed));
      auto resp = client_->Heartbeat(req);
      if (resp.ok() && resp->cancel()) cancelled_.store(true);
    }
  }
  CoordinatorClient* client_;
  std::string job_id_;
  int rank_;
  int attempt_;
  absl::Duration interval_;
  std::atomic<int64_t> progress_{-1};
  std::atomic<int64_t> entered_{-1};
  std::atomic<bool> cancelled_{false};
  absl::Notification stop_;
  std::thread thread_;
};

char* volatile g_hog_block = nullptr;  // the hog fault's memory

// Applies crash/exit/hang/hog faults scheduled for case `seq` on `rank`.
void MaybeInjectFault(const std::vector<Fault>& faults, int rank, int64_t seq) {
  if (FindFault(faults, Fault::Kind::kCrash, rank, seq)) {
    spdlog::warn("rank {}: fault injection: SIGKILL at case {}", rank, seq);
    raise(SIGKILL);
  }
  if (FindFault(faults, Fault::Kind::kExit, rank, seq)) {
    spdlog::warn("rank {}: fault injection: exit(3) at case {}", rank, seq);
    std::_Exit(3);
  }
  if (FindFault(faults, Fault::Kind::kHang, rank, seq)) {
    spdlog::warn("rank {}: fault injection: hanging at case {}", rank, seq);
    while (true) pause();
  }
  if (auto hog = FindFault(faults, Fault::Kind::kHog, rank, seq)) {
    spdlog::warn("rank {}: fault injection: allocating {} bytes at case {}",
                 rank, hog->bytes, seq);
    // Touched page by page so the memory is really used; it is never
    // freed (a leak is what a runaway rank looks like). Past a worker
    // memory rlimit the allocation throws and the rank dies.
    auto* block = new char[static_cast<size_t>(hog->bytes)];
    for (int64_t i = 0; i < hog->bytes; i += 4096) block[i] = 1;
    g_hog_block = block;  // keeps the block (and its writes) alive
    spdlog::warn("rank {}: fault injection: holding {} bytes", rank,
                 hog->bytes);
  }
}

struct RunArgs {
  std::string coordinator;
  std::string job_id;
  std::string backend = "auto";
  int attempt = 1;
  // Coordinator bootstrap (no MPI).
  bool bootstrap = false;
  int rank = -1;        // -1: RINGMASTER_RANK or JOB_COMPLETION_INDEX
  int world_size = -1;  // -1: RINGMASTER_WORLD_SIZE
  std::string bind = "0.0.0.0";
  std::string advertise;  // empty: the address that routes to the coordinator
  int bootstrap_timeout_s = 300;
  int local_ranks = 1;  // ranks this process starts (one per GPU of a pod)
  // Telemetry sampling period (0: off; RINGMASTER_TELEMETRY_MS overrides).
  int telemetry_ms = 100;
};

int Run(const RunArgs& args, int argc, char** argv) {
  // The world communicator: MPI's, or TCP after the coordinator bootstrap
  // below. Until it exists, failures end this process alone.
  std::unique_ptr<HostComm> world;
  int rank = 0, nranks = 1, local_rank = 0;
  if (!args.bootstrap) {
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    world = std::make_unique<MpiComm>(MPI_COMM_WORLD);
    rank = world->rank();
    nranks = world->size();
    MPI_Comm node_comm;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank,
                        MPI_INFO_NULL, &node_comm);
    MPI_Comm_rank(node_comm, &local_rank);
    MPI_Comm_free(&node_comm);
  } else {
    auto r =
        args.rank >= 0 ? absl::StatusOr<int>(args.rank) : RankFromEnvironment();
    auto n = args.world_size > 0 ? absl::StatusOr<int>(args.world_size)
                                 : WorldSizeFromEnvironment();
    if (!r.ok() || !n.ok() || *r >= *n) {
      spdlog::error(
          "--bootstrap needs a rank (--rank, RINGMASTER_RANK or "
          "JOB_COMPLETION_INDEX) below the world size (--world-size or "
          "RINGMASTER_WORLD_SIZE): {}",
          !r.ok()   ? r.status().ToString()
          : !n.ok() ? n.status().ToString()
                    : absl::StrFormat("rank %d of %d", *r, *n));
      return 2;
    }
    rank = *r;
    nranks = *n;
  }
  // Set once the coordinator knows this rank: a bootstrapped rank reports
  // its failure itself, as no launcher watches it.
  std::function<void(const std::string&)> report_failure;
  auto fail = [&](int code, const std::string& message) {
    spdlog::error("rank {}: {}", rank, message);
    if (args.bootstrap && report_failure) report_failure(message);
    if (world) world->Abort(code);
    std::_Exit(code);
    return code;
  };

  const char* token = std::getenv("RINGMASTER_TOKEN");
  auto faults = ParseFaults(
      std::getenv("RINGMASTER_FAULT") ? std::getenv("RINGMASTER_FAULT") : "");
  if (!faults.ok()) return fail(2, std::string(faults.status().message()));

  // The backend: cuda when this rank has a GPU (auto), agreed through the
  // fingerprint comparison below.
  std::string backend_name = args.backend;
  if (backend_name == "auto") backend_name = GpuCount() > 0 ? "cuda" : "host";
#ifndef RINGMASTER_HAVE_CUDA
  if (backend_name == "cuda") {
    return fail(2, "this worker was built without the CUDA backend");
  }
#endif

  v1::Fingerprint fp;
  fp.set_host(HostName());
  fp.set_pid(static_cast<int32_t>(getpid()));
  fp.set_build_id(GitSha());
  fp.set_backend(backend_name);
  fp.set_mpi_version(args.bootstrap ? "" : MpiLibraryVersion());
  fp.set_local_rank(local_rank);
  for (const auto& [k, v] : NcclEnvironment()) (*fp.mutable_nccl_env())[k] = v;
#ifdef RINGMASTER_HAVE_CUDA
  if (backend_name == "cuda") {
    BackendInfo lib = CudaLibraryInfo();
    fp.set_nccl_version(lib.nccl_version);
    fp.set_cuda_runtime_version(lib.cuda_runtime_version);
    fp.set_driver_version(lib.driver_version);
  }
#endif
  if (FindFault(*faults, Fault::Kind::kMismatch, rank)) {
    spdlog::warn("rank {}: fault injection: fingerprint mismatch", rank);
    fp.set_build_id(fp.build_id() + "-mismatch");
  }

  auto client = CoordinatorClient::Create(args.coordinator, token ? token : "");
  v1::RegisterRequest reg;
  reg.set_job_id(args.job_id);
  reg.set_rank(rank);
  reg.set_world_size(nranks);
  *reg.mutable_fingerprint() = fp;
  // Ranks started by other means may wait for the job to leave the queue.
  auto registered = client->Register(
      reg, args.bootstrap ? absl::Seconds(args.bootstrap_timeout_s)
                          : absl::Seconds(30));
  if (!registered.ok()) {
    return fail(kExitCoordinator, std::string(registered.status().message()));
  }
  const v1::Job& job = registered->job();
  fp.set_plan_sha256(job.plan().source_sha256());
  const int attempt = job.attempt() > 0 ? job.attempt() : args.attempt;
  auto send_final = [&](const v1::Failure* failure) {
    v1::ReportResultsRequest req;
    req.set_job_id(args.job_id);
    req.set_rank(rank);
    req.set_attempt(attempt);
    req.set_final(true);
    if (failure) *req.mutable_failure() = *failure;
    auto s = client->ReportResults(req);
    if (!s.ok())
      spdlog::error("rank {}: final report: {}", rank, s.status().ToString());
  };

  report_failure = [&](const std::string& message) {
    v1::Failure f;
    f.set_reason(v1::BACKEND_ERROR);
    f.set_rank(rank);
    f.set_host(fp.host());
    f.set_detail(message);
    send_final(&f);
  };

  // Coordinator bootstrap: meet the other ranks, then build the TCP mesh.
  // On GPUs rank 0's NCCL unique id travels with the rendezvous.
  std::string relayed_nccl_id;
  if (args.bootstrap) {
    BootstrapSpec spec;
    spec.job_id = args.job_id;
    spec.attempt = attempt;
    spec.rank = rank;
    spec.world_size = nranks;
    spec.host = fp.host();
    spec.bind = args.bind;
    spec.advertise_host = args.advertise;
    spec.coordinator = args.coordinator;
    spec.timeout = absl::Seconds(args.bootstrap_timeout_s);
#ifdef RINGMASTER_HAVE_CUDA
    if (backend_name == "cuda" && rank == 0) {
      auto id = NewNcclUniqueId();
      if (!id.ok())
        return fail(kExitFailed, std::string(id.status().message()));
      spec.blob = *id;
    }
#endif
    auto met = Bootstrap(*client, spec);
    if (!met.ok()) {
      const std::string message =
          "coordinator bootstrap: " + std::string(met.status().message());
      if (absl::IsDeadlineExceeded(met.status())) {
        // Ranks that never joined: unreachable workers, not this rank's
        // backend failing.
        v1::Failure f;
        f.set_reason(v1::WORKER_UNREACHABLE);
        f.set_rank(-1);
        f.set_detail(message);
        send_final(&f);
        report_failure = nullptr;
      }
      return fail(kExitCoordinator, message);
    }
    world = std::move(met->comm);
    local_rank = met->local_rank;
    fp.set_local_rank(local_rank);
    relayed_nccl_id = std::move(met->blob);
    spdlog::info("rank {}: bootstrapped {} ranks over TCP", rank, nranks);
  }
  CommControl control(*world);

  // Fingerprints are compared before the first collective: a mismatch is a
  // clear failure on every rank, never a hang.
  auto all = control.AllGatherStrings(fp.SerializeAsString());
  if (!all.ok()) return fail(kExitFailed, std::string(all.status().message()));
  std::vector<v1::Fingerprint> fps(nranks);
  for (int r = 0; r < nranks; ++r) fps[r].ParseFromString((*all)[r]);
  if (auto mismatch = CompareFingerprints(fps)) {
    if (rank == 0) {
      v1::Failure f;
      f.set_reason(v1::CONFIG_MISMATCH);
      f.set_rank(mismatch->ranks.empty() ? -1 : mismatch->ranks[0]);
      if (f.rank() >= 0) f.set_host(fps[f.rank()].host());
      f.set_detail(mismatch->detail);
      send_final(&f);
      spdlog::error("config_mismatch: {}", mismatch->detail);
    }
    world.reset();
    if (!args.bootstrap) MPI_Finalize();
    return kExitMismatch;
  }

  HeartbeatThread heartbeat(
      client.get(), args.job_id, rank, attempt,
      absl::Milliseconds(registered->heartbeat_interval_ms() > 0
                             ? registered->heartbeat_interval_ms()
                             : 500));

  std::unique_ptr<CollectiveBackend> backend;
  if (backend_name == "cuda") {
#ifdef RINGMASTER_HAVE_CUDA
    auto cuda =
        CudaBackend::Create(control, local_rank, *faults, relayed_nccl_id);
    if (!cuda.ok()) {
      v1::Failure f;
      f.set_reason(v1::BACKEND_ERROR);
      f.set_rank(rank);
      f.set_host(fp.host());
      f.set_detail(std::string(cuda.status().message()));
      send_final(&f);
      return fail(kExitFailed, f.detail());
    }
    backend = std::move(*cuda);
#endif
  } else {
    backend = std::make_unique<HostBackend>(*world, *faults);
  }
  BackendInfo info = backend->Info();

  // Provenance: what ran where, gathered from the ranks' fingerprints.
  v1::Provenance prov;
  auto models = control.AllGatherStrings(info.gpu_model);
  for (int r = 0; r < nranks; ++r) {
    prov.add_hosts(fps[r].host());
    prov.add_gpu_models(models.ok() ? (*models)[r] : "");
  }
  prov.set_backend(info.name);
  // The detected topology (`ringmaster topo` prints the same id).
  {
#ifdef RINGMASTER_HAVE_CUDA
    const std::string gpu_json = DescribeGpusJson();
#else
    const std::string gpu_json = "{}";
#endif
    const std::string node_id =
        TopologyId(DetectedNode(gpu_json, DetectNics()),
                   static_cast<int>(std::thread::hardware_concurrency()));
    auto ids = control.AllGatherStrings(node_id);
    std::set<std::string> hosts;
    for (const auto& f : fps) hosts.insert(f.host());
    if (ids.ok())
      prov.set_topology_id(JobTopologyId(*ids, static_cast<int>(hosts.size())));
  }
  prov.set_driver_version(info.driver_version);
  prov.set_cuda_runtime_version(info.cuda_runtime_version);
  prov.set_nccl_version(info.nccl_version);
  prov.set_mpi_version(fp.mpi_version());
  for (const auto& [k, v] : fp.nccl_env()) (*prov.mutable_nccl_env())[k] = v;
  prov.set_git_sha(GitSha());
  prov.set_build_id(GitSha());
  prov.set_ringmaster_version(RingmasterVersion());
  // command_line and started_at are stamped by the coordinator, which
  // knows how the job was launched.

  // Telemetry of this rank's device, sampled in the background; every
  // result keeps every rank's samples of its own window.
  std::unique_ptr<TelemetrySampler> telemetry;
  if (args.telemetry_ms > 0) {
    std::unique_ptr<TelemetrySource> source;
#ifdef RINGMASTER_HAVE_CUDA
    if (backend_name == "cuda") {
      const int dev = local_rank % std::max(1, GpuCount());
      const std::string bus = CudaBusId(dev);
      source = NvmlTelemetrySource(
          bus, absl::StrFormat("GPU %s %s", bus, CudaDeviceName(dev)));
    }
#endif
    if (!source) source = HostTelemetrySource();
    telemetry = std::make_unique<TelemetrySampler>(
        std::move(source), std::chrono::milliseconds(args.telemetry_ms));
  }

  // Communicator groups: the whole launch, and the first n ranks for each
  // ladder rung (created collectively on first use; every rank walks the
  // same cases, so every rank takes part). A group's collective backend
  // (on GPUs an NCCL communicator split from the world's) is made only for
  // the collective cases: training brings its own.
  struct Group {
    std::unique_ptr<HostComm> comm;  // null for non-members
    std::unique_ptr<CommControl> control;
    std::unique_ptr<CollectiveBackend> backend;
    bool backend_made = false;
    double setup_s = 0;
  };
  std::map<int, Group> groups;
  bool world_comm_logged = false;
  auto group_for = [&](int n, bool want_backend) -> absl::StatusOr<Group*> {
    auto it = groups.find(n);
    if (it == groups.end()) {
      Group g;
      auto sub = world->SplitPrefix(rank < n);
      if (!sub.ok()) return sub.status();
      g.comm = std::move(*sub);
      if (rank < n) g.control = std::make_unique<CommControl>(*g.comm);
      it = groups.emplace(n, std::move(g)).first;
    }
    Group& g = it->second;
    if (!want_backend || g.backend_made || n == nranks) return &g;
    g.backend_made = true;
    const bool member = rank < n;
    if (backend_name == "cuda") {
#ifdef RINGMASTER_HAVE_CUDA
      auto split =
          static_cast<CudaBackend*>(backend.get())->Split(member, &g.setup_s);
      if (!split.ok()) return split.status();
      g.backend = std::move(*split);
#endif
    } else if (member) {
      auto t0 = absl::Now();
      g.backend = std::make_unique<HostBackend>(*g.comm, *faults);
      g.setup_s = absl::ToDoubleSeconds(absl::Now() - t0);
    }
    return &g;
  };
  // The world group's communicator setup time (GPUs: known once its first
  // collective case created it; the host backend has no setup).
  auto world_setup_s = [&]() -> double {
#ifdef RINGMASTER_HAVE_CUDA
    if (backend_name == "cuda")
      return static_cast<CudaBackend*>(backend.get())->CommSetupSeconds();
#endif
    return 0.0;
  };

  // Node benchmarks (bench != collective): created on first use, by every
  // rank (every rank walks the same cases).
  std::unique_ptr<NodeBench> host_bench, cuda_bench;
  // A case's backend: its own, or the launch's for `auto`.
  auto backend_of = [&](const v1::Case& c) {
    if (c.backend() != v1::BACKEND_AUTO) return c.backend();
    return backend_name == "cuda" ? v1::BACKEND_CUDA : v1::BACKEND_HOST;
  };
  auto run_bench = [&](const v1::Case& c) -> v1::Result {
    const v1::Backend want = backend_of(c);
    std::vector<std::string> hosts;
    for (const auto& f : fps) hosts.push_back(f.host());
    if (want == v1::BACKEND_HOST) {
      if (!host_bench)
        host_bench = std::make_unique<HostNodeBench>(*world, *faults);
      if (c.bench() == v1::BENCH_FIND_SLOW)
        return RunFindSlow(c, *host_bench, control, hosts);
      return RunBench(c, *host_bench, control);
    }
    if (backend_name != "cuda") {
      return SkippedBench(
          c, nranks, "a GPU case (backend: cuda) in a launch on host ranks");
    }
#ifdef RINGMASTER_HAVE_CUDA
    if (!cuda_bench) {
      auto created =
          CudaNodeBench::Create(control, local_rank % std::max(1, GpuCount()));
      if (!created.ok()) return FailedBench(c, nranks, created.status());
      cuda_bench = std::move(*created);
    }
    if (c.bench() == v1::BENCH_FIND_SLOW)
      return RunFindSlow(c, *cuda_bench, control, hosts);
    return RunBench(c, *cuda_bench, control);
#else
    return SkippedBench(c, nranks,
                        "this worker was built without the CUDA backend");
#endif
  };

  // Training (bench: train): one trainer per rank count, on that group.
  std::map<std::pair<int, bool>, std::unique_ptr<Trainer>>
      trainers;  // (ranks, cuda)
  auto run_train = [&](const v1::Case& c, int n, HostComm& comm,
                       Control& group) -> v1::Result {
    const bool cuda = backend_of(c) == v1::BACKEND_CUDA;
    if (cuda && backend_name != "cuda") {
      return SkippedBench(
          c, n, "a GPU case (backend: cuda) in a launch on host ranks");
    }
    auto& t = trainers[{n, cuda}];
    if (!t && cuda) {
#ifdef RINGMASTER_HAVE_CUDA
      auto created =
          CudaTrainer::Create(group, local_rank % std::max(1, GpuCount()));
      if (!created.ok()) return FailedBench(c, n, created.status());
      t = std::move(*created);
#else
      return SkippedBench(c, n,
                          "this worker was built without the CUDA backend");
#endif
    }
    if (!t) t = std::make_unique<HostTrainer>(comm);
    return RunTrain(c, *t, group);
  };

  for (const v1::Case& c : job.cases()) {
    if (heartbeat.cancelled()) {
      spdlog::warn("rank {}: job cancelled by the coordinator", rank);
      world->Abort(kExitFailed);
    }
    MaybeInjectFault(*faults, rank, c.seq());
    heartbeat.SetEntered(c.seq());
    const double case_start = telemetry ? telemetry->Now() : 0;
    const int n = c.nranks() > 0 ? c.nranks() : nranks;
    v1::Result result;
    if (c.bench() != v1::BENCH_COLLECTIVE && c.bench() != v1::BENCH_TRAIN) {
      result = run_bench(c);
    } else if (n > nranks) {
      *result.mutable_case_() = c;
      result.set_nranks(n);
      result.set_status(v1::FAILED);
      result.mutable_failure()->set_reason(v1::REJECTED);
      result.mutable_failure()->set_rank(-1);
      result.mutable_failure()->set_detail(absl::StrFormat(
          "ladder rung of %d ranks exceeds the launch's %d ranks", n, nranks));
    } else {
      const bool train = c.bench() == v1::BENCH_TRAIN;
      auto group = group_for(n, !train);
      if (!group.ok())
        return fail(kExitFailed, std::string(group.status().message()));
      Group* g = *group;
      if (c.bench() == v1::BENCH_TRAIN) {
        if (rank < n)
          result = run_train(c, n, n == nranks ? *world : *g->comm,
                             n == nranks ? control : *g->control);
      } else if (n == nranks) {
        result = RunCase(c, *backend, control);
      } else if (rank < n) {
        result = RunCase(c, *g->backend, *g->control);
      }
      if (!train) {
        const bool logged = world_comm_logged;
        if (n == nranks) g->setup_s = world_setup_s();
        world_comm_logged = world_comm_logged || world_setup_s() > 0;
        if (rank == 0 && !logged && world_comm_logged &&
            backend_name == "cuda") {
          spdlog::info("NCCL communicator ready in {:.3f} s", world_setup_s());
        }
        result.set_comm_setup_s(g->setup_s);
      }
      // Non-members wait here without spinning: a busy MPI barrier would
      // take a core from the members on a shared host.
      if (n != nranks) {
        absl::Status waited = world->IdleBarrier();
        if (!waited.ok())
          return fail(kExitFailed, std::string(waited.message()));
      }
    }
    heartbeat.SetProgress(c.seq());
    if (telemetry) {
      // Every rank walks every case, so the gather lines up; a failed
      // gather only loses the telemetry.
      v1::DeviceTelemetry mine =
          telemetry->Window(case_start, telemetry->Now());
      mine.set_rank(rank);
      mine.set_host(fp.host());
      auto all = control.AllGatherStrings(mine.SerializeAsString());
      if (rank == 0 && all.ok()) {
        uint64_t slow = 0;
        std::vector<std::string> who;
        for (const std::string& bytes : *all) {
          v1::DeviceTelemetry* t = result.add_telemetry();
          t->ParseFromString(bytes);
          slow |= t->slowdown_reasons();
          if (t->slowdown_reasons() != 0)
            who.push_back(absl::StrFormat("rank %d: %s", t->rank(),
                                          ReasonNames(t->slowdown_reasons())));
        }
        if (slow != 0) {
          result.set_throttled(true);
          result.set_throttle_detail(absl::StrJoin(who, "; "));
        }
      }
    }
    if (rank != 0) continue;
    result.set_schema_version(v1::SCHEMA_VERSION_1);
    result.set_job_id(args.job_id);
    result.set_attempt(attempt);
    *result.mutable_provenance() = prov;
    result.set_idempotency_key(
        absl::StrFormat("%s/%d/%d/%d", args.job_id, attempt, rank, c.seq()));
    if (result.status() != v1::OK && result.failure().rank() >= 0 &&
        result.failure().rank() < nranks) {
      result.mutable_failure()->set_host(fps[result.failure().rank()].host());
    }
    if (result.status() == v1::OK && c.bench() == v1::BENCH_COLLECTIVE &&
        result.straggler_rank() < nranks) {
      result.set_straggler_host(fps[result.straggler_rank()].host());
    }
    v1::ReportResultsRequest req;
    req.set_job_id(args.job_id);
    req.set_rank(rank);
    req.set_attempt(attempt);
    *req.add_results() = std::move(result);
    auto sent = client->ReportResults(req);
    if (!sent.ok()) {
      return fail(kExitCoordinator, std::string(sent.status().message()));
    }
  }

  // Every rank says it is done, so a rank that exits before the launcher
  // does is not mistaken for a dead one.
  send_final(nullptr);
  control.Barrier().IgnoreError();
  trainers.clear();
  for (auto& [n, g] : groups) {
    g.backend.reset();
    g.control.reset();
    g.comm.reset();
  }
  cuda_bench.reset();
  host_bench.reset();
  backend.reset();
  world.reset();
  if (!args.bootstrap) MPI_Finalize();
  if (FindFault(*faults, Fault::Kind::kLinger, rank)) {
    spdlog::warn("rank {}: fault injection: lingering 2 s before exit", rank);
    absl::SleepFor(absl::Seconds(2));
  }
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
      std::_Exit(Run(args, argc, argv));
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
  CLI11_PARSE(app, argc, argv);
  if (probe->parsed()) return ringmaster::Probe(probe_topology);
  if (args.local_ranks > 1) {
    if (!args.bootstrap) {
      spdlog::error(
          "--local-ranks needs --bootstrap (MPI starts its own ranks)");
      return 2;
    }
    return ringmaster::RunLocalRanks(args, argc, argv);
  }
  return ringmaster::Run(args, argc, argv);
}
