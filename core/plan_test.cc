#include "core/plan.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <utility>

#include "core/sweep.h"
#include "core/transformer.h"

namespace ringmaster {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr char kGood[] = R"(name: sweep
description: a test
ranks: 4
defaults:
  dtypes: [float32, bfloat16]
cases:
  - name: ar
    collective: all_reduce
    sizes: {min: 8B, max: 1MiB, factor: 4}
    ops: [sum, max]
    placement: out_of_place
    timing: {warmup: 2, min_samples: 3, max_samples: 9, target_ci: 0.05, max_time: 500ms}
  - name: ar-list
    collective: allreduce
    sizes: [1KiB, 4KiB]
    dtypes: int32
    verify: false
    backend: host
)";

TEST(ParsePlanYaml, GoodPlan) {
  auto plan = ParsePlanYaml(kGood, "good.yaml");
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->name(), "sweep");
  EXPECT_EQ(plan->ranks(), 4);
  EXPECT_EQ(plan->source_path(), "good.yaml");
  EXPECT_EQ(plan->source_sha256().size(), 64u);
  ASSERT_EQ(plan->cases_size(), 2);
  const auto& ar = plan->cases(0);
  EXPECT_EQ(ar.collective(), v1::ALL_REDUCE);
  EXPECT_EQ(ar.sizes().min_bytes(), 8);
  EXPECT_EQ(ar.sizes().max_bytes(), 1048576);
  EXPECT_EQ(ar.sizes().factor(), 4);
  ASSERT_EQ(ar.dtypes_size(), 2);  // from defaults
  EXPECT_EQ(ar.dtypes(1), v1::BFLOAT16);
  ASSERT_EQ(ar.ops_size(), 2);
  EXPECT_EQ(ar.ops(1), v1::MAX);
  ASSERT_EQ(ar.in_place_size(), 1);
  EXPECT_FALSE(ar.in_place(0));
  EXPECT_EQ(ar.timing().warmup_iters(), 2);
  EXPECT_EQ(ar.timing().max_samples(), 9);
  EXPECT_DOUBLE_EQ(ar.timing().max_time_s(), 0.5);
  EXPECT_TRUE(ar.verify());
  const auto& list = plan->cases(1);
  EXPECT_EQ(list.sizes().list_bytes_size(), 2);
  EXPECT_EQ(list.dtypes(0), v1::INT32);  // case overrides defaults
  EXPECT_FALSE(list.verify());
  EXPECT_EQ(list.backend(), v1::BACKEND_HOST);
  EXPECT_EQ(list.in_place_size(), 2);  // default: both placements
  EXPECT_EQ(list.timing().min_samples(), DefaultTiming().min_samples());
}

struct BadPlan {
  const char* name;
  const char* yaml;
  const char* expected_prefix;  // "file:line: field:"
  const char* expected_text;
};

void PrintTo(const BadPlan& p, std::ostream* os) { *os << p.name; }

class BadPlanTest : public ::testing::TestWithParam<BadPlan> {};

TEST_P(BadPlanTest, OneLineErrorNamingFileLineAndField) {
  const BadPlan& p = GetParam();
  auto plan = ParsePlanYaml(p.yaml, "bad.yaml");
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
  std::string msg(plan.status().message());
  EXPECT_THAT(msg, StartsWith(p.expected_prefix));
  EXPECT_THAT(msg, HasSubstr(p.expected_text));
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
}

