#!/usr/bin/env bash
# The collective model calibrated on part of the measured 2xH200 all-reduce
# sweep (../allreduce/ringmaster.jsonl.gz, every other size >= 1 MiB held
# out), and its error on the held-out sizes. Runs on the CPU machine:
#   bash bench/results/h200x2/model/run.sh BIN_DIR
set -euo pipefail
bin=${1:?the folder with the ringmaster binary}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
zcat "$here/../allreduce/ringmaster.jsonl.gz" > "$work/allreduce.jsonl"
"$bin/ringmaster" predict --topology "$root/topologies/h200-nvlink-pair.yaml" \
  --calibrate "$work/allreduce.jsonl" --holdout 2 \
  --params-out "$here/params.yaml" --summary "$here/summary.json" \
  | tee "$here/calibration.txt"
