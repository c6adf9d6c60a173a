#include "comm/mpi_comm.h"

#include <chrono>
#include <climits>
#include <cstring>
#include <thread>
#include <vector>

#include "absl/strings/str_format.h"
#include "comm/elements.h"
#include "core/names.h"

namespace ringmaster {
namespace {

absl::Status CheckCount(int64_t count, int rank) {
  if (count < 0 || count > INT_MAX) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "rank %d: %d elements exceed MPI's int count", rank, count));
  }
  return absl::OkStatus();
}

// MPI reductions for 16-bit floating types, which MPI lacks.
template <v1::DataType kType, v1::ReduceOp kOp>
void HalfReduce(void* in, void* inout, int* len, MPI_Datatype*) {
  ReduceInto(kType, kOp, in, inout, *len).IgnoreError();  // types checked
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

class MpiRequest : public HostComm::Request {
 public:
  MpiRequest(MPI_Request req, int rank) : req_(req), rank_(rank) {}
  ~MpiRequest() override {
    if (req_ != MPI_REQUEST_NULL) MPI_Wait(&req_, MPI_STATUS_IGNORE);
  }
  absl::StatusOr<bool> Test() override {
    int done = 0;
    int rc = MPI_Test(&req_, &done, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) return MpiError(rc, "MPI_Test", rank_);
    return done != 0;
  }
  absl::Status Wait() override {
    return MpiError(MPI_Wait(&req_, MPI_STATUS_IGNORE), "MPI_Wait", rank_);
  }

 private:
  MPI_Request req_;
  int rank_;
};

}  // namespace

absl::Status MpiError(int code, const char* call, int rank) {
  if (code == MPI_SUCCESS) return absl::OkStatus();
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(code, text, &len);
  return absl::InternalError(absl::StrFormat("%s failed on rank %d: %s", call,
                                             rank, std::string(text, len)));
}

std::string MpiLibraryVersion() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  MPI_Get_library_version(text, &len);
  std::string s(text, len);
  auto cut = s.find_first_of(",\n");
  return cut == std::string::npos ? s : s.substr(0, cut);
}

MpiComm::MpiComm(MPI_Comm comm, bool owned) : comm_(comm), owned_(owned) {
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
}

MpiComm::~MpiComm() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  for (auto& [key, op] : custom_ops_) MPI_Op_free(&op);
  if (owned_) MPI_Comm_free(&comm_);
}

absl::Status MpiComm::Types(v1::DataType dtype, v1::ReduceOp op,
                            MPI_Datatype* type, MPI_Op* mop) {
  switch (dtype) {
    case v1::FLOAT32:
      *type = MPI_FLOAT;
      break;
    case v1::FLOAT64:
      *type = MPI_DOUBLE;
      break;
    case v1::INT32:
      *type = MPI_INT32_T;
      break;
    case v1::INT64:
      *type = MPI_INT64_T;
      break;
    case v1::INT8:
      *type = MPI_INT8_T;
      break;
    case v1::UINT8:
      *type = MPI_UINT8_T;
      break;
    case v1::BFLOAT16:
    case v1::FLOAT16:
      *type = MPI_UINT16_T;
      break;
    default:
      return absl::UnimplementedError(absl::StrFormat(
          "host backend: data type %s is not supported", DataTypeName(dtype)));
  }
  if (mop == nullptr) return absl::OkStatus();
  if (dtype == v1::BFLOAT16 || dtype == v1::FLOAT16) {
    MPI_User_function* fn = dtype == v1::BFLOAT16
                                ? HalfFunction<v1::BFLOAT16>(op)
                                : HalfFunction<v1::FLOAT16>(op);
    if (fn == nullptr) {
      return absl::UnimplementedError(absl::StrFormat(
          "host backend: op %s is not supported", ReduceOpName(op)));
    }
    auto key = std::make_pair(static_cast<int>(dtype), static_cast<int>(op));
    auto it = custom_ops_.find(key);
    if (it == custom_ops_.end()) {
      MPI_Op created;
      int rc = MPI_Op_create(fn, /*commute=*/1, &created);
      if (rc != MPI_SUCCESS) return MpiError(rc, "MPI_Op_create", rank_);
      it = custom_ops_.emplace(key, created).first;
    }
    *mop = it->second;
    return absl::OkStatus();
  }
  switch (op) {
    case v1::SUM:
      *mop = MPI_SUM;
      break;
    case v1::PROD:
      *mop = MPI_PROD;
      break;
    case v1::MIN:
      *mop = MPI_MIN;
      break;
    case v1::MAX:
      *mop = MPI_MAX;
      break;
    default:
      return absl::UnimplementedError(absl::StrFormat(
          "host backend: op %s is not supported", ReduceOpName(op)));
  }
  return absl::OkStatus();
}

