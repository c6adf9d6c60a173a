#include "core/report.h"

#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <map>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/curves.h"
#include "core/names.h"
#include "core/stats.h"
#include "core/training.h"
#include "core/units.h"

namespace ringmaster {
namespace {

double StrongEfficiencyOf(double t1, double tn, int n) {
  return tn > 0 && n > 0 ? t1 / (n * tn) : 0;
}

std::string OpText(const v1::Case& c) {
  return IsReduction(c.collective()) ? std::string(ReduceOpName(c.op())) : "-";
}

// One table section per case spec, collective, type, op, mode, ranks and
// variant: the line that introduces it.
std::string UnescapedGroup(const v1::Result& r) {
  const v1::Case& c = r.case_();
  if (c.bench() == v1::BENCH_TRANSFORMER || c.bench() == v1::BENCH_INFERENCE) {
    // Layouts of one spec share a table: ranks are a column.
    std::string g =
        absl::StrFormat("%s: %s", Printable(c.spec_name()), BenchLabel(c));
    if (!c.variant().empty()) g += " | variant " + c.variant();
    return g;
  }
  if (c.bench() != v1::BENCH_COLLECTIVE) {
    std::string g =
        absl::StrFormat("%s: %s | %d ranks", Printable(c.spec_name()),
                        BenchLabel(c), r.nranks());
    if (!c.variant().empty()) g += " | variant " + c.variant();
    return g;
  }
  std::string g = absl::StrFormat(
      "%s: %s %s %s | %s timing | %d ranks", Printable(c.spec_name()),
      CollectiveName(c.collective()), DataTypeName(c.dtype()), OpText(c),
      TimingModeName(r.timing_mode()), r.nranks());
  if (!c.variant().empty()) {
    g += " | variant " + c.variant();
    if (c.ceiling_gbps() > 0)
      g += absl::StrFormat(" (ceiling %.4g GB/s)", c.ceiling_gbps());
  }
  return g;
}

std::string Group(const v1::Result& r) { return Printable(UnescapedGroup(r)); }

// "SKIPPED: why" or "FAILED reason rank N: detail", for table rows.
std::string UnescapedNotOkText(const v1::Result& r) {
  const v1::Failure& f = r.failure();
  std::string detail = f.detail().empty() ? "" : ": " + f.detail();
  if (r.status() == v1::SKIPPED) return "SKIPPED" + detail;
  return absl::StrFormat(
      "FAILED %s%s%s", FailureReasonName(f.reason()),
      f.rank() >= 0 ? absl::StrFormat(" rank %d", f.rank()) : "", detail);
}

std::string NotOkText(const v1::Result& r) {
  return Printable(UnescapedNotOkText(r));
}

std::string CsvField(std::string_view raw) {
  const std::string s = Printable(raw);
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char ch : s) {
    if (ch == '"') out += '"';
    out += ch;
  }
  return out + "\"";
}

}  // namespace

std::string NotOkCell(const v1::Result& r) { return NotOkText(r); }

void ConsoleReporter::Begin(const RunContext& context) {
  out_ << absl::StrFormat("# ringmaster %s | job %s | %d ranks | backend %s\n",
                          Printable(context.plan_name), context.job_id,
                          context.nranks, context.backend);
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
  if (!p.topology_id().empty())
    out_ << "# topology: " << p.topology_id() << "\n";
  if (!p.nccl_version().empty()) {
    out_ << absl::StrFormat("# nccl %s | cuda runtime %s | driver %s\n",
                            p.nccl_version(), p.cuda_runtime_version(),
                            p.driver_version());
  }
  out_.flush();
}

void ConsoleReporter::Header() {
  out_ << absl::StrFormat(
      "#%12s %12s %9s %6s %5s %10s %10s %9s %9s %7s %5s %6s %5s %s\n", "size",
      "count", "type", "redop", "place", "time", "p99", "algbw", "busbw",
      "#wrong", "n", "ci95", "skew", " nccl");
  out_ << absl::StrFormat(
      "#%12s %12s %9s %6s %5s %10s %10s %9s %9s %7s %5s %6s %5s\n", "(B)",
      "(elements)", "", "", "", "(us)", "(us)", "(GB/s)", "(GB/s)", "", "",
      "(%)", "");
}

// The CI column: the relative 95% half-width in percent, with '*' where
// sampling stopped at a limit (samples, time) before the CI reached the
// case's target, so that a wide CI reads as "not settled", not as "noisy
// at the target".
std::string ConsoleReporter::CiText(const v1::Result& r) {
  const v1::Stats& s = r.stats();
  const double ci = RelativeCi(s);
  if (ci < 0) return "n/a";
  const bool short_of_target = r.case_().timing().target_ci() > 0 &&
                               !s.ci_target_met() &&
                               s.stop_reason() != "ci_target";
  if (short_of_target) ++short_of_target_;
  return absl::StrFormat("%.2f%s", 100 * ci, short_of_target ? "*" : "");
}

