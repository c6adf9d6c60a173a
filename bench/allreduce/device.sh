#!/usr/bin/env bash
# Runs on the 2xH200 machine (through the device tool) from the repository
# root, with .bundle/ carried: Ringmaster's all-reduce sweep and PyTorch's,
# in the same run. Writes 7 files under $OUT (the device tool returns 8 at
# most): machine.txt, ringmaster.{txt,err,jsonl,csv}, torch.{json,txt}.
set -uo pipefail
out=${OUT:-/tmp/bench-out}
mkdir -p "$out"
export LD_LIBRARY_PATH=$PWD/.bundle/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
{
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv
  nvidia-smi topo -m
  .bundle/bin/ringmaster-worker probe
} > "$out/machine.txt" 2>&1
cat "$out/machine.txt"
plan=${PLAN:-bench/allreduce/plan.yaml}
echo "== ringmaster"
time .bundle/bin/ringmaster run "$plan" --np 2 --out /tmp/rm > "$out/ringmaster.txt" 2> "$out/ringmaster.err"
echo "ringmaster exit $?"
tail -5 "$out/ringmaster.err"
cp /tmp/rm/*/results.jsonl "$out/ringmaster.jsonl"; cp /tmp/rm/*/results.csv "$out/ringmaster.csv"
echo "== torch"
time PYTHONUNBUFFERED=1 torchrun --standalone --nproc_per_node=2 bench/collectives/torch_collectives.py \
  --collectives all_reduce --dtypes float32,bfloat16 --out "$out/torch.json" > "$out/torch.txt" 2>&1
echo "torch exit $?"
tail -3 "$out/torch.txt"
grep -E "^ +(8|67108864|134217728|1073741824|8589934592) " "$out/ringmaster.txt" | head -20