INSTANTIATE_TEST_SUITE_P(
    Errors, BadPlanTest,
    ::testing::Values(
        BadPlan{"unknown_top_key", "name: x\ncolour: red\ncases: []\n",
                "bad.yaml:2: colour:", "unknown key"},
        BadPlan{"transformer_tp_not_dividing_heads",
                "name: x\ncases:\n  - name: a\n    bench: transformer\n"
                "    model: {preset: llama3-8b, layers: 2, seq: 64}\n"
                "    parallel: [{dp: 2}, {tp: 3}]\n",
                "bad.yaml:6: cases[0].parallel[1].tp:", "does not divide"},
        BadPlan{"transformer_zero_without_dp",
                "name: x\ncases:\n  - name: a\n    bench: transformer\n"
                "    model: {preset: llama3-8b, layers: 2, seq: 64}\n"
                "    parallel: {zero: 3}\n",
                "bad.yaml:6: cases[0].parallel.zero:", "dp of 2"},
        BadPlan{"transformer_sp_without_tp",
                "name: x\ncases:\n  - name: a\n    bench: transformer\n"
                "    model: {preset: llama3-8b, layers: 2, seq: 64}\n"
                "    parallel: {sp: true}\n",
                "bad.yaml:6: cases[0].parallel.sp:", "tp of 2"},
        BadPlan{"transformer_unknown_preset",
                "name: x\ncases:\n  - name: a\n    bench: transformer\n"
                "    model: {preset: llama9, layers: 2, seq: 64}\n",
                "bad.yaml:5: cases[0].model.preset:", "llama3-8b"},
        BadPlan{"transformer_shape_missing",
                "name: x\ncases:\n  - name: a\n    bench: transformer\n"
                "    model: {hidden: 64, layers: 2, seq: 64}\n",
                "bad.yaml:5: cases[0].model.heads:", "missing"},
        BadPlan{"transformer_takes_no_bucket",
                "name: x\ncases:\n  - name: a\n    bench: transformer\n"
                "    model: {preset: llama3-8b, layers: 2, seq: 64}\n"
                "    bucket: 1MiB\n",
                "bad.yaml:6: cases[0].bucket:", "bench: transformer"},
        BadPlan{"parallel_belongs_to_transformer",
                "name: x\ncases:\n  - name: a\n    bench: gemm\n"
                "    parallel: {tp: 2}\n",
                "bad.yaml:5: cases[0].parallel:", "bench: transformer"},
        BadPlan{"cuda_keys_not_a_mapping",
                "name: x\ncases:\n  - name: a\n    bench: train\n"
                "    model: {layers: 2, hidden: 8, batch: 4}\n"
                "    cuda: 8\n",
                "bad.yaml:6: cases[0].cuda:", "mapping of the case's keys"},
        BadPlan{"cuda_keys_rename_the_case",
                "name: x\ncases:\n  - name: a\n    bench: train\n"
                "    model: {layers: 2, hidden: 8, batch: 4}\n"
                "    cuda: {name: b}\n",
                "bad.yaml:6: cases[0].cuda.name:", "stay the case's"},
        BadPlan{"cuda_keys_checked_like_the_case",
                "name: x\ncases:\n  - name: a\n    bench: train\n"
                "    model: {layers: 2, hidden: 8, batch: 4}\n"
                "    cuda:\n      model: {layers: 2, hidden: 0, batch: 4}\n",
                "bad.yaml:7: cases[0] (cuda).model.hidden:", ""},
        BadPlan{"cuda_not_in_defaults",
                "name: x\ndefaults:\n  cuda: {steps: 3}\ncases:\n"
                "  - name: a\n    bench: train\n"
                "    model: {layers: 2, hidden: 8, batch: 4}\n",
                "bad.yaml:3: defaults.cuda:", "unknown key"},
        BadPlan{"inference_seq_in_model",
                "name: x\ncases:\n  - name: a\n    bench: inference\n"
                "    model: {preset: llama3-8b, layers: 2, seq: 64}\n"
                "    prompt: 8\n    generate: 4\n",
                "bad.yaml:5: cases[0].model.seq:", "prompt + generate"},
        BadPlan{"inference_prompt_missing",
                "name: x\ncases:\n  - name: a\n    bench: inference\n"
                "    model: {preset: llama3-8b, layers: 2}\n"
                "    generate: 4\n",
                "bad.yaml:3: cases[0].prompt:", "missing"},
        BadPlan{"inference_tp_not_dividing_heads",
                "name: x\ncases:\n  - name: a\n    bench: inference\n"
                "    model: {preset: llama3-8b, layers: 2}\n"
                "    prompt: 8\n    generate: 4\n    parallel: {tp: 3}\n",
                "bad.yaml:8: cases[0].parallel.tp:", "must divide"},
        BadPlan{"inference_takes_no_dp",
                "name: x\ncases:\n  - name: a\n    bench: inference\n"
                "    model: {preset: llama3-8b, layers: 2}\n"
                "    prompt: 8\n    generate: 4\n    parallel: {dp: 2}\n",
                "bad.yaml:8: cases[0].parallel.dp:", "unknown key"},
        BadPlan{"inference_unknown_objective",
                "name: x\ncases:\n  - name: a\n    bench: inference\n"
                "    model: {preset: llama3-8b, layers: 2}\n"
                "    prompt: 8\n    generate: 4\n    slo: {ttft: 1s}\n",
                "bad.yaml:8: cases[0].slo.ttft:", "unknown key"},
        BadPlan{"inference_takes_no_optimizer",
                "name: x\ncases:\n  - name: a\n    bench: inference\n"
                "    model: {preset: llama3-8b, layers: 2}\n"
                "    prompt: 8\n    generate: 4\n    optimizer: sgd\n",
                "bad.yaml:8: cases[0].optimizer:", "bench: inference"},
        BadPlan{"prompt_belongs_to_inference",
                "name: x\ncases:\n  - name: a\n    bench: transformer\n"
                "    model: {preset: llama3-8b, layers: 2, seq: 64}\n"
                "    prompt: 8\n",
                "bad.yaml:6: cases[0].prompt:", "bench: inference"},
        BadPlan{"layers_past_the_preset",
                "name: x\ncases:\n  - name: a\n    bench: transformer\n"
                "    model: {preset: llama3-8b, layers: 33, seq: 64}\n",
                "bad.yaml:5: cases[0].model.layers:", ""},
        BadPlan{"unknown_case_key",
                "name: x\ncases:\n  - name: a\n    collective: all_reduce\n"
                "    sizes: 8B\n    sise: 9\n",
                "bad.yaml:6: cases[0].sise:", "unknown key"},
        BadPlan{"negative_size",
                "name: x\ncases:\n  - name: a\n    collective: all_reduce\n"
                "    sizes: {min: -8, max: 1MiB}\n",
                "bad.yaml:5: cases[0].sizes.min:", "negative"},
        BadPlan{"wrong_type_factor",
                "name: x\ncases:\n  - name: a\n    collective: all_reduce\n"
                "    sizes: {min: 8, max: 1MiB, factor: two}\n",
                "bad.yaml:5: cases[0].sizes.factor:", "expected an integer"},
        BadPlan{"wrong_type_dtypes",
                "name: x\ncases:\n  - name: a\n    collective: all_reduce\n"
                "    sizes: 8B\n    dtypes: {a: b}\n",
                "bad.yaml:6: cases[0].dtypes:", "expected a value or a list"},
        BadPlan{"unknown_dtype",
                "name: x\ncases:\n  - name: a\n    collective: all_reduce\n"
                "    sizes: 8B\n    dtypes: [float32, float128]\n",
                "bad.yaml:6: cases[0].dtypes:", "float128"},
        BadPlan{"unknown_collective",
                "name: x\ncases:\n  - name: a\n    collective: all_mix\n"
                "    sizes: 8B\n",
                "bad.yaml:4: cases[0].collective:", "expected one of"},
        BadPlan{"missing_cases", "name: x\n", "bad.yaml:1: cases:", "missing"},
        BadPlan{
            "missing_name",
            "cases:\n  - name: a\n    collective: all_reduce\n    sizes: 8B\n",
            "bad.yaml:1: name:", "missing"},
        BadPlan{"max_below_min",
                "name: x\ncases:\n  - name: a\n    collective: all_reduce\n"
                "    sizes: {min: 1MiB, max: 1KiB}\n",
                "bad.yaml:5: cases[0].sizes.max:", "at least min"},
        BadPlan{"bad_yaml", "name: x\ncases: [\n  - a\n",
                "bad.yaml:", "invalid YAML"},
        BadPlan{"tab_yaml", "name: x\n\tcases: 1\n", "bad.yaml:", "(yaml)"},
        BadPlan{"empty", "", "bad.yaml:1: (plan):", "empty"},
        BadPlan{"scalar_doc", "hello\n", "bad.yaml:1: (plan):", "mapping"},
        BadPlan{"duplicate_case",
                "name: x\ncases:\n  - {name: a, collective: all_reduce, sizes: "
                "8B}\n"
                "  - {name: a, collective: all_reduce, sizes: 8B}\n",
                "bad.yaml:4: cases[1].name:", "duplicate"},
        BadPlan{"ops_on_non_reduction",
                "name: x\ncases:\n  - name: a\n    collective: all_gather\n"
                "    sizes: 8B\n    ops: [sum]\n",
                "bad.yaml:6: cases[0].ops:", "does not reduce"},
        BadPlan{
            "timing_min_above_max",
            "name: x\ncases:\n  - name: a\n    collective: all_reduce\n"
            "    sizes: 8B\n    timing: {min_samples: 10, max_samples: 5}\n",
            "bad.yaml:6: cases[0].timing.max_samples:", "at least min_samples"},
        BadPlan{"nan_ci",
                "name: x\ncases:\n  - name: a\n    collective: all_reduce\n"
                "    sizes: 8B\n    timing: {target_ci: .nan}\n",
                "bad.yaml:6: cases[0].timing.target_ci:", "expected a number"},
        BadPlan{"size_below_element",
                "name: x\ncases:\n  - name: a\n    collective: all_reduce\n"
                "    sizes: 2B\n",
                "bad.yaml:5: cases[0].sizes:", "smaller than one float32"},
        BadPlan{"defaults_error",
                "name: x\ndefaults:\n  dtypes: [bogus]\ncases:\n"
                "  - {name: a, collective: all_reduce, sizes: 8B}\n",
                "bad.yaml:3: defaults.dtypes:", "bogus"},
        BadPlan{"bad_bool",
                "name: x\ncases:\n  - name: a\n    collective: all_reduce\n"
                "    sizes: 8B\n    verify: maybe\n",
                "bad.yaml:6: cases[0].verify:", "true or false"},
        BadPlan{"huge_size",
                "name: x\ncases:\n  - name: a\n    collective: all_reduce\n"
                "    sizes: 2TiB\n",
                "bad.yaml:5: cases[0].sizes:", "at most"},
        BadPlan{"unknown_bench",
                "name: x\ncases:\n  - {name: a, bench: p3p, sizes: 8B}\n",
                "bad.yaml:3: cases[0].bench:", "p2p, latency"},
        BadPlan{"bench_with_collective_key",
                "name: x\ncases:\n  - name: a\n    bench: p2p\n    sizes: 8B\n "
                "   root: 0\n",
                "bad.yaml:6: cases[0].root:", "collective's key"},
        BadPlan{"bench_key_on_collective",
                "name: x\ncases:\n  - {name: a, collective: all_reduce, sizes: "
                "8B, method: ce}\n",
                "bad.yaml:3: cases[0].method:", "node benchmarks"},
        BadPlan{"find_slow_repeat_zero",
                "name: x\ncases:\n  - {name: a, bench: find_slow, sizes: 1MiB, "
                "repeat: 0}\n",
                "bad.yaml:3: cases[0].repeat:", "in [1, 9]"},
        BadPlan{"repeat_on_p2p",
                "name: x\ncases:\n  - {name: a, bench: p2p, sizes: 1MiB, "
                "repeat: 3}\n",
                "bad.yaml:3: cases[0].repeat:", "not the bad-node finder"},
        BadPlan{"bad_method",
                "name: x\ncases:\n  - name: a\n    bench: p2p\n    sizes: 8B\n"
                "    method: [ce, dma]\n",
                "bad.yaml:6: cases[0].method:", "ce, sm, cpu"},
        BadPlan{"host_direction_on_p2p",
                "name: x\ncases:\n  - {name: a, bench: p2p, sizes: 8B, "
                "direction: to_host}\n",
                "bad.yaml:3: cases[0].direction:", "write, read"},
        BadPlan{"p2p_without_sizes",
                "name: x\ncases:\n  - {name: a, bench: p2p}\n",
                "bad.yaml:3: cases[0].sizes:", "missing"},
        BadPlan{"gemm_bad_shape",
                "name: x\ncases:\n  - name: a\n    bench: gemm\n    shapes: "
                "[12x3]\n",
                "bad.yaml:5: cases[0].shapes:", "MxNxK"},
        BadPlan{"gemm_with_sizes",
                "name: x\ncases:\n  - {name: a, bench: gemm, shapes: [64], "
                "sizes: 8B}\n",
                "bad.yaml:3: cases[0].sizes:", "shapes"},
        BadPlan{"gemm_bad_dtype",
                "name: x\ncases:\n  - {name: a, bench: gemm, shapes: [64], "
                "dtypes: [int8]}\n",
                "bad.yaml:3: cases[0].dtypes:", "fp8_e4m3"},
        BadPlan{"gemm_type_on_collective",
                "name: x\ncases:\n  - {name: a, collective: all_reduce, sizes: "
                "8B, dtypes: [tf32]}\n",
                "bad.yaml:3: cases[0].dtypes:", "GEMM type"},
        BadPlan{"cpu_method_on_cuda",
                "name: x\ncases:\n  - {name: a, bench: p2p, sizes: 8B, "
                "backend: cuda, method: cpu}\n",
                "bad.yaml:3: cases[0].method:", "host backend"},
        BadPlan{"too_many_gpu_iters",
                "name: x\ncases:\n  - name: a\n    bench: p2p\n    sizes: 8B\n"
                "    timing: {iters: 1000}\n",
                "bad.yaml:6: cases[0].timing.iters:", "at most 256"},
        BadPlan{"train_without_model",
                "name: x\ncases:\n  - {name: a, bench: train}\n",
                "bad.yaml:3: cases[0].model:", "missing"},
        BadPlan{"train_model_key",
                "name: x\ncases:\n  - name: a\n    bench: train\n"
                "    model: {layers: 2, hidden: 4, batch: 2, depth: 3}\n",
                "bad.yaml:5: cases[0].model.depth:", "unknown key"},
        BadPlan{"train_bad_optimizer",
                "name: x\ncases:\n  - name: a\n    bench: train\n"
                "    model: {layers: 2, hidden: 4, batch: 2}\n    optimizer: "
                "lion\n",
                "bad.yaml:6: cases[0].optimizer:", "sgd or adam"},
        BadPlan{"train_with_sizes",
                "name: x\ncases:\n  - name: a\n    bench: train\n"
                "    model: {layers: 2, hidden: 4, batch: 2}\n    sizes: 8B\n",
                "bad.yaml:6: cases[0].sizes:", "bench: train"},
        BadPlan{
            "train_bad_mode",
            "name: x\ncases:\n  - name: a\n    bench: train\n"
            "    model: {layers: 2, hidden: 4, batch: 2}\n    mode: serve\n",
            "bad.yaml:6: cases[0].mode:", "train or inference"},
        BadPlan{"train_bad_comm",
                "name: x\ncases:\n  - name: a\n    bench: train\n"
                "    model: {layers: 2, hidden: 4, batch: 2}\n    comm: gloo\n",
                "bad.yaml:6: cases[0].comm:", "nccl or ce"},
        BadPlan{"train_bad_schedule",
                "name: x\ncases:\n  - name: a\n    bench: train\n"
                "    model: {layers: 2, hidden: 4, batch: 2}\n"
                "    schedule: zero\n",
                "bad.yaml:6: cases[0].schedule:", "ddp or pipelined"},
        BadPlan{"train_pipelined_without_overlap",
                "name: x\ncases:\n  - name: a\n    bench: train\n"
                "    model: {layers: 2, hidden: 4, batch: 2}\n"
                "    schedule: pipelined\n    overlap: [true, false]\n",
                "bad.yaml:7: cases[0].overlap:", "always overlaps"},
        BadPlan{"train_deferred_without_pipelined",
                "name: x\ncases:\n  - name: a\n    bench: train\n"
                "    model: {layers: 2, hidden: 4, batch: 2}\n"
                "    deferred_layers: 1\n",
                "bad.yaml:6: cases[0].deferred_layers:",
                "only with schedule: pipelined"},
        BadPlan{"train_deferred_beyond_layers",
                "name: x\ncases:\n  - name: a\n    bench: train\n"
                "    model: {layers: 2, hidden: 4, batch: 2}\n"
                "    schedule: pipelined\n    deferred_layers: 3\n",
                "bad.yaml:7: cases[0].deferred_layers:", "in [1, 2]"},
        BadPlan{"train_bad_gemm",
                "name: x\ncases:\n  - name: a\n    bench: train\n"
                "    model: {layers: 2, hidden: 4, batch: 2}\n"
                "    gemm: fastest\n",
                "bad.yaml:6: cases[0].gemm:", "autotune or heuristic"},
        BadPlan{"train_negative_loss_scale",
                "name: x\ncases:\n  - name: a\n    bench: train\n"
                "    model: {layers: 2, hidden: 4, batch: 2}\n"
                "    loss_scale: -8\n",
                "bad.yaml:6: cases[0].loss_scale:", "in (0,"},
        BadPlan{"train_master_weights_not_bool",
                "name: x\ncases:\n  - name: a\n    bench: train\n"
                "    model: {layers: 2, hidden: 4, batch: 2}\n"
                "    master_weights: sometimes\n",
                "bad.yaml:6: cases[0].master_weights:", "true or false"},
        BadPlan{"master_weights_on_collective",
                "name: x\ncases:\n  - {name: a, collective: all_reduce, "
                "sizes: 8B, master_weights: true}\n",
                "bad.yaml:3: cases[0].master_weights:", "not to collectives"},
        BadPlan{"train_key_on_p2p",
                "name: x\ncases:\n  - {name: a, bench: p2p, sizes: 8B, "
                "optimizer: sgd}\n",
                "bad.yaml:3: cases[0].optimizer:", "bench: train"},
        BadPlan{"nodes_without_ranks_per_node",
                "name: x\nnodes: 4\ncases:\n  - {name: a, collective: "
                "all_reduce, sizes: 8B}\n",
                "bad.yaml:2: nodes:", "needs ranks_per_node"},
        BadPlan{"ranks_not_nodes_times_ranks_per_node",
                "name: x\nranks: 6\nnodes: 4\nranks_per_node: 2\ncases:\n"
                "  - {name: a, collective: all_reduce, sizes: 8B}\n",
                "bad.yaml:2: ranks:", "nodes x ranks_per_node = 8"},
        BadPlan{"ladder_of_nodes_without_ranks_per_node",
                "name: x\ncases:\n  - {name: a, collective: all_reduce, "
                "sizes: 8B, ladder: {nodes: [1, 2]}}\n",
                "bad.yaml:3: cases[0].ladder:", "ranks_per_node"},
        BadPlan{"bad_traffic",
                "name: x\ncases:\n  - {name: a, bench: p2p, sizes: 8B, "
                "traffic: both}\n",
                "bad.yaml:3: cases[0].traffic:", "uni or bidir"}),
    [](const ::testing::TestParamInfo<BadPlan>& info) {
      return info.param.name;
    });

