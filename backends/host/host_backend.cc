#include "backends/host/host_backend.h"

#include <chrono>
#include <climits>
#include <cstring>

#include "absl/strings/str_format.h"
#include "backends/host/mpi_control.h"
#include "core/names.h"
#include "core/status_macros.h"
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
  if ((u & 0x7fffffffu) > 0x7f800000u)
    return static_cast<uint16_t>((u >> 16) | 0x40);  // NaN
  u += 0x7fffu + ((u >> 16) & 1u);                   // round to nearest even
  return static_cast<uint16_t>(u >> 16);
}

// Element access as double, for every dtype the backend supports.
double Load(v1::DataType t, const unsigned char* base, int64_t i) {
  switch (t) {
    case v1::FLOAT32:
      return reinterpret_cast<const float*>(base)[i];
    case v1::FLOAT64:
      return reinterpret_cast<const double*>(base)[i];
    case v1::INT32:
      return reinterpret_cast<const int32_t*>(base)[i];
    case v1::INT64:
      return static_cast<double>(reinterpret_cast<const int64_t*>(base)[i]);
    case v1::INT8:
      return reinterpret_cast<const int8_t*>(base)[i];
    case v1::UINT8:
      return reinterpret_cast<const uint8_t*>(base)[i];
    case v1::BFLOAT16:
      return Bf16ToFloat(reinterpret_cast<const uint16_t*>(base)[i]);
    case v1::FLOAT16:
      return static_cast<float>(reinterpret_cast<const _Float16*>(base)[i]);
    default:
      return 0;
  }
}

void Store(v1::DataType t, unsigned char* base, int64_t i, double v) {
  switch (t) {
    case v1::FLOAT32:
      reinterpret_cast<float*>(base)[i] = static_cast<float>(v);
      break;
    case v1::FLOAT64:
      reinterpret_cast<double*>(base)[i] = v;
      break;
    case v1::INT32:
      reinterpret_cast<int32_t*>(base)[i] = static_cast<int32_t>(v);
      break;
    case v1::INT64:
      reinterpret_cast<int64_t*>(base)[i] = static_cast<int64_t>(v);
      break;
    case v1::INT8:
      reinterpret_cast<int8_t*>(base)[i] = static_cast<int8_t>(v);
      break;
    case v1::UINT8:
      reinterpret_cast<uint8_t*>(base)[i] = static_cast<uint8_t>(v);
      break;
    case v1::BFLOAT16:
      reinterpret_cast<uint16_t*>(base)[i] = FloatToBf16(static_cast<float>(v));
      break;
    case v1::FLOAT16:
      reinterpret_cast<_Float16*>(base)[i] =
          static_cast<_Float16>(static_cast<float>(v));
      break;
    default:
      break;
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
      case v1::SUM:
        r = x + y;
        break;
      case v1::PROD:
        r = x * y;
        break;
      case v1::MIN:
        r = x < y ? x : y;
        break;
      case v1::MAX:
        r = x > y ? x : y;
        break;
      default:
        break;
    }
    Store(kType, b, i, r);
  }
}