absl::StatusOr<int> MpiComm::RanksOnHost() {
  MPI_Comm node;
  int rc = MPI_Comm_split_type(comm_, MPI_COMM_TYPE_SHARED, rank_,
                               MPI_INFO_NULL, &node);
  if (rc != MPI_SUCCESS) return MpiError(rc, "MPI_Comm_split_type", rank_);
  int local = 1;
  MPI_Comm_size(node, &local);
  MPI_Comm_free(&node);
  return local;
}

absl::Status MpiComm::Barrier() {
  return MpiError(MPI_Barrier(comm_), "MPI_Barrier", rank_);
}

absl::Status MpiComm::IdleBarrier() {
  MPI_Request req;
  int rc = MPI_Ibarrier(comm_, &req);
  if (rc != MPI_SUCCESS) return MpiError(rc, "MPI_Ibarrier", rank_);
  int done = 0;
  while (!done) {
    rc = MPI_Test(&req, &done, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) return MpiError(rc, "MPI_Test", rank_);
    if (!done) std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return absl::OkStatus();
}

absl::Status MpiComm::Exchange(std::span<const SendOp> sends,
                               std::span<const RecvOp> recvs) {
  constexpr int kTag = 4242;
  std::vector<MPI_Request> reqs;
  reqs.reserve(sends.size() + recvs.size());
  absl::Status status;
  for (const RecvOp& r : recvs) {
    status = CheckCount(r.bytes, rank_);
    if (!status.ok()) break;
    reqs.emplace_back();
    status = MpiError(MPI_Irecv(r.data, static_cast<int>(r.bytes), MPI_BYTE,
                                r.peer, kTag, comm_, &reqs.back()),
                      "MPI_Irecv", rank_);
    if (!status.ok()) break;
  }
  for (const SendOp& s : sends) {
    if (!status.ok()) break;
    status = CheckCount(s.bytes, rank_);
    if (!status.ok()) break;
    reqs.emplace_back();
    status = MpiError(MPI_Isend(s.data, static_cast<int>(s.bytes), MPI_BYTE,
                                s.peer, kTag, comm_, &reqs.back()),
                      "MPI_Isend", rank_);
  }
  absl::Status waited = MpiError(MPI_Waitall(static_cast<int>(reqs.size()),
                                             reqs.data(), MPI_STATUSES_IGNORE),
                                 "MPI_Waitall", rank_);
  return status.ok() ? waited : status;
}

absl::Status MpiComm::AllReduce(const void* send, void* recv, int64_t count,
                                v1::DataType dtype, v1::ReduceOp op) {
  MPI_Datatype type;
  MPI_Op mop;
  if (auto s = CheckCount(count, rank_); !s.ok()) return s;
  if (auto s = Types(dtype, op, &type, &mop); !s.ok()) return s;
  return MpiError(MPI_Allreduce(send ? send : MPI_IN_PLACE, recv,
                                static_cast<int>(count), type, mop, comm_),
                  "MPI_Allreduce", rank_);
}

absl::Status MpiComm::AllGather(const void* send, void* recv,
                                int64_t bytes_per_rank) {
  if (auto s = CheckCount(bytes_per_rank, rank_); !s.ok()) return s;
  const int n = static_cast<int>(bytes_per_rank);
  return MpiError(
      send ? MPI_Allgather(send, n, MPI_BYTE, recv, n, MPI_BYTE, comm_)
           : MPI_Allgather(MPI_IN_PLACE, 0, MPI_BYTE, recv, n, MPI_BYTE, comm_),
      "MPI_Allgather", rank_);
}

absl::Status MpiComm::ReduceScatter(const void* send, void* recv,
                                    int64_t count_per_rank, v1::DataType dtype,
                                    v1::ReduceOp op) {
  MPI_Datatype type;
  MPI_Op mop;
  if (auto s = CheckCount(count_per_rank, rank_); !s.ok()) return s;
  if (auto s = Types(dtype, op, &type, &mop); !s.ok()) return s;
  return MpiError(MPI_Reduce_scatter_block(send ? send : MPI_IN_PLACE, recv,
                                           static_cast<int>(count_per_rank),
                                           type, mop, comm_),
                  "MPI_Reduce_scatter_block", rank_);
}

absl::Status MpiComm::Broadcast(void* data, int64_t bytes, int root) {
  if (auto s = CheckCount(bytes, rank_); !s.ok()) return s;
  return MpiError(
      MPI_Bcast(data, static_cast<int>(bytes), MPI_BYTE, root, comm_),
      "MPI_Bcast", rank_);
}

absl::Status MpiComm::Reduce(const void* send, void* recv, int64_t count,
                             v1::DataType dtype, v1::ReduceOp op, int root) {
  MPI_Datatype type;
  MPI_Op mop;
  if (auto s = CheckCount(count, rank_); !s.ok()) return s;
  if (auto s = Types(dtype, op, &type, &mop); !s.ok()) return s;
  // In place only means something at the root; elsewhere `recv` is input.
  const void* in = send ? send : (rank_ == root ? MPI_IN_PLACE : recv);
  return MpiError(
      MPI_Reduce(in, recv, static_cast<int>(count), type, mop, root, comm_),
      "MPI_Reduce", rank_);
}

absl::Status MpiComm::AllToAll(const void* send, void* recv,
                               int64_t bytes_per_rank) {
  if (auto s = CheckCount(bytes_per_rank, rank_); !s.ok()) return s;
  const int n = static_cast<int>(bytes_per_rank);
  return MpiError(MPI_Alltoall(send, n, MPI_BYTE, recv, n, MPI_BYTE, comm_),
                  "MPI_Alltoall", rank_);
}

absl::StatusOr<std::unique_ptr<HostComm::Request>> MpiComm::StartAllReduce(
    void* data, int64_t count, v1::DataType dtype, v1::ReduceOp op) {
  MPI_Datatype type;
  MPI_Op mop;
  if (auto s = CheckCount(count, rank_); !s.ok()) return s;
  if (auto s = Types(dtype, op, &type, &mop); !s.ok()) return s;
  MPI_Request req;
  int rc = MPI_Iallreduce(MPI_IN_PLACE, data, static_cast<int>(count), type,
                          mop, comm_, &req);
  if (rc != MPI_SUCCESS) return MpiError(rc, "MPI_Iallreduce", rank_);
  return std::unique_ptr<Request>(new MpiRequest(req, rank_));
}

absl::StatusOr<std::unique_ptr<HostComm>> MpiComm::SplitPrefix(bool member) {
  MPI_Comm sub = MPI_COMM_NULL;
  int rc = MPI_Comm_split(comm_, member ? 0 : MPI_UNDEFINED, rank_, &sub);
  if (rc != MPI_SUCCESS) return MpiError(rc, "MPI_Comm_split", rank_);
  if (!member) return std::unique_ptr<HostComm>();
  return std::unique_ptr<HostComm>(new MpiComm(sub, /*owned=*/true));
}

void MpiComm::Abort(int code) {
  MPI_Abort(comm_, code);
  std::_Exit(code);  // MPI_Abort does not return; this is for the compiler
}

}  // namespace ringmaster
