#!/usr/bin/env bash
# Runs on the 1-GPU machine with .bundle/ carried (issue 5): the pipelined
# schedule's numerical checks and its 1-GPU steps beside DDP's schedule
# (bench/train/one-gpu.yaml),
# then PyTorch's 1-GPU step on the same shapes. Writes $OUT/one-gpu.tgz
# and console.txt.
set -uo pipefail
# shellcheck source=bench/train/env.sh
. bench/train/env.sh
train_env one
"$R" run bench/train/one-gpu.yaml --np 1 --timeout 200 --out "$w"/rm > "$w"/ringmaster.txt 2> "$w"/ringmaster.err
echo "ringmaster: exit $?" | tee "$w"/console.txt
cat "$w"/rm/*/results.jsonl > "$w"/ringmaster.jsonl 2>/dev/null
grep -E "^ +[0-9]+ +[0-9.]+ +[0-9.]+|^# scaling|FAILED|SKIPPED|loss" "$w"/ringmaster.txt >> "$w"/console.txt
python3 bench/train/torch_ddp.py --out "$w"/torch1.json > "$w"/torch1.txt 2>&1
echo "torch 1 GPU: exit $?" | tee -a "$w"/console.txt
python3 bench/train/summarize.py --ringmaster "$w"/ringmaster.jsonl --torch1 "$w"/torch1.json \
  --out "$w"/summary.json | tee -a "$w"/console.txt
rm -rf "$w"/rm
tar -C "$w" -czf "$out/one-gpu.tgz" .
cp "$w"/console.txt "$out/" 2>/dev/null
