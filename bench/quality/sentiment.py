#!/usr/bin/python3
"""Sentiment quality: qkv's Transformer classifier vs. a PyTorch reference, same data, tokenizer, hyperparameters
and steps. Prints one JSON line per side with its test accuracy (at the best dev checkpoint, as qkv train keeps
best.safetensors), then a comparison line.

  /usr/bin/python3 bench/quality/sentiment.py [--qkv build/qkv] [--steps N | --seconds S] [--config FILE]
                                             [--threads 2] [--only torch|qkv]

Run from the repository root (the config names ../shared/data/sentiment). The qkv side is `qkv train` with
bench/quality/sentiment.json, then `qkv eval --split test --json`. The torch side rebuilds the same pipeline:
word tokens (lowercased, punctuation dropped, split on whitespace), a vocabulary of every training word
(specials <pad> <unk> [CLS] first), [CLS] prepended, the same model (tests/ref/cls_model.py's module tree),
Adam, batch 32, dropout 0.1, dev accuracy every 100 steps. A config with "embeddings.pretrained" (GloVe) gives
both sides the same initial vectors for the same words (exact, then lowercased; <pad> and missing words keep the
model's init). Initial weights and dropout masks differ (different
generators), so single runs differ by noise of about a point on 248 test sentences."""
import argparse
import json
import math
import os
import random
import subprocess
import sys
import tempfile
import time
import unicodedata

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "ref"))


def words(text):
    """qkv's word tokenizer with lowercase + strip_punct: Unicode punctuation (P*) and BERT's ASCII symbols go."""
    out = []
    for ch in text.lower():
        cat = unicodedata.category(ch)
        o = ord(ch)
        ascii_sym = 33 <= o <= 47 or 58 <= o <= 64 or 91 <= o <= 96 or 123 <= o <= 126
        out.append(" " if ch.isspace() else ("" if cat.startswith("P") or ascii_sym else ch))
    return "".join(out).split()


def read(path):
    rows = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            label, text = line.rstrip("\n").split("\t", 1)
            rows.append((int(label), words(text)))
    return rows


