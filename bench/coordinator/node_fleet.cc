#include "bench/coordinator/node_fleet.h"

#include <grpcpp/grpcpp.h>
#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "comm/grpc_channel.h"
#include "coordinator/store.h"
#include "ringmaster/v1/coordinator.grpc.pb.h"
#include "tests/service_harness.h"

namespace ringmaster {
namespace {

// Pins every thread of `pid` (the threads it has now; new ones inherit
// from the thread that creates them) to `cpus`.
void PinThreads(pid_t pid, const std::vector<int>& cpus) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cpus) CPU_SET(c, &set);
  const std::string dir = absl::StrFormat("/proc/%d/task", pid);
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    const pid_t tid = std::stoi(e.path().filename().string());
    sched_setaffinity(tid, sizeof set, &set);
  }
}

// CPU seconds (user + system) `pid` has used.
double CpuSeconds(pid_t pid) {
  std::ifstream in(absl::StrFormat("/proc/%d/stat", pid));
  std::string text((std::istreambuf_iterator<char>(in)),
                   std::istreambuf_iterator<char>());
  const size_t close = text.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream rest(text.substr(close + 2));
  std::string field;
  double utime = 0, stime = 0;
  // Fields 3.. after "pid (comm) "; utime and stime are 14 and 15.
  for (int i = 3; i <= 15 && rest >> field; ++i) {
    if (i == 14) utime = std::stod(field);
    if (i == 15) stime = std::stod(field);
  }
  return (utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

// What the fleet saw, filled from gRPC's callback threads.
class Tally {
 public:
  void Error(grpc::StatusCode code) {
    std::lock_guard<std::mutex> lock(mu_);
    ++errors_[code];
  }
  // A message's heartbeats answered after `ms`.
  void Heartbeat(double ms) {
    std::lock_guard<std::mutex> lock(mu_);
    heartbeat_ms_.push_back(ms);
  }
  // A message's reports answered (stored) after `ms`.
  void Report(double ms, int64_t accepted) {
    std::lock_guard<std::mutex> lock(mu_);
    report_ms_.push_back(ms);
    acked_ += accepted;
  }
  int64_t errors() {
    std::lock_guard<std::mutex> lock(mu_);
    int64_t n = 0;
    for (const auto& [code, count] : errors_) n += count;
    return n;
  }
  nlohmann::json ErrorsByCode() {
    std::lock_guard<std::mutex> lock(mu_);
    nlohmann::json j = nlohmann::json::object();
    for (const auto& [code, count] : errors_)
      j[std::to_string(static_cast<int>(code))] = count;
    return j;
  }
  // Clears the latencies (the steady phase starts afresh).
  void ResetLatencies() {
    std::lock_guard<std::mutex> lock(mu_);
    heartbeat_ms_.clear();
    report_ms_.clear();
  }
  std::vector<double> heartbeat_ms() {
    std::lock_guard<std::mutex> lock(mu_);
    return heartbeat_ms_;
  }
  std::vector<double> report_ms() {
    std::lock_guard<std::mutex> lock(mu_);
    return report_ms_;
  }
  int64_t acked() {
    std::lock_guard<std::mutex> lock(mu_);
    return acked_;
  }

 private:
  std::mutex mu_;
  std::map<grpc::StatusCode, int64_t> errors_;
  std::vector<double> heartbeat_ms_, report_ms_;
  int64_t acked_ = 0;
};

// Calls still in flight: the driver waits for them before it stops.
class InFlight {
 public:
  void Add() {
    std::lock_guard<std::mutex> lock(mu_);
    ++n_;
  }
  void Done() {
    std::lock_guard<std::mutex> lock(mu_);
    if (--n_ == 0) cv_.notify_all();
  }
  bool WaitZero(absl::Duration timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, absl::ToChronoSeconds(timeout),
                        [&] { return n_ == 0; });
  }
  int count() {
    std::lock_guard<std::mutex> lock(mu_);
    return n_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int n_ = 0;
};

// A node's NodeSession stream: reports written one at a time in the
// order sent, answers matched to their send time by seq. Each message asks
// for its heartbeats' answer first (as the node leader does): that answer
// times the heartbeat, the reports' answer the commit.
class NodeStream : public grpc::ClientBidiReactor<v1::NodeReportRequest,
                                                  v1::NodeReportResponse> {
 public:
  NodeStream(v1::Coordinator::Stub* stub, const std::string& token,
             Tally* tally)
      : tally_(tally) {
    ctx_.AddMetadata("authorization", "Bearer " + token);
    stub->async()->NodeSession(&ctx_, this);
    StartRead(&in_);
    StartCall();
  }
  void Send(v1::NodeReportRequest req) {
    std::lock_guard<std::mutex> lock(mu_);
    if (closing_) return;
    sent_at_[req.seq()] = absl::Now();
    ++sent_;
    outbox_.push_back(std::move(req));
    WriteNextLocked();
  }
  // No more reports: the coordinator ends the stream once it answered all.
  void Close() {
    std::lock_guard<std::mutex> lock(mu_);
    closing_ = true;
    WriteNextLocked();
  }
  // Waits for the end; the reports never answered.
  int64_t Await(absl::Duration timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, absl::ToChronoSeconds(timeout), [&] { return done_; });
    if (!done_) ctx_.TryCancel();
    cv_.wait(lock, [&] { return done_; });
    return sent_ - answered_;
  }

  void OnWriteDone(bool ok) override {
    std::lock_guard<std::mutex> lock(mu_);
    writing_ = false;
    if (ok) WriteNextLocked();
  }
  void OnReadDone(bool ok) override {
    if (!ok) return;  // the stream ended (OnDone says how)
    const bool heartbeats = in_.reports_follow();
    double ms = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = sent_at_.find(in_.seq());
      if (it != sent_at_.end()) {
        ms = absl::ToDoubleMilliseconds(absl::Now() - it->second);
        if (!heartbeats) sent_at_.erase(it);
      }
      if (!heartbeats) ++answered_;
    }
    if (heartbeats) {
      tally_->Heartbeat(ms);
    } else {
      int64_t accepted = 0;
      for (const auto& rr : in_.reports()) accepted += rr.accepted();
      tally_->Report(ms, accepted);
    }
    StartRead(&in_);
  }
  void OnDone(const grpc::Status& s) override {
    if (!s.ok()) tally_->Error(s.error_code());
    std::lock_guard<std::mutex> lock(mu_);
    done_ = true;
    cv_.notify_all();
  }

 private:
  void WriteNextLocked() {
    if (writing_ || writes_done_) return;
    if (outbox_.empty()) {
      if (closing_) {
        writes_done_ = true;
        StartWritesDone();
      }
      return;
    }
    out_ = std::move(outbox_.front());
    outbox_.pop_front();
    writing_ = true;
    StartWrite(&out_);
  }

  Tally* tally_;
  grpc::ClientContext ctx_;
  v1::NodeReportRequest out_;
  v1::NodeReportResponse in_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<v1::NodeReportRequest> outbox_;
  std::map<int64_t, absl::Time> sent_at_;
  int64_t sent_ = 0, answered_ = 0;
  bool writing_ = false, closing_ = false, writes_done_ = false, done_ = false;
};

