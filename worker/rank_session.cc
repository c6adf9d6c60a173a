#include "worker/rank_session.h"

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <thread>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "backends/provider.h"
#include "comm/host_comm.h"
#include "core/build_info.h"
#include "core/detected_topology.h"
#include "core/faults.h"
#include "core/fingerprint.h"
#include "core/memory_need.h"
#include "core/placement.h"
#include "core/telemetry.h"
#include "core/transformer.h"
#include "core/units.h"
#include "spdlog/spdlog.h"
#include "worker/bootstrap.h"
#include "worker/coordinator_client.h"
#include "worker/heartbeat.h"
#include "worker/kinds/kind.h"
#include "worker/measure.h"
#include "worker/node_relay.h"

namespace ringmaster {
namespace {

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

v1::Failure MakeFailure(v1::FailureReason reason, int rank,
                        const std::string& host, const std::string& detail) {
  v1::Failure f;
  f.set_reason(reason);
  f.set_rank(rank);
  if (!host.empty()) f.set_host(host);
  f.set_detail(detail);
  return f;
}

class RankSession : public CaseEnv {
 public:
  explicit RankSession(const RunArgs& args) : args_(args) {}

  int Run(int argc, char** argv);

  // CaseEnv.
  int rank() const override { return rank_; }
  int world_size() const override { return nranks_; }
  int local_rank() const override { return local_rank_; }
  const std::vector<std::string>& hosts() const override { return hosts_; }
  const std::vector<Fault>& faults() const override { return faults_; }
  HostComm& world_comm() override { return *world_; }
  Control& world_control() override { return *control_; }
  absl::StatusOr<RankGroup> Group(int n) override;
  BackendProvider* ProviderFor(const v1::Case& c, std::string* why) override;
  BackendProvider& launch_provider() override { return *launch_; }
  CollectiveBackend& world_collectives() override { return *collectives_; }
  absl::StatusOr<NodeBench*> NodeBenchOf(BackendProvider& provider) override;

 private:
  struct OwnedGroup {
    std::unique_ptr<HostComm> comm;  // null for non-members
    std::unique_ptr<CommControl> control;
  };

  // Ends the job and this process with `code` after logging `message`
  // (a bootstrapped rank reports it first: no launcher watches it).
  int Fail(int code, const std::string& message);
  void SendFinal(const v1::Failure* failure);
  int Join(int argc, char** argv);
  int Register();
  int MeetPeers();
  int AgreeOnFingerprints();
  int MakeWorldBackend();
  void DescribeProvenance();
  void StartTelemetry();
  int RunCases();
  absl::StatusOr<v1::Result> RunOne(const v1::Case& c);
  std::optional<v1::Result> DoesNotFit(const v1::Case& c, int n);
  void GatherTelemetry(double case_start, v1::Result* result);
  int Report(const v1::Case& c, v1::Result result);
  void Finish();

