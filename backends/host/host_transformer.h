// The transformer training step on the host: float32, matrix products
// through OpenBLAS, the other operations as core/transformer_ops.h, split
// over dp x tp ranks of a HostComm (ParallelLayout): Megatron's column /
// row split of attention heads and MLP columns (tp; with sp the norms and
// residuals on a 1/tp share of the tokens), gradients summed over dp ranks
// (all-reduce; zero 1: reduce-scatter, a sharded optimizer and an
// all-gather of the updated weights; zero 3: weights kept sharded and
// all-gathered before each layer's forward and backward). Communication
// is blocking: the step waits for all of it. What it exists for is the
// numerics of every layout in CI, not speed.
#ifndef RINGMASTER_BACKENDS_HOST_HOST_TRANSFORMER_H_
#define RINGMASTER_BACKENDS_HOST_HOST_TRANSFORMER_H_

#include <memory>

#include "backends/transformer_trainer.h"
#include "comm/host_comm.h"

namespace ringmaster {

std::unique_ptr<TransformerTrainer> NewHostTransformer(HostComm& comm);

}  // namespace ringmaster

#endif  // RINGMASTER_BACKENDS_HOST_HOST_TRANSFORMER_H_