template <v1::DataType kType>
MPI_User_function* HalfFunction(v1::ReduceOp op) {
  switch (op) {
    case v1::SUM:
      return &HalfReduce<kType, v1::SUM>;
    case v1::PROD:
      return &HalfReduce<kType, v1::PROD>;
    case v1::MIN:
      return &HalfReduce<kType, v1::MIN>;
    case v1::MAX:
      return &HalfReduce<kType, v1::MAX>;
    default:
      return nullptr;
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
  auto layout = MakeLayout(config, rank_, nranks_);
  if (!layout.ok()) return layout.status();
  if (layout->send_count > INT_MAX || layout->recv_count > INT_MAX) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "host backend: %d elements exceed MPI's int count", config.count));
  }
  switch (config.dtype) {
    case v1::FLOAT32:
      mpi_type_ = MPI_FLOAT;
      break;
    case v1::FLOAT64:
      mpi_type_ = MPI_DOUBLE;
      break;
    case v1::INT32:
      mpi_type_ = MPI_INT32_T;
      break;
    case v1::INT64:
      mpi_type_ = MPI_INT64_T;
      break;
    case v1::INT8:
      mpi_type_ = MPI_INT8_T;
      break;
    case v1::UINT8:
      mpi_type_ = MPI_UINT8_T;
      break;
    case v1::BFLOAT16:
    case v1::FLOAT16:
      mpi_type_ = MPI_UINT16_T;
      break;
    default:
      return absl::UnimplementedError(
          absl::StrFormat("host backend: data type %s is not supported",
                          DataTypeName(config.dtype)));
  }
  if (IsReduction(config.collective)) {
    // MPI has no average: it is a sum followed by a division (see RunOnce).
    v1::ReduceOp op = config.op == v1::AVG ? v1::SUM : config.op;
    if (config.dtype == v1::BFLOAT16 || config.dtype == v1::FLOAT16) {
      MPI_User_function* fn = config.dtype == v1::BFLOAT16
                                  ? HalfFunction<v1::BFLOAT16>(op)
                                  : HalfFunction<v1::FLOAT16>(op);
      if (fn == nullptr) {
        return absl::UnimplementedError(absl::StrFormat(
            "host backend: op %s is not supported", ReduceOpName(config.op)));
      }
      auto key =
          std::make_pair(static_cast<int>(config.dtype), static_cast<int>(op));
      auto it = custom_ops_.find(key);
      if (it == custom_ops_.end()) {
        MPI_Op mop;
        int rc = MPI_Op_create(fn, /*commute=*/1, &mop);
        if (rc != MPI_SUCCESS) return MpiError(rc, "MPI_Op_create", rank_);
        it = custom_ops_.emplace(key, mop).first;
      }
      mpi_op_ = it->second;
    } else {
      switch (op) {
        case v1::SUM:
          mpi_op_ = MPI_SUM;
          break;
        case v1::PROD:
          mpi_op_ = MPI_PROD;
          break;
        case v1::MIN:
          mpi_op_ = MPI_MIN;
          break;
        case v1::MAX:
          mpi_op_ = MPI_MAX;
          break;
        default:
          return absl::UnimplementedError(absl::StrFormat(
              "host backend: op %s is not supported", ReduceOpName(config.op)));
      }
    }
  }
  config_ = config;
  layout_ = *layout;
  // MPI_Reduce_scatter_block in place leaves the result at the start of the
  // buffer (NCCL: at rank * chunk).
  if (config.collective == v1::REDUCE_SCATTER && config.in_place)
    layout_.out_offset = 0;
  elem_ = DataTypeSize(config.dtype);
  if (config.in_place) {
    send_.assign(static_cast<size_t>(layout_.inplace_count * elem_), 0);
    recv_.clear();
  } else {
    send_.assign(static_cast<size_t>(layout_.send_count * elem_), 0);
    recv_.assign(static_cast<size_t>(layout_.recv_count * elem_), 0);
  }
  FillInputs();
  prepared_ = true;
  return absl::OkStatus();
}

unsigned char* HostBackend::In() {
  return send_.data() + (config_.in_place ? layout_.in_offset * elem_ : 0);
}
unsigned char* HostBackend::Out() {
  return config_.in_place ? send_.data() + layout_.out_offset * elem_
                          : recv_.data();
}

void HostBackend::FillInputs() {
  // Outputs start poisoned so unwritten elements are caught.
  if (config_.in_place) {
    std::memset(send_.data(), 0xA5, send_.size());
  } else {
    std::memset(recv_.data(), 0xA5, recv_.size());
  }
  if (!layout_.fill_input) return;
  unsigned char* in = In();
  for (int64_t j = 0; j < layout_.send_count; ++j) {
    Store(config_.dtype, in, j,
          PatternInput(layout_.fill_op, rank_, nranks_, layout_.range,
                       j + layout_.fill_offset));
  }
}

