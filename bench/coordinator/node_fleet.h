// The coordinator under a simulated fleet of nodes (ringmaster-loadgen
// --nodes): each simulated node is what a node leader sends, over a
// channel (one connection) of its own, on gRPC's callback API, so one
// process drives thousands of nodes with a few threads.
#ifndef RINGMASTER_BENCH_COORDINATOR_NODE_FLEET_H_
#define RINGMASTER_BENCH_COORDINATOR_NODE_FLEET_H_

#include <string>

#include "nlohmann/json.hpp"
#include "ringmaster/v1/result.pb.h"

namespace ringmaster {

struct FleetArgs {
  int nodes = 128;
  int ranks_per_node = 8;
  double seconds = 30;          // the steady phase
  double interval_s = 1;        // each node's heartbeat and report period
  int results_per_report = 12;  // a node's results per period
  bool peers = false;           // rendezvous answers list every rank's address
  std::string plan;             // submitted once, nodes x ranks_per_node ranks
  std::string data_dir;         // the coordinator's data folder
  bool pin = true;              // coordinator on CPU 0, the fleet on the others
};

// A result as a rank reports it (a realistic size: the case, statistics,
// bandwidth), attempt 1, with its idempotency key.
v1::Result LoadResult(const std::string& job_id, int rank, int64_t seq,
                      int nranks);

// One point: starts `ringmaster serve`, registers and meets every node,
// runs the steady phase, stops the coordinator and checks the store.
// The figures as JSON (see docs/scale.md for their meaning).
nlohmann::json RunNodeFleet(const FleetArgs& args);

}  // namespace ringmaster

#endif  // RINGMASTER_BENCH_COORDINATOR_NODE_FLEET_H_
