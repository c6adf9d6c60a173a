// One NCCL communicator over the ranks of a Control: the unique id comes
// from rank 0 through the control channel, or is `relayed_id` (bytes of
// NewNcclUniqueId(), which every rank already has in bootstrap mode).
// Collective: every rank of `control` calls it. Shared by the collective
// backend and the trainer.
#ifndef RINGMASTER_BACKENDS_CUDA_NCCL_COMM_H_
#define RINGMASTER_BACKENDS_CUDA_NCCL_COMM_H_

#include <nccl.h>

#include <string>

#include "absl/status/status.h"
#include "backends/backend.h"

namespace ringmaster {

absl::Status CreateNcclComm(Control& control, const std::string& relayed_id,
                            ncclComm_t* comm);

}  // namespace ringmaster

#endif  // RINGMASTER_BACKENDS_CUDA_NCCL_COMM_H_
