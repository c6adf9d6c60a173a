#!/usr/bin/env python3
"""Precision figures of issue 5's sweeps from Ringmaster's JSON Lines and
torch_ddp.py's JSON (--dtypes): per storage type the numerical check's
relative error, the 1-GPU step of the anchor shape next to PyTorch's, and
per batch sweep the largest batch that ran and the first that ran out of
memory."""
import argparse
import json

NAMES = {"FLOAT32": "fp32", "TFLOAT32": "tf32", "FLOAT16": "fp16", "BFLOAT16": "bf16"}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--ringmaster", nargs="+", required=True)
    p.add_argument("--torch1")
    p.add_argument("--out", required=True)
    a = p.parse_args()
    rows = [json.loads(line) for path in a.ringmaster for line in open(path)]
    rows = [r for r in rows if r["case"].get("bench") == "BENCH_TRAIN"]
    torch1 = {}
    if a.torch1:
        for r in json.load(open(a.torch1))["results"]:
            torch1[(r["L"], r["H"], r["B"], r["dtype"])] = r["step_s"]
    s = {}
    print("%-34s %-6s %-8s %s" % ("check", "dtype", "status", "loss rel. error"))
    for r in rows:
        c, t = r["case"], r["case"]["train"]
        d = NAMES.get(c.get("dtype"), c.get("dtype"))
        if int(t.get("check_steps", 0) or 0) == 0:
            continue
        err = r.get("train", {}).get("loss_rel_error")
        print("%-34s %-6s %-8s %s" % (c["spec_name"], d, r["status"], err))
        s["check_%s_%s_rel_err" % (c["spec_name"], d)] = err
        s["check_%s_%s_status" % (c["spec_name"], d)] = r["status"]
    print("\n%-28s %-6s %10s %10s %7s %9s" % ("shape", "dtype", "rm (ms)", "torch (ms)",
                                             "ratio", "TFLOP/s"))
    for r in rows:
        c, t = r["case"], r["case"]["train"]
        if r["status"] != "OK" or int(t.get("check_steps", 0) or 0) > 0:
            continue
        if not c["spec_name"].startswith("L8_H8192_B4096"):
            continue
        d = NAMES.get(c.get("dtype"), c.get("dtype"))
        L, H, B = int(t["layers"]), int(t["hidden"]), int(t["batch"])
        step = r["stats"]["median_s"]
        master = "_master" if t.get("master_weights") else ""
        tag = "dp_L%d_H%d_B%d_%s%s" % (L, H, B, d, master)
        s[tag + "_step1_ms"] = round(step * 1e3, 3)
        s[tag + "_tflops"] = round(r["train"]["tflops_per_rank"], 1)
        ref = torch1.get((L, H, B, d)) if not master else None
        ratio = step / ref if ref else None
        if ratio:
            s[tag + "_step1_ratio_vs_torch"] = round(ratio, 4)
            s[tag + "_torch_step1_ms"] = round(ref * 1e3, 3)
        print("%-28s %-6s %10.3f %10s %7s %9.1f" % (
            c["spec_name"], d, step * 1e3, "%.3f" % (ref * 1e3) if ref else "-",
            "%.3f" % ratio if ratio else "-", r["train"]["tflops_per_rank"]))
    fit = {}
    for r in rows:
        c, t = r["case"], r["case"]["train"]
        if not c["spec_name"].endswith("_batch"):
            continue
        d = NAMES.get(c.get("dtype"), c.get("dtype"))
        f = fit.setdefault((c["spec_name"], d), {"ran": 0, "oom": None, "best": None})
        b = int(t["batch"])
        if r["status"] == "OK":
            f["ran"] = max(f["ran"], b)
            sps = r["train"]["samples_per_s"]
            if not f["best"] or sps > f["best"][1]:
                f["best"] = (b, sps)
        elif "out of memory" in r.get("failure", {}).get("detail", ""):
            f["oom"] = b if f["oom"] is None else min(f["oom"], b)
    print()
    for (name, d), f in fit.items():
        s["%s_%s_largest_batch" % (name, d)] = f["ran"]
        s["%s_%s_first_oom_batch" % (name, d)] = f["oom"]
        if f["best"]:
            s["%s_%s_best_batch" % (name, d)] = f["best"][0]
            s["%s_%s_best_samples_per_s" % (name, d)] = round(f["best"][1], 1)
        print("%s %s: largest batch that ran %d, first out of memory %s, best %s" % (
            name, d, f["ran"], f["oom"], f["best"]))
    json.dump(s, open(a.out, "w"), indent=1, sort_keys=True)


if __name__ == "__main__":
    main()
