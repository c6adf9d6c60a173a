#!/usr/bin/env python3
"""Turns one bench/allreduce device run into figures.

Reads Ringmaster's results.jsonl and PyTorch's torch.json (both from the same
run, see device.sh) and the nccl-tests anchor (shared/anchors/.../ar_g2.json,
measured on the same machine type), and merges flat "figure name -> number"
entries into bench/results/<machine>/summary.json. Prints a side-by-side table.

  python3 bench/allreduce/summarize.py --run RUN_DIR \
      --anchor ../shared/anchors/h200x2-2026-11-30/ar_g2.json \
      --summary bench/results/h200x2/summary.json --table bench/results/h200x2/allreduce.md

RUN_DIR is the folder a device call's files came back to.
"""
import argparse
import json
import os

GE = 64 << 20
SHORT = {"FLOAT32": "fp32", "BFLOAT16": "bf16"}


def size_name(b):
    for unit, n in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= n and b % n == 0:
            return f"{b // n}{unit}"
    return f"{b}B"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--run", required=True, help="folder with ringmaster.jsonl and torch.json")
    ap.add_argument("--anchor", required=True, help="nccl-tests all_reduce_perf JSON")
    ap.add_argument("--summary", required=True)
    ap.add_argument("--table", required=True)
    args = ap.parse_args()

    rm = {}  # (dtype, placement, size) -> result
    with open(os.path.join(args.run, "ringmaster.jsonl")) as f:
        for line in f:
            r = json.loads(line)
            c = r["case"]
            if r["status"] != "OK":
                raise SystemExit(f"failed result in the run: {c}")
            rm[(SHORT[c["dtype"]], "in" if c["in_place"] else "out", int(c["size_bytes"]))] = r
    torch = {}
    with open(os.path.join(args.run, "torch.json")) as f:
        t = json.load(f)
    for r in t["results"]:
        torch[({"float32": "fp32", "bfloat16": "bf16"}[r["dtype"]], r["size_bytes"])] = r
    with open(args.anchor) as f:
        anchor = {r["size"]: r for r in json.load(f)["results"]}

    fig = {}
    rows = []
    ratios_torch, ratios_torch_oop, ratios_anchor = [], [], []
    sizes = sorted({k[2] for k in rm})
    for dt in ("fp32", "bf16"):
        for s in sizes:
            out, inp = rm.get((dt, "out", s)), rm.get((dt, "in", s))
            tr = torch.get((dt, s))
            an = anchor.get(s) if dt == "fp32" else None
            row = {"dtype": dt, "size": s,
                   "rm_out_us": out["stats"]["median_s"] * 1e6, "rm_out": out["busbw_gbps"],
                   "rm_in": inp["busbw_gbps"], "torch": tr["busbw_gbps"] if tr else None,
                   "torch_us": tr["median_s"] * 1e6 if tr else None,
                   "anchor_out": an["out_of_place"]["bus_bw"] if an else None,
                   "anchor_in": an["in_place"]["bus_bw"] if an else None,
                   "anchor_us": an["out_of_place"]["time"] if an else None}
            rows.append(row)
            if s >= GE:
                if tr:
                    ratios_torch.append((inp["busbw_gbps"] / tr["busbw_gbps"], dt, s))
                    ratios_torch_oop.append((out["busbw_gbps"] / tr["busbw_gbps"], dt, s))
                if an:
                    ratios_anchor.append((out["busbw_gbps"] / row["anchor_out"], "out", s))
                    ratios_anchor.append((inp["busbw_gbps"] / row["anchor_in"], "in", s))
    top = max(sizes)
    tn = size_name(top)
    for dt in ("fp32", "bf16"):
        fig[f"allreduce_{dt}_{tn}_busbw_gbps"] = rm[(dt, "out", top)]["busbw_gbps"]
        fig[f"allreduce_{dt}_{tn}_inplace_busbw_gbps"] = rm[(dt, "in", top)]["busbw_gbps"]
        fig[f"torch_allreduce_{dt}_{tn}_busbw_gbps"] = torch[(dt, top)]["busbw_gbps"]
        fig[f"allreduce_{dt}_8B_time_us"] = rm[(dt, "out", 8)]["stats"]["median_s"] * 1e6
        fig[f"torch_allreduce_{dt}_8B_time_us"] = torch[(dt, 8)]["median_s"] * 1e6
    for name, rs in (("allreduce_min_ratio_vs_torch_ge64MiB", ratios_torch),
                     ("allreduce_min_ratio_vs_torch_ge64MiB_outofplace", ratios_torch_oop),
                     ("allreduce_min_ratio_vs_nccltests_anchor_ge64MiB", ratios_anchor)):
        worst = min(rs)
        fig[name] = worst[0]
        print(f"{name} = {worst[0]:.4f} (worst at {worst[1]} {size_name(worst[2])})")
    fig["nccltests_anchor_allreduce_fp32_8GiB_busbw_gbps"] = anchor[8 << 30]["out_of_place"]["bus_bw"]

    summary = {}
    if os.path.exists(args.summary):
        with open(args.summary) as f:
            summary = json.load(f)
    summary.update({k: round(v, 4) for k, v in fig.items()})
    os.makedirs(os.path.dirname(args.summary), exist_ok=True)
    with open(args.summary, "w") as f:
        json.dump(dict(sorted(summary.items())), f, indent=1)
        f.write("\n")

    lines = ["| dtype | size | Ringmaster µs | Ringmaster busbw out / in | PyTorch µs | PyTorch busbw (in) | nccl-tests anchor µs | anchor busbw out / in |",
             "|---|---|---|---|---|---|---|---|"]
    fmt = lambda v, p=1: "–" if v is None else f"{v:.{p}f}"
    for r in rows:
        lines.append(f"| {r['dtype']} | {size_name(r['size'])} | {fmt(r['rm_out_us'], 2)} | "
                     f"{fmt(r['rm_out'])} / {fmt(r['rm_in'])} | {fmt(r['torch_us'], 2)} | {fmt(r['torch'])} | "
                     f"{fmt(r['anchor_us'], 2)} | {fmt(r['anchor_out'])} / {fmt(r['anchor_in'])} |")
    with open(args.table, "w") as f:
        f.write("\n".join(lines) + "\n")
    for k, v in sorted(fig.items()):
        print(f"{k:55s} {v:10.4f}")


if __name__ == "__main__":
    main()
