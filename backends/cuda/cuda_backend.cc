#include "backends/cuda/cuda_backend.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <chrono>
#include <cstring>
#include <map>

#include "absl/strings/str_format.h"
#include "backends/collective_layout.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/nccl_comm.h"
#include "backends/cuda/nvml.h"
#include "core/names.h"
#include "core/status_macros.h"
#include "kernels/collective_kernels.h"
#include "kernels/patterns.h"

namespace ringmaster {
namespace {

std::optional<ncclDataType_t> NcclType(v1::DataType t) {
  switch (t) {
    case v1::FLOAT32:
      return ncclFloat32;
    case v1::BFLOAT16:
      return ncclBfloat16;
    case v1::FLOAT16:
      return ncclFloat16;
    case v1::INT32:
      return ncclInt32;
    case v1::FLOAT64:
      return ncclFloat64;
    case v1::INT64:
      return ncclInt64;
    case v1::INT8:
      return ncclInt8;
    case v1::UINT8:
      return ncclUint8;
    default:
      return std::nullopt;
  }
}

std::optional<ncclRedOp_t> NcclOp(v1::ReduceOp op) {
  switch (op) {
    case v1::SUM:
      return ncclSum;
    case v1::PROD:
      return ncclProd;
    case v1::MIN:
      return ncclMin;
    case v1::MAX:
      return ncclMax;
    case v1::AVG:
      return ncclAvg;
    default:
      return std::nullopt;
  }
}

std::string VersionString(int code, bool nccl) {
  if (nccl) {
    // NCCL >= 2.9: major*10000 + minor*100 + patch.
    return absl::StrFormat("%d.%d.%d", code / 10000, (code % 10000) / 100,
                           code % 100);
  }
  return absl::StrFormat("%d.%d", code / 1000, (code % 1000) / 10);
}

}  // namespace

int CudaDeviceCount() {
  int n = 0;
  cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no driver" error
    return 0;
  }
  return n;
}

BackendInfo CudaLibraryInfo() {
  BackendInfo info;
  info.name = "cuda (NCCL)";
  int v = 0;
  if (ncclGetVersion(&v) == ncclSuccess)
    info.nccl_version = VersionString(v, true);
  if (cudaRuntimeGetVersion(&v) == cudaSuccess) {
    info.cuda_runtime_version = VersionString(v, false);
  }
  if (auto d = NvmlDriverVersion()) {
    info.driver_version = *d;
  } else if (cudaDriverGetVersion(&v) == cudaSuccess && v > 0) {
    info.driver_version = "cuda " + VersionString(v, false);
  }
  return info;
}

struct CudaBackend::Impl {
  int rank = 0;
  int nranks = 1;
  int device = 0;
  std::vector<Fault> faults;
  BackendInfo info;
  ncclComm_t comm = nullptr;
  // For the communicator's creation on first need (world backend only).
  Control* control = nullptr;
  std::string relayed_id;
  double comm_setup_s = 0;
  cudaStream_t stream = nullptr;
  std::vector<cudaEvent_t> op_events;  // window and per-op timing events
  void* send = nullptr;                // or the one in-place buffer
  void* recv = nullptr;
  size_t send_capacity = 0;
  size_t recv_capacity = 0;
  unsigned long long* d_wrong = nullptr;
  CollectiveConfig config;
  CollectiveLayout layout;
  int64_t elem = 4;
  ncclDataType_t type = ncclFloat32;
  ncclRedOp_t op = ncclSum;
  bool prepared = false;
  cudaGraphExec_t graph = nullptr;  // captured ops of the prepared config
  int graph_iters = 0;

  static absl::Status Grow(void** buf, size_t* capacity, size_t bytes,
                           int rank) {
    if (bytes <= *capacity) return absl::OkStatus();
    if (*buf) cudaFree(*buf);
    *buf = nullptr;
    *capacity = 0;
    RM_CUDA(cudaMalloc(buf, bytes == 0 ? 1 : bytes), rank);
    *capacity = bytes;
    return absl::OkStatus();
  }

  char* In() const {
    return static_cast<char*>(send) +
           (config.in_place ? layout.in_offset * elem : 0);
  }
  char* Out() const {
    return config.in_place ? static_cast<char*>(send) + layout.out_offset * elem
                           : static_cast<char*>(recv);
  }

