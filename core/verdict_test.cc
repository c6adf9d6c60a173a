#include "core/verdict.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

namespace ringmaster {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A GEMM result of one rank (pattern one) on `host`.
v1::Result Gemm(int rank, double tflops, int nranks = 4) {
  v1::Result r;
  r.set_status(v1::OK);
  r.set_nranks(nranks);
  v1::Case* c = r.mutable_case_();
  c->set_spec_name("gemm");
  c->set_bench(v1::BENCH_GEMM);
  c->set_dtype(v1::BFLOAT16);
  c->set_pattern(v1::ONE_RANK);
  c->set_src_rank(rank);
  c->mutable_gemm()->set_m(8192);
  c->mutable_gemm()->set_n(8192);
  c->mutable_gemm()->set_k(8192);
  r.set_tflops(tflops);
  for (int i = 0; i < nranks; ++i) {
    r.mutable_provenance()->add_hosts(i < nranks / 2 ? "node-a" : "node-b");
  }
  return r;
}

v1::Result Pair(int a, int b, double gbps, double ceiling) {
  v1::Result r;
  r.set_status(v1::OK);
  r.set_nranks(4);
  v1::Case* c = r.mutable_case_();
  c->set_spec_name("p2p");
  c->set_bench(v1::BENCH_P2P);
  c->set_method(v1::COPY_ENGINE);
  c->set_direction(v1::WRITE);
  c->set_pattern(v1::PAIR);
  c->set_src_rank(a);
  c->set_dst_rank(b);
  c->set_size_bytes(256 << 20);
  r.set_bandwidth_gbps(gbps);
  r.set_ceiling_gbps(ceiling);
  r.set_ceiling_source("NVLink");
  for (int i = 0; i < 4; ++i) {
    r.mutable_provenance()->add_hosts(i < 2 ? "node-a" : "node-b");
  }
  return r;
}

Rules MustParse(const std::string& yaml) {
  auto r = ParseRulesYaml(yaml, "rules.yaml");
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : Rules{};
}

TEST(Verdict, FleetRuleNamesTheSlowGpuAndItsNode) {
  Rules rules = MustParse(R"(
name: fleet
rules:
  - name: gemm-fleet
    match: {bench: gemm, dtype: bfloat16}
    fleet_within: 10%
)");
  std::vector<v1::Result> results = {Gemm(0, 700), Gemm(1, 705), Gemm(2, 698),
                                     Gemm(3, 600)};
  VerdictReport v = Evaluate(rules, results, {});
  ASSERT_EQ(v.findings.size(), 4u);
  EXPECT_EQ(v.Failed(), 1);
  EXPECT_FALSE(v.Pass());
  for (const Finding& f : v.findings) {
    EXPECT_EQ(f.pass, f.subject != "rank 3") << f.subject;
    if (!f.pass) {
      EXPECT_EQ(f.hosts, std::vector<std::string>{"node-b"});
      EXPECT_THAT(f.expected, HasSubstr("fleet median 699"));
    }
  }
  const std::string text = RenderVerdict(v);
  EXPECT_THAT(text, HasSubstr(" node-a                       PASS"));
  EXPECT_THAT(text, HasSubstr(" node-b                       FAIL"));
  EXPECT_THAT(text, HasSubstr("rank 3 (node-b)"));
  EXPECT_THAT(
      text,
      HasSubstr(
          "# verdict: FAIL (1 of 4 checks failed; 4 result(s) checked for "
          "failure)"));
  // Within 10%: everyone passes.
  results[3].set_tflops(660);
  EXPECT_TRUE(Evaluate(rules, results, {}).Pass());
}

TEST(Verdict, AbsoluteCeilingAndBaselineRules) {
  Rules rules = MustParse(R"(
name: acceptance
rules:
  - name: nvlink
    match: {bench: p2p, method: ce}
    min_pct_of_ceiling: 80
  - name: floor
    match: {bench: p2p}
    min: 300
  - name: last-week
    match: {bench: p2p}
    baseline_within: 5%
)");
  std::vector<v1::Result> now = {Pair(0, 1, 390, 450), Pair(2, 3, 330, 450)};
  std::vector<v1::Result> base = {Pair(0, 1, 392, 450), Pair(2, 3, 389, 450)};
  VerdictReport v = Evaluate(rules, now, base);
  // pair 2->3: 73% of the ceiling (fail), above 300 (pass), 15% below its
  // baseline (fail); pair 0->1 passes all three.
  ASSERT_EQ(v.findings.size(), 6u);
  EXPECT_EQ(v.Failed(), 2);
  for (const Finding& f : v.findings) {
    if (f.subject == "pair 0->1") {
      EXPECT_TRUE(f.pass) << f.rule;
    } else {
      EXPECT_EQ(f.subject, "pair 2->3");
      EXPECT_EQ(f.pass, f.rule == "floor") << f.rule;
    }
  }
  const std::string text = RenderVerdict(v);
  EXPECT_THAT(text, HasSubstr("pair 2->3 (node-b)"));
  // One failing pair: both its ends are suspects (or the link between).
  std::vector<Suspect> both = PairSuspects(v);
  ASSERT_EQ(both.size(), 2u);
  EXPECT_EQ(both[0].rank, 2);
  EXPECT_EQ(both[1].rank, 3);
  EXPECT_THAT(text, HasSubstr("baseline 389"));
  // Without the baseline the rule checks nothing and says so.
  VerdictReport nb = Evaluate(rules, now, {});
  EXPECT_EQ(nb.Failed(), 1);
  EXPECT_THAT(RenderVerdict(nb), HasSubstr("no baseline"));
}

// Repeated runs (--rounds) are judged by each subject's median on both
// sides, as the fleet rule does: one noisy run of three does not fail a
// GPU against its baseline, a GPU slow in most runs does.
TEST(Verdict, BaselineRuleJudgesEachSubjectsMedianOverRepeatedRuns) {
  Rules rules = MustParse(R"(
rules:
  - {name: same-as-before, match: {bench: gemm}, baseline_within: 10%}
)");
  std::vector<v1::Result> base = {Gemm(0, 700), Gemm(0, 500), Gemm(0, 705),
                                  Gemm(1, 700), Gemm(1, 702), Gemm(1, 698)};
  // Rank 0: one run of three 30% under (a noise burst), median 698: pass.
  // Rank 1: two runs of three 20% under, median 560: fail.
  std::vector<v1::Result> now = {Gemm(0, 690), Gemm(0, 490), Gemm(0, 698),
                                 Gemm(1, 560), Gemm(1, 700), Gemm(1, 555)};
  VerdictReport v = Evaluate(rules, now, base);
  ASSERT_EQ(v.findings.size(), 2u);  // one check per subject, not per run
  for (const Finding& f : v.findings) {
    EXPECT_EQ(f.pass, f.subject == "rank 0") << f.subject;
    // The baseline side is its median too: 700, not the 500 run.
    EXPECT_THAT(f.expected, HasSubstr("baseline 700")) << f.subject;
  }
  EXPECT_THAT(RenderVerdict(v), HasSubstr("560 TFLOP/s"));
}

TEST(Verdict, FailedPairsPointAtTheRankTheyShare) {
  Rules rules = MustParse(R"(
rules:
  - {name: pairs, match: {bench: p2p}, fleet_within: 20%}
)");
  // Four ranks, every ordered pair; those with rank 2 run at half speed.
  std::vector<v1::Result> results;
  for (int a = 0; a < 4; ++a) {
    for (int b = 0; b < 4; ++b) {
      if (a != b)
        results.push_back(Pair(a, b, a == 2 || b == 2 ? 150 : 300, 0));
    }
  }
  VerdictReport v = Evaluate(rules, results, {});
  EXPECT_EQ(v.Failed(), 6);
  std::vector<Suspect> s = PairSuspects(v);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].rank, 2);
  EXPECT_EQ(s[0].host, "node-b");
  EXPECT_EQ(s[0].failed_pairs, 6);
  EXPECT_EQ(s[0].pairs, 6);
  EXPECT_THAT(RenderVerdict(v),
              HasSubstr("# suspect: rank 2 on node-b: in 6 of the failed pair "
                        "checks (6 of its 6 pair checks failed)"));
}

