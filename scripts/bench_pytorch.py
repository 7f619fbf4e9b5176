"""Eager PyTorch training steps of the model `attnres bench` times at its reference size.

The same model as attnres (SPEC section 7): token embedding, PreNorm blocks of causal
multi-head attention with half-split rotary embeddings and a SwiGLU MLP (no biases), RMSNorm
with eps 1e-6, an untied head; baseline residual sums, Full AttnRes and Block AttnRes with
zero-initialised pseudo-queries and key RMSNorm (SPEC sections 3-4), written the plain way a
researcher would write them in PyTorch: stack the sources, score, softmax, weighted sum.
One training step is forward, cross-entropy, backward and an AdamW step, as in attnres.

Arms are stepped in turn, round after round, so that the machine's drift hits each alike.
Prints one JSON object: per arm the median, quartiles and min/max of the step time and the
tokens per second at the median. Run through scripts/bench-pytorch.sh, which makes the venv.
"""

import argparse
import json
import math
import statistics
import time

import torch
import torch.nn.functional as F
from torch import nn


class RMSNorm(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.gain = nn.Parameter(torch.ones(d))

    def forward(self, x):
        return normalize(x) * self.gain


def normalize(x):
    return x * torch.rsqrt(x.square().mean(-1, keepdim=True) + 1e-6)


def rope_tables(t, hd):
    half = hd // 2
    i = torch.arange(hd) % half
    freq = 10000.0 ** (-2.0 * i / hd)
    angle = torch.arange(t)[:, None] * freq[None, :]
    return angle.cos(), angle.sin()


def rotate(x, cos, sin):
    half = x.shape[-1] // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], -1)
    return x * cos + rotated * sin


class Attention(nn.Module):
    def __init__(self, d, heads, out_std):
        super().__init__()
        self.heads = heads
        self.wq, self.wk, self.wv = (nn.Parameter(torch.randn(d, d) * 0.02) for _ in range(3))
        self.wo = nn.Parameter(torch.randn(d, d) * out_std)

    def forward(self, x, cos, sin):
        b, t, d = x.shape
        h = self.heads

        def split(w):
            return (x @ w).view(b, t, h, d // h).transpose(1, 2)

        q, k, v = rotate(split(self.wq), cos, sin), rotate(split(self.wk), cos, sin), split(self.wv)
        ctx = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return ctx.transpose(1, 2).reshape(b, t, d) @ self.wo


class Mlp(nn.Module):
    def __init__(self, d, hidden, out_std):
        super().__init__()
        self.w_gate = nn.Parameter(torch.randn(d, hidden) * 0.02)
        self.w_up = nn.Parameter(torch.randn(d, hidden) * 0.02)
        self.w_down = nn.Parameter(torch.randn(hidden, d) * out_std)

    def forward(self, x):
        return (F.silu(x @ self.w_gate) * (x @ self.w_up)) @ self.w_down


class Lm(nn.Module):
    """`block_size` None: the baseline; 1: Full AttnRes; S: Block AttnRes."""

    def __init__(self, vocab, d, n_blocks, heads, context, block_size):
        super().__init__()
        layers = 2 * n_blocks
        out_std = 0.02 / math.sqrt(layers)
        hidden = math.ceil(8.0 / 3.0 * d / 8) * 8
        self.embed = nn.Parameter(torch.randn(vocab, d) * 0.02)
        self.norms = nn.ModuleList(RMSNorm(d) for _ in range(layers))
        self.sublayers = nn.ModuleList(
            Attention(d, heads, out_std) if l % 2 == 0 else Mlp(d, hidden, out_std)
            for l in range(layers)
        )
        self.final_norm = RMSNorm(d)
        self.head = nn.Parameter(torch.randn(d, vocab) * 0.02)
        self.block_size = block_size
        if block_size is not None:
            self.queries = nn.Parameter(torch.zeros(layers + 1, d))
            self.key_gains = nn.Parameter(torch.ones(layers + 1, d))
        cos, sin = rope_tables(context, d // heads)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)

    def apply_layer(self, l, x):
        layer = self.sublayers[l]
        x = self.norms[l](x)
        return layer(x, self.cos, self.sin) if l % 2 == 0 else layer(x)

    def mix(self, l, sources):
        values = torch.stack(sources)  # [K, B, T, d]
        keys = normalize(values) * self.key_gains[l]
        weights = torch.einsum("kbtd,d->kbt", keys, self.queries[l]).softmax(0)
        return torch.einsum("kbt,kbtd->btd", weights, values)

    def forward(self, tokens):
        x = self.embed[tokens]
        n = len(self.sublayers)
        if self.block_size is None:
            for l in range(n):
                x = x + self.apply_layer(l, x)
        else:
            completed, partial = [x], None
            for l in range(n):
                if l % self.block_size == 0 and partial is not None:
                    completed.append(partial)
                    partial = None
                sources = completed + ([partial] if partial is not None else [])
                y = self.apply_layer(l, self.mix(l, sources))
                partial = y if partial is None else partial + y
            x = self.mix(n, completed + [partial])
        return self.final_norm(x) @ self.head


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, required=True)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--d-model", type=int, default=256)
    p.add_argument("--n-blocks", type=int, default=8)
    p.add_argument("--context", type=int, default=256)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--vocab", type=int, default=256)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    heads = max(a.d_model // 64, 1)
    arms = {"baseline": None, "full": 1, "block S=4": 4}
    b, t = a.batch_size, a.context
    tokens = (torch.arange(b * (t + 1)) * 7919 % a.vocab).view(b, t + 1)
    inputs, targets = tokens[:, :-1], tokens[:, 1:]
    models, optims, times = {}, {}, {}
    for name, s in arms.items():
        models[name] = Lm(a.vocab, a.d_model, a.n_blocks, heads, t, s)
        optims[name] = torch.optim.AdamW(models[name].parameters(), lr=1e-3, weight_decay=0.1)
        times[name] = []

    def step(name):
        start = time.perf_counter()
        logits = models[name](inputs)
        loss = F.cross_entropy(logits.reshape(-1, a.vocab), targets.reshape(-1))
        optims[name].zero_grad(set_to_none=True)
        loss.backward()
        optims[name].step()
        return time.perf_counter() - start

    for r in range(a.steps + 2):
        for name in arms:
            seconds = step(name)
            if r >= 2:  # two warm-up rounds, as attnres bench
                times[name].append(seconds)
    rows = []
    for name in arms:
        ts = sorted(times[name])
        q = statistics.quantiles(ts, n=4)
        rows.append({
            "label": name,
            "step_s_median": statistics.median(ts),
            "step_s_p25": q[0],
            "step_s_p75": q[2],
            "step_s_min": ts[0],
            "step_s_max": ts[-1],
            "tokens_per_s": b * t / statistics.median(ts),
        })
    print(json.dumps({
        "torch": torch.__version__,
        "threads": a.threads,
        "steps": a.steps,
        "batch": b,
        "context": t,
        "d_model": a.d_model,
        "n_blocks": a.n_blocks,
        "rows": rows,
    }))


if __name__ == "__main__":
    main()
