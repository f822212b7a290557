"""Fixtures for tests/test_ops_t5.c: T5's relative position buckets and bias, its RMS layer norm, and attention
with the bias added to unscaled scores as T5 does. The bucket function is T5's _relative_position_bucket
(transformers, modeling_t5.py), written out here in the same torch operations."""
import math

import torch
from fixture import Fixture


def bucket(rel, bidirectional=True, num_buckets=32, max_distance=128):
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


def rel_bias(table, tq, tk, q_offset, bidirectional, max_distance):
    ctx = torch.arange(tq, dtype=torch.long)[:, None] + q_offset
    mem = torch.arange(tk, dtype=torch.long)[None, :]
    b = bucket(mem - ctx, bidirectional, table.shape[0], max_distance)
    return table[b].permute(2, 0, 1).unsqueeze(0)  # [1, H, Tq, Tk]


def rms_norm(x, w, eps):
    var = x.pow(2).mean(-1, keepdim=True)
    y = x * torch.rsqrt(var + eps)
    return y if w is None else w * y


fx = Fixture("ops_t5", seed=26)
rel = torch.arange(-1000, 1001, dtype=torch.long)
for name, bidir, nb, md in [("bi_32_128", True, 32, 128), ("causal_32_128", False, 32, 128),
                            ("bi_8_20", True, 8, 20), ("causal_16_50", False, 16, 50), ("bi_64_7", True, 64, 17)]:
    fx.tensors[f"bucket_{name}"] = bucket(rel, bidir, nb, md).to(torch.int32).numpy()

fx.case("rpb_bi", lambda t: rel_bias(t, 7, 9, 0, True, 128), [fx.rand(32, 4)])
fx.case("rpb_causal", lambda t: rel_bias(t, 12, 12, 0, False, 20), [fx.rand(8, 3)])
fx.case("rpb_step", lambda t: rel_bias(t, 1, 40, 39, False, 128), [fx.rand(32, 2)])
fx.case("rpb_long", lambda t: rel_bias(t, 150, 150, 0, True, 64), [fx.rand(16, 2)])

D = 16
fx.case("rms", lambda x, w: rms_norm(x, w, 1e-6), [fx.rand(4, 6, D, lo=-2, hi=2), fx.rand(D, lo=0.5, hi=1.5)])
fx.case("rms_plain", lambda x: rms_norm(x, None, 1e-5), [fx.rand(5, 3, D)])
fx.case("rms_wide", lambda x, w: rms_norm(x, w, 1e-6), [fx.rand(3, 300, lo=-4, hi=4), fx.rand(300)])
fx.case("rms_transposed", lambda x, w: rms_norm(x.transpose(0, 1), w, 1e-6), [fx.rand(7, 5), fx.rand(7)])


def t5_attention(q, k, v, table):
    b = rel_bias(table, q.shape[2], k.shape[2], 0, True, 32)
    s = q @ k.transpose(-1, -2) + b  # T5 does not scale the scores
    return torch.softmax(s, -1) @ v


fx.case("t5_attention", t5_attention,
        [fx.rand(2, 3, 70, 8), fx.rand(2, 3, 70, 8), fx.rand(2, 3, 70, 8), fx.rand(16, 3, lo=-2, hi=2)])
fx.save()
