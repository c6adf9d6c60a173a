// S3 fuzz target: result ingestion. JSON Lines results (as `ringmaster
// report` and `compare` read them from files anyone may hand over) are
// parsed and rendered into every view: the text summaries, the HTML
// report with its SVG plots, and a comparison against themselves.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/compare.h"
#include "core/html_report.h"
#include "core/report.h"
#include "core/result_io.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  std::vector<ringmaster::v1::Result> results;
  size_t start = 0;
  while (start < text.size() && results.size() < 64) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    auto r = ringmaster::ParseResultLine(text.substr(start, end - start));
    if (r.ok()) results.push_back(*r);
    start = end + 1;
  }
  if (results.empty()) return 0;
  (void)ringmaster::RenderSummaries(results, /*variants=*/true);
  ringmaster::HtmlReportOptions options;
  (void)ringmaster::RenderHtmlReport(results, options);
  ringmaster::CompareOptions compare;
  compare.bootstrap = 50;  // the statistics, not their precision
  (void)ringmaster::CompareResults(results, results, compare);
  return 0;
}
