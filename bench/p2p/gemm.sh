#!/usr/bin/env bash
# cuBLASLt (Ringmaster) beside torch.matmul on GPU 0, alternating A B A B so
# both meet the same thermal and power state (an H200 at its power cap
# moves by 10-20% with what ran just before). For each type: torch, then
# Ringmaster, ROUNDS times. Writes gemm-*.jsonl, torch-*.json and
# gemm-pairs.txt under $1.
set -uo pipefail
w="$1"; mkdir -p "$w"
R=.bundle/bin/ringmaster
for dt in ${DTYPES:-bfloat16 float16 float32 tf32 fp8_e4m3}; do
  for i in $(seq 1 "${ROUNDS:-2}"); do
    python3 bench/p2p/torch_gemm.py --dtypes "$dt" --out "$w"/torch-"$dt"-"$i".json > "$w"/torch-"$dt"-"$i".txt 2>&1
    sed "s/dtypes: \[bfloat16\]/dtypes: [$dt]/" bench/p2p/gemm.yaml > "$w"/gemm-"$dt".yaml
    "$R" run "$w"/gemm-"$dt".yaml --np 1 --out "$w"/rm-gemm --quiet > "$w"/gemm-"$dt"-"$i".txt 2>&1
    # The newest job folder: this round's.
    latest=$(find "$w"/rm-gemm -mindepth 1 -maxdepth 1 -type d -printf '%T@ %p\n' | sort -n | tail -1 | cut -d' ' -f2-)
    cat "$latest"/results.jsonl > "$w"/gemm-"$dt"-"$i".jsonl
    python3 - "$w" "$dt" "$i" <<'PY' | tee -a "$w"/gemm-pairs.txt
import json, sys
w, dt, i = sys.argv[1:]
t = json.load(open(f"{w}/torch-{dt}-{i}.json")).get(dt, {}).get("tflops", 0)
r = json.loads(open(f"{w}/gemm-{dt}-{i}.jsonl").readline())
print(f"{dt} round {i}: torch {t:.1f} ringmaster {r['tflops']:.1f} ratio {r['tflops'] / t if t else 0:.3f} "
      f"rel_error {r['rel_error']:.2e} {r['path']}")
PY
  done
done
