#!/usr/bin/env bash
# Time-to-result experiment (issue 3): the fixed-20 sweep against adaptive
# sweeps with 1 ms, 500 us and 250 us sample targets, each twice, in one call.
set -uo pipefail
out=${OUT:-/tmp/ttr-out}; w=/tmp/t; rm -rf $w; mkdir -p "$out" $w
export LD_LIBRARY_PATH=$PWD/.bundle/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0
for i in 1 2; do
  for p in fixed adaptive adaptive-500us adaptive-250us; do
    .bundle/bin/ringmaster run bench/collectives/$p.yaml --np 2 --out $w/rm-$p-$i --quiet > /dev/null 2> $w/$p-$i.err
    echo "$p-$i exit $?"
    cat $w/rm-$p-$i/*/results.jsonl > $w/$p-$i.jsonl
  done
done
rm -rf $w/rm-*
python3 - $w <<'PY'
import json, sys, glob, os
for f in sorted(glob.glob(sys.argv[1] + "/*.jsonl")):
    rs = [json.loads(l) for l in open(f)]
    tot = sum(r["case_wall_s"] for r in rs)
    ci = max(r["stats"]["ci95_half_width_s"] / r["stats"]["mean_s"] for r in rs if int(r["case"]["size_bytes"]) >= 1 << 20)
    small = sum(r["case_wall_s"] for r in rs if int(r["case"]["size_bytes"]) < 1 << 20)
    print(f"{os.path.basename(f):24s} sum {tot:.3f} s  small {small:.3f} s  worst CI>=1MiB {100*ci:.2f}%")
PY
tar -C $w -czf "$out/ttr.tgz" .
