// What a new user meets on a machine without GPUs, following the README:
// answers that must not mislead. Each test runs the real `ringmaster`
// binary (tests/cli_runner.h) on host ranks and checks what it prints and
// its exit code.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>

#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"
#include "tests/cli_runner.h"

namespace ringmaster {
namespace {

namespace fs = std::filesystem;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

std::string TempDir(const std::string& name) {
  const fs::path dir =
      fs::temp_directory_path() /
      ("ringmaster-new-user-" + name + "-" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir.string();
}

std::string Read(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)),
                     std::istreambuf_iterator<char>());
}

void Write(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
}

// The results file of the one job under `out`.
std::string ResultsOf(const std::string& out) {
  for (const auto& e : fs::recursive_directory_iterator(out))
    if (e.path().filename() == "results.jsonl") return e.path().string();
  return "";
}

// Variants that set only NCCL_* variables measure the same path on MPI:
// the run says so and shows no path ceiling.
TEST(NewUser, VariantsThatCannotDifferOnMpiAreSaidSo) {
  const std::string out = TempDir("variants");
  Outcome o = Ringmaster({"run", Source("tests/plans/variants-nccl-only.yaml"),
                          "--np", "2", "--out", out, "--quiet"});
  EXPECT_EQ(o.exit_code, 0) << o.err;
  EXPECT_THAT(o.err, HasSubstr("variants nvlink, pcie set only NCCL_* "
                               "variables, which the host backend (MPI) "
                               "ignores"));
  EXPECT_THAT(o.out, HasSubstr("# note: variants nvlink, pcie"));
  EXPECT_THAT(o.out, Not(HasSubstr("ceiling 370.8")));
  EXPECT_THAT(o.out, Not(HasSubstr("/370.8")));
  fs::remove_all(out);
}

// The shipped rules files on the shipped plans' results of a healthy host:
// every verdict passes, rules that do not apply are named, and nothing
// fails for want of a match. `predict --calibrate` on these CPU results
// against a GPU topology is refused, naming both.
TEST(NewUser, ShippedRulesPassShippedPlansAndCalibrationChecksTheSystem) {
  const std::string out = TempDir("rules");
  // Every shipped plan (their GPU sizes stop at host_max on host ranks).
  for (const auto& e : fs::directory_iterator(Source("plans"))) {
    const std::string plan = "plans/" + e.path().filename().string();
    Outcome run =
        Ringmaster({"run", Source(plan), "--np", "2", "--out", out, "--quiet"});
    ASSERT_EQ(run.exit_code, 0) << plan << "\n" << run.err;
  }
  // Every shipped rules file.
  for (const auto& e : fs::directory_iterator(Source("rules"))) {
    const std::string rules = "rules/" + e.path().filename().string();
    Outcome v = Ringmaster({"verdict", out, "--rules", Source(rules)});
    EXPECT_EQ(v.exit_code, 0) << rules << "\n" << v.out << v.err;
    EXPECT_THAT(v.out, HasSubstr("# verdict: PASS")) << rules;
    EXPECT_THAT(v.out, HasSubstr("not applicable here")) << rules;
  }
  // Every job's results (the quickstart's all-reduces among them).
  std::vector<std::string> predict = {"predict", "--topology",
                                      Source("topologies/hgx-h200-8.yaml")};
  for (const auto& e : fs::recursive_directory_iterator(out)) {
    if (e.path().filename() == "results.jsonl") {
      predict.push_back("--calibrate");
      predict.push_back(e.path().string());
    }
  }
  Outcome cal = Ringmaster(predict);
  EXPECT_EQ(cal.exit_code, 2) << cal.out;
  EXPECT_THAT(cal.err,
              AllOf(HasSubstr("measured on host ranks"),
                    HasSubstr("hgx-h200-8"), HasSubstr("NVIDIA H200")));
  fs::remove_all(out);
}

