#!/usr/bin/env python3
"""The inference figures of one device call: Ringmaster's llama3-8b slice
(time per output token and time to first token per batch) against
PyTorch's static-cache server (peer.py: also against its steps run back
to back), decode's read bandwidth as a share of the same call's HBM copy
bandwidth (counted as bytes read + written: 2 x local_copy's bytes copied
per second, the faster method) per TPOT and per the steps' device time
(keys ending _device), prefill's MFU, the best batch under the plan's
objective, and the small case's check against float64."""
import argparse
import json

PEAK = 989.4e12  # H200 SXM datasheet, dense bfloat16 (sparsity figure halved)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ringmaster", required=True)
    p.add_argument("--torch", help="peer.py's JSON (without it, no ratios)")
    p.add_argument("--variant", action="append", default=[],
                   metavar="NAME=JSONL",
                   help="the same decode under another setting: its TPOT "
                        "p50 per batch as key suffix _NAME")
    p.add_argument("--read-pattern", metavar="TXT",
                   help="read_pattern's output: the HBM read rate of plain "
                        "loads and of the decode step's ring")
    p.add_argument("--out", required=True)
    p.add_argument("--expect-b1-path", metavar="TEXT",
                   help="exit 1 (after writing the summary) unless the "
                        "llama3-8b batch-1 decode path contains TEXT")
    a = p.parse_args()
    rows = [json.loads(line) for line in open(a.ringmaster)]
    torch = json.load(open(a.torch))["batches"] if a.torch else {}
    s = {}
    copy = [r["bandwidth_gbps"] for r in rows
            if r["case"].get("bench") == "BENCH_LOCAL_COPY" and r["status"] == "OK"]
    if copy:
        s["hbm_copy_rw_gbps"] = 2 * max(copy)
    best = None
    for r in rows:
        c = r["case"]
        if c.get("bench") != "BENCH_INFERENCE" or r["status"] != "OK":
            continue
        f = r["serve"]
        batch = int(c["transformer"].get("micro_batch", 1))
        if c["spec_name"] == "small-check":
            s["small_check_b%d_rel_error_vs_float64" % batch] = f["check_rel_error"]
            continue
        key = "inference_llama3_8b_b%d" % batch
        s[key + "_tpot_p50_ms"] = f["tpot_p50_s"] * 1e3
        s[key + "_tpot_p99_ms"] = f["tpot_p99_s"] * 1e3
        s[key + "_ttft_ms"] = f["ttft_s"] * 1e3
        s[key + "_tokens_per_s"] = f["tokens_per_s_per_rank"]
        s[key + "_decode_read_gbps"] = f["decode_read_gbps"]
        # The engine's decode path, as its description ends.
        s[key + "_decode_path"] = r.get("path", "").split("CUDA graph, ")[-1].rstrip(")")
        if "hbm_copy_rw_gbps" in s:
            s[key + "_hbm_share"] = f["decode_read_gbps"] / s["hbm_copy_rw_gbps"]
        if "tpot_device_p50_s" in f:
            # The steps on the GPU's clock, without the host's launch gap.
            s[key + "_tpot_device_p50_ms"] = f["tpot_device_p50_s"] * 1e3
            s[key + "_decode_device_read_gbps"] = f["decode_device_read_gbps"]
            if "hbm_copy_rw_gbps" in s:
                s[key + "_hbm_share_device"] = (
                    f["decode_device_read_gbps"] / s["hbm_copy_rw_gbps"])
        s[key + "_prefill_mfu"] = f["prefill_tflops_per_rank"] * 1e12 / PEAK
        t = torch.get(str(batch))
        if t:
            s[key + "_torch_tpot_p50_ms"] = t["tpot_p50_s"] * 1e3
            s[key + "_torch_ttft_ms"] = t["ttft_s"] * 1e3
            s[key + "_decode_ratio_vs_torch"] = f["tpot_p50_s"] / t["tpot_p50_s"]
            s[key + "_prefill_ratio_vs_torch"] = f["ttft_s"] / t["ttft_s"]
            if "tpot_pipelined_s" in t:
                # Against PyTorch's steps run back to back (its Python launch
                # work hidden): a stricter baseline than its per-step times.
                s[key + "_torch_tpot_pipelined_ms"] = t["tpot_pipelined_s"] * 1e3
                s[key + "_decode_ratio_vs_torch_pipelined"] = (
                    f["tpot_p50_s"] / t["tpot_pipelined_s"])
        if f.get("slo_met") and (best is None or f["tokens_per_s_per_rank"] > best[1]):
            best = (batch, f["tokens_per_s_per_rank"])
    # The issue's keys: batch 1's figures under their names.
    for alias, b1 in (("decode_b1_ratio_vs_torch", "b1_decode_ratio_vs_torch"),
                      ("prefill_ratio_vs_torch", "b1_prefill_ratio_vs_torch"),
                      ("decode_b1_ratio_vs_torch_pipelined",
                       "b1_decode_ratio_vs_torch_pipelined"),
                      ("decode_b1_hbm_share", "b1_hbm_share"),
                      ("decode_b1_hbm_share_device", "b1_hbm_share_device")):
        if "inference_llama3_8b_" + b1 in s:
            s["inference_llama3_8b_" + alias] = s["inference_llama3_8b_" + b1]
    if best:
        s["inference_llama3_8b_best_batch_tpot_p99_30ms"] = best[0]
    for v in a.variant:
        name, path = v.split("=", 1)
        try:
            lines = open(path).read().splitlines()
        except OSError:
            continue
        for line in lines:
            r = json.loads(line)
            if r["status"] != "OK" or r["case"].get("bench") != "BENCH_INFERENCE":
                continue
            batch = int(r["case"]["transformer"].get("micro_batch", 1))
            s["inference_llama3_8b_b%d_tpot_p50_ms_%s" % (batch, name)] = \
                r["serve"]["tpot_p50_s"] * 1e3
            if "tpot_device_p50_s" in r["serve"]:
                s["inference_llama3_8b_b%d_tpot_device_p50_ms_%s"
                  % (batch, name)] = r["serve"]["tpot_device_p50_s"] * 1e3
    if a.read_pattern:
        try:
            lines = open(a.read_pattern).read().splitlines()
        except OSError:
            lines = []
        for line in lines:
            if "GB/s read" not in line:
                continue
            gbps = float(line.split(",")[-1].split()[0])
            if line.startswith("plain loads"):
                key = "hbm_read_plain_loads_gbps"
            elif line.startswith("ring, a range per block") and " 512 B" in line:
                key = "hbm_read_ring_range_per_block_gbps"
            elif line.startswith("ring, blocks interleaved") and " 512 B" in line:
                key = "hbm_read_ring_interleaved_gbps"
            elif line.startswith("ring, a window per step"):
                key = "hbm_read_ring_window_gbps"
            elif line.startswith("steady") and "plain loads, 2048" in line:
                key = "hbm_read_steady_plain_loads_gbps"
            elif line.startswith("steady") and "bulk window" in line:
                seg, _, _, stages = \
                    line.split("bulk window,")[1].split(":")[0].split()
                key = "hbm_read_steady_bulk_window_%sx%s_gbps" % (seg, stages)
            elif line.startswith("steady") and "tensor window" in line:
                box, _, _, stages = \
                    line.split("tensor window,")[1].split(":")[0].split()
                key = "hbm_read_steady_tensor_window_%sx%s_gbps" % (box, stages)
            elif line.startswith("steady") and "plain window" in line:
                rows = line.split("plain window,")[1].split()[0]
                key = "hbm_read_steady_plain_window_%s_rows_gbps" % rows
            else:
                continue
            s[key] = max(s.get(key, 0), gbps)
    json.dump(s, open(a.out, "w"), indent=1, sort_keys=True)
    for k in sorted(s):
        v = s[k]
        print("%-58s %s" % (k, v if isinstance(v, str) else "%.6g" % v))
    if a.expect_b1_path is not None:
        got = s.get("inference_llama3_8b_b1_decode_path", "(no batch-1 result)")
        if a.expect_b1_path not in got:
            raise SystemExit("batch 1 decoded by %r, expected %r"
                             % (got, a.expect_b1_path))


if __name__ == "__main__":
    main()
