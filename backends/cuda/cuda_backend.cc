#include "backends/cuda/cuda_backend.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <chrono>
#include <cstring>

#include "absl/strings/str_format.h"
#include "backends/cuda/nvml.h"
#include "core/names.h"
#include "kernels/collective_kernels.h"
#include "kernels/patterns.h"

namespace ringmaster {
namespace {

// Wraps CUDA and NCCL errors with the expression, file:line and rank.
absl::Status CudaStatus(cudaError_t err, const char* expr, const char* file,
                        int line, int rank) {
  if (err == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(absl::StrFormat("%s:%d: rank %d: %s: %s", file, line,
                                             rank, expr, cudaGetErrorString(err)));
}
absl::Status NcclStatus(ncclResult_t res, const char* expr, const char* file,
                        int line, int rank) {
  if (res == ncclSuccess) return absl::OkStatus();
  return absl::InternalError(absl::StrFormat("%s:%d: rank %d: %s: %s (%s)", file,
                                             line, rank, expr, ncclGetErrorString(res),
                                             ncclGetLastError(nullptr)));
}
#define RM_CUDA(expr, rank)                                                 \
  do {                                                                      \
    absl::Status s_ = CudaStatus((expr), #expr, __FILE__, __LINE__, rank); \
    if (!s_.ok()) return s_;                                                \
  } while (0)
#define RM_NCCL(expr, rank)                                                 \
  do {                                                                      \
    absl::Status s_ = NcclStatus((expr), #expr, __FILE__, __LINE__, rank); \
    if (!s_.ok()) return s_;                                                \
  } while (0)

int64_t ExactLimit(v1::DataType t) {
  switch (t) {
    case v1::BFLOAT16: return 256;
    case v1::FLOAT16: return 2048;
    case v1::INT8: return 127;
    case v1::UINT8: return 255;
    default: return 1 << 24;
  }
}

std::optional<ncclDataType_t> NcclType(v1::DataType t) {
  switch (t) {
    case v1::FLOAT32: return ncclFloat32;
    case v1::BFLOAT16: return ncclBfloat16;
    case v1::FLOAT16: return ncclFloat16;
    case v1::INT32: return ncclInt32;
    case v1::FLOAT64: return ncclFloat64;
    case v1::INT64: return ncclInt64;
    case v1::INT8: return ncclInt8;
    case v1::UINT8: return ncclUint8;
    default: return std::nullopt;
  }
}

std::optional<ncclRedOp_t> NcclOp(v1::ReduceOp op) {
  switch (op) {
    case v1::SUM: return ncclSum;
    case v1::PROD: return ncclProd;
    case v1::MIN: return ncclMin;
    case v1::MAX: return ncclMax;
    case v1::AVG: return ncclAvg;
    default: return std::nullopt;
  }
}

std::string VersionString(int code, bool nccl) {
  if (nccl) {
    // NCCL >= 2.9: major*10000 + minor*100 + patch.
    return absl::StrFormat("%d.%d.%d", code / 10000, (code % 10000) / 100, code % 100);
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
  if (ncclGetVersion(&v) == ncclSuccess) info.nccl_version = VersionString(v, true);
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
  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr;
  cudaEvent_t stop = nullptr;
  void* send = nullptr;
  void* recv = nullptr;
  size_t capacity = 0;  // bytes of each of send and recv
  unsigned long long* d_wrong = nullptr;
  CollectiveConfig config;
  ncclDataType_t type = ncclFloat32;
  ncclRedOp_t op = ncclSum;
  int range = 1;
  bool prepared = false;

  absl::Status Reserve(size_t bytes) {
    if (bytes <= capacity) return absl::OkStatus();
    if (send) cudaFree(send);
    if (recv) cudaFree(recv);
    send = recv = nullptr;
    capacity = 0;
    RM_CUDA(cudaMalloc(&send, bytes), rank);
    RM_CUDA(cudaMalloc(&recv, bytes), rank);
    capacity = bytes;
    return absl::OkStatus();
  }

  absl::Status Enqueue() {
    void* out = config.in_place ? send : recv;
    RM_NCCL(ncclAllReduce(send, out, static_cast<size_t>(config.count), type, op,
                          comm, stream),
            rank);
    return absl::OkStatus();
  }

  absl::Status FillInputs() {
    RM_CUDA(LaunchFillPattern(send, config.dtype, config.count, config.op, rank,
                              nranks, range, stream),
            rank);
    if (!config.in_place) {
      size_t bytes = static_cast<size_t>(config.count * DataTypeSize(config.dtype));
      RM_CUDA(cudaMemsetAsync(recv, 0xA5, bytes, stream), rank);
    }
    return absl::OkStatus();
  }
};

CudaBackend::CudaBackend(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

CudaBackend::~CudaBackend() {
  if (!impl_) return;
  if (impl_->stream) cudaStreamSynchronize(impl_->stream);
  if (impl_->comm) ncclCommDestroy(impl_->comm);
  if (impl_->send) cudaFree(impl_->send);
  if (impl_->recv) cudaFree(impl_->recv);
  if (impl_->d_wrong) cudaFree(impl_->d_wrong);
  if (impl_->start) cudaEventDestroy(impl_->start);
  if (impl_->stop) cudaEventDestroy(impl_->stop);
  if (impl_->stream) cudaStreamDestroy(impl_->stream);
}

void CudaBackend::Abort() {
  if (impl_ && impl_->comm) {
    ncclCommAbort(impl_->comm);
    impl_->comm = nullptr;
  }
}

absl::StatusOr<std::unique_ptr<CudaBackend>> CudaBackend::Create(
    Control& control, int local_rank, std::vector<Fault> faults,
    double* setup_s) {
  auto impl = std::make_unique<Impl>();
  impl->rank = control.rank();
  impl->nranks = control.size();
  impl->faults = std::move(faults);
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
  RM_CUDA(cudaStreamCreateWithFlags(&impl->stream, cudaStreamNonBlocking), rank);
  RM_CUDA(cudaEventCreate(&impl->start), rank);
  RM_CUDA(cudaEventCreate(&impl->stop), rank);
  RM_CUDA(cudaMalloc(&impl->d_wrong, sizeof(unsigned long long)), rank);

  auto t0 = std::chrono::steady_clock::now();
  ncclUniqueId id;
  std::memset(&id, 0, sizeof id);
  if (rank == 0) RM_NCCL(ncclGetUniqueId(&id), rank);
  absl::Status bs = control.Broadcast(&id, sizeof id, 0);
  if (!bs.ok()) return bs;
  RM_NCCL(ncclCommInitRank(&impl->comm, impl->nranks, id, rank), rank);
  if (setup_s) {
    *setup_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  return std::unique_ptr<CudaBackend>(new CudaBackend(std::move(impl)));
}

BackendInfo CudaBackend::Info() const { return impl_->info; }

absl::Status CudaBackend::Prepare(const CollectiveConfig& config) {
  Impl& m = *impl_;
  m.prepared = false;
  if (config.collective != v1::ALL_REDUCE) {
    return absl::UnimplementedError(absl::StrFormat(
        "cuda backend: %s is not implemented yet", CollectiveName(config.collective)));
  }
  auto type = NcclType(config.dtype);
  auto op = NcclOp(config.op);
  if (!type) {
    return absl::UnimplementedError(absl::StrFormat(
        "cuda backend: data type %s is not supported", DataTypeName(config.dtype)));
  }
  if (!op) {
    return absl::UnimplementedError(absl::StrFormat(
        "cuda backend: op %s is not supported", ReduceOpName(config.op)));
  }
  m.type = *type;
  m.op = *op;
  m.config = config;
  m.range = PatternRange(m.nranks, ExactLimit(config.dtype));
  size_t bytes = static_cast<size_t>(config.count * DataTypeSize(config.dtype));
  absl::Status s = m.Reserve(bytes);
  if (!s.ok()) return s;
  s = m.FillInputs();
  if (!s.ok()) return s;
  RM_CUDA(cudaStreamSynchronize(m.stream), m.rank);
  m.prepared = true;
  return absl::OkStatus();
}

absl::StatusOr<double> CudaBackend::TimeOps(int iters) {
  Impl& m = *impl_;
  if (!m.prepared) return absl::FailedPreconditionError("Prepare() first");
  RM_CUDA(cudaEventRecord(m.start, m.stream), m.rank);
  for (int i = 0; i < iters; ++i) {
    absl::Status s = m.Enqueue();
    if (!s.ok()) return s;
  }
  RM_CUDA(cudaEventRecord(m.stop, m.stream), m.rank);
  RM_CUDA(cudaEventSynchronize(m.stop), m.rank);
  ncclResult_t async = ncclSuccess;
  ncclCommGetAsyncError(m.comm, &async);
  RM_NCCL(async, m.rank);
  float ms = 0;
  RM_CUDA(cudaEventElapsedTime(&ms, m.start, m.stop), m.rank);
  return static_cast<double>(ms) * 1e-3;
}

absl::StatusOr<int64_t> CudaBackend::Verify() {
  Impl& m = *impl_;
  if (!m.prepared) return absl::FailedPreconditionError("Prepare() first");
  absl::Status s = m.FillInputs();
  if (!s.ok()) return s;
  s = m.Enqueue();
  if (!s.ok()) return s;
  void* out = m.config.in_place ? m.send : m.recv;
  if (FindFault(m.faults, Fault::Kind::kCorrupt, m.rank) && m.config.count > 0) {
    RM_CUDA(LaunchCorruptElement(out, m.config.dtype, m.config.count / 2, m.stream),
            m.rank);
  }
  RM_CUDA(cudaMemsetAsync(m.d_wrong, 0, sizeof(unsigned long long), m.stream), m.rank);
  RM_CUDA(LaunchCountWrong(out, m.config.dtype, m.config.count, m.config.op, m.nranks,
                           m.range, m.d_wrong, m.stream),
          m.rank);
  unsigned long long wrong = 0;
  RM_CUDA(cudaMemcpyAsync(&wrong, m.d_wrong, sizeof wrong, cudaMemcpyDeviceToHost,
                          m.stream),
          m.rank);
  RM_CUDA(cudaStreamSynchronize(m.stream), m.rank);
  // Leave valid inputs for the timed operations that follow.
  s = m.FillInputs();
  if (!s.ok()) return s;
  RM_CUDA(cudaStreamSynchronize(m.stream), m.rank);
  return static_cast<int64_t>(wrong);
}

}  // namespace ringmaster
