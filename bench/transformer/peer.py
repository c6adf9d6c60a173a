#!/usr/bin/env python3
"""The PyTorch peer of Ringmaster's transformer training step: the same
decoder-only block stack (pre-norm RMSNorm, grouped-query attention with
rotary embeddings through SDPA, SwiGLU, a final RMSNorm, loss
0.5 * mean((y - target)^2)), the same initial weights and data (the
splitmix64 hash of core/transformer.cc, computed on the GPU), bfloat16
parameters and AdamW (beta 0.9/0.95, eps 1e-8, weight decay on the
matrices only). Runs the step eagerly and under torch.compile, each from
fresh weights, and writes per-step times (CUDA events) and losses as JSON.

  python3 bench/transformer/peer.py --layers 4 --seq 4096 --out torch.json
"""
import argparse
import json
import math
import statistics

import torch
import torch.nn.functional as F

PRESETS = {  # core/transformer.cc's presets
    "llama3-8b": dict(hidden=4096, heads=32, kv_heads=8, head_dim=128,
                      ffn=14336, theta=500000.0),
}
MASK64 = (1 << 64) - 1


def signed64(c):
    c &= MASK64
    return c - (1 << 64) if c >= (1 << 63) else c


def lsr(z, k):
    """Logical right shift of int64 values (torch's >> is arithmetic)."""
    return (z >> k) & ((1 << (64 - k)) - 1)


def uniform(key, count, device):
    """TransformerUniform(key, 0..count-1) in float64: int64 arithmetic
    wraps as uint64 does."""
    z = torch.arange(count, device=device, dtype=torch.int64)
    z = z + signed64(key * 0x9E3779B97F4A7C15 + 0x632BE59BD9B4E019)
    z = (z ^ lsr(z, 30)) * signed64(0xBF58476D1CE4E5B9)
    z = (z ^ lsr(z, 27)) * signed64(0x94D049BB133111EB)
    z = z ^ lsr(z, 31)
    return lsr(z, 11).to(torch.float64) * 2.0 ** -52 - 1.0


def matrix(layer, which, rows, cols, fan_in, device):
    key = 16 * (layer + 1) + which  # kQ=1 ... kDown=7
    w = uniform(key, rows * cols, device).view(rows, cols) / math.sqrt(fan_in)
    return torch.nn.Parameter(w.to(torch.bfloat16))


class Model(torch.nn.Module):
    def __init__(self, a, device):
        super().__init__()
        h, q, kv, f = a.hidden, a.heads * a.head_dim, a.kv_heads * a.head_dim, a.ffn
        self.a = a
        self.layers = torch.nn.ModuleList()
        for l in range(a.layers):
            m = torch.nn.Module()
            m.g1 = torch.nn.Parameter(torch.ones(h, device=device, dtype=torch.bfloat16))
            m.wq = matrix(l, 1, h, q, h, device)
            m.wk = matrix(l, 2, h, kv, h, device)
            m.wv = matrix(l, 3, h, kv, h, device)
            m.wo = matrix(l, 4, q, h, q, device)
            m.g2 = torch.nn.Parameter(torch.ones(h, device=device, dtype=torch.bfloat16))
            m.wg = matrix(l, 5, h, f, h, device)
            m.wu = matrix(l, 6, h, f, h, device)
            m.wd = matrix(l, 7, f, h, f, device)
            self.layers.append(m)
        self.gf = torch.nn.Parameter(torch.ones(h, device=device, dtype=torch.bfloat16))
        half = a.head_dim // 2
        inv = a.theta ** (-2.0 * torch.arange(half, dtype=torch.float64) / a.head_dim)
        ang = torch.arange(a.seq, dtype=torch.float64)[:, None] * inv[None, :]
        self.register_buffer("cos", torch.cat([ang.cos(), ang.cos()], -1).float().to(device))
        self.register_buffer("sin", torch.cat([ang.sin(), ang.sin()], -1).float().to(device))

    def rms(self, x, g):
        xf = x.float()
        xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-5)
        return xf.to(torch.bfloat16) * g

    def rope(self, t):
        half = t.shape[-1] // 2
        rot = torch.cat([-t[..., half:], t[..., :half]], -1)
        return (t.float() * self.cos + rot.float() * self.sin).to(torch.bfloat16)

    def forward(self, x):
        a = self.a
        b, s = x.shape[0], x.shape[1]
        group = a.heads // a.kv_heads
        for m in self.layers:
            n1 = self.rms(x, m.g1)
            q = (n1 @ m.wq).view(b, s, a.heads, a.head_dim).transpose(1, 2)
            k = (n1 @ m.wk).view(b, s, a.kv_heads, a.head_dim).transpose(1, 2)
            v = (n1 @ m.wv).view(b, s, a.kv_heads, a.head_dim).transpose(1, 2)
            q, k = self.rope(q), self.rope(k)
            k = k.repeat_interleave(group, dim=1)
            v = v.repeat_interleave(group, dim=1)
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + o.transpose(1, 2).reshape(b, s, -1) @ m.wo
            n2 = self.rms(x, m.g2)
            x = x + (F.silu(n2 @ m.wg) * (n2 @ m.wu)) @ m.wd
        return self.rms(x, self.gf)


