#!/usr/bin/python3
"""Siamese duplicate detection quality: qkv's siamese model type vs. a PyTorch reference, same data, vocabulary,
model, loss, optimiser, batch size and steps (bench/quality/siamese.json). Prints one JSON line per side with its
test accuracy, F1 and AUC at the threshold chosen on dev, then a comparison line.

  /usr/bin/python3 bench/quality/siamese.py [--qkv build/qkv] [--steps N | --seconds S] [--threads 2]
                                           [--config FILE] [--only qkv]

Run from the repository root (the config names ../shared/data/paraphrase). The qkv side is `qkv train` (length
bucketing off for equal steps: the reference draws shuffled batches), then `qkv eval --split test --json`. The torch
side reads that run's vocab.txt (so both see the same ids; it needs the qkv side first) and rebuilds the rest: word
tokens as qkv's word tokenizer with lowercase + strip_punct, texts cut to max_len, training on the duplicate pairs
in shuffled batches (the other pairs of a batch are the negatives), Embedding -> LSTM -> masked mean ->
F.normalize for both texts with one set of weights, the course's triplet loss (mean and closest negatives) averaged
over the batch, Adam. Both sides score the final weights (eval.every = steps) and pick the most accurate cosine
threshold on dev, the highest of equally accurate cuts. Initial weights differ (different generators), so single
runs differ by noise."""
import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
import unicodedata

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))


def words(text):
    """qkv's word tokenizer with lowercase + strip_punct: Unicode punctuation (P*) and BERT's ASCII symbols go."""
    out = []
    for ch in text.lower():
        cat = unicodedata.category(ch)
        o = ord(ch)
        ascii_sym = 33 <= o <= 47 or 58 <= o <= 64 or 91 <= o <= 96 or 123 <= o <= 126
        out.append(" " if ch.isspace() else ("" if cat.startswith("P") or ascii_sym else ch))
    return "".join(out).split()


def read(path, stoi, max_len):
    rows = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            label, a, b = line.rstrip("\n").split("\t")
            enc = [[stoi.get(w, 1) for w in words(t)][:max_len] for t in (a, b)]
            rows.append((int(label), enc[0], enc[1]))
    return rows


def triplet_loss(torch, v1, v2, margin, terms="both"):
    s = v1 @ v2.t()
    n = s.shape[0]
    eye = torch.eye(n)
    pos = torch.diagonal(s)
    off = s * (1.0 - eye)
    mean_neg = off.sum(dim=1) / (n - 1)
    exclude = (eye == 1) | (off > pos.reshape(n, 1))
    closest = (off - 2.0 * exclude.float()).max(dim=1).values
    loss = torch.zeros(())
    if terms in ("both", "closest"):
        loss = loss + torch.clamp(margin - pos + closest, min=0).mean()
    if terms in ("both", "mean"):
        loss = loss + torch.clamp(margin - pos + mean_neg, min=0).mean()
    return loss


def best_threshold(cos, gold):
    """The most accurate cut for "duplicate when cos >= t" (the highest of equally accurate ones), as qkv's."""
    order = sorted(range(len(cos)), key=lambda i: -cos[i])
    correct = best = sum(1 for g in gold if g == 0)
    t = cos[order[0]] + 1.0
    i = 0
    while i < len(order):
        j = i
        while j < len(order) and cos[order[j]] == cos[order[i]]:
            correct += 1 if gold[order[j]] else -1
            j += 1
        if correct > best:
            best = correct
            t = 0.5 * (cos[order[i]] + cos[order[j]]) if j < len(order) else cos[order[i]] - 1.0
        i = j
    return t


def auc(cos, gold):
    pos = [c for c, g in zip(cos, gold) if g]
    neg = sorted(c for c, g in zip(cos, gold) if not g)
    import bisect
    wins = sum(bisect.bisect_left(neg, p) + 0.5 * (bisect.bisect_right(neg, p) - bisect.bisect_left(neg, p))
               for p in pos)
    return wins / (len(pos) * len(neg))


def scores(cos, gold, t):
    tp = sum(1 for c, g in zip(cos, gold) if c >= t and g)
    fp = sum(1 for c, g in zip(cos, gold) if c >= t and not g)
    fn = sum(1 for c, g in zip(cos, gold) if c < t and g)
    p = tp / (tp + fp) if tp + fp else 0.0
    r = tp / (tp + fn) if tp + fn else 0.0
    return {"accuracy": (len(cos) - fp - fn) / len(cos), "f1": 2 * p * r / (p + r) if p + r else 0.0,
            "auc": auc(cos, gold), "threshold": t}