TEST(Verdict, ASlowRankCannotDragThePairFleetMedianToItsSpeed) {
  // Among 4 ranks half the ordered pairs have rank 2: at 0.65x the plain
  // median of the 12 pairs would be 247.5 and pass them all (floor 185.6).
  // The pairs' fleet median is the median over ranks of each rank's
  // median pair: 300.
  Rules rules = MustParse(R"(
rules:
  - {name: pairs, match: {bench: p2p}, fleet_within: 25%}
)");
  std::vector<v1::Result> results;
  for (int a = 0; a < 4; ++a) {
    for (int b = 0; b < 4; ++b) {
      if (a != b)
        results.push_back(Pair(a, b, a == 2 || b == 2 ? 195 : 300, 0));
    }
  }
  VerdictReport v = Evaluate(rules, results, {});
  EXPECT_EQ(v.Failed(), 6);
  for (const Finding& f : v.findings) {
    EXPECT_THAT(f.expected, HasSubstr("fleet median 300"));
    const bool with2 = f.ranks[0] == 2 || f.ranks[1] == 2;
    EXPECT_EQ(f.pass, !with2) << f.subject;
  }
  std::vector<Suspect> s = PairSuspects(v);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].rank, 2);
}

TEST(Verdict, FailedResultsFailTheirRankAndUnmatchedRulesAreNotApplicable) {
  Rules rules = MustParse(R"(
rules:
  - {name: gemm, match: {bench: gemm}, min: 1}
  - {name: allreduce, match: {collective: all_reduce}, min: 100}
)");
  v1::Result bad = Gemm(2, 0);
  bad.set_status(v1::FAILED);
  bad.mutable_failure()->set_reason(v1::DATA_MISMATCH);
  bad.mutable_failure()->set_rank(2);
  bad.mutable_failure()->set_detail("12 wrong elements");
  VerdictReport v = Evaluate(rules, {Gemm(0, 5), bad}, {});
  EXPECT_THAT(v.not_applicable, ElementsAre("allreduce"));
  EXPECT_EQ(v.Failed(), 1);
  EXPECT_FALSE(v.Pass());
  const std::string text = RenderVerdict(v);
  EXPECT_THAT(text, HasSubstr("data_mismatch: 12 wrong elements"));
  EXPECT_THAT(text, HasSubstr("rule allreduce (rules.yaml:4) matched no "
                              "result: not applicable"));
  EXPECT_THAT(text, HasSubstr("1 rule(s) not applicable here: allreduce"));
}

