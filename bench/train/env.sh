# Sourced by the bench/train scripts on the GPU machine (with .bundle/
# carried): `train_env NAME` sets out ($OUT, where results go back), w (a
# fresh /tmp/NAME work folder), R (the bundled ringmaster), the library
# path and NCCL_NVLS_ENABLE=0, and records the GPUs' clocks, power and
# temperature in $w/machine.txt.
# shellcheck shell=bash
# The variables are for the scripts that source this file.
# shellcheck disable=SC2034
train_env() {
  out=${OUT:-/tmp/bench-out}
  w=/tmp/$1
  rm -rf "$w"
  mkdir -p "$out" "$w"
  export LD_LIBRARY_PATH=$PWD/.bundle/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
  export NCCL_NVLS_ENABLE=0
  R=.bundle/bin/ringmaster
  nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv \
    > "$w"/machine.txt 2>&1
}