void ConsoleReporter::Report(const v1::Result& r) {
  std::string group = Group(r);
  const bool bench = r.case_().bench() != v1::BENCH_COLLECTIVE;
  // Skipped benchmark cases: counted by reason, one line each at the end
  // (a GPU plan on host ranks skips dozens of cases for one reason).
  if (bench && r.status() == v1::SKIPPED) {
    const std::string why = Printable(r.failure().detail());
    if (skip_count_[why]++ == 0) skip_order_.push_back(why);
    std::vector<std::string>& names = skip_cases_[why];
    const std::string name = Printable(r.case_().spec_name());
    if (std::find(names.begin(), names.end(), name) == names.end())
      names.push_back(name);
    return;
  }
  if (r.case_().bench() == v1::BENCH_FIND_SLOW && r.has_find_slow()) {
    FindSlowRows(r);
    last_group_ = group;
    return;
  }
  if (group != last_group_) {
    ServeBestLine();
    out_ << "#\n# " << group << "\n";
    if (r.case_().bench() == v1::BENCH_TRANSFORMER) {
      TransformerHeader();
    } else if (r.case_().bench() == v1::BENCH_INFERENCE) {
      ServeHeader();
    } else if (bench && r.case_().bench() == v1::BENCH_TRAIN) {
      if (r.case_().train().inference()) {
        InferenceHeader();
      } else {
        TrainHeader();
      }
    } else if (bench) {
      BenchHeader();
    } else {
      Header();
    }
    last_group_ = group;
  }
  if (bench && r.case_().bench() == v1::BENCH_TRAIN) {
    TrainRow(r);
    return;
  }
  if (r.case_().bench() == v1::BENCH_TRANSFORMER) {
    TransformerRow(r);
    return;
  }
  if (r.case_().bench() == v1::BENCH_INFERENCE) {
    ServeRow(r);
    return;
  }
  if (bench) {
    BenchRow(r);
    return;
  }
  const v1::Case& c = r.case_();
  std::string prefix = absl::StrFormat(" %12d %12d %9s %6s %5s", c.size_bytes(),
                                       c.count(), DataTypeName(c.dtype()),
                                       OpText(c), c.in_place() ? "in" : "out");
  if (r.status() != v1::OK) {
    out_ << prefix << "  " << NotOkText(r) << "\n";
  } else {
    const v1::Stats& s = r.stats();
    const std::string ci_text = CiText(r);
    std::string wrong = r.wrong_elements() < 0
                            ? "N/A"
                            : absl::StrFormat("%d", r.wrong_elements());
    out_ << prefix
         << absl::StrFormat(
                " %10.2f %10.2f %9.2f %9.2f %7s %5d %6s %5.2f%s\n",
                s.median_s() * 1e6, s.p99_s() * 1e6, r.algbw_gbps(),
                r.busbw_gbps(), wrong, s.samples(), ci_text,
                r.straggler_ratio(),
                r.nccl_algorithm().empty()
                    ? ""
                    : absl::StrFormat("  %s/%s/%d", r.nccl_algorithm(),
                                      r.nccl_protocol(), r.nccl_channels()));
  }
  out_.flush();
}

void ConsoleReporter::FindSlowRows(const v1::Result& r) {
  const v1::FindSlowFigures& f = r.find_slow();
  out_ << absl::StrFormat(
      "#\n# %s: bad-node finder over %d %s, %s pairs (a pair below %.0f%% "
      "of the median pair is a suspect%s)\n",
      Printable(r.case_().spec_name()), f.member_count(), f.members(),
      FormatBytes(r.case_().size_bytes()), f.slow_ratio() * 100,
      f.repeat() > 1 ? absl::StrFormat("; split and confirmation tests run "
                                       "up to %d times, the median decides",
                                       f.repeat())
                     : "");
  out_ << absl::StrFormat("#%-8s %5s %5s %10s %7s  %s\n", "phase", "a", "b",
                          "GB/s", "vs ref", "hosts");
  for (const auto& t : f.tests()) {
    out_ << absl::StrFormat(
        " %-8s %5d %5d %10.4g %7.2f  %s - %s\n", t.phase(), t.a(), t.b(),
        t.gbps(), f.reference_gbps() > 0 ? t.gbps() / f.reference_gbps() : 0,
        t.a_host(), t.b_host());
  }
  out_ << "# verdict: " << f.verdict() << "\n";
  out_.flush();
}

void ConsoleReporter::BenchHeader() {
  out_ << absl::StrFormat(
      "#%-9s %11s %10s %10s %9s %7s %9s %8s %7s %4s %6s  %s\n", "ranks",
      "size/shape", "time", "p99", "GB/s", "%ceil", "latency", "TFLOP/s",
      "#wrong", "n", "ci95", "path");
  out_ << absl::StrFormat("#%-9s %11s %10s %10s %9s %7s %9s %8s %7s %4s %6s\n",
                          "(src->dst)", "", "(us)", "(us)", "", "", "(ns)", "",
                          "", "", "(%)");
}

