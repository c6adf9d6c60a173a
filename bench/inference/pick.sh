#!/usr/bin/env bash
# For calls that ask for an H200 and may get an H100 (run from the
# repository root with .bundle/ carried, builds named as ab.sh takes them).
# On an H200: device.sh with the bundle's own build (every key of the
# inference bench for it, in $OUT), then ab.sh over VARIANTS (two rounds;
# $OUT/ab-console.txt), then the build whose b1.yaml TPOT p50 was lowest
# on average (of those whose step test passed in every round) is printed
# and written to $OUT/best.txt; where it is not "new" and its mean is at
# least 1% below new's, device.sh runs again with its worker and step
# test copied over the bundle's, into $OUT/picked/. Each device.sh gets at
# most DEVICE_LIMIT seconds (default 250).
# Elsewhere ab.sh over OTHER (default VARIANTS), three rounds.
#   VARIANTS="new a b" bash bench/inference/pick.sh
#   OTHER="new a" VARIANTS="new a b" bash bench/inference/pick.sh
set -uo pipefail
# device.sh and ab.sh set the bench environment (NCCL_NVLS_ENABLE=0 too).
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,power.limit,driver_version \
  --format=csv > "$OUT"/machine.txt
cat "$OUT"/machine.txt
limit=${DEVICE_LIMIT:-250}
# The inference bench's headline keys and test results, from a device.sh
# console.
keys() {
  grep -hE "^inference_llama3_8b_(decode_b1_hbm_share|decode_b1_ratio_vs_torch|prefill_ratio_vs_torch|best_batch_tpot_p99_30ms|b1_tpot_p50_ms|b1_torch_tpot_p50_ms) |^hbm_copy_rw|test: exit|llama3_8b_l4 timeline" "$@"
}
if ! grep -q H200 "$OUT"/machine.txt; then
  VARIANTS=${OTHER:-${VARIANTS:-new}} ROUNDS=3 bash bench/inference/ab.sh \
    > "$OUT"/ab-console.txt 2>&1
  echo "ab.sh: exit $?"
  cut -c1-250 "$OUT"/ab-console.txt
  exit 0
fi
timeout "$limit" bash bench/inference/device.sh > "$OUT"/device-console.txt 2>&1
echo "device.sh: exit $?"
keys "$OUT"/device-console.txt "$OUT"/console.txt
VARIANTS=${VARIANTS:-new} ROUNDS=2 bash bench/inference/ab.sh \
  > "$OUT"/ab-console.txt 2>&1
echo "ab.sh: exit $?"
cut -c1-250 "$OUT"/ab-console.txt
# ab.sh's "b1 V i: exit 0 (...) <b1.yaml table row>": the row's TPOT p50 is
# the tenth field from its end. A build whose step test failed in any
# round (a wrong product) is not picked, however fast.
read -r best gain < <(awk '/^step / && !/exit 0/{bad[$2]=1}
  /^b1 .*exit 0/{v=$2; t=$(NF-9); s[v]+=t; n[v]++}
  END {m=1e9; for (v in s) if (!(v in bad) && s[v]/n[v] < m) {m=s[v]/n[v]; b=v};
       g=("new" in s) ? 1 - m / (s["new"]/n["new"]) : 0; print b, g}' \
  "$OUT"/ab-console.txt)
echo "best: ${best:-none} (TPOT p50 ${gain:-0} below new's)" | tee "$OUT"/best.txt
if [ -n "${best:-}" ] && [ "$best" != new ] &&
  awk -v g="$gain" 'BEGIN {exit !(g >= 0.01)}'; then
  cp .bundle/bin/ringmaster-worker-"$best" .bundle/bin/ringmaster-worker
  cp .bundle/bin/ringmaster_decode_step_test_"$best" \
    .bundle/bin/ringmaster_decode_step_test
  mkdir -p "$OUT"/picked
  OUT=$OUT/picked timeout "$limit" bash bench/inference/device.sh \
    > "$OUT"/picked/device-console.txt 2>&1
  echo "device.sh with $best: exit $?"
  keys "$OUT"/picked/device-console.txt "$OUT"/picked/console.txt
fi
