#!/usr/bin/python3
"""PyTorch side of `qkv bench siamese`: training steps of the Siamese duplicate detector (one Embedding -> LSTM ->
masked mean -> F.normalize encoder applied to both texts, the Trax course's triplet loss with mean and closest
negatives, Adam) on random token ids: vocab 8192, d_model 128, 1 layer, 32 pairs of 32 tokens. Timed like
../shared/bench/torch_ref.py (warmup, then steps until max_seconds; one JSON line, same fields).

Run with Debian's Python (torch 1.13):  /usr/bin/python3 bench/siamese_ref.py
  options: --threads N (default 2) --max-seconds S --max-steps N --warmup N --min-steps N --seq-len T
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

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "quality"))
from siamese import triplet_loss  # noqa: E402  (the loss the quality comparison uses)
from configs_entry import DEFAULT_FILE, entry  # noqa: E402

DEFAULTS = {"vocab": 8192, "d_model": 128, "n_layers": 1, "batch": 32, "seq_len": 32, "margin": 0.25}


class Encoder(torch.nn.Module):
    def __init__(self, c):
        super().__init__()
        self.embedding = torch.nn.Embedding(c["vocab"], c["d_model"])
        self.rnn = torch.nn.LSTM(c["d_model"], c["d_model"], c["n_layers"], batch_first=True)

    def forward(self, x, mask):
        h, _ = self.rnn(self.embedding(x))
        return F.normalize((h * mask.unsqueeze(-1)).sum(1) / mask.sum(1, keepdim=True).clamp(min=1), dim=-1)



def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--max-seconds", type=float, default=40.0)
    ap.add_argument("--max-steps", type=int, default=200)
    ap.add_argument("--min-steps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--configs", default=DEFAULT_FILE,
                    help="a configs file whose \"siamese\" entry overrides the sizes (default: bench/configs.json)")
    ap.add_argument("--seq-len", type=int, default=0)
    a = ap.parse_args()
    c, opt_cfg = entry(a.configs, "siamese", DEFAULTS, {"lr": 1e-3})
    if a.seq_len:
        c["seq_len"] = a.seq_len
    torch.set_num_threads(a.threads)
    torch.manual_seed(1234)
    enc = Encoder(c)
    opt = torch.optim.Adam(enc.parameters(), lr=opt_cfg["lr"])
    B, T, H = c["batch"], c["seq_len"], c["d_model"]
    xa, xb = torch.randint(0, c["vocab"], (B, T)), torch.randint(0, c["vocab"], (B, T))
    mask = torch.ones(B, T)

    def step():
        opt.zero_grad(set_to_none=True)
        triplet_loss(torch, enc(xa, mask), enc(xb, mask), c["margin"]).backward()
        opt.step()

    t0 = time.perf_counter()
    for _ in range(a.warmup):
        step()
    warm_s = time.perf_counter() - t0
    ts, start = [], time.perf_counter()
    while len(ts) < a.max_steps and (len(ts) < a.min_steps or time.perf_counter() - start < a.max_seconds):
        s = time.perf_counter()
        step()
        ts.append(time.perf_counter() - s)
    flops = sum(2 * 3 * 2 * B * T * 4 * H * (H + H) for _ in range(c["n_layers"]))
    med, best = statistics.median(ts), min(ts)
    tok = 2 * B * T
    out = {"bench": "torch_ref", "config": "siamese", "mode": "train", "threads": a.threads,
           "torch": torch.__version__, "OPENBLAS_CORETYPE": os.environ.get("OPENBLAS_CORETYPE"),
           "params": sum(p.numel() for p in enc.parameters()), "batch": B, "seq_len": T, "tokens_per_step": tok,
           "steps": len(ts), "ms_step_min": round(best * 1e3, 3), "ms_step_median": round(med * 1e3, 3),
           "ms_step_mean": round(statistics.mean(ts) * 1e3, 3),
           "tokens_per_s_median": round(tok / med, 1), "tokens_per_s_best": round(tok / best, 1),
           "seqs_per_s_median": round(B / med, 2), "seqs_per_s_best": round(B / best, 2),
           "flops_per_step": flops, "gflops_median": round(flops / med / 1e9, 2), "warmup_s": round(warm_s, 2),
           "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0, 1)}
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