void ConsoleReporter::BenchRow(const v1::Result& r) {
  const v1::Case& c = r.case_();
  auto rank_text = [](int r) {
    return r < 0 ? std::string("*") : absl::StrFormat("%d", r);
  };
  std::string ranks =
      c.pattern() == v1::ONE_RANK || c.pattern() == v1::ALL_RANKS
          ? rank_text(c.src_rank())
          : rank_text(c.src_rank()) + "->" + rank_text(c.dst_rank());
  // A plug-in kind moves no stated bytes: its parameters are in the title.
  std::string what =
      c.bench() == v1::BENCH_GEMM ? absl::StrFormat("%dx%dx%d", c.gemm().m(),
                                                    c.gemm().n(), c.gemm().k())
      : c.bench() == v1::BENCH_PLUGIN ? std::string("-")
                                      : FormatBytes(c.size_bytes());
  std::string prefix = absl::StrFormat(" %-9s %11s", ranks, what);
  if (r.status() != v1::OK) {
    out_ << prefix << "  " << NotOkText(r) << "\n";
    out_.flush();
    return;
  }
  const v1::Stats& s = r.stats();
  auto num = [](double v, int decimals) {
    return v > 0 ? absl::StrFormat("%.*f", decimals, v) : std::string("-");
  };
  out_ << prefix
       << absl::StrFormat(" %10.2f %10.2f %9s %7s %9s %8s %7s %4d %6s  %s\n",
                          s.median_s() * 1e6, s.p99_s() * 1e6,
                          num(r.bandwidth_gbps(), 1),
                          num(r.pct_of_ceiling(), 1), num(r.latency_ns(), 0),
                          r.tflops() > 0 ? absl::StrFormat("%.3g", r.tflops())
                                         : std::string("-"),
                          r.wrong_elements() < 0
                              ? std::string("N/A")
                              : absl::StrFormat("%d", r.wrong_elements()),
                          s.samples(), CiText(r), r.path());
  out_.flush();
}

void ConsoleReporter::TrainHeader() {
  out_ << absl::StrFormat("#%5s %10s %10s %10s %10s %10s %11s %8s %10s %9s\n",
                          "ranks", "step", "compute", "exposed", "skew", "p99",
                          "samples/s", "TFLOP/s", "loss", "check");
  out_ << absl::StrFormat("#%5s %10s %10s %10s %10s %10s %11s %8s %10s %9s\n",
                          "", "(ms)", "(ms)", "comm (ms)", "(ms)", "(ms)", "",
                          "/rank", "(last)", "(rel err)");
}

// Forward passes alone: no gradients to communicate, no loss to check.
void ConsoleReporter::InferenceHeader() {
  out_ << absl::StrFormat("#%5s %10s %10s %11s %8s\n", "ranks", "forward",
                          "p99", "samples/s", "TFLOP/s");
  out_ << absl::StrFormat("#%5s %10s %10s %11s %8s\n", "", "(ms)", "(ms)", "",
                          "/rank");
}

void ConsoleReporter::TrainRow(const v1::Result& r) {
  std::string prefix = absl::StrFormat(" %5d", r.nranks());
  if (r.status() != v1::OK) {
    out_ << prefix << "  " << NotOkText(r) << "\n";
    out_.flush();
    return;
  }
  const v1::TrainFigures& t = r.train();
  if (r.case_().train().inference()) {
    out_ << prefix
         << absl::StrFormat(" %10.3f %10.3f %11.1f %8.3g\n",
                            r.stats().median_s() * 1e3, r.stats().p99_s() * 1e3,
                            t.samples_per_s(), t.tflops_per_rank());
    out_.flush();
    return;
  }
  out_ << prefix
       << absl::StrFormat(
              " %10.3f %10.3f %10.3f %10.3f %10.3f %11.1f %8.3f %10.6g %9s\n",
              r.stats().median_s() * 1e3, t.compute_s() * 1e3,
              t.exposed_comm_s() * 1e3, t.skew_s() * 1e3,
              r.stats().p99_s() * 1e3, t.samples_per_s(), t.tflops_per_rank(),
              t.loss_last(),
              t.loss_check() < 0 ? std::string("-")
                                 : absl::StrFormat("%.1e", t.loss_rel_error()));
  out_.flush();
}

void ConsoleReporter::End(const RunSummary& summary) {
  ServeBestLine();
  out_ << absl::StrFormat("# results: %d (%d failed, %d skipped)\n",
                          summary.results, summary.failed_results,
                          summary.skipped_results);
  // Each reason with the cases it left out (the first few names).
  constexpr size_t kNames = 6;
  for (const std::string& why : skip_order_) {
    const std::vector<std::string>& names = skip_cases_[why];
    std::string which = absl::StrJoin(
        names.begin(), names.begin() + std::min(names.size(), kNames), ", ");
    if (names.size() > kNames)
      which += absl::StrFormat(" and %d more", names.size() - kNames);
    out_ << absl::StrFormat("#   skipped %d: %s (%s)\n", skip_count_[why], why,
                            which);
  }
  if (short_of_target_ > 0) {
    out_ << absl::StrFormat(
        "# ci95 marked *: %d result(s) where sampling stopped at its sample "
        "or time limit before the CI reached the case's target\n",
        short_of_target_);
  }
  if (summary.ok_collectives > 0 || summary.results == summary.failed_results) {
    out_ << absl::StrFormat("# Avg bus bandwidth    : %g GB/s\n",
                            summary.avg_busbw_gbps);
  }
  if (summary.throttled_results > 0) {
    out_ << absl::StrFormat(
        "# throttled: %d result(s) measured while a device slowed its clocks "
        "(e.g. %s); their figures may be low for that\n",
        summary.throttled_results, summary.throttle_example);
  }
  if (summary.succeeded) {
    out_ << "# status: SUCCEEDED\n";
  } else {
    out_ << "# status: " << (summary.cancelled ? "CANCELLED: " : "FAILED: ")
         << summary.failure << "\n";
  }
  out_.flush();
}

std::string ResultToJson(const v1::Result& result) {
  std::string json;
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  auto status =
      google::protobuf::util::MessageToJsonString(result, &json, options);
  if (!status.ok()) return "{}";
  return json;
}

