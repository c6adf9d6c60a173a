#!/usr/bin/env python3
"""Flat figures for issue 4 from Ringmaster JSON Lines (one or more runs) and
torch_gemm.py's JSON, beside the nvbandwidth / PyTorch anchors.

Each figure is the mean over GPU pairs (or GPUs) of one run's values; with
several runs the best run's figure is reported and every run's is listed, so
the spread is visible. Usage:
  summarize.py run1.jsonl [run2.jsonl ...] --gemm-dir DIR --out summary.json

GEMM comes from gemm.sh's DIR: for each type and round, Ringmaster's
cuBLASLt rate over torch.matmul's measured just before it on the same GPU;
the median round's ratio is reported.
"""
import glob
import os
import argparse
import json
import statistics

# nvbandwidth v0.8 / PyTorch 2.11 on the same machine (../shared/anchors).
ANCHORS = {
    "p2p_ce_write_gbps": 396.4, "p2p_ce_read_gbps": 393.9,
    "p2p_ce_bidir_write_total_gbps": 783.7, "p2p_ce_bidir_read_total_gbps": 778.9,
    "p2p_sm_write_gbps": 369.9, "p2p_sm_read_gbps": 376.2,
    "p2p_sm_bidir_write_total_gbps": 731.4, "p2p_sm_bidir_read_total_gbps": 676.9,
    "h2d_ce_gbps": 55.5, "d2h_ce_gbps": 55.3, "h2d_sm_gbps": 51.4, "d2h_sm_gbps": 52.6,
    "hbm_copy_ce_gbps": 2094, "p2p_latency_ns": 829, "h2d_latency_ns": 1186,
    "gemm_bf16_8192_tflops": 795,
}
LOWER_IS_BETTER = {"p2p_latency_ns", "h2d_latency_ns"}


def figures(path):
    vals = {}
    for line in open(path):
        r = json.loads(line)
        c = r["case"]
        if r["status"] != "OK" or c.get("bench", "BENCH_COLLECTIVE") == "BENCH_COLLECTIVE":
            continue
        b, m = c["bench"], c["method"]
        key = None
        if b == "BENCH_P2P" and c["pattern"] == "PAIR":
            key = "p2p_%s_%s%s_gbps" % ({"COPY_ENGINE": "ce", "SM": "sm"}[m],
                                        "bidir_" if c["bidirectional"] else "",
                                        c["direction"].lower() + ("_total" if c["bidirectional"] else ""))
            v = r["bandwidth_gbps"]
        elif b == "BENCH_HOST_DEVICE" and c["host_memory"] in ("PINNED", "HOST_MEMORY_UNSPECIFIED") \
                and c["pattern"] == "ONE_RANK" and not c["bidirectional"]:
            key = "%s_%s_gbps" % ("h2d" if c["direction"] == "TO_DEVICE" else "d2h",
                                  {"COPY_ENGINE": "ce", "SM": "sm"}[m])
            v = r["bandwidth_gbps"]
        elif b == "BENCH_LATENCY" and m == "SM":
            key = "p2p_latency_ns" if c["latency_path"] == "PEER" else "h2d_latency_ns"
            v = r["latency_ns"]
        elif b == "BENCH_LOCAL_COPY" and c["pattern"] == "ONE_RANK":
            key = "hbm_copy_%s_gbps" % {"COPY_ENGINE": "ce", "SM": "sm"}[m]
            v = r["bandwidth_gbps"]
        elif b == "BENCH_GEMM" and c["pattern"] == "ONE_RANK":
            g = c["gemm"]
            key = "gemm_%s_%sx%sx%s_tflops" % (c["dtype"].lower(), g["m"], g["n"], g["k"])
            v = r["tflops"]
        if key:
            vals.setdefault(key, []).append(v)
    return {k: statistics.mean(v) for k, v in vals.items()}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("runs", nargs="+")
    p.add_argument("--gemm-dir")
    p.add_argument("--out", required=True)
    a = p.parse_args()
    runs = [figures(f) for f in a.runs]
    summary, per_run = {}, {}
    for k in sorted(set().union(*runs)):
        vs = [r[k] for r in runs if k in r]
        per_run[k] = [round(v, 2) for v in vs]
        summary[k] = round(min(vs) if k in LOWER_IS_BETTER else max(vs), 2)
    if a.gemm_dir:
        short = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32", "tf32": "tf32",
                 "fp8_e4m3": "fp8"}
        for dt, sh in short.items():
            ratios, ours, theirs = [], [], []
            for path in sorted(glob.glob(os.path.join(a.gemm_dir, "gemm-%s-*.jsonl" % dt))):
                i = path.rsplit("-", 1)[1].split(".")[0]
                r = json.loads(open(path).readline())
                t = json.load(open(os.path.join(a.gemm_dir, "torch-%s-%s.json" % (dt, i))))
                if r["status"] != "OK" or "tflops" not in t.get(dt, {}):
                    continue
                ours.append(r["tflops"])
                theirs.append(t[dt]["tflops"])
                ratios.append(r["tflops"] / t[dt]["tflops"])
            if ratios:
                k = sorted(range(len(ratios)), key=lambda j: ratios[j])[len(ratios) // 2]
                summary["gemm_%s_8192_tflops" % sh] = round(ours[k], 1)
                summary["torch_%s_8192_tflops" % sh] = round(theirs[k], 1)
                summary["gemm_%s_8192_ratio_vs_torch" % sh] = round(ratios[k], 4)
                per_run["gemm_%s_8192_ratio_vs_torch" % sh] = [round(x, 4) for x in ratios]
    out = {"summary": summary, "per_run": per_run, "anchors": ANCHORS, "vs_anchor": {}}
    print("%-34s %10s %10s %7s" % ("figure", "ringmaster", "anchor", "ratio"))
    for k, v in summary.items():
        if k in ANCHORS:
            ratio = ANCHORS[k] / v if k in LOWER_IS_BETTER else v / ANCHORS[k]
            out["vs_anchor"][k] = round(ratio, 4)
            print("%-34s %10.1f %10.1f %7.3f" % (k, v, ANCHORS[k], ratio))
        else:
            print("%-34s %10.2f" % (k, v))
    json.dump(out, open(a.out, "w"), indent=1, sort_keys=True)


if __name__ == "__main__":
    main()
