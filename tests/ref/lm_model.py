"""The GPT-2-style LM as torch modules with Hugging Face parameter names (torch Linear layout): qkv's `gpt` model.
Used by tests/ref/lm.py (fixtures) and bench/quality/lm.py (the PyTorch side of the quality comparison)."""
import math

import torch
import torch.nn.functional as F
from torch import nn


class Attn(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.d, self.h = d, h
        self.c_attn, self.c_proj = nn.Linear(d, 3 * d), nn.Linear(d, d)

    def forward(self, x):
        B, T, _ = x.shape
        d, h = self.d, self.h
        q, k, v = (t.view(B, T, h, d // h).transpose(1, 2) for t in self.c_attn(x).split(d, dim=2))
        a = (q @ k.transpose(-2, -1)) / math.sqrt(d // h)
        a = a.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf")).softmax(-1)
        return self.c_proj((a @ v).transpose(1, 2).reshape(B, T, d))


class Mlp(nn.Module):
    def __init__(self, d, f):
        super().__init__()
        self.c_fc, self.c_proj = nn.Linear(d, f), nn.Linear(f, d)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, d, h, f):
        super().__init__()
        self.ln_1, self.attn, self.ln_2, self.mlp = nn.LayerNorm(d), Attn(d, h), nn.LayerNorm(d), Mlp(d, f)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class Transformer(nn.Module):
    def __init__(self, V, n_ctx, d, h, f, L):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(V, d), nn.Embedding(n_ctx, d)
        self.h = nn.ModuleList(Block(d, h, f) for _ in range(L))
        self.ln_f = nn.LayerNorm(d)


class GPT(nn.Module):
    """Initialised as qkv (and ../shared/bench/torch_ref.py): matrices normal(0, 0.02), Linear biases torch's."""

    def __init__(self, V, n_ctx, d, h, f, L, tied=True):
        super().__init__()
        self.transformer = Transformer(V, n_ctx, d, h, f, L)
        self.lm_head = nn.Linear(d, V, bias=False)
        if tied:
            self.lm_head.weight = self.transformer.wte.weight
        for _, p in self.named_parameters():
            if p.dim() == 2:
                nn.init.normal_(p, 0.0, 0.02)

    def forward(self, ids):
        t = self.transformer
        x = t.wte(ids.long()) + t.wpe.weight[: ids.shape[1]]
        for b in t.h:
            x = b(x)
        return self.lm_head(t.ln_f(x))
