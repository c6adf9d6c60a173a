#include "cli/report_commands.h"

#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "cli/run_command.h"
#include "coordinator/store.h"
#include "coordinator/supervisor.h"
#include "core/compare.h"
#include "core/html_report.h"
#include "core/report.h"
#include "core/result_io.h"
#include "core/topology.h"
#include "core/verdict.h"
#include "nlohmann/json.hpp"

namespace ringmaster {
namespace {

int Fail(const std::string& message, int code = kExitUsage) {
  std::cerr << "ringmaster: error: " << message << "\n";
  return code;
}

// The jobs of the stores beside `inputs` (a `--out` root holds
// ringmaster.db; a job folder or a results file sits below it), by id:
// their state, failure and case count, which results alone do not say.
std::map<std::string, v1::Job> StoredJobs(
    const std::vector<std::string>& inputs) {
  namespace fs = std::filesystem;
  std::set<std::string> dbs;
  for (const std::string& in : inputs) {
    std::error_code ec;
    fs::path p = fs::weakly_canonical(in, ec);
    if (ec) continue;
    if (!fs::is_directory(p, ec)) p = p.parent_path();
    for (const fs::path& dir : {p, p.parent_path()}) {
      const fs::path db = dir / "ringmaster.db";
      if (fs::is_regular_file(db, ec)) dbs.insert(db.string());
    }
  }
  std::map<std::string, v1::Job> jobs;
  for (const std::string& db : dbs) {
    auto store = Store::Open(db);
    if (!store.ok()) continue;
    auto all = (*store)->AllJobs();
    if (!all.ok()) continue;
    for (auto& j : *all) jobs.emplace(j.job_id(), std::move(j));
  }
  return jobs;
}

// A job's end as its store has it: CANCELLED or FAILED with the reason,
// and the cases that never ran.
void ApplyStoredEnd(const v1::Job& job, int results, RunSummary* summary) {
  const int never_ran = job.cases_size() - results;
  const std::string not_run =
      never_ran > 0 && job.state() != v1::JOB_SUCCEEDED
          ? absl::StrFormat("; %d of %d cases never ran", never_ran,
                            job.cases_size())
          : "";
  if (job.state() == v1::JOB_CANCELLED) {
    summary->succeeded = false;
    summary->cancelled = true;
    summary->failure =
        (job.failure().detail().empty() ? std::string("cancelled")
                                        : job.failure().detail()) +
        not_run;
  } else if (job.state() == v1::JOB_FAILED) {
    summary->succeeded = false;
    summary->failure = DescribeFailure(job.failure()) + not_run;
  }
}

// The terminal views: one section per job, as `ringmaster run` prints it,
// then the matrices, node summaries and scaling tables over everything.
void WriteView(const std::vector<v1::Result>& results,
               const std::string& format,
               const std::map<std::string, v1::Job>& stored = {}) {
  if (format == "jsonl") {
    JsonLinesReporter out(std::cout);
    for (const auto& r : results) out.Report(r);
    out.End({});
    return;
  }
  if (format == "csv") {
    CsvReporter out(std::cout);
    out.Begin({});
    for (const auto& r : results) out.Report(r);
    out.End({});
    return;
  }
  std::vector<std::string> jobs;
  std::map<std::string, std::vector<v1::Result>> by_job;
  for (const auto& r : results) {
    if (!by_job.count(r.job_id())) jobs.push_back(r.job_id());
    by_job[r.job_id()].push_back(r);
  }
  for (const auto& id : jobs) {
    const auto& v = by_job[id];
    RunContext ctx;
    ctx.job_id = id;
    ctx.plan_name = "results";
    for (const auto& r : v) ctx.nranks = std::max(ctx.nranks, r.nranks());
    ctx.provenance = v.front().provenance();
    ctx.backend = ctx.provenance.backend();
    ConsoleReporter out(std::cout);
    out.Begin(ctx);
    for (const auto& r : v) out.Report(r);
    RunSummary summary = Summarize(v);
    summary.succeeded = summary.failed_results == 0;
    if (!summary.succeeded) {
      summary.failure =
          absl::StrFormat("%d failed result(s)", summary.failed_results);
    }
    if (auto it = stored.find(id); it != stored.end())
      ApplyStoredEnd(it->second, static_cast<int>(v.size()), &summary);
    out.End(summary);
  }
  std::set<std::string> variants;
  for (const auto& r : results) variants.insert(r.case_().variant());
  std::cout << RenderSummaries(results, variants.size() > 1);
}

}  // namespace

int ReportCommand(const ReportOptions& o) {
  auto results = LoadResults(o.inputs);
  if (!results.ok()) return Fail(std::string(results.status().message()));
  if (results->empty()) return Fail("no results in the given inputs");
  std::vector<v1::Topology> topologies;
  for (const std::string& path : o.topologies) {
    auto t = LoadTopology(path);
    if (!t.ok()) return Fail(std::string(t.status().message()));
    topologies.push_back(*t);
  }
  const std::string format =
      o.format.empty() ? (o.html.empty() ? "text" : "") : o.format;
  // How each job ended, from the stores beside the inputs: both views say.
  const std::map<std::string, v1::Job> stored = StoredJobs(o.inputs);
  if (!format.empty()) WriteView(*results, format, stored);
  if (!o.html.empty()) {
    HtmlReportOptions h;
    h.title = o.title;
    h.generated_at = absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::Now(),
                                      absl::UTCTimeZone());
    h.sources = o.inputs;
    h.topologies = topologies;
    // Jobs that did not succeed, as their stores have them.
    std::map<std::string, int> per_job;
    for (const auto& r : *results) ++per_job[r.job_id()];
    for (const auto& [id, job] : stored) {
      auto n = per_job.find(id);
      if (n == per_job.end() || job.state() == v1::JOB_SUCCEEDED) continue;
      RunSummary end;
      ApplyStoredEnd(job, n->second, &end);
      if (!end.failure.empty()) {
        h.job_ends.push_back(absl::StrFormat(
            "job %s: %s: %s", id, end.cancelled ? "CANCELLED" : "FAILED",
            end.failure));
      }
    }
    const std::string html = RenderHtmlReport(*results, h);
    // Written beside, then renamed: a reader never sees half a report.
    const std::string tmp = o.html + ".tmp";
    {
      std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
      out << html;
      if (!out.flush()) return Fail(o.html + ": cannot write", kExitInternal);
    }
    std::error_code ec;
    std::filesystem::rename(tmp, o.html, ec);
    if (ec) return Fail(o.html + ": " + ec.message(), kExitInternal);
    std::cerr << absl::StrFormat(
        "ringmaster: report of %d result(s) written to %s (%d bytes)\n",
        results->size(), o.html, html.size());
  }
  return kExitOk;
}

