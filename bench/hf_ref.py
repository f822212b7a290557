#!/usr/bin/python3
"""PyTorch side of `qkv bench hf --mode glove|tiny|base`, timed like ../shared/bench/torch_ref.py (warmup, then
steps until max_seconds; one JSON line per measurement with the same fields as qkv's).

  glove        read the staged GloVe 6B 100d subset the way torchtext's Vectors does (split each line, floats into
               a tensor, word -> index dict), then stack into one [20000, 100] tensor.
  tiny         forward (torch.no_grad, eval) of ../shared/pretrained/tiny-random-bert, batch 1, min(128, 64) tokens.
  base         the same for a BERT-base-sized random checkpoint (hidden 768, 12 layers, 12 heads, 3072), 128 tokens.

The BERT forward is HF BertModel's eval computation written with torch.nn modules (Embedding, Linear, LayerNorm,
GELU) and weights read from the checkpoint's model.safetensors.

Run with Debian's Python (torch 1.13):
  /usr/bin/python3 bench/hf_ref.py --make-base /tmp/qkv-bert-base     # once: writes config.json + model.safetensors
  /usr/bin/python3 bench/hf_ref.py [glove] [tiny] [base]    (default: all three)
  options: --threads N (default 2) --max-seconds S --max-steps N --warmup N --min-steps N --base DIR --seq-len T
"""
import argparse
import json
import math
import os
import resource
import statistics
import struct
import time

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
SHARED = os.environ.get("QKV_SHARED") or os.path.join(HERE, "..", "..", "shared")
PRETRAINED = os.path.join(SHARED, "pretrained")


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for k, v in header.items():
        if k == "__metadata__":
            continue
        assert v["dtype"] == "F32", (k, v["dtype"])
        a, b = v["data_offsets"]
        out[k] = torch.from_numpy(np.frombuffer(data[a:b], dtype=np.float32).copy().reshape(v["shape"]))
    return out


def write_safetensors(path, tensors):
    header, off = {}, 0
    for k in sorted(tensors):
        nbytes = tensors[k].numel() * 4
        header[k] = {"dtype": "F32", "shape": list(tensors[k].shape), "data_offsets": [off, off + nbytes]}
        off += nbytes
    header["__metadata__"] = {"format": "pt"}
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for k in sorted(tensors):
            f.write(tensors[k].contiguous().numpy().tobytes())


def make_base(d):
    """A BERT-base-sized checkpoint with random weights (normal 0.02, LayerNorm 1/0), HF key names."""
    cfg = {"architectures": ["BertModel"], "model_type": "bert", "vocab_size": 30522, "hidden_size": 768,
           "num_hidden_layers": 12, "num_attention_heads": 12, "intermediate_size": 3072, "hidden_act": "gelu",
           "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1, "max_position_embeddings": 512,
           "type_vocab_size": 2, "initializer_range": 0.02, "layer_norm_eps": 1e-12, "pad_token_id": 0,
           "position_embedding_type": "absolute"}
    g = torch.Generator().manual_seed(1234)
    E, I = 768, 3072
    sd = {}

    def rnd(*s):
        return torch.randn(s, generator=g) * 0.02

    def lin(k, o, i):
        sd[k + ".weight"], sd[k + ".bias"] = rnd(o, i), torch.zeros(o)

    def ln(k):
        sd[k + ".weight"], sd[k + ".bias"] = torch.ones(E), torch.zeros(E)

    sd["embeddings.word_embeddings.weight"] = rnd(cfg["vocab_size"], E)
    sd["embeddings.position_embeddings.weight"] = rnd(cfg["max_position_embeddings"], E)
    sd["embeddings.token_type_embeddings.weight"] = rnd(2, E)
    ln("embeddings.LayerNorm")
    for i in range(12):
        p = f"encoder.layer.{i}."
        for n in ("query", "key", "value"):
            lin(p + "attention.self." + n, E, E)
        lin(p + "attention.output.dense", E, E)
        ln(p + "attention.output.LayerNorm")
        lin(p + "intermediate.dense", I, E)
        lin(p + "output.dense", E, I)
        ln(p + "output.LayerNorm")
    lin("pooler.dense", E, E)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    write_safetensors(os.path.join(d, "model.safetensors"), sd)
    print(f"wrote {d}/config.json and model.safetensors ({sum(t.numel() for t in sd.values())} parameters)")


