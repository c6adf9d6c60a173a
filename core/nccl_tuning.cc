#include "core/nccl_tuning.h"

#include <regex>

#include "absl/strings/numbers.h"
#include "core/names.h"

namespace ringmaster {

std::optional<NcclChoice> ParseNcclTuningLine(std::string_view line) {
  static const std::regex kLine(
      R"(NCCL INFO (\w+): (\d+) Bytes -> Algo (\w+) proto (\w+) channel\{Lo\.\.Hi\}=\{(\d+)\.\.(\d+)\})");
  std::cmatch m;
  if (!std::regex_search(line.data(), line.data() + line.size(), m, kLine))
    return std::nullopt;
  NcclChoice c;
  c.function = m[1].str();
  int lo = 0, hi = 0;
  if (!absl::SimpleAtoi(m[2].str(), &c.bytes) ||
      !absl::SimpleAtoi(m[5].str(), &lo) ||
      !absl::SimpleAtoi(m[6].str(), &hi)) {
    return std::nullopt;
  }
  c.algorithm = m[3].str();
  c.protocol = m[4].str();
  c.channels = hi - lo + 1;
  return c;
}

std::optional<std::pair<std::string, int64_t>> NcclTuningKey(const v1::Case& c,
                                                             int nranks) {
  const int64_t elem = DataTypeSize(c.dtype());
  if (nranks < 1) return std::nullopt;
  switch (c.collective()) {
    case v1::ALL_REDUCE:
      return std::make_pair(std::string("AllReduce"), c.count() * elem);
    case v1::BROADCAST:
      return std::make_pair(std::string("Broadcast"), c.count() * elem);
    case v1::REDUCE:
      return std::make_pair(std::string("Reduce"), c.count() * elem);
    case v1::ALL_GATHER:
      return std::make_pair(std::string("AllGather"),
                            c.count() / nranks * elem);
    case v1::REDUCE_SCATTER:
      return std::make_pair(std::string("ReduceScatter"),
                            c.count() / nranks * elem);
    default:
      return std::nullopt;
  }
}

}  // namespace ringmaster
