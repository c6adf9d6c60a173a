#include "core/names.h"

#include <algorithm>
#include <array>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_join.h"

namespace ringmaster {
namespace {

template <typename E>
struct Entry {
  E value;
  std::string_view name;
};

constexpr Entry<v1::Collective> kCollectives[] = {
    {v1::ALL_REDUCE, "all_reduce"},
    {v1::ALL_GATHER, "all_gather"},
    {v1::REDUCE_SCATTER, "reduce_scatter"},
    {v1::BROADCAST, "broadcast"},
    {v1::REDUCE, "reduce"},
    {v1::ALL_TO_ALL, "all_to_all"},
    {v1::SEND_RECV, "send_recv"},
};

constexpr Entry<v1::DataType> kDataTypes[] = {
    {v1::FLOAT32, "float32"}, {v1::BFLOAT16, "bfloat16"},
    {v1::FLOAT16, "float16"}, {v1::INT32, "int32"},
    {v1::FLOAT64, "float64"}, {v1::INT64, "int64"},
    {v1::INT8, "int8"},       {v1::UINT8, "uint8"},
    {v1::TFLOAT32, "tf32"},   {v1::FLOAT8_E4M3, "fp8_e4m3"},
};
// Accepted alternative spellings (nccl-tests, PyTorch).
constexpr Entry<v1::DataType> kDataTypeAliases[] = {
    {v1::FLOAT32, "float"},
    {v1::FLOAT32, "fp32"},
    {v1::BFLOAT16, "bf16"},
    {v1::FLOAT16, "half"},
    {v1::FLOAT16, "fp16"},
    {v1::FLOAT64, "double"},
    {v1::FLOAT64, "fp64"},
    {v1::INT32, "int"},
    {v1::FLOAT8_E4M3, "float8_e4m3"},
    {v1::FLOAT8_E4M3, "e4m3"},
};

constexpr Entry<v1::Bench> kBenches[] = {
    {v1::BENCH_COLLECTIVE, "collective"},
    {v1::BENCH_P2P, "p2p"},
    {v1::BENCH_LATENCY, "latency"},
    {v1::BENCH_HOST_DEVICE, "host_device"},
    {v1::BENCH_LOCAL_COPY, "local_copy"},
    {v1::BENCH_TRIAD, "triad"},
    {v1::BENCH_GEMM, "gemm"},
    {v1::BENCH_TRAIN, "train"},
    {v1::BENCH_FIND_SLOW, "find_slow"},
    {v1::BENCH_TRANSFORMER, "transformer"},
    {v1::BENCH_INFERENCE, "inference"},
};
constexpr Entry<v1::CopyMethod> kCopyMethods[] = {
    {v1::COPY_ENGINE, "ce"}, {v1::SM, "sm"}, {v1::CPU, "cpu"}};
constexpr Entry<v1::CopyDirection> kCopyDirections[] = {
    {v1::WRITE, "write"},
    {v1::READ, "read"},
    {v1::TO_DEVICE, "to_device"},
    {v1::TO_HOST, "to_host"}};
constexpr Entry<v1::TransferPattern> kPatterns[] = {
    {v1::PAIR, "pairs"},
    {v1::ALL_TO_ONE, "all_to_one"},
    {v1::ONE_TO_ALL, "one_to_all"},
    {v1::ONE_RANK, "one"},
    {v1::ALL_RANKS, "all"}};
constexpr Entry<v1::HostMemory> kHostMemories[] = {{v1::PINNED, "pinned"},
                                                   {v1::PAGEABLE, "pageable"}};
constexpr Entry<v1::LatencyPath> kLatencyPaths[] = {{v1::PEER, "peer"},
                                                    {v1::HOST, "host"}};

constexpr Entry<v1::ReduceOp> kReduceOps[] = {
    {v1::SUM, "sum"}, {v1::PROD, "prod"}, {v1::MIN, "min"},
    {v1::MAX, "max"}, {v1::AVG, "avg"},
};

constexpr Entry<v1::Backend> kBackends[] = {
    {v1::BACKEND_AUTO, "auto"},
    {v1::BACKEND_HOST, "host"},
    {v1::BACKEND_CUDA, "cuda"},
};

constexpr Entry<v1::FailureReason> kFailureReasons[] = {
    {v1::WORKER_EXIT, "worker_exit"},
    {v1::RANK_HUNG, "rank_hung"},
    {v1::WORKER_UNREACHABLE, "worker_unreachable"},
    {v1::CONFIG_MISMATCH, "config_mismatch"},
    {v1::DATA_MISMATCH, "data_mismatch"},
    {v1::BELOW_FLOOR, "below_floor"},
    {v1::DEADLINE, "deadline"},
    {v1::COORDINATOR_RESTART, "coordinator_restart"},
    {v1::REJECTED, "rejected"},
    {v1::BACKEND_ERROR, "backend_error"},
    {v1::STORE_ERROR, "store_error"},
};

template <typename E, size_t N>
std::string_view NameOf(const Entry<E> (&table)[N], E value) {
  for (const auto& e : table) {
    if (e.value == value) return e.name;
  }
  return "unspecified";
}

template <typename E, size_t N>
std::optional<E> Lookup(const Entry<E> (&table)[N], std::string_view name) {
  std::string lower = absl::AsciiStrToLower(std::string(name));
  for (const auto& e : table) {
    if (e.name == lower) return e.value;
  }
  return std::nullopt;
}

template <typename E, size_t N>
std::string JoinNames(const Entry<E> (&table)[N]) {
  std::string out;
  for (const auto& e : table) {
    if (!out.empty()) out += ", ";
    out += e.name;
  }
  return out;
}

}  // namespace

std::string_view CollectiveName(v1::Collective c) {
  return NameOf(kCollectives, c);
}
std::optional<v1::Collective> ParseCollective(std::string_view name) {
  // Accept "allreduce" as well as "all_reduce".
  auto found = Lookup(kCollectives, name);
  if (found) return found;
  std::string squashed = absl::AsciiStrToLower(std::string(name));
  for (const auto& e : kCollectives) {
    std::string n(e.name);
    n.erase(std::remove(n.begin(), n.end(), '_'), n.end());
    if (n == squashed) return e.value;
  }
  return std::nullopt;
}

std::string_view DataTypeName(v1::DataType t) { return NameOf(kDataTypes, t); }
std::optional<v1::DataType> ParseDataType(std::string_view name) {
  auto found = Lookup(kDataTypes, name);
  return found ? found : Lookup(kDataTypeAliases, name);
}
int64_t DataTypeSize(v1::DataType t) {
  switch (t) {
    case v1::FLOAT64:
    case v1::INT64:
      return 8;
    case v1::FLOAT32:
    case v1::INT32:
      return 4;
    case v1::BFLOAT16:
    case v1::FLOAT16:
      return 2;
    case v1::TFLOAT32:
      return 4;
    case v1::INT8:
    case v1::UINT8:
    case v1::FLOAT8_E4M3:
      return 1;
    default:
      return 0;
  }
}

std::string_view ReduceOpName(v1::ReduceOp op) {
  return NameOf(kReduceOps, op);
}
std::optional<v1::ReduceOp> ParseReduceOp(std::string_view name) {
  return Lookup(kReduceOps, name);
}
bool IsReduction(v1::Collective c) {
  return c == v1::ALL_REDUCE || c == v1::REDUCE_SCATTER || c == v1::REDUCE;
}

std::string_view BackendName(v1::Backend b) { return NameOf(kBackends, b); }
std::optional<v1::Backend> ParseBackend(std::string_view name) {
  return Lookup(kBackends, name);
}

std::string_view FailureReasonName(v1::FailureReason r) {
  return NameOf(kFailureReasons, r);
}

#define RM_ENUM_NAMES(Type, Fn, table)                               \
  std::string_view Fn##Name(v1::Type v) { return NameOf(table, v); } \
  std::optional<v1::Type> Parse##Fn(std::string_view name) {         \
    return Lookup(table, name);                                      \
  }                                                                  \
  std::string Fn##Names() { return JoinNames(table); }
RM_ENUM_NAMES(Bench, Bench, kBenches)
RM_ENUM_NAMES(CopyMethod, CopyMethod, kCopyMethods)
RM_ENUM_NAMES(CopyDirection, CopyDirection, kCopyDirections)
RM_ENUM_NAMES(TransferPattern, TransferPattern, kPatterns)
RM_ENUM_NAMES(HostMemory, HostMemory, kHostMemories)
RM_ENUM_NAMES(LatencyPath, LatencyPath, kLatencyPaths)
#undef RM_ENUM_NAMES

std::string CollectiveNames() { return JoinNames(kCollectives); }
std::string DataTypeNames() { return JoinNames(kDataTypes); }
std::string ReduceOpNames() { return JoinNames(kReduceOps); }

std::string_view TimingModeName(v1::TimingMode m) {
  switch (m) {
    case v1::PER_OP:
      return "per-op";
    case v1::GRAPH:
      return "graph";
    default:
      return "pipelined";
  }
}

}  // namespace ringmaster
