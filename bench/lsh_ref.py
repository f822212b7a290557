#!/usr/bin/python3
"""PyTorch timing beside `qkv bench lsh`: one causal shared-QK self-attention block (projections x -> qk, v without
bias, attention, out-projection with bias), forward + backward of sum(out), batch 1, 8 heads of 64.

  mode lsh : LSH attention as tests/ref/lsh_attention.py computes it (Trax's LSHSelfAttention), vectorised over
             heads and chunks with gathers and sorts; chunks of 64, 2 hash rounds, n_buckets = 2 T / 64
  mode full: the same projections, q = qk and k = qk normalised, torch's scaled_dot_product attention as PyTorch
             1.13 computes it (softmax of the full [H, T, T] scores)

Run with Debian's Python (python3-torch):  /usr/bin/python3 bench/lsh_ref.py --mode lsh --seq-len 4096
Prints one JSON line with the fields of ../shared/bench/torch_ref.py (config, mode, threads, batch, seq_len, steps,
ms_step_{min,median,mean}, tokens_per_s_median, peak_rss_mib) plus us_per_token."""
import argparse
import json
import math
import resource
import statistics
import time

import torch


def lsh_attention(qk, v, rot, chunk):
    B, H, T, D = qk.shape
    nh, half = rot.shape[1], rot.shape[2]
    nb = 2 * half
    khat = qk / torch.sqrt((qk * qk).mean(-1, keepdim=True) + 1e-6)
    with torch.no_grad():
        r = torch.einsum("bhtd,dri->bhrti", qk, rot)
        buckets = torch.argmax(torch.cat([r, -r], dim=-1), dim=-1)
        buckets = (buckets + torch.arange(nh).view(1, 1, nh, 1) * nb).reshape(B, H, nh * T)
        ticker = torch.arange(nh * T)
        sticker = torch.argsort(T * buckets + ticker % T, dim=-1)
        undo = torch.argsort(sticker, dim=-1)
        st = sticker % T
    nc = nh * T // chunk

    def take(x):
        return x.gather(2, st.unsqueeze(-1).expand(B, H, nh * T, x.shape[-1])).view(B, H, nc, chunk, x.shape[-1])

    sq, sk, sv = take(qk), take(khat), take(v)
    pos = st.view(B, H, nc, chunk)
    kk = torch.cat([torch.roll(sk, 1, 2), sk], dim=3)
    vv = torch.cat([torch.roll(sv, 1, 2), sv], dim=3)
    kp = torch.cat([torch.roll(pos, 1, 2), pos], dim=3)
    dots = (sq @ kk.transpose(-1, -2)) / math.sqrt(D)
    qi, kj = pos.unsqueeze(-1), kp.unsqueeze(-2)
    dots = dots - 1e9 * (qi < kj).float() - 1e5 * (qi == kj).float()
    lse = torch.logsumexp(dots, dim=-1, keepdim=True)
    so = (torch.exp(dots - lse) @ vv).view(B, H, nh * T, -1)
    o = so.gather(2, undo.unsqueeze(-1).expand_as(so)).view(B, H, nh, T, -1)
    lg = lse.view(B, H, nh * T).gather(2, undo).view(B, H, nh, T, 1)
    return (o * torch.exp(lg - torch.logsumexp(lg, dim=2, keepdim=True))).sum(2)


def full_attention(qk, v):
    T, D = qk.shape[2], qk.shape[3]
    k = qk / torch.sqrt((qk * qk).mean(-1, keepdim=True) + 1e-6)
    s = (qk @ k.transpose(-1, -2)) / math.sqrt(D)
    s = s.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
    return torch.softmax(s, dim=-1) @ v


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=["lsh", "full"], default="lsh")
    ap.add_argument("--seq-len", type=int, default=4096)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--max-seconds", type=float, default=15)
    ap.add_argument("--max-steps", type=int, default=100)
    ap.add_argument("--warmup", type=int, default=1)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(1234)
    B, H, dh, T, chunk, nh = 1, 8, 64, a.seq_len, 64, 2
    E = H * dh
    lim = 1 / math.sqrt(E)
    x = torch.randn(B, T, E, requires_grad=True)
    w_qk, w_v, w_out = [(torch.rand(E, E) * 2 - 1).mul_(lim).requires_grad_() for _ in range(3)]
    b_out = torch.zeros(E, requires_grad=True)

    def step():
        for t in (x, w_qk, w_v, w_out, b_out):
            t.grad = None
        qk = (x @ w_qk.t()).view(B, T, H, dh).transpose(1, 2)
        v = (x @ w_v.t()).view(B, T, H, dh).transpose(1, 2)
        if a.mode == "lsh":
            rot = torch.randn(dh, nh, max(1, T // chunk))
            o = lsh_attention(qk, v, rot, chunk)
        else:
            o = full_attention(qk, v)
        y = o.transpose(1, 2).reshape(B, T, E) @ w_out.t() + b_out
        y.sum().backward()

    for _ in range(a.warmup):
        step()
    ms, start = [], time.perf_counter()
    while len(ms) < a.max_steps and (len(ms) < 2 or time.perf_counter() - start < a.max_seconds):
        t0 = time.perf_counter()
        step()
        ms.append(1000 * (time.perf_counter() - t0))
    med = statistics.median(ms)
    print(json.dumps({"bench": "torch", "config": "lsh", "mode": a.mode, "threads": a.threads, "batch": B,
                      "seq_len": T, "steps": len(ms), "ms_step_min": round(min(ms), 3),
                      "ms_step_median": round(med, 3), "ms_step_mean": round(statistics.mean(ms), 3),
                      "tokens_per_s_median": round(B * T / med * 1000, 1), "us_per_token": 1000 * med / (B * T),
                      "torch": torch.__version__,
                      "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0}))


if __name__ == "__main__":
    main()