  // One operation of the prepared configuration, enqueued on `stream`.
  absl::Status Enqueue() {
    const size_t count = static_cast<size_t>(config.count);
    const size_t chunk = static_cast<size_t>(layout.chunk);
    char* in = In();
    char* out = Out();
    switch (config.collective) {
      case v1::ALL_REDUCE:
        RM_NCCL(ncclAllReduce(in, out, count, type, op, comm, stream), rank);
        break;
      case v1::ALL_GATHER:
        RM_NCCL(ncclAllGather(in, out, chunk, type, comm, stream), rank);
        break;
      case v1::REDUCE_SCATTER:
        RM_NCCL(ncclReduceScatter(in, out, chunk, type, op, comm, stream),
                rank);
        break;
      case v1::BROADCAST:
        RM_NCCL(ncclBroadcast(in, out, count, type, config.root, comm, stream),
                rank);
        break;
      case v1::REDUCE:
        RM_NCCL(ncclReduce(in, out, count, type, op, config.root, comm, stream),
                rank);
        break;
      case v1::ALL_TO_ALL:
        RM_NCCL(ncclGroupStart(), rank);
        for (int p = 0; p < nranks; ++p) {
          RM_NCCL(ncclSend(in + p * chunk * elem, chunk, type, p, comm, stream),
                  rank);
          RM_NCCL(
              ncclRecv(out + p * chunk * elem, chunk, type, p, comm, stream),
              rank);
        }
        RM_NCCL(ncclGroupEnd(), rank);
        break;
      case v1::SEND_RECV:
        RM_NCCL(ncclGroupStart(), rank);
        RM_NCCL(ncclSend(in, count, type, layout.send_peer, comm, stream),
                rank);
        RM_NCCL(ncclRecv(out, count, type, layout.recv_peer, comm, stream),
                rank);
        RM_NCCL(ncclGroupEnd(), rank);
        break;
      default:
        return absl::InvalidArgumentError("unknown collective");
    }
    return absl::OkStatus();
  }

  absl::Status FillInputs() {
    // Outputs start poisoned so unwritten elements are caught.
    if (config.in_place) {
      RM_CUDA(cudaMemsetAsync(send, 0xA5, layout.inplace_count * elem, stream),
              rank);
    } else {
      RM_CUDA(cudaMemsetAsync(recv, 0xA5, layout.recv_count * elem, stream),
              rank);
    }
    if (layout.fill_input) {
      RM_CUDA(LaunchFillPattern(In(), config.dtype, layout.send_count,
                                layout.fill_op, rank, nranks, layout.range,
                                layout.fill_offset, stream),
              rank);
    }
    return absl::OkStatus();
  }

  absl::Status EnsureEvents(int n) {
    while (static_cast<int>(op_events.size()) < n) {
      cudaEvent_t e;
      RM_CUDA(cudaEventCreate(&e), rank);
      op_events.push_back(e);
    }
    return absl::OkStatus();
  }

  // Captures `iters` operations into `graph` unless already captured.
  absl::Status Capture(int iters) {
    if (graph && graph_iters == iters) return absl::OkStatus();
    DropGraph();
    cudaGraph_t g = nullptr;
    RM_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal),
            rank);
    for (int i = 0; i < iters; ++i) {
      absl::Status s = Enqueue();
      if (!s.ok()) {
        cudaStreamEndCapture(stream, &g);
        if (g) cudaGraphDestroy(g);
        return s;
      }
    }
    RM_CUDA(cudaStreamEndCapture(stream, &g), rank);
    cudaError_t err = cudaGraphInstantiate(&graph, g, 0);
    cudaGraphDestroy(g);
    RM_CUDA(err, rank);
    graph_iters = iters;
    return absl::OkStatus();
  }

  void DropGraph() {
    if (graph) cudaGraphExecDestroy(graph);
    graph = nullptr;
    graph_iters = 0;
  }

  // The communicator, created on first need (collective: every rank walks
  // the same cases).
  absl::Status EnsureComm() {
    if (comm != nullptr) return absl::OkStatus();
    if (control == nullptr) {
      return absl::FailedPreconditionError(
          absl::StrFormat("rank %d: no NCCL communicator", rank));
    }
    auto t0 = std::chrono::steady_clock::now();
    RM_CUDA(cudaSetDevice(device), rank);
    RM_RETURN_IF_ERROR(CreateNcclComm(*control, relayed_id, &comm));
    comm_setup_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
            .count();
    return absl::OkStatus();
  }

  absl::Status CheckAsync() {
    if (comm == nullptr) return absl::OkStatus();
    ncclResult_t async = ncclSuccess;
    ncclCommGetAsyncError(comm, &async);
    RM_NCCL(async, rank);
    return absl::OkStatus();
  }
};

