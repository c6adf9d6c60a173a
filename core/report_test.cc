#include "core/report.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include "core/html_report.h"
#include "core/report_card.h"

namespace ringmaster {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

#include "core/report_golden.inc"

v1::Result MakeResult(int64_t size, bool in_place, double median_s) {
  v1::Result r;
  r.set_job_id("job-1");
  auto* c = r.mutable_case_();
  c->set_seq(in_place ? 1 : 0);
  c->set_spec_name("ar");
  c->set_collective(v1::ALL_REDUCE);
  c->set_dtype(v1::FLOAT32);
  c->set_op(v1::SUM);
  c->set_size_bytes(size);
  c->set_count(size / 4);
  c->set_in_place(in_place);
  r.set_status(v1::OK);
  r.set_nranks(2);
  r.set_timing_mode(v1::PIPELINED);
  auto* s = r.mutable_stats();
  s->set_samples(10);
  s->set_iters_per_sample(20);
  s->set_median_s(median_s);
  s->set_mean_s(median_s);
  s->set_ci95_half_width_s(median_s * 0.005);
  s->set_p99_s(median_s * 1.25);
  s->set_median_ci95_low_s(median_s * 0.996);
  s->set_median_ci95_high_s(median_s * 1.004);
  s->set_ci_on_median(true);
  s->set_stop_reason("ci_target");
  r.set_straggler_ratio(1.02);
  r.set_straggler_rank(1);
  r.set_straggler_host("node1");
  r.set_nccl_algorithm("RING");
  r.set_nccl_protocol("LL");
  r.set_nccl_channels(24);
  r.set_algbw_gbps(size / median_s / 1e9);
  r.set_busbw_gbps(size / median_s / 1e9);
  r.set_wrong_elements(0);
  return r;
}

TEST(ConsoleReporter, Golden) {
  std::ostringstream out;
  ConsoleReporter reporter(out);
  RunContext ctx;
  ctx.job_id = "job-1";
  ctx.plan_name = "quick";
  ctx.nranks = 2;
  ctx.backend = "host (MPI)";
  reporter.Begin(ctx);
  reporter.Report(MakeResult(1048576, false, 20e-6));
  v1::Result failed = MakeResult(1048576, true, 0);
  failed.set_status(v1::FAILED);
  failed.mutable_failure()->set_reason(v1::DATA_MISMATCH);
  failed.mutable_failure()->set_rank(1);
  failed.mutable_failure()->set_detail("3 wrong elements");
  reporter.Report(failed);
  RunSummary summary = Summarize({MakeResult(1048576, false, 20e-6), failed});
  summary.failure = "data_mismatch";
  reporter.End(summary);
  EXPECT_EQ(out.str(), kGoldenConsole);
}

TEST(CsvReporter, Golden) {
  std::ostringstream out;
  CsvReporter reporter(out);
  reporter.Begin({});
  reporter.Report(MakeResult(1048576, false, 20e-6));
  EXPECT_EQ(out.str(), kGoldenCsv);
}

TEST(JsonLinesReporter, Golden) {
  std::ostringstream out;
  JsonLinesReporter reporter(out);
  reporter.Report(MakeResult(1048576, false, 20e-6));
  EXPECT_EQ(out.str(), kGoldenJsonl);
}

TEST(RenderVariantComparison, Golden) {
  std::vector<v1::Result> results;
  for (const char* variant : {"nvlink", "pcie"}) {
    for (int64_t size : {1048576, 1073741824}) {
      v1::Result r = MakeResult(
          size, false,
          std::string(variant) == "pcie" ? size / 25e9 : size / 300e9);
      r.mutable_case_()->set_variant(variant);
      r.mutable_case_()->set_ceiling_gbps(
          std::string(variant) == "pcie" ? 63 : 370.8);
      r.set_busbw_gbps(std::string(variant) == "pcie" ? 25 : 300);
      r.set_pct_of_ceiling(100 * r.busbw_gbps() / r.case_().ceiling_gbps());
      results.push_back(r);
    }
  }
  results[3].set_status(v1::FAILED);
  results[3].mutable_failure()->set_reason(v1::DEADLINE);
  EXPECT_EQ(RenderVariantComparison(results), kGoldenVariants);
}

// Three rounds of two variants (ringmaster run --rounds 3): each cell is
// the median of its runs, and the header says so.
TEST(RenderVariantComparison, RoundsShowTheMedianRun) {
  std::vector<v1::Result> results;
  for (double a : {300.0, 280.0, 310.0}) {
    for (const char* variant : {"a", "b"}) {
      v1::Result r = MakeResult(1048576, false, 1e-5);
      r.mutable_case_()->set_variant(variant);
      r.set_busbw_gbps(std::string(variant) == "a" ? a : a / 10);
      results.push_back(r);
    }
  }
  const std::string text = RenderVariantComparison(results);
  EXPECT_THAT(text, HasSubstr("the median of each variant's runs"));
  EXPECT_THAT(text, HasSubstr("300.00"));
  EXPECT_THAT(text, HasSubstr("30.00"));
  EXPECT_THAT(text, Not(HasSubstr("310.00")));  // not the last round's
  // One failed run marks the cell.
  results[5].set_status(v1::FAILED);
  results[5].mutable_failure()->set_reason(v1::DEADLINE);
  EXPECT_THAT(RenderVariantComparison(results), HasSubstr("FAILED"));
}

// A size the launch skipped (e.g. above host_max) reads SKIPPED in every
// variant's column, not as a failure.
TEST(RenderVariantComparison, SkippedSizesAreNotFailures) {
  std::vector<v1::Result> results;
  for (const char* variant : {"a", "b"}) {
    v1::Result r = MakeResult(1048576, false, 1e-5);
    r.mutable_case_()->set_variant(variant);
    r.set_status(v1::SKIPPED);
    r.mutable_failure()->set_reason(v1::REJECTED);
    r.mutable_failure()->set_detail("above the plan's host_max of 1 MiB");
    results.push_back(r);
  }
  const std::string text = RenderVariantComparison(results);
  EXPECT_THAT(text, HasSubstr("SKIPPED"));
  EXPECT_THAT(text, Not(HasSubstr("FAILED")));
}

// A folder of repeated runs: each point of the busbw plot and its table is
// the median of its runs, not the last one read.
TEST(RenderHtmlReport, RepeatedRunsPlotTheirMedian) {
  std::vector<v1::Result> results;
  for (double bw : {111.1, 77.7, 133.3}) {
    v1::Result r = MakeResult(1048576, false, 1e-5);
    r.set_busbw_gbps(bw);
    results.push_back(r);
  }
  const std::string html = RenderHtmlReport(results, HtmlReportOptions());
  EXPECT_THAT(html, HasSubstr(">111.1<"));
  EXPECT_THAT(html, Not(HasSubstr("133.3")));
}

// The busbw curve's shape: a table under the plot, a clear drop named in
// the caption, and the same section in the terminal summaries.
TEST(RenderHtmlReport, CurveShapeTableAndDropsInTheCaption) {
  std::vector<v1::Result> results;
  for (auto [size, bw] : std::vector<std::pair<int64_t, double>>{
           {1 << 20, 40}, {8 << 20, 60}, {32 << 20, 3}, {128 << 20, 61}}) {
    v1::Result r = MakeResult(size, false, 1e-3);
    r.mutable_stats()->set_ci95_half_width_s(1e-5);  // +-1%
    r.set_busbw_gbps(bw);
    results.push_back(r);
  }
  const std::string html = RenderHtmlReport(results, HtmlReportOptions());
  EXPECT_THAT(html, HasSubstr("<th>50% at</th>"));
  EXPECT_THAT(
      html, HasSubstr("from one size to the next: ar 8 MiB -&gt; "
                      "32 MiB: 60 -&gt; 3 GB/s (-95%, NCCL RING/LL on both)"));
  const std::string text = RenderSummaries(results, false);
  EXPECT_THAT(text, HasSubstr("# busbw curves"));
  EXPECT_THAT(text, HasSubstr("drop 8 MiB -> 32 MiB: 60 -> 3 GB/s (-95%)"));
}

TEST(JsonLinesReporter, OneObjectPerLineWithSnakeCaseFields) {
  std::ostringstream out;
  JsonLinesReporter reporter(out);
  reporter.Report(MakeResult(8, false, 1e-5));
  reporter.Report(MakeResult(16, true, 1e-5));
  std::string text = out.str();
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 2);
  EXPECT_NE(text.find("\"busbw_gbps\":"), std::string::npos);
  EXPECT_NE(text.find("\"collective\":\"ALL_REDUCE\""), std::string::npos);
  EXPECT_NE(text.find("\"size_bytes\":\"16\""), std::string::npos);
}

