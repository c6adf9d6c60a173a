#include "core/sweep.h"

#include "absl/strings/str_format.h"
#include "core/names.h"
#include "core/status_macros.h"

namespace ringmaster {

std::vector<int64_t> SweepSizes(const v1::SizeSweep& sweep) {
  std::vector<int64_t> sizes;
  if (sweep.list_bytes_size() > 0) {
    sizes.assign(sweep.list_bytes().begin(), sweep.list_bytes().end());
    return sizes;
  }
  if (sweep.min_bytes() <= 0 || sweep.factor() < 2) {
    if (sweep.min_bytes() > 0) sizes.push_back(sweep.min_bytes());
    return sizes;
  }
  for (int64_t s = sweep.min_bytes(); s <= sweep.max_bytes();) {
    sizes.push_back(s);
    if (s > sweep.max_bytes() / sweep.factor()) break;  // next would overflow
    s *= sweep.factor();
  }
  return sizes;
}

namespace {

// (src, dst) rank pairs of one pattern; -1 = every rank / not applicable.
// With nranks unknown (0), one placeholder stands for all of them.
std::vector<std::pair<int, int>> PatternRanks(v1::TransferPattern pattern,
                                              int nranks) {
  std::vector<std::pair<int, int>> out;
  if (nranks <= 0) {
    out.emplace_back(-1, -1);
    return out;
  }
  switch (pattern) {
    case v1::PAIR:
      for (int s = 0; s < nranks; ++s) {
        for (int d = 0; d < nranks; ++d) {
          if (s != d) out.emplace_back(s, d);
        }
      }
      break;
    case v1::ALL_TO_ONE:
      if (nranks > 1)
        for (int d = 0; d < nranks; ++d) out.emplace_back(-1, d);
      break;
    case v1::ONE_TO_ALL:
      if (nranks > 1)
        for (int s = 0; s < nranks; ++s) out.emplace_back(s, -1);
      break;
    case v1::ALL_RANKS:
      out.emplace_back(-1, -1);
      break;
    default:  // ONE_RANK
      for (int r = 0; r < nranks; ++r) out.emplace_back(r, -1);
      break;
  }
  return out;
}

// Expands a node benchmark: method, direction, traffic, pattern, memory,
// latency path, dtype and shape or size, then the ranks of the pattern.
// The next case of `spec` (its seq and spec name set), or an error once
// the plan has expanded to `max_cases`.
absl::StatusOr<v1::Case> NextCase(const v1::Plan& plan,
                                  const v1::CaseSpec& spec, size_t so_far,
                                  int64_t max_cases) {
  if (static_cast<int64_t>(so_far) >= max_cases) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: the plan expands to more than %d cases",
                        plan.source_path(), max_cases));
  }
  v1::Case c;
  c.set_seq(static_cast<int64_t>(so_far));
  c.set_spec_name(spec.name());
  c.set_host_max_bytes(spec.sizes().host_max_bytes());
  return c;
}

absl::Status ExpandBench(const v1::Plan& plan, const v1::CaseSpec& spec,
                         int nranks, int64_t max_cases,
                         std::vector<v1::Case>* cases) {
  // A repeated field's values, or {fallback} when it is empty. (Built in
  // one go: GCC 12 warns falsely on push_back after a range copy.)
  auto list = [](const auto& repeated, auto fallback) {
    using T = decltype(fallback);
    if (repeated.empty()) return std::vector<T>{fallback};
    std::vector<T> v(repeated.size());
    for (int i = 0; i < repeated.size(); ++i)
      v[i] = static_cast<T>(repeated[i]);
    return v;
  };
  auto methods = list(spec.methods(), v1::COPY_METHOD_UNSPECIFIED);
  auto dirs = list(spec.directions(), v1::COPY_DIRECTION_UNSPECIFIED);
  auto bidir = list(spec.bidirectional(), false);
  auto patterns = list(spec.patterns(), v1::ONE_RANK);
  auto memories = list(spec.host_memory(), v1::HOST_MEMORY_UNSPECIFIED);
  auto paths = list(spec.latency_paths(), v1::LATENCY_PATH_UNSPECIFIED);
  if (spec.bench() == v1::BENCH_LATENCY) patterns = {v1::PAIR};
  std::vector<v1::GemmShape> shapes(spec.gemm_shapes().begin(),
                                    spec.gemm_shapes().end());
  std::vector<int64_t> sizes = SweepSizes(spec.sizes());
  for (auto method : methods)
    for (auto dir : dirs)
      for (bool bd : bidir)
        for (auto pattern : patterns)
          for (auto memory : memories)
            for (auto path : paths)
              for (int dt : spec.dtypes()) {
                const int n_points = spec.bench() == v1::BENCH_GEMM
                                         ? static_cast<int>(shapes.size())
                                         : static_cast<int>(sizes.size());
                for (int point = 0; point < n_points; ++point) {
                  v1::TransferPattern p = pattern;
                  if (spec.bench() == v1::BENCH_LATENCY && path == v1::HOST)
                    p = v1::ONE_RANK;
                  for (auto [src, dst] : PatternRanks(p, nranks)) {
                    RM_ASSIGN_OR_RETURN(
                        v1::Case c,
                        NextCase(plan, spec, cases->size(), max_cases));
                    c.set_bench(spec.bench());
                    c.set_method(method);
                    c.set_direction(dir);
                    c.set_bidirectional(bd);
                    c.set_pattern(p);
                    c.set_host_memory(memory);
                    c.set_latency_path(path);
                    c.set_src_rank(src);
                    c.set_dst_rank(dst);
                    c.set_dtype(static_cast<v1::DataType>(dt));
                    if (spec.bench() == v1::BENCH_GEMM) {
                      *c.mutable_gemm() = shapes[point];
                    } else {
                      c.set_size_bytes(sizes[point]);
                      c.set_count(sizes[point]);
                    }
                    *c.mutable_timing() = spec.timing();
                    c.set_verify(spec.verify());
                    c.set_backend(spec.backend());
                    c.set_slow_ratio(spec.slow_ratio());
                    c.set_members(spec.members());
                    c.set_repeat(spec.repeat());
                    cases->push_back(std::move(c));
                  }
                }
              }
  return absl::OkStatus();
}