struct Node {
  int index = 0;
  std::string host;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<v1::Coordinator::Stub> stub;
  int64_t seq = 0;  // this node's results so far
};

// One unary call on the callback API: the context, messages and start time
// live until the callback runs, which gets the status and the latency.
template <typename Req, typename Resp>
struct Call {
  grpc::ClientContext ctx;
  Req req;
  Resp resp;
  absl::Time start;
};

template <typename Req, typename Resp, typename Method, typename Done>
void Issue(const std::string& token, absl::Duration deadline, Req req,
           Method method, InFlight* inflight, Done done) {
  auto* call = new Call<Req, Resp>();
  call->req = std::move(req);
  call->ctx.AddMetadata("authorization", "Bearer " + token);
  call->ctx.set_deadline(absl::ToChronoTime(absl::Now() + deadline));
  call->start = absl::Now();
  inflight->Add();
  method(&call->ctx, &call->req, &call->resp,
         [call, done, inflight](grpc::Status s) {
           done(s, call->resp,
                absl::ToDoubleMilliseconds(absl::Now() - call->start));
           delete call;
           inflight->Done();
         });
}

}  // namespace

v1::Result LoadResult(const std::string& job_id, int rank, int64_t seq,
                      int nranks) {
  v1::Result r;
  r.set_job_id(job_id);
  r.set_attempt(1);
  r.mutable_case_()->set_seq(seq);
  // A result of realistic size: the case, statistics, bandwidth.
  r.mutable_case_()->set_spec_name("allreduce");
  r.mutable_case_()->set_size_bytes(int64_t{8} << (seq % 20));
  r.set_status(v1::OK);
  r.set_nranks(nranks);
  v1::Stats* st = r.mutable_stats();
  st->set_samples(20);
  st->set_iters_per_sample(10);
  st->set_median_s(1.25e-5);
  st->set_mean_s(1.3e-5);
  st->set_min_s(1.2e-5);
  st->set_max_s(1.6e-5);
  st->set_p95_s(1.5e-5);
  r.set_algbw_gbps(1.0 * (seq % 97));
  r.set_busbw_gbps(1.5 * (seq % 97));
  r.set_idempotency_key(absl::StrFormat("%s/1/%d/%d", job_id, rank, seq));
  return r;
}