TEST(Summarize, AveragesOkResultsOnly) {
  v1::Result a = MakeResult(100, false, 1);
  a.set_busbw_gbps(10);
  v1::Result b = MakeResult(100, false, 1);
  b.set_busbw_gbps(30);
  v1::Result c = MakeResult(100, false, 1);
  c.set_status(v1::FAILED);
  c.set_busbw_gbps(1000);
  RunSummary s = Summarize({a, b, c});
  EXPECT_EQ(s.results, 3);
  EXPECT_EQ(s.failed_results, 1);
  EXPECT_DOUBLE_EQ(s.avg_busbw_gbps, 20);
}

v1::Result BenchResult(v1::TransferPattern pattern, int src, int dst,
                       double gbps) {
  v1::Result r;
  r.set_job_id("job-2");
  auto* c = r.mutable_case_();
  c->set_spec_name("p2p_ce");
  c->set_bench(v1::BENCH_P2P);
  c->set_method(v1::COPY_ENGINE);
  c->set_direction(v1::WRITE);
  c->set_pattern(pattern);
  c->set_src_rank(src);
  c->set_dst_rank(dst);
  c->set_size_bytes(512 << 20);
  c->set_dtype(v1::UINT8);
  r.set_nranks(3);
  r.set_status(v1::OK);
  r.set_bandwidth_gbps(gbps);
  r.set_pct_of_ceiling(gbps / 4.5);
  r.set_path("nvlink");
  r.set_wrong_elements(0);
  r.mutable_stats()->set_samples(6);
  r.mutable_stats()->set_median_s((512 << 20) / gbps / 1e9);
  r.mutable_stats()->set_p99_s((512 << 20) / gbps / 1e9);
  return r;
}