// The keys a case of its spec keeps as written (timing, verify, backend),
// for cases that name no source or destination rank.
void SetRankless(const v1::CaseSpec& spec, v1::Case* c) {
  *c->mutable_timing() = spec.timing();
  c->set_verify(spec.verify());
  c->set_backend(spec.backend());
  c->set_src_rank(-1);
  c->set_dst_rank(-1);
}

// A transformer: one case per layout and precision (none named: the
// backend's own, decided where it runs), on the layout's dp x tp ranks.
absl::Status ExpandTransformer(const v1::Plan& plan, const v1::CaseSpec& spec,
                               int64_t max_cases,
                               std::vector<v1::Case>* cases) {
  std::vector<int> dtypes(spec.dtypes().begin(), spec.dtypes().end());
  if (dtypes.empty()) dtypes.push_back(v1::DATA_TYPE_UNSPECIFIED);
  for (const v1::ParallelLayout& layout : spec.layouts())
    for (int dt : dtypes) {
      RM_ASSIGN_OR_RETURN(v1::Case c,
                          NextCase(plan, spec, cases->size(), max_cases));
      c.set_bench(v1::BENCH_TRANSFORMER);
      c.set_dtype(static_cast<v1::DataType>(dt));
      *c.mutable_transformer() = spec.transformer();
      *c.mutable_transformer()->mutable_parallel() = layout;
      c.set_nranks(layout.dp() * layout.tp());
      SetRankless(spec, &c);
      cases->push_back(std::move(c));
    }
  return absl::OkStatus();
}

