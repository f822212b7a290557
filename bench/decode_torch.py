#!/usr/bin/env python3
"""PyTorch's batched greedy decoding on the architectures of `qkv bench decode` (tools/qkv/bench_decode.c), printing
JSON lines with the same fields, so the two can be compared in one session:

  python3 bench/decode_torch.py --model lstm|transformer|gpt [--batch 64] [--seq-len 32] [--threads N] [--blas-threads N]

Random weights, the length forced (EOS never ends a row, like qkv's bench), incremental decoding as a PyTorch user
would write it: the LSTM carries (h, c), the Transformer and the GPT keep per-layer K/V caches; one step feeds one
token to every row, log_softmax then argmax. Sizes: bench/quality/translation.json's models (8k shared vocabulary,
emb/hidden 256 LSTM with general attention; d 256, 4 heads, d_ff 1024, 3+3 pre-norm layers Transformer) and
../shared/bench/configs.json's "lm" (GPT-2 style, d 384, 6 layers, 6 heads, d_ff 1536, vocab 8192).
"""
import argparse
import json
import math
import os
import statistics
import sys
import time


def blas_threads_from_argv():
    """--threads N must bind the BLAS too: Debian's PyTorch calls the system OpenBLAS (its pthreads build), which
    starts a pool of its own with one thread per CPU and takes no orders from torch.set_num_threads. So at "1
    thread" PyTorch's GEMMs ran on every core, its wall-clock time below its CPU time. OpenBLAS reads its thread
    count once, when it is loaded: the variable is set before torch is imported."""
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--threads", type=int, default=1)
    pre.add_argument("--blas-threads", type=int, default=0)
    a, _ = pre.parse_known_args(sys.argv[1:])
    return a.blas_threads if a.blas_threads > 0 else a.threads


os.environ["OPENBLAS_NUM_THREADS"] = str(blas_threads_from_argv())

import torch  # noqa: E402 (after OPENBLAS_NUM_THREADS)
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

V = 8000


class LstmS2S(nn.Module):
    def __init__(self, E=256, H=256):
        super().__init__()
        self.src_emb, self.tgt_emb = nn.Embedding(V, E), nn.Embedding(V, E)
        self.enc, self.dec = nn.LSTM(E, H, batch_first=True), nn.LSTMCell(E, H)
        self.attn = nn.Linear(H, H, bias=False)  # Luong "general"
        self.combine = nn.Linear(2 * H, H, bias=False)
        self.gen = nn.Linear(H, V)

    def start(self, src):
        henc, (h, c) = self.enc(self.src_emb(src))
        return {"henc": henc, "keys": self.attn(henc), "h": h[0], "c": c[0]}

    def step(self, st, tok):
        st["h"], st["c"] = self.dec(self.tgt_emb(tok), (st["h"], st["c"]))
        a = torch.softmax(torch.bmm(st["keys"], st["h"].unsqueeze(2)).squeeze(2), -1)
        cx = torch.bmm(a.unsqueeze(1), st["henc"]).squeeze(1)
        return F.log_softmax(self.gen(torch.tanh(self.combine(torch.cat([cx, st["h"]], -1)))), -1)


def sinusoid(n, d):
    pos = torch.arange(n).unsqueeze(1)
    div = torch.exp(torch.arange(0, d, 2) * (-math.log(10000.0) / d))
    pe = torch.zeros(n, d)
    pe[:, 0::2], pe[:, 1::2] = torch.sin(pos * div), torch.cos(pos * div)
    return pe


