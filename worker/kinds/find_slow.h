// The bad-node finder (bench: find_slow, core/find_slow.h): pair tests
// chosen as the search goes, that name the slow member (rank or node) and
// confirm it with a re-test.
#ifndef RINGMASTER_WORKER_KINDS_FIND_SLOW_H_
#define RINGMASTER_WORKER_KINDS_FIND_SLOW_H_

#include <string>
#include <vector>

#include "backends/node_bench.h"
#include "comm/control.h"
#include "ringmaster/v1/result.pb.h"

namespace ringmaster {

// Each test is a P2P pair case of `c`'s method, direction, traffic, size
// and timing between two members' ranks (members: ranks, or nodes by
// `hosts[rank]` with the node's first rank). Every rank calls it; rank 0's
// result is complete: the tests, the reference and the named members. A
// confirmed slow member fails the result (BELOW_FLOOR, naming its rank and
// host) so a health check exits non-zero.
v1::Result RunFindSlow(const v1::Case& c, NodeBench& bench, Control& control,
                       const std::vector<std::string>& hosts);

}  // namespace ringmaster

#endif  // RINGMASTER_WORKER_KINDS_FIND_SLOW_H_
