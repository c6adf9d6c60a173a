#include "worker/kinds/find_slow.h"

#include <algorithm>

#include "core/find_slow.h"
#include "core/stats.h"
#include "worker/kinds/node_bench_kind.h"

namespace ringmaster {
namespace {

// Members and the rank that stands for each: every rank, or each node's
// first rank (members: nodes).
void Members(const v1::Case& c, const std::vector<std::string>& hosts, int n,
             std::vector<int>* rep, std::vector<std::string>* member_host) {
  auto host_of = [&](int r) {
    return r < static_cast<int>(hosts.size()) ? hosts[r] : std::string();
  };
  for (int r = 0; r < n; ++r) {
    const std::string h = host_of(r);
    if (c.members() == "nodes" &&
        std::find(member_host->begin(), member_host->end(), h) !=
            member_host->end()) {
      continue;
    }
    member_host->push_back(h);
    rep->push_back(r);
  }
}

class FindSlowKind : public NodeBenchKind {
 public:
  v1::Result Run(const v1::Case& c, CaseEnv& env) override {
    v1::Result result;
    NodeBench* bench = BenchFor(c, env, &result);
    if (bench == nullptr) return result;
    return RunFindSlow(c, *bench, env.world_control(), env.hosts());
  }
};

RINGMASTER_REGISTER_KIND("find_slow", FindSlowKind);

}  // namespace

v1::Result RunFindSlow(const v1::Case& c, NodeBench& bench, Control& control,
                       const std::vector<std::string>& hosts) {
  const int n = control.size();
  std::vector<int> rep;
  std::vector<std::string> member_host;
  Members(c, hosts, n, &rep, &member_host);
  const double ratio = c.slow_ratio() > 0 ? c.slow_ratio() : 0.8;
  SlowMemberSearch search(static_cast<int>(rep.size()), ratio, c.repeat());
  v1::Result result;
  *result.mutable_case_() = c;
  result.set_nranks(n);
  result.set_timing_mode(v1::PIPELINED);
  result.set_wrong_elements(-1);
  std::vector<double> pair_times;
  while (auto t = search.Next()) {
    v1::Case pc = c;
    pc.set_bench(v1::BENCH_P2P);
    pc.set_pattern(v1::PAIR);
    pc.set_src_rank(rep[t->a]);
    pc.set_dst_rank(rep[t->b]);
    v1::Result pr = RunBench(pc, bench, control);
    // Rank 0 holds the figure; every rank needs it to walk the same pairs.
    double gbps = pr.status() == v1::OK ? pr.bandwidth_gbps() : 0;
    if (absl::Status st = control.Broadcast(&gbps, sizeof gbps, 0); !st.ok()) {
      result.set_status(v1::FAILED);
      result.mutable_failure()->set_reason(v1::BACKEND_ERROR);
      result.mutable_failure()->set_rank(-1);
      result.mutable_failure()->set_detail(st.ToString());
      return result;
    }
    if (pr.stats().median_s() > 0) pair_times.push_back(pr.stats().median_s());
    search.Record(gbps);
  }
  v1::FindSlowFigures f = search.figures();
  f.set_members(c.members().empty() ? "ranks" : c.members());
  for (auto& t : *f.mutable_tests()) {
    t.set_a_host(member_host[t.a()]);
    t.set_b_host(member_host[t.b()]);
  }
  for (int m : f.slow()) f.add_slow_hosts(member_host[m]);
  SampleSummary summary = Summarize(pair_times);
  *result.mutable_stats() = ToProto(summary, 1, 0, false);
  result.set_bandwidth_gbps(f.reference_gbps());
  *result.mutable_find_slow() = f;
  result.set_status(v1::OK);
  for (int i = 0; i < f.slow_size(); ++i) {
    if (!f.confirmed(i)) continue;
    result.set_status(v1::FAILED);
    result.mutable_failure()->set_reason(v1::BELOW_FLOOR);
    result.mutable_failure()->set_rank(rep[f.slow(i)]);
    result.mutable_failure()->set_host(f.slow_hosts(i));
    result.mutable_failure()->set_detail(f.verdict());
    break;
  }
  return result;
}

}  // namespace ringmaster