// Keeps the results of `variant` (all when empty) and clears their variant,
// so that one variant's measurements match another's. An error names the
// variants there are.
absl::Status KeepVariant(const std::string& variant, const std::string& where,
                         std::vector<v1::Result>* results) {
  if (variant.empty()) return absl::OkStatus();
  std::set<std::string> seen;
  std::vector<v1::Result> kept;
  for (auto& r : *results) {
    seen.insert(r.case_().variant().empty() ? "(none)" : r.case_().variant());
    if (r.case_().variant() != variant) continue;
    r.mutable_case_()->clear_variant();
    kept.push_back(std::move(r));
  }
  if (kept.empty()) {
    return absl::NotFoundError(
        absl::StrFormat("%s: no results of variant %s (variants there: %s)",
                        where, variant, absl::StrJoin(seen, ", ")));
  }
  *results = std::move(kept);
  return absl::OkStatus();
}

// `compare --format json`: every figure, for pipelines.
void PrintCompareJson(const CompareCommandOptions& o,
                      const std::vector<MetricComparison>& rows,
                      std::map<Verdict, int>& counts,
                      const CompareSummary& summary, bool regressed,
                      bool inconclusive) {
  nlohmann::json out;
  out["alpha"] = o.alpha;
  out["threshold"] = o.threshold;
  if (!o.base_variant.empty()) out["base_variant"] = o.base_variant;
  if (!o.new_variant.empty()) out["new_variant"] = o.new_variant;
  for (const auto& m : rows) {
    out["metrics"].push_back({{"key", m.key},
                              {"metric", m.metric},
                              {"verdict", std::string(VerdictName(m.verdict))},
                              {"base_median_s", m.base_median_s},
                              {"new_median_s", m.new_median_s},
                              {"change", m.change},
                              {"ci95", {m.ci_low, m.ci_high}},
                              {"p_value", m.p_value},
                              {"base_samples", m.base_samples},
                              {"new_samples", m.new_samples},
                              {"base_results", m.base_results},
                              {"new_results", m.new_results},
                              {"note", m.note}});
  }
  for (const auto& [v, n] : counts)
    out["summary"][std::string(VerdictName(v))] = n;
  out["summary"]["verdict"] = std::string(VerdictName(summary.verdict));
  out["summary"]["median_change"] = summary.median_change;
  out["summary"]["metrics_timed"] = summary.metrics;
  out["summary"]["slower"] = summary.slower;
  out["summary"]["faster"] = summary.faster;
  out["summary"]["signed_rank_p"] = summary.p_value;
  out["summary"]["base_runs"] = summary.base_runs;
  out["summary"]["new_runs"] = summary.new_runs;
  out["summary"]["machine_change"] = summary.machine_change;
  out["summary"]["machine_p"] = summary.machine_p;
  out["summary"]["paired"] = summary.paired;
  out["regressed"] = regressed;
  out["inconclusive"] = inconclusive;
  std::cout << out.dump(1) << "\n";
}

