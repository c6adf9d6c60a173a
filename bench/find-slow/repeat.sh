#!/usr/bin/env bash
# The bad-node finder on a noisy host: one run per split/confirmation test
# (repeat 1) against the median of up to three (repeat 3), side by side in one
# run. 8 host ranks; in each trial one rank (in turn) is slowed 4x by the
# fault hook, and a second run has no slow rank. SPINNERS busy processes
# share the cores with the ranks (the noise).
#   bench/find-slow/repeat.sh [TRIALS=8] [SPINNERS=2] [SLOW_RATIO=0.8]
# Prints, per repeat: the slow rank confirmed, runs without a slow rank
# that confirm nobody, healthy ranks confirmed (false alarms), pair test
# runs per job, and the runs the same verdicts would take if every split
# and confirmation test ran `repeat` times (a test stops once most of its
# runs agree: core/find_slow.h).
set -euo pipefail
trials=${1:-8}
spinners=${2:-2}
ratio=${3:-0.8}
root=$(cd "$(dirname "$0")/../.." && pwd)
bin="$root/build/bin"
work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2> /dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
export PMIX_MCA_psec=${PMIX_MCA_psec:-^munge}
export OMPI_MCA_rmaps_base_oversubscribe=1
for r in 1 3; do
  cat > "$work/plan$r.yaml" << PLAN
name: find-slow-repeat-$r
cases:
  - name: find_slow
    bench: find_slow
    backend: host
    sizes: [4MiB]
    slow_ratio: $ratio
    repeat: $r
    timing: {warmup: 1, iters: 4, min_samples: 5, max_samples: 7}
PLAN
done
for ((i = 0; i < spinners; i++)); do
  (while :; do :; done) &
  pids+=($!)
done
# Prints "slow_members confirmed pair_runs tests full" of a run ("error"
# when the job left no result); full: the runs the same verdict takes when
# every split and confirmation test runs `repeat` times (no early stop).
figures() {
  python3 - "$1" << 'PY'
import glob, json, sys
try:
  r = json.loads(open(glob.glob(sys.argv[1] + "/*/results.jsonl")[0]).readline())
  f = r["find_slow"]
except (IndexError, OSError, ValueError, KeyError):  # the job failed
  print("error - 0 0 0")
  sys.exit(0)
tests = f.get("tests", [])
first = sum(1 for t in tests if t.get("phase") == "pairs")
later = {(t.get("phase"), t.get("a", 0), t.get("b", 0))
         for t in tests if t.get("phase") != "pairs"}
print(",".join(map(str, f.get("slow", []))) or "-",
      ",".join("1" if c else "0" for c in f.get("confirmed", [])) or "-",
      f.get("pair_runs", 0), len(tests), first + f.get("repeat", 1) * len(later))
PY
}
echo "# $(date -u +%FT%TZ) git $(git -C "$root" rev-parse --short HEAD)" \
  "trials $trials, spinners $spinners, slow_ratio $ratio, $(nproc) cores"
declare -A hit wrong tests full clean
for r in 1 3; do hit[$r]=0 wrong[$r]=0 tests[$r]=0 full[$r]=0 clean[$r]=0; done
for ((t = 0; t < trials; t++)); do
  slow=$((t % 8))
  for r in 1 3; do  # interleaved: both see the same load
    out="$work/s$t-$r"
    RINGMASTER_FAULT="slow:rank=$slow:factor=4" "$bin/ringmaster" run \
      "$work/plan$r.yaml" --np 8 --quiet --out "$out" > /dev/null 2>&1 || true
    read -r named conf _ all each < <(figures "$out")
    # The slow rank confirmed (the job fails naming it), and healthy ranks
    # confirmed (false alarms: they fail a job too). A rank named but not
    # confirmed fails nothing.
    ok=0 fa=0
    IFS=, read -ra n_arr <<< "$named"
    IFS=, read -ra c_arr <<< "$conf"
    for k in "${!n_arr[@]}"; do
      [ "${c_arr[$k]:-0}" = "1" ] || continue
      if [ "${n_arr[$k]}" = "$slow" ]; then ok=1; else fa=$((fa + 1)); fi
    done
    hit[$r]=$((hit[$r] + ok)) wrong[$r]=$((wrong[$r] + fa))
    tests[$r]=$((tests[$r] + all)) full[$r]=$((full[$r] + each))
    echo "trial $t repeat $r slow rank $slow: named $named (confirmed $conf), $all runs (every test repeated: $each)"
    out="$work/n$t-$r"
    "$bin/ringmaster" run "$work/plan$r.yaml" --np 8 --quiet --out "$out" \
      > /dev/null 2>&1 || true
    read -r named conf _ all each < <(figures "$out")
    nf=0
    IFS=, read -ra c_arr <<< "$conf"
    for c in "${c_arr[@]}"; do [ "$c" = "1" ] && nf=$((nf + 1)); done
    [ "$nf" -eq 0 ] && [ "$named" != error ] && clean[$r]=$((clean[$r] + 1))
    wrong[$r]=$((wrong[$r] + nf))
    tests[$r]=$((tests[$r] + all)) full[$r]=$((full[$r] + each))
    echo "trial $t repeat $r no slow rank: named $named (confirmed $conf), $all runs (every test repeated: $each)"
  done
done
echo
echo "| repeat | slow rank confirmed | runs without a slow rank confirming nobody | healthy ranks confirmed slow (all runs) | pair test runs per job | the same verdicts with every test repeated |"
echo "|---|---|---|---|---|---|"
for r in 1 3; do
  echo "| $r | ${hit[$r]} of $trials | ${clean[$r]} of $trials | ${wrong[$r]} | $(python3 -c "print(round(${tests[$r]} / (2 * $trials), 1))") | $(python3 -c "print(round(${full[$r]} / (2 * $trials), 1))") |"
done
