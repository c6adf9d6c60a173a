#!/usr/bin/env bash
# S3: fuzzes one libFuzzer target for SECONDS from its committed corpus
# (copied into WORK, where new inputs go; the source tree is not touched)
# and prints one FIGURE line. Fails on a crash, leak, timeout or OOM; the
# input is left under WORK/artifacts/ (keep it in fuzz/regressions/TARGET/).
#   tests/fuzz/run.sh BINARY SECONDS WORK CORPUS [MORE_SEED_DIRS...]
set -uo pipefail
bin=$1 seconds=$2 work=$3
shift 3
name=$(basename "$bin")
mkdir -p "$work/corpus" "$work/artifacts"
seeds=()
for d in "$@"; do [ -d "$d" ] && seeds+=("$d"); done
# One worker: CI has 2 cores. -timeout: an input slower than 10 s is a
# hang; -rss_limit_mb: 2 GiB per process.
"$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
  -print_final_stats=1 -artifact_prefix="$work/artifacts/" \
  "$work/corpus" "${seeds[@]}" > "$work/log" 2>&1
rc=$?
tail -25 "$work/log"
runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$work/log" | grep -o '[0-9]*$')
cov=$(grep -o 'cov: [0-9]*' "$work/log" | tail -1 | grep -o '[0-9]*')
crashes=$(find "$work/artifacts" -type f | wc -l)
verdict=PASS
if [ "$rc" -ne 0 ] || [ "$crashes" -ne 0 ] || [ -z "$runs" ]; then verdict=FAIL; fi
echo "FIGURE S3 $name: seconds=$seconds runs=${runs:-0} coverage=${cov:-0} corpus=$(find "$work/corpus" -type f | wc -l) crashes_leaks_timeouts=$crashes exit=$rc => $verdict"
[ "$verdict" = PASS ]
