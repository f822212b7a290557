"""Attention patterns of a pretrained qkv bert run (issue 25): for every layer and head, the average attention mass a
token gives to the previous token, the next token, the [SEP] tokens and [CLS], over held-out text (the patterns
bertviz users look for: Clark et al. 2019, "What does BERT look at?"); also the mass the [SEP] tokens give to the
[SEP] tokens (the [SEP]-to-[SEP] pattern of bertviz's model view), to themselves, and to punctuation (Clark et al.'s
other no-op target). The text is paired as in pretraining: two
consecutive paragraphs of the file make [CLS] A [SEP] B [SEP] (segment ids 0 / 1), cut to the run's max_len.
Queries are the real tokens (padding left out); a row's mass over its keys sums to 1.
  python3 bench/quality/bert_attention.py RUN [--text FILE] [--max-pairs N] [--qkv BIN] [--out DIR]
Writes OUT/attention_patterns.json (one object per layer and head, and the heads that stand out), OUT/
attention_patterns.md (the table for docs/) and OUT/attend.html (`qkv attend --run RUN` on the first pair), and
prints the JSON lines. The forward is BERT's (tests/ref/bert_model.py's computation) on the run's Hugging Face
directory RUN/hf, in PyTorch at float32."""
import argparse
import json
import math
import os
import struct
import subprocess
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        blob = f.read()
    out = {}
    for name, h in header.items():
        if name == "__metadata__":
            continue
        dt = {"F32": np.float32, "I32": np.int32, "I64": np.int64}[h["dtype"]]
        a, b = h["data_offsets"]
        out[name] = torch.from_numpy(np.frombuffer(blob[a:b], dtype=dt).reshape(h["shape"]).copy())
    return out


def layer_norm(x, w, b, eps):
    return torch.nn.functional.layer_norm(x, (x.shape[-1],), w, b, eps)


