#!/usr/bin/env python3
"""PyTorch's figures for the server card's comparisons, on the same GPU:
dense products of 8192^3 through torch.matmul (float32 with TF32 off and
on, bfloat16, float16) and torch._scaled_mm (fp8 e4m3 operands, bfloat16
result), and host<->device copies of 256 MiB between pinned host memory
and the GPU through Tensor.copy_. Random operands (zeros draw less power
and run faster under a power cap). The products are timed as Ringmaster's
server card times its own (3 warm-ups, then 9 samples of 10 back-to-back
products, the median sample / 10): under a power cap the clocks fall a
second or so into a sustained product, so a shorter measurement would
compare power states, not code. Copies: the median of 10 single copies
after 2 warm-ups."""
import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "p2p"))
from torch_gemm import bench  # noqa: E402  (the same timing as bench/p2p's)


def timed(fn, warmup, samples, per_sample=1):
    """Median seconds per operation over `samples` samples of `per_sample`
    back-to-back operations, after `warmup` operations (bench/p2p's)."""
    return bench(fn, 0, samples=samples, iters=per_sample, warmup=warmup)["median_s"]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=8192)
    p.add_argument("--copy-mib", type=int, default=256)
    p.add_argument("--out", required=True)
    a = p.parse_args()
    dev = torch.device("cuda")
    n = a.n
    flops = 2.0 * n * n * n
    out = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__,
           "gemm_tflops": {}, "copy_gbps": {}}
    for name, dtype, tf32 in [("float32", torch.float32, False),
                              ("tf32", torch.float32, True),
                              ("bfloat16", torch.bfloat16, False),
                              ("float16", torch.float16, False)]:
        torch.backends.cuda.matmul.allow_tf32 = tf32
        x = torch.randn(n, n, device=dev).to(dtype)
        y = torch.randn(n, n, device=dev).to(dtype)
        t = timed(lambda: torch.matmul(x, y), 3, 9, 10)
        out["gemm_tflops"][name] = flops / t / 1e12
        print("%-9s %8.1f TFLOP/s" % (name, out["gemm_tflops"][name]), flush=True)
        del x, y
    torch.backends.cuda.matmul.allow_tf32 = False
    x = torch.randn(n, n, device=dev).to(torch.float8_e4m3fn)
    y = torch.randn(n, n, device=dev).to(torch.float8_e4m3fn).t().contiguous().t()
    one = torch.tensor(1.0, device=dev)
    t = timed(lambda: torch._scaled_mm(x, y, scale_a=one, scale_b=one,
                                       out_dtype=torch.bfloat16), 3, 9, 10)
    out["gemm_tflops"]["fp8_e4m3"] = flops / t / 1e12
    print("%-9s %8.1f TFLOP/s" % ("fp8_e4m3", out["gemm_tflops"]["fp8_e4m3"]), flush=True)
    del x, y
    nbytes = a.copy_mib << 20
    host = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)
    host.random_(0, 255)
    gpu = torch.empty(nbytes, dtype=torch.uint8, device=dev)
    t = timed(lambda: gpu.copy_(host, non_blocking=True), 2, 10)
    out["copy_gbps"]["to_device_pinned"] = nbytes / t / 1e9
    t = timed(lambda: host.copy_(gpu, non_blocking=True), 2, 10)
    out["copy_gbps"]["to_host_pinned"] = nbytes / t / 1e9
    for k, v in out["copy_gbps"].items():
        print("%-17s %8.1f GB/s" % (k, v), flush=True)
    json.dump(out, open(a.out, "w"), indent=1)


if __name__ == "__main__":
    main()
