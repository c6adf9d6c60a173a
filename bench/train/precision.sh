#!/usr/bin/env bash
# Runs on the 1-GPU machine with .bundle/ carried (issue 5, precision
# sweeps): bench/train/precision.yaml (numerical checks per storage type,
# the anchor shape's step per precision, a batch sweep into the memory
# limit), then PyTorch's 1-GPU step on the same shape in the same four
# precisions, then the comparison. Writes $OUT/precision.tgz, console.txt
# and summary.json.
set -uo pipefail
# shellcheck source=bench/train/env.sh
. bench/train/env.sh
train_env precision
"$R" run bench/train/precision.yaml --np 1 --timeout 400 --out "$w"/rm > "$w"/ringmaster.txt 2> "$w"/ringmaster.err
echo "ringmaster: exit $?" | tee "$w"/console.txt
cat "$w"/rm/*/results.jsonl > "$w"/ringmaster.jsonl 2>/dev/null
grep -E "^# (scaling|best|memory)|FAILED|SKIPPED" "$w"/ringmaster.txt >> "$w"/console.txt
python3 bench/train/torch_ddp.py --dtypes fp32,tf32,fp16,bf16 --shapes 8x8192x4096 \
  --out "$w"/torch1.json > "$w"/torch1.txt 2>&1
echo "torch 1 GPU: exit $?" | tee -a "$w"/console.txt
python3 bench/train/precision.py --ringmaster "$w"/ringmaster.jsonl --torch1 "$w"/torch1.json \
  --out "$w"/summary.json | tee -a "$w"/console.txt
rm -rf "$w"/rm
tar -C "$w" -czf "$out/precision.tgz" .
cp "$w"/console.txt "$w"/summary.json "$out/" 2>/dev/null
