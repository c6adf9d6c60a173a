#!/usr/bin/env python3
"""Issue 5's figures from Ringmaster's JSON Lines (one or more runs; the
faster run's step per configuration) and the PyTorch JSON of torch_ddp.py
(one or more runs each; the faster, likewise):
1-GPU step ratio vs PyTorch, 2-GPU weak-scaling efficiency, 2-GPU step ratio
vs the fastest DDP bucket variant. The bars are bfloat16's: other
precisions are left out, and so is a step whose gradients were half or more
zero (underflow: it multiplied zeros, which runs faster than training)."""
import argparse
import json
import sys

UNDERFLOWED = 0.5  # as the report's (core/training.h kGradientsUnderflowed)


def underflowed(who, what, zeros):
    if zeros is not None and zeros >= UNDERFLOWED:
        print("summarize: left out %s %s: %.1f%% of its gradient entries are zero"
              % (who, what, 100 * zeros), file=sys.stderr)
        return True
    return False


def steps(paths):
    best = {}
    for path in paths:
        for line in open(path):
            r = json.loads(line)
            c = r["case"]
            if c.get("bench") != "BENCH_TRAIN" or r["status"] != "OK":
                continue
            if c.get("dtype", "BFLOAT16") != "BFLOAT16":
                continue
            t = c["train"]
            if underflowed("Ringmaster's", c.get("spec_name", ""),
                           r.get("train", {}).get("grad_zero_fraction", 0.0)):
                continue
            # The variant: the reduction, and "_pipelined" for that schedule.
            variant = t.get("comm") or "nccl"
            if t.get("schedule") == "pipelined":
                variant += "_pipelined"
            if t.get("gemm") == "heuristic":
                variant += "_heuristic"
            key = (int(t["layers"]), int(t["hidden"]), int(t["batch"]), bool(t.get("overlap")),
                   r["nranks"], variant)
            v = r["stats"]["median_s"]
            if key not in best or v < best[key]["step_s"]:
                best[key] = {"step_s": v, "train": r["train"]}
    return best


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--ringmaster", nargs="+", required=True)
    p.add_argument("--torch1", nargs="*", default=[])
    p.add_argument("--ddp2", nargs="*", default=[])
    p.add_argument("--out", required=True)
    a = p.parse_args()
    rm = steps(a.ringmaster)
    t1 = {}
    ddp = {}
    # Several PyTorch runs: the faster per configuration, as for Ringmaster.
    def peer(path):
        for r in json.load(open(path))["results"]:
            what = "%s L%d H%d B%d" % (r.get("dtype", "bf16"), r["L"], r["H"], r["B"])
            if r.get("dtype", "bf16") == "bf16" and not underflowed(
                    "PyTorch's", what, r.get("grad_zero_fraction")):
                yield r
    for path in a.torch1:
        for r in peer(path):
            k = (r["L"], r["H"], r["B"])
            t1[k] = min(t1.get(k, r["step_s"]), r["step_s"])
    for path in a.ddp2:
        for r in peer(path):
            caps = ddp.setdefault((r["L"], r["H"], r["B"]), {})
            caps[r["ddp"]] = min(caps.get(r["ddp"], r["step_s"]), r["step_s"])
    s = {}
    for (L, H, B) in [(8, 8192, 4096), (8, 4096, 512)]:
        tag = "dp_L%d_H%d_B%d" % (L, H, B)
        # The 1-GPU step has no communication: the fastest of the cases'.
        ones = [v for k, v in rm.items() if k[:3] == (L, H, B) and k[3] and k[4] == 1]
        one = min(ones, key=lambda v: v["step_s"]) if ones else None
        for k, v in rm.items():
            if k[:3] == (L, H, B) and k[3] and k[4] == 1:
                s["%s_step1_ms_%s" % (tag, k[5])] = round(v["step_s"] * 1e3, 3)
        # Each variant's 2-GPU step, then the fastest as Ringmaster's.
        twos = {}
        for comm in ("nccl", "ce", "nccl_pipelined", "ce_pipelined", "nccl_heuristic",
                     "nccl_pipelined_heuristic"):
            v = rm.get((L, H, B, True, 2, comm))
            if v:
                twos[comm] = v
                s["%s_step2_ms_%s" % (tag, comm)] = round(v["step_s"] * 1e3, 3)
                s["%s_step2_exposed_comm_ms_%s" % (tag, comm)] = round(v["train"]["exposed_comm_s"] * 1e3, 3)
                s["%s_step2_compute_ms_%s" % (tag, comm)] = round(v["train"]["compute_s"] * 1e3, 3)
                if one:
                    s["%s_weak_eff_2gpu_%s" % (tag, comm)] = round(one["step_s"] / v["step_s"], 4)
        best_comm = min(twos, key=lambda c: twos[c]["step_s"]) if twos else None
        two = twos.get(best_comm)
        if best_comm:
            s[tag + "_step2_comm"] = best_comm
        two_no = rm.get((L, H, B, False, 2, (best_comm or "nccl").split("_")[0]))
        if one:
            s[tag + "_step1_ms"] = round(one["step_s"] * 1e3, 3)
        if two:
            s[tag + "_step2_ms"] = round(two["step_s"] * 1e3, 3)
            tr = two["train"]
            s[tag + "_step2_compute_ms"] = round(tr["compute_s"] * 1e3, 3)
            s[tag + "_step2_exposed_comm_ms"] = round(tr["exposed_comm_s"] * 1e3, 3)
            s[tag + "_step2_skew_ms"] = round(tr["skew_s"] * 1e3, 3)
        if two_no:
            s[tag + "_step2_no_overlap_ms"] = round(two_no["step_s"] * 1e3, 3)
        if one and two:
            s[tag + "_weak_eff_2gpu"] = round(one["step_s"] / two["step_s"], 4)
        if (L, H, B) in t1 and one:
            s[tag + "_torch_step1_ms"] = round(t1[(L, H, B)] * 1e3, 3)
            s[tag + "_step1_ratio_vs_torch"] = round(one["step_s"] / t1[(L, H, B)], 4)
        if (L, H, B) in ddp and two:
            best_cap, best = min(ddp[(L, H, B)].items(), key=lambda kv: kv[1])
            s[tag + "_best_ddp_step2_ms"] = round(best * 1e3, 3)
            s[tag + "_best_ddp_bucket_mb"] = best_cap
            s[tag + "_step2_ratio_vs_best_ddp"] = round(two["step_s"] / best, 4)
            if (L, H, B) in t1:
                s[tag + "_best_ddp_weak_eff"] = round(t1[(L, H, B)] / best, 4)
    for k, v in s.items():
        print("%-45s %s" % (k, v))
    json.dump({"summary": s, "ddp": {str(k): v for k, v in ddp.items()}}, open(a.out, "w"), indent=1)


if __name__ == "__main__":
    main()
