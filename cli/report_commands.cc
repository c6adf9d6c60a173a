#include "cli/report_commands.h"

#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "cli/run_command.h"
#include "core/html_report.h"
#include "core/report.h"
#include "core/result_io.h"
#include "core/topology.h"

namespace ringmaster {
namespace {

int Fail(const std::string& message, int code = kExitUsage) {
  std::cerr << "ringmaster: error: " << message << "\n";
  return code;
}

// The terminal views: one section per job, as `ringmaster run` prints it,
// then the matrices, node summaries and scaling tables over everything.
void WriteView(const std::vector<v1::Result>& results,
               const std::string& format) {
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
    out.End(summary);
  }
  std::set<std::string> variants;
  for (const auto& r : results) variants.insert(r.case_().variant());
  if (variants.size() > 1)
    std::cout << "\n" << RenderVariantComparison(results);
  for (const std::string& part :
       {RenderBenchMatrices(results), RenderNodeSummary(results),
        RenderTrainScaling(results)}) {
    if (!part.empty()) std::cout << "\n" << part;
  }
}

}  // namespace

int ReportCommand(const ReportOptions& o) {
  auto results = LoadResults(o.inputs);
  if (!results.ok()) return Fail(std::string(results.status().message()));
  if (results->empty()) return Fail("no results in the given inputs");
  std::optional<v1::Topology> topology;
  if (!o.topology.empty()) {
    auto t = LoadTopology(o.topology);
    if (!t.ok()) return Fail(std::string(t.status().message()));
    topology = *t;
  }
  const std::string format =
      o.format.empty() ? (o.html.empty() ? "text" : "") : o.format;
  if (!format.empty()) WriteView(*results, format);
  if (!o.html.empty()) {
    HtmlReportOptions h;
    h.title = o.title;
    h.generated_at = absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::Now(),
                                      absl::UTCTimeZone());
    h.sources = o.inputs;
    h.topology = topology ? &*topology : nullptr;
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

}  // namespace ringmaster