def heads(x, H):  # [B, T, d] -> [B, H, T, dh]
    B, T, d = x.shape
    return x.view(B, T, H, d // H).transpose(1, 2)


def attend(q, k, v, causal=False):
    s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    if causal:
        T = q.shape[-2]
        s = s.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
    o = torch.softmax(s, -1) @ v
    return o.transpose(1, 2).reshape(q.shape[0], q.shape[2], -1)


class Block(nn.Module):
    """Pre-norm block: self-attention (cached), optional cross-attention, feed-forward."""

    def __init__(self, d, H, f, cross, act):
        super().__init__()
        self.H, self.act = H, act
        self.ln1, self.qkv, self.o = nn.LayerNorm(d), nn.Linear(d, 3 * d), nn.Linear(d, d)
        if cross:
            self.ln2, self.q2, self.kv2, self.o2 = nn.LayerNorm(d), nn.Linear(d, d), nn.Linear(d, 2 * d), nn.Linear(d, d)
        self.ln3, self.ff1, self.ff2 = nn.LayerNorm(d), nn.Linear(d, f), nn.Linear(f, d)

    def ff(self, x):
        return self.ff2(self.act(self.ff1(self.ln3(x))))

    def full(self, x):  # encoder layer over a whole sentence
        q, k, v = self.qkv(self.ln1(x)).chunk(3, -1)
        x = x + self.o(attend(heads(q, self.H), heads(k, self.H), heads(v, self.H)))
        return x + self.ff(x)

    def step(self, x, cache, mem_kv=None):  # x [B, 1, d]
        q, k, v = self.qkv(self.ln1(x)).chunk(3, -1)
        k, v = heads(k, self.H), heads(v, self.H)
        if "k" in cache:
            k, v = torch.cat([cache["k"], k], 2), torch.cat([cache["v"], v], 2)
        cache["k"], cache["v"] = k, v
        x = x + self.o(attend(heads(q, self.H), k, v))
        if mem_kv is not None:
            x = x + self.o2(attend(heads(self.q2(self.ln2(x)), self.H), *mem_kv))
        return x + self.ff(x)


class TfS2S(nn.Module):
    def __init__(self, d=256, H=4, f=1024, L=3, max_len=130):
        super().__init__()
        self.d = d
        self.src_emb, self.tgt_emb = nn.Embedding(V, d), nn.Embedding(V, d)
        self.register_buffer("pe", sinusoid(max_len, d))
        self.enc = nn.ModuleList(Block(d, H, f, False, F.relu) for _ in range(L))
        self.dec = nn.ModuleList(Block(d, H, f, True, F.relu) for _ in range(L))
        self.enc_ln, self.dec_ln, self.gen = nn.LayerNorm(d), nn.LayerNorm(d), nn.Linear(d, V)

    def start(self, src):
        x = self.src_emb(src) * math.sqrt(self.d) + self.pe[: src.shape[1]]
        for b in self.enc:
            x = b.full(x)
        mem = self.enc_ln(x)
        kv = [tuple(heads(t, b.H) for t in b.kv2(mem).chunk(2, -1)) for b in self.dec]
        return {"kv": kv, "cache": [{} for _ in self.dec], "t": 0}

    def step(self, st, tok):
        x = self.tgt_emb(tok).unsqueeze(1) * math.sqrt(self.d) + self.pe[st["t"]]
        for b, c, kv in zip(self.dec, st["cache"], st["kv"]):
            x = b.step(x, c, kv)
        st["t"] += 1
        return F.log_softmax(self.gen(self.dec_ln(x[:, 0])), -1)


class Gpt(nn.Module):
    def __init__(self, vocab=8192, d=384, L=6, H=6, f=1536, n_ctx=256):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(n_ctx, d)
        self.blocks = nn.ModuleList(Block(d, H, f, False, lambda x: F.gelu(x, approximate="tanh")) for _ in range(L))
        self.ln = nn.LayerNorm(d)

    def start(self, rows):
        return {"cache": [{} for _ in self.blocks], "t": 0}

    def step(self, st, tok):
        x = (self.wte(tok) + self.wpe.weight[st["t"]]).unsqueeze(1)
        for b, c in zip(self.blocks, st["cache"]):
            x = b.step(x, c)
        st["t"] += 1
        return self.ln(x[:, 0]) @ self.wte.weight.t()  # tied head: raw logits, argmax is the same


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", choices=["lstm", "transformer", "gpt"], default="lstm")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--seq-len", type=int, default=32)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--blas-threads", type=int, default=0,
                    help="OpenBLAS's own threads (default: --threads; blas_threads_from_argv)")
    ap.add_argument("--max-seconds", type=float, default=5.0)
    ap.add_argument("--min-steps", type=int, default=3)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(1234)
    m = {"lstm": LstmS2S, "transformer": TfS2S, "gpt": Gpt}[a.model]().eval()
    vocab = 8192 if a.model == "gpt" else V
    B, T = a.batch, a.seq_len
    src = torch.randint(3, V, (B, T))

    def decode():
        st = m.start(B if a.model == "gpt" else src)
        tok = torch.full((B,), 1, dtype=torch.long)
        out = []
        for _ in range(T):
            lp = m.step(st, tok)
            lp[:, 0] = float("-inf")  # pad (and EOS, as in qkv's bench) are never chosen
            lp[:, 1] = float("-inf")  # BOS
            tok = lp.argmax(-1)
            out.append(tok)
        return torch.stack(out, 1)

    with torch.inference_mode():
        t0 = time.perf_counter()
        decode()
        warm = time.perf_counter() - t0
        ms, cpu, start = [], [], time.perf_counter()
        while len(ms) < a.min_steps or time.perf_counter() - start < a.max_seconds:
            t, c = time.perf_counter(), time.process_time()
            decode()
            ms.append((time.perf_counter() - t) * 1e3)
            cpu.append((time.process_time() - c) * 1e3)
            if len(ms) >= 200:
                break
    med, best = statistics.median(ms), min(ms)
    print(json.dumps({
        "bench": "torch", "config": "decode-" + a.model, "mode": "greedy", "threads": a.threads,
        "torch": torch.__version__, "model": a.model, "params": sum(p.numel() for p in m.parameters()),
        "batch": B, "beam": 1, "sentences": B, "src_len": 0 if a.model == "gpt" else T, "seq_len": T,
        "vocab": vocab, "steps": len(ms), "ms_step_min": round(best, 3), "ms_step_median": round(med, 3),
        "ms_step_mean": round(statistics.mean(ms), 3), "tokens_per_step": B * T,
        "tokens_per_s_median": round(B * T * 1e3 / med, 1), "tokens_per_s_best": round(B * T * 1e3 / best, 1),
        "seqs_per_s_median": round(B * 1e3 / med, 2), "seqs_per_s_best": round(B * 1e3 / best, 2),
        "cpu_ms_step_median": round(statistics.median(cpu), 3), "blas_threads": int(os.environ["OPENBLAS_NUM_THREADS"]),
        "warmup_s": round(warm, 2)}))


if __name__ == "__main__":
    main()
