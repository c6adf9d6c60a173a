#include "backends/cuda/nccl_comm.h"

#include <cstring>

#include "absl/strings/str_format.h"
#include "backends/cuda/cuda_check.h"
#include "core/status_macros.h"

namespace ringmaster {

absl::Status CreateNcclComm(Control& control, const std::string& relayed_id,
                            ncclComm_t* comm) {
  const int rank = control.rank();
  ncclUniqueId id;
  std::memset(&id, 0, sizeof id);
  if (!relayed_id.empty()) {
    if (relayed_id.size() != sizeof id) {
      return absl::InvalidArgumentError(
          absl::StrFormat("rank %d: relayed NCCL id has %d bytes, expected %d",
                          rank, relayed_id.size(), sizeof id));
    }
    std::memcpy(&id, relayed_id.data(), sizeof id);
  } else {
    if (rank == 0) RM_NCCL(ncclGetUniqueId(&id), rank);
    RM_RETURN_IF_ERROR(control.Broadcast(&id, sizeof id, 0));
  }
  RM_NCCL(ncclCommInitRank(comm, control.size(), id, rank), rank);
  return absl::OkStatus();
}

}  // namespace ringmaster