TEST(RenderBenchMatrices, PairsAsSourceByDestinationWithSkipsExplained) {
  std::vector<v1::Result> results = {
      BenchResult(v1::PAIR, 0, 1, 396.1), BenchResult(v1::PAIR, 0, 2, 395.5),
      BenchResult(v1::PAIR, 1, 0, 396.0), BenchResult(v1::PAIR, 1, 2, 27.25),
      BenchResult(v1::PAIR, 2, 0, 0),     BenchResult(v1::PAIR, 2, 1, 395.9)};
  results[4].set_status(v1::SKIPPED);
  results[4].mutable_failure()->set_detail(
      "no peer access from GPU 2 to GPU 0");
  v1::Result h2d = BenchResult(v1::ONE_RANK, 1, -1, 55.5);
  h2d.mutable_case_()->set_spec_name("h2d");
  h2d.mutable_case_()->set_bench(v1::BENCH_HOST_DEVICE);
  h2d.mutable_case_()->set_direction(v1::TO_DEVICE);
  h2d.mutable_case_()->set_host_memory(v1::PINNED);
  results.push_back(h2d);
  v1::Result collective =
      MakeResult(1024, false, 1e-5);  // not a node benchmark
  results.push_back(collective);
  EXPECT_EQ(RenderBenchMatrices(results),
            "# p2p_ce: p2p ce write uni pairs, 512 MiB (GB/s; rows: source "
            "rank, columns: "
            "destination rank)\n"
            " src\\dst          0          1          2\n"
            "       0          -      396.1      395.5\n"
            "       1      396.0          -       27.2\n"
            "       2        n/a      395.9          -\n"
            "# h2d: host_device ce to_device uni pinned one, 512 MiB (GB/s; "
            "one column per rank)\n"
            "                  0          1          2\n"
            "                  -       55.5          -\n"
            "# n/a p2p_ce: p2p ce write uni pairs, 512 MiB: no peer access "
            "from GPU 2 to GPU 0\n");
  EXPECT_EQ(RenderBenchMatrices({collective}), "");
}

// Repeated runs of a plan (run --rounds, or a report over several runs):
// each cell shows the median of its runs, not the last one read; a run
// that failed marks its cell.
TEST(RenderBenchMatrices, RepeatedRunsShowTheMedianAndAFailedRunMarksIt) {
  std::vector<v1::Result> results;
  for (double gbps : {390.0, 120.5, 396.0})  // the slow run read last-but-one
    results.push_back(BenchResult(v1::PAIR, 0, 1, gbps));
  for (double gbps : {395.0, 394.0}) {
    results.push_back(BenchResult(v1::PAIR, 1, 0, gbps));
  }
  results.back().set_status(v1::FAILED);
  results.back().mutable_failure()->set_detail("1 wrong element");
  const std::string out = RenderBenchMatrices(results);
  EXPECT_EQ(
      out,
      "# p2p_ce: p2p ce write uni pairs, 512 MiB (GB/s; rows: source "
      "rank, columns: destination rank; the median of each cell's "
      "runs)\n"
      " src\\dst          0          1          2\n"
      "       0          -      390.0          -\n"
      "       1       FAIL          -          -\n"
      "       2          -          -          -\n"
      "# FAIL p2p_ce: p2p ce write uni pairs, 512 MiB: 1 wrong element\n");
}

