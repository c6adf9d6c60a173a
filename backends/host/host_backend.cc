#include "backends/host/host_backend.h"

#include <chrono>
#include <climits>
#include <cstring>

#include "absl/strings/str_format.h"
#include "backends/host/mpi_control.h"
#include "core/names.h"
#include "kernels/patterns.h"

namespace ringmaster {
namespace {

// bfloat16 <-> float by hand: GCC 12 has no arithmetic bfloat16 type.
float Bf16ToFloat(uint16_t bits) {
  uint32_t u = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
uint16_t FloatToBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);  // NaN
  u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest even
  return static_cast<uint16_t>(u >> 16);
}

// Element access as double, for every dtype the backend supports.
double Load(v1::DataType t, const unsigned char* base, int64_t i) {
  switch (t) {
    case v1::FLOAT32: return reinterpret_cast<const float*>(base)[i];
    case v1::FLOAT64: return reinterpret_cast<const double*>(base)[i];
    case v1::INT32: return reinterpret_cast<const int32_t*>(base)[i];
    case v1::INT64: return static_cast<double>(reinterpret_cast<const int64_t*>(base)[i]);
    case v1::INT8: return reinterpret_cast<const int8_t*>(base)[i];
    case v1::UINT8: return reinterpret_cast<const uint8_t*>(base)[i];
    case v1::BFLOAT16: return Bf16ToFloat(reinterpret_cast<const uint16_t*>(base)[i]);
    case v1::FLOAT16: return static_cast<float>(reinterpret_cast<const _Float16*>(base)[i]);
    default: return 0;
  }
}

void Store(v1::DataType t, unsigned char* base, int64_t i, double v) {
  switch (t) {
    case v1::FLOAT32: reinterpret_cast<float*>(base)[i] = static_cast<float>(v); break;
    case v1::FLOAT64: reinterpret_cast<double*>(base)[i] = v; break;
    case v1::INT32: reinterpret_cast<int32_t*>(base)[i] = static_cast<int32_t>(v); break;
    case v1::INT64: reinterpret_cast<int64_t*>(base)[i] = static_cast<int64_t>(v); break;
    case v1::INT8: reinterpret_cast<int8_t*>(base)[i] = static_cast<int8_t>(v); break;
    case v1::UINT8: reinterpret_cast<uint8_t*>(base)[i] = static_cast<uint8_t>(v); break;
    case v1::BFLOAT16:
      reinterpret_cast<uint16_t*>(base)[i] = FloatToBf16(static_cast<float>(v));
      break;
    case v1::FLOAT16:
      reinterpret_cast<_Float16*>(base)[i] = static_cast<_Float16>(static_cast<float>(v));
      break;
    default: break;
  }
}

// Integers are exact up to this value in the type (pattern sizing).
int64_t ExactLimit(v1::DataType t) {
  switch (t) {
    case v1::BFLOAT16: return 256;
    case v1::FLOAT16: return 2048;
    case v1::INT8: return 127;
    case v1::UINT8: return 255;
    default: return 1 << 24;
  }
}

// MPI reduction for 16-bit floating types, which MPI lacks: widen to
// float, combine, round back.
template <v1::DataType kType, v1::ReduceOp kOp>
void HalfReduce(void* in, void* inout, int* len, MPI_Datatype*) {
  auto* a = static_cast<unsigned char*>(in);
  auto* b = static_cast<unsigned char*>(inout);
  for (int i = 0; i < *len; ++i) {
    double x = Load(kType, a, i), y = Load(kType, b, i), r = 0;
    switch (kOp) {
      case v1::SUM: r = x + y; break;
      case v1::PROD: r = x * y; break;
      case v1::MIN: r = x < y ? x : y; break;
      case v1::MAX: r = x > y ? x : y; break;
      default: break;
    }
    Store(kType, b, i, r);
  }
}

template <v1::DataType kType>
MPI_User_function* HalfFunction(v1::ReduceOp op) {
  switch (op) {
    case v1::SUM: return &HalfReduce<kType, v1::SUM>;
    case v1::PROD: return &HalfReduce<kType, v1::PROD>;
    case v1::MIN: return &HalfReduce<kType, v1::MIN>;
    case v1::MAX: return &HalfReduce<kType, v1::MAX>;
    default: return nullptr;
  }
}

}  // namespace

HostBackend::HostBackend(MPI_Comm comm, std::vector<Fault> faults)
    : comm_(comm), faults_(std::move(faults)) {
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &nranks_);
}

HostBackend::~HostBackend() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  for (auto& [key, op] : custom_ops_) MPI_Op_free(&op);
}

BackendInfo HostBackend::Info() const {
  BackendInfo info;
  info.name = "host (MPI)";
  return info;
}

