#!/usr/bin/env bash
# The coordinator at cluster scale on this machine (CPU only): simulated
# node leaders (8 ranks each) on their own connections, 128, 512 and 2,048
# nodes, each node reporting its ranks' heartbeats and 11 results once a
# second over its NodeSession stream (22,528 results/s at 2,048 nodes); the
# coordinator pinned to CPU 0, the fleet to the others. Then the 2,048-node
# point at 40 results per node (81,920/s offered), past what one
# coordinator CPU stores, to show what gives first.
# Writes bench/results/${MACHINE:-cpu}/control-plane-scale{.json,.txt,-over.json}.
#   scripts/build && bash bench/coordinator/scale.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
out=bench/results/${MACHINE:-cpu}
mkdir -p "$out"
bin=${BUILD_DIR:-build}/bin/ringmaster-loadgen
seconds=${SECONDS_STEADY:-30}
{
  echo "# $(date -u +%FT%TZ) $(uname -m), $(nproc) cores, git $(git rev-parse --short HEAD)"
  echo "\$ $bin --nodes 128,512,2048 --ranks-per-node 8 --results-per-node 11 --seconds $seconds"
  "$bin" --nodes 128,512,2048 --ranks-per-node 8 --results-per-node 11 \
    --seconds "$seconds" --json "$out/control-plane-scale.json" || true
  echo
  echo "\$ $bin --nodes 2048 --ranks-per-node 8 --results-per-node 40 --seconds $seconds"
  "$bin" --nodes 2048 --ranks-per-node 8 --results-per-node 40 \
    --seconds "$seconds" --json "$out/control-plane-scale-over.json" || true
} | tee "$out/control-plane-scale.txt"
