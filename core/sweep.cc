#include "core/sweep.h"

#include "absl/strings/str_format.h"
#include "core/names.h"

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

absl::StatusOr<std::vector<v1::Case>> ExpandPlan(const v1::Plan& plan,
                                                 int64_t max_cases) {
  std::vector<v1::Case> cases;
  for (const v1::CaseSpec& spec : plan.cases()) {
    std::vector<int64_t> sizes = SweepSizes(spec.sizes());
    std::vector<v1::ReduceOp> ops;
    for (int op : spec.ops()) ops.push_back(static_cast<v1::ReduceOp>(op));
    if (ops.empty()) ops.push_back(v1::REDUCE_OP_UNSPECIFIED);
    std::vector<bool> placements(spec.in_place().begin(), spec.in_place().end());
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
            if (static_cast<int64_t>(cases.size()) >= max_cases) {
              return absl::InvalidArgumentError(absl::StrFormat(
                  "%s: the plan expands to more than %d cases",
                  plan.source_path(), max_cases));
            }
            v1::Case c;
            c.set_seq(static_cast<int64_t>(cases.size()));
            c.set_spec_name(spec.name());
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

}  // namespace ringmaster
