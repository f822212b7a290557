#!/usr/bin/env python3
"""The data-parallel scaling model of docs/distributed.md: predicted efficiency of `mpirun -np N qkv train` for the
`lm` and `nmt` configs of ../shared/bench/configs.json on N machines joined by 10/25/100 Gbit/s links, and the local
batch below which the gradient allreduce no longer hides behind backward.

    python3 bench/dist_scaling.py [--speedup S]   # S: a node S times faster than the measured one (compute / S)

Model (one step, every rank, local batch b = the config's batch):
  T_comp   = measured qkv step time (docs/benchmarks.md, 2 threads), of which backward is 2/3 (backward does twice
             the forward's matrix products);
  T_comm   = ring allreduce of the fp32 gradient G bytes in k buckets of 4 MiB:
             2 (N - 1) / N x G / bandwidth  +  k x 2 (N - 1) x latency;
  exposed  = max(0, T_comm - T_bwd) + T_comm / k   (buckets run during backward; the last one starts after it);
  efficiency = T_comp / (T_comp + exposed).
"""
import argparse
import math

LATENCY_S = 20e-6  # one message hop of the ring over TCP/Ethernet
BUCKET = 4 << 20

# Parameters counted from the configs (see docs/distributed.md), measured step times from docs/benchmarks.md.
MODELS = {
    "lm": dict(params=13_891_584, step_s=1.016, batch=8, unit="sequences of 256 tokens"),
    "nmt": dict(params=11_682_624, step_s=0.713, batch=32, unit="pairs of 64 + 64 tokens"),
}


def comm_s(grad_bytes, n, gbit):
    k = math.ceil(grad_bytes / BUCKET)
    return 2 * (n - 1) / n * grad_bytes / (gbit * 1e9 / 8) + k * 2 * (n - 1) * LATENCY_S, k


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--speedup", type=float, default=1.0)
    a = ap.parse_args()
    for name, m in MODELS.items():
        g = 4 * m["params"]
        comp = m["step_s"] / a.speedup
        bwd = comp * 2 / 3
        per_item = bwd / m["batch"]
        print(f"\n{name}: {m['params']:,} parameters = {g / 2**20:.1f} MiB of gradient; step {comp * 1e3:.0f} ms "
              f"(backward {bwd * 1e3:.0f} ms) for a local batch of {m['batch']} {m['unit']}")
        print("| N | " + " | ".join(f"{b} Gbit/s: allreduce ms / efficiency / hiding batch" for b in (10, 25, 100)) + " |")
        print("|---|" + "---|" * 3)
        for n in (2, 4, 8, 16, 32, 64):
            cells = []
            for gbit in (10, 25, 100):
                t, k = comm_s(g, n, gbit)
                exposed = max(0.0, t - bwd) + t / k
                eff = comp / (comp + exposed)
                hide = math.ceil(t / per_item)
                cells.append(f"{t * 1e3:.0f} / {eff * 100:.1f}% / {hide}")
            print(f"| {n} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
