#!/usr/bin/env python3
"""Turns one bench/collectives device run into figures (issue 3).

Reads the files of bench.tgz (Ringmaster's JSON Lines for the collectives
sweep, the adaptive and fixed sweeps and the interconnect A/B plan; PyTorch's
torch.json), compares with the nccl-tests anchors, merges the figures into
summary.json and writes a side-by-side table.

  python3 bench/collectives/summarize.py --run DIR [--run DIR2 ...] --anchors ../shared/anchors/h200x2-2026-11-30 \
      --summary bench/results/h200x2/summary.json --table bench/results/h200x2/collectives.md
"""
import argparse
import json
import os

GE = 32 << 20
SHORT = {"all_reduce": "allreduce", "all_gather": "allgather",
         "reduce_scatter": "reducescatter", "send_recv": "sendrecv"}


def load(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def size_name(b):
    for unit, n in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= n and b % n == 0:
            return f"{b // n}{unit}"
    return f"{b}B"


def key(r):
    c = r["case"]
    return (c["collective"].lower(), "in" if c["in_place"] else "out", int(c["size_bytes"]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--run", required=True, action="append",
                    help="an unpacked bench.tgz; repeat to pool several calls")
    ap.add_argument("--anchors", required=True)
    ap.add_argument("--summary", required=True)
    ap.add_argument("--table", required=True)
    a = ap.parse_args()
    fig = {}

    # The collectives sweep ran twice per call: each size's busbw is the mean
    # over every pooled run (large all-gathers move by several % run to run,
    # for PyTorch as for Ringmaster).
    def paths(name):  # the file `name` of every pooled call that has it
        return [os.path.join(d, name) for d in a.run if os.path.exists(os.path.join(d, name))]
    runs = [load(p) for n in ("collectives.jsonl", "collectives2.jsonl") for p in paths(n)]
    rm = {}
    for rs in runs:
        for r in rs:
            if r["status"] != "OK":
                raise SystemExit(f"failed result: {r['case']} {r.get('failure')}")
            rm.setdefault(key(r), []).append(r)
    for k, rs in rm.items():
        merged = dict(rs[0])
        merged["busbw_gbps"] = sum(r["busbw_gbps"] for r in rs) / len(rs)
        rm[k] = merged
    # Latency: the median of the runs' medians per mode and size.
    latency = {}
    long_graphs = []  # 8 B graph replays of ~10 ms (about 1800 ops per graph)
    for path in paths("latency.jsonl") + paths("latency2.jsonl"):
        for r in load(path):
            if r["case"]["spec_name"] == "latency-long-graphs":
                long_graphs.append(r["stats"]["median_s"] * 1e6)
                continue
            latency.setdefault((r["timing_mode"], int(r["case"]["size_bytes"])), []).append(r)
    # PyTorch ran twice as well: the mean of its runs per size.
    torch = {}
    for path in paths("torch.json") + paths("torch2.json"):
        with open(path) as f:
            for t in json.load(f)["results"]:
                torch.setdefault((t["collective"], int(t["size_bytes"])), []).append(t)
    for k, ts in torch.items():
        merged = dict(ts[0])
        merged["busbw_gbps"] = sum(t["busbw_gbps"] for t in ts) / len(ts)
        torch[k] = merged
    anchors = {}
    for coll, name in (("all_reduce", "ar_g2.json"), ("all_gather", "ag.json"),
                       ("reduce_scatter", "rs.json")):
        with open(os.path.join(a.anchors, name)) as f:
            anchors[coll] = {r["size"]: r for r in json.load(f)["results"]}

    lines = ["| collective | size | Ringmaster busbw out / in | PyTorch busbw | nccl-tests busbw out / in |",
             "|---|---|---|---|---|"]
    for coll in ("all_reduce", "all_gather", "reduce_scatter", "send_recv"):
        vs_torch, vs_anchor = [], []
        sizes = sorted({k[2] for k in rm if k[0] == coll})
        for s in sizes:
            out = rm.get((coll, "out", s))
            inp = rm.get((coll, "in", s))
            t = torch.get((coll, s))
            an = anchors.get(coll, {}).get(s)
            # Like with like: torch's all_reduce is in-place, the others out-of-place.
            mine = inp if coll == "all_reduce" else out
            if s >= GE and t:
                vs_torch.append((mine["busbw_gbps"] / t["busbw_gbps"], s))
            if s >= GE and an:
                vs_anchor.append((out["busbw_gbps"] / an["out_of_place"]["bus_bw"], s, "out"))
                if inp:
                    vs_anchor.append((inp["busbw_gbps"] / an["in_place"]["bus_bw"], s, "in"))
            f1 = lambda r: f"{r['busbw_gbps']:.1f}" if r else "–"
            lines.append(f"| {coll} | {size_name(s)} | {f1(out)} / {f1(inp)} | "
                         f"{t['busbw_gbps']:.1f} | " if t else f"| {coll} | {size_name(s)} | {f1(out)} / {f1(inp)} | – | ")
            lines[-1] += (f"{an['out_of_place']['bus_bw']:.1f} / {an['in_place']['bus_bw']:.1f} |"
                          if an else "– |")
        short = SHORT[coll]
        if vs_torch:
            w = min(vs_torch)
            fig[f"{short}_min_ratio_vs_torch_ge32MiB"] = w[0]
            print(f"{short}_min_ratio_vs_torch_ge32MiB = {w[0]:.4f} (worst {size_name(w[1])})")
        if vs_anchor:
            w = min(vs_anchor)
            fig[f"{short}_min_ratio_vs_nccltests_anchor_ge32MiB"] = w[0]
            print(f"{short}_min_ratio_vs_nccltests_anchor_ge32MiB = {w[0]:.4f} (worst {w[2]} {size_name(w[1])})")
        top = max(sizes)
        fig[f"{short}_{size_name(top)}_busbw_gbps"] = rm[(coll, "out", top)]["busbw_gbps"]

    for (mode, size), rs in sorted(latency.items()):
        med = sorted(r["stats"]["median_s"] for r in rs)[len(rs) // 2] * 1e6
        fig[f"allreduce_{size_name(size)}_{mode.lower()}_latency_us"] = med
        if mode == "PER_OP":
            fig[f"allreduce_{size_name(size)}_per_op_p99_us"] = max(r["stats"]["p99_s"] for r in rs) * 1e6
    # The bar's figure: graphs of ~10 ms (as nccl-tests' -G amortizes the
    # graph launch), the worse of the two runs, not the best.
    fig["allreduce_8B_graph_latency_us"] = max(long_graphs)
    fig["allreduce_8B_graph_1ms_graphs_latency_us"] = max(
        r["stats"]["median_s"] for r in latency[("GRAPH", 8)]) * 1e6

    # Time to result: summed case wall time of the sweep (the launch and
    # NCCL set-up, the same for both, excluded); best of the repeated runs.
    def sweep(path):
        rs = load(path)
        return sum(r["case_wall_s"] for r in rs), rs
    adaptive = [sweep(p) for d in a.run for p in (os.path.join(d, "adaptive.jsonl"), os.path.join(d, "adaptive2.jsonl"))]
    fixed = [sweep(p) for d in a.run for p in (os.path.join(d, "fixed.jsonl"), os.path.join(d, "fixed2.jsonl"))]
    ratios = [ad[0] / fx[0] for ad, fx in zip(adaptive, fixed)]
    fig["sweep_time_ratio_adaptive_vs_fixed20"] = max(ratios)  # the worse pair
    bounded = paths("bounded.jsonl")
    if bounded:
        fig["sweep_time_ratio_adaptive_max20samples_vs_fixed20"] = max(
            sweep(p)[0] for p in bounded) / min(fx[0] for fx in fixed)
    fig["sweep_time_adaptive_s"] = adaptive[0][0]
    fig["sweep_time_fixed20_s"] = fixed[0][0]
    def rel_ci(st):  # the CI the run reports: the mean's unless ci_on_median
        if not st.get("ci_on_median"):
            return st["ci95_half_width_s"] / st["mean_s"]
        if st.get("median_ci95_high_s", 0) <= 0:
            return float("inf")  # fewer than 6 samples: no interval
        return (st["median_ci95_high_s"] - st["median_ci95_low_s"]) / 2 / st["median_s"]
    worst_ci = max(rel_ci(r["stats"])
                   for _, rs in adaptive for r in rs if int(r["case"]["size_bytes"]) >= 1 << 20)
    fig["sweep_adaptive_max_ci_pct_ge1MiB"] = 100 * worst_ci
    print("sweep ratios", [round(x, 3) for x in ratios], "worst CI >= 1 MiB", round(100 * worst_ci, 3), "%")

    ab = load(paths("ab.jsonl")[-1])
    for r in ab:
        if int(r["case"]["size_bytes"]) == 1 << 30:
            v = r["case"]["variant"]
            fig[f"allreduce_1GiB_busbw_gbps_{v}"] = r["busbw_gbps"]

    summary = {}
    if os.path.exists(a.summary):
        with open(a.summary) as f:
            summary = json.load(f)
    summary.update({k: round(v, 4) for k, v in fig.items()})
    with open(a.summary, "w") as f:
        json.dump(dict(sorted(summary.items())), f, indent=1)
        f.write("\n")
    with open(a.table, "w") as f:
        f.write("\n".join(lines) + "\n")
    for k, v in sorted(fig.items()):
        print(f"{k:55s} {v:10.4f}")


if __name__ == "__main__":
    main()