absl::Status HostBackend::Prepare(const CollectiveConfig& config) {
  prepared_ = false;
  if (config.collective != v1::ALL_REDUCE) {
    return absl::UnimplementedError(absl::StrFormat(
        "host backend: %s is not implemented yet", CollectiveName(config.collective)));
  }
  if (config.count > INT_MAX) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "host backend: %d elements exceed MPI's int count", config.count));
  }
  switch (config.dtype) {
    case v1::FLOAT32: mpi_type_ = MPI_FLOAT; break;
    case v1::FLOAT64: mpi_type_ = MPI_DOUBLE; break;
    case v1::INT32: mpi_type_ = MPI_INT32_T; break;
    case v1::INT64: mpi_type_ = MPI_INT64_T; break;
    case v1::INT8: mpi_type_ = MPI_INT8_T; break;
    case v1::UINT8: mpi_type_ = MPI_UINT8_T; break;
    case v1::BFLOAT16:
    case v1::FLOAT16: mpi_type_ = MPI_UINT16_T; break;
    default:
      return absl::UnimplementedError(absl::StrFormat(
          "host backend: data type %s is not supported", DataTypeName(config.dtype)));
  }
  if (config.dtype == v1::BFLOAT16 || config.dtype == v1::FLOAT16) {
    MPI_User_function* fn = config.dtype == v1::BFLOAT16
                                ? HalfFunction<v1::BFLOAT16>(config.op)
                                : HalfFunction<v1::FLOAT16>(config.op);
    if (fn == nullptr) {
      return absl::UnimplementedError(absl::StrFormat(
          "host backend: op %s is not supported", ReduceOpName(config.op)));
    }
    auto key = std::make_pair(static_cast<int>(config.dtype), static_cast<int>(config.op));
    auto it = custom_ops_.find(key);
    if (it == custom_ops_.end()) {
      MPI_Op op;
      int rc = MPI_Op_create(fn, /*commute=*/1, &op);
      if (rc != MPI_SUCCESS) return MpiError(rc, "MPI_Op_create", rank_);
      it = custom_ops_.emplace(key, op).first;
    }
    mpi_op_ = it->second;
  } else {
    switch (config.op) {
      case v1::SUM: mpi_op_ = MPI_SUM; break;
      case v1::PROD: mpi_op_ = MPI_PROD; break;
      case v1::MIN: mpi_op_ = MPI_MIN; break;
      case v1::MAX: mpi_op_ = MPI_MAX; break;
      default:
        return absl::UnimplementedError(absl::StrFormat(
            "host backend: op %s is not supported (MPI has no average)",
            ReduceOpName(config.op)));
    }
  }
  config_ = config;
  size_t bytes = static_cast<size_t>(config.count * DataTypeSize(config.dtype));
  send_.assign(bytes, 0);
  recv_.assign(config.in_place ? 0 : bytes, 0);
  FillInputs();
  prepared_ = true;
  return absl::OkStatus();
}

void HostBackend::FillInputs() {
  int range = PatternRange(nranks_, ExactLimit(config_.dtype));
  for (int64_t i = 0; i < config_.count; ++i) {
    Store(config_.dtype, send_.data(), i,
          PatternInput(config_.op, rank_, nranks_, range, i));
  }
  // Out-of-place output starts poisoned so unwritten elements are caught.
  std::memset(recv_.data(), 0xA5, recv_.size());
}

absl::Status HostBackend::RunOnce() {
  int count = static_cast<int>(config_.count);
  int rc = config_.in_place
               ? MPI_Allreduce(MPI_IN_PLACE, send_.data(), count, mpi_type_, mpi_op_, comm_)
               : MPI_Allreduce(send_.data(), recv_.data(), count, mpi_type_, mpi_op_, comm_);
  return MpiError(rc, "MPI_Allreduce", rank_);
}

absl::StatusOr<double> HostBackend::TimeOps(int iters) {
  if (!prepared_) return absl::FailedPreconditionError("Prepare() first");
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) {
    absl::Status s = RunOnce();
    if (!s.ok()) return s;
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

absl::StatusOr<int64_t> HostBackend::Verify() {
  if (!prepared_) return absl::FailedPreconditionError("Prepare() first");
  FillInputs();
  absl::Status s = RunOnce();
  if (!s.ok()) return s;
  unsigned char* out = config_.in_place ? send_.data() : recv_.data();
  if (FindFault(faults_, Fault::Kind::kCorrupt, rank_) && config_.count > 0) {
    Store(config_.dtype, out, config_.count / 2, Load(config_.dtype, out, config_.count / 2) + 1);
  }
  int range = PatternRange(nranks_, ExactLimit(config_.dtype));
  // The expected values repeat with period range * nranks.
  int64_t period = static_cast<int64_t>(range) * nranks_;
  std::vector<double> expected(static_cast<size_t>(period));
  for (int64_t i = 0; i < period; ++i) {
    expected[i] = PatternReduced(config_.op, nranks_, range, i);
  }
  int64_t wrong = 0;
  for (int64_t i = 0; i < config_.count; ++i) {
    if (Load(config_.dtype, out, i) != expected[i % period]) ++wrong;
  }
  // Leave inputs valid for the timed operations that follow.
  FillInputs();
  return wrong;
}

}  // namespace ringmaster