def torch_side(cfg, steps, threads, seed, seconds=0):
    import torch
    from cls_model import Classifier

    torch.set_num_threads(threads)
    torch.manual_seed(seed)
    random.seed(seed)
    d = cfg["data"]
    train, dev, test = (read(os.path.normpath(os.path.join(ROOT, d[k]))) for k in ("train", "dev", "test"))
    counts = {}
    for _, ws in train:
        for w in ws:
            counts[w] = counts.get(w, 0) + 1
    m, t = cfg["model"], cfg["train"]
    embmean = m["type"] == "embmean"
    min_freq = d.get("min_freq", 1)
    cls = [] if embmean else ["[CLS]"]
    itos = ["<pad>", "<unk>"] + cls + sorted((w for w in counts if counts[w] >= min_freq),
                                             key=lambda w: (-counts[w], w.encode()))
    stoi = {w: i for i, w in enumerate(itos)}
    L = d["max_len"]

    def encode(rows):
        if embmean:
            return [(y, [stoi.get(w, 1) for w in ws][:L] or [1]) for y, ws in rows]
        return [(y, [2] + [stoi.get(w, 1) for w in ws][: L - 1]) for y, ws in rows]

    train, dev, test = encode(train), encode(dev), encode(test)
    if embmean:  # the Trax baseline: Embedding -> masked mean -> Dense -> LogSoftmax
        model = EmbMean(len(itos), m["dim"], 2, torch)
        drop = None
    else:
        act = {"relu": torch.relu, "gelu": torch.nn.functional.gelu}[m["activation"]]
        model = Classifier(len(itos), 2, m["d_model"], m["n_layers"], m["n_heads"], m["d_ff"], act,
                           m["norm"] == "pre", m["pos_enc"] == "learned", m["emb_scale_sqrt_d"],
                           max_len=m["max_len"])
        drop = torch.nn.Dropout(m["dropout"])
        for layer in model.encoder.layers:  # the reference module has no dropout: add it where qkv has it
            layer.ff = (lambda l: lambda x: drop(l.linear2(drop(act(l.linear1(x))))))(layer)
            layer.self_attn.drop = torch.nn.Dropout(m["attn_dropout"])
    emb = cfg.get("embeddings") or {}
    covered = None
    if emb.get("pretrained"):  # torchtext's vocab.load_vectors + Embedding.from_pretrained, as qkv's run does
        covered = load_vectors(model.embedding.weight, itos, os.path.normpath(os.path.join(ROOT, emb["pretrained"])),
                               emb.get("lowercase_fallback", True), torch)
        if emb.get("frozen"):
            model.embedding.weight.requires_grad_(False)
    opt = torch.optim.Adam(model.parameters(), lr=t["optimizer"]["lr"])

    def batch(rows):
        T = max(len(ids) for _, ids in rows)
        x = torch.zeros(len(rows), T, dtype=torch.long)
        pad = torch.ones(len(rows), T, dtype=torch.int32)
        for i, (_, ids) in enumerate(rows):
            x[i, : len(ids)] = torch.tensor(ids)
            pad[i, : len(ids)] = 0
        return x, pad, torch.tensor([y for y, _ in rows])

    def accuracy(rows):
        model.eval()
        ok = 0
        with torch.no_grad():
            for i in range(0, len(rows), 64):
                x, pad, y = batch(rows[i: i + 64])
                ok += (model(x, pad).argmax(-1) == y).sum().item()
        model.train()
        return ok / len(rows)

    B, every = t["batch_size"], cfg["eval"]["every"]
    order, pos, best, best_state = [], 0, -1.0, None
    # The clock counts training only (dev evaluations paused), as qkv's train.max_seconds does.
    trained, t_mark = 0.0, time.time()
    for step in range(1, steps + 1):
        if seconds and trained + time.time() - t_mark >= seconds:  # equal wall-clock: stop, score what was trained
            acc = accuracy(dev)
            if acc > best:
                best, best_state = acc, {k: v.clone() for k, v in model.state_dict().items()}
            steps = step - 1
            break
        if pos + B > len(order):
            order, pos = random.sample(range(len(train)), len(train)), 0
        x, pad, y = batch([train[i] for i in order[pos: pos + B]])
        pos += B
        if embmean:
            loss = torch.nn.functional.nll_loss(model(x, pad), y)
        else:
            loss = torch.nn.functional.cross_entropy(model.classifier(model_hidden(model, x, pad, drop)), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % every == 0 or step == steps:
            trained += time.time() - t_mark
            acc = accuracy(dev)
            if acc > best:
                best, best_state = acc, {k: v.clone() for k, v in model.state_dict().items()}
            t_mark = time.time()
    trained += time.time() - t_mark
    model.load_state_dict(best_state)
    return {"side": "torch", "test_accuracy": round(accuracy(test), 4), "best_dev_accuracy": round(best, 4),
            "steps": steps, "train_seconds": round(trained, 1), "vocab": len(itos),
            **({"pretrained_found": covered} if covered is not None else {})}


def load_vectors(weight, itos, path, lowercase_fallback, torch):
    """Rows of the vocabulary's words found in a GloVe / word2vec text file (exact word, else lowercased) become
    the file's vectors; the others keep their init and <pad> (id 0) is left alone. Returns how many rows were set."""
    vecs = {}
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f):
            parts = line.rstrip("\r\n").split(" ")
            if n == 0 and len(parts) == 2 and all(p.isdigit() for p in parts):
                continue  # word2vec's "N D" header
            vecs[parts[0]] = parts[1:]
    dim = weight.shape[1]
    found = 0
    with torch.no_grad():
        for i, w in enumerate(itos):
            if i == 0:
                continue
            v = vecs.get(w)
            if v is None and lowercase_fallback:
                v = vecs.get(w.lower())
            if v is None:
                continue
            if len(v) != dim:
                raise SystemExit("%s: %d-dimensional vectors, the model's embedding has %d" % (path, len(v), dim))
            weight[i] = torch.tensor([float(x) for x in v], dtype=torch.float32)
            found += 1
    return found


