"""Names the GEMM kernels behind PyTorch's faster float16 step (issue 5).

Loads fp16_gemm.cc's shared library into a PyTorch process, so PyTorch's
profiler records both PyTorch's kernels and the ones cuBLASLt runs for
Ringmaster's calls (with PyTorch's cuBLAS, the one loaded first). Prints:
which libcublasLt this process mapped, PyTorch's step (L8 H8192 B4096,
the model of bench/train/torch_ddp.py) per precision with its kernels by
time, and per GEMM of Ringmaster's the heuristic's first candidate, the
fastest candidate and cublasGemmEx with their kernels and times.

Usage: python3 fp16_gemm.py LIB.so
"""
import ctypes
import os
import sys

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "train"))
from torch_ddp import inputs, model  # noqa: E402  (the peer reference's model)

L, H, B = 8, 8192, 4096


def kernels(prof, per=1):
    """(name, calls, total us) of every GPU kernel, longest total first."""
    rows = []
    for e in prof.key_averages():
        t = getattr(e, "self_device_time_total", None)
        if t is None:
            t = e.self_cuda_time_total
        if t > 0:
            rows.append((e.key, e.count // per, t / per))
    return sorted(rows, key=lambda r: -r[2])


def show(rows, limit=8):
    for name, calls, us in rows[:limit]:
        print("    %9.1f us %4d x  %s" % (us, calls, name[:150]))


def torch_step(dtype):
    torch.manual_seed(1)
    net = model(L, H, dtype)
    x = inputs(B, H, dtype, "randn")
    opt = torch.optim.SGD(net.parameters(), lr=0.1)

    def step():
        opt.zero_grad(set_to_none=True)
        net(x).float().pow(2).mean().backward()
        opt.step()

    for _ in range(5):
        step()
    times = []
    for _ in range(10):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        step()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    times.sort()
    steps = 3
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            step()
        torch.cuda.synchronize()
    print("PyTorch %s step: median %.3f ms of 10; kernels per step:" % (dtype, times[5]))
    show(kernels(prof, steps))
    del net, opt, x
    torch.cuda.empty_cache()


def main():
    torch.ones(8, 8, device="cuda") @ torch.ones(8, 8, device="cuda")
    lib = ctypes.CDLL(sys.argv[1])
    lib.fx_time.restype = ctypes.c_double
    print("torch", torch.__version__, "cuda", torch.version.cuda,
          "cublasLt version in this process", lib.fx_version())
    with open("/proc/self/maps") as f:
        for path in sorted({l.split()[-1] for l in f if "libcublas" in l}):
            print("mapped", path)
    for dtype in ("fp16", "bf16"):
        torch_step(dtype)
    buf = ctypes.create_string_buffer(256)
    for dtype, dname in ((0, "float16"), (1, "bfloat16")):
        for gemm, gname in ((0, "forward"), (1, "dW"), (2, "dX")):
            n = lib.fx_prepare(dtype, gemm)
            times = [lib.fx_time(i, 5, 5) for i in range(n)]
            best = min(range(n), key=lambda i: times[i] if times[i] > 0 else 1e9)
            print("Ringmaster's %s %s: %d candidates, first %.4f ms, fastest #%d %.4f ms"
                  % (dname, gname, n, times[0], best, times[best]))
            for i, what in ((0, "first"), (best, "fastest"), (-1, "GemmEx reduced allowed"),
                            (-2, "GemmEx reduced disallowed")):
                if i >= 0:
                    lib.fx_describe(i, buf, 256)
                    desc = buf.value.decode()
                else:
                    desc = ""
                ms = lib.fx_time(i, 5, 5)
                with profile(activities=[ProfilerActivity.CUDA]) as prof:
                    lib.fx_run(i, 2)
                    lib.fx_sync()
                print("  %-26s %.4f ms %s" % (what, ms, desc))
                show(kernels(prof, 2), 3)


if __name__ == "__main__":
    main()