def run(a, compiled, device):
    torch.manual_seed(0)
    model = Model(a, device)
    n = a.micro_batch * a.seq * a.hidden
    x = uniform(1, n, device).view(a.micro_batch, a.seq, a.hidden).to(torch.bfloat16)
    target = (0.5 * uniform(2, n, device)).view(a.micro_batch, a.seq, a.hidden).float()
    gains = [p for name, p in model.named_parameters() if name.split(".")[-1].startswith("g")]
    mats = [p for name, p in model.named_parameters() if not name.split(".")[-1].startswith("g")]
    opt = torch.optim.AdamW([{"params": mats, "weight_decay": a.weight_decay},
                             {"params": gains, "weight_decay": 0.0}],
                            lr=a.lr, betas=(0.9, 0.95), eps=1e-8)

    def loss_fn(inp):
        y = model(inp)
        return 0.5 * (y.float() - target).pow(2).mean()

    step_fn = torch.compile(loss_fn) if compiled else loss_fn
    times, losses = [], []
    torch.cuda.reset_peak_memory_stats()
    for i in range(a.warmup + a.steps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        opt.zero_grad(set_to_none=True)
        loss = step_fn(x)
        loss.backward()
        opt.step()
        end.record()
        torch.cuda.synchronize()
        losses.append(loss.item())
        if i >= a.warmup:
            times.append(start.elapsed_time(end) / 1e3)
    return {"step_s": times, "median_s": statistics.median(times), "losses": losses,
            "peak_memory_bytes": torch.cuda.max_memory_allocated()}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--preset", default="llama3-8b")
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--seq", type=int, default=4096)
    p.add_argument("--micro-batch", dest="micro_batch", type=int, default=1)
    p.add_argument("--lr", type=float, default=1e-4)
    p.add_argument("--weight-decay", dest="weight_decay", type=float, default=0.0)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--modes", default="eager,compile")
    p.add_argument("--out", required=True)
    a = p.parse_args()
    for k, v in PRESETS[a.preset].items():
        setattr(a, k, v)
    device = torch.device("cuda")
    out = {"torch": torch.__version__, "args": vars(a),
           "sdpa_backends": {"flash": torch.backends.cuda.flash_sdp_enabled(),
                             "cudnn": torch.backends.cuda.cudnn_sdp_enabled()}}
    for mode in a.modes.split(","):
        out[mode] = run(a, mode == "compile", device)
        print("%s: median step %.2f ms, losses %s" % (
            mode, out[mode]["median_s"] * 1e3,
            ", ".join("%.6f" % v for v in out[mode]["losses"][:3])), flush=True)
        torch.cuda.empty_cache()
    json.dump(out, open(a.out, "w"), indent=1)


if __name__ == "__main__":
    main()
