// Reporters: how results are shown and written.
//
// One interface with console (nccl-tests-like table), JSON Lines and CSV
// implementations; `ringmaster run` drives several at once. Reporters are
// not thread-safe: call them from one thread.
#ifndef RINGMASTER_CORE_REPORT_H_
#define RINGMASTER_CORE_REPORT_H_

#include <map>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "core/labels.h"
#include "ringmaster/v1/result.pb.h"

namespace ringmaster {

struct RunContext {
  std::string job_id;
  std::string plan_name;
  int nranks = 0;
  std::string backend;
  v1::Provenance provenance;
};

struct RunSummary {
  bool succeeded = false;
  bool cancelled = false;  // stopped on request (a signal to `run`)
  std::string failure;     // one line; empty on success
  int results = 0;
  int failed_results = 0;
  int skipped_results = 0;       // SKIPPED: not run here, not failures
  int ok_collectives = 0;        // OK collective results (the busbw average's)
  double avg_busbw_gbps = 0;     // mean busbw of OK results, as nccl-tests
  int throttled_results = 0;     // measured while a device slowed its clocks
  std::string throttle_example;  // one of them: "seq N: rank R: reasons"
};

class Reporter {
 public:
  virtual ~Reporter() = default;
  virtual void Begin(const RunContext& context) {}
  virtual void Report(const v1::Result& result) = 0;
  virtual void End(const RunSummary& summary) {}
};

// The terminal table: one row per result, printed as results arrive.
// "SKIPPED: why" or "FAILED reason rank N: detail", printable, for a
// table row.
std::string NotOkCell(const v1::Result& r);

// For an inference group's best row: whether `r` met its objective and
// serves more tokens/s per rank than `best` (none yet: null).
bool BeatsWithinObjective(const v1::Result& r, const v1::Result* best);

class ConsoleReporter : public Reporter {
 public:
  explicit ConsoleReporter(std::ostream& out) : out_(out) {}
  void Begin(const RunContext& context) override;
  void Report(const v1::Result& result) override;
  void End(const RunSummary& summary) override;

 private:
  void Header();
  void BenchHeader();
  void BenchRow(const v1::Result& r);
  void TrainHeader();
  void InferenceHeader();
  void TrainRow(const v1::Result& r);
  // report_transformer.cc
  void TransformerHeader();
  void TransformerRow(const v1::Result& r);
  void ServeHeader();
  void ServeRow(const v1::Result& r);
  // After an inference group: the batch with the most tokens/s per rank
  // whose TPOT p99 met the plan's objective (nothing without one).
  void ServeBestLine();
  struct ServeBest {
    bool objective = false;  // the group's spec has one
    double slo_s = 0;
    bool found = false;
    v1::Result best;  // the best row's result
  };
  ServeBest serve_best_;
  void FindSlowRows(const v1::Result& r);
  std::ostream& out_;
  std::string last_group_;
  // Skipped benchmark cases by reason, in order of first appearance: one
  // summary line each at the end instead of a line per case.
  std::vector<std::string> skip_order_;
  std::map<std::string, int> skip_count_;
  std::map<std::string, std::vector<std::string>> skip_cases_;  // names
  int short_of_target_ = 0;  // rows whose CI column is marked '*'
  std::string CiText(const v1::Result& r);
};

// One JSON object per line: MessageToJsonString of v1::Result.
class JsonLinesReporter : public Reporter {
 public:
  explicit JsonLinesReporter(std::ostream& out) : out_(out) {}
  void Report(const v1::Result& result) override;
  void End(const RunSummary& summary) override { out_.flush(); }

 private:
  std::ostream& out_;
};

// A flat CSV with a header row; times in microseconds, bandwidth in GB/s.
class CsvReporter : public Reporter {
 public:
  explicit CsvReporter(std::ostream& out) : out_(out) {}
  void Begin(const RunContext& context) override;
  void Report(const v1::Result& result) override;
  void End(const RunSummary& summary) override { out_.flush(); }

 private:
  std::ostream& out_;
};

// The JSON Lines form of one result (no trailing newline).
std::string ResultToJson(const v1::Result& result);

// The same cases under several interconnect variants, side by side: one row
// per (case, collective, dtype, op, size, placement, ranks, mode), one busbw
// column per variant with its percentage of the variant's ceiling.
std::string RenderVariantComparison(const std::vector<v1::Result>& results);

// Node benchmarks as matrices, the way nvbandwidth prints them: for each
// group of pair results (case, bench, method, direction, traffic, size or
// shape, variant) a source-rows x destination-columns matrix of GB/s (ns
// for latency); for per-rank patterns one row with a column per rank.
// Cells that were skipped show "n/a", failed ones "FAIL"; a legend line
// gives their reasons. Empty when there are no node benchmark results.
std::string RenderBenchMatrices(const std::vector<v1::Result>& results);

// Training results (bench: train) with each configuration's repeated runs
// (run --rounds, or a report over several runs) reduced to its median run:
// the one with the median step time (the lower of the two middle ones), so
// the breakdown shown belongs to the step shown, in the place of the
// configuration's first run. Results that are not OK stay as they are.
// `runs`, when given, gets the fewest and the most runs of a configuration.
std::vector<const v1::Result*> MedianTrainRuns(
    const std::vector<v1::Result>& results,
    std::pair<size_t, size_t>* runs = nullptr);

// Training results (bench: train) as scaling tables: per case and
// configuration, one row per rank count with step time, efficiency against
// the 1-rank row (weak T1/Tn or strong T1/(n*Tn)), the breakdown and
// (compute + exposed + skew) / step. Empty when there are none.
std::string RenderTrainScaling(const std::vector<v1::Result>& results);

// Per node (host) summaries of point-to-point pair results across hosts:
// for each host the median bandwidth of the inter-host pairs it takes part
// in, against the median of the other hosts' medians; a host below
// `slow_ratio` of that is named slow. Empty without inter-host pairs.
struct NodeVerdict {
  std::string host;
  int pairs = 0;
  double median_gbps = 0;
  double min_gbps = 0;
  double ratio = 1;  // median / the other hosts' median
  bool slow = false;
};
std::vector<NodeVerdict> NodeVerdicts(const std::vector<v1::Result>& results,
                                      const std::string& group,
                                      double slow_ratio = 0.5);
std::string RenderNodeSummary(const std::vector<v1::Result>& results,
                              double slow_ratio = 0.5);

// What follows the per-result tables: with `variants`, the variant
// comparison; then the busbw curves' shape (core/curves.h), node benchmark
// matrices, per-node summaries and training scaling tables that apply,
// each after a blank line.
std::string RenderSummaries(const std::vector<v1::Result>& results,
                            bool variants);

// Mean busbw of OK collective results and counts, for RunSummary.
RunSummary Summarize(const std::vector<v1::Result>& results);

}  // namespace ringmaster

#endif  // RINGMASTER_CORE_REPORT_H_
