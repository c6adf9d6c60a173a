// The console table of LLM inference results (bench: inference): a row per
// tensor-parallel width and batch, time to first token, time per output
// token and the tokens/s they give (docs/metrics.md).
#include "absl/strings/str_format.h"
#include "core/report.h"
#include "core/transformer.h"
#include "core/units.h"

namespace ringmaster {

bool BeatsWithinObjective(const v1::Result& r, const v1::Result* best) {
  return r.serve().slo_met() &&
         (best == nullptr || r.serve().tokens_per_s_per_rank() >
                                 best->serve().tokens_per_s_per_rank());
}

void ConsoleReporter::ServeHeader() {
  out_ << absl::StrFormat(
      "#%-8s %5s %6s %10s %9s %9s %10s %10s %6s %9s %9s %5s %9s\n", "layout",
      "ranks", "batch", "TTFT", "TPOT p50", "TPOT p99", "tokens/s", "tokens/s",
      "tp", "prefill", "memory", "SLO", "check");
  out_ << absl::StrFormat(
      "#%-8s %5s %6s %10s %9s %9s %10s %10s %6s %9s %9s %5s %9s\n", "", "", "",
      "(ms)", "(ms)", "(ms)", "/rank", "/replica", "share", "TFLOP/s", "/rank",
      "", "(rel err)");
}

void ConsoleReporter::ServeRow(const v1::Result& r) {
  const v1::Case& c = r.case_();
  const std::string prefix =
      absl::StrFormat(" %-8s %5d %6d", LayoutName(c), r.nranks(),
                      c.transformer().micro_batch());
  if (r.status() != v1::OK) {
    out_ << prefix << "  " << NotOkCell(r) << "\n";
    out_.flush();
    return;
  }
  const v1::ServeFigures& s = r.serve();
  if (c.serve().slo_tpot_p99_s() > 0) {
    serve_best_.objective = true;
    serve_best_.slo_s = c.serve().slo_tpot_p99_s();
    if (BeatsWithinObjective(r,
                             serve_best_.found ? &serve_best_.best : nullptr)) {
      serve_best_.best = r;
      serve_best_.found = true;
    }
  }
  auto ms = [](double sec) { return absl::StrFormat("%.3f", sec * 1e3); };
  const std::string slo = c.serve().slo_tpot_p99_s() <= 0 ? "-"
                          : s.slo_met()                   ? "met"
                                                          : "miss";
  out_ << prefix
       << absl::StrFormat(
              " %10s %9s %9s %10.4g %10.4g %5.1f%% %9.3g %9s %5s %9s\n",
              ms(s.ttft_s()), ms(s.tpot_p50_s()), ms(s.tpot_p99_s()),
              s.tokens_per_s_per_rank(), s.tokens_per_s_per_replica(),
              s.tp_share() * 100, s.prefill_tflops_per_rank(),
              FormatBytes(s.memory_bytes()), slo,
              s.check_rel_error() < 0
                  ? std::string("-")
                  : absl::StrFormat("%.1e", s.check_rel_error()));
  out_.flush();
}

void ConsoleReporter::ServeBestLine() {
  if (!serve_best_.objective) return;
  if (!serve_best_.found) {
    out_ << absl::StrFormat(
        "# objective TPOT p99 <= %.3g ms: no batch met it\n",
        serve_best_.slo_s * 1e3);
  } else {
    const v1::Result& r = serve_best_.best;
    out_ << absl::StrFormat(
        "# objective TPOT p99 <= %.3g ms: best %s batch %d, %.4g tokens/s "
        "per rank (TPOT p99 %.3f ms)\n",
        serve_best_.slo_s * 1e3, LayoutName(r.case_()),
        r.case_().transformer().micro_batch(),
        r.serve().tokens_per_s_per_rank(), r.serve().tpot_p99_s() * 1e3);
  }
  serve_best_ = ServeBest{};
}

}  // namespace ringmaster
