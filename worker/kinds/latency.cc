// Latency (bench: latency): a dependent pointer chase through device, peer
// or host memory, the issue time of a small copy, or an MPI ping-pong.
#include "worker/kinds/node_bench_kind.h"

namespace ringmaster {
namespace {

class LatencyKind : public NodeBenchKind {};

RINGMASTER_REGISTER_KIND("latency", LatencyKind);

}  // namespace
}  // namespace ringmaster
