// STREAM triad (bench: triad): a = b + s*c in HBM or DRAM.
#include "worker/kinds/node_bench_kind.h"

namespace ringmaster {
namespace {

class TriadKind : public NodeBenchKind {};

RINGMASTER_REGISTER_KIND("triad", TriadKind);

}  // namespace
}  // namespace ringmaster
