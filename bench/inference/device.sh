#!/usr/bin/env bash
# Runs on the 1xH200 machine with .bundle/ carried: the decode kernels',
# the inference engine's (its decode path) and the fused decode step's GPU
# tests (the step's phase timeline), the
# HBM read rate of plain loads and of the step's streaming
# (read_pattern, when the bundle has it), Ringmaster's GPU inference plan
# (bench/inference/plan.yaml: the HBM copy bandwidth, a small checked
# shape, the llama3-8b slice's batch sweep), its decode at batches 1, 2
# and 8 as the default path takes it (the variants' like-for-like
# baseline: the sweep's plan runs batches 2 and 8 a little slower), with
# the fused step's input written by a kernel before it, without the fused
# step, without dependent launches, through cuBLASLt only and
# through the matrix-vector kernels only (variants.yaml), PyTorch's
# static-cache server on the same shape (peer.py: prefill through SDPA,
# decode under torch.compile mode="reduce-overhead"), then summary.json.
# Writes $OUT/bench.tgz, console.txt and summary.json.
#   bash bench/inference/device.sh
set -uo pipefail
# shellcheck source=bench/train/env.sh
. bench/train/env.sh
train_env inference
if [ -x .bundle/bin/ringmaster_decode_kernels_test ]; then
  .bundle/bin/ringmaster_decode_kernels_test > "$w"/decode-test.txt 2>&1
  echo "decode kernels test: exit $?" | tee -a "$w"/console.txt
  grep -E "FAILED|PASSED" "$w"/decode-test.txt | head -12 >> "$w"/console.txt
fi
if [ -x .bundle/bin/ringmaster_cuda_inference_test ]; then
  .bundle/bin/ringmaster_cuda_inference_test > "$w"/engine-test.txt 2>&1
  echo "inference engine test: exit $?" | tee -a "$w"/console.txt
  grep -E "FAILED|PASSED|Failure|Describe|persistent" "$w"/engine-test.txt \
    | head -12 >> "$w"/console.txt
fi
if [ -x .bundle/bin/ringmaster_decode_step_test ]; then
  .bundle/bin/ringmaster_decode_step_test > "$w"/decode-step-test.txt 2>&1
  echo "decode step test: exit $?" | tee -a "$w"/console.txt
  grep -E "FAILED|PASSED|timeline|rel error" "$w"/decode-step-test.txt \
    >> "$w"/console.txt
fi
if [ -x .bundle/bin/read_pattern ]; then
  .bundle/bin/read_pattern > "$w"/read-pattern.txt 2>&1
  echo "read_pattern: exit $?" | tee -a "$w"/console.txt
  cat "$w"/read-pattern.txt >> "$w"/console.txt
fi
"$R" run bench/inference/plan.yaml --np 1 --timeout 500 --out "$w"/rm \
  > "$w"/ringmaster.txt 2> "$w"/ringmaster.err
echo "ringmaster: exit $?" | tee -a "$w"/console.txt
cat "$w"/rm/*/results.jsonl > "$w"/ringmaster.jsonl 2>/dev/null
{
  grep -E "^ (tp|[0-9])|FAILED|SKIPPED|skipped|objective|^#" "$w"/ringmaster.txt | head -40
  tail -3 "$w"/ringmaster.err
} >> "$w"/console.txt
for v in default FOLD=0 FUSED=0 PDL=0 GEMV=0 GEMV=1; do
  setting=()  # "default": no setting
  [ "$v" != default ] && setting=("RINGMASTER_DECODE_$v")
  env "${setting[@]}" "$R" run bench/inference/variants.yaml --np 1 \
    --timeout 200 --out "$w/rm-$v" > "$w/ringmaster-$v.txt" 2>&1
  echo "ringmaster, ${setting[*]:-default}: exit $?" | tee -a "$w"/console.txt
  cat "$w/rm-$v"/*/results.jsonl > "$w/ringmaster-$v.jsonl" 2>/dev/null
  grep -E "^ tp1|FAILED" "$w/ringmaster-$v.txt" >> "$w"/console.txt
done
PYTHONUNBUFFERED=1 timeout 300 python3 bench/inference/peer.py --layers 4 \
  --prompt 1024 --generate 256 --batch 1 8 --repeats 2 --out "$w"/torch.json \
  > "$w"/torch.txt 2>&1
echo "torch: exit $?" | tee -a "$w"/console.txt
grep -E "batch|Error|error" "$w"/torch.txt | tail -8 >> "$w"/console.txt
# The summary ends with an error line when the default plan's batch 1 did
# not run the fused step.
python3 bench/inference/summarize.py --ringmaster "$w"/ringmaster.jsonl \
  --torch "$w"/torch.json --variant default="$w"/ringmaster-default.jsonl \
  --variant input_kernel="$w"/ringmaster-FOLD=0.jsonl \
  --variant unfused="$w"/ringmaster-FUSED=0.jsonl \
  --variant no_pdl="$w"/ringmaster-PDL=0.jsonl \
  --variant cublaslt="$w"/ringmaster-GEMV=0.jsonl \
  --variant gemv="$w"/ringmaster-GEMV=1.jsonl \
  --read-pattern "$w"/read-pattern.txt --out "$w"/summary.json \
  --expect-b1-path "persistent kernel" 2>&1 | tee -a "$w"/console.txt
rm -rf "$w"/rm "$w"/rm-*
tar -C "$w" -czf "$out/bench.tgz" .
cp "$w"/console.txt "$w"/summary.json "$out/" 2>/dev/null
