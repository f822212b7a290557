#!/usr/bin/python3
"""Language-model quality: qkv vs. a PyTorch reference on Jane Austen (../shared/data/lm), character level, same
data, tokenizer, model, hyperparameters and steps. Prints one JSON line per (model, side) with the dev loss (nats
per token) and bits per token (= per character: the tokenizer is char, with one <nl> token per line end), then a
comparison line per model (issue 9).

  /usr/bin/python3 bench/quality/lm.py [--models gru,gpt] [--qkv build/qkv] [--steps N | --seconds S]
                                       [--threads 2] [--seed N] [--twin] [--only torch|qkv] [--out DIR]

--steps: same data, model, hyperparameters and steps; the comparison line checks qkv's dev loss <= torch's + 1%.
--seconds: equal wall-clock; each engine trains S seconds of training proper (dev evaluations not counted, on both
sides), the best dev checkpoint is scored on test; the line checks qkv's test bits per character < torch's.
--out DIR keeps qkv's run, the torch side's dev curve (JSON lines in qkv's log format) and an SVG of both curves
(`qkv plot`).

Run from the repository root. Configs: bench/quality/lm_gru.json, lm_gpt.json. The qkv side is `qkv train` then
`qkv eval --split dev --json`. The torch side rebuilds qkv's lm pipeline: every line of a file is its characters
followed by one "<nl>" token; the vocabulary is the training file's characters (plus <unk> for unseen ones);
training windows of seq_len + 1 tokens are drawn at random, dev is scored on consecutive windows (stride
seq_len). Models: GRU LM = Embedding -> 2 x GRU(512) -> Linear (the Trax course's, reading the inputs directly:
shift_right false), GPT = tests/ref/lm.py's module tree (HF GPT-2 names) at the config's sizes. Initial weights
differ (different generators), so single runs differ by noise.

--twin: the torch side starts from qkv's initial weights for the seed and trains on qkv's batches in qkv's order
(Philox4x32 shuffles reproduced here, qkv's vocabulary ids): the two runs then differ only in their arithmetic, not
in initialisation or data order. The first five steps' losses are printed to stderr with six digits to show it."""
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


M32 = 0xFFFFFFFF


def philox_u32(key, counter):
    """First word of Philox4x32-10 (key, counter): qkv_rng_u32 (src/core/rng.c), for qkv's data order."""
    c0, c1, c2, c3 = counter & M32, (counter >> 32) & M32, 0, 0
    k0, k1 = key & M32, (key >> 32) & M32
    for _ in range(10):
        p0, p1 = 0xD2511F53 * c0, 0xCD9E8D57 * c2
        c0, c1, c2, c3 = ((p1 >> 32) ^ c1 ^ k0) & M32, p1 & M32, ((p0 >> 32) ^ c3 ^ k1) & M32, p0 & M32
        k0, k1 = (k0 + 0x9E3779B9) & M32, (k1 + 0xBB67AE85) & M32
    return c0


class QkvOrder:
    """qkv's training batches (src/train/batch.c with data.shuffle and data.bucket on): the windows of epoch e are
    Fisher-Yates shuffled by a Philox stream keyed by the data seed (run seed + 2) from counter e << 32; blocks of 32
    batches are sorted by length (stable), then whole batches are shuffled by the same stream."""

    def __init__(self, lengths, batch, data_seed):
        self.lengths, self.batch, self.seed = lengths, batch, data_seed

    def _below(self, n):
        if n <= 1:
            return 0
        limit = M32 - M32 % n
        while True:
            x = philox_u32(self.seed, self.ctr)
            self.ctr += 1
            if x < limit:
                return x % n

    def _shuffle(self, a):
        for i in range(len(a) - 1, 0, -1):
            j = self._below(i + 1)
            a[i], a[j] = a[j], a[i]

    def plan(self, epoch):
        self.ctr = epoch << 32
        n, B = len(self.lengths), self.batch
        order = list(range(n))
        self._shuffle(order)
        w = 32 * B
        for s in range(0, n, w):
            block = order[s:s + w]
            order[s:s + w] = [i for _, _, i in sorted((self.lengths[i], p, i) for p, i in enumerate(block))]
        nb = (n + B - 1) // B
        border = list(range(nb))
        self._shuffle(border)
        return [order[b * B:(b + 1) * B] for b in border]

    def batches_forever(self):
        epoch = 0
        while True:
            yield from self.plan(epoch)
            epoch += 1


