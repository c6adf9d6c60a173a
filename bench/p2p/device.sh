#!/usr/bin/env bash
# Runs on the 2xH200 machine with .bundle/ carried (issue 4): the anchor
# plan twice, torch.matmul beside it, the full plans/p2p.yaml once, and the
# SM copy kernel's geometry check. Writes $OUT/bench.tgz and console.txt.
set -uo pipefail
out=${OUT:-/tmp/bench-out}
w=/tmp/b; rm -rf $w; mkdir -p "$out" $w
export LD_LIBRARY_PATH=$PWD/.bundle/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0
R=.bundle/bin/ringmaster
run() {  # name plan [env...]
  local name=$1 plan=$2; shift 2
  local t0=$(date +%s.%N)
  env "$@" $R run "$plan" --np 2 --out $w/rm-$name > $w/$name.txt 2> $w/$name.err
  local rc=$? t1=$(date +%s.%N)
  cat $w/rm-$name/*/results.jsonl > $w/$name.jsonl 2>/dev/null
  echo "$name: exit $rc, wall $(python3 -c "print(round($t1-$t0,2))") s $*" | tee -a $w/console.txt
}
{ nvidia-smi --query-gpu=name,driver_version,pcie.link.gen.max,pcie.link.width.max,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv
  nvidia-smi topo -m; nvidia-smi nvlink -s 2>&1 | head -12; $R version; } > $w/machine.txt 2>&1
run anchors bench/p2p/plan.yaml
nvidia-smi --query-gpu=index,clocks.sm,power.draw,temperature.gpu --format=csv -lms 250 > $w/clocks-torch.csv &
smi=$!
python3 bench/p2p/torch_gemm.py --out $w/torch_gemm.json > $w/torch.txt 2>&1
echo "torch: exit $?" | tee -a $w/console.txt
kill $smi
nvidia-smi --query-gpu=index,clocks.sm,power.draw,temperature.gpu --format=csv -lms 250 > $w/clocks-anchors2.csv &
smi=$!
run anchors2 bench/p2p/plan.yaml
kill $smi
run full plans/p2p.yaml
for g in ${SM_GEOMETRIES:-"1 512" "2 512" "4 256" "1 1024"}; do
  set -- $g
  run sm-$1x$2 bench/p2p/sm-tune.yaml RINGMASTER_SM_COPY_BLOCKS_PER_SM=$1 RINGMASTER_SM_COPY_THREADS=$2
  grep -E "^ [0-9]" $w/sm-$1x$2.txt | head -6 >> $w/console.txt
done
python3 bench/p2p/summarize.py $w/anchors.jsonl $w/anchors2.jsonl --torch $w/torch_gemm.json \
  --out $w/summary.json | tee -a $w/console.txt
tail -60 $w/full.txt > $w/full-tail.txt
rm -rf $w/rm-*
tar -C $w -czf "$out/bench.tgz" .
cp $w/console.txt $w/summary.json "$out/" 2>/dev/null
