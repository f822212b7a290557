#!/usr/bin/python3
"""PyTorch side of `qkv bench t5`: one training step (forward, cross-entropy, backward, Adam with torch's defaults)
of the T5 architecture qkv's "t5" type computes (tests/ref/t5_arch.py: relative position bias, RMS norm, no biases,
tied embedding scaled by d_model^-0.5; no dropout) at the sizes of configs.json's nmt entry: shared vocabulary
8,000, d_model 256, 4 heads, d_ff 1024, 3 + 3 layers, 32 buckets up to distance 128, batch 32 x 64 source and 64
target tokens. Timed like ../shared/bench/torch_ref.py (warmup, then steps until max_seconds; one JSON line, same
fields, FLOPs counted as torch_ref.py counts nmt's).

Run with Debian's Python (torch 1.13):  /usr/bin/python3 bench/t5_torch.py
  options: --threads N (default 2) --max-seconds S --max-steps N --warmup N --min-steps N
"""
import argparse
import json
import os
import resource
import statistics
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "ref"))
from t5_arch import T5  # noqa: E402

C = {"vocab": 8000, "d_model": 256, "n_heads": 4, "d_ff": 1024, "n_enc_layers": 3, "n_dec_layers": 3,
     "num_buckets": 32, "max_distance": 128, "batch": 32, "src_len": 64, "tgt_len": 64}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--max-seconds", type=float, default=40.0)
    ap.add_argument("--max-steps", type=int, default=200)
    ap.add_argument("--min-steps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=3)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(1234)
    V, d, f, B, S, T = C["vocab"], C["d_model"], C["d_ff"], C["batch"], C["src_len"], C["tgt_len"]
    ne, nd = C["n_enc_layers"], C["n_dec_layers"]
    model = T5(V, d, C["n_heads"], d // C["n_heads"], f, ne, nd, C["num_buckets"], C["max_distance"])
    opt = torch.optim.Adam(model.parameters())
    src, tin, tout = torch.randint(0, V, (B, S)), torch.randint(0, V, (B, T)), torch.randint(0, V, (B, T))
    pad = torch.zeros(B, S)

    def step():
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(model(src, pad, tin).reshape(-1, V), tout.reshape(-1)).backward()
        opt.step()

    t0 = time.perf_counter()
    for _ in range(a.warmup):
        step()
    warm_s = time.perf_counter() - t0
    cpu0 = time.process_time()
    ts, start = [], time.perf_counter()
    while len(ts) < a.max_steps and (len(ts) < a.min_steps or time.perf_counter() - start < a.max_seconds):
        s = time.perf_counter()
        step()
        ts.append(time.perf_counter() - s)
    cpu = time.process_time() - cpu0
    nenc, nd_t = ne * (4.0 * d * d + 2.0 * d * f), nd * (6.0 * d * d + 2.0 * d * f) + float(d) * V
    nd_s, attn = nd * 2.0 * d * d, B * (ne * 4.0 * S * S * d + nd * (4.0 * T * T * d + 4.0 * T * S * d))
    flops = 3 * (2 * nenc * B * S + 2 * nd_s * B * S + 2 * nd_t * B * T + attn)
    med, best = statistics.median(ts), min(ts)
    out = {"bench": "torch_ref", "config": "t5", "mode": "train", "threads": a.threads, "torch": torch.__version__,
           "OPENBLAS_CORETYPE": os.environ.get("OPENBLAS_CORETYPE"),
           "params": sum(p.numel() for p in model.parameters()), "batch": B, "seq_len": T, "tokens_per_step": B * T,
           "steps": len(ts), "ms_step_min": round(best * 1e3, 3), "ms_step_median": round(med * 1e3, 3),
           "ms_step_mean": round(statistics.mean(ts) * 1e3, 3),
           "tokens_per_s_median": round(B * T / med, 1), "tokens_per_s_best": round(B * T / best, 1),
           "seqs_per_s_median": round(B / med, 2), "seqs_per_s_best": round(B / best, 2),
           "flops_per_step": flops, "gflops_median": round(flops / med / 1e9, 2),
           "cpu_s_per_step": round(cpu / len(ts), 4), "warmup_s": round(warm_s, 2),
           "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0, 1)}
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