// Inference: one case per tensor-parallel width, batch and precision, on
// the width's ranks; the batch is the case's micro_batch.
absl::Status ExpandServe(const v1::Plan& plan, const v1::CaseSpec& spec,
                         int64_t max_cases, std::vector<v1::Case>* cases) {
  std::vector<int> dtypes(spec.dtypes().begin(), spec.dtypes().end());
  if (dtypes.empty()) dtypes.push_back(v1::DATA_TYPE_UNSPECIFIED);
  for (const v1::ParallelLayout& layout : spec.layouts())
    for (int64_t batch : spec.serve_batches())
      for (int dt : dtypes) {
        RM_ASSIGN_OR_RETURN(v1::Case c,
                            NextCase(plan, spec, cases->size(), max_cases));
        c.set_bench(v1::BENCH_INFERENCE);
        c.set_dtype(static_cast<v1::DataType>(dt));
        *c.mutable_transformer() = spec.transformer();
        *c.mutable_transformer()->mutable_parallel() = layout;
        c.mutable_transformer()->set_micro_batch(batch);
        *c.mutable_serve() = spec.serve();
        c.set_nranks(layout.tp());
        SetRankless(spec, &c);
        cases->push_back(std::move(c));
      }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<v1::Case>> ExpandPlan(const v1::Plan& plan,
                                                 int64_t max_cases,
                                                 int nranks) {
  std::vector<v1::Case> cases;
  for (const v1::CaseSpec& spec : plan.cases()) {
    if (spec.bench() == v1::BENCH_TRAIN) {
      // Training: ladder rung x overlap x precision.
      const std::vector<int32_t> ladder =
          spec.ladder().empty() ? std::vector<int32_t>{0}
                                : std::vector<int32_t>(spec.ladder().begin(),
                                                       spec.ladder().end());
      const std::vector<bool> overlaps =
          spec.overlap().empty()
              ? std::vector<bool>{true}
              : std::vector<bool>(spec.overlap().begin(), spec.overlap().end());
      const std::vector<bool> modes =
          spec.inference().empty() ? std::vector<bool>{false}
                                   : std::vector<bool>(spec.inference().begin(),
                                                       spec.inference().end());
      const std::vector<int64_t> batches =
          spec.train_batches().empty()
              ? std::vector<int64_t>{spec.train().batch()}
              : std::vector<int64_t>(spec.train_batches().begin(),
                                     spec.train_batches().end());
      for (bool inference : modes)
        for (int32_t n : ladder)
          for (int64_t batch : batches)
            for (bool overlap : overlaps)
              for (int dt : spec.dtypes()) {
                // Inference has no reduction: one case, whatever `overlap`
                // says.
                if (inference && overlap != overlaps.front()) continue;
                RM_ASSIGN_OR_RETURN(
                    v1::Case c, NextCase(plan, spec, cases.size(), max_cases));
                c.set_bench(v1::BENCH_TRAIN);
                c.set_nranks(n);
                c.set_dtype(static_cast<v1::DataType>(dt));
                *c.mutable_train() = spec.train();
                c.mutable_train()->set_overlap(overlap && !inference);
                c.mutable_train()->set_inference(inference);
                c.mutable_train()->set_batch(batch);
                SetRankless(spec, &c);
                cases.push_back(std::move(c));
              }
      continue;
    }
    if (spec.bench() == v1::BENCH_TRANSFORMER) {
      RM_RETURN_IF_ERROR(ExpandTransformer(plan, spec, max_cases, &cases));
      continue;
    }
    if (spec.bench() == v1::BENCH_INFERENCE) {
      RM_RETURN_IF_ERROR(ExpandServe(plan, spec, max_cases, &cases));
      continue;
    }
    if (spec.bench() == v1::BENCH_PLUGIN) {
      // A plug-in kind: one case per ladder rung, its parameters as given.
      std::vector<int32_t> ladder(spec.ladder().begin(), spec.ladder().end());
      if (ladder.empty()) ladder.push_back(0);
      for (int32_t n : ladder) {
        RM_ASSIGN_OR_RETURN(v1::Case c,
                            NextCase(plan, spec, cases.size(), max_cases));
        c.set_bench(v1::BENCH_PLUGIN);
        c.set_kind(spec.kind());
        *c.mutable_params() = spec.params();
        c.set_nranks(n);
        SetRankless(spec, &c);
        cases.push_back(std::move(c));
      }
      continue;
    }
    if (spec.bench() != v1::BENCH_COLLECTIVE) {
      auto s = ExpandBench(plan, spec, nranks, max_cases, &cases);
      if (!s.ok()) return s;
      continue;
    }
    std::vector<int64_t> sizes = SweepSizes(spec.sizes());
    std::vector<v1::ReduceOp> ops;
    for (int op : spec.ops()) ops.push_back(static_cast<v1::ReduceOp>(op));
    if (ops.empty()) ops.push_back(v1::REDUCE_OP_UNSPECIFIED);
    std::vector<bool> placements(spec.in_place().begin(),
                                 spec.in_place().end());
    if (placements.empty()) placements.push_back(false);
    std::vector<v1::TimingMode> modes;
    for (int m : spec.modes()) modes.push_back(static_cast<v1::TimingMode>(m));
    if (modes.empty()) modes.push_back(v1::PIPELINED);
    std::vector<int32_t> ladder;
    for (int32_t n : spec.ladder()) ladder.push_back(n);
    if (ladder.empty()) ladder.push_back(0);
    for (int32_t nranks : ladder)
      for (v1::TimingMode mode : modes)
        for (int dt : spec.dtypes()) {
          auto dtype = static_cast<v1::DataType>(dt);
          int64_t elem = DataTypeSize(dtype);
          for (v1::ReduceOp op : ops) {
            for (int64_t size : sizes) {
              int64_t count = elem > 0 ? size / elem : 0;
              if (count == 0) continue;
              for (bool in_place : placements) {
                RM_ASSIGN_OR_RETURN(
                    v1::Case c, NextCase(plan, spec, cases.size(), max_cases));
                c.set_collective(spec.collective());
                c.set_dtype(dtype);
                c.set_op(op);
                c.set_count(count);
                c.set_size_bytes(count * elem);
                c.set_in_place(in_place);
                c.set_root(spec.root());
                *c.mutable_timing() = spec.timing();
                c.mutable_timing()->set_mode(mode);
                c.set_nranks(nranks);
                c.set_verify(spec.verify());
                c.set_backend(spec.backend());
                cases.push_back(std::move(c));
              }
            }
          }
        }
  }
  return cases;
}

v1::Plan PlanForBackend(const v1::Plan& plan, std::string_view backend) {
  v1::Plan out = plan;
  for (v1::CaseSpec& spec : *out.mutable_cases()) {
    if (!spec.has_cuda()) continue;
    if (backend == "cuda") {
      v1::CaseSpec gpu = spec.cuda();
      spec = std::move(gpu);
    } else {
      spec.clear_cuda();
    }
  }
  return out;
}

}  // namespace ringmaster
