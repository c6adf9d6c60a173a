#!/usr/bin/env bash
# On a GPU machine with .bundle/ carried: `ringmaster run --rounds 3
# --nccl-algorithms` over a plan of two variants (NCCL_ALGO=Ring, =Tree).
# Expects one tuning probe per variant (2, not 6), and with 2 or more GPUs
# every labelled result carrying its own variant's algorithm. Writes
# $OUT/probe-rounds.txt and the run's stderr.
set -uo pipefail
out=${OUT:-/tmp/probe-rounds-out}
mkdir -p "$out"
export LD_LIBRARY_PATH=$PWD/.bundle/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0
gpus=$(nvidia-smi -L | wc -l)
res=/tmp/probe-rounds
rm -rf "$res"
.bundle/bin/ringmaster run bench/gpu-checks/probe-rounds.yaml --np "$gpus" \
  --rounds 3 --nccl-algorithms --quiet --out "$res" \
  > "$out/probe-rounds.stdout" 2> "$out/probe-rounds.stderr"
rc=$?
{
  echo "GPUs: $gpus, exit $rc"
  echo "probes: $(grep -c 'choices recorded' "$out/probe-rounds.stderr") (expect 2)"
  grep 'choices recorded' "$out/probe-rounds.stderr"
  python3 - "$res" << 'PY'
import glob, json, sys, collections
seen = collections.Counter()
for f in glob.glob(sys.argv[1] + "/*/results.jsonl"):
  for line in open(f):
    r = json.loads(line)
    c = r.get("case", {})
    seen[(c.get("variant", ""), c.get("size_bytes", "?"),
          r.get("nccl_algorithm") or "-")] += 1
for (v, size, algo), n in sorted(seen.items()):
  print(f"variant {v} size {size}: algorithm {algo} in {n} result(s)")
PY
} | tee "$out/probe-rounds.txt"
