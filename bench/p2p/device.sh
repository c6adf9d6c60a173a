#!/usr/bin/env bash
# Runs on the 2xH200 machine with .bundle/ carried (issue 4): the anchor
# plan twice, GEMM beside torch.matmul (gemm.sh), the full plans/p2p.yaml once, the host
# path of a pair (forced), and with SM_GEOMETRIES set the SM copy kernel's
# geometry check. Writes $OUT/bench.tgz, console.txt and summary.json.
set -uo pipefail
out=${OUT:-/tmp/bench-out}
w=/tmp/b; rm -rf "$w"; mkdir -p "$out" "$w"
export LD_LIBRARY_PATH=$PWD/.bundle/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0
R=.bundle/bin/ringmaster
run() {  # name plan [env...]
  local name="$1" plan=$2; shift 2
  local t0 t1 rc
  t0=$(date +%s.%N)
  env "$@" "$R" run "$plan" --np 2 --out "$w"/rm-"$name" > "$w"/"$name".txt 2> "$w"/"$name".err
  rc=$?
  t1=$(date +%s.%N)
  cat "$w"/rm-"$name"/*/results.jsonl > "$w"/"$name".jsonl 2>/dev/null
  echo "$name: exit $rc, wall $(python3 -c "print(round($t1-$t0,2))") s $*" | tee -a "$w"/console.txt
}
{ nvidia-smi --query-gpu=name,driver_version,pcie.link.gen.max,pcie.link.width.max,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv
  nvidia-smi topo -m; nvidia-smi nvlink -s 2>&1 | head -12; "$R" version; } > "$w"/machine.txt 2>&1
run anchors bench/p2p/plan.yaml
# GEMM: cuBLASLt and torch.matmul alternating on GPU 0 (gemm.sh).
nvidia-smi --query-gpu=index,clocks.sm,power.draw,temperature.gpu --format=csv -lms 250 > "$w"/clocks-gemm.csv &
smi=$!
DTYPES=bfloat16 ROUNDS=3 bash bench/p2p/gemm.sh "$w"/gemm
DTYPES="float16 float32 tf32 fp8_e4m3" ROUNDS=1 bash bench/p2p/gemm.sh "$w"/gemm
kill "$smi"
cat "$w"/gemm/gemm-pairs.txt >> "$w"/console.txt
nvidia-smi --query-gpu=index,clocks.sm,power.draw,temperature.gpu --format=csv -lms 250 > "$w"/clocks-anchors2.csv &
smi=$!
run anchors2 bench/p2p/plan.yaml
kill "$smi"
run full plans/p2p.yaml
run host-path bench/p2p/host-path.yaml RINGMASTER_P2P_HOST_PATH=1
grep -E "^ [0-9]|skipped" "$w"/host-path.txt >> "$w"/console.txt
if [ -n "${SM_GEOMETRIES:-}" ]; then  # e.g. SM_GEOMETRIES="1x512 2x512 4x256 1x1024"
  for g in $SM_GEOMETRIES; do
    run "sm-$g" bench/p2p/sm-tune.yaml "RINGMASTER_SM_COPY_BLOCKS_PER_SM=${g%x*}" "RINGMASTER_SM_COPY_THREADS=${g#*x}"
    grep -E "^ [0-9]" "$w/sm-$g.txt" | head -6 >> "$w"/console.txt
  done
fi
python3 bench/p2p/summarize.py "$w"/anchors.jsonl "$w"/anchors2.jsonl --gemm-dir "$w"/gemm \
  --out "$w"/summary.json | tee -a "$w"/console.txt
tail -60 "$w"/full.txt > "$w"/full-tail.txt
rm -rf "$w"/rm-* "$w"/gemm/rm-gemm
tar -C "$w" -czf "$out/bench.tgz" .
cp "$w"/console.txt "$w"/summary.json "$out/" 2>/dev/null
