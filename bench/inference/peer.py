#!/usr/bin/env python3
"""The PyTorch peer of Ringmaster's LLM inference: the same model and
weights as bench/transformer/peer.py (bfloat16), served with a static
key/value cache: a prefill of `prompt` tokens per sequence through SDPA
(causal), then decode steps of one token per sequence, the decode step
compiled with torch.compile(mode="reduce-overhead") (CUDA graphs) over the
whole cache with a mask of the positions not yet written. Inputs are the
same hash rows as Ringmaster's (sequence b's token t: row b * (prompt +
generate) + t). Writes per-batch TTFT and per-step times (CUDA events) as
JSON, and the mean time per step of the same steps run back to back
(tpot_pipelined_s: the GPU's time without the host's launch gap).

  python3 bench/inference/peer.py --layers 4 --prompt 1024 --generate 256 \
      --batch 1 8 64 --out torch.json
"""
import argparse
import json
import os
import statistics
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "transformer"))
import peer as train_peer  # noqa: E402  (the weights, hash and presets)


class Server(torch.nn.Module):
    """The model and its caches as module buffers (static addresses, as
    CUDA graphs need; written in place by prefill and decode)."""

    def __init__(self, a, batch, device):
        super().__init__()
        a.seq = a.prompt + a.generate  # the rotary tables' positions
        self.a, self.batch = a, batch
        self.m = train_peer.Model(a, device).requires_grad_(False)
        cap = a.seq
        for i in range(a.layers):
            for name in ("k", "v"):
                self.register_buffer("%s%d" % (name, i), torch.zeros(
                    batch, a.kv_heads, cap, a.head_dim, device=device,
                    dtype=torch.bfloat16))
        self.register_buffer("keys", torch.arange(cap, device=device))

    def cache(self, i):
        return getattr(self, "k%d" % i), getattr(self, "v%d" % i)

    def inputs(self, first, count, device):
        """Rows first .. first + count - 1 of every sequence."""
        a = self.a
        rows = [uniform_at(1, (b * a.seq + first) * a.hidden, count * a.hidden, device)
                for b in range(self.batch)]
        return torch.stack(rows).view(self.batch, count, a.hidden).to(torch.bfloat16)

    def rope_at(self, t, positions):
        half = t.shape[-1] // 2
        rot = torch.cat([-t[..., half:], t[..., :half]], -1)
        cos, sin = self.m.cos[positions], self.m.sin[positions]
        return (t.float() * cos + rot.float() * sin).to(torch.bfloat16)

    def prefill(self, x):
        a, m, b, s = self.a, self.m, x.shape[0], x.shape[1]
        group = a.heads // a.kv_heads
        positions = torch.arange(s, device=x.device)
        for i, L in enumerate(m.layers):
            n1 = m.rms(x, L.g1)
            q = (n1 @ L.wq).view(b, s, a.heads, a.head_dim).transpose(1, 2)
            k = (n1 @ L.wk).view(b, s, a.kv_heads, a.head_dim).transpose(1, 2)
            v = (n1 @ L.wv).view(b, s, a.kv_heads, a.head_dim).transpose(1, 2)
            q, k = self.rope_at(q, positions), self.rope_at(k, positions)
            kc, vc = self.cache(i)
            kc[:, :, :s] = k
            vc[:, :, :s] = v
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                               enable_gqa=group > 1)
            x = x + o.transpose(1, 2).reshape(b, s, -1) @ L.wo
            n2 = m.rms(x, L.g2)
            x = x + (F.silu(n2 @ L.wg) * (n2 @ L.wu)) @ L.wd
        return m.rms(x, m.gf)

    def decode(self, x, pos):
        """One token per sequence at position pos (a 1-element tensor):
        static shapes, the cache written in place."""
        a, m, b = self.a, self.m, x.shape[0]
        group = a.heads // a.kv_heads
        mask = (self.keys <= pos).view(1, 1, 1, -1)
        for i, L in enumerate(m.layers):
            n1 = m.rms(x, L.g1)
            q = (n1 @ L.wq).view(b, 1, a.heads, a.head_dim).transpose(1, 2)
            k = (n1 @ L.wk).view(b, 1, a.kv_heads, a.head_dim).transpose(1, 2)
            v = (n1 @ L.wv).view(b, 1, a.kv_heads, a.head_dim).transpose(1, 2)
            q, k = self.rope_at(q, pos), self.rope_at(k, pos)
            kc, vc = self.cache(i)
            kc.index_copy_(2, pos, k)
            vc.index_copy_(2, pos, v)
            o = F.scaled_dot_product_attention(q, kc, vc,
                                               attn_mask=mask,
                                               enable_gqa=group > 1)
            x = x + o.transpose(1, 2).reshape(b, 1, -1) @ L.wo
            n2 = m.rms(x, L.g2)
            x = x + (F.silu(n2 @ L.wg) * (n2 @ L.wu)) @ L.wd
        return m.rms(x, m.gf)


