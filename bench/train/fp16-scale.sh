#!/usr/bin/env bash
# Runs on the 1-GPU machine with .bundle/ carried (issue 5): is PyTorch's
# float16 step faster only because its gradients underflow to zero (no
# loss scale: mean(out^2)'s gradient is ~1e-10 at L8 H8192 B4096, under
# float16's smallest subnormal), so backward's GEMMs multiply zeros and
# draw less power under the 700 W cap? PyTorch and Ringmaster in float16
# with the auto loss scale and with none, bfloat16 beside, twice in
# alternating order, with the GPU's SM clock and power sampled every
# 100 ms during each run. Writes $OUT/fp16-scale/.
set -uo pipefail
# shellcheck source=bench/train/env.sh
. bench/train/env.sh
train_env fp16-scale
o=$out/fp16-scale
mkdir -p "$o"
sampled() {  # tag, command...: runs the command with the GPU sampled
  local tag=$1
  shift
  nvidia-smi --query-gpu=clocks.sm,power.draw --format=csv,noheader,nounits -lms 100 \
    > "$w/smi-$tag.csv" 2>/dev/null &
  local smi=$!
  "$@" > "$w/$tag.txt" 2>&1
  kill "$smi" 2>/dev/null
  wait "$smi" 2>/dev/null
}
torch_run() {  # tag, loss scale, dtypes
  sampled "$1" python3 bench/train/torch_ddp.py --dtypes "$3" --shapes 8x8192x4096 \
    --loss-scale "$2" --out "$w/$1.json"
}
rm_run() {  # tag
  sampled "$1" "$R" run bench/train/fp16-scale.yaml --np 1 --timeout 120 --out "$w/$1"
  cat "$w/$1"/*/results.jsonl > "$w/$1.jsonl"
}
torch_run torch-unscaled-1 1 fp16; rm_run rm-1; torch_run torch-scaled-1 auto fp16,bf16
torch_run torch-scaled-2 auto fp16,bf16; rm_run rm-2; torch_run torch-unscaled-2 1 fp16
python3 - "$w" bench/train/rows.py <<'PY' | tee "$o"/fp16-scale.txt
import glob, os, subprocess, sys
w = sys.argv[1]
def smi(tag):
    rows = []
    for line in open(os.path.join(w, "smi-%s.csv" % tag)):
        try:
            rows.append([float(v) for v in line.split(",")])
        except ValueError:
            pass
    busy = [r for r in rows if r[1] > 300]  # samples while the GEMMs ran
    if not busy:
        return "no busy samples"
    return "busy samples %d: SM clock mean %.0f MHz, power mean %.0f W" % (
        len(busy), sum(r[0] for r in busy) / len(busy), sum(r[1] for r in busy) / len(busy))
rows = sys.argv[2]
for kind, pattern, cut in (("torch", "/torch-*.json", 5), ("ringmaster", "/rm-*.jsonl", 6)):
    for path in sorted(glob.glob(w + pattern)):
        tag = os.path.basename(path)[:-cut]
        sys.stdout.flush()
        subprocess.run([sys.executable, rows, kind, tag, path], check=True)
        print("%-18s %s" % ("", smi(tag)))
PY
cp "$w"/machine.txt "$w"/rm-1.txt "$w"/rm-2.txt "$o"/
