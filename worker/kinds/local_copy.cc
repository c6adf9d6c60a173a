// Local memory bandwidth (bench: local_copy): a device-to-device copy in
// HBM (GPU) or a memcpy in DRAM (host), bytes read plus bytes written.
#include "worker/kinds/node_bench_kind.h"

namespace ringmaster {
namespace {

class LocalCopyKind : public NodeBenchKind {};

RINGMASTER_REGISTER_KIND("local_copy", LocalCopyKind);

}  // namespace
}  // namespace ringmaster
