// `ringmaster report --html`: one self-contained HTML file (no network, no
// script library) with plots and a table under each: busbw against message
// size per collective, P2P heatmaps, node benchmark bars, scaling
// efficiency ladders, training-step breakdowns, predicted-vs-measured
// overlays, telemetry timelines; provenance at the top. docs/report.md.
#ifndef RINGMASTER_CORE_HTML_REPORT_H_
#define RINGMASTER_CORE_HTML_REPORT_H_

#include <string>
#include <vector>

#include "ringmaster/v1/result.pb.h"
#include "ringmaster/v1/topology.pb.h"

namespace ringmaster {

struct HtmlReportOptions {
  std::string title = "Ringmaster report";
  std::string generated_at;          // RFC 3339, shown at the top
  std::vector<std::string> sources;  // where the results came from
  // Collectives get the model's prediction on each of these systems as a
  // dashed series (the ranks spread over nodes of its GPU count, or part of
  // one node): NVLink vs PCIe vs InfiniBand vs RoCE side by side.
  std::vector<v1::Topology> topologies;
  // How jobs that did not succeed ended, shown first: "job J: FAILED:
  // worker_exit ...; 66 of 124 cases never ran".
  std::vector<std::string> job_ends;
};

std::string RenderHtmlReport(const std::vector<v1::Result>& results,
                             const HtmlReportOptions& options);

}  // namespace ringmaster

#endif  // RINGMASTER_CORE_HTML_REPORT_H_