TEST(ParsePlanYaml, NodesTimesRanksPerNodeAndLaddersOfNodes) {
  auto plan = ParsePlanYaml(R"(name: cluster
nodes: 4
ranks_per_node: 2
cases:
  - name: ar
    collective: all_reduce
    sizes: 1MiB
    ladder: {nodes: [1, 2, 4]}
  - name: ranks
    collective: all_reduce
    sizes: 1MiB
    ladder: [1, 3]
)",
                            "cluster.yaml");
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->nodes(), 4);
  EXPECT_EQ(plan->ranks_per_node(), 2);
  EXPECT_EQ(plan->ranks(), 8);
  EXPECT_THAT(plan->cases(0).ladder(), ::testing::ElementsAre(2, 4, 8));
  EXPECT_THAT(plan->cases(1).ladder(), ::testing::ElementsAre(1, 3));
}

TEST(ParsePlanYaml, NodeBenchmarkDefaults) {
  auto plan = ParsePlanYaml(R"(name: x
cases:
  - {name: p, bench: p2p, sizes: [1MiB]}
  - {name: h, bench: host_device, sizes: [1MiB], memory: [pinned, pageable]}
  - {name: l, bench: latency}
  - {name: g, bench: gemm, shapes: [8192, 4096x4096x16384], dtypes: [bf16, fp8_e4m3, tf32]}
)",
                            "x.yaml");
  ASSERT_TRUE(plan.ok()) << plan.status();
  const v1::CaseSpec& p = plan->cases(0);
  EXPECT_EQ(p.bench(), v1::BENCH_P2P);
  ASSERT_EQ(p.methods_size(), 1);
  EXPECT_EQ(p.methods(0), v1::COPY_METHOD_UNSPECIFIED);  // the backend's own
  ASSERT_EQ(p.directions_size(), 1);
  EXPECT_EQ(p.directions(0), v1::WRITE);
  ASSERT_EQ(p.patterns_size(), 1);
  EXPECT_EQ(p.patterns(0), v1::PAIR);
  EXPECT_TRUE(p.verify());
  EXPECT_EQ(p.timing().fixed_iters_per_sample(), 0);
  EXPECT_TRUE(p.timing().ci_on_median());
  const v1::CaseSpec& h = plan->cases(1);
  EXPECT_EQ(h.directions_size(), 2);  // to_device and to_host
  EXPECT_EQ(h.host_memory_size(), 2);
  EXPECT_EQ(h.patterns(0), v1::ONE_RANK);
  const v1::CaseSpec& l = plan->cases(2);
  ASSERT_EQ(l.sizes().list_bytes_size(), 1);
  EXPECT_EQ(l.sizes().list_bytes(0), 8);
  EXPECT_EQ(l.latency_paths(0), v1::PEER);
  const v1::CaseSpec& g = plan->cases(3);
  ASSERT_EQ(g.gemm_shapes_size(), 2);
  EXPECT_EQ(g.gemm_shapes(0).m(), 8192);
  EXPECT_EQ(g.gemm_shapes(0).k(), 8192);
  EXPECT_EQ(g.gemm_shapes(1).n(), 4096);
  EXPECT_EQ(g.gemm_shapes(1).k(), 16384);
  EXPECT_EQ(g.dtypes(0), v1::BFLOAT16);
  EXPECT_EQ(g.dtypes(1), v1::FLOAT8_E4M3);
  EXPECT_EQ(g.dtypes(2), v1::TFLOAT32);
}