// A plan larger than the launch is not a failure: on one rank every
// shipped plan exits 0, and what needed more ranks is SKIPPED, saying why,
// in the results and in the summary.
TEST(NewUser, EveryShippedPlanRunsOnOneRankAndSaysWhatItLeftOut) {
  const std::string out = TempDir("one-rank");
  for (const auto& e : fs::directory_iterator(Source("plans"))) {
    const std::string plan = "plans/" + e.path().filename().string();
    Outcome run = Ringmaster({"run", Source(plan), "--np", "1", "--out",
                              out + "/" + e.path().stem().string(), "--quiet"});
    EXPECT_EQ(run.exit_code, 0) << plan << "\n" << run.out << run.err;
    EXPECT_THAT(run.out, HasSubstr("# status: SUCCEEDED")) << plan;
    if (plan != "plans/dp-scaling.yaml") continue;
    EXPECT_THAT(run.out,
                HasSubstr("#   skipped 5: needs 2 ranks; this launch has 1 "
                          "(check, mlp, mlp_pipelined, mlp_adam)\n"));
    int skipped = 0;
    std::ifstream results(ResultsOf(out + "/dp-scaling"));
    for (std::string line; std::getline(results, line);) {
      const auto r = nlohmann::json::parse(line);
      if (r["status"] != "SKIPPED") continue;
      ++skipped;
      EXPECT_EQ(r["failure"]["detail"], "needs 2 ranks; this launch has 1");
      EXPECT_EQ(r["nranks"], 2);
    }
    EXPECT_EQ(skipped, 5);
  }
  fs::remove_all(out);
}

// predict of a training plan on 4 nodes: tables for the system asked
// about (32 ranks), and the inference case named, not dropped.
TEST(NewUser, PredictCoversTheSystemAskedAbout) {
  Outcome o =
      Ringmaster({"predict", Source("plans/dp-scaling.yaml"), "--topology",
                  Source("topologies/hgx-h100-8.yaml"), "--nodes", "4"});
  ASSERT_EQ(o.exit_code, 0) << o.err;
  EXPECT_THAT(o.out, HasSubstr("= 32 ranks"));
  EXPECT_TRUE(std::regex_search(o.out, std::regex("\n +32 +[0-9.]+ ")))
      << o.out;
  EXPECT_TRUE(std::regex_search(o.out, std::regex("\n +8 +[0-9.]+ "))) << o.out;
  EXPECT_THAT(o.out, HasSubstr("(inference): not predicted"));
  // Prices: the topology's, shown as costs; and one given here.
  EXPECT_THAT(o.out, HasSubstr("USD/step"));
  Outcome free = Ringmaster({"predict", Source("plans/dp-scaling.yaml"),
                             "--topology", Source("topologies/hgx-h100-8.yaml"),
                             "--price-per-gpu-hour", "0"});
  EXPECT_THAT(free.out, Not(HasSubstr("USD/step")));
}

// topo on a machine without an NVIDIA driver: no "upgrade your driver";
// its YAML holds the CPUs and NUMA nodes, and predict models it.
TEST(NewUser, TopoOfACpuMachineCanBeModelled) {
  Outcome text = Ringmaster({"topo"});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  if (text.out.find("GPUs: none found") == std::string::npos)
    GTEST_SKIP() << "this machine has GPUs";
  EXPECT_THAT(text.out, Not(HasSubstr("insufficient")));
  const std::string dir = TempDir("topo");
  Outcome yaml = Ringmaster({"topo", "--format", "yaml"});
  ASSERT_EQ(yaml.exit_code, 0) << yaml.err;
  EXPECT_THAT(yaml.out, AllOf(HasSubstr("cpu:"), HasSubstr("cores:"),
                              HasSubstr("numa:"), HasSubstr("memory_gbps:")));
  EXPECT_THAT(yaml.out, Not(HasSubstr("node: {}")));
  Write(dir + "/here.yaml", yaml.out);
  Outcome p = Ringmaster({"predict", Source("plans/quickstart.yaml"),
                          "--topology", dir + "/here.yaml"});
  EXPECT_EQ(p.exit_code, 0) << p.err;
  EXPECT_THAT(p.out, HasSubstr("host rank(s)"));
  EXPECT_THAT(p.out, HasSubstr("memory"));
  fs::remove_all(dir);
}

