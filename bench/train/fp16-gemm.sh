#!/usr/bin/env bash
# Runs on the 1-GPU machine with .bundle/ carried, after building the
# experiment into it (bench/experiments/README.md, fp16_gemm): which GEMM
# kernels make PyTorch's float16 step faster than Ringmaster's (issue 5)?
# 1. every cuBLASLt candidate and cublasGemmEx for the step's three GEMMs,
#    with CUDA 13.0's cuBLAS and with PyTorch's;
# 2. PyTorch's profiler naming the kernels of its step and of those calls;
# 3. Ringmaster's float16/bfloat16 step with CUDA's cuBLAS, PyTorch's, CUDA's.
# Writes $OUT/fp16-gemm/.
set -uo pipefail
# shellcheck source=bench/train/env.sh
. bench/train/env.sh
train_env fp16-gemm
o=$out/fp16-gemm
mkdir -p "$o"
cp "$w"/machine.txt "$o"/machine-before.txt
# The folder of the libcublasLt that PyTorch loads.
tdir=$(python3 -c 'import torch
torch.ones(8, 8, device="cuda") @ torch.ones(8, 8, device="cuda")
import os
print(next(os.path.dirname(l.split()[-1]) for l in open("/proc/self/maps") if "libcublasLt" in l))')
echo "PyTorch's cuBLAS: $tdir" | tee "$o"/libraries.txt
ls -l "$tdir" >> "$o"/libraries.txt 2>&1
ls -l /usr/local/cuda/lib64/libcublas* >> "$o"/libraries.txt 2>&1
LD_LIBRARY_PATH=/usr/local/cuda/lib64 .bundle/bin/fp16_gemm > "$o"/candidates-cuda.txt 2>&1
LD_LIBRARY_PATH=$tdir .bundle/bin/fp16_gemm > "$o"/candidates-torch.txt 2>&1
python3 bench/experiments/fp16_gemm.py .bundle/exp/libfp16_gemm.so > "$o"/kernels.txt 2>&1
rm_step() {  # tag, cuBLAS folder
  LD_LIBRARY_PATH=$PWD/.bundle/lib:$2:/usr/local/cuda/lib64 \
    "$R" run bench/train/fp16-bf16.yaml --np 1 --timeout 120 --out "$w/rm-$1" > "$w/rm-$1.txt" 2>&1
  python3 bench/train/rows.py ringmaster "$1" "$w"/rm-"$1"/*/results.jsonl >> "$o"/ringmaster-steps.txt
}
rm_step cuda-1 /usr/local/cuda/lib64
rm_step torch-1 "$tdir"
rm_step cuda-2 /usr/local/cuda/lib64
rm_step torch-2 "$tdir"
cat "$o"/ringmaster-steps.txt
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv > "$o"/machine-after.txt 2>&1
