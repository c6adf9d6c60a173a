"""torch.matmul beside Ringmaster's cuBLASLt GEMM, timed the same way.

Standard normal inputs (torch.randn; Ringmaster's are normal too), 3 warm-up products, then
samples of 10 back-to-back products between CUDA events; the median sample
is reported, as TFLOP/s = 2*m*n*k / time. fp8 goes through torch._scaled_mm
(unit scales, bf16 output, B column-major as it requires).
"""
import argparse
import json

import torch


def bench(fn, flops, samples=11, iters=10, warmup=3):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(samples):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(iters):
            fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) / 1e3 / iters)
    times.sort()
    med = times[len(times) // 2]
    return {"median_s": med, "tflops": flops / med / 1e12, "samples": len(times)}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--n", type=int, default=8192)
    p.add_argument("--dtypes", default="bfloat16_uniform,float32,tf32,bfloat16,float16,fp8_e4m3",
                   help="comma-separated: bfloat16_uniform, float32, tf32, bfloat16, float16, fp8_e4m3")
    args = p.parse_args()
    want = set(args.dtypes.split(","))
    n = args.n
    flops = 2.0 * n * n * n
    out = {"torch": torch.__version__, "cuda": torch.version.cuda, "n": n}

    def normal(dtype):
        return torch.randn(n, n, device="cuda").to(dtype)

    # Uniform [-1, 1) bf16 inputs draw more power than normal ones; on a
    # power-capped GPU that shows in the rate. Recorded beside, not compared.
    if "bfloat16_uniform" in want:
        a, b = [(torch.rand(n, n, device="cuda") * 2 - 1).to(torch.bfloat16) for _ in range(2)]
        out["bfloat16_uniform"] = bench(lambda: torch.matmul(a, b), flops)
        print("bfloat16_uniform", out["bfloat16_uniform"], flush=True)

    for name, dtype, tf32 in [("float32", torch.float32, False), ("tf32", torch.float32, True),
                              ("bfloat16", torch.bfloat16, False), ("float16", torch.float16, False)]:
        if name not in want:
            continue
        torch.backends.cuda.matmul.allow_tf32 = tf32
        a, b = normal(dtype), normal(dtype)
        out[name] = bench(lambda: torch.matmul(a, b), flops)
        print(name, out[name], flush=True)
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        if "fp8_e4m3" not in want:
            raise LookupError("not asked for")
        a = normal(torch.float32).to(torch.float8_e4m3fn)
        b = normal(torch.float32).to(torch.float8_e4m3fn).t().contiguous().t()
        one = torch.tensor(1.0, device="cuda")
        out["fp8_e4m3"] = bench(
            lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16), flops)
        print("fp8_e4m3", out["fp8_e4m3"], flush=True)
    except LookupError:
        pass
    except Exception as e:  # noqa: BLE001 - report, do not hide
        out["fp8_e4m3"] = {"error": str(e)}
        print("fp8_e4m3 failed:", e, flush=True)
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
