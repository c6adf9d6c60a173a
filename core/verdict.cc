#include "core/verdict.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/compare.h"
#include "core/labels.h"
#include "core/names.h"
#include "core/stats.h"
#include "core/status_macros.h"
#include "core/units.h"
#include "core/yaml_read.h"

namespace ringmaster {
namespace {

absl::Status Error(const std::string& file, const YAML::Node& node,
                   const std::string& field, const std::string& what) {
  const int line = node.Mark().is_null() ? 0 : node.Mark().line + 1;
  return absl::InvalidArgumentError(
      absl::StrFormat("%s:%d: %s: %s", file, line, field, what));
}

// "10%" or 0.1 -> 0.1; "80" or 80 -> 80 with `percent` false.
absl::StatusOr<double> Number(const std::string& file, const YAML::Node& n,
                              const std::string& field, bool fraction) {
  std::string text = n.IsScalar() ? n.Scalar() : "";
  bool pct = !text.empty() && text.back() == '%';
  if (pct) text.pop_back();
  double v = 0;
  if (text.empty() || !absl::SimpleAtod(text, &v) || !(v >= 0)) {
    return Error(file, n, field,
                 fraction ? "expected a share such as 10% or 0.1"
                          : "expected a number >= 0");
  }
  if (fraction && pct) v /= 100;
  if (!fraction && pct) {
    return Error(file, n, field, "expected a number (no %)");
  }
  return v;
}

bool LowerIsBetter(const v1::Result& r) {
  return r.case_().bench() == v1::BENCH_LATENCY ||
         r.case_().bench() == v1::BENCH_TRAIN ||
         r.case_().bench() == v1::BENCH_TRANSFORMER ||
         r.case_().bench() == v1::BENCH_INFERENCE;
}

// What the result measured, without who it was about (for fleet groups).
std::string FleetKey(const v1::Result& r) {
  const v1::Case& c = r.case_();
  if (c.bench() == v1::BENCH_COLLECTIVE || c.bench() == v1::BENCH_TRAIN ||
      c.bench() == v1::BENCH_TRANSFORMER || c.bench() == v1::BENCH_INFERENCE) {
    return CompareKey(r);
  }
  std::string key = absl::StrFormat("%s: %s", c.spec_name(), BenchLabel(c));
  if (c.bench() == v1::BENCH_GEMM) {
    absl::StrAppendFormat(&key, " %dx%dx%d", c.gemm().m(), c.gemm().n(),
                          c.gemm().k());
  } else {
    absl::StrAppend(&key, " ", FormatBytes(c.size_bytes()));
  }
  absl::StrAppendFormat(&key, ", %d ranks", r.nranks());
  if (!c.variant().empty()) absl::StrAppend(&key, ", variant ", c.variant());
  return key;
}

std::string Host(const v1::Result& r, int rank) {
  const auto& hosts = r.provenance().hosts();
  return rank >= 0 && rank < hosts.size() ? hosts[rank] : "?";
}

// One value about one subject.
struct Observation {
  SubjectKind kind;
  std::string subject;
  std::vector<std::string> hosts;
  std::vector<int> ranks;
  std::string measurement;  // FleetKey
  std::string key;          // measurement + subject (baseline matching)
  std::string metric;
  double value = 0;
  bool lower_better = false;
};

std::string Fmt(double v) { return absl::StrFormat("%.4g", v); }

// The result as one observation: about its pair, its one GPU, or (for
// collectives, training and every-rank benchmarks) its group of ranks.
Observation ObserveWhole(const v1::Result& r) {
  const v1::Case& c = r.case_();
  Observation o;
  o.measurement = FleetKey(r);
  o.lower_better = LowerIsBetter(r);
  switch (c.bench()) {
    case v1::BENCH_COLLECTIVE:
      o.metric = "GB/s";
      o.value = r.busbw_gbps();
      break;
    case v1::BENCH_LATENCY:
      o.metric = "ns";
      o.value = r.latency_ns();
      break;
    case v1::BENCH_GEMM:
      o.metric = "TFLOP/s";
      o.value = r.tflops();
      break;
    case v1::BENCH_TRAIN:
    case v1::BENCH_TRANSFORMER:
    case v1::BENCH_INFERENCE:  // the time per output token
      o.metric = "ms";
      o.value = r.stats().median_s() * 1e3;
      break;
    default:
      o.metric = "GB/s";
      o.value = r.bandwidth_gbps();
      break;
  }
  const bool node_bench =
      c.bench() != v1::BENCH_COLLECTIVE && c.bench() != v1::BENCH_TRAIN &&
      c.bench() != v1::BENCH_TRANSFORMER && c.bench() != v1::BENCH_INFERENCE &&
      c.bench() != v1::BENCH_FIND_SLOW;
  if (node_bench &&
      (c.pattern() == v1::PAIR || c.bench() == v1::BENCH_LATENCY)) {
    o.kind = SubjectKind::kPair;
    o.subject = absl::StrFormat("pair %d->%d", c.src_rank(), c.dst_rank());
    o.ranks = {c.src_rank(), c.dst_rank()};
    // In rank order; one host when both ends share it.
    o.hosts = {Host(r, c.src_rank())};
    if (Host(r, c.dst_rank()) != o.hosts[0]) {
      o.hosts.push_back(Host(r, c.dst_rank()));
    }
  } else if (node_bench &&
             (c.pattern() == v1::ONE_RANK || c.pattern() == v1::ONE_TO_ALL ||
              c.pattern() == v1::ALL_TO_ONE)) {
    const int rank =
        c.pattern() == v1::ALL_TO_ONE ? c.dst_rank() : c.src_rank();
    o.kind = SubjectKind::kGpu;
    o.subject = absl::StrFormat("rank %d", rank);
    o.hosts = {Host(r, rank)};
    o.ranks = {rank};
  } else {
    o.kind = SubjectKind::kGroup;
    o.subject = absl::StrFormat("ranks 0-%d", r.nranks() - 1);
    std::set<std::string> hosts;
    for (int i = 0; i < r.nranks(); ++i) hosts.insert(Host(r, i));
    o.hosts.assign(hosts.begin(), hosts.end());
  }
  o.key = o.measurement + " @ " + o.subject;
  return o;
}

// What the rules judge: the whole result, except a copy on every rank at
// once, whose per-rank bandwidths are each about that rank's GPU.
std::vector<Observation> Observe(const v1::Result& r) {
  const v1::Case& c = r.case_();
  Observation whole = ObserveWhole(r);
  // (Collectives and training have no pattern; the finder's ALL_RANKS
  // case is about its pair tests, GEMM's total is not per rank.)
  if (c.pattern() != v1::ALL_RANKS || c.bench() == v1::BENCH_GEMM ||
      c.bench() == v1::BENCH_FIND_SLOW ||
      r.rank_bandwidth_gbps_size() != r.nranks()) {
    return {whole};
  }
  std::vector<Observation> out;
  for (int i = 0; i < r.nranks(); ++i) {
    Observation o = whole;
    o.kind = SubjectKind::kGpu;
    o.subject = absl::StrFormat("rank %d", i);
    o.hosts = {Host(r, i)};
    o.ranks = {i};
    o.value = r.rank_bandwidth_gbps(i);
    o.key = o.measurement + " @ " + o.subject;
    out.push_back(std::move(o));
  }
  return out;
}

// Passes when `o` is no more than `share` worse than `ref` (worse: lower,
// or higher for lower-is-better metrics); the expectation, readable.
std::pair<bool, std::string> Within(const Observation& o, double ref,
                                    double share, const char* what) {
  const double bound = o.lower_better ? ref * (1 + share) : ref * (1 - share);
  const bool pass = o.lower_better ? o.value <= bound : o.value >= bound;
  return {pass, absl::StrFormat("%s %s (%s %s %s %s%%; %+.1f%%)",
                                o.lower_better ? "<=" : ">=", Fmt(bound), what,
                                Fmt(ref), o.lower_better ? "+" : "-",
                                Fmt(share * 100),
                                ref > 0 ? (o.value / ref - 1) * 100 : 0.0)};
}

// One observation per value of its `key` field (repeated runs of one
// subject's measurement): the last run's labels with the median of the
// runs' values.
std::map<std::string, Observation> MedianPer(
    const std::vector<const Observation*>& obs, std::string Observation::*key) {
  std::map<std::string, std::vector<double>> values;
  std::map<std::string, Observation> merged;
  for (const Observation* o : obs) {
    values[o->*key].push_back(o->value);
    merged[o->*key] = *o;
  }
  for (auto& [k, o] : merged) o.value = Median(values[k]);
  return merged;
}

}  // namespace

bool RuleMatch::Matches(const v1::Result& r) const {
  const v1::Case& c = r.case_();
  if (!spec.empty() && c.spec_name() != spec) return false;
  if (bench && c.bench() != *bench) return false;
  if (collective &&
      (c.bench() != v1::BENCH_COLLECTIVE || c.collective() != *collective))
    return false;
  if (method && c.method() != *method) return false;
  if (dtype && c.dtype() != *dtype) return false;
  if (pattern && c.pattern() != *pattern) return false;
  if (min_size > 0 && c.size_bytes() < min_size) return false;
  if (max_size > 0 && c.size_bytes() > max_size) return false;
  if (ranks && r.nranks() != *ranks) return false;
  if (!backend.empty()) {
    // "host (MPI)", "cuda (NCCL)": the backend the ranks ran on.
    const std::string& ran = r.provenance().backend();
    if (ran.rfind(backend, 0) != 0) return false;
  }
  return true;
}

bool Rules::NeedsBaseline() const {
  for (const Rule& r : rules) {
    if (r.baseline_within) return true;
  }
  return false;
}

int VerdictReport::Failed() const {
  int n = 0;
  for (const Finding& f : findings) n += f.pass ? 0 : 1;
  return n;
}

namespace {

// A rule's `match:` mapping: which results it judges.
absl::Status ParseMatch(const std::string& file, const YAML::Node& m,
                        const std::string& at, RuleMatch* match) {
  if (!m.IsMap()) return Error(file, m, at + ".match", "expected a map");
  for (const auto& kv : m) {
    const std::string k = kv.first.Scalar();
    const std::string f = at + ".match." + k;
    const YAML::Node v = kv.second;
    const std::string s = v.IsScalar() ? v.Scalar() : "";
    if (k == "spec") {
      match->spec = s;
    } else if (k == "bench") {
      match->bench = ParseBench(s);
      if (!match->bench) {
        return Error(file, v, f, "expected one of: " + BenchNames());
      }
    } else if (k == "collective") {
      match->collective = ParseCollective(s);
      if (!match->collective) {
        return Error(file, v, f, "expected one of: " + CollectiveNames());
      }
    } else if (k == "method") {
      match->method = ParseCopyMethod(s);
      if (!match->method) {
        return Error(file, v, f, "expected one of: " + CopyMethodNames());
      }
    } else if (k == "dtype") {
      match->dtype = ParseDataType(s);
      if (!match->dtype) {
        return Error(file, v, f, "expected one of: " + DataTypeNames());
      }
    } else if (k == "pattern") {
      match->pattern = ParseTransferPattern(s);
      if (!match->pattern) {
        return Error(file, v, f, "expected one of: " + TransferPatternNames());
      }
    } else if (k == "min_size" || k == "max_size") {
      auto b = ParseSizeBytes(s);
      if (!b.ok()) return Error(file, v, f, "expected a size such as 1GiB");
      (k == "min_size" ? match->min_size : match->max_size) = *b;
    } else if (k == "ranks") {
      int r = 0;
      if (!absl::SimpleAtoi(s, &r) || r < 1) {
        return Error(file, v, f, "expected a rank count >= 1");
      }
      match->ranks = r;
    } else if (k == "backend") {
      if (s != "host" && s != "cuda") {
        return Error(file, v, f, "expected host or cuda");
      }
      match->backend = s;
    } else {
      return Error(file, kv.first, f,
                   "unknown key (expected one of: spec, bench, "
                   "collective, method, dtype, pattern, min_size, "
                   "max_size, ranks, backend)");
    }
  }
  return absl::OkStatus();
}

// One entry of `rules:`, named `at` in messages.
absl::StatusOr<Rule> ParseRule(const std::string& file, const YAML::Node& n,
                               const std::string& at) {
  if (!n.IsMap()) return Error(file, n, at, "expected a map");
  Rule rule;
  rule.where = absl::StrFormat("%s:%d", file,
                               n.Mark().is_null() ? 0 : n.Mark().line + 1);
  for (const auto& kv : n) {
    static const std::set<std::string> kKeys = {"name",
                                                "match",
                                                "min",
                                                "max",
                                                "min_pct_of_ceiling",
                                                "fleet_within",
                                                "baseline_within",
                                                "fleet_min_members"};
    if (!kKeys.count(kv.first.Scalar())) {
      return Error(file, kv.first, at + "." + kv.first.Scalar(),
                   "unknown key (expected one of: name, match, min, max, "
                   "min_pct_of_ceiling, fleet_within, baseline_within, "
                   "fleet_min_members)");
    }
  }
  rule.name = n["name"] ? n["name"].Scalar() : at;
  if (YAML::Node m = n["match"]) {
    RM_RETURN_IF_ERROR(ParseMatch(file, m, at, &rule.match));
  }
  auto number = [&](const char* key, bool fraction,
                    std::optional<double>* out) -> absl::Status {
    if (YAML::Node v = n[key]) {
      auto x = Number(file, v, at + "." + key, fraction);
      if (!x.ok()) return x.status();
      *out = *x;
    }
    return absl::OkStatus();
  };
  for (auto s :
       {number("min", false, &rule.min), number("max", false, &rule.max),
        number("min_pct_of_ceiling", false, &rule.min_pct_of_ceiling),
        number("fleet_within", true, &rule.fleet_within),
        number("baseline_within", true, &rule.baseline_within)}) {
    if (!s.ok()) return s;
  }
  if (YAML::Node v = n["fleet_min_members"]) {
    int k = 0;
    if (!v.IsScalar() || !absl::SimpleAtoi(v.Scalar(), &k) || k < 2) {
      return Error(file, v, at + ".fleet_min_members",
                   "expected an integer >= 2");
    }
    rule.fleet_min_members = k;
  }
  if (!rule.min && !rule.max && !rule.min_pct_of_ceiling &&
      !rule.fleet_within && !rule.baseline_within) {
    return Error(file, n, at,
                 "a rule needs an expectation: min, max, "
                 "min_pct_of_ceiling, fleet_within or baseline_within");
  }
  return rule;
}

}  // namespace

absl::StatusOr<Rules> ParseRulesYaml(const std::string& text,
                                     const std::string& file) {
  auto loaded = LoadYamlDocument(text, file);
  if (!loaded.ok()) return loaded.status();
  YAML::Node root = *loaded;
  if (!root.IsMap()) {
    return Error(file, root, "(top)", "expected a map with name and rules");
  }
  Rules rules;
  for (const auto& kv : root) {
    const std::string k = kv.first.Scalar();
    if (k != "name" && k != "rules" && k != "failures" && k != "description") {
      return Error(file, kv.first, k,
                   "unknown key (expected one of: name, description, "
                   "failures, rules)");
    }
  }
  rules.name = root["name"] ? root["name"].Scalar() : file;
  if (YAML::Node f = root["failures"]) {
    std::string v = absl::AsciiStrToLower(f.IsScalar() ? f.Scalar() : "");
    if (v != "true" && v != "false") {
      return Error(file, f, "failures", "expected true or false");
    }
    rules.failures = v == "true";
  }
  YAML::Node list = root["rules"];
  if (!list || !list.IsSequence() || list.size() == 0) {
    return Error(file, list ? list : root, "rules", "expected a list of rules");
  }
  for (size_t i = 0; i < list.size(); ++i) {
    RM_ASSIGN_OR_RETURN(
        Rule rule, ParseRule(file, list[i], absl::StrFormat("rules[%d]", i)));
    rules.rules.push_back(std::move(rule));
  }
  return rules;
}

absl::StatusOr<Rules> LoadRules(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(path + ": cannot read");
  std::stringstream text;
  text << in.rdbuf();
  return ParseRulesYaml(text.str(), path);
}

namespace {

// Records `o` checked by `rule`: `pass`, against `expected`.
void AddFinding(const Rule& rule, const Observation& o, bool pass,
                const std::string& expected, VerdictReport* report) {
  Finding f;
  f.kind = o.kind;
  f.subject = o.subject;
  f.hosts = o.hosts;
  f.ranks = o.ranks;
  f.rule = rule.name;
  f.measurement = o.measurement;
  f.metric = o.metric;
  f.value = o.value;
  f.expected = expected;
  f.pass = pass;
  report->findings.push_back(std::move(f));
}

// A failed result fails the rank it names, else its subject.
void AddFailedResult(const v1::Result& r, VerdictReport* report) {
  Finding f;
  const Observation o = ObserveWhole(r);
  f.kind = o.kind;
  f.subject = o.subject;
  f.hosts = o.hosts;
  f.ranks = o.ranks;
  if (r.failure().rank() >= 0) {
    f.ranks = {r.failure().rank()};
    f.kind = SubjectKind::kGpu;
    f.subject = absl::StrFormat("rank %d", r.failure().rank());
    f.hosts = {r.failure().host().empty() ? Host(r, r.failure().rank())
                                          : r.failure().host()};
  }
  f.rule = "failures";
  f.measurement = o.measurement;
  f.pass = false;
  f.expected = absl::StrFormat(
      "OK; got %s %s: %s", r.status() == v1::FAILED ? "FAILED" : "?",
      FailureReasonName(r.failure().reason()), r.failure().detail());
  report->findings.push_back(std::move(f));
}

// min_pct_of_ceiling: each matched result's share of its path's ceiling.
void CheckCeiling(const Rule& rule,
                  const std::vector<const v1::Result*>& matched,
                  VerdictReport* report) {
  for (const v1::Result* r : matched) {
    const Observation whole = ObserveWhole(*r);
    const double ceiling =
        r->ceiling_gbps() > 0 ? r->ceiling_gbps() : r->case_().ceiling_gbps();
    if (ceiling <= 0) {
      report->notes.push_back(
          absl::StrFormat("rule %s: %s has no known ceiling; not checked",
                          rule.name, whole.measurement));
      continue;
    }
    const double pct = whole.value / ceiling * 100;
    Observation shown = whole;
    shown.metric = "% of ceiling";
    shown.value = pct;
    AddFinding(
        rule, shown, pct >= *rule.min_pct_of_ceiling,
        absl::StrFormat(
            ">= %s%% of %s GB/s (%s)", Fmt(*rule.min_pct_of_ceiling),
            Fmt(ceiling),
            r->ceiling_source().empty() ? "ceiling" : r->ceiling_source()),
        report);
  }
}

// fleet_within: each subject's median against the fleet's, per measurement.
void CheckFleet(const Rule& rule, const std::vector<Observation>& obs,
                VerdictReport* report) {
  std::map<std::string, std::vector<const Observation*>> groups;
  for (const Observation& o : obs) groups[o.measurement].push_back(&o);
  for (const auto& [m, members] : groups) {
    // One value per subject (repeated runs: their median).
    const std::map<std::string, Observation> per =
        MedianPer(members, &Observation::subject);
    if (static_cast<int>(per.size()) < rule.fleet_min_members) {
      report->notes.push_back(absl::StrFormat(
          "rule %s: %s has %d member(s), fewer than %d: not applicable",
          rule.name, m, per.size(), rule.fleet_min_members));
      continue;
    }
    std::vector<double> medians;
    for (const auto& [s, o] : per) medians.push_back(o.value);
    double fleet = Median(medians);
    // Pairs: the median over ranks of each rank's median pair. One slow
    // rank is in 2/n of the pairs (half of them among 4 ranks), enough
    // to drag the plain median of pairs to its own speed; it is one
    // rank's median of n.
    std::map<int, std::vector<double>> by_rank;
    bool pairs = true;
    for (const auto& [s, o] : per) {
      if (o.kind != SubjectKind::kPair || o.ranks.size() != 2) {
        pairs = false;
        break;
      }
      for (int r : o.ranks) by_rank[r].push_back(o.value);
    }
    if (pairs && by_rank.size() > 2) {
      std::vector<double> rank_medians;
      for (const auto& [r, v] : by_rank) rank_medians.push_back(Median(v));
      fleet = Median(rank_medians);
    }
    for (const auto& [s, o] : per) {
      const auto [pass, expected] =
          Within(o, fleet, *rule.fleet_within, "fleet median");
      AddFinding(rule, o, pass, expected, report);
    }
  }
}

// baseline_within: each subject's median against its baseline median.
void CheckBaseline(
    const Rule& rule, const std::vector<Observation>& obs,
    const std::map<std::string, std::vector<double>>& base_values,
    VerdictReport* report) {
  // One value per subject on each side (repeated runs: their median),
  // as the fleet rule takes it: one noisy run of several does not fail
  // a subject, a subject slower in most of them does.
  std::vector<const Observation*> all;
  int missing = 0;
  for (const Observation& o : obs) {
    all.push_back(&o);
    missing += base_values.count(o.key) == 0;
  }
  for (const auto& [key, o] : MedianPer(all, &Observation::key)) {
    auto it = base_values.find(key);
    if (it == base_values.end()) continue;
    const auto [pass, expected] =
        Within(o, Median(it->second), *rule.baseline_within, "baseline");
    AddFinding(rule, o, pass, expected, report);
  }
  if (missing > 0) {
    report->notes.push_back(absl::StrFormat(
        "rule %s: %d value(s) have no baseline for the same measurement "
        "and subject; not checked",
        rule.name, missing));
  }
}

// Every check of one rule over the OK results it matches.
void CheckRule(const Rule& rule, const std::vector<const v1::Result*>& ok,
               const std::map<std::string, std::vector<double>>& base_values,
               VerdictReport* report) {
  std::vector<Observation> obs;
  std::vector<const v1::Result*> matched;
  for (const v1::Result* r : ok) {
    if (!rule.match.Matches(*r)) continue;
    matched.push_back(r);
    for (Observation& o : Observe(*r)) obs.push_back(std::move(o));
  }
  if (matched.empty()) {
    report->notes.push_back(
        absl::StrFormat("rule %s (%s) matched no result: not applicable",
                        rule.name, rule.where));
    return;
  }
  for (const Observation& o : obs) {
    if (rule.min)
      AddFinding(rule, o, o.value >= *rule.min, ">= " + Fmt(*rule.min), report);
    if (rule.max)
      AddFinding(rule, o, o.value <= *rule.max, "<= " + Fmt(*rule.max), report);
  }
  if (rule.min_pct_of_ceiling) CheckCeiling(rule, matched, report);
  if (rule.fleet_within) CheckFleet(rule, obs, report);
  if (rule.baseline_within) CheckBaseline(rule, obs, base_values, report);
}

}  // namespace

VerdictReport Evaluate(const Rules& rules,
                       const std::vector<v1::Result>& results,
                       const std::vector<v1::Result>& baseline) {
  VerdictReport report;
  report.rules_name = rules.name;
  // Each subject's baseline value: the median over the baseline's results.
  std::map<std::string, std::vector<double>> base_values;
  for (const v1::Result& r : baseline) {
    if (r.status() != v1::OK) continue;
    for (const Observation& o : Observe(r))
      base_values[o.key].push_back(o.value);
  }
  std::vector<const v1::Result*> ok;
  for (const v1::Result& r : results) {
    ++report.results;
    if (r.status() == v1::SKIPPED) {
      ++report.skipped;
    } else if (r.status() == v1::OK) {
      ok.push_back(&r);
    } else if (rules.failures) {
      AddFailedResult(r, &report);
    }
  }
  if (rules.failures) report.results_checked = report.results - report.skipped;
  for (const Rule& rule : rules.rules) {
    const size_t before = report.findings.size();
    CheckRule(rule, ok, base_values, &report);
    // Nothing matched, or every fleet too small (or nothing with a
    // ceiling or a baseline): the rule checked nothing here.
    if (report.findings.size() == before)
      report.not_applicable.push_back(rule.name);
  }
  return report;
}

std::vector<Suspect> PairSuspects(const VerdictReport& report) {
  std::map<int, Suspect> by_rank;
  int most = 0;
  for (const Finding& f : report.findings) {
    if (f.kind != SubjectKind::kPair || f.ranks.size() != 2) continue;
    for (size_t i = 0; i < 2; ++i) {
      Suspect& s = by_rank[f.ranks[i]];
      s.rank = f.ranks[i];
      if (s.host.empty() && !f.hosts.empty()) {
        s.host = f.hosts[std::min(i, f.hosts.size() - 1)];
      }
      ++s.pairs;
      if (!f.pass) most = std::max(most, ++s.failed_pairs);
    }
  }
  std::vector<Suspect> out;
  for (const auto& [rank, s] : by_rank) {
    if (most > 0 && s.failed_pairs == most && 2 * s.failed_pairs > s.pairs) {
      out.push_back(s);
    }
  }
  return out;
}

std::string RenderVerdict(const VerdictReport& report) {
  std::string out = absl::StrFormat(
      "# ringmaster verdict: rules \"%s\" on %d result(s) (%d skipped): %d "
      "check(s), %d failed\n",
      report.rules_name, report.results, report.skipped, report.findings.size(),
      report.Failed());
  struct Tally {
    int checks = 0, failed = 0;
    const Finding* worst = nullptr;
  };
  auto line = [](const std::string& name, const Tally& t) {
    std::string evidence;
    if (t.worst) {
      const Finding& f = *t.worst;
      evidence = f.metric.empty()
                     ? absl::StrFormat("%s: %s: %s (rule %s)", f.subject,
                                       f.measurement, f.expected, f.rule)
                     : absl::StrFormat("%s: %s: %s %s, expected %s (rule %s)",
                                       f.subject, f.measurement, Fmt(f.value),
                                       f.metric, f.expected, f.rule);
    }
    return absl::StrFormat(" %-28s %-7s %6d %6d%s\n", name,
                           t.failed ? "FAIL" : "PASS", t.checks, t.failed,
                           evidence.empty() ? "" : "  " + evidence);
  };
  auto section = [&](const std::string& title,
                     const std::map<std::string, Tally>& tallies) {
    if (tallies.empty()) return;
    out += absl::StrFormat("# %s\n#%-28s %-7s %6s %6s  %s\n", title, title,
                           "verdict", "checks", "failed", "evidence");
    for (const auto& [name, t] : tallies) out += line(name, t);
  };
  std::map<std::string, Tally> nodes, gpus, pairs, groups;
  for (const Finding& f : report.findings) {
    auto count = [&](Tally& t) {
      ++t.checks;
      if (!f.pass) {
        ++t.failed;
        if (!t.worst) t.worst = &f;
      }
    };
    for (const std::string& h : f.hosts) count(nodes[h]);
    const std::string where =
        f.subject +
        (f.hosts.empty() ? "" : " (" + absl::StrJoin(f.hosts, ", ") + ")");
    switch (f.kind) {
      case SubjectKind::kGpu:
        count(gpus[where]);
        break;
      case SubjectKind::kPair:
        count(pairs[where]);
        break;
      case SubjectKind::kGroup:
        count(groups[where]);
        break;
    }
  }
  section("node", nodes);
  section("gpu", gpus);
  section("pair", pairs);
  section("group", groups);
  for (const Suspect& s : PairSuspects(report)) {
    out += absl::StrFormat(
        "# suspect: rank %d%s: in %d of the failed pair checks (%d of its %d "
        "pair checks failed)\n",
        s.rank, s.host.empty() ? "" : " on " + s.host, s.failed_pairs,
        s.failed_pairs, s.pairs);
  }
  if (report.Failed() > 0) out += "# failed checks\n";
  for (const Finding& f : report.findings) {
    if (f.pass) continue;
    out += f.metric.empty()
               ? absl::StrFormat(" FAIL %s [%s] %s: %s\n", f.subject,
                                 absl::StrJoin(f.hosts, ", "), f.measurement,
                                 f.expected)
               : absl::StrFormat(
                     " FAIL %s [%s] rule %s: %s: %s %s, expected "
                     "%s\n",
                     f.subject, absl::StrJoin(f.hosts, ", "), f.rule,
                     f.measurement, Fmt(f.value), f.metric, f.expected);
  }
  for (const std::string& n : report.notes) out += "# note: " + n + "\n";
  std::string also;
  if (report.results_checked > 0) {
    absl::StrAppendFormat(&also, "; %d result(s) checked for failure",
                          report.results_checked);
  }
  if (!report.not_applicable.empty()) {
    absl::StrAppendFormat(&also, "; %d rule(s) not applicable here: %s",
                          report.not_applicable.size(),
                          absl::StrJoin(report.not_applicable, ", "));
  }
  out += absl::StrFormat(
      "# verdict: %s (%d of %d checks failed%s)\n",
      report.Pass() ? "PASS" : (report.Checked() ? "FAIL" : "NOTHING CHECKED"),
      report.Failed(), report.findings.size(), also);
  return out;
}

}  // namespace ringmaster
