#!/usr/bin/env python3
"""PyTorch torch.distributed collectives, timed the way Ringmaster times it.

The peer reference for bench/allreduce: per size, 5 warm-up ops, one op to
choose ops per sample (about 2 ms, at most 1000), then samples of that many
back-to-back ops between CUDA events, each after a barrier; a sample's value is
the slowest rank's time per op; stop when the 95% CI half-width is within 1% of
the mean, after 100 samples or when samples add up to 1 s (min 5 samples).
Sizes follow nccl-tests: the whole (gathered) buffer for all-gather and
reduce-scatter. busbw = algbw x 2(n-1)/n (all-reduce), (n-1)/n (all-gather,
reduce-scatter), 1 (send/recv to the ring neighbour); GB = 1e9 bytes.
torch's all_reduce is in-place; the others are out-of-place.

Run: torchrun --standalone --nproc_per_node=2 torch_collectives.py --out torch.json
"""
import argparse
import json
import math
import os
import statistics

import torch
import torch.distributed as dist

T975 = [0, 12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
        2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
        2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042]


def t975(df):
    if df <= 30:
        return T975[df]
    z = 1.959963984540054
    return z + (z**3 + z) / (4 * df) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df * df)


def ci_rel(xs):
    n = len(xs)
    if n < 2:
        return math.inf
    m = statistics.fmean(xs)
    return t975(n - 1) * statistics.stdev(xs) / math.sqrt(n) / m


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--min-bytes", type=int, default=8)
    ap.add_argument("--max-bytes", type=int, default=8 << 30)
    ap.add_argument("--dtypes", default="float32,bfloat16")
    ap.add_argument("--collectives", default="all_reduce")
    args = ap.parse_args()

    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank)))
    dist.init_process_group("nccl")
    dev = torch.device("cuda")
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    results = []
    nxt, prv = (rank + 1) % world, (rank - 1 + world) % world
    factors = {"all_reduce": 2 * (world - 1) / world, "all_gather": (world - 1) / world,
               "reduce_scatter": (world - 1) / world, "send_recv": 1.0}
    for coll in args.collectives.split(","):
      for dname in args.dtypes.split(","):
        dtype = getattr(torch, dname)
        esize = torch.tensor([], dtype=dtype).element_size()
        size = args.min_bytes
        while size <= args.max_bytes:
            count = size // esize
            if coll in ("all_gather", "reduce_scatter"):
                count = count // world * world
            # Small integers: exact in every type, never zeros.
            full = (torch.arange(count, device=dev) % 4 + 1).to(dtype)
            if coll == "all_reduce":
                op = lambda: dist.all_reduce(full)
            elif coll == "all_gather":
                part = full[rank * (count // world):(rank + 1) * (count // world)].clone()
                gathered = torch.empty_like(full)
                op = lambda: dist.all_gather_into_tensor(gathered, part)
            elif coll == "reduce_scatter":
                part = torch.empty(count // world, device=dev, dtype=dtype)
                op = lambda: dist.reduce_scatter_tensor(part, full)
            else:
                recv = torch.empty_like(full)
                def op():
                    for r in dist.batch_isend_irecv([dist.P2POp(dist.isend, full, nxt),
                                                     dist.P2POp(dist.irecv, recv, prv)]):
                        r.wait()

            def timed(k):
                torch.cuda.synchronize()
                start.record()
                for _ in range(k):
                    op()
                stop.record()
                stop.synchronize()
                return start.elapsed_time(stop) * 1e-3

            def slowest(v):
                t = torch.tensor([v], device=dev, dtype=torch.float64)
                dist.all_reduce(t, op=dist.ReduceOp.MAX)
                return t.item()

            timed(5)
            one = slowest(timed(1))
            iters = max(1, min(1000, math.ceil(2e-3 / one)))
            samples, total = [], 0.0
            while True:
                dist.barrier()
                torch.cuda.synchronize()
                s = slowest(timed(iters))
                samples.append(s / iters)
                total += s
                n = len(samples)
                if n >= 5 and (n >= 100 or total >= 1.0 or ci_rel(samples) <= 0.01):
                    break
            med = statistics.median(samples)
            algbw = count * esize / med / 1e9
            results.append({"collective": coll, "dtype": dname, "size_bytes": count * esize,
                            "median_s": med, "samples": len(samples), "iters_per_sample": iters,
                            "algbw_gbps": algbw, "busbw_gbps": algbw * factors[coll]})
            if rank == 0:
                print(f"torch {coll:14s} {dname:9s} {count * esize:12d} B  {med * 1e6:10.2f} us  "
                      f"busbw {results[-1]['busbw_gbps']:8.2f} GB/s  n={len(samples)}", flush=True)
            size *= 2
    if rank == 0:
        with open(args.out, "w") as f:
            json.dump({"torch": torch.__version__, "nccl": ".".join(map(str, torch.cuda.nccl.version())),
                       "world": world, "results": results}, f, indent=1)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
