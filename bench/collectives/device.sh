#!/usr/bin/env bash
# Runs on the 2xH200 machine with .bundle/ carried (issue 3): the collectives
# sweep and latency modes, the adaptive-vs-fixed time to result, the
# interconnect A/B plan, and PyTorch's collectives, all in one call. Writes
# $OUT/bench.tgz (every file) and $OUT/console.txt.
set -uo pipefail
out=${OUT:-/tmp/bench-out}
w=/tmp/b; rm -rf "$w"; mkdir -p "$out" "$w"
export LD_LIBRARY_PATH=$PWD/.bundle/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=.bundle/bin/ringmaster
run() {  # name plan
  local t0 t1 rc
  t0=$(date +%s.%N)
  "$R" run "$2" --np 2 --out "$w"/rm-"$1" --quiet > "$w"/"$1".txt 2> "$w"/"$1".err
  rc=$?
  t1=$(date +%s.%N)
  cat "$w"/rm-"$1"/*/results.jsonl > "$w"/"$1".jsonl
  echo "$1: exit $rc, wall $(python3 -c "print(round($t1-$t0,2))") s" | tee -a "$w"/console.txt
}
{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv
  nvidia-smi topo -m; "$R" version; } > "$w"/machine.txt 2>&1
run collectives bench/collectives/plan.yaml
run collectives2 bench/collectives/plan.yaml
run latency bench/collectives/latency.yaml
run latency2 bench/collectives/latency.yaml
run adaptive bench/collectives/adaptive.yaml
run fixed bench/collectives/fixed.yaml
run adaptive2 bench/collectives/adaptive.yaml
run fixed2 bench/collectives/fixed.yaml
run bounded bench/collectives/adaptive-bounded.yaml
run ab plans/interconnect-ab.yaml
tail -22 "$w"/ab.txt | tee -a "$w"/console.txt
for t in torch torch2; do
  PYTHONUNBUFFERED=1 torchrun --standalone --nproc_per_node=2 bench/collectives/torch_collectives.py \
    --out "$w/$t.json" --min-bytes 1048576 --dtypes float32 \
    --collectives all_reduce,all_gather,reduce_scatter,send_recv > "$w/$t.txt" 2>&1
  echo "$t: exit $?" | tee -a "$w"/console.txt
done
grep -E "^#.*timing|^ +8 " "$w"/latency.txt "$w"/latency2.txt | tee -a "$w"/console.txt
rm -rf "$w"/rm-*
tar -C "$w" -czf "$out/bench.tgz" .
cp "$w"/console.txt "$out/console.txt"
