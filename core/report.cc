#include "core/report.h"

#include <google/protobuf/util/json_util.h>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/names.h"
#include "core/units.h"

namespace ringmaster {
namespace {

std::string Group(const v1::Result& r) {
  const v1::Case& c = r.case_();
  return absl::StrFormat("%s %s %s %s", c.spec_name(),
                         CollectiveName(c.collective()), DataTypeName(c.dtype()),
                         ReduceOpName(c.op()));
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
  out_ << absl::StrFormat("#%12s %12s %9s %6s %5s %10s %9s %9s %7s %5s %6s\n",
                          "size", "count", "type", "redop", "place", "time",
                          "algbw", "busbw", "#wrong", "n", "ci95");
  out_ << absl::StrFormat("#%12s %12s %9s %6s %5s %10s %9s %9s %7s %5s %6s\n",
                          "(B)", "(elements)", "", "", "", "(us)", "(GB/s)",
                          "(GB/s)", "", "", "(%)");
}

void ConsoleReporter::Report(const v1::Result& r) {
  std::string group = Group(r);
  if (group != last_group_) {
    out_ << absl::StrFormat("#\n# %s (%s timing)\n",
                            absl::StrFormat("%s: %s %s %s", r.case_().spec_name(),
                                            CollectiveName(r.case_().collective()),
                                            DataTypeName(r.case_().dtype()),
                                            ReduceOpName(r.case_().op())),
                            r.timing_mode() == v1::PIPELINED ? "pipelined"
                                                             : "unspecified");
    Header();
    last_group_ = group;
  }
  const v1::Case& c = r.case_();
  std::string prefix = absl::StrFormat(
      " %12d %12d %9s %6s %5s", c.size_bytes(), c.count(), DataTypeName(c.dtype()),
      ReduceOpName(c.op()), c.in_place() ? "in" : "out");
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
    double ci_pct = s.mean_s() > 0 ? 100.0 * s.ci95_half_width_s() / s.mean_s() : 0;
    std::string wrong =
        r.wrong_elements() < 0 ? "N/A" : absl::StrFormat("%d", r.wrong_elements());
    out_ << prefix
         << absl::StrFormat(" %10.2f %9.2f %9.2f %7s %5d %6.2f\n",
                            s.median_s() * 1e6, r.algbw_gbps(), r.busbw_gbps(),
                            wrong, s.samples(), ci_pct);
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
          "nranks,status,failure,time_us,min_us,p95_us,stddev_us,ci95_us,"
          "samples,iters_per_sample,algbw_gbps,busbw_gbps,wrong_elements\n";
}

void CsvReporter::Report(const v1::Result& r) {
  const v1::Case& c = r.case_();
  const v1::Stats& s = r.stats();
  std::string failure =
      r.status() == v1::OK ? "" : std::string(FailureReasonName(r.failure().reason()));
  out_ << absl::StrFormat(
      "%s,%d,%s,%s,%s,%s,%d,%d,%s,%d,%s,%s,%.4f,%.4f,%.4f,%.4f,%.4f,%d,%d,%.6f,%"
      ".6f,%d\n",
      CsvField(r.job_id()), c.seq(), CsvField(c.spec_name()),
      CollectiveName(c.collective()), DataTypeName(c.dtype()), ReduceOpName(c.op()),
      c.size_bytes(), c.count(), c.in_place() ? "in_place" : "out_of_place",
      r.nranks(), r.status() == v1::OK ? "ok" : "failed", failure,
      s.median_s() * 1e6, s.min_s() * 1e6, s.p95_s() * 1e6, s.stddev_s() * 1e6,
      s.ci95_half_width_s() * 1e6, s.samples(), s.iters_per_sample(),
      r.algbw_gbps(), r.busbw_gbps(), r.wrong_elements());
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
