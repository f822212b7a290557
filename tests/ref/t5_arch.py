"""T5's architecture in PyTorch, as qkv's "t5" model type computes it (Hugging Face's T5ForConditionalGeneration
with tied embeddings: relative position bias from layer 0 of each stack shared by all its layers, T5LayerNorm = RMS
norm without bias, pre-norm, bias-free dense layers, unscaled attention logits, decoder output times d_model^-0.5
before the tied output projection), with Hugging Face's parameter names. No dropout. Used by tests/ref/t5_model.py
(fixtures) and bench/t5_torch.py (timing)."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def bucket(rel, bidirectional, num_buckets, max_distance):
    """T5's _relative_position_bucket (transformers, modeling_t5.py)."""
    buckets = 0
    if bidirectional:
        num_buckets //= 2
        buckets += (rel > 0).to(torch.long) * num_buckets
        rel = torch.abs(rel)
    else:
        rel = -torch.min(rel, torch.zeros_like(rel))
    max_exact = num_buckets // 2
    is_small = rel < max_exact
    large = max_exact + (torch.log(rel.float() / max_exact) / math.log(max_distance / max_exact)
                         * (num_buckets - max_exact)).to(torch.long)
    large = torch.min(large, torch.full_like(large, num_buckets - 1))
    return buckets + torch.where(is_small, rel, large)


class RMSNorm(nn.Module):
    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x):
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))


class Attention(nn.Module):
    def __init__(self, d, h, dk, rel_buckets=0):
        super().__init__()
        self.h, self.dk = h, dk
        self.q, self.k, self.v = (nn.Linear(d, h * dk, bias=False) for _ in range(3))
        self.o = nn.Linear(h * dk, d, bias=False)
        if rel_buckets:
            self.relative_attention_bias = nn.Embedding(rel_buckets, h)

    def forward(self, x, kv, bias):  # bias [1 or B, H, Tq, Tk] incl. masks as -inf
        B = x.shape[0]
        q = self.q(x).view(B, -1, self.h, self.dk).transpose(1, 2)
        k = self.k(kv).view(B, -1, self.h, self.dk).transpose(1, 2)
        v = self.v(kv).view(B, -1, self.h, self.dk).transpose(1, 2)
        a = torch.softmax(q @ k.transpose(-1, -2) + bias, -1)
        return self.o((a @ v).transpose(1, 2).reshape(B, -1, self.h * self.dk))


class SubLayer(nn.Module):
    def __init__(self, d, attn_name, attn):
        super().__init__()
        setattr(self, attn_name, attn)
        self.layer_norm = RMSNorm(d)


class FF(nn.Module):
    def __init__(self, d, dff):
        super().__init__()
        self.wi = nn.Linear(d, dff, bias=False)
        self.wo = nn.Linear(dff, d, bias=False)


class FFLayer(nn.Module):
    def __init__(self, d, dff):
        super().__init__()
        self.DenseReluDense = FF(d, dff)
        self.layer_norm = RMSNorm(d)

    def forward(self, x):
        f = self.DenseReluDense
        return x + f.wo(F.relu(f.wi(self.layer_norm(x))))


class Block(nn.Module):
    def __init__(self, d, h, dk, dff, decoder, rel_buckets):
        super().__init__()
        layers = [SubLayer(d, "SelfAttention", Attention(d, h, dk, rel_buckets))]
        if decoder:
            layers.append(SubLayer(d, "EncDecAttention", Attention(d, h, dk)))
        layers.append(FFLayer(d, dff))
        self.layer = nn.ModuleList(layers)


class Stack(nn.Module):
    def __init__(self, n, d, h, dk, dff, decoder, buckets, max_distance):
        super().__init__()
        self.block = nn.ModuleList(Block(d, h, dk, dff, decoder, buckets if i == 0 else 0) for i in range(n))
        self.final_layer_norm = RMSNorm(d)
        self.decoder, self.buckets, self.max_distance = decoder, buckets, max_distance

    def forward(self, x, pad, mem=None, mem_pad=None):
        T = x.shape[1]
        rel = torch.arange(T)[None, :] - torch.arange(T)[:, None]
        table = self.block[0].layer[0].SelfAttention.relative_attention_bias
        bias = table(bucket(rel, not self.decoder, self.buckets, self.max_distance)).permute(2, 0, 1)[None]
        neg = float("-inf")
        if self.decoder:
            bias = bias.masked_fill(torch.triu(torch.ones(T, T, dtype=torch.bool), 1), neg)
        else:
            bias = bias.masked_fill(pad.bool()[:, None, None, :], neg)
        for b in self.block:
            sa = b.layer[0]
            h = sa.layer_norm(x)
            x = x + sa.SelfAttention(h, h, bias)
            if self.decoder:
                ca = b.layer[1]
                cross = torch.zeros(mem.shape[0], 1, 1, mem.shape[1]).masked_fill(mem_pad.bool()[:, None, None, :], neg)
                x = x + ca.EncDecAttention(ca.layer_norm(x), mem, cross)
            x = b.layer[-1](x)
        return self.final_layer_norm(x)


class T5(nn.Module):
    def __init__(self, V, d, h, dk, dff, n_enc, n_dec, buckets, max_distance):
        super().__init__()
        self.d = d
        self.shared = nn.Embedding(V, d)
        self.encoder = Stack(n_enc, d, h, dk, dff, False, buckets, max_distance)
        self.decoder = Stack(n_dec, d, h, dk, dff, True, buckets, max_distance)

    def forward(self, src, src_pad, tgt):
        mem = self.encoder(self.shared(src.long()), src_pad)
        y = self.decoder(self.shared(tgt.long()), None, mem, src_pad)
        return (y * self.d ** -0.5) @ self.shared.weight.t()