TEST(ParsePlanYaml, FindSlowKeysReachEveryCase) {
  auto plan = ParsePlanYaml(R"(name: x
cases:
  - {name: f, bench: find_slow, sizes: [1MiB, 4MiB], slow_ratio: 0.6, repeat: 3, members: nodes}
  - {name: d, bench: find_slow, sizes: [1MiB]}
)",
                            "x.yaml");
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->cases(0).repeat(), 3);
  EXPECT_EQ(plan->cases(1).repeat(), 1);
  EXPECT_DOUBLE_EQ(plan->cases(1).slow_ratio(), 0.8);
  EXPECT_EQ(plan->cases(1).members(), "ranks");
  auto cases = ExpandPlan(*plan, 1000, 4);
  ASSERT_TRUE(cases.ok()) << cases.status();
  ASSERT_EQ(cases->size(), 3u);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ((*cases)[i].repeat(), 3);
    EXPECT_DOUBLE_EQ((*cases)[i].slow_ratio(), 0.6);
    EXPECT_EQ((*cases)[i].members(), "nodes");
  }
  EXPECT_EQ((*cases)[2].repeat(), 1);
}

TEST(ParsePlanYaml, TrainingCaseAndExpansion) {
  auto plan = ParsePlanYaml(R"(name: x
cases:
  - name: mlp
    bench: train
    model: {layers: 8, hidden: 8192, batch: 4096}
    optimizer: adam
    bucket: 100MiB
    overlap: [true, false]
    ladder: [1, 2]
    dtypes: [bfloat16]
    steps: 30
    check_steps: 2
    scaling: strong
    comm: ce
)",
                            "x.yaml");
  ASSERT_TRUE(plan.ok()) << plan.status();
  const v1::TrainSpec& t = plan->cases(0).train();
  EXPECT_EQ(t.layers(), 8);
  EXPECT_EQ(t.hidden(), 8192);
  EXPECT_EQ(t.batch(), 4096);
  EXPECT_EQ(t.optimizer(), "adam");
  EXPECT_DOUBLE_EQ(t.lr(), 1e-3);  // adam's default
  EXPECT_EQ(t.bucket_bytes(), 100 << 20);
  EXPECT_EQ(t.steps(), 30);
  EXPECT_EQ(t.check_steps(), 2);
  EXPECT_TRUE(t.strong());
  EXPECT_EQ(t.comm(), "ce");
  auto cases = ExpandPlan(*plan, 100000, 2);
  ASSERT_TRUE(cases.ok());
  ASSERT_EQ(cases->size(), 4u);  // ladder x overlap
  EXPECT_EQ((*cases)[0].nranks(), 1);
  EXPECT_TRUE((*cases)[0].train().overlap());
  EXPECT_FALSE((*cases)[1].train().overlap());
  EXPECT_EQ((*cases)[3].nranks(), 2);
  EXPECT_EQ((*cases)[3].dtype(), v1::BFLOAT16);
  // Defaults: SGD at 0.1, 25 MiB buckets, overlap, 20 steps, float32.
  auto d = ParsePlanYaml(
      "name: x\ncases:\n  - {name: m, bench: train, model: {layers: 1, hidden: "
      "4, batch: 2}}\n",
      "d.yaml");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->cases(0).train().optimizer(), "sgd");
  EXPECT_DOUBLE_EQ(d->cases(0).train().lr(), 0.1);
  EXPECT_EQ(d->cases(0).train().bucket_bytes(), 25 << 20);
  EXPECT_EQ(d->cases(0).train().steps(), 20);
  EXPECT_EQ(d->cases(0).dtypes(0), v1::FLOAT32);
  EXPECT_EQ(d->cases(0).train().comm(), "nccl");
  EXPECT_EQ(d->cases(0).train().schedule(), "ddp");
  EXPECT_EQ(d->cases(0).train().deferred_layers(), 0);
  EXPECT_FALSE(d->cases(0).train().master_weights());
  EXPECT_EQ(d->cases(0).train().loss_scale(), 0);  // auto
  EXPECT_EQ(d->cases(0).train().gemm(), "autotune");
  // Precision keys: a dtype sweep with master weights, a fixed loss scale,
  // the heuristic's GEMM algorithm; "auto" is 0.
  auto prec = ParsePlanYaml(
      "name: x\ncases:\n  - {name: m, bench: train, dtypes: [fp16, tf32], "
      "master_weights: true, loss_scale: 1024, gemm: heuristic, model: "
      "{layers: 1, hidden: 4, batch: [2, 4]}}\n  - {name: n, bench: train, "
      "loss_scale: auto, model: {layers: 1, hidden: 4, batch: 2}}\n",
      "m.yaml");
  ASSERT_TRUE(prec.ok()) << prec.status();
  EXPECT_TRUE(prec->cases(0).train().master_weights());
  EXPECT_EQ(prec->cases(0).train().loss_scale(), 1024);
  EXPECT_EQ(prec->cases(0).train().gemm(), "heuristic");
  EXPECT_EQ(prec->cases(1).train().loss_scale(), 0);
  auto prec_cases = ExpandPlan(*prec, 100000, 1);
  ASSERT_TRUE(prec_cases.ok()) << prec_cases.status();
  ASSERT_EQ(prec_cases->size(), 5u);  // 2 batches x 2 dtypes, then n
  std::set<std::pair<int64_t, v1::DataType>> points;
  for (int i = 0; i < 4; ++i) {
    points.insert({(*prec_cases)[i].train().batch(), (*prec_cases)[i].dtype()});
    EXPECT_TRUE((*prec_cases)[i].train().master_weights());
  }
  EXPECT_EQ(points.size(), 4u);
  auto pipe = ParsePlanYaml(
      "name: x\ncases:\n  - {name: m, bench: train, schedule: pipelined, "
      "deferred_layers: 3, model: {layers: 8, hidden: 4, batch: 2}}\n",
      "p.yaml");
  ASSERT_TRUE(pipe.ok()) << pipe.status();
  EXPECT_EQ(pipe->cases(0).train().schedule(), "pipelined");
  EXPECT_EQ(pipe->cases(0).train().deferred_layers(), 3);
  // Modes and a batch sweep expand; inference takes one overlap setting.
  auto sweep = ParsePlanYaml(
      "name: x\ncases:\n  - {name: m, bench: train, mode: [train, inference], "
      "overlap: [true, false],"
      " model: {layers: 1, hidden: 4, batch: [2, 8]}}\n",
      "s.yaml");
  ASSERT_TRUE(sweep.ok()) << sweep.status();
  auto sc = ExpandPlan(*sweep, 100000, 1);
  ASSERT_TRUE(sc.ok());
  ASSERT_EQ(sc->size(),
            2u * 2 + 2u);  // train: batch x overlap; inference: batch
  EXPECT_FALSE((*sc)[0].train().inference());
  EXPECT_EQ((*sc)[0].train().batch(), 2);
  EXPECT_EQ((*sc)[2].train().batch(), 8);
  EXPECT_TRUE((*sc)[4].train().inference());
  EXPECT_FALSE((*sc)[4].train().overlap());
  EXPECT_EQ((*sc)[5].train().batch(), 8);
}

