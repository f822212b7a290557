#!/usr/bin/python3
"""PyTorch side of `qkv bench summarize`: the decoder-only summarizer's two costs on a GPT of the configs file's
`summarize` entry (bench/configs.json; the built-in sizes of tools/qkv/bench_summ.c when absent), timed like
../shared/bench/torch_ref.py (warmup, then steps until max_seconds; one JSON line, same fields).
  train: AdamW steps on batch x seq_len random ids, cross-entropy weighted 0 on the article's predictions and 1 on the
         last summary_len + 1 (the summary and its </s>), as the summarize task weighs them.
  gen:   greedy summaries of `batch` random articles of seq_len - summary_len tokens, summary_len new tokens each,
         all rows at once: one forward over the articles fills a KV cache, then one token per step.

Run with Debian's Python (torch 1.13):  /usr/bin/python3 bench/summ_ref.py --mode train|gen
  options: --configs FILE --threads N (default 2) --max-seconds S --max-steps N --warmup N --min-steps N
"""
import argparse
import json
import math
import os
import resource
import statistics
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "ref"))
from lm_model import GPT  # noqa: E402  (qkv's gpt model as torch modules)
from configs_entry import DEFAULT_FILE, entry  # noqa: E402

DEFAULTS = {"vocab": 8192, "d_model": 256, "n_layers": 4, "n_heads": 4, "d_ff": 1024, "seq_len": 192, "batch": 32,
            "summary_len": 32}
OPT = {"lr": 1e-3, "betas": [0.9, 0.999], "eps": 1e-8, "weight_decay": 0.01}


def cached_forward(m, ids, cache):
    """Logits of the last position of ids [B, t], appending each layer's keys and values to cache (a list per
    layer of (k, v) [B, h, T, dh]); the new positions attend causally to the cache and to one another."""
    t = m.transformer
    B, n = ids.shape
    past = cache[0][0].shape[2] if cache[0] else 0
    x = t.wte(ids) + t.wpe.weight[past:past + n]
    for layer, blk in enumerate(t.h):
        a = blk.attn
        d, h = a.d, a.h
        q, k, v = (z.view(B, n, h, d // h).transpose(1, 2) for z in a.c_attn(blk.ln_1(x)).split(d, dim=2))
        if cache[layer]:
            k = torch.cat([cache[layer][0], k], 2)
            v = torch.cat([cache[layer][1], v], 2)
        cache[layer] = (k, v)
        s = (q @ k.transpose(-2, -1)) / math.sqrt(d // h)
        if n > 1:
            s = s.masked_fill(torch.ones(n, past + n, dtype=torch.bool).triu(past + 1), float("-inf"))
        x = x + a.c_proj((s.softmax(-1) @ v).transpose(1, 2).reshape(B, n, d))
        x = x + blk.mlp(blk.ln_2(x))
    return m.lm_head(t.ln_f(x[:, -1]))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mode", choices=["train", "gen"], default="train")
    ap.add_argument("--configs", default=DEFAULT_FILE)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--max-seconds", type=float, default=40.0)
    ap.add_argument("--max-steps", type=int, default=0, help="default 200 (train), 5 (gen), as qkv bench")
    ap.add_argument("--min-steps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=0, help="default 3 (train), 1 (gen), as qkv bench")
    a = ap.parse_args()
    c, oc = entry(a.configs, "summarize", DEFAULTS, OPT)
    gen = a.mode == "gen"
    max_steps = a.max_steps or (5 if gen else 200)
    warmup = a.warmup or (1 if gen else 3)
    torch.set_num_threads(a.threads)
    torch.manual_seed(1234)
    V, B, T, S = c["vocab"], c["batch"], c["seq_len"], c["summary_len"]
    P = T - S
    m = GPT(V, T, c["d_model"], c["n_heads"], c["d_ff"], c["n_layers"])
    if gen:
        m.eval()
        prompts = torch.randint(0, V, (B, P))

        def step():
            with torch.inference_mode():
                cache = [None] * len(m.transformer.h)
                cache = [() for _ in cache]
                tok = cached_forward(m, prompts, cache).argmax(-1)
                for _ in range(S - 1):
                    tok = cached_forward(m, tok.unsqueeze(1), cache).argmax(-1)
        tokens = B * S
    else:
        opt = torch.optim.AdamW(m.parameters(), lr=oc["lr"], betas=tuple(oc["betas"]), eps=oc["eps"],
                                weight_decay=oc["weight_decay"])
        x, y = torch.randint(0, V, (B, T)), torch.randint(0, V, (B, T))
        w = (torch.arange(T) >= P - 1).float().expand(B, T)

        def step():
            opt.zero_grad(set_to_none=True)
            ce = F.cross_entropy(m(x).reshape(B * T, V), y.reshape(-1), reduction="none")
            ((ce * w.reshape(-1)).sum() / w.sum()).backward()
            opt.step()
        tokens = B * T

    t0 = time.perf_counter()
    for _ in range(warmup):
        step()
    warm_s = time.perf_counter() - t0
    ts, start = [], time.perf_counter()
    while len(ts) < max_steps and (len(ts) < a.min_steps or time.perf_counter() - start < a.max_seconds):
        s = time.perf_counter()
        step()
        ts.append(time.perf_counter() - s)
    med, best = statistics.median(ts), min(ts)
    out = {"bench": "torch_ref", "config": "summarize", "mode": a.mode, "threads": a.threads,
           "torch": torch.__version__, "OPENBLAS_CORETYPE": os.environ.get("OPENBLAS_CORETYPE"),
           "params": sum(p.numel() for p in m.parameters()), "batch": B, "seq_len": T, "summary_len": S,
           "tokens_per_step": tokens, "steps": len(ts), "ms_step_min": round(best * 1e3, 3),
           "ms_step_median": round(med * 1e3, 3), "ms_step_mean": round(statistics.mean(ts) * 1e3, 3),
           "tokens_per_s_median": round(tokens / med, 1), "tokens_per_s_best": round(tokens / best, 1),
           "seqs_per_s_median": round(B / med, 2), "seqs_per_s_best": round(B / best, 2),
           "warmup_s": round(warm_s, 2),
           "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0, 1)}
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