// A rule that matches nothing, or whose fleet is too small, neither fails
// nor passes a healthy run; the run's results are still checked.
TEST(Verdict, RulesThatMatchNothingAreNotApplicable) {
  Rules rules = MustParse(R"(
rules:
  - {name: gemm, match: {bench: gemm}, min: 1}
  - {name: allreduce, match: {collective: all_reduce}, min: 100}
  - {name: fleet, match: {bench: gemm}, fleet_within: 10%}
  - {name: gpu-only, match: {bench: gemm, backend: cuda}, min: 600}
)");
  VerdictReport v = Evaluate(rules, {Gemm(0, 5), Gemm(1, 5)}, {});
  EXPECT_TRUE(v.Pass()) << RenderVerdict(v);
  EXPECT_THAT(v.not_applicable, ElementsAre("allreduce", "fleet", "gpu-only"));
  EXPECT_EQ(v.results_checked, 2);
  EXPECT_THAT(RenderVerdict(v), HasSubstr("# verdict: PASS (0 of 2 checks"));
  // Nothing checked at all is not a pass.
  Rules none = MustParse(R"(
failures: false
rules:
  - {name: allreduce, match: {collective: all_reduce}, min: 100}
)");
  VerdictReport empty = Evaluate(none, {Gemm(0, 5)}, {});
  EXPECT_FALSE(empty.Pass());
  EXPECT_THAT(RenderVerdict(empty), HasSubstr("NOTHING CHECKED"));
}

