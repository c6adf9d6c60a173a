"""PyTorch DDP beside Ringmaster's training step (issue 5).

The same model: L bias-free Linear(H, H) + GELU (exact), bf16 parameters
(or --dtypes: fp32, tf32 = fp32 parameters with TF32 matmuls, fp16, bf16),
loss = mean(out^2), SGD lr 0.1; float16 with Ringmaster's static loss
scale (--loss-scale: without one its gradients underflow to zero at these
sizes and backward multiplies zeros). Per configuration: 5 (10) warm-up
steps, then 20 (50) steps each timed with CUDA events around
zero_grad/forward/backward/step; the median is reported. Run alone for one
GPU (no DDP), under torchrun for DDP with static_graph at the bucket caps
given.
"""
import argparse
import json
import math
import os

import torch
import torch.distributed as dist
import torch.nn as nn


DTYPES = {"fp32": torch.float32, "tf32": torch.float32, "fp16": torch.float16,
          "bf16": torch.bfloat16}


def model(layers, hidden, dtype, data="randn"):
    mods = []
    for _ in range(layers):
        mods += [nn.Linear(hidden, hidden, bias=False), nn.GELU()]
        if data == "uniform":  # Ringmaster's weight distribution
            bound = (3.0 / hidden) ** 0.5
            nn.init.uniform_(mods[-2].weight, -bound, bound)
    return nn.Sequential(*mods).cuda().to(DTYPES[dtype])


def inputs(batch, hidden, dtype, data):
    if data == "uniform":  # Ringmaster's input distribution
        return (torch.rand(batch, hidden, device="cuda") * 2 - 1).to(DTYPES[dtype])
    return torch.randn(batch, hidden, device="cuda", dtype=DTYPES[dtype])


def loss_scale(arg, dtype, batch, hidden):
    """Ringmaster's auto scale for float16 (the power of two nearest
    B*H/64; without one, mean(out^2)'s gradients are below float16's
    smallest subnormal at these sizes and backward multiplies zeros); 1
    otherwise."""
    if arg != "auto":
        return float(arg)
    if dtype != "fp16":
        return 1.0
    return 2.0 ** max(0, round(math.log2(batch * hidden / 64)))


def run(net, x, steps, warmup, scale=1.0):
    """Median step time, and the fraction of the last step's gradient
    entries that are exactly zero. A loss scale S multiplies the loss and
    divides the learning rate (the same update; one scalar multiply more)."""
    opt = torch.optim.SGD(net.parameters(), lr=0.1 / scale)
    times = []
    for i in range(warmup + steps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        opt.zero_grad(set_to_none=True)
        loss = net(x).float().pow(2).mean()
        if scale != 1.0:
            loss = loss * scale
        loss.backward()
        opt.step()
        b.record()
        b.synchronize()
        if i >= warmup:
            times.append(a.elapsed_time(b) / 1e3)
    times.sort()
    grads = [p.grad for p in net.parameters() if p.grad is not None]
    zeros = sum(int((g == 0).sum()) for g in grads) / max(1, sum(g.numel() for g in grads))
    return times[len(times) // 2], zeros


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--buckets", default="25,100,400")
    p.add_argument("--dtypes", default="bf16", help="comma list of fp32, tf32, fp16, bf16")
    p.add_argument("--shapes", default="8x8192x4096,8x4096x512", help="LxHxB, comma list")
    p.add_argument("--data", default="randn", choices=["randn", "uniform"],
                   help="randn: PyTorch's usual inputs and Linear init; uniform: Ringmaster's "
                        "distributions (the bits the GEMMs toggle move the power cap's clocks)")
    p.add_argument("--loss-scale", default="auto",
                   help="auto: Ringmaster's power of two for fp16 (1 otherwise); or a number "
                        "(1: PyTorch's plain fp16 step, whose gradients underflow to zero here)")
    a = p.parse_args()
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    if world > 1:
        dist.init_process_group("nccl")
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    torch.manual_seed(1234 + rank)
    out = {"torch": torch.__version__, "world": world, "data": a.data, "results": []}
    shapes = [tuple(int(v) for v in s.split("x")) for s in a.shapes.split(",")]
    for dtype in a.dtypes.split(","):
        # tf32: fp32 parameters, TF32 tensor cores in the matmuls.
        torch.backends.cuda.matmul.allow_tf32 = dtype == "tf32"
        for layers, hidden, batch in shapes:
            steps, warmup = (20, 5) if hidden >= 8192 else (50, 10)
            x = inputs(batch, hidden, dtype, a.data)
            scale = loss_scale(a.loss_scale, dtype, batch, hidden)
            row = {"L": layers, "H": hidden, "B": batch, "dtype": dtype, "loss_scale": scale}
            if world == 1:
                t, zeros = run(model(layers, hidden, dtype, a.data), x, steps, warmup, scale)
                out["results"].append(dict(row, ddp=None, step_s=t, grad_zero_fraction=zeros))
            else:
                for cap in [int(c) for c in a.buckets.split(",")]:
                    net = nn.parallel.DistributedDataParallel(model(layers, hidden, dtype, a.data),
                                                              bucket_cap_mb=cap, static_graph=True)
                    t, zeros = run(net, x, steps, warmup, scale)
                    out["results"].append(dict(row, ddp=cap, step_s=t, grad_zero_fraction=zeros))
                    del net
            if rank == 0:
                print(out["results"][-3:], flush=True)
            del x
            torch.cuda.empty_cache()
    if rank == 0:
        json.dump(out, open(a.out, "w"), indent=1)
    if world > 1:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