class Bert(torch.nn.Module):
    def __init__(self, cfg, sd):
        super().__init__()
        E, I = cfg["hidden_size"], cfg["intermediate_size"]
        self.cfg = cfg
        self.word = torch.nn.Embedding(cfg["vocab_size"], E)
        self.pos = torch.nn.Embedding(cfg["max_position_embeddings"], E)
        self.tok_type = torch.nn.Embedding(cfg["type_vocab_size"], E)
        self.ln = torch.nn.LayerNorm(E, eps=cfg["layer_norm_eps"])
        self.layers = torch.nn.ModuleList()
        for _ in range(cfg["num_hidden_layers"]):
            m = torch.nn.Module()
            m.q, m.k, m.v, m.o = (torch.nn.Linear(E, E) for _ in range(4))
            m.ln1 = torch.nn.LayerNorm(E, eps=cfg["layer_norm_eps"])
            m.ln2 = torch.nn.LayerNorm(E, eps=cfg["layer_norm_eps"])
            m.inter, m.out = torch.nn.Linear(E, I), torch.nn.Linear(I, E)
            self.layers.append(m)
        self.pooler = torch.nn.Linear(E, E)
        names = {"word.weight": "embeddings.word_embeddings.weight",
                 "pos.weight": "embeddings.position_embeddings.weight",
                 "tok_type.weight": "embeddings.token_type_embeddings.weight", "ln": "embeddings.LayerNorm",
                 "pooler": "pooler.dense"}
        per = {"q": "attention.self.query", "k": "attention.self.key", "v": "attention.self.value",
               "o": "attention.output.dense", "ln1": "attention.output.LayerNorm", "inter": "intermediate.dense",
               "out": "output.dense", "ln2": "output.LayerNorm"}
        state = {}
        for k in self.state_dict():
            parts = k.split(".")
            if parts[0] == "layers":
                hf = f"encoder.layer.{parts[1]}.{per[parts[2]]}.{parts[3]}"
            elif k in names:
                hf = names[k]
            else:
                hf = names[parts[0]] + "." + parts[1]
            state[k] = sd[hf]
        self.load_state_dict(state)

    def forward(self, ids, mask):
        B, T = ids.shape
        H = self.cfg["num_attention_heads"]
        E = self.cfg["hidden_size"]
        x = self.ln(self.word(ids) + self.pos(torch.arange(T)[None]) + self.tok_type(torch.zeros_like(ids)))
        add = (1.0 - mask[:, None, None, :].float()) * torch.finfo(torch.float32).min
        sp = lambda t: t.view(B, T, H, E // H).transpose(1, 2)
        for m in self.layers:
            s = sp(m.q(x)) @ sp(m.k(x)).transpose(-1, -2) / math.sqrt(E // H) + add
            a = (torch.softmax(s, -1) @ sp(m.v(x))).transpose(1, 2).reshape(B, T, E)
            x = m.ln1(m.o(a) + x)
            x = m.ln2(m.out(F.gelu(m.inter(x))) + x)
        return x, torch.tanh(self.pooler(x[:, 0]))


def time_steps(a, step):
    t0 = time.perf_counter()
    for _ in range(a.warmup):
        step()
    warm_s = time.perf_counter() - t0
    ts, start = [], time.perf_counter()
    while len(ts) < a.max_steps and (len(ts) < a.min_steps or time.perf_counter() - start < a.max_seconds):
        s = time.perf_counter()
        step()
        ts.append(time.perf_counter() - s)
    return ts, warm_s


def common(a, name, mode, ts, warm_s):
    med, best = statistics.median(ts), min(ts)
    return {"bench": "torch_ref", "config": name, "mode": mode, "threads": a.threads, "torch": torch.__version__,
            "OPENBLAS_CORETYPE": os.environ.get("OPENBLAS_CORETYPE"), "steps": len(ts),
            "ms_step_min": round(best * 1e3, 3), "ms_step_median": round(med * 1e3, 3),
            "ms_step_mean": round(statistics.mean(ts) * 1e3, 3), "warmup_s": round(warm_s, 2)}


def run_glove(a):
    path = os.path.join(PRETRAINED, "glove-6B-100d-top20k", "glove.6B.100d.top20k.txt")
    info = {}

    def step():
        itos, vectors = [], []
        with open(path, "rb") as f:
            for line in f:
                entries = line.rstrip().split(b" ")
                word, entries = entries[0], entries[1:]
                vectors.append(torch.tensor([float(x) for x in entries]))
                itos.append(word.decode("utf-8"))
        stoi = {w: i for i, w in enumerate(itos)}
        m = torch.stack(vectors)
        info["words"], info["dim"] = len(stoi), m.shape[1]

    ts, warm_s = time_steps(a, step)
    out = common(a, "hf", "glove", ts, warm_s)
    out.update(info)
    return out


def run_bert(a, mode):
    d = os.path.join(PRETRAINED, "tiny-random-bert") if mode == "tiny" else a.base
    with open(os.path.join(d, "config.json")) as f:
        cfg = json.load(f)
    t0 = time.perf_counter()
    model = Bert(cfg, read_safetensors(os.path.join(d, "model.safetensors"))).eval()
    load_s = time.perf_counter() - t0
    T = min(a.seq_len, cfg["max_position_embeddings"])
    ids = torch.tensor([[(t * 7919 + 101) % cfg["vocab_size"] for t in range(T)]])
    mask = torch.ones_like(ids)

    def step():
        with torch.no_grad():
            model(ids, mask)

    ts, warm_s = time_steps(a, step)
    E, I, L = cfg["hidden_size"], cfg["intermediate_size"], cfg["num_hidden_layers"]
    flops = L * (2.0 * T * (4 * E * E + 2 * E * I) + 4.0 * T * T * E) + 2.0 * E * E
    med, best = statistics.median(ts), min(ts)
    out = common(a, "hf", mode, ts, warm_s)
    out.update({"batch": 1, "seq_len": T, "params": sum(p.numel() for p in model.parameters()),
                "load_s": round(load_s, 3), "tokens_per_step": T, "tokens_per_s_median": round(T / med, 1),
                "tokens_per_s_best": round(T / best, 1), "seqs_per_s_median": round(1 / med, 2),
                "seqs_per_s_best": round(1 / best, 2), "flops_per_step": flops,
                "gflops_median": round(flops / med / 1e9, 2)})
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", nargs="*", default=["glove", "tiny", "base"], choices=["glove", "tiny", "base"])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--max-seconds", type=float, default=20.0)
    ap.add_argument("--max-steps", type=int, default=200)
    ap.add_argument("--min-steps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--base", default=os.environ.get("QKV_BERT_BASE") or "/tmp/qkv-bert-base")
    ap.add_argument("--make-base", metavar="DIR")
    a = ap.parse_args()
    if a.make_base:
        make_base(a.make_base)
        return
    torch.set_num_threads(a.threads)
    for name in a.what:
        # Each measurement in its own process, so peak_rss_mib is its own (as qkv bench does).
        pid = os.fork()
        if pid == 0:
            out = run_glove(a) if name == "glove" else run_bert(a, name)
            out["peak_rss_mib"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0, 1)
            print(json.dumps(out), flush=True)
            os._exit(0)
        os.waitpid(pid, 0)


if __name__ == "__main__":
    main()
