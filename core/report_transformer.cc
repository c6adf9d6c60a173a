// The console table of transformer training results (bench: transformer):
// a row per parallel layout, the median step split into its parts
// (docs/metrics.md).
#include "absl/strings/str_format.h"
#include "core/report.h"
#include "core/transformer.h"
#include "core/units.h"

namespace ringmaster {

void ConsoleReporter::TransformerHeader() {
  out_ << absl::StrFormat(
      "#%-14s %5s %9s %9s %8s %8s %8s %8s %8s %9s %10s %8s %6s %9s %10s %9s\n",
      "layout", "ranks", "step", "compute", "tp", "gather", "reduce-", "all-",
      "skew", "p99", "tokens/s", "TFLOP/s", "MFU", "memory", "loss", "check");
  out_ << absl::StrFormat(
      "#%-14s %5s %9s %9s %8s %8s %8s %8s %8s %9s %10s %8s %6s %9s %10s %9s\n",
      "", "", "(ms)", "(ms)", "(ms)", "(ms)", "scat(ms)", "red(ms)", "(ms)",
      "(ms)", "/rank", "/rank", "", "peak/rank", "(last)", "(rel err)");
}

void ConsoleReporter::TransformerRow(const v1::Result& r) {
  const std::string prefix =
      absl::StrFormat(" %-14s %5d", LayoutName(r.case_()), r.nranks());
  if (r.status() != v1::OK) {
    out_ << prefix << "  " << NotOkCell(r) << "\n";
    out_.flush();
    return;
  }
  const v1::TransformerFigures& t = r.transformer();
  auto ms = [](double s) { return absl::StrFormat("%.3f", s * 1e3); };
  out_ << prefix
       << absl::StrFormat(
              " %9s %9s %8s %8s %8s %8s %8s %9s %10.4g %8.3g %6s %9s %10.6g "
              "%9s\n",
              ms(r.stats().median_s()), ms(t.compute_s()), ms(t.tp_exposed_s()),
              ms(t.gather_exposed_s()), ms(t.reduce_scatter_exposed_s()),
              ms(t.allreduce_exposed_s()), ms(t.skew_s()),
              ms(r.stats().p99_s()), t.tokens_per_s_per_rank(),
              t.model_tflops_per_rank(),
              t.mfu() < 0 ? std::string("-")
                          : absl::StrFormat("%.1f%%", t.mfu() * 100),
              FormatBytes(t.peak_memory_bytes()), t.loss_last(),
              t.loss_check() < 0 ? std::string("-")
                                 : absl::StrFormat("%.1e", t.loss_rel_error()));
  out_.flush();
}

}  // namespace ringmaster
