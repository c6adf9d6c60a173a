// Names of the schema's enums as plans, tables and files spell them.
//
// One table per enum so parsing and printing cannot disagree.
#ifndef RINGMASTER_CORE_NAMES_H_
#define RINGMASTER_CORE_NAMES_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "ringmaster/v1/plan.pb.h"
#include "ringmaster/v1/result.pb.h"

namespace ringmaster {

// "all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce",
// "all_to_all", "send_recv".
std::string_view CollectiveName(v1::Collective c);
std::optional<v1::Collective> ParseCollective(std::string_view name);

// "float32", "bfloat16", "float16", "int32", "float64", "int64", "int8",
// "uint8". Also accepts nccl-tests' spellings ("float", "bf16", "half").
std::string_view DataTypeName(v1::DataType t);
std::optional<v1::DataType> ParseDataType(std::string_view name);
// Bytes per element; 0 for DATA_TYPE_UNSPECIFIED.
int64_t DataTypeSize(v1::DataType t);

// "sum", "prod", "min", "max", "avg".
std::string_view ReduceOpName(v1::ReduceOp op);

// How a result was timed, as reports print it: "pipelined", "per-op",
// "graph".
std::string_view TimingModeName(v1::TimingMode m);
std::optional<v1::ReduceOp> ParseReduceOp(std::string_view name);
// True for collectives that apply a reduction operator.
bool IsReduction(v1::Collective c);

// "auto", "host", "cuda".
std::string_view BackendName(v1::Backend b);
std::optional<v1::Backend> ParseBackend(std::string_view name);

// "worker_exit", "rank_hung", ... (the closed set of docs/limits.md).
std::string_view FailureReasonName(v1::FailureReason r);

// Node benchmarks (plan keys bench, method, direction, pattern, memory,
// path): Name, Parse and the comma-separated list of accepted names.
#define RM_DECLARE_ENUM_NAMES(Type, Fn)                     \
  std::string_view Fn##Name(v1::Type v);                    \
  std::optional<v1::Type> Parse##Fn(std::string_view name); \
  std::string Fn##Names();
RM_DECLARE_ENUM_NAMES(Bench, Bench)
RM_DECLARE_ENUM_NAMES(CopyMethod, CopyMethod)
RM_DECLARE_ENUM_NAMES(CopyDirection, CopyDirection)
RM_DECLARE_ENUM_NAMES(TransferPattern, TransferPattern)
RM_DECLARE_ENUM_NAMES(HostMemory, HostMemory)
RM_DECLARE_ENUM_NAMES(LatencyPath, LatencyPath)
#undef RM_DECLARE_ENUM_NAMES

// Comma-separated list of every accepted name, for error messages.
std::string CollectiveNames();
std::string DataTypeNames();
std::string ReduceOpNames();

}  // namespace ringmaster

#endif  // RINGMASTER_CORE_NAMES_H_
