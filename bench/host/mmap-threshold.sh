#!/usr/bin/env bash
# Why the host backend's 2-rank all-reduce falls ~10x at 32 MiB: Open MPI
# allocates a temporary buffer of the message's size on every call, and
# glibc serves allocations of 32 MiB or more (its largest dynamic mmap
# threshold) with a fresh mmap, so every call page-faults and zeroes it,
# then unmaps it. Runs the same plan ROUNDS times with the defaults and with
# the threshold raised to 1 GiB (MALLOC_MMAP_THRESHOLD_, MALLOC_TRIM_THRESHOLD_:
# glibc tunables read from the environment, which local ranks inherit),
# alternating, and prints each run's busbw curve lines.
#   bash bench/host/mmap-threshold.sh [ROUNDS]     (after scripts/build)
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=${1:-3}
export PMIX_MCA_psec=^munge OMPI_MCA_rmaps_base_oversubscribe=1
out=$(mktemp -d)
for i in $(seq "$rounds"); do
  for mode in default raised; do
    env=()
    if [ "$mode" = raised ]; then
      env=(MALLOC_MMAP_THRESHOLD_=1073741824 MALLOC_TRIM_THRESHOLD_=1073741824)
    fi
    echo "== round $i, $mode"
    env "${env[@]}" build/bin/ringmaster run bench/host/mmap-threshold.yaml \
      --out "$out/$mode-$i" 2>/dev/null |
      grep -E "^ +[0-9]+ +[0-9]+ +float32|drop|peak"
  done
done
rm -rf "$out"
