#include "backends/host/host_backend.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstring>

#include "absl/strings/str_format.h"
#include "comm/elements.h"
#include "core/names.h"
#include "core/status_macros.h"
#include "kernels/patterns.h"

namespace ringmaster {

HostBackend::HostBackend(HostComm& comm, std::vector<Fault> faults)
    : comm_(comm),
      rank_(comm.rank()),
      nranks_(comm.size()),
      faults_(std::move(faults)),
      slow_(SlowFactor(faults_, rank_)) {}

absl::StatusOr<std::unique_ptr<CollectiveBackend>> HostBackend::Split(
    bool member, HostComm* member_comm, double* setup_s) {
  if (!member) return std::unique_ptr<CollectiveBackend>();
  if (member_comm == nullptr) {
    return absl::InvalidArgumentError("host backend split: no communicator");
  }
  const auto t0 = std::chrono::steady_clock::now();
  auto backend = std::make_unique<HostBackend>(*member_comm, faults_);
  if (setup_s) {
    *setup_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
            .count();
  }
  return std::unique_ptr<CollectiveBackend>(std::move(backend));
}

BackendInfo HostBackend::Info() const {
  BackendInfo info;
  info.name = "host (" + comm_.transport() + ")";
  return info;
}

absl::Status HostBackend::Prepare(const CollectiveConfig& config) {
  prepared_ = false;
  auto layout = MakeLayout(config, rank_, nranks_);
  if (!layout.ok()) return layout.status();
  switch (config.dtype) {
    case v1::FLOAT32:
    case v1::FLOAT64:
    case v1::INT32:
    case v1::INT64:
    case v1::INT8:
    case v1::UINT8:
    case v1::BFLOAT16:
    case v1::FLOAT16:
      break;
    default:
      return absl::UnimplementedError(
          absl::StrFormat("host backend: data type %s is not supported",
                          DataTypeName(config.dtype)));
  }
  // There is no average on the wire: it is a sum followed by a division
  // (see RunOnce).
  op_ = config.op == v1::AVG ? v1::SUM : config.op;
  if (IsReduction(config.collective) && op_ != v1::SUM && op_ != v1::PROD &&
      op_ != v1::MIN && op_ != v1::MAX) {
    return absl::UnimplementedError(absl::StrFormat(
        "host backend: op %s is not supported", ReduceOpName(config.op)));
  }
  // MPI counts are ints: reductions count elements, the others bytes. A
  // size past that is refused before anything is allocated (the kind
  // skips it: this transport cannot carry it in one call).
  {
    const int64_t elems = std::max(layout->send_count, layout->recv_count);
    const int64_t count =
        IsReduction(config.collective)
            ? elems
            : elems * static_cast<int64_t>(DataTypeSize(config.dtype));
    if (count > INT_MAX) {
      return absl::OutOfRangeError(absl::StrFormat(
          "host backend: %d %s in one MPI call exceed MPI's int count (at "
          "most %d)",
          count, IsReduction(config.collective) ? "elements" : "bytes",
          INT_MAX));
    }
  }
  config_ = config;
  layout_ = *layout;
  // An in-place reduce-scatter leaves the result at the start of the buffer
  // (MPI's convention; NCCL's is rank * chunk).
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
    StoreElement(config_.dtype, in, j,
                 PatternInput(layout_.fill_op, rank_, nranks_, layout_.range,
                              j + layout_.fill_offset));
  }
}

absl::Status HostBackend::RunOnce() {
  // A slow fault stretches each operation by its factor.
  if (slow_ <= 1) return RunOnceInner();
  const auto start = std::chrono::steady_clock::now();
  absl::Status st = RunOnceInner();
  SpinFor((slow_ - 1) * std::chrono::duration<double>(
                            std::chrono::steady_clock::now() - start)
                            .count());
  return st;
}

absl::Status HostBackend::RunOnceInner() {
  const bool ip = config_.in_place;
  const int64_t count = config_.count;
  const int64_t chunk = layout_.chunk;
  const v1::DataType t = config_.dtype;
  unsigned char* in = In();
  unsigned char* out = Out();
  absl::Status st;
  switch (config_.collective) {
    case v1::ALL_REDUCE:
      st = comm_.AllReduce(ip ? nullptr : in, out, count, t, op_);
      break;
    case v1::ALL_GATHER:
      st = comm_.AllGather(ip ? nullptr : in, out, chunk * elem_);
      break;
    case v1::REDUCE_SCATTER:
      st = ip ? comm_.ReduceScatter(nullptr, send_.data(), chunk, t, op_)
              : comm_.ReduceScatter(in, out, chunk, t, op_);
      break;
    case v1::BROADCAST:
      if (ip) {
        st = comm_.Broadcast(out, count * elem_, config_.root);
      } else {
        // The root sends from its input; its output gets a local copy, as
        // ncclBroadcast writes the root's receive buffer too.
        st = comm_.Broadcast(rank_ == config_.root ? in : out, count * elem_,
                             config_.root);
        if (st.ok() && rank_ == config_.root) {
          std::memcpy(out, in, static_cast<size_t>(count * elem_));
        }
      }
      break;
    case v1::REDUCE:
      st = comm_.Reduce(ip && rank_ == config_.root ? nullptr : in, out, count,
                        t, op_, config_.root);
      break;
    case v1::ALL_TO_ALL:
      st = comm_.AllToAll(in, out, chunk * elem_);
      break;
    case v1::SEND_RECV: {
      SendOp s{layout_.send_peer, in, count * elem_};
      RecvOp r{layout_.recv_peer, out, count * elem_};
      st = comm_.Exchange({&s, 1}, {&r, 1});
      break;
    }
    default:
      return absl::InvalidArgumentError("unknown collective");
  }
  if (!st.ok()) return st;
  if (config_.op == v1::AVG && IsReduction(config_.collective) &&
      layout_.check_output) {
    for (int64_t i = 0; i < layout_.recv_count; ++i) {
      double v = LoadElement(config_.dtype, out, i);
      StoreElement(config_.dtype, out, i,
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
      StoreElement(config_.dtype, out, i,
                   LoadElement(config_.dtype, out, i) + 1);
    }
    for (int64_t i = 0; i < layout_.recv_count; ++i) {
      if (!PatternMatches(LoadElement(config_.dtype, out, i),
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
