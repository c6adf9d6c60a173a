// Peer-to-peer copies (bench: p2p): rank-to-rank bandwidth over copy engines
// or SM copies, write or read, one way or both, pair, all-to-one or
// one-to-all (CUDA IPC between GPUs; MPI between host ranks).
#include "worker/kinds/node_bench_kind.h"

namespace ringmaster {
namespace {

class P2pKind : public NodeBenchKind {};

RINGMASTER_REGISTER_KIND("p2p", P2pKind);

}  // namespace
}  // namespace ringmaster