def load_safetensors(path):
    import struct
    import torch
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    head, base, out = json.loads(raw[8:8 + n]), 8 + n, {}
    for k, v in head.items():
        if k != "__metadata__" and v["dtype"] == "F32":
            a, b = v["data_offsets"]
            out[k] = torch.frombuffer(bytearray(raw[base + a:base + b]), dtype=torch.float32).reshape(v["shape"])
    return out


def torch_side(cfg, steps, threads, seed, seconds=0, curve=None, test_too=False, twin=None):
    import torch
    import torch.nn.functional as F
    from torch import nn

    torch.set_num_threads(threads)
    torch.manual_seed(seed)
    random.seed(seed)
    d, m, t = cfg["data"], cfg["model"], cfg["train"]
    train = tokens(os.path.join(ROOT, d["train"]))
    dev = tokens(os.path.join(ROOT, d["dev"]))
    # With a twin (a qkv run dir): qkv's vocabulary, initial weights and batch order, so the two sides differ only
    # in their arithmetic.
    itos = (["<unk>"] + sorted(set(train))) if not twin else \
        [l.rstrip("\n") for l in open(os.path.join(twin, "vocab.txt"), encoding="utf-8")]
    stoi = {s: i for i, s in enumerate(itos)}
    unk = stoi["<unk>"]
    V, T, B = len(itos), d["seq_len"], t["batch_size"]
    tr = torch.tensor([stoi.get(c, unk) for c in train])
    dv = torch.tensor([stoi.get(c, unk) for c in dev])

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
    if twin:
        w = load_safetensors(os.path.join(twin, "ckpt-1.safetensors"))
        sd = model.state_dict()
        model.load_state_dict({k: w.get(k, w.get("transformer.wte.weight")) for k in sd}, strict=True)
        starts = list(range(0, len(tr) - 1, T))
        order = QkvOrder([min(T + 1, len(tr) - s) for s in starts], B, seed + 2).batches_forever()

    o = t["optimizer"]
    kw = dict(lr=o["lr"], betas=(o.get("beta1", 0.9), o.get("beta2", 0.999)), eps=o.get("eps", 1e-8))
    # qkv's default train.optimizer.decay_exclude_1d: biases and LayerNorm parameters get no weight decay.
    wd = o.get("weight_decay", 0.01 if o["name"] == "adamw" else 0.0)
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": wd},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    opt = (torch.optim.AdamW if o["name"] == "adamw" else torch.optim.Adam)(groups, **kw)

    def score(ids):
        """Mean loss (nats per token) over consecutive windows of T + 1 tokens, stride T, as qkv scores dev/test."""
        model.eval()
        total, count = 0.0, 0
        last = len(ids) - T - 1
        with torch.no_grad():
            for s in range(0, last, T * B):
                ks = range(s, min(s + T * B, last), T)
                x = torch.stack([ids[k:k + T] for k in ks])
                y = torch.stack([ids[k + 1:k + T + 1] for k in ks])
                total += F.cross_entropy(model(x).reshape(-1, V), y.reshape(-1), reduction="sum").item()
                count += y.numel()
        model.train()
        return total / count

    # The clock counts training only (dev evaluations paused), as qkv's train.max_seconds does.
    every = cfg["eval"]["every"]
    best, best_state, trained, t_mark, done = None, None, 0.0, time.time(), 0

    def evaluate(step):
        nonlocal best, best_state
        loss = score(dv)
        if curve:
            curve.write(json.dumps({"kind": "eval", "split": "dev", "step": step, "loss": loss,
                                    "bits_per_token": loss / LN2, "train_seconds": trained}) + "\n")
            curve.flush()
        if best is None or loss < best:
            best, best_state = loss, {k: v.clone() for k, v in model.state_dict().items()}

    log_first = 5 if twin else 0  # the first steps' losses show the twin's data and arithmetic agree with qkv's
    model.train()
    for step in range(1, steps + 1):
        if seconds and trained + time.time() - t_mark >= seconds:
            break
        if twin:
            ws = [starts[i] for i in next(order)]
            n = max(min(T + 1, len(tr) - s) for s in ws) - 1
            x = torch.zeros(len(ws), n, dtype=torch.long)
            y = torch.full((len(ws), n), -100, dtype=torch.long)
            for r, s in enumerate(ws):
                k = min(n, len(tr) - s - 1)
                x[r, :k], y[r, :k] = tr[s:s + k], tr[s + 1:s + k + 1]
        else:
            ws = [random.randrange(0, len(tr) - T - 1) for _ in range(B)]
            x = torch.stack([tr[s:s + T] for s in ws])
            y = torch.stack([tr[s + 1:s + T + 1] for s in ws])
        loss = F.cross_entropy(model(x).reshape(-1, V), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        done = step
        if step % 100 == 0 or step <= log_first:
            print(f"# torch {m['type']} step {step} loss {loss.item():.6f}", file=sys.stderr, flush=True)
        if step % every == 0 or step == steps:
            trained += time.time() - t_mark
            evaluate(step)
            t_mark = time.time()
    if done % every and done != steps:  # stopped by the clock: score the last steps too, as qkv does
        trained += time.time() - t_mark
        evaluate(done)
    model.load_state_dict(best_state)
    res = {"side": "torch", "model": m["type"], "dev_loss": round(best, 4), "dev_bits_per_token": round(best / LN2, 4),
           "steps": done, "train_seconds": round(trained, 1)}
    if test_too:
        te = torch.tensor([stoi.get(c, 0) for c in tokens(os.path.join(ROOT, d["test"]))])
        tl = score(te)
        res.update(test_loss=round(tl, 4), test_bits_per_token=round(tl / LN2, 4))
    return res


def qkv_side(qkv, cfg_path, name, steps, threads, seconds=0, run=None, test_too=False, seed=None):
    run = run or tempfile.mkdtemp(prefix="qkv-lm-")
    env = dict(os.environ, QKV_THREADS=str(threads))
    cmd = [qkv, "train", "--config", cfg_path, "--run", run, "--quiet", "--set", f"train.steps={steps}"]
    if seed is not None:
        cmd += ["--set", f"seed={seed}"]
    if seconds:
        cmd += ["--set", f"train.max_seconds={seconds}"]
    r = subprocess.run(cmd, cwd=ROOT, env=env)
    if r.returncode != 0:
        return {"side": "qkv", "model": name, "status": "train failed", "returncode": r.returncode, "run": run}
    end = [json.loads(l) for l in open(os.path.join(run, "log.jsonl")) if '"kind":"end"' in l][-1]
    res = {"side": "qkv", "model": name, "steps": end["step"], "train_seconds": round(end.get("train_seconds", 0), 1),
           "run": run}
    for split in ["dev"] + (["test"] if test_too else []):
        out = subprocess.run([qkv, "eval", "--run", run, "--split", split, "--json"], cwd=ROOT, env=env,
                             stdout=subprocess.PIPE, text=True)
        try:
            loss = json.loads(out.stdout.strip().splitlines()[-1])["loss"]
        except (ValueError, IndexError, KeyError):
            return dict(res, status=f"eval {split} failed", returncode=out.returncode)
        res[f"{split}_loss"] = round(loss, 4)
        res[f"{split}_bits_per_token"] = round(loss / LN2, 4)
    return res


def qkv_init(qkv, cfg_path, seed):
    """A qkv run dir holding the model's initial weights for the seed (one step at a learning rate of 1e-30 changes
    no float32 weight) and its vocabulary."""
    run = tempfile.mkdtemp(prefix="qkv-lm-init-")
    subprocess.run([qkv, "train", "--config", cfg_path, "--run", run, "--quiet", "--set", "train.steps=1",
                    "--set", "train.optimizer.lr=1e-30", "--set", f"seed={seed}"], cwd=ROOT, check=True,
                   env=dict(os.environ, QKV_THREADS="1"))
    return run


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="gru,gpt")
    ap.add_argument("--qkv", default=os.path.join(ROOT, "build", "qkv"))
    ap.add_argument("--steps", type=int, help="same-steps comparison (default: the config's train.steps)")
    ap.add_argument("--seconds", type=float, default=0,
                    help="equal wall-clock comparison: each engine trains this many seconds (evaluations not "
                         "counted), then dev and test are scored")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, help="seed of both sides (default: the config's); runs at a few seeds show the spread "
                    "between initialisations")
    ap.add_argument("--only", choices=["torch", "qkv"])
    ap.add_argument("--twin", action="store_true",
                    help="the torch side starts from qkv's initial weights (for the seed) and trains on qkv's batches "
                         "in qkv's order: the two runs then differ only in their arithmetic, not in initialisation "
                         "or data order")
    ap.add_argument("--out", help="folder for the curves: <model>_<tag>_{qkv run,torch.jsonl,curve.svg}")
    a = ap.parse_args()
    tag = f"{a.seconds / 60:g}min" if a.seconds else f"{a.steps or 'cfg'}steps"
    if a.seed is not None:
        tag += f"_seed{a.seed}"
    if a.twin:
        tag += "_twin"
    if a.out:
        os.makedirs(a.out, exist_ok=True)
    for name in a.models.split(","):
        path = os.path.join(HERE, f"lm_{name}.json")
        with open(path) as f:
            cfg = json.load(f)
        steps = a.steps or (10 ** 7 if a.seconds else cfg["train"]["steps"])
        base = os.path.join(a.out, f"{name}_{tag}") if a.out else None
        res = {}
        if a.only != "torch":
            run = base + "_qkv" if base else None
            if run and os.path.exists(run):
                subprocess.run(["rm", "-rf", run])
            res["qkv"] = qkv_side(a.qkv, path, name, steps, a.threads, a.seconds, run, bool(a.seconds), a.seed)
            print(json.dumps(res["qkv"]), flush=True)
        if a.only != "qkv":
            curve = open(base + "_torch.jsonl", "w") if base else None
            seed = cfg.get("seed", 1) if a.seed is None else a.seed
            if a.twin and cfg["model"]["type"] != "gpt":
                sys.exit(f"lm.py: --twin maps qkv's parameters onto the GPT module only, not {cfg['model']['type']}")
            twin = qkv_init(a.qkv, path, seed) if a.twin else None
            res["torch"] = torch_side(cfg, steps, a.threads, seed, a.seconds, curve, bool(a.seconds), twin)
            print(json.dumps(res["torch"]), flush=True)
            if curve:
                curve.close()
        if len(res) == 2 and res["qkv"].get("dev_loss") is not None:
            q, t = res["qkv"], res["torch"]
            line = {"comparison": f"lm_{name}", "mode": tag, "qkv_dev_loss": q["dev_loss"],
                    "torch_dev_loss": t["dev_loss"], "qkv_steps": q["steps"], "torch_steps": t["steps"]}
            if a.seconds:
                line.update(qkv_test_bits=q["test_bits_per_token"], torch_test_bits=t["test_bits_per_token"],
                            qkv_better=q["test_bits_per_token"] < t["test_bits_per_token"])
            else:
                line["qkv_within_1pct"] = q["dev_loss"] <= t["dev_loss"] * 1.01
            print(json.dumps(line), flush=True)
            if base:
                x = "minutes" if a.seconds else "step"
                subprocess.run([a.qkv, "plot", "-o", base + "_curve.svg", "--x", x, "--y", "bits_per_token",
                                "--title", f"{name} LM, dev bits per character ({tag}, 2 cores)",
                                f"qkv={base}_qkv", f"pytorch={base}_torch.jsonl"], cwd=ROOT)


if __name__ == "__main__":
    main()