  const RunArgs& args_;
  std::unique_ptr<HostComm> world_;
  std::unique_ptr<CommControl> control_;
  int rank_ = 0, nranks_ = 1, local_rank_ = 0;
  int local_ranks_ = 0;  // ranks on this host, once a memory check asked
  std::vector<Fault> faults_;
  std::unique_ptr<BackendProvider> launch_, host_;
  v1::Fingerprint fp_;
  std::vector<v1::Fingerprint> fps_;
  std::vector<std::string> hosts_;
  std::unique_ptr<NodeRelay> relay_;  // this rank leads its node
  std::unique_ptr<CoordinatorClient> client_;
  v1::RegisterResponse registered_;
  int attempt_ = 1;
  bool report_failures_ = false;  // once the coordinator knows this rank
  std::string relayed_blob_;
  std::unique_ptr<HeartbeatThread> heartbeat_;
  std::unique_ptr<CollectiveBackend> collectives_;
  v1::Provenance prov_;
  std::unique_ptr<TelemetrySampler> telemetry_;
  std::map<int, OwnedGroup> groups_;
  std::map<v1::Backend, std::unique_ptr<NodeBench>> node_benches_;
  std::map<std::string, std::unique_ptr<BenchmarkKind>> kinds_;
};

int RankSession::Fail(int code, const std::string& message) {
  spdlog::error("rank {}: {}", rank_, message);
  if (args_.bootstrap && report_failures_) {
    v1::Failure f = MakeFailure(v1::BACKEND_ERROR, rank_, fp_.host(), message);
    SendFinal(&f);
  }
  if (world_) world_->Abort(code);
  std::_Exit(code);
  return code;
}

void RankSession::SendFinal(const v1::Failure* failure) {
  v1::ReportResultsRequest req;
  req.set_job_id(args_.job_id);
  req.set_rank(rank_);
  req.set_attempt(attempt_);
  req.set_final(true);
  if (failure) *req.mutable_failure() = *failure;
  auto s = client_->ReportResults(req);
  if (!s.ok())
    spdlog::error("rank {}: final report: {}", rank_, s.status().ToString());
}

// This rank's place in the launch; the fingerprint it will register with.
int RankSession::Join(int argc, char** argv) {
  if (!args_.bootstrap) {
    MpiRank mpi = StartMpiRank(&argc, &argv);
    world_ = std::move(mpi.world);
    rank_ = mpi.rank;
    nranks_ = mpi.size;
    local_rank_ = mpi.local_rank;
  } else {
    auto r = args_.rank >= 0 ? absl::StatusOr<int>(args_.rank)
                             : RankFromEnvironment();
    auto n = args_.world_size > 0 ? absl::StatusOr<int>(args_.world_size)
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
    rank_ = *r;
    nranks_ = *n;
  }
  const char* fault_env = std::getenv("RINGMASTER_FAULT");
  auto faults = ParseFaults(fault_env ? fault_env : "");
  if (!faults.ok()) return Fail(2, std::string(faults.status().message()));
  faults_ = *faults;
  // The back end: cuda when this rank has a GPU (auto), agreed through the
  // fingerprint comparison.
  auto launch = MakeBackendProvider(args_.backend);
  if (!launch.ok()) return Fail(2, std::string(launch.status().message()));
  launch_ = std::move(*launch);
  if (launch_->kind() != v1::BACKEND_HOST) host_ = *MakeBackendProvider("host");

  fp_.set_host(HostName());
  fp_.set_pid(static_cast<int32_t>(getpid()));
  fp_.set_build_id(GitSha());
  fp_.set_backend(launch_->name());
  fp_.set_mpi_version(args_.bootstrap ? "" : MpiVersion());
  fp_.set_local_rank(local_rank_);
  for (const auto& [k, v] : NcclEnvironment()) (*fp_.mutable_nccl_env())[k] = v;
  const BackendInfo lib = launch_->LibraryInfo();
  fp_.set_nccl_version(lib.nccl_version);
  fp_.set_cuda_runtime_version(lib.cuda_runtime_version);
  fp_.set_driver_version(lib.driver_version);
  if (FindFault(faults_, Fault::Kind::kMismatch, rank_)) {
    spdlog::warn("rank {}: fault injection: fingerprint mismatch", rank_);
    fp_.set_build_id(fp_.build_id() + "-mismatch");
  }
  return 0;
}

int RankSession::Register() {
  const char* env_token = std::getenv("RINGMASTER_TOKEN");
  const std::string token = env_token ? env_token : "";
  std::optional<NodePlace> place;
  if (args_.node_leader) place = NodePlaceFromEnvironment();
  if (place && place->local_size > 1) {
    // The node's ranks reach the coordinator through local rank 0's relay.
    if (place->local_rank == 0) {
      auto relay =
          NodeRelay::Start(args_.coordinator, token, args_.job_id, *place);
      if (!relay.ok()) {
        return Fail(kExitCoordinator, std::string(relay.status().message()));
      }
      relay_ = std::move(*relay);
    }
    client_ = CoordinatorClient::CreateLocal(
        NodeRelayAddress(args_.job_id, *place), token);
  } else {
    client_ = CoordinatorClient::Create(args_.coordinator, token);
  }
  v1::RegisterRequest reg;
  reg.set_job_id(args_.job_id);
  reg.set_rank(rank_);
  reg.set_world_size(nranks_);
  *reg.mutable_fingerprint() = fp_;
  // Ranks started by other means may wait for the job to leave the queue.
  auto registered = client_->Register(
      reg, args_.bootstrap ? absl::Seconds(args_.bootstrap_timeout_s)
                           : absl::Seconds(30));
  if (!registered.ok()) {
    return Fail(kExitCoordinator, std::string(registered.status().message()));
  }
  registered_ = std::move(*registered);
  fp_.set_plan_sha256(registered_.job().plan().source_sha256());
  attempt_ = registered_.job().attempt() > 0 ? registered_.job().attempt()
                                             : args_.attempt;
  report_failures_ = true;
  return 0;
}

// Coordinator bootstrap: meet the other ranks, then build the TCP mesh.
// Rank 0's bootstrap blob (the NCCL unique id) travels with the rendezvous.
int RankSession::MeetPeers() {
  if (!args_.bootstrap) return 0;
  BootstrapSpec spec;
  spec.job_id = args_.job_id;
  spec.attempt = attempt_;
  spec.rank = rank_;
  spec.world_size = nranks_;
  spec.host = fp_.host();
  spec.bind = args_.bind;
  spec.advertise_host = args_.advertise;
  spec.coordinator = args_.coordinator;
  spec.timeout = absl::Seconds(args_.bootstrap_timeout_s);
  if (rank_ == 0) {
    auto blob = launch_->NewBootstrapBlob();
    if (!blob.ok())
      return Fail(kExitFailed, std::string(blob.status().message()));
    spec.blob = *blob;
  }
  auto met = Bootstrap(*client_, spec);
  if (!met.ok()) {
    const std::string message =
        "coordinator bootstrap: " + std::string(met.status().message());
    if (absl::IsDeadlineExceeded(met.status())) {
      // Ranks that never joined: unreachable workers, not this rank's
      // backend failing.
      v1::Failure f = MakeFailure(v1::WORKER_UNREACHABLE, -1, "", message);
      SendFinal(&f);
      report_failures_ = false;
    }
    return Fail(kExitCoordinator, message);
  }
  world_ = std::move(met->comm);
  local_rank_ = met->local_rank;
  fp_.set_local_rank(local_rank_);
  relayed_blob_ = std::move(met->blob);
  spdlog::info("rank {}: bootstrapped {} ranks over TCP", rank_, nranks_);
  return 0;
}

// Fingerprints are compared before the first collective: a mismatch is a
// clear failure on every rank, never a hang.
int RankSession::AgreeOnFingerprints() {
  control_ = std::make_unique<CommControl>(*world_);
  auto all = control_->AllGatherStrings(fp_.SerializeAsString());
  if (!all.ok()) return Fail(kExitFailed, std::string(all.status().message()));
  fps_.assign(nranks_, v1::Fingerprint());
  for (int r = 0; r < nranks_; ++r) {
    fps_[r].ParseFromString((*all)[r]);
    hosts_.push_back(fps_[r].host());
  }
  auto mismatch = CompareFingerprints(fps_);
  if (!mismatch) return 0;
  if (rank_ == 0) {
    const int bad = mismatch->ranks.empty() ? -1 : mismatch->ranks[0];
    v1::Failure f =
        MakeFailure(v1::CONFIG_MISMATCH, bad, bad >= 0 ? fps_[bad].host() : "",
                    mismatch->detail);
    SendFinal(&f);
    spdlog::error("config_mismatch: {}", mismatch->detail);
  }
  control_.reset();
  world_.reset();
  if (!args_.bootstrap) FinishMpi();
  return kExitMismatch;
}

int RankSession::MakeWorldBackend() {
  RankResources r{world_.get(), control_.get(), local_rank_, faults_};
  auto made = launch_->NewCollectiveBackend(r, relayed_blob_);
  if (!made.ok()) {
    v1::Failure f = MakeFailure(v1::BACKEND_ERROR, rank_, fp_.host(),
                                std::string(made.status().message()));
    SendFinal(&f);
    return Fail(kExitFailed, f.detail());
  }
  collectives_ = std::move(*made);
  return 0;
}

// Provenance: what ran where, gathered from the ranks' fingerprints.
void RankSession::DescribeProvenance() {
  const BackendInfo info = collectives_->Info();
  auto models = control_->AllGatherStrings(info.gpu_model);
  for (int r = 0; r < nranks_; ++r) {
    prov_.add_hosts(fps_[r].host());
    prov_.add_gpu_models(models.ok() ? (*models)[r] : "");
  }
  prov_.set_backend(info.name);
  // The detected topology (`ringmaster topo` prints the same id).
  const std::string gpu_json = HaveCudaBackend() ? DescribeGpusAsJson() : "{}";
  const std::string node_id =
      TopologyId(DetectedNode(gpu_json, DetectNics()),
                 static_cast<int>(std::thread::hardware_concurrency()));
  auto ids = control_->AllGatherStrings(node_id);
  const std::set<std::string> hosts(hosts_.begin(), hosts_.end());
  if (ids.ok())
    prov_.set_topology_id(JobTopologyId(*ids, static_cast<int>(hosts.size())));
  prov_.set_driver_version(info.driver_version);
  prov_.set_cuda_runtime_version(info.cuda_runtime_version);
  prov_.set_nccl_version(info.nccl_version);
  prov_.set_mpi_version(fp_.mpi_version());
  for (const auto& [k, v] : fp_.nccl_env()) (*prov_.mutable_nccl_env())[k] = v;
  prov_.set_git_sha(GitSha());
  prov_.set_build_id(GitSha());
  prov_.set_ringmaster_version(RingmasterVersion());
  // command_line and started_at are stamped by the coordinator, which
  // knows how the job was launched.
}

// Telemetry of this rank's device, sampled in the background; every
// result keeps every rank's samples of its own window.
void RankSession::StartTelemetry() {
  if (args_.telemetry_ms <= 0) return;
  std::unique_ptr<TelemetrySource> source =
      launch_->NewTelemetrySource(local_rank_);
  if (!source) source = HostTelemetrySource();
  telemetry_ = std::make_unique<TelemetrySampler>(
      std::move(source), std::chrono::milliseconds(args_.telemetry_ms));
}

absl::StatusOr<RankGroup> RankSession::Group(int n) {
  if (n >= nranks_) return RankGroup{nranks_, world_.get(), control_.get()};
  auto it = groups_.find(n);
  if (it == groups_.end()) {
    OwnedGroup g;
    auto sub = world_->SplitPrefix(rank_ < n);
    if (!sub.ok()) return sub.status();
    g.comm = std::move(*sub);
    if (rank_ < n) g.control = std::make_unique<CommControl>(*g.comm);
    it = groups_.emplace(n, std::move(g)).first;
  }
  return RankGroup{n, it->second.comm.get(), it->second.control.get()};
}

BackendProvider* RankSession::ProviderFor(const v1::Case& c, std::string* why) {
  const v1::Backend want =
      c.backend() != v1::BACKEND_AUTO ? c.backend() : launch_->kind();
  if (want == launch_->kind()) return launch_.get();
  if (want == v1::BACKEND_HOST && host_) return host_.get();
  *why = "a GPU case (backend: cuda) in a launch on host ranks";
  return nullptr;
}

absl::StatusOr<NodeBench*> RankSession::NodeBenchOf(BackendProvider& p) {
  auto& bench = node_benches_[p.kind()];
  if (!bench) {
    RankResources r{world_.get(), control_.get(), local_rank_, faults_};
    auto made = p.NewNodeBench(r);
    if (!made.ok()) return made.status();
    bench = std::move(*made);
  }
  return bench.get();
}

// Before anything is allocated: a case whose buffers need more memory than
// any rank has is SKIPPED on every rank with the figures. Every rank walks
// every case, so the gather lines up.
std::optional<v1::Result> RankSession::DoesNotFit(const v1::Case& c, int n) {
  const int64_t need = CaseMemoryBytes(c, n);
  if (need <= 0) return std::nullopt;
  std::string why;
  BackendProvider* provider = ProviderFor(c, &why);
  if (provider == nullptr) return std::nullopt;  // the kind says why
  if (local_ranks_ == 0) {
    auto on_host = world_->RanksOnHost();
    local_ranks_ = on_host.ok() ? std::max(*on_host, 1) : 1;
  }
  const int64_t available =
      provider->FreeMemoryPerRank(local_rank_, local_ranks_);
  const absl::Status mine = available > 0 && need > available
                                ? absl::UnimplementedError(DoesNotFitReason(
                                      need, available, provider->MemoryName()))
                                : absl::OkStatus();
  v1::Result agreed;
  if (AllRanksOk(mine, *control_, &agreed, Unsupported::kSkipped))
    return std::nullopt;
  v1::Result skipped = SkippedResult(c, n, agreed.failure().detail());
  if (agreed.status() != v1::SKIPPED) {
    skipped.set_status(v1::FAILED);
    *skipped.mutable_failure() = agreed.failure();
  } else {
    skipped.mutable_failure()->set_rank(agreed.failure().rank());
  }
  return skipped;
}

// Runs `c` through its kind on the ranks the kind asks for; an error here
// (a communicator that cannot be split) ends the job.
absl::StatusOr<v1::Result> RankSession::RunOne(const v1::Case& c) {
  const std::string name = KindNameOf(c);
  auto& kind = kinds_[name];
  if (!kind) kind = MakeKind(name);
  const int n = c.nranks() > 0 ? c.nranks() : nranks_;
  if (!kind) {
    return SkippedResult(
        c, n,
        absl::StrFormat("no benchmark kind \"%s\" in this worker (it has: %s)",
                        name, absl::StrJoin(KindNames(), ", ")));
  }
  if (c.host_max_bytes() > 0 && c.size_bytes() > c.host_max_bytes()) {
    std::string why;
    BackendProvider* provider = ProviderFor(c, &why);
    if (provider != nullptr && provider->kind() == v1::BACKEND_HOST) {
      return SkippedResult(
          c, n,
          absl::StrFormat("above the plan's host_max of %s: this size is run "
                          "on GPUs, not host ranks",
                          FormatBytes(c.host_max_bytes())));
    }
  }
  if (auto too_big = DoesNotFit(c, n)) return *too_big;
  if (!kind->RunsOnCaseRanks()) return kind->Run(c, *this);
  // A plan larger than the launch is not a failure: what needs more ranks
  // is left out, saying so.
  if (n > nranks_) {
    const bool layout =
        c.bench() == v1::BENCH_TRANSFORMER || c.bench() == v1::BENCH_INFERENCE;
    return SkippedResult(
        c, n,
        absl::StrFormat("%sneeds %d ranks; this launch has %d",
                        layout ? "layout " + LayoutName(c) + " " : "", n,
                        nranks_));
  }
  if (absl::Status s = kind->BeforeCase(c, *this); !s.ok()) return s;
  auto group = Group(n);
  if (!group.ok()) return group.status();
  v1::Result result;
  if (group->member()) result = kind->Run(c, *this);
  // Non-members wait here without spinning: a busy MPI barrier would take
  // a core from the members on a shared host.
  if (n != nranks_) {
    if (absl::Status waited = world_->IdleBarrier(); !waited.ok())
      return waited;
  }
  return result;
}

// Every rank walks every case, so the gather lines up; a failed gather only
// loses the telemetry.
void RankSession::GatherTelemetry(double case_start, v1::Result* result) {
  v1::DeviceTelemetry mine = telemetry_->Window(case_start, telemetry_->Now());
  mine.set_rank(rank_);
  mine.set_host(fp_.host());
  auto all = control_->AllGatherStrings(mine.SerializeAsString());
  if (rank_ != 0 || !all.ok()) return;
  uint64_t slow = 0;
  std::vector<std::string> who;
  for (const std::string& bytes : *all) {
    v1::DeviceTelemetry* t = result->add_telemetry();
    t->ParseFromString(bytes);
    slow |= t->slowdown_reasons();
    if (t->slowdown_reasons() != 0)
      who.push_back(absl::StrFormat("rank %d: %s", t->rank(),
                                    ReasonNames(t->slowdown_reasons())));
  }
  if (slow != 0) {
    result->set_throttled(true);
    result->set_throttle_detail(absl::StrJoin(who, "; "));
  }
}

// Rank 0 stamps the result with the job's identity and streams it.
int RankSession::Report(const v1::Case& c, v1::Result result) {
  result.set_schema_version(v1::SCHEMA_VERSION_1);
  result.set_job_id(args_.job_id);
  result.set_attempt(attempt_);
  *result.mutable_provenance() = prov_;
  result.set_idempotency_key(
      absl::StrFormat("%s/%d/%d/%d", args_.job_id, attempt_, rank_, c.seq()));
  if (result.status() != v1::OK && result.failure().rank() >= 0 &&
      result.failure().rank() < nranks_) {
    result.mutable_failure()->set_host(hosts_[result.failure().rank()]);
  }
  if (result.status() == v1::OK && c.bench() == v1::BENCH_COLLECTIVE &&
      result.straggler_rank() < nranks_) {
    result.set_straggler_host(hosts_[result.straggler_rank()]);
  }
  v1::ReportResultsRequest req;
  req.set_job_id(args_.job_id);
  req.set_rank(rank_);
  req.set_attempt(attempt_);
  *req.add_results() = std::move(result);
  auto sent = client_->ReportResults(req);
  if (!sent.ok())
    return Fail(kExitCoordinator, std::string(sent.status().message()));
  return 0;
}

int RankSession::RunCases() {
  for (const v1::Case& c : registered_.job().cases()) {
    if (heartbeat_->cancelled()) {
      spdlog::warn("rank {}: job cancelled by the coordinator", rank_);
      world_->Abort(kExitFailed);
    }
    MaybeInjectFault(faults_, rank_, c.seq());
    heartbeat_->SetEntered(c.seq());
    const double case_start = telemetry_ ? telemetry_->Now() : 0;
    const auto wall_start = std::chrono::steady_clock::now();
    auto result = RunOne(c);
    if (!result.ok())
      return Fail(kExitFailed, std::string(result.status().message()));
    if (result->case_wall_s() == 0) {
      result->set_case_wall_s(std::chrono::duration<double>(
                                  std::chrono::steady_clock::now() - wall_start)
                                  .count());
    }
    heartbeat_->SetProgress(c.seq());
    if (telemetry_) GatherTelemetry(case_start, &*result);
    if (rank_ != 0) continue;
    if (int code = Report(c, std::move(*result)); code != 0) return code;
  }
  return 0;
}

// Every rank says it is done, so a rank that exits before the launcher
// does is not mistaken for a dead one; then everything is torn down in
// the order it was built on.
void RankSession::Finish() {
  SendFinal(nullptr);
  control_->Barrier().IgnoreError();
  kinds_.clear();
  groups_.clear();
  node_benches_.clear();
  collectives_.reset();
  telemetry_.reset();
  heartbeat_.reset();
  // A node leader stays until its node's last report is in.
  if (relay_) relay_->WaitForNode(absl::Seconds(30));
  relay_.reset();
  control_.reset();
  world_.reset();
  if (!args_.bootstrap) FinishMpi();
  if (FindFault(faults_, Fault::Kind::kLinger, rank_)) {
    spdlog::warn("rank {}: fault injection: lingering 2 s before exit", rank_);
    absl::SleepFor(absl::Seconds(2));
  }
}

int RankSession::Run(int argc, char** argv) {
  if (int code = Join(argc, argv); code != 0) return code;
  if (int code = Register(); code != 0) return code;
  if (int code = MeetPeers(); code != 0) return code;
  if (int code = AgreeOnFingerprints(); code != 0) return code;
  heartbeat_ = std::make_unique<HeartbeatThread>(
      client_.get(), args_.job_id, rank_, attempt_,
      absl::Milliseconds(registered_.heartbeat_interval_ms() > 0
                             ? registered_.heartbeat_interval_ms()
                             : 500));
  if (int code = MakeWorldBackend(); code != 0) return code;
  DescribeProvenance();
  StartTelemetry();
  if (int code = RunCases(); code != 0) return code;
  Finish();
  return 0;
}

}  // namespace

int RunRank(const RunArgs& args, int argc, char** argv) {
  RankSession session(args);
  return session.Run(argc, argv);
}

}  // namespace ringmaster