TEST(ConsoleReporter, BenchRowsAndSkippedGroups) {
  std::ostringstream out;
  ConsoleReporter console(out);
  v1::Result skipped = BenchResult(v1::PAIR, 0, 1, 0);
  skipped.mutable_case_()->set_spec_name("gpu_only");
  skipped.set_status(v1::SKIPPED);
  skipped.mutable_failure()->set_detail(
      "a GPU case (backend: cuda) in a launch on host ranks");
  console.Report(skipped);
  skipped.mutable_case_()->set_src_rank(1);
  console.Report(skipped);  // counted, not printed
  v1::Result other = skipped;
  other.mutable_failure()->set_detail("bfloat16 GEMM needs GPUs");
  console.Report(other);
  console.Report(BenchResult(v1::PAIR, 0, 1, 396.1));
  std::string text = out.str();
  // Skips take no line among the results...
  EXPECT_EQ(text.find("skipped"), std::string::npos) << text;
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 5) << text;
  EXPECT_NE(text.find(" 0->1          512 MiB    1355.39    1355.39     396.1  "
                      "  88.0         -"
                      "        -       0    6    n/a  nvlink\n"),
            std::string::npos)
      << text;
  // ...but one line per reason at the end, counting results.
  RunSummary summary;
  summary.results = 4;
  summary.skipped_results = 3;
  summary.succeeded = true;
  console.End(summary);
  text = out.str();
  EXPECT_NE(text.find("# results: 4 (0 failed, 3 skipped)\n"
                      "#   skipped 2: a GPU case (backend: cuda) in a launch "
                      "on host ranks (gpu_only)\n"
                      "#   skipped 1: bfloat16 GEMM needs GPUs (gpu_only)\n"),
            std::string::npos)
      << text;
}

TEST(CsvReporter, NodeBenchRowsHaveTheHeadersColumns) {
  std::ostringstream out;
  CsvReporter csv(out);
  csv.Begin({});
  csv.Report(BenchResult(v1::PAIR, 0, 1, 396.1));
  v1::Result gemm = BenchResult(v1::ONE_RANK, 0, -1, 0);
  gemm.mutable_case_()->set_bench(v1::BENCH_GEMM);
  gemm.mutable_case_()->mutable_gemm()->set_m(64);
  gemm.mutable_case_()->mutable_gemm()->set_n(32);
  gemm.mutable_case_()->mutable_gemm()->set_k(16);
  gemm.set_tflops(1.5);
  gemm.set_path("cublasLt, with a comma");  // quoted
  csv.Report(gemm);
  csv.End({});
  std::istringstream lines(out.str());
  std::string header, row;
  std::getline(lines, header);
  auto fields = [](const std::string& line) {
    int n = 1;
    bool quoted = false;
    for (char ch : line) {
      if (ch == '"') quoted = !quoted;
      if (ch == ',' && !quoted) ++n;
    }
    return n;
  };
  int rows = 0;
  while (std::getline(lines, row)) {
    ++rows;
    EXPECT_EQ(fields(row), fields(header)) << row;
  }
  EXPECT_EQ(rows, 2);
  EXPECT_NE(out.str().find(",p2p,ce,write,uni,pairs,0,1,"), std::string::npos)
      << out.str();
  EXPECT_NE(out.str().find(",64x32x16,"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("\"cublasLt, with a comma\""), std::string::npos)
      << out.str();
}

}  // namespace
}  // namespace ringmaster