void JsonLinesReporter::Report(const v1::Result& result) {
  out_ << ResultToJson(result) << "\n";
}

void CsvReporter::Begin(const RunContext& context) {
  out_
      << "job_id,seq,case,collective,dtype,op,size_bytes,count,placement,"
         "nranks,timing_mode,variant,status,failure,time_us,min_us,p95_us,p99_"
         "us,"
         "stddev_us,ci95_us,median_ci95_low_us,median_ci95_high_us,samples,"
         "iters_per_sample,algbw_gbps,busbw_gbps,pct_of_ceiling,wrong_elements,"
         "straggler_ratio,straggler_rank,nccl_algorithm,nccl_protocol,nccl_"
         "channels,"
         "bench,method,direction,traffic,pattern,src_rank,dst_rank,host_memory,"
         "gemm_mnk,"
         "bandwidth_gbps,latency_ns,tflops,rel_error,path,ceiling_gbps\n";
}

void CsvReporter::Report(const v1::Result& r) {
  const v1::Case& c = r.case_();
  const v1::Stats& s = r.stats();
  std::string failure =
      r.status() == v1::OK
          ? ""
          : std::string(FailureReasonName(r.failure().reason()));
  out_ << absl::StrFormat(
      "%s,%d,%s,%s,%s,%s,%d,%d,%s,%d,%s,%s,%s,%s,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f,"
      "%.4f,%.4f,%d,"
      "%d,%.6f,%.6f,%.3f,%d,%.4f,%d,%s,%s,%d,",
      CsvField(r.job_id()), c.seq(), CsvField(Printable(c.spec_name())),
      CollectiveName(c.collective()), DataTypeName(c.dtype()), OpText(c),
      c.size_bytes(), c.count(), c.in_place() ? "in_place" : "out_of_place",
      r.nranks(), TimingModeName(r.timing_mode()), CsvField(c.variant()),
      r.status() == v1::OK ? "ok"
                           : (r.status() == v1::SKIPPED ? "skipped" : "failed"),
      failure, s.median_s() * 1e6, s.min_s() * 1e6, s.p95_s() * 1e6,
      s.p99_s() * 1e6, s.stddev_s() * 1e6, s.ci95_half_width_s() * 1e6,
      s.median_ci95_low_s() * 1e6, s.median_ci95_high_s() * 1e6, s.samples(),
      s.iters_per_sample(), r.algbw_gbps(), r.busbw_gbps(), r.pct_of_ceiling(),
      r.wrong_elements(), r.straggler_ratio(), r.straggler_rank(),
      r.nccl_algorithm(), r.nccl_protocol(), r.nccl_channels());
  const bool bench = c.bench() != v1::BENCH_COLLECTIVE;
  out_ << absl::StrFormat(
      "%s,%s,%s,%s,%s,%s,%s,%s,%s,%.6f,%.3f,%.4f,%.3g,%s,%.3f\n",
      BenchName(c.bench()), bench ? CopyMethodName(c.method()) : "",
      bench ? CopyDirectionName(c.direction()) : "",
      bench ? (c.bidirectional() ? "bidir" : "uni") : "",
      bench ? TransferPatternName(c.pattern()) : "",
      bench ? absl::StrFormat("%d", c.src_rank()) : "",
      bench ? absl::StrFormat("%d", c.dst_rank()) : "",
      bench ? HostMemoryName(c.host_memory()) : "",
      c.bench() == v1::BENCH_GEMM ? absl::StrFormat("%dx%dx%d", c.gemm().m(),
                                                    c.gemm().n(), c.gemm().k())
                                  : "",
      r.bandwidth_gbps(), r.latency_ns(), r.tflops(), r.rel_error(),
      CsvField(r.path()), r.ceiling_gbps());
}

// The fraction of zero gradient entries RenderTrainScaling notes (it warns
// from kGradientsUnderflowed).
constexpr double kPartlyUnderflowed = 0.05;

std::vector<const v1::Result*> MedianTrainRuns(
    const std::vector<v1::Result>& results, std::pair<size_t, size_t>* runs) {
  auto key_of = [](const v1::Result& r) {
    const v1::Case& c = r.case_();
    return absl::StrFormat("%s|%s|%s|%d", Printable(c.spec_name()),
                           BenchLabel(c), c.variant(), r.nranks());
  };
  std::map<std::string, std::vector<const v1::Result*>> groups;
  for (const auto& r : results) {
    if (r.case_().bench() == v1::BENCH_TRAIN && r.status() == v1::OK)
      groups[key_of(r)].push_back(&r);
  }
  std::pair<size_t, size_t> unused;
  if (runs == nullptr) runs = &unused;
  *runs = {0, 0};
  std::vector<const v1::Result*> out;
  for (const auto& r : results) {
    if (r.case_().bench() != v1::BENCH_TRAIN) continue;
    if (r.status() != v1::OK) {
      out.push_back(&r);
      continue;
    }
    std::vector<const v1::Result*>& group = groups[key_of(r)];
    if (group.front() != &r) continue;  // the group is placed at its first
    runs->first =
        runs->first == 0 ? group.size() : std::min(runs->first, group.size());
    runs->second = std::max(runs->second, group.size());
    std::vector<const v1::Result*> by_step = group;
    std::stable_sort(by_step.begin(), by_step.end(),
                     [](const v1::Result* a, const v1::Result* b) {
                       return a->stats().median_s() < b->stats().median_s();
                     });
    out.push_back(by_step[(by_step.size() - 1) / 2]);
  }
  return out;
}

