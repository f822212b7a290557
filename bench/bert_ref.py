#!/usr/bin/python3
"""PyTorch side of `qkv bench bert --mode pretrain`: one BERT pretraining step (forward, masked-LM + next-sentence
loss, backward, AdamW) of tests/ref/bert_model.py's BertForPreTraining (Hugging Face's computation) in the bert_small
shape: d 256, 4 layers, 4 heads, d_ff 1024, a 16,000-token vocabulary, batch 32 x 128 tokens, 20 masked positions a
sequence with the MLM head on those alone (gather=True, as qkv and BERT's TF code), dropout 0.1, training mode. Same
inputs as tools/qkv/bench_bert.c; timed like ../shared/bench/torch_ref.py (warmup, then steps until max_seconds; one
JSON line, same fields).

Run with Debian's Python (torch 1.13):  /usr/bin/python3 bench/bert_ref.py
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

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "ref"))
from bert_model import Bert  # noqa: E402

DEFAULTS = {"vocab": 16000, "d_model": 256, "n_layers": 4, "n_heads": 4, "d_ff": 1024, "batch": 32, "seq_len": 128,
            "max_predictions": 20}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--max-seconds", type=float, default=40.0)
    ap.add_argument("--max-steps", type=int, default=200)
    ap.add_argument("--min-steps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--seq-len", type=int, default=0)
    a = ap.parse_args()
    c = DEFAULTS
    torch.set_num_threads(a.threads)
    torch.manual_seed(1234)
    V, d, L, H, F, B = c["vocab"], c["d_model"], c["n_layers"], c["n_heads"], c["d_ff"], c["batch"]
    T = a.seq_len or c["seq_len"]
    P = min(c["max_predictions"], T - 3)
    model = Bert(V, d, L, H, F, T, 2, p=0.1)
    with torch.no_grad():
        for name, p in model.params().items():
            if p.dim() == 2:
                p.normal_(0.0, 0.02)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    ids = torch.randint(5, V, (B, T))
    ids[:, 0], ids[:, T // 2], ids[:, T - 1] = 2, 3, 3
    types = (torch.arange(T) > T // 2).long().expand(B, T).contiguous()
    mask = torch.ones(B, T, dtype=torch.long)
    labels = torch.full((B, T), -100, dtype=torch.long)
    for p in range(P):
        t = 1 + p * (T - 2) // P
        labels[:, t] = ids[:, t]
        ids[:, t] = 4
    nsp = torch.arange(B) % 2

    def step():
        opt.zero_grad(set_to_none=True)
        mlm, ns = model(ids, types, mask, labels, nsp, gather=True)
        (mlm + ns).backward()
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
    n_blk = L * (4 * d * d + 2 * d * F)
    fwd = 2 * n_blk * B * T + L * B * 4 * T * T * d + 2 * B * P * (d * d + d * V) + 2 * B * (d * d + 2 * d)
    flops = 3 * fwd
    med, best = statistics.median(ts), min(ts)
    out = {"bench": "torch_ref", "config": "bert", "mode": "pretrain", "threads": a.threads,
           "torch": torch.__version__, "OPENBLAS_CORETYPE": os.environ.get("OPENBLAS_CORETYPE"),
           "params": sum(p.numel() for p in model.parameters()), "batch": B, "seq_len": T, "max_predictions": P,
           "tokens_per_step": B * T, "steps": len(ts), "ms_step_min": round(best * 1e3, 3),
           "ms_step_median": round(med * 1e3, 3), "ms_step_mean": round(statistics.mean(ts) * 1e3, 3),
           "tokens_per_s_median": round(B * T / med, 1), "tokens_per_s_best": round(B * T / best, 1),
           "seqs_per_s_median": round(B / med, 2), "seqs_per_s_best": round(B / best, 2),
           "flops_per_step": flops, "gflops_median": round(flops / med / 1e9, 2), "warmup_s": round(warm_s, 2),
           "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0, 1)}
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
