#!/usr/bin/python3
"""PyTorch side of `qkv bench tagger`: one training step (forward, masked loss, backward, Adam) of the tagger
(tests/ref/tagger_model.py, qkv's model as torch modules: BiLSTM d_model 128 over a 20,000-word vocabulary, 12 tags,
batch 32 x 32 tokens, every token real), timed like ../shared/bench/torch_ref.py (warmup, then steps until
max_seconds; one JSON line, same fields).

Run with Debian's Python (torch 1.13):  /usr/bin/python3 bench/tagger_ref.py
  options: --threads N (default 2) --max-seconds S --max-steps N --warmup N --min-steps N --encoder lstm|transformer
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
from tagger_model import Tagger  # noqa: E402
from configs_entry import DEFAULT_FILE, entry  # noqa: E402

DEFAULTS = {"vocab": 20000, "n_tags": 12, "d_model": 128, "n_layers": 1, "batch": 32, "seq_len": 32, "encoder": "lstm"}



def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--max-seconds", type=float, default=40.0)
    ap.add_argument("--max-steps", type=int, default=200)
    ap.add_argument("--min-steps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--configs", default=DEFAULT_FILE,
                    help="a configs file whose \"tagger\" entry overrides the sizes (default: bench/configs.json)")
    ap.add_argument("--encoder", default=None)
    a = ap.parse_args()
    c, opt_cfg = entry(a.configs, "tagger", DEFAULTS, {"lr": 1e-3})
    if a.encoder:
        c["encoder"] = a.encoder
    torch.set_num_threads(a.threads)
    torch.manual_seed(1234)
    V, C, B, T = c["vocab"], c["n_tags"], c["batch"], c["seq_len"]
    model = Tagger(V, C, c["d_model"], layers=c["n_layers"], encoder=c["encoder"])
    opt = torch.optim.Adam(model.parameters(), lr=opt_cfg["lr"])
    ids = torch.randint(0, V, (B, T))
    tags = torch.randint(0, C, (B, T))
    mask = torch.ones(B, T, dtype=torch.int32)

    def step():
        opt.zero_grad(set_to_none=True)
        model.loss(ids, mask, tags).backward()
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
    d, flops = c["d_model"], 0
    if c["encoder"] == "lstm":
        flops = sum(3 * 2 * B * T * 2 * 4 * d * ((d if l == 0 else 2 * d) + d) for l in range(c["n_layers"]))
        flops += 3 * 2 * B * T * 2 * d * C
    med, best = statistics.median(ts), min(ts)
    out = {"bench": "torch_ref", "config": "tagger", "mode": "train", "threads": a.threads, "torch": torch.__version__,
           "OPENBLAS_CORETYPE": os.environ.get("OPENBLAS_CORETYPE"),
           "params": sum(p.numel() for p in model.parameters()), "batch": B, "seq_len": T, "tokens_per_step": B * T,
           "steps": len(ts), "ms_step_min": round(best * 1e3, 3), "ms_step_median": round(med * 1e3, 3),
           "ms_step_mean": round(statistics.mean(ts) * 1e3, 3),
           "tokens_per_s_median": round(B * T / med, 1), "tokens_per_s_best": round(B * T / best, 1),
           "seqs_per_s_median": round(B / med, 2), "seqs_per_s_best": round(B / best, 2),
           "flops_per_step": flops, "gflops_median": round(flops / med / 1e9, 2) if flops else None,
           "warmup_s": round(warm_s, 2),
           "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0, 1)}
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