int CompareCommand(const CompareCommandOptions& o) {
  auto base = LoadResults({o.base});
  if (!base.ok()) return Fail(std::string(base.status().message()));
  auto next = LoadResults({o.next});
  if (!next.ok()) return Fail(std::string(next.status().message()));
  if (absl::Status s = KeepVariant(o.base_variant, o.base, &*base); !s.ok())
    return Fail(std::string(s.message()));
  if (absl::Status s = KeepVariant(o.new_variant, o.next, &*next); !s.ok())
    return Fail(std::string(s.message()));
  if (base->empty() || next->empty())
    return Fail("no results on one side of the comparison");
  CompareOptions options;
  options.alpha = o.alpha;
  options.threshold = o.threshold;
  const auto rows = CompareResults(*base, *next, options);
  std::map<Verdict, int> counts;
  for (const auto& m : rows) ++counts[m.verdict];
  if (counts[Verdict::kMissing] + counts[Verdict::kAdded] ==
      static_cast<int>(rows.size())) {
    // A gate aimed at the wrong folder must not pass.
    return Fail(
        absl::StrFormat(
            "nothing to compare: none of the %d measurement(s) of %s "
            "matches one of the %d of %s (different plans, or the "
            "wrong folder?)",
            counts[Verdict::kMissing], o.base, counts[Verdict::kAdded], o.next),
        kExitNothingCompared);
  }
  const CompareSummary summary = SummarizeComparison(rows, options);
  int base_runs = 0;
  for (const auto& m : rows) base_runs = std::max(base_runs, m.base_runs);
  // Fewer than 3 base runs: the run-to-run noise is unknown, so slower
  // samples cannot be told from a slower machine moment. Failed results
  // still regress.
  const bool slower =
      counts[Verdict::kWorse] > 0 || summary.verdict == Verdict::kWorse;
  const bool inconclusive = slower && base_runs < 3;
  const bool regressed =
      counts[Verdict::kFailed] > 0 || (slower && !inconclusive);
  if (o.format == "json") {
    PrintCompareJson(o, rows, counts, summary, regressed, inconclusive);
    return regressed ? kExitJobFailed : kExitOk;
  }
  std::cout << absl::StrFormat(
      "# ringmaster compare: %s (%d results, %d run(s)) -> %s (%d results); "
      "time per operation, lower is better\n# a change counts when "
      "|change| >= %.1f%% and %s\n",
      o.base + (o.base_variant.empty() ? "" : " [" + o.base_variant + "]"),
      base->size(), base_runs,
      o.next + (o.new_variant.empty() ? "" : " [" + o.new_variant + "]"),
      next->size(), o.threshold * 100,
      base_runs >= 3
          ? absl::StrFormat("it is beyond the base runs' run-to-run noise "
                            "(two-sided p < %g)",
                            o.alpha)
          : absl::StrFormat("Mann-Whitney U p < %g over the samples with the "
                            "95%% bootstrap CI excluding 0 (one base run: "
                            "run-to-run noise unknown; give 3+ runs)",
                            o.alpha));
  std::cout << absl::StrFormat("#%-7s %12s %12s %9s %20s %9s  %s\n", "verdict",
                               "base (us)", "new (us)", "change", "95% CI", "p",
                               "measurement");
  for (const auto& m : rows) {
    if (!o.all && m.verdict == Verdict::kSame) continue;
    std::cout << absl::StrFormat(
        " %-7s %12.3f %12.3f %+8.1f%% %20s %9.2g  %s%s\n",
        VerdictName(m.verdict), m.base_median_s * 1e6, m.new_median_s * 1e6,
        m.change * 100,
        absl::StrFormat("[%+.1f%%, %+.1f%%]", m.ci_low * 100, m.ci_high * 100),
        m.p_value, m.key, m.note.empty() ? "" : " (" + m.note + ")");
  }
  std::cout << absl::StrFormat(
      "# overall: median change %+.1f%% over %d timed metric(s) (%d slower, "
      "%d faster; signed-rank test p %.2g)%s -> %s\n",
      summary.median_change * 100, summary.metrics, summary.slower,
      summary.faster, summary.p_value,
      summary.machine_p >= 0
          ? absl::StrFormat("; runs %d -> %d, machine factor %+.1f%% (%s "
                            "p %.2g)",
                            summary.base_runs, summary.new_runs,
                            summary.machine_change * 100,
                            summary.paired
                                ? "interleaved runs, paired trimmed t test"
                                : "t test",
                            summary.machine_p)
          : "",
      VerdictName(summary.verdict));
  std::cout << absl::StrFormat(
      "# %d metric(s): %d same, %d better, %d worse, %d failed, %d missing, "
      "%d added -> %s\n",
      rows.size(), counts[Verdict::kSame], counts[Verdict::kBetter],
      counts[Verdict::kWorse], counts[Verdict::kFailed],
      counts[Verdict::kMissing], counts[Verdict::kAdded],
      regressed ? "REGRESSION"
      : inconclusive
          ? absl::StrFormat("INCONCLUSIVE: %d base run(s) cannot tell a "
                            "slowdown from run-to-run noise (give 3+ runs: "
                            "ringmaster run --rounds 3)",
                            base_runs)
          : "no regression");
  return regressed ? kExitJobFailed : kExitOk;
}