// A preset's shape with fewer layers, a list of layouts (one case each,
// on dp x tp ranks) and the dtype left to the backend.
TEST(ParsePlanYaml, TransformerCaseAndExpansion) {
  auto plan = ParsePlanYaml(R"(name: x
cases:
  - name: llama
    bench: transformer
    model: {preset: llama3-8b, layers: 4, seq: 4096, micro_batch: 2}
    parallel: [{dp: 2}, {tp: 2, sp: true}, {dp: 2, tp: 2, zero: 3}]
    weight_decay: 0.1
    steps: 7
)",
                            "x.yaml");
  ASSERT_TRUE(plan.ok()) << plan.status();
  const v1::TransformerSpec& t = plan->cases(0).transformer();
  EXPECT_EQ(t.preset(), "llama3-8b");
  EXPECT_EQ(t.layers(), 4);
  EXPECT_EQ(t.hidden(), 4096);
  EXPECT_EQ(t.kv_heads(), 8);
  EXPECT_EQ(t.ffn_hidden(), 14336);
  EXPECT_EQ(t.seq(), 4096);
  EXPECT_EQ(t.micro_batch(), 2);
  EXPECT_EQ(t.optimizer(), "adamw");
  EXPECT_DOUBLE_EQ(t.weight_decay(), 0.1);
  EXPECT_EQ(t.steps(), 7);
  auto cases = ExpandPlan(*plan, 100000, 4);
  ASSERT_TRUE(cases.ok()) << cases.status();
  ASSERT_EQ(cases->size(), 3u);
  EXPECT_EQ((*cases)[0].nranks(), 2);
  EXPECT_EQ((*cases)[2].nranks(), 4);
  EXPECT_EQ((*cases)[2].transformer().parallel().zero(), 3);
  EXPECT_TRUE((*cases)[1].transformer().parallel().sp());
  EXPECT_EQ((*cases)[0].dtype(), v1::DATA_TYPE_UNSPECIFIED);
  EXPECT_EQ(LayoutName((*cases)[2]), "dp2 tp2 zero3");
  EXPECT_EQ(LayoutName((*cases)[1]), "tp2+sp");
}