// A job whose rank died: the text and HTML reports give the job's failure
// reason and how many cases never ran; skips are one line per reason.
TEST(NewUser, ReportsOfAFailedJobSayWhyAndWhatNeverRan) {
  const std::string out = TempDir("failed");
  Outcome run = Ringmaster({"run", Source("plans/quickstart.yaml"), "--np", "2",
                            "--out", out, "--quiet"},
                           {"RINGMASTER_FAULT=exit:rank=1:seq=3"});
  ASSERT_EQ(run.exit_code, 1) << run.err;
  Outcome text = Ringmaster({"report", out});
  EXPECT_THAT(text.out,
              AllOf(HasSubstr("worker_exit"), HasSubstr("cases never ran")));
  Outcome html = Ringmaster({"report", out, "--html", out + "/r.html"});
  ASSERT_EQ(html.exit_code, 0) << html.err;
  const std::string page = Read(out + "/r.html");
  EXPECT_THAT(page,
              AllOf(HasSubstr("worker_exit"), HasSubstr("cases never ran")));
  // The job's end comes before the provenance and the plots.
  EXPECT_LT(page.find("cases never ran"), page.find("<h2>Provenance"));
  fs::remove_all(out);
}

// p2p on host ranks: the GPU cases it cannot run are summed up once per
// reason, and every view counts the same skips.
TEST(NewUser, SkipsAreCountedOnceAndTheSameEverywhere) {
  const std::string out = TempDir("skips");
  Outcome run = Ringmaster(
      {"run", Source("plans/p2p.yaml"), "--np", "2", "--out", out, "--quiet"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  int skip_lines = 0;
  for (absl::string_view line : absl::StrSplit(run.out, '\n'))
    skip_lines += line.find("skipped: ") != absl::string_view::npos;
  EXPECT_LE(skip_lines, 3) << run.out;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(run.out, m,
                                std::regex("# results: ([0-9]+) \\(([0-9]+) "
                                           "failed, ([0-9]+) skipped\\)")))
      << run.out;
  const int skipped = std::stoi(m[3]);
  int in_file = 0;
  for (absl::string_view line : absl::StrSplit(Read(ResultsOf(out)), '\n'))
    in_file += line.find("\"SKIPPED\"") != absl::string_view::npos;
  EXPECT_EQ(in_file, skipped);
  // One line per reason, whose counts add up to the same total.
  int by_reason = 0;
  const std::regex reason("#   skipped ([0-9]+): ");
  for (auto it = std::sregex_iterator(run.out.begin(), run.out.end(), reason);
       it != std::sregex_iterator(); ++it)
    by_reason += std::stoi((*it)[1]);
  EXPECT_EQ(by_reason, skipped) << run.out;
  fs::remove_all(out);
}

// An all-reduce larger than one MPI call can carry (2^31 float32 elements)
// is SKIPPED with the figure before anything is allocated, and the job
// succeeds; where the memory is short it is skipped for that instead.
TEST(NewUser, ASizePastMpisCountIsSkippedNotFailed) {
  const std::string dir = TempDir("count");
  Write(dir + "/plan.yaml", R"(name: big
cases:
  - {name: ar, collective: all_reduce, sizes: [8GiB], placement: in_place,
     timing: {min_samples: 1, max_samples: 1}}
)");
  Outcome o = Ringmaster({"run", dir + "/plan.yaml", "--np", "1", "--out",
                          dir + "/out", "--quiet"});
  EXPECT_EQ(o.exit_code, 0) << o.out << o.err;
  EXPECT_THAT(o.out, HasSubstr("(0 failed, 1 skipped)"));
  EXPECT_TRUE(o.out.find("exceed MPI's int count") != std::string::npos ||
              o.out.find("needs ") != std::string::npos)
      << o.out;
  EXPECT_LT(o.seconds, 20) << "skipped before allocating 8 GiB";
  fs::remove_all(dir);
}

// validate counts the cases a run of the same rank count runs, and prints
// the expansion.
TEST(NewUser, ValidateCountsWhatRunRuns) {
  Outcome v = Ringmaster({"validate", Source("plans/p2p.yaml"), "--np", "2"});
  ASSERT_EQ(v.exit_code, 0) << v.err;
  std::smatch m;
  ASSERT_TRUE(
      std::regex_search(v.out, m, std::regex("([0-9]+) cases on 2 ranks")))
      << v.out;
  EXPECT_THAT(v.out, HasSubstr("# case spec"));
  const std::string out = TempDir("validate");
  Outcome run = Ringmaster(
      {"run", Source("plans/p2p.yaml"), "--np", "2", "--out", out, "--quiet"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  int results = 0;
  for (absl::string_view line : absl::StrSplit(Read(ResultsOf(out)), '\n'))
    results += !line.empty();
  EXPECT_EQ(results, std::stoi(m[1]));
  fs::remove_all(out);
}

// One word per thing: --format everywhere, `text` for tables, usage lines
// that say `ringmaster`, help that names the launchers and defaults.
TEST(NewUser, OneWordPerThingAcrossSubcommands) {
  Outcome results = Ringmaster({"results", "--help"});
  EXPECT_THAT(results.out, HasSubstr("text, csv or jsonl"));
  EXPECT_THAT(results.out, HasSubstr("Usage: ringmaster results"));
  Outcome status = Ringmaster({"status", "--help"});
  EXPECT_THAT(status.out, HasSubstr("--format"));
  EXPECT_THAT(status.out, Not(HasSubstr("--json")));
  Outcome serve = Ringmaster({"serve", "--help"});
  EXPECT_THAT(serve.out, Not(HasSubstr("through mpirun one")));
  EXPECT_THAT(serve.out, HasSubstr("Slurm"));
  Outcome submit = Ringmaster({"submit", "--help"});
  EXPECT_THAT(submit.out, AllOf(HasSubstr("--export"),
                                HasSubstr("default: the plan's ranks")));
  EXPECT_THAT(submit.out, Not(HasSubstr("  --output")));
  Outcome spec = Ringmaster({"launch-spec", "--help"});
  EXPECT_THAT(spec.out, HasSubstr("--slurm-log"));
  EXPECT_THAT(spec.out, Not(HasSubstr("  --output")));
}

}  // namespace
}  // namespace ringmaster

namespace ringmaster {
namespace {

// plans/transformer.yaml on two host ranks: every layout's numerical check
// passes (a row each, with its relative error), its step splits into the
// parts its parallelism has, and those parts add up to the step; the GPU
// case is skipped with the reason.
TEST(NewUser, TransformerPlanChecksEveryLayoutAndSplitsTheStep) {
  const std::string out = TempDir("transformer");
  Outcome o = Ringmaster({"run", Source("plans/transformer.yaml"), "--np", "2",
                          "--out", out, "--quiet"});
  ASSERT_EQ(o.exit_code, 0) << o.out << o.err;
  EXPECT_THAT(o.out, HasSubstr("reduce-"));  // the breakdown's header
  EXPECT_THAT(o.out, HasSubstr("skipped 1: a GPU case (backend: cuda)"));
  std::map<std::string, nlohmann::json> by_layout;
  std::ifstream in(ResultsOf(out));
  for (std::string line; std::getline(in, line);) {
    auto r = nlohmann::json::parse(line);
    if (r["status"] != "OK") continue;
    const auto& p = r["case"]["transformer"]["parallel"];
    std::string name = "dp" + std::to_string(p.value("dp", 1));
    if (p.value("tp", 1) > 1)
      name = "tp" + std::to_string(p["tp"].get<int>()) +
             (p.value("sp", false) ? "+sp" : "");
    if (p.value("zero", 0) > 0)
      name += " zero" + std::to_string(p["zero"].get<int>());
    by_layout[name] = r["transformer"];
    // The row in the table, with its check.
    EXPECT_THAT(o.out,
                testing::ContainsRegex(
                    " " + std::regex_replace(name, std::regex("\\+"), "\\+") +
                    " +[12] .* [0-9.]+e-[0-9]+\n"))
        << name;
  }
  ASSERT_EQ(by_layout.size(), 6u) << o.out;
  for (const auto& [name, t] : by_layout) {
    EXPECT_LE(t["loss_rel_error"].get<double>(), 1e-4) << name;
    EXPECT_LE(std::abs(t["breakdown_gap"].get<double>()), 0.05) << name;
    EXPECT_GT(t["compute_s"].get<double>(), 0) << name;
  }
  auto part = [&](const std::string& layout, const char* key) {
    return by_layout[layout].value(key, 0.0);
  };
  EXPECT_GT(part("dp2", "allreduce_exposed_s"), 0);
  EXPECT_EQ(part("dp2", "tp_exposed_s"), 0);
  EXPECT_GT(part("tp2", "tp_exposed_s"), 0);
  EXPECT_GT(part("tp2+sp", "tp_exposed_s"), 0);
  EXPECT_EQ(part("tp2", "allreduce_exposed_s"), 0);
  for (const char* zero : {"dp2 zero1", "dp2 zero3"}) {
    EXPECT_GT(part(zero, "reduce_scatter_exposed_s"), 0) << zero;
    EXPECT_GT(part(zero, "gather_exposed_s"), 0) << zero;
    EXPECT_EQ(part(zero, "allreduce_exposed_s"), 0) << zero;
  }
  EXPECT_EQ(part("dp1", "tp_exposed_s") + part("dp1", "allreduce_exposed_s"),
            0);
  // A rank of tp2 holds half the matrices of dp1's.
  EXPECT_LT(
      std::stoll(by_layout["tp2"]["peak_memory_bytes"].get<std::string>()),
      std::stoll(by_layout["dp1"]["peak_memory_bytes"].get<std::string>()));
  fs::remove_all(out);
}

TEST(NewUser, InferencePlanChecksEveryBatchAndWidth) {
  const std::string out = TempDir("inference");
  Outcome o = Ringmaster({"run", Source("plans/inference.yaml"), "--np", "2",
                          "--out", out, "--quiet"});
  ASSERT_EQ(o.exit_code, 0) << o.out << o.err;
  EXPECT_THAT(o.out, HasSubstr("TPOT p99"));  // the table's header
  EXPECT_THAT(o.out, testing::ContainsRegex(
                         "# objective TPOT p99 <= 50 ms: best tp[12] batch "
                         "[124], [0-9.e+]+ tokens/s per rank"));
  std::map<std::pair<int, int>, nlohmann::json> by_case;  // (tp, batch)
  std::ifstream in(ResultsOf(out));
  for (std::string line; std::getline(in, line);) {
    auto r = nlohmann::json::parse(line);
    if (r["status"] != "OK") continue;
    const auto& t = r["case"]["transformer"];
    const int tp = t["parallel"].value("tp", 1);
    const int batch = std::stoi(t.value("micro_batch", std::string("1")));
    by_case[{tp, batch}] = r["serve"];
    EXPECT_THAT(o.out,
                testing::ContainsRegex(absl::StrFormat(
                    " tp%d +%d +%d .* [0-9.]+e-[0-9]+\n", tp, tp, batch)));
  }
  ASSERT_EQ(by_case.size(), 6u) << o.out;
  for (const auto& [key, s] : by_case) {
    const auto [tp, batch] = key;
    // Prefill and every decode step against the float64 forward pass.
    EXPECT_GE(s["check_rel_error"].get<double>(), 0);
    EXPECT_LE(s["check_rel_error"].get<double>(), 1e-4);
    EXPECT_GT(s["ttft_s"].get<double>(), 0);
    EXPECT_GE(s["tpot_p99_s"].get<double>(), s["tpot_p50_s"].get<double>());
    EXPECT_NEAR(s["tokens_per_s_per_replica"].get<double>(),
                batch / s["tpot_mean_s"].get<double>(),
                1e-6 * s["tokens_per_s_per_replica"].get<double>());
    // The host engine has no separate device clock: its device time per
    // step is the step's own time, and the read rate follows from it.
    EXPECT_EQ(s["tpot_device_p50_s"].get<double>(),
              s["tpot_p50_s"].get<double>());
    EXPECT_EQ(s["tpot_device_mean_s"].get<double>(),
              s["tpot_mean_s"].get<double>());
    EXPECT_NEAR(s["decode_device_read_gbps"].get<double>(),
                s["decode_read_gbps"].get<double>(),
                1e-9 * s["decode_read_gbps"].get<double>());
    // Only a tensor-parallel width spends time in sums.
    EXPECT_EQ(s.value("tp_share", 0.0) > 0, tp > 1) << tp << " " << batch;
  }
  // A tp2 rank holds half the weights and cache of tp1's.
  EXPECT_LT(std::stoll(by_case[{2, 1}]["memory_bytes"].get<std::string>()),
            std::stoll(by_case[{1, 1}]["memory_bytes"].get<std::string>()));
  fs::remove_all(out);
}

}  // namespace
}  // namespace ringmaster