absl::Status HostBackend::RunOnce() {
  const bool ip = config_.in_place;
  const int count = static_cast<int>(config_.count);
  const int chunk = static_cast<int>(layout_.chunk);
  unsigned char* in = In();
  unsigned char* out = Out();
  int rc = MPI_SUCCESS;
  const char* call = "";
  switch (config_.collective) {
    case v1::ALL_REDUCE:
      call = "MPI_Allreduce";
      rc = MPI_Allreduce(ip ? MPI_IN_PLACE : in, out, count, mpi_type_, mpi_op_,
                         comm_);
      break;
    case v1::ALL_GATHER:
      call = "MPI_Allgather";
      rc = ip ? MPI_Allgather(MPI_IN_PLACE, 0, mpi_type_, out, chunk, mpi_type_,
                              comm_)
              : MPI_Allgather(in, chunk, mpi_type_, out, chunk, mpi_type_,
                              comm_);
      break;
    case v1::REDUCE_SCATTER:
      call = "MPI_Reduce_scatter_block";
      rc = ip ? MPI_Reduce_scatter_block(MPI_IN_PLACE, send_.data(), chunk,
                                         mpi_type_, mpi_op_, comm_)
              : MPI_Reduce_scatter_block(in, out, chunk, mpi_type_, mpi_op_,
                                         comm_);
      break;
    case v1::BROADCAST:
      call = "MPI_Bcast";
      if (ip) {
        rc = MPI_Bcast(out, count, mpi_type_, config_.root, comm_);
      } else {
        // The root sends from its input; its output gets a local copy, as
        // ncclBroadcast writes the root's receive buffer too.
        rc = MPI_Bcast(rank_ == config_.root ? in : out, count, mpi_type_,
                       config_.root, comm_);
        if (rc == MPI_SUCCESS && rank_ == config_.root) {
          std::memcpy(out, in, static_cast<size_t>(count * elem_));
        }
      }
      break;
    case v1::REDUCE:
      call = "MPI_Reduce";
      rc = MPI_Reduce(ip && rank_ == config_.root ? MPI_IN_PLACE : in, out,
                      count, mpi_type_, mpi_op_, config_.root, comm_);
      break;
    case v1::ALL_TO_ALL:
      call = "MPI_Alltoall";
      rc = MPI_Alltoall(in, chunk, mpi_type_, out, chunk, mpi_type_, comm_);
      break;
    case v1::SEND_RECV:
      call = "MPI_Sendrecv";
      rc = MPI_Sendrecv(in, count, mpi_type_, layout_.send_peer, 0, out, count,
                        mpi_type_, layout_.recv_peer, 0, comm_,
                        MPI_STATUS_IGNORE);
      break;
    default:
      return absl::InvalidArgumentError("unknown collective");
  }
  if (rc != MPI_SUCCESS) return MpiError(rc, call, rank_);
  if (config_.op == v1::AVG && IsReduction(config_.collective) &&
      layout_.check_output) {
    for (int64_t i = 0; i < layout_.recv_count; ++i) {
      double v = Load(config_.dtype, out, i);
      Store(config_.dtype, out, i,
            layout_.check.integral
                ? static_cast<double>(static_cast<int64_t>(v) / nranks_)
                : v / nranks_);
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<double>> HostBackend::TimeWindows(int iters,
                                                             int windows,
                                                             bool graph) {
  if (!prepared_) return absl::FailedPreconditionError("Prepare() first");
  if (graph)
    return absl::UnimplementedError("graph timing needs the cuda backend");
  std::vector<double> out(windows);
  auto mark = std::chrono::steady_clock::now();
  for (int w = 0; w < windows; ++w) {
    for (int i = 0; i < iters; ++i) {
      RM_RETURN_IF_ERROR(RunOnce());
    }
    auto now = std::chrono::steady_clock::now();
    out[w] = std::chrono::duration<double>(now - mark).count();
    mark = now;
  }
  return out;
}

absl::StatusOr<std::vector<double>> HostBackend::TimeEachOp(int iters) {
  if (!prepared_) return absl::FailedPreconditionError("Prepare() first");
  std::vector<double> out(iters);
  for (int i = 0; i < iters; ++i) {
    auto start = std::chrono::steady_clock::now();
    RM_RETURN_IF_ERROR(RunOnce());
    out[i] =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
  }
  return out;
}

absl::StatusOr<int64_t> HostBackend::Verify() {
  if (!prepared_) return absl::FailedPreconditionError("Prepare() first");
  FillInputs();
  RM_RETURN_IF_ERROR(RunOnce());
  int64_t wrong = 0;
  if (layout_.check_output) {
    unsigned char* out = Out();
    if (FindFault(faults_, Fault::Kind::kCorrupt, rank_) &&
        layout_.recv_count > 0) {
      int64_t i = layout_.recv_count / 2;
      Store(config_.dtype, out, i, Load(config_.dtype, out, i) + 1);
    }
    for (int64_t i = 0; i < layout_.recv_count; ++i) {
      if (!PatternMatches(Load(config_.dtype, out, i),
                          PatternExpected(layout_.check, i), layout_.check,
                          config_.dtype)) {
        ++wrong;
      }
    }
  }
  // Leave inputs valid for the timed operations that follow.
  FillInputs();
  return wrong;
}

}  // namespace ringmaster