TEST(ParsePlanYaml, InferenceCaseAndExpansion) {
  auto plan = ParsePlanYaml(R"(name: x
cases:
  - name: serve
    bench: inference
    model: {preset: llama3-8b, layers: 4}
    parallel: [{tp: 1}, {tp: 2}]
    prompt: 1024
    generate: 256
    batch: [1, 8, 64]
    slo: {tpot_p99: 30ms}
)",
                            "x.yaml");
  ASSERT_TRUE(plan.ok()) << plan.status();
  const v1::CaseSpec& spec = plan->cases(0);
  EXPECT_EQ(spec.transformer().hidden(), 4096);
  EXPECT_EQ(spec.transformer().seq(), 1280);  // the cache: prompt + generate
  EXPECT_EQ(spec.serve().prompt(), 1024);
  EXPECT_EQ(spec.serve().generate(), 256);
  EXPECT_DOUBLE_EQ(spec.serve().slo_tpot_p99_s(), 0.030);
  EXPECT_EQ(spec.serve().repeats(), 3);
  auto cases = ExpandPlan(*plan, 100000, 2);
  ASSERT_TRUE(cases.ok()) << cases.status();
  ASSERT_EQ(cases->size(), 6u);  // widths x batches
  const v1::Case& last = (*cases)[5];
  EXPECT_EQ(last.bench(), v1::BENCH_INFERENCE);
  EXPECT_EQ(last.nranks(), 2);
  EXPECT_EQ(last.transformer().micro_batch(), 64);
  EXPECT_EQ(last.serve().generate(), 256);
  EXPECT_EQ(LayoutName(last), "tp2");
  EXPECT_EQ(LayoutName((*cases)[0]), "tp1");
  EXPECT_EQ((*cases)[1].transformer().micro_batch(), 8);
}

