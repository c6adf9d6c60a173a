#include "core/report.h"

#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <map>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/names.h"
#include "core/units.h"

namespace ringmaster {
namespace {

std::string_view ModeName(v1::TimingMode m) {
  switch (m) {
    case v1::PER_OP: return "per-op";
    case v1::GRAPH: return "graph";
    default: return "pipelined";
  }
}

std::string OpText(const v1::Case& c) {
  return IsReduction(c.collective()) ? std::string(ReduceOpName(c.op())) : "-";
}

// One table section per case spec, collective, type, op, mode, ranks and
// variant: the line that introduces it.
std::string Group(const v1::Result& r) {
  const v1::Case& c = r.case_();
  std::string g = absl::StrFormat("%s: %s %s %s | %s timing | %d ranks", c.spec_name(),
                                  CollectiveName(c.collective()), DataTypeName(c.dtype()),
                                  OpText(c), ModeName(r.timing_mode()), r.nranks());
  if (!c.variant().empty()) {
    g += " | variant " + c.variant();
    if (c.ceiling_gbps() > 0) g += absl::StrFormat(" (ceiling %.4g GB/s)", c.ceiling_gbps());
  }
  return g;
}

std::string CsvField(std::string_view s) {
  if (s.find_first_of(",\"\n") == std::string_view::npos) return std::string(s);
  std::string out = "\"";
  for (char ch : s) {
    if (ch == '"') out += '"';
    out += ch;
  }
  return out + "\"";
}

}  // namespace

double RelativeCi(const v1::Stats& s) {
  if (!s.ci_on_median()) return s.mean_s() > 0 ? s.ci95_half_width_s() / s.mean_s() : -1;
  if (s.median_ci95_high_s() <= 0 || s.median_s() <= 0) return -1;
  return (s.median_ci95_high_s() - s.median_ci95_low_s()) / 2 / s.median_s();
}

void ConsoleReporter::Begin(const RunContext& context) {
  out_ << absl::StrFormat("# ringmaster %s | job %s | %d ranks | backend %s\n",
                          context.plan_name, context.job_id, context.nranks,
                          context.backend);
  const auto& p = context.provenance;
  if (!p.hosts().empty()) {
    std::vector<std::string> ranks;
    for (int i = 0; i < p.hosts_size(); ++i) {
      std::string gpu = i < p.gpu_models_size() && !p.gpu_models(i).empty()
                            ? " " + p.gpu_models(i)
                            : "";
      ranks.push_back(absl::StrFormat("%d:%s%s", i, p.hosts(i), gpu));
    }
    out_ << "# ranks: " << absl::StrJoin(ranks, ", ") << "\n";
  }
  if (!p.nccl_version().empty()) {
    out_ << absl::StrFormat("# nccl %s | cuda runtime %s | driver %s\n",
                            p.nccl_version(), p.cuda_runtime_version(),
                            p.driver_version());
  }
  out_.flush();
}

void ConsoleReporter::Header() {
  out_ << absl::StrFormat("#%12s %12s %9s %6s %5s %10s %10s %9s %9s %7s %5s %6s %5s %s\n",
                          "size", "count", "type", "redop", "place", "time", "p99",
                          "algbw", "busbw", "#wrong", "n", "ci95", "skew", " nccl");
  out_ << absl::StrFormat("#%12s %12s %9s %6s %5s %10s %10s %9s %9s %7s %5s %6s %5s\n",
                          "(B)", "(elements)", "", "", "", "(us)", "(us)", "(GB/s)",
                          "(GB/s)", "", "", "(%)", "");
}

void ConsoleReporter::Report(const v1::Result& r) {
  std::string group = Group(r);
  if (group != last_group_) {
    out_ << "#\n# " << group << "\n";
    Header();
    last_group_ = group;
  }
  const v1::Case& c = r.case_();
  std::string prefix = absl::StrFormat(
      " %12d %12d %9s %6s %5s", c.size_bytes(), c.count(), DataTypeName(c.dtype()),
      OpText(c), c.in_place() ? "in" : "out");
  if (r.status() != v1::OK) {
    out_ << prefix
         << absl::StrFormat("  FAILED %s%s%s\n",
                            FailureReasonName(r.failure().reason()),
                            r.failure().rank() >= 0
                                ? absl::StrFormat(" rank %d", r.failure().rank())
                                : "",
                            r.failure().detail().empty()
                                ? ""
                                : ": " + r.failure().detail());
  } else {
    const v1::Stats& s = r.stats();
    double ci = RelativeCi(s);
    std::string ci_text = ci < 0 ? "n/a" : absl::StrFormat("%.2f", 100 * ci);
    std::string wrong =
        r.wrong_elements() < 0 ? "N/A" : absl::StrFormat("%d", r.wrong_elements());
    out_ << prefix
         << absl::StrFormat(" %10.2f %10.2f %9.2f %9.2f %7s %5d %6s %5.2f%s\n",
                            s.median_s() * 1e6, s.p99_s() * 1e6, r.algbw_gbps(),
                            r.busbw_gbps(), wrong, s.samples(), ci_text, r.straggler_ratio(),
                            r.nccl_algorithm().empty()
                                ? ""
                                : absl::StrFormat("  %s/%s/%d", r.nccl_algorithm(),
                                                  r.nccl_protocol(), r.nccl_channels()));
  }
  out_.flush();
}

void ConsoleReporter::End(const RunSummary& summary) {
  out_ << absl::StrFormat("# results: %d (%d failed)\n", summary.results,
                          summary.failed_results);
  out_ << absl::StrFormat("# Avg bus bandwidth    : %g GB/s\n",
                          summary.avg_busbw_gbps);
  if (summary.succeeded) {
    out_ << "# status: SUCCEEDED\n";
  } else {
    out_ << "# status: FAILED: " << summary.failure << "\n";
  }
  out_.flush();
}

std::string ResultToJson(const v1::Result& result) {
  std::string json;
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  auto status = google::protobuf::util::MessageToJsonString(result, &json, options);
  if (!status.ok()) return "{}";
  return json;
}

void JsonLinesReporter::Report(const v1::Result& result) {
  out_ << ResultToJson(result) << "\n";
}

void CsvReporter::Begin(const RunContext& context) {
  out_ << "job_id,seq,case,collective,dtype,op,size_bytes,count,placement,"
          "nranks,timing_mode,variant,status,failure,time_us,min_us,p95_us,p99_us,"
          "stddev_us,ci95_us,median_ci95_low_us,median_ci95_high_us,samples,"
          "iters_per_sample,algbw_gbps,busbw_gbps,pct_of_ceiling,wrong_elements,"
          "straggler_ratio,straggler_rank,nccl_algorithm,nccl_protocol,nccl_channels\n";
}

void CsvReporter::Report(const v1::Result& r) {
  const v1::Case& c = r.case_();
  const v1::Stats& s = r.stats();
  std::string failure =
      r.status() == v1::OK ? "" : std::string(FailureReasonName(r.failure().reason()));
  out_ << absl::StrFormat(
      "%s,%d,%s,%s,%s,%s,%d,%d,%s,%d,%s,%s,%s,%s,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f,%d,"
      "%d,%.6f,%.6f,%.3f,%d,%.4f,%d,%s,%s,%d\n",
      CsvField(r.job_id()), c.seq(), CsvField(c.spec_name()),
      CollectiveName(c.collective()), DataTypeName(c.dtype()), OpText(c),
      c.size_bytes(), c.count(), c.in_place() ? "in_place" : "out_of_place",
      r.nranks(), ModeName(r.timing_mode()), CsvField(c.variant()),
      r.status() == v1::OK ? "ok" : "failed", failure,
      s.median_s() * 1e6, s.min_s() * 1e6, s.p95_s() * 1e6, s.p99_s() * 1e6,
      s.stddev_s() * 1e6, s.ci95_half_width_s() * 1e6, s.median_ci95_low_s() * 1e6,
      s.median_ci95_high_s() * 1e6, s.samples(), s.iters_per_sample(),
      r.algbw_gbps(), r.busbw_gbps(), r.pct_of_ceiling(), r.wrong_elements(),
      r.straggler_ratio(), r.straggler_rank(), r.nccl_algorithm(), r.nccl_protocol(),
      r.nccl_channels());
}

std::string RenderVariantComparison(const std::vector<v1::Result>& results) {
  // Variants in order of first appearance, rows likewise.
  std::vector<std::string> variants;
  std::vector<std::string> row_keys;
  std::map<std::string, const v1::Case*> row_case;
  std::map<std::string, int> row_nranks;
  std::map<std::pair<std::string, std::string>, const v1::Result*> cell;
  std::map<std::string, double> ceilings;
  for (const auto& r : results) {
    const v1::Case& c = r.case_();
    if (std::find(variants.begin(), variants.end(), c.variant()) == variants.end()) {
      variants.push_back(c.variant());
      ceilings[c.variant()] = c.ceiling_gbps();
    }
    std::string key = absl::StrFormat("%s|%d|%d|%d|%d|%d|%d|%d", c.spec_name(), c.collective(),
                                      c.dtype(), c.op(), c.size_bytes(), c.in_place(),
                                      c.nranks(), c.timing().mode());
    if (!row_case.count(key)) {
      row_keys.push_back(key);
      row_case[key] = &c;
      row_nranks[key] = r.nranks();
    }
    cell[{key, c.variant()}] = &r;
  }
  std::string out = "# interconnect variants: busbw (GB/s) and % of each path's ceiling\n";
  out += absl::StrFormat("#%-24s %12s %5s %5s %9s", "collective", "size (B)", "place", "ranks",
                         "mode");
  for (const auto& v : variants) {
    std::string head = v.empty() ? "(default)" : v;
    if (ceilings[v] > 0) head += absl::StrFormat(" /%.4g", ceilings[v]);
    out += absl::StrFormat(" %20s", head);
  }
  out += "\n";
  for (const auto& key : row_keys) {
    const v1::Case& c = *row_case[key];
    const int nranks = row_nranks[key];
    out += absl::StrFormat(" %-24s %12d %5s %5d %9s",
                           absl::StrFormat("%s %s %s", CollectiveName(c.collective()),
                                           DataTypeName(c.dtype()), OpText(c)),
                           c.size_bytes(), c.in_place() ? "in" : "out", nranks,
                           ModeName(c.timing().mode()));
    for (const auto& v : variants) {
      auto it = cell.find({key, v});
      std::string text = "-";
      if (it != cell.end()) {
        const v1::Result& r = *it->second;
        if (r.status() != v1::OK) {
          text = std::string("FAILED ") + std::string(FailureReasonName(r.failure().reason()));
        } else if (r.pct_of_ceiling() > 0) {
          text = absl::StrFormat("%.2f (%5.1f%%)", r.busbw_gbps(), r.pct_of_ceiling());
        } else {
          text = absl::StrFormat("%.2f", r.busbw_gbps());
        }
      }
      out += absl::StrFormat(" %20s", text);
    }
    out += "\n";
  }
  return out;
}

RunSummary Summarize(const std::vector<v1::Result>& results) {
  RunSummary s;
  double sum = 0;
  int ok = 0;
  for (const auto& r : results) {
    ++s.results;
    if (r.status() == v1::OK) {
      sum += r.busbw_gbps();
      ++ok;
    } else {
      ++s.failed_results;
    }
  }
  s.avg_busbw_gbps = ok > 0 ? sum / ok : 0;
  return s;
}

}  // namespace ringmaster
