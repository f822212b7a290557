#!/usr/bin/python3
"""Language-model quality: qkv vs. a PyTorch reference on Jane Austen (../shared/data/lm), character level, same
data, tokenizer, model, hyperparameters and steps. Prints one JSON line per (model, side) with the dev loss (nats
per token) and bits per character, then a comparison line per model (issue 9: qkv's dev loss <= torch's + 1%).

  /usr/bin/python3 bench/quality/lm.py [--models gru,gpt] [--qkv build/qkv] [--steps N] [--threads 2]
                                       [--only torch|qkv]

Run from the repository root. Configs: bench/quality/lm_gru.json, lm_gpt.json. The qkv side is `qkv train` then
`qkv eval --split dev --json`. The torch side rebuilds qkv's lm pipeline: every line of a file is its characters
followed by one "<nl>" token; the vocabulary is the training file's characters (plus <unk> for unseen ones);
training windows of seq_len + 1 tokens are drawn at random, dev is scored on consecutive windows (stride
seq_len). Models: GRU LM = Embedding -> 2 x GRU(512) -> Linear (the Trax course's, reading the inputs directly:
shift_right false), GPT = tests/ref/lm.py's module tree (HF GPT-2 names) at the config's sizes. Initial weights
differ (different generators), so single runs differ by noise."""
import argparse
import json
import math
import os
import random
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
LN2 = math.log(2.0)


def tokens(path):
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            out.extend(line.rstrip("\n"))
            out.append("<nl>")
    return out


def torch_side(cfg, steps, threads, seed):
    import torch
    import torch.nn.functional as F
    from torch import nn

    torch.set_num_threads(threads)
    torch.manual_seed(seed)
    random.seed(seed)
    d, m, t = cfg["data"], cfg["model"], cfg["train"]
    train = tokens(os.path.join(ROOT, d["train"]))
    dev = tokens(os.path.join(ROOT, d["dev"]))
    itos = ["<unk>"] + sorted(set(train))
    stoi = {s: i for i, s in enumerate(itos)}
    V, T, B = len(itos), d["seq_len"], t["batch_size"]
    tr = torch.tensor([stoi[c] for c in train])
    dv = torch.tensor([stoi.get(c, 0) for c in dev])

    if m["type"] == "rnnlm":
        class RnnLM(nn.Module):
            def __init__(self):
                super().__init__()
                self.embedding = nn.Embedding(V, m["d_model"])
                cell = nn.GRU if m.get("rnn", "gru") == "gru" else nn.LSTM
                self.rnn = cell(m["d_model"], m["d_model"], num_layers=m["n_layers"], batch_first=True)
                self.output = nn.Linear(m["d_model"], V)

            def forward(self, ids):
                return self.output(self.rnn(self.embedding(ids))[0])
        model = RnnLM()
    else:
        sys.path.insert(0, os.path.join(ROOT, "tests", "ref"))
        import lm_model
        model = lm_model.GPT(V, m["n_ctx"], m["d_model"], m["n_heads"], m["d_ff"], m["n_layers"], m["tied"])

    o = t["optimizer"]
    kw = dict(lr=o["lr"], betas=(o.get("beta1", 0.9), o.get("beta2", 0.999)), eps=o.get("eps", 1e-8))
    if o["name"] == "adamw":
        opt = torch.optim.AdamW(model.parameters(), weight_decay=o.get("weight_decay", 0.01), **kw)
    else:
        opt = torch.optim.Adam(model.parameters(), weight_decay=o.get("weight_decay", 0.0), **kw)
    t0 = time.time()
    model.train()
    for step in range(steps):
        starts = [random.randrange(0, len(tr) - T - 1) for _ in range(B)]
        x = torch.stack([tr[s:s + T] for s in starts])
        y = torch.stack([tr[s + 1:s + T + 1] for s in starts])
        loss = F.cross_entropy(model(x).reshape(-1, V), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if step % 100 == 0:
            print(f"# torch {m['type']} step {step} loss {loss.item():.4f}", file=sys.stderr, flush=True)
    secs = time.time() - t0
    model.eval()
    total, count = 0.0, 0
    with torch.no_grad():
        for s in range(0, len(dv) - T - 1, T * B):
            xs = [dv[k:k + T] for k in range(s, min(s + T * B, len(dv) - T - 1), T)]
            ys = [dv[k + 1:k + T + 1] for k in range(s, min(s + T * B, len(dv) - T - 1), T)]
            x, y = torch.stack(xs), torch.stack(ys)
            total += F.cross_entropy(model(x).reshape(-1, V), y.reshape(-1), reduction="sum").item()
            count += y.numel()
    loss = total / count
    return {"side": "torch", "model": m["type"], "dev_loss": round(loss, 4), "dev_bits_per_char": round(loss / LN2, 4),
            "steps": steps, "seconds": round(secs, 1)}


def qkv_side(qkv, cfg_path, name, steps, threads):
    run = tempfile.mkdtemp(prefix="qkv-lm-")
    env = dict(os.environ, QKV_THREADS=str(threads))
    t0 = time.time()
    r = subprocess.run([qkv, "train", "--config", cfg_path, "--run", run, "--quiet", "--set",
                        f"train.steps={steps}"], cwd=ROOT, env=env)
    secs = time.time() - t0
    if r.returncode != 0:
        return {"side": "qkv", "model": name, "status": "train failed", "returncode": r.returncode, "run": run}
    out = subprocess.run([qkv, "eval", "--run", run, "--split", "dev", "--json"], cwd=ROOT, env=env,
                         stdout=subprocess.PIPE, text=True)
    try:
        metrics = json.loads(out.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"side": "qkv", "model": name, "status": "eval failed", "returncode": out.returncode, "run": run}
    loss = metrics.get("loss")
    return {"side": "qkv", "model": name, "dev_loss": loss,
            "dev_bits_per_char": metrics.get("bits_per_char", round(loss / LN2, 4) if loss is not None else None),
            "steps": steps, "seconds": round(secs, 1), "run": run}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="gru,gpt")
    ap.add_argument("--qkv", default=os.path.join(ROOT, "build", "qkv"))
    ap.add_argument("--steps", type=int)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--only", choices=["torch", "qkv"])
    a = ap.parse_args()
    for name in a.models.split(","):
        path = os.path.join(HERE, f"lm_{name}.json")
        with open(path) as f:
            cfg = json.load(f)
        steps = a.steps or cfg["train"]["steps"]
        res = {}
        if a.only != "torch":
            res["qkv"] = qkv_side(a.qkv, path, name, steps, a.threads)
            print(json.dumps(res["qkv"]), flush=True)
        if a.only != "qkv":
            res["torch"] = torch_side(cfg, steps, a.threads, cfg.get("seed", 1))
            print(json.dumps(res["torch"]), flush=True)
        if len(res) == 2 and res["qkv"].get("dev_loss") is not None:
            q, t = res["qkv"]["dev_loss"], res["torch"]["dev_loss"]
            print(json.dumps({"comparison": f"lm_{name}", "qkv_dev_loss": q, "torch_dev_loss": t,
                              "qkv_within_1pct": q <= t * 1.01}), flush=True)


if __name__ == "__main__":
    main()
