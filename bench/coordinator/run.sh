#!/usr/bin/env bash
# The coordinator's load benchmark on this machine (CPU only): 1,000
# simulated workers heartbeating and reporting once a second against one
# `ringmaster serve`, then a saturation run with 4x the results per report.
# Writes bench/results/${MACHINE:-cpu}/coordinator-load.{txt,json}.
#   scripts/build && bash bench/coordinator/run.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
out=bench/results/${MACHINE:-cpu}
mkdir -p "$out"
bin=${BUILD_DIR:-build}/bin/ringmaster-loadgen
{
  echo "# $(date -u +%FT%TZ) $(uname -m), $(nproc) cores, git $(git rev-parse --short HEAD)"
  echo "\$ $bin --workers 1000 --seconds 30 --batch 25"
  "$bin" --workers 1000 --seconds 30 --batch 25 --json "$out/coordinator-load.json"
  echo
  echo "\$ $bin --workers 1000 --seconds 30 --batch 100   # saturation"
  "$bin" --workers 1000 --seconds 30 --batch 100 --json "$out/coordinator-load-saturated.json" || true
} | tee "$out/coordinator-load.txt"