namespace {

// One scaling table: the rows of one case over its rank counts.
std::string TrainScalingTable(const std::string& key,
                              std::vector<const v1::Result*> v,
                              const std::string& repeated) {
  std::string out;
  std::sort(v.begin(), v.end(), [](const v1::Result* a, const v1::Result* b) {
    return a->nranks() < b->nranks();
  });
  const bool strong = v.front()->case_().train().strong();
  const double t1 =
      v.front()->nranks() == 1 ? v.front()->stats().median_s() : 0;
  out += absl::StrFormat("# scaling (%s): %s%s\n",
                         strong ? "strong, E = T1/(n*Tn)" : "weak, E = T1/Tn",
                         key, repeated);
  out += absl::StrFormat("#%5s %10s %8s %10s %10s %10s %8s %11s\n", "ranks",
                         "step (ms)", "E", "compute", "exposed", "skew",
                         "sum/step", "samples/s");
  for (const v1::Result* r : v) {
    const double tn = r->stats().median_s();
    const v1::TrainFigures& t = r->train();
    double e =
        t1 > 0 ? (strong ? StrongEfficiencyOf(t1, tn, r->nranks()) : t1 / tn)
               : 0;
    double sum = t.compute_s() + t.exposed_comm_s() + t.skew_s();
    out += absl::StrFormat(
        " %5d %10.3f %8s %10.3f %10.3f %10.3f %8.3f %11.1f\n", r->nranks(),
        tn * 1e3, e > 0 ? absl::StrFormat("%.3f", e) : std::string("-"),
        t.compute_s() * 1e3, t.exposed_comm_s() * 1e3, t.skew_s() * 1e3,
        t.step_of_breakdown_s() > 0 ? sum / t.step_of_breakdown_s() : 0,
        t.samples_per_s());
  }
  return out;
}

// Batch and precision sweeps: the best-throughput point per case, mode and
// rank count; per precision, the largest batch that ran and the smallest
// that ran out of memory.
std::string TrainSweepLines(const std::vector<const v1::Result*>& results) {
  std::string out;
  auto sweep_key = [](const v1::Result& r) {
    const v1::Case& c = r.case_();
    return absl::StrFormat("%s (%s, %d rank%s)", Printable(c.spec_name()),
                           c.train().inference() ? "inference" : "train",
                           r.nranks(), r.nranks() == 1 ? "" : "s");
  };
  std::map<std::string, const v1::Result*> best;
  std::vector<std::string> best_order;
  struct Fit {
    int64_t ran = 0, out = 0;  // largest batch that ran, smallest that did not
  };
  std::map<std::string, Fit> fits;
  std::vector<std::string> fit_order;
  for (const v1::Result* p : results) {
    const v1::Result& r = *p;
    const v1::Case& c = r.case_();
    const bool oom = r.status() == v1::SKIPPED &&
                     absl::StartsWith(r.failure().detail(), "out of memory");
    if (r.status() != v1::OK && !oom) continue;
    const std::string fk =
        sweep_key(r) + " " + std::string(DataTypeName(c.dtype()));
    if (!fits.count(fk)) fit_order.push_back(fk);
    Fit& fit = fits[fk];
    const int64_t b = c.train().batch();
    if (oom) {
      fit.out = fit.out == 0 ? b : std::min(fit.out, b);
      continue;
    }
    fit.ran = std::max(fit.ran, b);
    // A step whose gradients underflowed is no training step's time.
    if (r.train().grad_zero_fraction() >= kGradientsUnderflowed) continue;
    const std::string k = sweep_key(r);
    if (!best.count(k)) best_order.push_back(k);
    if (!best.count(k) ||
        r.train().samples_per_s() > best[k]->train().samples_per_s())
      best[k] = &r;
  }
  for (const auto& k : best_order) {
    const v1::Result* r = best[k];
    out += absl::StrFormat(
        "# best throughput %s: batch %d, %s, %.1f samples/s, %.3g TFLOP/s per "
        "rank, step p50 %.3f ms p99 %.3f ms\n",
        k, r->case_().train().batch(), DataTypeName(r->case_().dtype()),
        r->train().samples_per_s(), r->train().tflops_per_rank(),
        r->stats().median_s() * 1e3, r->stats().p99_s() * 1e3);
  }
  for (const auto& k : fit_order) {
    const Fit& f = fits[k];
    if (f.out == 0) continue;  // nothing ran out of memory
    out += absl::StrFormat(
        "# memory %s: batch %s ran, batch %d ran out of memory\n", k,
        f.ran > 0 ? absl::StrFormat("%d", f.ran) : std::string("none"), f.out);
  }
  return out;
}

// Gradient entries exactly zero after the last step: underflow (float16
// without a large enough loss scale). Backward then multiplies zeros, which
// draws less power and runs faster than training does.
std::string GradientUnderflowLines(
    const std::vector<const v1::Result*>& results) {
  std::string out;
  for (const v1::Result* p : results) {
    const v1::Result& r = *p;
    const double z = r.train().grad_zero_fraction();
    if (r.status() != v1::OK || z < kPartlyUnderflowed) {
      continue;
    }
    const v1::Case& c = r.case_();
    const std::string hint =
        c.dtype() == v1::FLOAT16 ? "; raise loss_scale" : "";
    out += absl::StrFormat(
        "# %s %s batch %d %s, %d rank%s: %.1f%% of gradient entries are zero "
        "after the last step (%s%s)%s\n",
        z >= kGradientsUnderflowed ? "warning:" : "note:",
        Printable(c.spec_name()), c.train().batch(), DataTypeName(c.dtype()),
        r.nranks(), r.nranks() == 1 ? "" : "s", 100 * z,
        z >= kGradientsUnderflowed ? "underflow" : "partial underflow", hint,
        z >= kGradientsUnderflowed
            ? ": the step multiplies zeros, which runs faster "
              "than training; left out of the best throughput"
            : "");
  }
  return out;
}

}  // namespace