CudaBackend::CudaBackend(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

CudaBackend::~CudaBackend() {
  if (!impl_) return;
  if (impl_->stream) cudaStreamSynchronize(impl_->stream);
  impl_->DropGraph();
  if (impl_->comm) ncclCommDestroy(impl_->comm);
  if (impl_->send) cudaFree(impl_->send);
  if (impl_->recv) cudaFree(impl_->recv);
  if (impl_->d_wrong) cudaFree(impl_->d_wrong);
  for (cudaEvent_t e : impl_->op_events) cudaEventDestroy(e);
  if (impl_->stream) cudaStreamDestroy(impl_->stream);
}

void CudaBackend::Abort() {
  if (impl_ && impl_->comm) {
    ncclCommAbort(impl_->comm);
    impl_->comm = nullptr;
  }
}

absl::StatusOr<std::string> NewNcclUniqueId() {
  ncclUniqueId id;
  ncclResult_t rc = ncclGetUniqueId(&id);
  if (rc != ncclSuccess) {
    return absl::InternalError(std::string("ncclGetUniqueId: ") +
                               ncclGetErrorString(rc));
  }
  return std::string(reinterpret_cast<const char*>(&id), sizeof id);
}

absl::StatusOr<std::unique_ptr<CudaBackend>> CudaBackend::Create(
    Control& control, int local_rank, std::vector<Fault> faults,
    const std::string& relayed_id) {
  auto impl = std::make_unique<Impl>();
  impl->rank = control.rank();
  impl->nranks = control.size();
  impl->faults = std::move(faults);
  impl->control = &control;
  impl->relayed_id = relayed_id;
  int count = CudaDeviceCount();
  if (count == 0) {
    return absl::FailedPreconditionError(
        absl::StrFormat("rank %d: no CUDA device is visible", impl->rank));
  }
  impl->device = local_rank % count;
  const int rank = impl->rank;
  RM_CUDA(cudaSetDevice(impl->device), rank);
  cudaDeviceProp prop;
  RM_CUDA(cudaGetDeviceProperties(&prop, impl->device), rank);
  impl->info = CudaLibraryInfo();
  impl->info.gpu_model = prop.name;
  char bus[32] = {};
  if (cudaDeviceGetPCIBusId(bus, sizeof bus, impl->device) == cudaSuccess) {
    impl->info.gpu_bus_id = bus;
  }
  RM_CUDA(cudaStreamCreateWithFlags(&impl->stream, cudaStreamNonBlocking),
          rank);
  RM_CUDA(cudaMalloc(&impl->d_wrong, sizeof(unsigned long long)), rank);
  return std::unique_ptr<CudaBackend>(new CudaBackend(std::move(impl)));
}

double CudaBackend::CommSetupSeconds() const { return impl_->comm_setup_s; }

absl::StatusOr<std::unique_ptr<CollectiveBackend>> CudaBackend::Split(
    bool member, HostComm* /*member_comm*/, double* setup_s) {
  RM_RETURN_IF_ERROR(impl_->EnsureComm());
  const Impl& m = *impl_;
  auto t0 = std::chrono::steady_clock::now();
  ncclComm_t sub = nullptr;
  RM_NCCL(ncclCommSplit(m.comm, member ? 0 : NCCL_SPLIT_NOCOLOR, m.rank, &sub,
                        nullptr),
          m.rank);
  if (setup_s) {
    *setup_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
            .count();
  }
  if (!member) return std::unique_ptr<CollectiveBackend>();
  auto impl = std::make_unique<Impl>();
  impl->comm = sub;
  RM_NCCL(ncclCommUserRank(sub, &impl->rank), m.rank);
  RM_NCCL(ncclCommCount(sub, &impl->nranks), m.rank);
  impl->device = m.device;
  impl->faults = m.faults;
  impl->info = m.info;
  if (setup_s) impl->comm_setup_s = *setup_s;
  std::unique_ptr<CudaBackend> backend(new CudaBackend(std::move(impl)));
  Impl& n = *backend->impl_;
  RM_CUDA(cudaStreamCreateWithFlags(&n.stream, cudaStreamNonBlocking), n.rank);
  RM_CUDA(cudaMalloc(&n.d_wrong, sizeof(unsigned long long)), n.rank);
  return std::unique_ptr<CollectiveBackend>(std::move(backend));
}

BackendInfo CudaBackend::Info() const { return impl_->info; }

absl::Status CudaBackend::Prepare(const CollectiveConfig& config) {
  Impl& m = *impl_;
  m.prepared = false;
  RM_RETURN_IF_ERROR(m.EnsureComm());
  m.DropGraph();
  auto layout = MakeLayout(config, m.rank, m.nranks);
  if (!layout.ok()) return layout.status();
  auto type = NcclType(config.dtype);
  if (!type) {
    return absl::UnimplementedError(
        absl::StrFormat("cuda backend: data type %s is not supported",
                        DataTypeName(config.dtype)));
  }
  if (IsReduction(config.collective)) {
    auto op = NcclOp(config.op);
    if (!op) {
      return absl::UnimplementedError(absl::StrFormat(
          "cuda backend: op %s is not supported", ReduceOpName(config.op)));
    }
    m.op = *op;
  }
  m.type = *type;
  m.config = config;
  m.layout = *layout;
  m.elem = DataTypeSize(config.dtype);
  if (config.in_place) {
    RM_RETURN_IF_ERROR(Impl::Grow(&m.send, &m.send_capacity,
                                  layout->inplace_count * m.elem, m.rank));
  } else {
    RM_RETURN_IF_ERROR(Impl::Grow(&m.send, &m.send_capacity,
                                  layout->send_count * m.elem, m.rank));
    RM_RETURN_IF_ERROR(Impl::Grow(&m.recv, &m.recv_capacity,
                                  layout->recv_count * m.elem, m.rank));
  }
  RM_RETURN_IF_ERROR(m.FillInputs());
  RM_CUDA(cudaStreamSynchronize(m.stream), m.rank);
  m.prepared = true;
  return absl::OkStatus();
}

absl::StatusOr<std::vector<double>> CudaBackend::TimeWindows(int iters,
                                                             int windows,
                                                             bool graph) {
  Impl& m = *impl_;
  if (!m.prepared) return absl::FailedPreconditionError("Prepare() first");
  if (graph) RM_RETURN_IF_ERROR(m.Capture(iters));
  RM_RETURN_IF_ERROR(m.EnsureEvents(windows + 1));
  RM_CUDA(cudaEventRecord(m.op_events[0], m.stream), m.rank);
  for (int w = 0; w < windows; ++w) {
    if (graph) {
      RM_CUDA(cudaGraphLaunch(m.graph, m.stream), m.rank);
    } else {
      for (int i = 0; i < iters; ++i) RM_RETURN_IF_ERROR(m.Enqueue());
    }
    RM_CUDA(cudaEventRecord(m.op_events[w + 1], m.stream), m.rank);
  }
  RM_CUDA(cudaEventSynchronize(m.op_events[windows]), m.rank);
  RM_RETURN_IF_ERROR(m.CheckAsync());
  std::vector<double> out(windows);
  for (int w = 0; w < windows; ++w) {
    float ms = 0;
    RM_CUDA(cudaEventElapsedTime(&ms, m.op_events[w], m.op_events[w + 1]),
            m.rank);
    out[w] = static_cast<double>(ms) * 1e-3;
  }
  return out;
}

absl::StatusOr<std::vector<double>> CudaBackend::TimeEachOp(int iters) {
  Impl& m = *impl_;
  if (!m.prepared) return absl::FailedPreconditionError("Prepare() first");
  RM_RETURN_IF_ERROR(m.EnsureEvents(2 * iters));
  for (int i = 0; i < iters; ++i) {
    RM_CUDA(cudaEventRecord(m.op_events[2 * i], m.stream), m.rank);
    RM_RETURN_IF_ERROR(m.Enqueue());
    RM_CUDA(cudaEventRecord(m.op_events[2 * i + 1], m.stream), m.rank);
  }
  RM_CUDA(cudaEventSynchronize(m.op_events[2 * iters - 1]), m.rank);
  RM_RETURN_IF_ERROR(m.CheckAsync());
  std::vector<double> out(iters);
  for (int i = 0; i < iters; ++i) {
    float ms = 0;
    RM_CUDA(
        cudaEventElapsedTime(&ms, m.op_events[2 * i], m.op_events[2 * i + 1]),
        m.rank);
    out[i] = static_cast<double>(ms) * 1e-3;
  }
  return out;
}

absl::StatusOr<int64_t> CudaBackend::Verify() {
  Impl& m = *impl_;
  if (!m.prepared) return absl::FailedPreconditionError("Prepare() first");
  RM_RETURN_IF_ERROR(m.FillInputs());
  RM_RETURN_IF_ERROR(m.Enqueue());
  unsigned long long wrong = 0;
  if (m.layout.check_output) {
    char* out = m.Out();
    if (FindFault(m.faults, Fault::Kind::kCorrupt, m.rank) &&
        m.layout.recv_count > 0) {
      RM_CUDA(LaunchCorruptElement(out, m.config.dtype, m.layout.recv_count / 2,
                                   m.stream),
              m.rank);
    }
    RM_CUDA(cudaMemsetAsync(m.d_wrong, 0, sizeof(unsigned long long), m.stream),
            m.rank);
    RM_CUDA(LaunchCountWrong(out, m.config.dtype, m.layout.recv_count,
                             m.layout.check, m.d_wrong, m.stream),
            m.rank);
    RM_CUDA(cudaMemcpyAsync(&wrong, m.d_wrong, sizeof wrong,
                            cudaMemcpyDeviceToHost, m.stream),
            m.rank);
  }
  RM_CUDA(cudaStreamSynchronize(m.stream), m.rank);
  RM_RETURN_IF_ERROR(m.CheckAsync());
  // Leave valid inputs for the timed operations that follow.
  RM_RETURN_IF_ERROR(m.FillInputs());
  RM_CUDA(cudaStreamSynchronize(m.stream), m.rank);
  return static_cast<int64_t>(wrong);
}

}  // namespace ringmaster
