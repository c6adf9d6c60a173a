#!/usr/bin/env python3
"""The server card's figures of one device call: Ringmaster's default run
(the plan it chose, its wall time, each GEMM and pinned host<->device
figure and its share of the datasheet as the card printed it) against
PyTorch's on the same GPU (peer.py), and the GPU training plan's exit."""
import argparse
import json
import re

GEMM = ["float32", "tf32", "bfloat16", "float16", "fp8_e4m3"]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ringmaster", required=True, help="results.jsonl")
    p.add_argument("--console", required=True, help="the run's stdout+stderr")
    p.add_argument("--torch", required=True)
    p.add_argument("--wall", type=float, required=True)
    p.add_argument("--dp-exit", type=int, required=True)
    p.add_argument("--out", required=True)
    a = p.parse_args()
    rows = [json.loads(line) for line in open(a.ringmaster)]
    torch = json.load(open(a.torch))
    text = open(a.console).read()
    s = {"server_card_wall_s": a.wall,
         "server_card_chosen": int("plan server-card" in text),
         "dp_scaling_gpu_exit": a.dp_exit}
    ours = {}
    for r in rows:
        c = r["case"]
        if r["status"] != "OK":
            continue
        if c.get("bench") == "BENCH_GEMM":
            d = c.get("dtype", "")
            name = {"FLOAT32": "float32", "TFLOAT32": "tf32", "BFLOAT16": "bfloat16",
                    "FLOAT16": "float16", "FLOAT8_E4M3": "fp8_e4m3"}.get(d)
            if name:
                ours["gemm_" + name] = max(ours.get("gemm_" + name, 0), r["tflops"])
        if c.get("bench") == "BENCH_HOST_DEVICE" and c.get("host_memory") == "PINNED" \
                and not c.get("bidirectional"):
            key = "to_device_pinned" if c.get("direction") == "TO_DEVICE" else "to_host_pinned"
            ours[key] = max(ours.get(key, 0), r["bandwidth_gbps"])
    for name in GEMM:
        if "gemm_" + name in ours and name in torch["gemm_tflops"]:
            s["gemm_%s_tflops" % name] = ours["gemm_" + name]
            s["gemm_%s_torch_tflops" % name] = torch["gemm_tflops"][name]
            s["gemm_%s_ratio_vs_torch" % name] = ours["gemm_" + name] / torch["gemm_tflops"][name]
        m = re.search(r"dense GEMM %s \(TFLOP/s\)\s+\S+\s+\S+\s+([0-9.]+)%%" % re.escape(name), text)
        if m:
            s["gemm_%s_pct_of_datasheet" % name] = float(m.group(1))
    for key, label in [("to_device_pinned", "host -> device, pinned memory"),
                       ("to_host_pinned", "device -> host, pinned memory")]:
        if key in ours and key in torch["copy_gbps"]:
            s["%s_gbps" % key] = ours[key]
            s["%s_torch_gbps" % key] = torch["copy_gbps"][key]
            s["%s_ratio_vs_torch" % key] = ours[key] / torch["copy_gbps"][key]
        m = re.search(r"%s \(GB/s\)\s+\S+\s+\S+\s+([0-9.]+)%%" % re.escape(label), text)
        if m:
            s["%s_pct_of_datasheet" % key] = float(m.group(1))
    json.dump(s, open(a.out, "w"), indent=1, sort_keys=True)
    for k in sorted(s):
        print("%-44s %.6g" % (k, s[k]))


if __name__ == "__main__":
    main()