std::string RenderTrainScaling(const std::vector<v1::Result>& all) {
  std::pair<size_t, size_t> runs;
  const std::vector<const v1::Result*> results = MedianTrainRuns(all, &runs);
  const std::string repeated =
      runs.second <= 1 ? ""
      : runs.first == runs.second
          ? absl::StrFormat("; the median of %d runs", runs.second)
          : absl::StrFormat("; the median of %d-%d runs", runs.first,
                            runs.second);
  std::vector<std::string> order;
  std::map<std::string, std::vector<const v1::Result*>> rows;
  for (const v1::Result* p : results) {
    const v1::Result& r = *p;
    const v1::Case& c = r.case_();
    // Scaling tables are about training steps; inference rows (forward
    // passes of several batch sizes) are listed above, one per batch.
    if (r.status() != v1::OK || c.train().inference()) continue;
    std::string key =
        absl::StrFormat("%s: %s", Printable(c.spec_name()), BenchLabel(c));
    if (!c.variant().empty()) key += ", variant " + c.variant();
    if (!rows.count(key)) order.push_back(key);
    rows[key].push_back(&r);
  }
  if (order.empty()) return "";
  std::string out;
  for (const auto& key : order)
    out += TrainScalingTable(key, rows[key], repeated);
  out += TrainSweepLines(results);
  out += GradientUnderflowLines(results);
  return out;
}

