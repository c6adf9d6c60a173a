"""PyTorch DDP beside Ringmaster's training step (issue 5).

The same model: L bias-free Linear(H, H) + GELU (exact), bf16 parameters,
loss = mean(out^2), SGD lr 0.1. Per configuration: 5 (10) warm-up steps,
then 20 (50) steps each timed with CUDA events around
zero_grad/forward/backward/step; the median is reported. Run alone for one
GPU (no DDP), under torchrun for DDP with static_graph at the bucket caps
given.
"""
import argparse
import json
import os

import torch
import torch.distributed as dist
import torch.nn as nn


def model(layers, hidden):
    mods = []
    for _ in range(layers):
        mods += [nn.Linear(hidden, hidden, bias=False), nn.GELU()]
    return nn.Sequential(*mods).cuda().to(torch.bfloat16)


def run(net, x, steps, warmup):
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    times = []
    for i in range(warmup + steps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        opt.zero_grad(set_to_none=True)
        loss = net(x).float().pow(2).mean()
        loss.backward()
        opt.step()
        b.record()
        b.synchronize()
        if i >= warmup:
            times.append(a.elapsed_time(b) / 1e3)
    times.sort()
    return times[len(times) // 2]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--buckets", default="25,100,400")
    a = p.parse_args()
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    if world > 1:
        dist.init_process_group("nccl")
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    torch.manual_seed(1234 + rank)
    out = {"torch": torch.__version__, "world": world, "results": []}
    for layers, hidden, batch, steps, warmup in [(8, 8192, 4096, 20, 5), (8, 4096, 512, 50, 10)]:
        x = torch.randn(batch, hidden, device="cuda", dtype=torch.bfloat16)
        if world == 1:
            t = run(model(layers, hidden), x, steps, warmup)
            out["results"].append({"L": layers, "H": hidden, "B": batch, "ddp": None, "step_s": t})
        else:
            for cap in [int(c) for c in a.buckets.split(",")]:
                net = nn.parallel.DistributedDataParallel(model(layers, hidden), bucket_cap_mb=cap,
                                                          static_graph=True)
                t = run(net, x, steps, warmup)
                out["results"].append({"L": layers, "H": hidden, "B": batch, "ddp": cap, "step_s": t})
                del net
        if rank == 0:
            print(out["results"][-3:], flush=True)
        torch.cuda.empty_cache()
    if rank == 0:
        json.dump(out, open(a.out, "w"), indent=1)
    if world > 1:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