// `cuda:` gives a case its GPU sizes: a launch on the cuda backend runs
// them, any other the case as written; the name stays the case's.
TEST(ParsePlanYaml, CudaKeysAreTheCaseOnGpus) {
  auto plan = ParsePlanYaml(R"(name: x
cases:
  - name: mlp
    bench: train
    model: {layers: 4, hidden: 512, batch: 64}
    ladder: [1, 2]
    check_steps: 3
    cuda: {model: {layers: 8, hidden: 4096, batch: 512}, dtypes: [bfloat16],
           check_steps: 0}
  - name: plain
    bench: train
    model: {layers: 2, hidden: 64, batch: 8}
)",
                            "x.yaml");
  ASSERT_TRUE(plan.ok()) << plan.status();
  const v1::CaseSpec& spec = plan->cases(0);
  EXPECT_EQ(spec.train().hidden(), 512);
  ASSERT_TRUE(spec.has_cuda());
  EXPECT_EQ(spec.cuda().name(), "mlp");
  EXPECT_EQ(spec.cuda().train().hidden(), 4096);
  EXPECT_EQ(spec.cuda().train().check_steps(), 0);
  EXPECT_EQ(spec.cuda().ladder_size(), 2);  // the case's other keys kept
  EXPECT_FALSE(plan->cases(1).has_cuda());

  const v1::Plan gpu = PlanForBackend(*plan, "cuda");
  EXPECT_EQ(gpu.cases(0).train().hidden(), 4096);
  EXPECT_EQ(gpu.cases(0).dtypes(0), v1::BFLOAT16);
  EXPECT_FALSE(gpu.cases(0).has_cuda());
  EXPECT_EQ(gpu.cases(1).train().hidden(), 64);
  for (const char* backend : {"host", "auto"}) {
    const v1::Plan host = PlanForBackend(*plan, backend);
    EXPECT_EQ(host.cases(0).train().hidden(), 512) << backend;
    EXPECT_FALSE(host.cases(0).has_cuda()) << backend;
  }
  auto cases = ExpandPlan(gpu, 100000, 2);
  ASSERT_TRUE(cases.ok()) << cases.status();
  EXPECT_EQ((*cases)[0].train().hidden(), 4096);
}