TEST(Verdict, LowerIsBetterForLatencyAndAllRanksSplitPerGpu) {
  Rules rules = MustParse(R"(
rules:
  - {name: lat, match: {bench: latency}, max: 3000}
  - {name: hbm, match: {bench: triad}, fleet_within: 0.1, fleet_min_members: 2}
)");
  v1::Result lat = Pair(0, 1, 0, 0);
  lat.mutable_case_()->set_bench(v1::BENCH_LATENCY);
  lat.set_latency_ns(3500);
  v1::Result triad;
  triad.set_status(v1::OK);
  triad.set_nranks(2);
  triad.mutable_case_()->set_spec_name("triad");
  triad.mutable_case_()->set_bench(v1::BENCH_TRIAD);
  triad.mutable_case_()->set_pattern(v1::ALL_RANKS);
  triad.add_rank_bandwidth_gbps(4000);
  triad.add_rank_bandwidth_gbps(3000);
  triad.mutable_provenance()->add_hosts("h");
  triad.mutable_provenance()->add_hosts("h");
  VerdictReport v = Evaluate(rules, {lat, triad}, {});
  int failed_lat = 0, failed_gpu = 0;
  for (const Finding& f : v.findings) {
    if (f.rule == "lat" && !f.pass) ++failed_lat;
    if (f.rule == "hbm" && !f.pass) {
      ++failed_gpu;
      EXPECT_EQ(f.subject, "rank 1");
    }
  }
  EXPECT_EQ(failed_lat, 1);
  EXPECT_EQ(failed_gpu, 1);  // 3000 < 0.9 x median(4000, 3000) = 3150
}

TEST(Verdict, RulesFileErrorsNameLineFieldAndExpectation) {
  struct Bad {
    const char* yaml;
    const char* text;
  } cases[] = {
      {"rules:\n  - {name: a, min: fast}\n",
       "rules.yaml:2: rules[0].min: "
       "expected a number"},
      {"rules:\n  - {name: a, match: {bench: gpu}, min: 1}\n",
       "rules.yaml:2: rules[0].match.bench: expected one of"},
      {"rules:\n  - {name: a, fleet_within: lots}\n",
       "rules.yaml:2: rules[0].fleet_within: expected a share"},
      {"rules:\n  - {name: a, match: {bench: gemm}}\n",
       "rules.yaml:2: rules[0]: a rule needs an expectation"},
      {"rules:\n  - {name: a, mni: 1}\n",
       "rules.yaml:2: rules[0].mni: unknown key"},
      {"name: x\n", "rules.yaml:1: rules: expected a list"},
      {"rules: [\n", "rules.yaml:2: (yaml): invalid YAML"},
  };
  for (const Bad& b : cases) {
    auto r = ParseRulesYaml(b.yaml, "rules.yaml");
    ASSERT_FALSE(r.ok()) << b.yaml;
    EXPECT_THAT(std::string(r.status().message()), HasSubstr(b.text)) << b.yaml;
  }
}

TEST(Verdict, EveryCommittedRulesFileLoads) {
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(
           std::string(RINGMASTER_SOURCE_DIR) + "/rules")) {
    if (e.path().extension() != ".yaml") continue;
    auto r = LoadRules(e.path().string());
    EXPECT_TRUE(r.ok()) << r.status();
    if (r.ok()) {
      EXPECT_FALSE(r->rules.empty()) << e.path();
    }
    ++files;
  }
  EXPECT_GE(files, 2);
}

}  // namespace
}  // namespace ringmaster
