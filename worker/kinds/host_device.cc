// Host<->device copies (bench: host_device): pinned or pageable host
// memory to and from a GPU, through the copy engines or SM copies.
#include "worker/kinds/node_bench_kind.h"

namespace ringmaster {
namespace {

class HostDeviceKind : public NodeBenchKind {};

RINGMASTER_REGISTER_KIND("host_device", HostDeviceKind);

}  // namespace
}  // namespace ringmaster
