"""Fixtures for tests/test_lsh_attention.c: LSH self-attention as Trax's LSHSelfAttention computes it
(include/qkv/lsh_attention.h), written again in PyTorch with the same rotations passed in, so the hashes agree.
Autograd gives the reference gradients (the sort is a constant, as in Trax)."""
import math

import torch
from fixture import Fixture


def hash_buckets(r, factor):
    """r [n_hashes, T, columns] rotated vectors -> buckets [n_hashes, T]. factor 0: argmax([r ; -r]). factor n1:
    Trax's factorized n_buckets = [n1, n2], bucket = argmax of the first n1/2 columns' [r ; -r] + n1 * the argmax
    of the other columns'."""
    if not factor:
        return torch.argmax(torch.cat([r, -r], dim=-1), dim=-1)
    h1 = factor // 2
    r1, r2 = r[..., :h1], r[..., h1:]
    b1 = torch.argmax(torch.cat([r1, -r1], dim=-1), dim=-1)
    b2 = torch.argmax(torch.cat([r2, -r2], dim=-1), dim=-1)
    return b1 + factor * b2


def lsh_attention(qk, v, rot, chunk_len, causal=False, exclude_self=True, pad=None, n_hashes=1, factor=0):
    B, H, T, D = qk.shape
    if rot is not None:
        n_hashes, half = rot.shape[1], rot.shape[2]
        n_buckets = factor * 2 * (half - factor // 2) if factor else 2 * half
    else:
        n_buckets = 1
    khat = qk / torch.sqrt((qk * qk).mean(-1, keepdim=True) + 1e-6)
    scale = 1.0 / math.sqrt(D)
    outs = []
    for b in range(B):
        heads = []
        for h in range(H):
            x = qk[b, h]
            if rot is not None:
                r = torch.einsum("td,dhi->hti", x.detach(), rot)
                buckets = hash_buckets(r, factor)
            else:
                buckets = torch.zeros(n_hashes, T, dtype=torch.long)
            buckets = (buckets + torch.arange(n_hashes).reshape(-1, 1) * n_buckets).reshape(-1)
            ticker = torch.arange(n_hashes * T)
            key = T * buckets + ticker % T
            sticker = torch.argsort(key)
            undo = torch.argsort(sticker)
            st = sticker % T
            nc = n_hashes * T // chunk_len
            sq = x[st].reshape(nc, chunk_len, D)
            sk = khat[b, h][st].reshape(nc, chunk_len, D)
            sv = v[b, h][st].reshape(nc, chunk_len, -1)
            pos = st.reshape(nc, chunk_len)
            # keys: the chunk before (wrapping), then the chunk itself
            kk = torch.cat([torch.roll(sk, 1, 0), sk], dim=1)
            vv = torch.cat([torch.roll(sv, 1, 0), sv], dim=1)
            kp = torch.cat([torch.roll(pos, 1, 0), pos], dim=1)
            dots = scale * (sq @ kk.transpose(-1, -2))
            qi = pos.unsqueeze(-1)
            kj = kp.unsqueeze(-2)
            if causal:
                dots = dots - 1e9 * (qi < kj).float()
            if exclude_self:
                dots = dots - 1e5 * (qi == kj).float()
            if pad is not None:
                dots = dots - 1e9 * (pad[b][kj] != 0).float()
            lse = torch.logsumexp(dots, dim=-1, keepdim=True)
            p = torch.exp(dots - lse)
            so = (p @ vv).reshape(n_hashes * T, -1)
            slse = lse.reshape(n_hashes * T)
            o = so[undo].reshape(n_hashes, T, -1)
            lg = slse[undo].reshape(n_hashes, T, 1)
            w = torch.exp(lg - torch.logsumexp(lg, dim=0, keepdim=True))
            heads.append((o * w).sum(0))
        outs.append(torch.stack(heads))
    return torch.stack(outs)


fx = Fixture("lsh_attention", seed=27)
g = torch.Generator().manual_seed(5)
# Two heads, 4 buckets, one round; chunks of 4 over T = 16.
rot1 = torch.randn(8, 1, 2, generator=g)
fx.case("one_round", lambda q, v, r: lsh_attention(q, v, r, 4), [fx.rand(2, 2, 16, 8), fx.rand(2, 2, 16, 5), rot1],
        grad=[True, True, False])
# Three rounds of 8 buckets, causal.
rot3 = torch.randn(8, 3, 4, generator=g)
fx.case("causal_3_rounds", lambda q, v, r: lsh_attention(q, v, r, 4, causal=True),
        [fx.rand(1, 2, 24, 8), fx.rand(1, 2, 24, 6), rot3], grad=[True, True, False])
# Padding (the last 5 positions of the second sequence), two rounds, not causal.
rot2 = torch.randn(8, 2, 2, generator=g)
pad = torch.zeros(2, 16, dtype=torch.int32)
pad[1, 11:] = 1
fx.case("padded_2_rounds", lambda q, v, r, m: lsh_attention(q, v, r, 8, pad=m),
        [fx.rand(2, 1, 16, 8), fx.rand(2, 1, 16, 4), rot2, pad], grad=[True, True, False, False])
# Factorized hashing: 4 x 6 = 24 buckets per round from 2 + 3 rotation columns, two rounds, T = 48 (not causal:
# a causal query alone with two copies of itself meets float32 rounding of the 1e5 self mask, not the hash).
rotf = torch.randn(8, 2, 5, generator=g)
fx.case("factorized_2_rounds", lambda q, v, r: lsh_attention(q, v, r, 8, factor=4),
        [fx.rand(1, 2, 48, 8), fx.rand(1, 2, 48, 4), rotf], grad=[True, True, False])
fx.save()
