"""PyTorch side of the tagger quality comparison (issue 23): the same data, vocabulary and tag ids (read from the
qkv run in --run: vocab.txt, labels.txt, config.json), model (tests/ref/tagger_model.py, qkv's tagger as torch
modules), optimiser, batch size and number of steps as `qkv train` had, then masked token accuracy on the test file.
Prints one JSON line.

    /usr/bin/python3 bench/quality/tagger.py --run QKV_RUN_DIR [--data ../shared/data/pos] [--steps N]
        [--seconds S] [--threads 2]

Batches: each epoch a random permutation of the training sentences cut into batches of batch_size (qkv's order with
data.bucket false, from another generator). Words outside the vocabulary are <unk>, as in qkv."""
import argparse
import json
import os
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "ref"))
from tagger_model import Tagger  # noqa: E402


def read_sentences(path, tagset):
    """[(tokens, tags)] with the universal (column 2) or Brown (column 3) tags."""
    col = {"universal": 1, "brown": 2}[tagset]
    out, toks, tags = [], [], []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line.strip():
                if toks:
                    out.append((toks, tags))
                toks, tags = [], []
                continue
            parts = line.split("\t")
            toks.append(parts[0])
            tags.append(parts[col])
    if toks:
        out.append((toks, tags))
    return out


def encode(sents, stoi, ttoi, lower):
    unk = stoi["<unk>"]
    return [([stoi.get(w.lower() if lower else w, unk) for w in t], [ttoi[x] for x in g]) for t, g in sents]


def batch(examples, pad):
    T = max(len(x) for x, _ in examples)
    ids = torch.full((len(examples), T), pad, dtype=torch.int64)
    tg = torch.zeros((len(examples), T), dtype=torch.int64)
    mask = torch.zeros((len(examples), T), dtype=torch.int32)
    for i, (x, y) in enumerate(examples):
        ids[i, :len(x)] = torch.tensor(x)
        tg[i, :len(y)] = torch.tensor(y)
        mask[i, :len(x)] = 1
    return ids, mask, tg


def accuracy(model, examples, pad, bs=64):
    model.eval()
    right = total = 0
    with torch.no_grad():
        for k in range(0, len(examples), bs):
            ids, mask, tg = batch(examples[k:k + bs], pad)
            pred = model(ids, mask).argmax(-1)
            m = mask.bool()
            right += (pred[m] == tg[m]).sum().item()
            total += m.sum().item()
    model.train()
    return right / total


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--run", required=True)
    ap.add_argument("--data", default=os.path.join(HERE, "..", "..", "..", "shared", "data", "pos"))
    ap.add_argument("--steps", type=int, default=0)
    ap.add_argument("--seconds", type=float, default=0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--name", default="", help="the model's name in tagger.json, for the output line")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    cfg = json.load(open(os.path.join(a.run, "config.json")))
    m, d, t = cfg["model"], cfg["data"], cfg["train"]
    itos = [w.rstrip("\n") for w in open(os.path.join(a.run, "vocab.txt"), encoding="utf-8")]
    stoi = {w: i for i, w in enumerate(itos)}
    tags = [w.rstrip("\n") for w in open(os.path.join(a.run, "labels.txt"), encoding="utf-8") if w.strip()]
    ttoi = {g: i for i, g in enumerate(tags)}
    train = encode(read_sentences(os.path.join(a.data, "train.tsv"), d["tagset"]), stoi, ttoi, d["lowercase"])
    test = encode(read_sentences(os.path.join(a.data, "test.tsv"), d["tagset"]), stoi, ttoi, d["lowercase"])
    torch.manual_seed(cfg.get("seed", 1))
    model = Tagger(len(itos), len(tags), m["d_model"], layers=m["n_layers"], bidirectional=m.get("bidirectional", True),
                   encoder=m["encoder"], heads=m.get("n_heads", 4), d_ff=m.get("d_ff", 512),
                   max_len=m.get("max_len", 512), dropout=m.get("dropout", 0.0))
    o = t["optimizer"]
    opt = torch.optim.Adam(model.parameters(), lr=o["lr"], betas=(o.get("beta1", 0.9), o.get("beta2", 0.999)),
                           eps=o.get("eps", 1e-8))
    steps = a.steps or t["steps"]
    if a.seconds:
        steps = 10 ** 9
    bs, pad = t["batch_size"], stoi["<pad>"]
    g = torch.Generator().manual_seed(cfg.get("seed", 1) + 2)
    step, t0, tokens = 0, time.time(), 0
    model.train()
    while step < steps:
        order = torch.randperm(len(train), generator=g).tolist()
        for k in range(0, len(order), bs):
            ids, mask, tg = batch([train[i] for i in order[k:k + bs]], pad)
            loss = model.loss(ids, mask, tg)
            opt.zero_grad()
            loss.backward()
            opt.step()
            tokens += int(mask.sum())
            step += 1
            if step >= steps or (a.seconds and time.time() - t0 >= a.seconds):
                steps = step
                break
    train_s = time.time() - t0
    acc = accuracy(model, test, pad)
    print(json.dumps({"bench": "tagger_quality", "engine": "pytorch", "model": a.name or m["encoder"], "steps": step,
                      "train_s": round(train_s, 1), "tok_per_s": round(tokens / train_s), "test_accuracy": acc,
                      "test_tokens": sum(len(x) for x, _ in test)}))


if __name__ == "__main__":
    main()
