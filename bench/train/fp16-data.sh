#!/usr/bin/env bash
# Runs on the 1-GPU machine with .bundle/ carried (issue 5): why is
# PyTorch's float16 step faster than its bfloat16 step (and than
# Ringmaster's, which are equal)? PyTorch in both precisions with its own
# data (randn inputs, Linear's init) and with Ringmaster's distributions
# (--data uniform), Ringmaster between, twice in alternating order.
# PyTorch's float16 takes Ringmaster's loss scale (torch_ddp.py's default since
# bench/results/h200x1/fp16-scale; before, its gradients were all zero).
# Writes $OUT/fp16-data.txt.
set -uo pipefail
# shellcheck source=bench/train/env.sh
. bench/train/env.sh
train_env fp16-data
torch_run() {  # data, tag
  python3 bench/train/torch_ddp.py --dtypes fp16,bf16 --shapes 8x8192x4096 --data "$1" \
    --out "$w/torch-$2.json" > "$w/torch-$2.txt" 2>&1
}
rm_run() {  # tag
  "$R" run bench/train/fp16-bf16.yaml --np 1 --timeout 120 --out "$w/rm-$1" > "$w/rm-$1.txt" 2>&1
  cat "$w"/rm-"$1"/*/results.jsonl > "$w/rm-$1.jsonl"
}
torch_run randn randn-1; rm_run 1; torch_run uniform uniform-1
torch_run uniform uniform-2; rm_run 2; torch_run randn randn-2
{ for f in "$w"/torch-*.json; do
    python3 bench/train/rows.py torch "$(basename "$f" .json)" "$f"
  done
  for f in "$w"/rm-*.jsonl; do
    python3 bench/train/rows.py ringmaster "$(basename "$f" .jsonl)" "$f"
  done; } | tee "$out"/fp16-data.txt
cat "$w"/machine.txt >> "$out"/fp16-data.txt