nlohmann::json RunNodeFleet(const FleetArgs& a) {
  nlohmann::json out;
  const int nranks = a.nodes * a.ranks_per_node;
  out["nodes"] = a.nodes;
  out["ranks_per_node"] = a.ranks_per_node;
  out["ranks"] = nranks;
  out["interval_s"] = a.interval_s;
  out["results_per_node_per_interval"] = a.results_per_report;
  out["rendezvous_peers"] = a.peers;
  // Every node's connection is a descriptor here and one in the
  // coordinator (which raises its own limit the same way).
  rlimit nofile{};
  getrlimit(RLIMIT_NOFILE, &nofile);
  nofile.rlim_cur = nofile.rlim_max;
  setrlimit(RLIMIT_NOFILE, &nofile);

  const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  const bool pin = a.pin && cpus >= 2;
  std::vector<int> fleet_cpus;
  for (int c = 1; c < cpus; ++c) fleet_cpus.push_back(c);
  if (pin) PinThreads(getpid(), {0});  // the coordinator inherits CPU 0
  testing::ServeProcess serve(
      a.data_dir, {"--launcher", "external", "--max-ranks",
                   std::to_string(nranks), "--heartbeat-timeout", "30"});
  if (!serve.ok()) {
    out["error"] = "the coordinator did not start: " + serve.output();
    return out;
  }
  if (pin) {
    PinThreads(serve.pid(), {0});
    PinThreads(getpid(), fleet_cpus);
  }
  out["pinned"] = pin ? absl::StrFormat(
                            "coordinator on CPU 0, fleet on %d "
                            "other CPU(s)",
                            fleet_cpus.size())
                      : std::string("no (fewer than 2 CPUs)");
  const std::string admin = serve.admin_token();

  // The job: one plan over every rank of the fleet.
  std::string job_id, token;
  {
    v1::SubmitPlanRequest req;
    req.set_plan_yaml(testing::ReadFile(a.plan));
    req.set_nranks(nranks);
    req.set_request_id("fleet");
    auto stub = serve.Stub();
    auto resp = testing::Submit(*stub, admin, req);
    if (!resp.ok()) {
      out["error"] = "submit: " + resp.status().ToString();
      return out;
    }
    job_id = resp->job().job_id();
    token = resp->worker_token();
  }

  // One channel per node, as a node leader's: a local subchannel pool
  // keeps gRPC from sharing one connection between channels to the same
  // address.
  std::vector<Node> nodes(a.nodes);
  for (int i = 0; i < a.nodes; ++i) {
    grpc::ChannelArguments args;
    SetCoordinatorChannelArgs(&args);
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    nodes[i].index = i;
    nodes[i].host = absl::StrFormat("node-%05d", i);
    nodes[i].channel = grpc::CreateCustomChannel(
        serve.address(), grpc::InsecureChannelCredentials(), args);
    nodes[i].stub = v1::Coordinator::NewStub(nodes[i].channel);
  }
  // Connect first: the burst measures the coordinator, not TCP handshakes
  // made on demand (a real node's channel is up before its ranks are).
  for (auto& n : nodes) n.channel->GetState(/*try_to_connect=*/true);
  for (auto& n : nodes) {
    n.channel->WaitForConnected(
        absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
  }
  Tally tally;
  InFlight inflight;

  // Registration burst, then the rendezvous: every node registers its
  // ranks in one call, then asks for the rendezvous until it is ready.
  std::atomic<int> met{0};
  // Retries sleep on threads of their own, counted in flight; once the
  // burst is over (or given up) they stop.
  std::atomic<bool> stop_retries{false};
  auto retry = [&](absl::Duration wait, std::function<void()> again) {
    inflight.Add();
    std::thread([&, wait, again = std::move(again)] {
      absl::SleepFor(wait);
      if (!stop_retries.load()) again();
      inflight.Done();
    }).detach();
  };
  std::mutex met_mu;
  absl::Time last_met = absl::InfinitePast();
  std::vector<double> register_ms(a.nodes, 0);
  std::function<void(Node*, absl::Duration)> rendezvous;
  rendezvous = [&](Node* n, absl::Duration backoff) {
    v1::RendezvousNodeRequest req;
    req.set_job_id(job_id);
    req.set_attempt(1);
    req.set_peers(a.peers);
    for (int l = 0; l < a.ranks_per_node; ++l) {
      v1::RendezvousRequest* r = req.add_ranks();
      r->set_job_id(job_id);
      r->set_rank(n->index * a.ranks_per_node + l);
      r->set_attempt(1);
      r->set_host(n->host);
      r->set_address(absl::StrFormat("10.%d.%d.%d:%d", n->index / 65536,
                                     n->index / 256 % 256, n->index % 256,
                                     20000 + l));
      if (n->index == 0 && l == 0) r->set_blob(std::string(128, 'u'));
    }
    Issue<v1::RendezvousNodeRequest, v1::RendezvousResponse>(
        token, absl::Seconds(30), std::move(req),
        [n](auto* ctx, auto* rq, auto* rs, auto cb) {
          n->stub->async()->RendezvousNode(ctx, rq, rs, std::move(cb));
        },
        &inflight,
        [&, n, backoff](const grpc::Status& s, const v1::RendezvousResponse& r,
                        double) {
          if (!s.ok()) tally.Error(s.error_code());
          if (s.ok() && r.ready()) {
            std::lock_guard<std::mutex> lock(met_mu);
            last_met = absl::Now();
            ++met;
            return;
          }
          // Not ready (or failed): ask again after a jittered backoff,
          // from a thread of our own (never block gRPC's).
          const absl::Duration wait =
              backoff * (0.75 + 0.5 * (n->index % 7) / 6.0);
          retry(wait, [&, n, backoff] {
            rendezvous(n, std::min(backoff * 2, absl::Milliseconds(500)));
          });
        });
  };
  std::function<void(Node*, int)> register_node;
  register_node = [&](Node* n, int tries) {
    v1::RegisterNodeRequest req;
    req.set_job_id(job_id);
    req.set_node(n->host);
    for (int l = 0; l < a.ranks_per_node; ++l) {
      v1::RegisterRequest* r = req.add_ranks();
      r->set_job_id(job_id);
      r->set_rank(n->index * a.ranks_per_node + l);
      r->set_world_size(nranks);
      r->mutable_fingerprint()->set_host(n->host);
      r->mutable_fingerprint()->set_local_rank(l);
    }
    Issue<v1::RegisterNodeRequest, v1::RegisterNodeResponse>(
        token, absl::Seconds(30), std::move(req),
        [n](auto* ctx, auto* rq, auto* rs, auto cb) {
          n->stub->async()->RegisterNode(ctx, rq, rs, std::move(cb));
        },
        &inflight,
        [&, n, tries](const grpc::Status& s, const v1::RegisterNodeResponse&,
                      double ms) {
          if (s.ok()) {
            register_ms[n->index] = ms;
            rendezvous(n, absl::Milliseconds(100));
            return;
          }
          tally.Error(s.error_code());
          if (tries < 20) {
            retry(absl::Milliseconds(200),
                  [&, n, tries] { register_node(n, tries + 1); });
          }
        });
  };
  const absl::Time burst = absl::Now();
  for (auto& n : nodes) register_node(&n, 0);
  const absl::Time give_up = burst + absl::Seconds(120);
  while (met.load() < a.nodes && absl::Now() < give_up)
    absl::SleepFor(absl::Milliseconds(20));
  {
    std::lock_guard<std::mutex> lock(met_mu);
    out["register_all_s"] =
        met.load() == a.nodes ? absl::ToDoubleSeconds(last_met - burst) : -1.0;
  }
  out["nodes_met"] = met.load();
  stop_retries = true;
  inflight.WaitZero(absl::Seconds(60));
  out["register_call_p99_ms"] = testing::Percentile(register_ms, 99);
  out["rss_after_register_mib"] = testing::RssMiB(serve.pid());

  // The steady phase: once per interval per node (phases spread over the
  // interval), one report with the heartbeats of its ranks and the results
  // they made since the last one, as a node leader sends them. Each node's
  // request is built once and only its counters change.
  tally.ResetLatencies();
  std::vector<v1::NodeReportRequest> templates(a.nodes);
  for (int i = 0; i < a.nodes; ++i) {
    v1::NodeReportRequest& req = templates[i];
    req.set_job_id(job_id);
    for (int l = 0; l < a.ranks_per_node; ++l) {
      v1::HeartbeatRequest* hb = req.add_heartbeats();
      hb->set_job_id(job_id);
      hb->set_rank(i * a.ranks_per_node + l);
      hb->set_attempt(1);
    }
    // The node's results, spread over its ranks: one report per rank.
    for (int k = 0; k < a.results_per_report; ++k) {
      const int rank = i * a.ranks_per_node + k % a.ranks_per_node;
      if (k < a.ranks_per_node) {
        v1::ReportResultsRequest* rep = req.add_reports();
        rep->set_job_id(job_id);
        rep->set_rank(rank);
        rep->set_attempt(1);
      }
      *req.mutable_reports(k % a.ranks_per_node)->add_results() =
          LoadResult(job_id, rank, 0, nranks);
    }
  }
  // Each node's stream, opened before the clock starts.
  std::vector<std::unique_ptr<NodeStream>> streams;
  for (auto& n : nodes)
    streams.push_back(
        std::make_unique<NodeStream>(n.stub.get(), token, &tally));
  const double cpu_before = CpuSeconds(serve.pid());
  const absl::Time start = absl::Now();
  const absl::Time end = start + absl::Seconds(a.seconds);
  const absl::Duration period = absl::Seconds(a.interval_s);
  int64_t reports_sent = 0;
  for (int64_t round = 0;; ++round) {
    const absl::Time round_start = start + period * round;
    if (round_start >= end) break;
    for (int i = 0; i < a.nodes; ++i) {
      const absl::Time due = round_start + period * i / a.nodes;
      if (due >= end) break;
      absl::SleepFor(due - absl::Now());
      Node* n = &nodes[i];
      v1::NodeReportRequest req = templates[i];
      for (auto& hb : *req.mutable_heartbeats()) hb.set_ops(n->seq);
      for (auto& rep : *req.mutable_reports()) {
        for (auto& r : *rep.mutable_results()) {
          const int64_t seq = n->seq++;
          r.mutable_case_()->set_seq(seq);
          r.set_idempotency_key(
              absl::StrCat(job_id, "/1/", rep.rank(), "/", seq));
        }
      }
      ++reports_sent;
      req.set_seq(round);
      req.set_heartbeats_first(true);
      streams[i]->Send(std::move(req));
    }
  }
  int64_t unanswered = 0;
  for (auto& st : streams) st->Close();
  for (auto& st : streams) unanswered += st->Await(absl::Seconds(30));
  const bool drained = unanswered == 0;
  const double elapsed = absl::ToDoubleSeconds(absl::Now() - start);
  const double cpu = CpuSeconds(serve.pid()) - cpu_before;
  const double peak_rss = testing::PeakRssMiB(serve.pid());
  serve.Terminate();

  // Durability: every acknowledged result is in the store.
  int64_t stored = -1;
  if (auto store = Store::Open(a.data_dir + "/ringmaster.db"); store.ok()) {
    if (auto n = (*store)->CountResults(job_id, 1); n.ok()) stored = *n;
  }
  const std::vector<double> beats = tally.heartbeat_ms();
  const std::vector<double> rep = tally.report_ms();
  out["seconds"] = elapsed;
  out["node_reports_sent"] = reports_sent;
  // A node's heartbeats: answered when taken, before its results' commit.
  out["heartbeats_per_s"] = static_cast<double>(beats.size()) / elapsed;
  out["heartbeat_p50_ms"] = testing::Percentile(beats, 50);
  out["heartbeat_p99_ms"] = testing::Percentile(beats, 99);
  // Its results: answered once stored (the durable acknowledgement).
  out["report_p50_ms"] = testing::Percentile(rep, 50);
  out["report_p99_ms"] = testing::Percentile(rep, 99);
  out["records_per_s"] = static_cast<double>(tally.acked()) / elapsed;
  out["acked"] = tally.acked();
  out["stored"] = stored;
  out["durable"] = stored == tally.acked();
  out["errors"] = tally.errors() + unanswered;
  out["errors_by_code"] = tally.ErrorsByCode();
  if (!drained) out["reports_not_answered"] = unanswered;
  out["coordinator_cpu_s"] = cpu;
  out["coordinator_cpu_s_per_node_minute"] = cpu / (a.nodes * elapsed / 60);
  out["coordinator_cpu_share"] = cpu / elapsed;  // of one CPU
  out["coordinator_rss_mib"] = peak_rss;
  return out;
}

}  // namespace ringmaster
