#!/usr/bin/env bash
# Runs on the 2xH200 machine with .bundle/ carried (issue 5): Ringmaster's
# GPU training plan, then PyTorch on one GPU and DDP on two (bucket caps 25,
# 100, 400 MiB, static_graph), then both again in the same order (the
# power cap's drift lands on both sides; the summary keeps each side's
# faster run). Writes $OUT/bench.tgz, console.txt and summary.json.
set -uo pipefail
# shellcheck source=bench/train/env.sh
. bench/train/env.sh
train_env t
run() {  # name
  "$R" run bench/train/plan.yaml --np 2 --timeout 150 --out "$w"/rm-"$1" > "$w"/"$1".txt 2> "$w"/"$1".err
  echo "$1: exit $?" | tee -a "$w"/console.txt
  cat "$w"/rm-"$1"/*/results.jsonl > "$w"/"$1".jsonl 2>/dev/null
  grep -A4 "^# scaling" "$w"/"$1".txt | grep -v "^#ranks" >> "$w"/console.txt
  grep -E "FAILED|SKIPPED" "$w"/"$1".txt >> "$w"/console.txt
}
torch() {  # suffix
  python3 bench/train/torch_ddp.py --out "$w/torch1$1.json" > "$w/torch1$1.txt" 2>&1
  echo "torch 1 GPU$1: exit $?" | tee -a "$w"/console.txt
  torchrun --standalone --nproc_per_node=2 bench/train/torch_ddp.py --out "$w/ddp2$1.json" \
    > "$w/ddp2$1.txt" 2>&1
  echo "torch DDP 2 GPUs$1: exit $?" | tee -a "$w"/console.txt
}
run ringmaster
torch ""
run ringmaster2
torch _2
python3 bench/train/summarize.py --ringmaster "$w"/ringmaster.jsonl "$w"/ringmaster2.jsonl \
  --torch1 "$w"/torch1.json "$w"/torch1_2.json --ddp2 "$w"/ddp2.json "$w"/ddp2_2.json \
  --out "$w"/summary.json | tee -a "$w"/console.txt
rm -rf "$w"/rm-*
tar -C "$w" -czf "$out/bench.tgz" .
cp "$w"/console.txt "$w"/summary.json "$out/" 2>/dev/null