namespace {

// Groups of inter-host pair results: title -> host -> bandwidths.
std::map<std::string, std::map<std::string, std::vector<double>>>
InterHostPairs(const std::vector<v1::Result>& results,
               std::vector<std::string>* order) {
  std::map<std::string, std::map<std::string, std::vector<double>>> groups;
  for (const auto& r : results) {
    const v1::Case& c = r.case_();
    if (r.status() != v1::OK || c.pattern() != v1::PAIR ||
        r.bandwidth_gbps() <= 0 || c.src_rank() < 0 || c.dst_rank() < 0)
      continue;
    const auto& hosts = r.provenance().hosts();
    if (c.src_rank() >= hosts.size() || c.dst_rank() >= hosts.size()) continue;
    const std::string& a = hosts[c.src_rank()];
    const std::string& b = hosts[c.dst_rank()];
    if (a == b) continue;  // within a node: not about the node's links
    std::string title =
        absl::StrFormat("%s: %s, %s", Printable(c.spec_name()), BenchLabel(c),
                        FormatBytes(c.size_bytes()));
    if (!c.variant().empty()) title += ", variant " + c.variant();
    if (!groups.count(title) && order) order->push_back(title);
    groups[title][a].push_back(r.bandwidth_gbps());
    groups[title][b].push_back(r.bandwidth_gbps());
  }
  return groups;
}

double MedianOf(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

std::vector<NodeVerdict> VerdictsOf(
    const std::map<std::string, std::vector<double>>& by_host,
    double slow_ratio) {
  std::vector<NodeVerdict> out;
  for (const auto& [host, bw] : by_host) {
    NodeVerdict v;
    v.host = host;
    v.pairs = static_cast<int>(bw.size());
    v.median_gbps = MedianOf(bw);
    v.min_gbps = *std::min_element(bw.begin(), bw.end());
    out.push_back(v);
  }
  for (auto& v : out) {
    std::vector<double> others;
    for (const auto& o : out) {
      if (o.host != v.host) others.push_back(o.median_gbps);
    }
    const double ref = MedianOf(others);
    v.ratio = ref > 0 ? v.median_gbps / ref : 1;
    v.slow = out.size() > 1 && v.ratio < slow_ratio;
  }
  return out;
}

}  // namespace

std::vector<NodeVerdict> NodeVerdicts(const std::vector<v1::Result>& results,
                                      const std::string& group,
                                      double slow_ratio) {
  auto groups = InterHostPairs(results, nullptr);
  auto it = groups.find(group);
  if (it == groups.end()) return {};
  return VerdictsOf(it->second, slow_ratio);
}

std::string RenderNodeSummary(const std::vector<v1::Result>& results,
                              double slow_ratio) {
  std::vector<std::string> order;
  auto groups = InterHostPairs(results, &order);
  std::string out;
  for (const auto& title : order) {
    if (groups[title].size() < 2) continue;
    std::vector<NodeVerdict> verdicts = VerdictsOf(groups[title], slow_ratio);
    out += absl::StrFormat(
        "# per node: %s (GB/s over the inter-node pairs a node takes part "
        "in)\n",
        title);
    out += absl::StrFormat("#%-23s %6s %9s %9s %10s\n", "node", "pairs",
                           "median", "min", "vs others");
    std::vector<std::string> slow;
    for (const auto& v : verdicts) {
      out += absl::StrFormat(" %-23s %6d %9.4g %9.4g %10.2f%s\n", v.host,
                             v.pairs, v.median_gbps, v.min_gbps, v.ratio,
                             v.slow ? "  <- slow" : "");
      if (v.slow) {
        slow.push_back(absl::StrFormat("%s (%.2fx the other nodes' median)",
                                       v.host, v.ratio));
      }
    }
    out += slow.empty() ? "# slow nodes: none\n"
                        : "# slow node(s): " + absl::StrJoin(slow, ", ") + "\n";
  }
  return out;
}

std::string RenderBenchMatrices(const std::vector<v1::Result>& results) {
  struct Matrix {
    std::string title;
    bool pairs = false;
    bool latency = false;
    int n = 0;
    // Every run of a cell (run --rounds, or a report over several runs).
    std::map<std::pair<int, int>, std::vector<const v1::Result*>> cells;
  };
  std::vector<std::string> order;
  std::map<std::string, Matrix> matrices;
  for (const auto& r : results) {
    const v1::Case& c = r.case_();
    // Plug-in kinds have no per-rank bandwidth matrix: their table says all.
    if (c.bench() == v1::BENCH_COLLECTIVE || c.bench() == v1::BENCH_TRAIN ||
        c.bench() == v1::BENCH_TRANSFORMER ||
        c.bench() == v1::BENCH_INFERENCE || c.bench() == v1::BENCH_PLUGIN ||
        c.pattern() == v1::ALL_RANKS) {
      continue;
    }
    std::string point = c.bench() == v1::BENCH_GEMM
                            ? absl::StrFormat("%dx%dx%d", c.gemm().m(),
                                              c.gemm().n(), c.gemm().k())
                            : FormatBytes(c.size_bytes());
    std::string title = absl::StrFormat("%s: %s, %s", Printable(c.spec_name()),
                                        BenchLabel(c), point);
    if (!c.variant().empty()) title += ", variant " + c.variant();
    auto [it, fresh] = matrices.try_emplace(title);
    if (fresh) order.push_back(title);
    Matrix& m = it->second;
    m.title = title;
    m.pairs = c.pattern() == v1::PAIR;
    m.latency = c.bench() == v1::BENCH_LATENCY;
    m.n = std::max(m.n, r.nranks());
    // Pairs: (source, destination). Otherwise one row, the column being
    // the rank the pattern is about (the "one" of all_to_one/one_to_all).
    int row = m.pairs ? c.src_rank() : -1;
    int col =
        m.pairs || c.pattern() == v1::ALL_TO_ONE ? c.dst_rank() : c.src_rank();
    m.cells[{row, col}].push_back(&r);
  }
  if (order.empty()) return "";
  std::string out;
  std::vector<std::string> notes;
  for (const auto& title : order) {
    const Matrix& m = matrices[title];
    bool any_run = false;
    size_t most_runs = 1;
    for (const auto& [pos, runs] : m.cells) {
      most_runs = std::max(most_runs, runs.size());
      for (const v1::Result* r : runs)
        any_run = any_run || r->status() != v1::SKIPPED;
    }
    if (!any_run) continue;
    const bool gemm = title.find(": gemm") != std::string::npos;
    std::string unit = m.latency ? "ns" : (gemm ? "TFLOP/s" : "GB/s");
    out += absl::StrFormat(
        "# %s (%s%s%s)\n", title, unit,
        m.pairs ? "; rows: source rank, columns: destination rank"
                : "; one column per rank",
        most_runs > 1 ? "; the median of each cell's runs" : "");
    out += absl::StrFormat("%8s", m.pairs ? "src\\dst" : "");
    for (int col = 0; col < m.n; ++col) out += absl::StrFormat(" %10d", col);
    out += "\n";
    std::vector<int> rows;
    if (m.pairs) {
      for (int r = 0; r < m.n; ++r) rows.push_back(r);
    } else {
      rows.push_back(-1);
    }
    for (int row : rows) {
      out +=
          row >= 0 ? absl::StrFormat("%8d", row) : absl::StrFormat("%8s", "");
      for (int col = 0; col < m.n; ++col) {
        auto it = m.cells.find({row, col});
        std::string text = m.pairs && row == col ? "-" : "";
        if (it != m.cells.end()) {
          // The median of the runs that measured; a failed run marks the
          // cell (it is no measurement to take a median over).
          std::vector<double> values;
          const v1::Result* not_ok = nullptr;
          for (const v1::Result* r : it->second) {
            if (r->status() == v1::OK) {
              values.push_back(
                  m.latency ? r->latency_ns()
                            : (gemm ? r->tflops() : r->bandwidth_gbps()));
            } else if (not_ok == nullptr || r->status() != v1::SKIPPED) {
              not_ok = r;
            }
          }
          const bool failed = not_ok && not_ok->status() != v1::SKIPPED;
          if (!failed && !values.empty()) {
            const double v = Median(values);
            text = m.latency || v >= 100
                       ? absl::StrFormat("%.*f", m.latency ? 0 : 1, v)
                       : absl::StrFormat("%.3g", v);
          } else {
            const v1::Result& r = *not_ok;
            text = failed ? "FAIL" : "n/a";
            std::string note =
                absl::StrFormat("%s %s: %s", text, title, r.failure().detail());
            if (std::find(notes.begin(), notes.end(), note) == notes.end())
              notes.push_back(note);
          }
        }
        out += absl::StrFormat(" %10s", text.empty() ? "-" : text);
      }
      out += "\n";
    }
  }
  // Skipped cases are counted where the results are listed (one line per
  // reason, counting results as every other view does).
  for (const auto& n : notes) out += "# " + n + "\n";
  return out;
}

std::string RenderVariantComparison(const std::vector<v1::Result>& results) {
  // Variants in order of first appearance, rows likewise.
  std::vector<std::string> variants;
  std::vector<std::string> row_keys;
  std::map<std::string, const v1::Case*> row_case;
  std::map<std::string, int> row_nranks;
  // Every run of a cell (ringmaster run --rounds): the median is shown.
  std::map<std::pair<std::string, std::string>, std::vector<const v1::Result*>>
      cell;
  std::map<std::string, double> ceilings;
  for (const auto& r : results) {
    const v1::Case& c = r.case_();
    if (c.bench() != v1::BENCH_COLLECTIVE)
      continue;  // RenderBenchMatrices shows those
    if (std::find(variants.begin(), variants.end(), c.variant()) ==
        variants.end()) {
      variants.push_back(c.variant());
      ceilings[c.variant()] = c.ceiling_gbps();
    }
    std::string key =
        absl::StrFormat("%s|%d|%d|%d|%d|%d|%d|%d", Printable(c.spec_name()),
                        c.collective(), c.dtype(), c.op(), c.size_bytes(),
                        c.in_place(), c.nranks(), c.timing().mode());
    if (!row_case.count(key)) {
      row_keys.push_back(key);
      row_case[key] = &c;
      row_nranks[key] = r.nranks();
    }
    cell[{key, c.variant()}].push_back(&r);
  }
  bool rounds = false;
  for (const auto& [k, runs] : cell) rounds |= runs.size() > 1;
  std::string out = absl::StrCat(
      "# interconnect variants: busbw (GB/s) and % of each path's ceiling",
      rounds ? "; the median of each variant's runs" : "", "\n");
  out += absl::StrFormat("#%-24s %12s %5s %5s %9s", "collective", "size (B)",
                         "place", "ranks", "mode");
  for (const auto& v : variants) {
    std::string head = v.empty() ? "(default)" : v;
    if (ceilings[v] > 0) head += absl::StrFormat(" /%.4g", ceilings[v]);
    out += absl::StrFormat(" %20s", head);
  }
  out += "\n";
  for (const auto& key : row_keys) {
    const v1::Case& c = *row_case[key];
    const int nranks = row_nranks[key];
    out += absl::StrFormat(
        " %-24s %12d %5s %5d %9s",
        absl::StrFormat("%s %s %s", CollectiveName(c.collective()),
                        DataTypeName(c.dtype()), OpText(c)),
        c.size_bytes(), c.in_place() ? "in" : "out", nranks,
        TimingModeName(c.timing().mode()));
    for (const auto& v : variants) {
      auto it = cell.find({key, v});
      std::string text = "-";
      if (it != cell.end()) {
        std::vector<double> busbw, pct;
        const v1::Result* failed = nullptr;
        for (const v1::Result* r : it->second) {
          if (r->status() != v1::OK) {
            failed = r;
            continue;
          }
          busbw.push_back(r->busbw_gbps());
          pct.push_back(r->pct_of_ceiling());
        }
        if (failed != nullptr && failed->status() == v1::SKIPPED) {
          text = "SKIPPED";  // the reason is on the result's own row
        } else if (failed != nullptr) {
          text = std::string("FAILED ") +
                 std::string(FailureReasonName(failed->failure().reason()));
        } else if (const double share = Median(pct); share > 0) {
          text = absl::StrFormat("%.2f (%5.1f%%)", Median(busbw), share);
        } else {
          text = absl::StrFormat("%.2f", Median(busbw));
        }
      }
      out += absl::StrFormat(" %20s", text);
    }
    out += "\n";
  }
  return out;
}

std::string RenderSummaries(const std::vector<v1::Result>& results,
                            bool variants) {
  std::string out;
  if (variants) out += "\n" + RenderVariantComparison(results);
  for (const std::string& part :
       {RenderBusbwCurves(results), RenderBenchMatrices(results),
        RenderNodeSummary(results), RenderTrainScaling(results)}) {
    if (!part.empty()) out += "\n" + part;
  }
  return out;
}

RunSummary Summarize(const std::vector<v1::Result>& results) {
  RunSummary s;
  double sum = 0;
  int ok = 0;
  for (const auto& r : results) {
    ++s.results;
    if (r.throttled() && s.throttled_results++ == 0) {
      s.throttle_example =
          absl::StrFormat("seq %d: %s", r.case_().seq(), r.throttle_detail());
    }
    if (r.status() == v1::OK) {
      if (r.case_().bench() == v1::BENCH_COLLECTIVE) {
        sum += r.busbw_gbps();
        ++ok;
      }
    } else if (r.status() == v1::SKIPPED) {
      ++s.skipped_results;
    } else {
      ++s.failed_results;
    }
  }
  s.avg_busbw_gbps = ok > 0 ? sum / ok : 0;
  s.ok_collectives = ok;
  return s;
}

}  // namespace ringmaster