namespace ringmaster {
namespace {

// 4 nodes x 2 ranks; every pair touching node3 runs at a tenth of the rest.
std::vector<v1::Result> PairsWithASlowNode() {
  std::vector<v1::Result> out;
  const std::vector<std::string> hosts = {"node1", "node1", "node2", "node2",
                                          "node3", "node3", "node4", "node4"};
  for (int s = 0; s < 8; ++s) {
    for (int d = 0; d < 8; ++d) {
      if (s == d) continue;
      v1::Result r;
      r.set_status(v1::OK);
      r.set_nranks(8);
      v1::Case* c = r.mutable_case_();
      c->set_spec_name("p2p_pairs");
      c->set_bench(v1::BENCH_P2P);
      c->set_pattern(v1::PAIR);
      c->set_size_bytes(1 << 20);
      c->set_src_rank(s);
      c->set_dst_rank(d);
      for (const auto& h : hosts) r.mutable_provenance()->add_hosts(h);
      const bool slow = hosts[s] == "node3" || hosts[d] == "node3";
      r.set_bandwidth_gbps((slow ? 0.025 : 0.27) + 0.001 * ((s + d) % 3));
      out.push_back(r);
    }
  }
  return out;
}

TEST(NodeSummary, NamesTheSlowNodeFromInterNodePairs) {
  auto results = PairsWithASlowNode();
  std::string text = RenderNodeSummary(results);
  EXPECT_NE(text.find("# slow node(s): node3 ("), std::string::npos) << text;
  EXPECT_EQ(text.find("node1 (0"), std::string::npos) << text;
  // Pairs within a node do not count: node1's 24 inter-node pairs.
  size_t pos = text.find(" node1 ");
  ASSERT_NE(pos, std::string::npos);
  EXPECT_NE(text.substr(pos, 40).find(" 24 "), std::string::npos) << text;
}

TEST(NodeSummary, EvenNodesHaveNoVerdictAndOneHostNoSummary) {
  auto results = PairsWithASlowNode();
  for (auto& r : results) r.set_bandwidth_gbps(0.27);
  EXPECT_NE(RenderNodeSummary(results).find("# slow nodes: none"),
            std::string::npos);
  for (auto& r : results) {
    for (auto& h : *r.mutable_provenance()->mutable_hosts()) h = "vm";
  }
  EXPECT_EQ(RenderNodeSummary(results), "");
}

// A precision x batch sweep: the best point names its batch and dtype;
// per dtype the largest batch that ran and the first that ran out of
// memory (other skips are not memory limits).
v1::Result TrainPoint(v1::DataType dtype, int64_t batch, double step_s,
                      const std::string& skipped = "") {
  v1::Result r;
  v1::Case* c = r.mutable_case_();
  c->set_spec_name("mlp");
  c->set_bench(v1::BENCH_TRAIN);
  c->set_dtype(dtype);
  c->mutable_train()->set_layers(8);
  c->mutable_train()->set_hidden(1024);
  c->mutable_train()->set_batch(batch);
  c->mutable_train()->set_optimizer("sgd");
  c->mutable_train()->set_overlap(true);
  r.set_nranks(1);
  if (!skipped.empty()) {
    r.set_status(v1::SKIPPED);
    r.mutable_failure()->set_reason(v1::REJECTED);
    r.mutable_failure()->set_detail(skipped);
    return r;
  }
  r.set_status(v1::OK);
  r.mutable_stats()->set_median_s(step_s);
  r.mutable_stats()->set_p99_s(step_s * 1.1);
  r.mutable_train()->set_samples_per_s(batch / step_s);
  r.mutable_train()->set_tflops_per_rank(6.0 * batch * 1024 * 1024 * 8 /
                                         step_s / 1e12);
  r.mutable_train()->set_compute_s(step_s);
  r.mutable_train()->set_step_of_breakdown_s(step_s);
  return r;
}

TEST(RenderTrainScaling, BestPointAndMemoryLimitPerPrecision) {
  const std::string oom = "out of memory: the step needs 150.0 GiB";
  std::vector<v1::Result> results = {
      TrainPoint(v1::FLOAT32, 1024, 0.010),
      TrainPoint(v1::FLOAT32, 4096, 0.030),  // 136533 samples/s
      TrainPoint(v1::FLOAT32, 16384, 0, oom),
      TrainPoint(v1::FLOAT32, 65536, 0, oom),
      TrainPoint(v1::BFLOAT16, 1024, 0.004),
      TrainPoint(v1::BFLOAT16, 4096, 0.012),  // 341333: the best
      TrainPoint(v1::BFLOAT16, 16384, 0.060),
      TrainPoint(v1::BFLOAT16, 65536, 0, oom),
      TrainPoint(v1::FLOAT16, 1024, 0, "the GPU trainer computes in ..."),
  };
  const std::string out = RenderTrainScaling(results);
  EXPECT_NE(out.find("# best throughput mlp (train, 1 rank): batch 4096, "
                     "bfloat16, 341333.3 samples/s"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("# memory mlp (train, 1 rank) float32: batch 4096 ran, "
                     "batch 16384 ran out of memory"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("# memory mlp (train, 1 rank) bfloat16: batch 16384 "
                     "ran, batch 65536 ran out of memory"),
            std::string::npos)
      << out;
  EXPECT_EQ(out.find("rank) float16"), std::string::npos) << out;
  EXPECT_EQ(out.find("# best throughput mlp (train, 1 rank): batch 1024"),
            std::string::npos);
}

// Repeated runs: one row per rank count, the run with the median step
// (its breakdown with it), and the efficiency and the best throughput from
// those runs, not from a lucky one.
TEST(RenderTrainScaling, RepeatedRunsShowTheMedianRunPerRankCount) {
  std::vector<v1::Result> results;
  for (double step : {0.010, 0.011, 0.030}) {  // 1 rank
    results.push_back(TrainPoint(v1::BFLOAT16, 1024, step));
    results.back().mutable_train()->set_exposed_comm_s(step / 100);
  }
  for (double step : {0.040, 0.013, 0.012}) {  // 2 ranks
    results.push_back(TrainPoint(v1::BFLOAT16, 1024, step));
    results.back().set_nranks(2);
    results.back().mutable_train()->set_exposed_comm_s(step / 100);
  }
  results[1].mutable_train()->set_exposed_comm_s(0.000123);  // the median
  const std::string out = RenderTrainScaling(results);
  EXPECT_NE(out.find("; the median of 3 runs\n"), std::string::npos) << out;
  EXPECT_NE(out.find("\n     1     11.000    1.000     11.000      0.123 "),
            std::string::npos)
      << out;
  // E = 11 / 13.
  EXPECT_NE(out.find("\n     2     13.000    0.846     13.000      0.130 "),
            std::string::npos)
      << out;
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 6) << out;
  EXPECT_NE(out.find("# best throughput mlp (train, 1 rank): batch 1024, "
                     "bfloat16, 93090.9 samples/s"),
            std::string::npos)
      << out;
}

// The HTML report aggregates repeated runs as the text tables do: a heatmap
// cell is the median of its runs (a failed run marks it), a training
// ladder has one row per rank count, the median run's.
TEST(RenderHtmlReport, RepeatedNodeAndTrainingRunsShowTheirMedian) {
  std::vector<v1::Result> results;
  for (double gbps : {390.7, 120.3, 396.9})
    results.push_back(BenchResult(v1::PAIR, 0, 1, gbps));
  for (double gbps : {395.1, 394.2}) {
    results.push_back(BenchResult(v1::PAIR, 1, 0, gbps));
  }
  results.back().set_status(v1::FAILED);
  for (double step : {0.010123, 0.011456, 0.030789}) {
    results.push_back(TrainPoint(v1::BFLOAT16, 1024, step));
  }
  const std::string html = RenderHtmlReport(results, HtmlReportOptions());
  EXPECT_THAT(html, HasSubstr(">390.7<"));
  EXPECT_THAT(html, HasSubstr(">FAIL<"));
  for (const char* other : {"120.3", "396.9", "395.1"})
    EXPECT_THAT(html, Not(HasSubstr(other))) << other;
  EXPECT_THAT(html, HasSubstr(">11.46<"));
  for (const char* other : {"10.12", "30.79"})
    EXPECT_THAT(html, Not(HasSubstr(other))) << other;
}

// Steps whose gradients underflowed: a warning, and not the best point
// however fast; a partial underflow is a note.
TEST(RenderTrainScaling, UnderflowedGradientsAreNamedAndNotTheBestPoint) {
  std::vector<v1::Result> results = {
      TrainPoint(v1::BFLOAT16, 4096, 0.012),  // 341333 samples/s
      TrainPoint(v1::FLOAT16, 4096, 0.010),   // faster, on zeros
      TrainPoint(v1::FLOAT16, 1024, 0.004),   // partly underflowed
  };
  results[0].mutable_train()->set_grad_zero_fraction(0.001);
  results[1].mutable_train()->set_grad_zero_fraction(1.0);
  results[2].mutable_train()->set_grad_zero_fraction(0.2);
  const std::string out = RenderTrainScaling(results);
  EXPECT_NE(out.find("# best throughput mlp (train, 1 rank): batch 4096, "
                     "bfloat16"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("# warning: mlp batch 4096 float16, 1 rank: 100.0% of "
                     "gradient entries are zero after the last step "
                     "(underflow; raise loss_scale): the step multiplies "
                     "zeros"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("# note: mlp batch 1024 float16, 1 rank: 20.0% of "
                     "gradient entries are zero after the last step (partial "
                     "underflow; raise loss_scale)\n"),
            std::string::npos)
      << out;
  EXPECT_EQ(out.find("mlp batch 4096 bfloat16"), std::string::npos) << out;
}

}  // namespace
}  // namespace ringmaster

namespace ringmaster {
namespace {

// A row whose sampling stopped at its limit before the CI target carries
// '*', and the end says how many; one that met its target does not.
TEST(ConsoleReporter, CiShortOfItsTargetIsMarked) {
  std::ostringstream out;
  ConsoleReporter console(out);
  v1::Result met = MakeResult(1024, false, 1e-3);
  met.mutable_case_()->mutable_timing()->set_target_ci(0.02);
  met.mutable_stats()->set_ci_target_met(true);
  v1::Result short_of = MakeResult(2048, false, 1e-3);
  short_of.mutable_case_()->mutable_timing()->set_target_ci(0.02);
  short_of.mutable_stats()->set_stop_reason("max_samples");
  console.Report(met);
  console.Report(short_of);
  RunSummary summary;
  summary.results = 2;
  summary.succeeded = true;
  console.End(summary);
  const std::string text = out.str();
  EXPECT_EQ(std::count(text.begin(), text.end(), '*'), 2)
      << text;  // row + legend
  EXPECT_NE(text.find("# ci95 marked *: 1 result(s)"), std::string::npos)
      << text;
}

// Inference rows: forward passes with their own columns (no
// communication, skew, loss or check), titled inference, and not in the
// scaling tables.
TEST(ConsoleReporter, InferenceRowsHaveTheirOwnColumns) {
  std::ostringstream out;
  ConsoleReporter console(out);
  v1::Result r = TrainPoint(v1::FLOAT32, 64, 2e-3);
  r.mutable_case_()->mutable_train()->set_inference(true);
  r.mutable_train()->set_tflops_per_rank(0.035);
  console.Report(r);
  const std::string text = out.str();
  EXPECT_NE(text.find("# mlp: inference L8 H1024 B64/rank float32"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("forward"), std::string::npos) << text;
  EXPECT_EQ(text.find("loss"), std::string::npos) << text;
  EXPECT_EQ(text.find("exposed"), std::string::npos) << text;
  EXPECT_NE(text.find("0.035"), std::string::npos) << text;
  EXPECT_EQ(RenderTrainScaling({r}), "");
}

// An inference result of width `tp` and `batch` with TPOT p99 `p99_ms`.
v1::Result ServePoint(int tp, int batch, double p99_ms, double slo_ms) {
  v1::Result r;
  r.set_status(v1::OK);
  r.set_nranks(tp);
  v1::Case* c = r.mutable_case_();
  c->set_spec_name("serve");
  c->set_bench(v1::BENCH_INFERENCE);
  c->set_dtype(v1::FLOAT32);
  c->mutable_transformer()->set_preset("llama3-8b");
  c->mutable_transformer()->set_layers(2);
  c->mutable_transformer()->set_micro_batch(batch);
  c->mutable_transformer()->mutable_parallel()->set_tp(tp);
  c->mutable_serve()->set_prompt(16);
  c->mutable_serve()->set_generate(4);
  c->mutable_serve()->set_slo_tpot_p99_s(slo_ms / 1e3);
  v1::ServeFigures* s = r.mutable_serve();
  s->set_tpot_p50_s(p99_ms / 2e3);
  s->set_tpot_p99_s(p99_ms / 1e3);
  s->set_tokens_per_s_per_rank(batch / (p99_ms / 1e3) / tp);
  s->set_slo_met(p99_ms <= slo_ms);
  s->set_check_rel_error(1e-7);
  return r;
}

TEST(ConsoleReporter, InferenceNamesTheBestBatchWithinTheObjective) {
  std::ostringstream out;
  ConsoleReporter console(out);
  console.Begin(RunContext());
  // tp1: batch 8 has the most tokens/s but misses 30 ms; batch 4 meets it.
  for (auto [batch, p99] : {std::pair{1, 10.0}, {4, 20.0}, {8, 31.0}})
    console.Report(ServePoint(1, batch, p99, 30));
  console.End(RunSummary());
  const std::string text = out.str();
  EXPECT_NE(text.find("TPOT p99"), std::string::npos) << text;
  EXPECT_NE(text.find("miss"), std::string::npos) << text;
  EXPECT_NE(text.find("# objective TPOT p99 <= 30 ms: best tp1 batch 4, 200 "
                      "tokens/s per rank (TPOT p99 20.000 ms)"),
            std::string::npos)
      << text;
}

TEST(RenderHtmlReport, InferencePlotsThroughputAgainstLatency) {
  std::vector<v1::Result> results;
  for (int tp : {1, 2})
    for (auto [batch, p99] : {std::pair{1, 10.0}, {4, 20.0}, {8, 40.0}})
      results.push_back(ServePoint(tp, batch, p99 * tp, 30));
  const std::string html = RenderHtmlReport(results, HtmlReportOptions());
  EXPECT_NE(html.find("<h2>LLM inference</h2>"), std::string::npos);
  EXPECT_NE(html.find("throughput against latency"), std::string::npos);
  EXPECT_NE(html.find("data-expected-series=\"2\""), std::string::npos);
  // tp1 batch 4: 200 tokens/s per rank at 20 ms; tp2 batch 1 meets 30 ms
  // with 25.
  EXPECT_NE(html.find("Best within TPOT p99 &lt;= 30 ms: tp1 batch 4."),
            std::string::npos)
      << html.substr(html.find("LLM inference"), 2000);
}

}  // namespace
}  // namespace ringmaster

namespace ringmaster {
namespace {

v1::Result CardResult(v1::Bench bench, const std::string& device) {
  v1::Result r;
  r.set_status(v1::OK);
  r.mutable_case_()->set_bench(bench);
  v1::DeviceTelemetry* t = r.add_telemetry();
  t->set_rank(0);
  t->set_device(device);
  v1::TelemetrySample* s = t->add_samples();
  s->set_sm_clock_mhz(1980);
  s->set_power_w(650);
  s->set_power_limit_w(690);
  return r;
}

std::vector<v1::Result> CardResults(const std::string& device) {
  std::vector<v1::Result> results;
  v1::Result bf16 = CardResult(v1::BENCH_GEMM, device);
  bf16.mutable_case_()->set_dtype(v1::BFLOAT16);
  bf16.set_tflops(787);
  results.push_back(bf16);
  v1::Result fp8 = CardResult(v1::BENCH_GEMM, device);
  fp8.mutable_case_()->set_dtype(v1::FLOAT8_E4M3);
  fp8.set_tflops(600);
  fp8.set_throttled(true);
  fp8.set_throttle_detail("rank 0: sw_power_cap");
  results.push_back(fp8);
  v1::Result copy = CardResult(v1::BENCH_LOCAL_COPY, device);
  copy.set_path("hbm");
  copy.set_bandwidth_gbps(2150);
  results.push_back(copy);
  v1::Result h2d = CardResult(v1::BENCH_HOST_DEVICE, device);
  h2d.mutable_case_()->set_direction(v1::TO_DEVICE);
  h2d.mutable_case_()->set_host_memory(v1::PINNED);
  h2d.set_bandwidth_gbps(55.1);
  h2d.set_ceiling_source("NVML: PCIe gen 5 x16 max link");
  results.push_back(h2d);
  return results;
}

// Each figure beside the datasheet's and its share; a figure far below
// the model's is flagged with the slowdown its telemetry saw.
TEST(RenderServerCard, FiguresBesideTheDatasheetAndLowOnesFlagged) {
  const std::string card =
      RenderServerCard(CardResults("GPU 0000:19:00.0 NVIDIA H200"));
  EXPECT_THAT(card, HasSubstr("# server card: GPU 0000:19:00.0 NVIDIA H200"));
  EXPECT_THAT(card, HasSubstr("# datasheet: NVIDIA H200 SXM"));
  EXPECT_THAT(card, HasSubstr("dense GEMM bfloat16 (TFLOP/s)"));
  EXPECT_THAT(card, HasSubstr("79.5%"));  // 787 / 989.5
  EXPECT_THAT(card, HasSubstr("89.6%"));  // 2 x 2150 / 4800
  EXPECT_THAT(card, HasSubstr("87.4%"));  // 55.1 / 63.0 (gen 5 x16)
  EXPECT_THAT(card, HasSubstr("30.3%"));  // fp8: 600 / 1979
  EXPECT_THAT(card, HasSubstr("# LOW dense GEMM fp8_e4m3: 30.3% of the "
                              "datasheet figure"));
  EXPECT_THAT(card, HasSubstr("sw_power_cap"));
  EXPECT_THAT(card, Not(HasSubstr("# LOW dense GEMM bfloat16")));
  EXPECT_THAT(card, HasSubstr("# telemetry: SM clock 1980-1980 MHz"));
  EXPECT_THAT(card, HasSubstr("power up to 650 W under a power cap of 690 W "
                              "(datasheet board power 700 W)"));
  EXPECT_THAT(card, HasSubstr("clocks slowed during 1 of 4 results"));
}

TEST(RenderServerCard, AnUnknownGpuHasNoShares) {
  const std::string card =
      RenderServerCard(CardResults("GPU 0000:01:00.0 NVIDIA GeForce RTX 4090"));
  EXPECT_THAT(card, HasSubstr("no datasheet entry for this GPU"));
  EXPECT_THAT(card, Not(HasSubstr("%")));
  EXPECT_THAT(card, Not(HasSubstr("# LOW")));
  EXPECT_EQ(RenderServerCard({}), "");
}

}  // namespace
}  // namespace ringmaster
