#!/usr/bin/python3
"""PyTorch side of `qkv bench lstm2` / `qkv bench gru2`: forward + backward of sum(out) through a 2-layer
torch.nn.LSTM / GRU (input 512, hidden 512, batch 64, 32 steps, batch_first), timed like
../shared/bench/torch_ref.py (warmup, then steps until max_seconds; one JSON line per benchmark, same fields).

Run with Debian's Python (torch 1.13):  /usr/bin/python3 bench/rnn_ref.py [lstm2] [gru2]
  options: --threads N (default 2) --max-seconds S --max-steps N --warmup N --min-steps N
"""
import argparse
import json
import os
import resource
import statistics
import time

import torch

DEFAULTS = {"input": 512, "hidden": 512, "n_layers": 2, "batch": 64, "seq_len": 32}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", nargs="*", default=["lstm2", "gru2"])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--max-seconds", type=float, default=40.0)
    ap.add_argument("--max-steps", type=int, default=200)
    ap.add_argument("--min-steps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=3)
    a = ap.parse_args()
    for name in a.what:
        if name not in ("lstm2", "gru2"):
            ap.error(f"unknown benchmark {name}")
        # one process per measurement so peak_rss_mib is its own, as torch_ref.py does
        pid = os.fork()
        if pid == 0:
            run(a, name)
            os._exit(0)
        os.waitpid(pid, 0)


def run(a, name):
    c = DEFAULTS
    torch.set_num_threads(a.threads)
    torch.manual_seed(1234)
    cls = torch.nn.LSTM if name == "lstm2" else torch.nn.GRU
    mod = cls(c["input"], c["hidden"], num_layers=c["n_layers"], batch_first=True)
    B, T = c["batch"], c["seq_len"]
    x = torch.randn(B, T, c["input"])

    def step():
        mod.zero_grad(set_to_none=True)
        out, _ = mod(x)
        out.sum().backward()

    t0 = time.perf_counter()
    for _ in range(a.warmup):
        step()
    warm_s = time.perf_counter() - t0
    ts, start = [], time.perf_counter()
    while len(ts) < a.max_steps and (len(ts) < a.min_steps or time.perf_counter() - start < a.max_seconds):
        s = time.perf_counter()
        step()
        ts.append(time.perf_counter() - s)
    gates = 4 if name == "lstm2" else 3
    H = c["hidden"]
    flops = sum(3 * 2 * B * T * gates * H * ((c["input"] if l == 0 else H) + H) for l in range(c["n_layers"]))
    med, best = statistics.median(ts), min(ts)
    out = {"bench": "torch_ref", "config": name, "mode": "fwdbwd", "threads": a.threads, "torch": torch.__version__,
           "OPENBLAS_CORETYPE": os.environ.get("OPENBLAS_CORETYPE"), "params": sum(p.numel() for p in mod.parameters()),
           "batch": B, "seq_len": T, "tokens_per_step": B * T, "steps": len(ts),
           "ms_step_min": round(best * 1e3, 3), "ms_step_median": round(med * 1e3, 3),
           "ms_step_mean": round(statistics.mean(ts) * 1e3, 3),
           "tokens_per_s_median": round(B * T / med, 1), "tokens_per_s_best": round(B * T / best, 1),
           "seqs_per_s_median": round(B / med, 2), "seqs_per_s_best": round(B / best, 2),
           "flops_per_step": flops, "gflops_median": round(flops / med / 1e9, 2), "warmup_s": round(warm_s, 2),
           "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0, 1)}
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