TEST(ParsePlanYaml, ShippedP2pPlanIsValid) {
  auto plan =
      LoadPlanFile(std::string(RINGMASTER_SOURCE_DIR) + "/plans/p2p.yaml");
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_GT(plan->cases_size(), 10);
  auto dp = LoadPlanFile(std::string(RINGMASTER_SOURCE_DIR) +
                         "/plans/dp-scaling.yaml");
  ASSERT_TRUE(dp.ok()) << dp.status();
  auto tf = LoadPlanFile(std::string(RINGMASTER_SOURCE_DIR) +
                         "/plans/transformer.yaml");
  ASSERT_TRUE(tf.ok()) << tf.status();
}

TEST(LoadPlanFile, MissingFileIsNotFound) {
  auto plan = LoadPlanFile("/nonexistent/dir/plan.yaml");
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(plan.status().message()),
              StartsWith("/nonexistent/dir/plan.yaml: cannot read plan file"));
}

TEST(LoadPlanFile, DirectoryIsNotAPlan) {
  auto plan = LoadPlanFile("/tmp");
  ASSERT_FALSE(plan.ok());
  EXPECT_THAT(std::string(plan.status().message()),
              HasSubstr("not a regular file"));
}

TEST(Sha256Hex, KnownVector) {
  EXPECT_EQ(Sha256Hex("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

}  // namespace
}  // namespace ringmaster
