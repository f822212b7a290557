"""Fixtures for tests/test_attention.c: scaled dot-product attention written out by hand (torch 1.13 has no
F.scaled_dot_product_attention): softmax(scale * Q K^T + masks) V, with bottom-right aligned causality
(query i sees keys j <= i + Tk - Tq) and a [B, Tk] key padding mask (non-zero = padded), an additive bias
broadcast from [B or 1, H or 1, Tq, Tk] and the prefix-LM mask (with causality, keys j < prefix[b] are visible to
every query of batch b). Cases avoid rows whose every key is masked (torch gives NaN there; qkv gives 0)."""
import math

import torch
from fixture import Fixture


def sdpa(q, k, v, pad=None, causal=False, scale=None, bias=None, prefix=None):
    tq, tk = q.shape[-2], k.shape[-2]
    s = q @ k.transpose(-1, -2) * (scale if scale is not None else 1.0 / math.sqrt(q.shape[-1]))
    mask = torch.zeros(tq, tk, dtype=torch.bool)
    if causal:
        i = torch.arange(tq)[:, None]
        j = torch.arange(tk)[None, :]
        mask = j > i + (tk - tq)
    mask = mask[None, None]
    if causal and prefix is not None:
        mask = mask & (torch.arange(tk)[None, None, None, :] >= prefix.long()[:, None, None, None])
    if bias is not None:
        s = s + bias
    if pad is not None:
        mask = mask | (pad != 0)[:, None, None, :]
    return torch.softmax(s.masked_fill(mask, float("-inf")), dim=-1) @ v


fx = Fixture("attention", seed=7)
B, H = 2, 2
fx.case("basic", sdpa, [fx.rand(B, H, 5, 4), fx.rand(B, H, 6, 4), fx.rand(B, H, 6, 3)])
fx.case("causal", lambda q, k, v: sdpa(q, k, v, causal=True),
        [fx.rand(1, 3, 7, 8, lo=-2, hi=2), fx.rand(1, 3, 7, 8, lo=-2, hi=2), fx.rand(1, 3, 7, 8)])
pad_i = torch.tensor([[0, 0, 0, 0, 1, 1], [0, 1, 0, 0, 0, 0]], dtype=torch.int32)
fx.case("cross_causal_pad", lambda q, k, v, m: sdpa(q, k, v, pad=m, causal=True),
        [fx.rand(B, H, 4, 5), fx.rand(B, H, 6, 5), fx.rand(B, H, 6, 2), pad_i])
pad_f = torch.tensor([[0, 0, 1, 0, 0, 0, 0, 1], [1, 0, 0, 0, 0, 0, 0, 0]], dtype=torch.float32)
fx.case("padding_scale", lambda q, k, v, m: sdpa(q, k, v, pad=m, scale=0.3),
        [fx.rand(B, 1, 3, 6), fx.rand(B, 1, 8, 6), fx.rand(B, 1, 8, 7), pad_f], grad=[True, True, True, False])
# Longer than one 64-key block, with peaky scores: exercises the online softmax rescaling across blocks.
fx.case("blocks_causal", lambda q, k, v: sdpa(q, k, v, causal=True),
        [fx.rand(1, 2, 70, 16, lo=-3, hi=3), fx.rand(1, 2, 140, 16, lo=-3, hi=3), fx.rand(1, 2, 140, 16)])
# Additive biases (T5's relative position bias is [1, H, Tq, Tk]) and the prefix-LM mask.
fx.case("bias_heads", lambda q, k, v, b: sdpa(q, k, v, bias=b),
        [fx.rand(B, H, 5, 4), fx.rand(B, H, 6, 4), fx.rand(B, H, 6, 3), fx.rand(1, H, 5, 6, lo=-2, hi=2)])
fx.case("bias_full_causal_pad", lambda q, k, v, m, b: sdpa(q, k, v, pad=m, causal=True, bias=b),
        [fx.rand(B, H, 4, 5), fx.rand(B, H, 6, 5), fx.rand(B, H, 6, 2), pad_i, fx.rand(B, H, 4, 6, lo=-2, hi=2)])
fx.case("bias_blocks_causal", lambda q, k, v, b: sdpa(q, k, v, causal=True, bias=b),
        [fx.rand(1, 2, 70, 16, lo=-3, hi=3), fx.rand(1, 2, 140, 16, lo=-3, hi=3), fx.rand(1, 2, 140, 16),
         fx.rand(1, 2, 70, 140, lo=-3, hi=3)])
pre = torch.tensor([3, 6], dtype=torch.int32)
fx.case("prefix", lambda q, k, v, p: sdpa(q, k, v, causal=True, prefix=p),
        [fx.rand(B, H, 9, 4), fx.rand(B, H, 9, 4), fx.rand(B, H, 9, 3), pre])
pre_long = torch.tensor([70, 130], dtype=torch.int32)
fx.case("prefix_bias_blocks", lambda q, k, v, p, b: sdpa(q, k, v, causal=True, prefix=p, bias=b),
        [fx.rand(B, H, 150, 8, lo=-2, hi=2), fx.rand(B, H, 150, 8, lo=-2, hi=2), fx.rand(B, H, 150, 8), pre_long,
         fx.rand(B, 1, 150, 150, lo=-2, hi=2)])
fx.save()