def uniform_at(key, start, count, device):
    """TransformerUniform(key, start .. start + count - 1), as
    bench/transformer/peer.py's uniform from an offset."""
    z = torch.arange(start, start + count, device=device, dtype=torch.int64)
    z = z + train_peer.signed64(key * 0x9E3779B97F4A7C15 + 0x632BE59BD9B4E019)
    z = (z ^ train_peer.lsr(z, 30)) * train_peer.signed64(0xBF58476D1CE4E5B9)
    z = (z ^ train_peer.lsr(z, 27)) * train_peer.signed64(0x94D049BB133111EB)
    z = z ^ train_peer.lsr(z, 31)
    return train_peer.lsr(z, 11).to(torch.float64) * 2.0 ** -52 - 1.0


def timed(fn, *args):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    out = fn(*args)
    end.record()
    torch.cuda.synchronize()
    return out, start.elapsed_time(end) / 1e3


def serve(a, batch, device):
    torch.manual_seed(0)
    srv = Server(a, batch, device)
    prompt = srv.inputs(0, a.prompt, device)
    steps = [srv.inputs(a.prompt + g, 1, device).clone() for g in range(a.generate)]
    step_in = torch.empty_like(steps[0])
    pos = torch.zeros(1, dtype=torch.long, device=device)
    decode = torch.compile(srv.decode, mode="reduce-overhead", fullgraph=True)
    ttft, tpot, piped = [], [], []

    def feed(g):  # step g's input row and position, in place
        step_in.copy_(steps[g])
        pos.fill_(a.prompt + g)

    with torch.inference_mode():
        for r in range(a.repeats + 1):  # request 0: warm-up and compilation
            _, t = timed(srv.prefill, prompt)
            if r > 0:
                ttft.append(t)
            for g in range(a.generate):
                feed(g)
                _, t = timed(decode, step_in, pos)
                if r > 0:
                    tpot.append(t)
            if r > 0:
                # The same steps again (each rewrites the cache row it wrote
                # above), back to back with no synchronization between them:
                # the host's Python work per step overlaps the GPU's, so this
                # is the GPU-bound time per token (the input copies
                # included), without the launch gap the per-step times have.
                start = torch.cuda.Event(enable_timing=True)
                end = torch.cuda.Event(enable_timing=True)
                start.record()
                for g in range(a.generate):
                    feed(g)
                    decode(step_in, pos)
                end.record()
                torch.cuda.synchronize()
                piped.append(start.elapsed_time(end) / 1e3 / a.generate)
    tpot.sort()
    return {"ttft_s": statistics.median(ttft), "tpot_p50_s": statistics.median(tpot),
            "tpot_p99_s": tpot[min(len(tpot) - 1, int(0.99 * (len(tpot) - 1) + 0.5))],
            "tpot_mean_s": statistics.fmean(tpot),
            "tpot_pipelined_s": statistics.median(piped)}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--preset", default="llama3-8b", choices=sorted(train_peer.PRESETS))
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--prompt", type=int, default=1024)
    p.add_argument("--generate", type=int, default=256)
    p.add_argument("--batch", type=int, nargs="+", default=[1])
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--out", required=True)
    a = p.parse_args()
    for key, value in train_peer.PRESETS[a.preset].items():
        setattr(a, key, value)
    device = torch.device("cuda")
    out = {"torch": torch.__version__, "device": torch.cuda.get_device_name(0),
           "batches": {}}
    for batch in a.batch:
        r = serve(a, batch, device)
        out["batches"][str(batch)] = r
        print("batch %d: TTFT %.2f ms, TPOT p50 %.3f ms p99 %.3f ms, pipelined %.3f ms" % (
            batch, r["ttft_s"] * 1e3, r["tpot_p50_s"] * 1e3, r["tpot_p99_s"] * 1e3,
            r["tpot_pipelined_s"] * 1e3), flush=True)
        torch.cuda.empty_cache()
    json.dump(out, open(a.out, "w"), indent=1)


if __name__ == "__main__":
    main()
