#!/usr/bin/env bash
# On a GPU machine with .bundle/ carried (bench/make-bundle), and
# optionally .bundle-base/ (the binaries of an earlier commit's build,
# `FROM_BUILD=DIR DEST=.bundle-base bench/make-bundle`, with .bundle/'s
# libraries): every built-in kind one GPU runs (bench/gpu-checks/seams.yaml)
# through the back-end providers, the worker's probe and kind list, and,
# with a base bundle, both builds in alternating rounds (new, base, new,
# base) so that each figure's ratio new/base comes from one machine state.
# Writes $OUT/seams.txt (the table), the runs' results and logs.
set -uo pipefail
out=${OUT:-/tmp/seams-out}
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0
rounds=${ROUNDS:-2}
log() { echo "$*" | tee -a "$out/seams.txt"; }
nvidia-smi --query-gpu=name,power.limit,clocks.sm --format=csv,noheader | tee -a "$out/seams.txt"
for b in .bundle .bundle-base; do
  [ -d "$b" ] || continue
  LD_LIBRARY_PATH=$PWD/.bundle/lib:/usr/local/cuda/lib64 "$b/bin/ringmaster-worker" probe > "$out/probe$b.json" 2>&1
  log "$b probe: $(cat "$out/probe$b.json")"
done
LD_LIBRARY_PATH=$PWD/.bundle/lib:/usr/local/cuda/lib64 .bundle/bin/ringmaster-worker kinds | tr '\n' ' ' | sed 's/^/kinds: /' | tee -a "$out/seams.txt"
echo | tee -a "$out/seams.txt"
for round in $(seq "$rounds"); do
  for b in .bundle .bundle-base; do
    [ -d "$b" ] || continue
    name=${b#.}-r$round
    start=$SECONDS
    LD_LIBRARY_PATH=$PWD/.bundle/lib:/usr/local/cuda/lib64 "$b/bin/ringmaster" run \
      bench/gpu-checks/seams.yaml --np 1 --out "/tmp/seams-$name" --quiet \
      > "$out/$name.txt" 2> "$out/$name.err"
    code=$?
    log "$name: exit $code in $((SECONDS - start)) s; $(grep -E "^# results" "$out/$name.txt")"
    cat /tmp/seams-"$name"/*/results.jsonl > "$out/$name.jsonl" 2>/dev/null
  done
done
python3 - "$out" <<'PY' | tee -a "$out/seams.txt"
import glob, json, os, statistics, sys
out = sys.argv[1]
def figure(r):
    c = r.get("case", {})
    b = c.get("bench", "BENCH_COLLECTIVE")
    if b == "BENCH_TRAIN":
        return r.get("stats", {}).get("median_s", 0) * 1e3, "step ms"
    if b == "BENCH_GEMM":
        return r.get("tflops", 0), "TFLOP/s"
    if b == "BENCH_LATENCY":
        return r.get("latency_ns", 0), "ns"
    if b == "BENCH_COLLECTIVE":
        return r.get("stats", {}).get("median_s", 0) * 1e6, "us"
    return r.get("bandwidth_gbps", 0), "GB/s"
def key(r):
    c = r.get("case", {})
    return "%s %s %s %s %s" % (c.get("spec_name"), c.get("dtype", ""), c.get("size_bytes", ""),
                               c.get("direction", ""), c.get("in_place", ""))
runs = {}
for f in sorted(glob.glob(os.path.join(out, "*-r*.jsonl"))):
    build = os.path.basename(f).split("-r")[0]
    for line in open(f):
        r = json.loads(line)
        k = key(r)
        v, unit = figure(r)
        e = runs.setdefault(k, {"unit": unit, "status": set()})
        e.setdefault(build, []).append(v)
        e["status"].add(r.get("status"))
        if r.get("case", {}).get("bench") == "BENCH_TRAIN":
            e["loss_check"] = r.get("train", {}).get("loss_rel_error", None)
print("%-44s %8s %12s %12s %8s %s" % ("case", "unit", "new", "base", "new/base", "status"))
for k, e in runs.items():
    new = statistics.median(e["bundle"]) if e.get("bundle") else float("nan")
    base = statistics.median(e["bundle-base"]) if e.get("bundle-base") else float("nan")
    ratio = new / base if base == base and base else float("nan")
    extra = " loss rel err %.2g" % e["loss_check"] if e.get("loss_check") not in (None, -1) else ""
    print("%-44s %8s %12.4g %12.4g %8.3f %s%s" % (k[:44], e["unit"], new, base, ratio,
                                              ",".join(sorted(map(str, e["status"]))), extra))
PY