def torch_side(cfg, run, steps, threads, seed, seconds=0):
    import torch
    import torch.nn.functional as F

    torch.set_num_threads(threads)
    torch.manual_seed(seed)
    random.seed(seed)
    with open(os.path.join(run, "vocab.txt"), encoding="utf-8") as f:
        itos = [l.rstrip("\n") for l in f]
    stoi = {w: i for i, w in enumerate(itos)}
    d, m, t = cfg["data"], cfg["model"], cfg["train"]
    L = d["max_len"]
    train, dev, test = (read(os.path.normpath(os.path.join(ROOT, d[k])), stoi, L) for k in ("train", "dev", "test"))
    train = [r for r in train if r[0] == 1]
    D = m["d_model"]

    class Encoder(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embedding = torch.nn.Embedding(len(itos), D)
            self.rnn = torch.nn.LSTM(D, D, m["n_layers"], batch_first=True)

        def forward(self, x, mask):
            h, _ = self.rnn(self.embedding(x))
            mean = (h * mask.unsqueeze(-1)).sum(1) / mask.sum(1, keepdim=True).clamp(min=1)
            return F.normalize(mean, dim=-1)

    enc = Encoder()
    opt = torch.optim.Adam(enc.parameters(), lr=t["optimizer"]["lr"])

    def side(seqs):
        T = max(len(s) for s in seqs)
        x = torch.zeros(len(seqs), T, dtype=torch.long)
        mask = torch.zeros(len(seqs), T)
        for i, s in enumerate(seqs):
            x[i, : len(s)] = torch.tensor(s)
            mask[i, : len(s)] = 1
        return x, mask

    def cosines(rows):
        enc.eval()
        out = []
        with torch.no_grad():
            for i in range(0, len(rows), 64):
                part = rows[i: i + 64]
                v1, v2 = enc(*side([r[1] for r in part])), enc(*side([r[2] for r in part]))
                out += (v1 * v2).sum(-1).tolist()
        enc.train()
        return out

    B = t["batch_size"]
    order, pos, trained, t0 = [], 0, 0.0, time.time()
    done = 0
    for step in range(1, steps + 1):
        if seconds and time.time() - t0 >= seconds:
            break
        if pos + B > len(order):
            order, pos = random.sample(range(len(train)), len(train)), 0
        part = [train[i] for i in order[pos: pos + B]]
        pos += B
        loss = triplet_loss(torch, enc(*side([r[1] for r in part])), enc(*side([r[2] for r in part])),
                            m["margin"], m["loss"])
        opt.zero_grad()
        loss.backward()
        opt.step()
        done = step
    trained = time.time() - t0
    thr = best_threshold(cosines(dev), [r[0] for r in dev])
    res = scores(cosines(test), [r[0] for r in test], thr)
    return {"side": "torch", **{k: round(v, 4) for k, v in res.items()}, "steps": done,
            "train_seconds": round(trained, 1), "vocab": len(itos)}


def qkv_side(qkv, steps, threads, config, seconds=0):
    run = tempfile.mkdtemp(prefix="qkv-siamese-")
    env = dict(os.environ, QKV_THREADS=str(threads))
    args = [qkv, "train", "--config", config, "--run", run, "--quiet", "--set", "train.steps=%d" % steps,
            "--set", "train.max_seconds=%g" % seconds]
    if not seconds:  # equal steps: shuffled batches as the reference draws them, the final weights scored
        args += ["--set", "data.bucket=false", "--set", "eval.every=%d" % steps,
                 "--set", "train.checkpoint_every=%d" % steps]
    r = subprocess.run(args, cwd=ROOT, env=env)
    if r.returncode != 0:
        return {"side": "qkv", "status": "train failed", "returncode": r.returncode, "run": run}
    out = subprocess.run([qkv, "eval", "--run", run, "--split", "test", "--json"], cwd=ROOT, env=env,
                         stdout=subprocess.PIPE, text=True)
    try:
        metrics = json.loads(out.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"side": "qkv", "status": "eval failed", "returncode": out.returncode, "run": run}
    with open(os.path.join(run, "log.jsonl")) as f:
        ends = [json.loads(l) for l in f if '"kind":"end"' in l]
    return {"side": "qkv", **{k: round(metrics[k], 4) for k in ("accuracy", "f1", "auc", "threshold")},
            "steps": ends[-1]["step"] if ends else steps,
            "train_seconds": round(ends[-1].get("train_seconds", 0), 1) if ends else None, "run": run}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--qkv", default=os.path.join(ROOT, "build", "qkv"))
    ap.add_argument("--steps", type=int)
    ap.add_argument("--seconds", type=float, default=0, help="equal wall-clock: each side trains this long")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--only", choices=["qkv"])
    ap.add_argument("--config", default=os.path.join(HERE, "siamese.json"))
    a = ap.parse_args()
    with open(a.config) as f:
        cfg = json.load(f)
    steps = a.steps or (10 ** 7 if a.seconds else cfg["train"]["steps"])
    q = qkv_side(a.qkv, steps, a.threads, a.config, a.seconds)
    print(json.dumps(q), flush=True)
    if a.only == "qkv" or "accuracy" not in q:
        return
    t = torch_side(cfg, q["run"], steps, a.threads, a.seed, a.seconds)
    print(json.dumps(t), flush=True)
    print(json.dumps({"comparison": "siamese", "steps": None if a.seconds else steps, "seconds": a.seconds or None,
                      "qkv_accuracy": q["accuracy"], "torch_accuracy": t["accuracy"], "qkv_f1": q["f1"],
                      "torch_f1": t["f1"], "qkv_within_0.5_points": q["accuracy"] >= t["accuracy"] - 0.005}),
          flush=True)


if __name__ == "__main__":
    main()