def EmbMean(vocab, dim, classes, torch):
    class M(torch.nn.Module):
        def __init__(s):
            super().__init__()
            s.embedding = torch.nn.Embedding(vocab, dim)
            s.classifier = torch.nn.Linear(dim, classes)

        def forward(s, x, pad):
            keep = (1 - pad).unsqueeze(-1).float()
            mean = (s.embedding(x) * keep).sum(1) / keep.sum(1).clamp(min=1e-9)
            return torch.log_softmax(s.classifier(mean), -1)
    return M()


def model_hidden(model, x, pad, drop):
    """The classifier's forward up to the [CLS] hidden state, with dropout where qkv applies it (training)."""
    h = drop(model.pos(model.embedding(x) * model.scale))
    for layer in model.encoder.layers:
        if layer.pre:
            h = h + drop(layer.self_attn(layer.norm1(h), pad))
            h = h + layer.ff(layer.norm2(h))
        else:
            h = layer.norm1(h + drop(layer.self_attn(h, pad)))
            h = layer.norm2(h + layer.ff(h))
    if hasattr(model.encoder, "norm"):
        h = model.encoder.norm(h)
    return h[:, 0]


def qkv_side(qkv, steps, threads, config, seconds=0):
    run = tempfile.mkdtemp(prefix="qkv-sentiment-")
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    t0 = time.time()
    r = subprocess.run([qkv, "train", "--config", config, "--run", run, "--quiet",
                        "--set", "train.steps=%d" % steps, "--set", "train.max_seconds=%g" % seconds],
                       cwd=ROOT, env=env)
    if r.returncode != 0:
        return {"side": "qkv", "status": "train failed", "returncode": r.returncode, "run": run}
    secs = time.time() - t0
    out = subprocess.run([qkv, "eval", "--run", run, "--split", "test", "--json"], cwd=ROOT, env=env,
                         stdout=subprocess.PIPE, text=True)
    try:
        metrics = json.loads(out.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"side": "qkv", "status": "eval failed", "returncode": out.returncode, "run": run}
    with open(os.path.join(run, "log.jsonl")) as f:  # the steps and training time actually taken
        ends = [json.loads(l) for l in f if '"kind":"end"' in l]
    steps = ends[-1]["step"] if ends else steps
    trained = ends[-1].get("train_seconds", secs) if ends else secs
    return {"side": "qkv", "test_accuracy": metrics.get("accuracy"), "steps": steps, "train_seconds": round(trained, 1),
            "run": run, "metrics": metrics}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--qkv", default=os.path.join(ROOT, "build", "qkv"))
    ap.add_argument("--steps", type=int)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--only", choices=["torch", "qkv"])
    ap.add_argument("--config", default=os.path.join(HERE, "sentiment.json"),
                    help="sentiment.json (Transformer), sentiment_embmean.json (the baseline) or "
                         "sentiment_glove.json (the baseline from GloVe vectors)")
    ap.add_argument("--seconds", type=float, default=0,
                    help="equal wall-clock: each side trains for this long (steps become a cap)")
    a = ap.parse_args()
    with open(a.config) as f:
        cfg = json.load(f)
    steps = a.steps or (10 ** 7 if a.seconds else cfg["train"]["steps"])
    res = {}
    if a.only != "torch":
        res["qkv"] = qkv_side(a.qkv, steps, a.threads, a.config, a.seconds)
        print(json.dumps(res["qkv"]), flush=True)
    if a.only != "qkv":
        res["torch"] = torch_side(cfg, steps, a.threads, a.seed, a.seconds)
        print(json.dumps(res["torch"]), flush=True)
    if len(res) == 2 and "test_accuracy" in res["qkv"] and res["qkv"]["test_accuracy"] is not None:
        q, t = res["qkv"]["test_accuracy"], res["torch"]["test_accuracy"]
        print(json.dumps({"comparison": "sentiment", "model": cfg["model"]["type"], "seconds": a.seconds or None,
                          "qkv": q, "torch": t,
                          "qkv_within_0.5_points": q >= t - 0.005}), flush=True)


if __name__ == "__main__":
    main()
