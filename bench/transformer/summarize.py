#!/usr/bin/env python3
"""The transformer figures of one device call: Ringmaster's llama3-8b
slice step (the median step; with several runs given, the faster) against PyTorch's eager and compiled
steps from peer.py (and, given, the same step on attention's other paths), its MFU over the H200's datasheet dense bfloat16 peak,
the losses of both from the same weights and data, and the small case's
check against float64."""
import argparse
import json

PEAK = 989.4e12  # H200 SXM datasheet, dense bfloat16 (sparsity figure halved)


def results(paths):
    out = {}
    for path in paths:
        for line in open(path):
            r = json.loads(line)
            c = r["case"]
            if c.get("bench") != "BENCH_TRANSFORMER" or r["status"] != "OK":
                continue
            name = c["spec_name"]
            if name not in out or r["stats"]["median_s"] < out[name]["stats"]["median_s"]:
                out[name] = r
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ringmaster", nargs="+", required=True)
    p.add_argument("--torch", required=True)
    for path in ("fused", "unfused"):
        p.add_argument("--" + path, nargs="*", default=[],
                       help="runs with RINGMASTER_ATTENTION=%s (attention's other paths)" % path)
    p.add_argument("--out", required=True)
    a = p.parse_args()
    rm = results(a.ringmaster)
    torch = json.load(open(a.torch))
    s = {}
    if "llama3-8b" in rm:
        r = rm["llama3-8b"]
        t = r["transformer"]
        step = r["stats"]["median_s"]
        flops = t["flops_per_token"] * 4096
        s["transformer_llama3_8b_step_ms"] = step * 1e3
        s["transformer_llama3_8b_mfu_1gpu"] = flops / step / PEAK
        s["transformer_llama3_8b_peak_memory_gib"] = int(t["peak_memory_bytes"]) / 2**30
        s["transformer_llama3_8b_breakdown_gap"] = t.get("breakdown_gap", 0.0)
        if t.get("measured_gemm_flops", 0) > 0:
            s["measured_gemm_tflops"] = t["measured_gemm_flops"] / 1e12
            s["transformer_llama3_8b_mfu_of_measured_gemm"] = t["mfu_of_measured_gemm"]
        for mode in ("eager", "compile"):
            if mode not in torch:
                continue
            ts = torch[mode]["median_s"]
            s["torch_%s_step_ms" % mode] = ts * 1e3
            s["torch_%s_mfu" % mode] = flops / ts / PEAK
            s["transformer_llama3_8b_step1_ratio_vs_torch_%s" % mode] = step / ts
        if "eager" in torch:
            losses = torch["eager"]["losses"]
            s["loss_first_ringmaster"] = t["loss_first"]
            s["loss_first_torch"] = losses[0]
            s["loss_first_rel_diff"] = abs(t["loss_first"] - losses[0]) / losses[0]
            s["loss_last_ringmaster"] = t["loss_last"]
            s["loss_last_torch"] = losses[-1]
            s["loss_last_rel_diff"] = abs(t["loss_last"] - losses[-1]) / losses[-1]
    if "llama3-8b-master" in rm:
        s["transformer_llama3_8b_master_weights_step_ms"] = rm["llama3-8b-master"]["stats"]["median_s"] * 1e3
    for path in ("fused", "unfused"):
        other = results(getattr(a, path)) if getattr(a, path) else {}
        if "llama3-8b" in other and "llama3-8b" in rm:
            f = other["llama3-8b"]
            s["transformer_llama3_8b_%s_attention_step_ms" % path] = f["stats"]["median_s"] * 1e3
            s["transformer_llama3_8b_%s_over_default" % path] = f["stats"]["median_s"] / rm["llama3-8b"]["stats"]["median_s"]
            s["transformer_llama3_8b_%s_attention_peak_memory_gib" % path] = int(f["transformer"]["peak_memory_bytes"]) / 2**30
    fused = results(a.fused) if a.fused else {}
    if "fused-check" in fused:
        s["fused_check_loss_rel_error_vs_float64"] = fused["fused-check"]["transformer"]["loss_rel_error"]
    if "small-check" in rm:
        s["small_check_loss_rel_error_vs_float64"] = rm["small-check"]["transformer"]["loss_rel_error"]
    json.dump(s, open(a.out, "w"), indent=1, sort_keys=True)
    for k in sorted(s):
        print("%-58s %.6g" % (k, s[k]))


if __name__ == "__main__":
    main()