def attentions(p, cfg, ids, types, mask):
    """Per layer: attention probabilities [B, H, T, T] of BertModel's forward (eval mode)."""
    E, H = cfg["hidden_size"], cfg["num_attention_heads"]
    eps, d = cfg.get("layer_norm_eps", 1e-12), E // H
    act = {"gelu": lambda x: torch.nn.functional.gelu(x), "relu": torch.relu,
           "gelu_new": lambda x: torch.nn.functional.gelu(x, approximate="tanh")}[cfg.get("hidden_act", "gelu")]
    g = lambda n: p["bert." + n]
    lin = lambda x, n: x @ g(n + ".weight").t() + g(n + ".bias")
    B, T = ids.shape
    x = g("embeddings.word_embeddings.weight")[ids] + g("embeddings.position_embeddings.weight")[:T][None] + \
        g("embeddings.token_type_embeddings.weight")[types]
    x = layer_norm(x, g("embeddings.LayerNorm.weight"), g("embeddings.LayerNorm.bias"), eps)
    add = (1.0 - mask[:, None, None, :].float()) * torch.finfo(torch.float32).min
    maps = []
    for i in range(cfg["num_hidden_layers"]):
        pre = f"encoder.layer.{i}."
        q, k, v = (lin(x, pre + "attention.self." + n).view(B, T, H, d).transpose(1, 2) for n in ("query", "key", "value"))
        a = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(d) + add, dim=-1)
        maps.append(a)
        c = (a @ v).transpose(1, 2).reshape(B, T, E)
        x = layer_norm(lin(c, pre + "attention.output.dense") + x, g(pre + "attention.output.LayerNorm.weight"),
                       g(pre + "attention.output.LayerNorm.bias"), eps)
        h = lin(act(lin(x, pre + "intermediate.dense")), pre + "output.dense")
        x = layer_norm(h + x, g(pre + "output.LayerNorm.weight"), g(pre + "output.LayerNorm.bias"), eps)
    return maps


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("run")
    ap.add_argument("--text", default=os.path.join(HERE, "..", "..", "..", "shared", "data", "lm", "dev.txt"))
    ap.add_argument("--max-pairs", type=int, default=200)
    ap.add_argument("--qkv", default=os.path.join(HERE, "..", "..", "build", "qkv"))
    ap.add_argument("--out", default=".")
    a = ap.parse_args()
    torch.set_num_threads(int(os.environ.get("THREADS", "1")))
    hf = os.path.join(a.run, "hf")
    cfg = json.load(open(os.path.join(hf, "config.json")))
    p = read_safetensors(os.path.join(hf, "model.safetensors"))
    vocab = os.path.join(a.run, "vocab.txt")
    toks = [l.rstrip("\n") for l in open(vocab, encoding="utf-8")]
    CLS, SEP, PAD = toks.index("[CLS]"), toks.index("[SEP]"), toks.index("[PAD]")
    max_len = json.load(open(os.path.join(a.run, "config.json")))["data"].get("max_len", 128)
    paras = [l.strip() for l in open(a.text, encoding="utf-8") if l.strip() and not l.startswith("CHAPTER")]
    paras = paras[: 2 * a.max_pairs]
    enc = subprocess.run([a.qkv, "tokenize", "encode", "--wordpiece", vocab], input="\n".join(paras) + "\n",
                         capture_output=True, text=True, check=True).stdout.splitlines()
    ids_of = [[int(t) for t in line.split()] for line in enc]
    rows, segs = [], []
    for i in range(0, len(ids_of) - 1, 2):
        A, Bs = ids_of[i][1:-1], ids_of[i + 1][1:-1]  # without their own [CLS] / [SEP]
        room = max_len - 3
        while len(A) + len(Bs) > room:  # truncate the longer side, as pretraining does
            if len(A) >= len(Bs):
                A = A[:-1]
            else:
                Bs = Bs[:-1]
        rows.append([CLS] + A + [SEP] + Bs + [SEP])
        segs.append([0] * (len(A) + 2) + [1] * (len(Bs) + 1))
    if not rows:
        sys.exit("bert_attention: no pair of paragraphs in the text")
    T = max(len(r) for r in rows)
    ids = torch.full((len(rows), T), PAD, dtype=torch.long)
    types = torch.zeros((len(rows), T), dtype=torch.long)
    for i, (r, s) in enumerate(zip(rows, segs)):
        ids[i, : len(r)] = torch.tensor(r)
        types[i, : len(s)] = torch.tensor(s)
    mask = torch.zeros_like(ids)
    for i, r in enumerate(rows):
        mask[i, : len(r)] = 1
    with torch.no_grad():
        maps = attentions(p, cfg, ids, types, mask)
    real = mask.bool()  # queries
    n_q = real.sum().item()
    prev = torch.zeros(T, T)
    prev[torch.arange(1, T), torch.arange(0, T - 1)] = 1
    nxt = prev.t().clone()
    is_sep = (ids == SEP).float()[:, None, None, :]
    is_cls = (ids == CLS).float()[:, None, None, :]
    sep_q = (ids == SEP)
    punct = torch.zeros(ids.shape)
    for t in (".", ",", ";", ":", "!", "?"):
        if t in toks:
            punct += (ids == toks.index(t)).float()
    # next token: only where a next real token exists (the last [SEP] has none): averaged over those queries
    has_next = torch.zeros_like(mask, dtype=torch.bool)
    for i, r in enumerate(rows):
        has_next[i, : len(r) - 1] = True
    out = []
    for li, m in enumerate(maps):
        for h in range(m.shape[1]):
            w = m[:, h]  # [B, T, T]
            q = real.float()
            res = {"layer": li, "head": h,
                   "prev": ((w * prev).sum(-1) * (real & (torch.arange(T) > 0)).float()).sum().item() /
                           (real & (torch.arange(T) > 0)).sum().item(),
                   "next": ((w * nxt).sum(-1) * has_next.float()).sum().item() / has_next.sum().item(),
                   "sep": ((w * is_sep[:, 0]).sum(-1) * q).sum().item() / n_q,
                   "cls": ((w * is_cls[:, 0]).sum(-1) * q).sum().item() / n_q,
                   "sep_from_sep": ((w * is_sep[:, 0]).sum(-1) * sep_q).sum().item() / sep_q.sum().item(),
                   "self": (torch.diagonal(w, dim1=1, dim2=2) * q).sum().item() / n_q,
                   "punct": ((w * punct[:, None, :]).sum(-1) * q).sum().item() / n_q}
            out.append({k: round(v, 4) if isinstance(v, float) else v for k, v in res.items()})
    os.makedirs(a.out, exist_ok=True)
    cols = ("prev", "next", "sep", "cls", "sep_from_sep", "self", "punct")
    best = {k: max(out, key=lambda r: r[k]) for k in cols}
    summary = {"run": os.path.abspath(a.run), "text": os.path.abspath(a.text), "pairs": len(rows), "queries": n_q,
               "heads": out, "strongest": {k: {"layer": v["layer"], "head": v["head"], "mass": v[k]}
                                           for k, v in best.items()}}
    json.dump(summary, open(os.path.join(a.out, "attention_patterns.json"), "w"), indent=1)
    with open(os.path.join(a.out, "attention_patterns.md"), "w") as f:
        f.write(f"Average attention mass over {n_q} tokens of {len(rows)} held-out paragraph pairs "
                f"({os.path.basename(a.text)}), run `{os.path.basename(os.path.abspath(a.run))}`.\n\n")
        f.write(f"Columns: the mass every token gives to the previous token, the next, the [SEP] tokens and [CLS]; then "
                f"the mass the {int(sep_q.sum().item())} [SEP] tokens give to the [SEP] tokens; the mass every token "
                f"gives to itself and to punctuation. Bold: the strongest head of each column.\n\n")
        f.write("| layer | head | previous | next | [SEP] | [CLS] | [SEP] from [SEP] | self | punctuation |\n"
                "|---|---|---|---|---|---|---|---|---|\n")
        for r in out:
            cells = [f"**{r[k]:.2f}**" if best[k] is r else f"{r[k]:.2f}" for k in cols]
            f.write(f"| {r['layer']} | {r['head']} | " + " | ".join(cells) + " |\n")
    first = " ".join(paras[:2])
    subprocess.run([a.qkv, "attend", "--run", a.run, "-o", os.path.join(a.out, "attend.html"), first[:400]],
                   check=True, capture_output=True)
    for r in out:
        print(json.dumps(r))
    print(json.dumps({"strongest": summary["strongest"]}))


if __name__ == "__main__":
    main()