int VerdictCommand(const VerdictCommandOptions& o) {
  auto rules = LoadRules(o.rules);
  if (!rules.ok()) return Fail(std::string(rules.status().message()));
  auto results = LoadResults(o.inputs);
  if (!results.ok()) return Fail(std::string(results.status().message()));
  if (results->empty())
    return Fail("no results in " + absl::StrJoin(o.inputs, ", "));
  std::vector<v1::Result> baseline;
  if (!o.baseline.empty()) {
    auto b = LoadResults(o.baseline);
    if (!b.ok()) return Fail(std::string(b.status().message()));
    baseline = std::move(*b);
  } else if (rules->NeedsBaseline()) {
    return Fail(o.rules +
                ": a rule has baseline_within; give --baseline RESULTS");
  }
  const VerdictReport v = Evaluate(*rules, *results, baseline);
  if (o.format == "json") {
    nlohmann::json out;
    out["rules"] = v.rules_name;
    out["results"] = v.results;
    out["skipped"] = v.skipped;
    out["checks"] = v.findings.size();
    out["failed"] = v.Failed();
    out["results_checked"] = v.results_checked;
    out["not_applicable"] = v.not_applicable;
    out["pass"] = v.Pass();
    out["findings"] = nlohmann::json::array();
    for (const Finding& f : v.findings) {
      out["findings"].push_back(
          {{"subject", f.subject},
           {"kind", f.kind == SubjectKind::kGpu    ? "gpu"
                    : f.kind == SubjectKind::kPair ? "pair"
                                                   : "group"},
           {"hosts", f.hosts},
           {"rule", f.rule},
           {"measurement", f.measurement},
           {"metric", f.metric},
           {"value", f.value},
           {"expected", f.expected},
           {"pass", f.pass}});
    }
    out["notes"] = v.notes;
    std::cout << out.dump(1) << "\n";
  } else {
    std::cout << RenderVerdict(v);
  }
  return v.Pass() ? kExitOk : kExitJobFailed;
}

}  // namespace ringmaster
