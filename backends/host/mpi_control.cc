#include "backends/host/mpi_control.h"

#include <climits>

#include "absl/strings/str_format.h"

namespace ringmaster {

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

MpiControl::MpiControl(MPI_Comm comm) : comm_(comm) {
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
}

absl::Status MpiControl::Barrier() {
  return MpiError(MPI_Barrier(comm_), "MPI_Barrier", rank_);
}

absl::StatusOr<double> MpiControl::Max(double value) {
  double out = 0;
  int rc = MPI_Allreduce(&value, &out, 1, MPI_DOUBLE, MPI_MAX, comm_);
  if (rc != MPI_SUCCESS) return MpiError(rc, "MPI_Allreduce(max)", rank_);
  return out;
}

absl::StatusOr<int64_t> MpiControl::Sum(int64_t value) {
  int64_t out = 0;
  int rc = MPI_Allreduce(&value, &out, 1, MPI_INT64_T, MPI_SUM, comm_);
  if (rc != MPI_SUCCESS) return MpiError(rc, "MPI_Allreduce(sum)", rank_);
  return out;
}

absl::Status MpiControl::MaxVector(std::vector<double>* values) {
  if (values->size() > INT_MAX)
    return absl::InvalidArgumentError("vector too large");
  return MpiError(MPI_Allreduce(MPI_IN_PLACE, values->data(),
                                static_cast<int>(values->size()), MPI_DOUBLE,
                                MPI_MAX, comm_),
                  "MPI_Allreduce(max vector)", rank_);
}

absl::StatusOr<std::vector<double>> MpiControl::AllGather(double value) {
  std::vector<double> out(size_);
  int rc =
      MPI_Allgather(&value, 1, MPI_DOUBLE, out.data(), 1, MPI_DOUBLE, comm_);
  if (rc != MPI_SUCCESS) return MpiError(rc, "MPI_Allgather", rank_);
  return out;
}

absl::StatusOr<std::vector<std::string>> MpiControl::AllGatherStrings(
    const std::string& value) {
  if (value.size() > INT_MAX) {
    return absl::InvalidArgumentError("string too large to gather");
  }
  int len = static_cast<int>(value.size());
  std::vector<int> lens(size_);
  int rc = MPI_Allgather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, comm_);
  if (rc != MPI_SUCCESS) return MpiError(rc, "MPI_Allgather(len)", rank_);
  std::vector<int> displs(size_);
  int64_t total = 0;
  for (int i = 0; i < size_; ++i) {
    displs[i] = static_cast<int>(total);
    total += lens[i];
  }
  if (total > INT_MAX)
    return absl::InvalidArgumentError("gathered strings too large");
  std::string all(static_cast<size_t>(total), '\0');
  rc = MPI_Allgatherv(value.data(), len, MPI_CHAR, all.data(), lens.data(),
                      displs.data(), MPI_CHAR, comm_);
  if (rc != MPI_SUCCESS) return MpiError(rc, "MPI_Allgatherv", rank_);
  std::vector<std::string> out(size_);
  for (int i = 0; i < size_; ++i) out[i] = all.substr(displs[i], lens[i]);
  return out;
}

absl::Status MpiControl::Broadcast(void* data, int64_t bytes, int root) {
  if (bytes > INT_MAX) return absl::InvalidArgumentError("broadcast too large");
  return MpiError(
      MPI_Bcast(data, static_cast<int>(bytes), MPI_BYTE, root, comm_),
      "MPI_Bcast", rank_);
}

int RanksOnHost(MPI_Comm comm) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm node;
  if (MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL,
                          &node) != MPI_SUCCESS) {
    return 1;
  }
  int local = 1;
  MPI_Comm_size(node, &local);
  MPI_Comm_free(&node);
  return local;
}

}  // namespace ringmaster
