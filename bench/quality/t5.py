#!/usr/bin/python3
"""Multi-task against single-task T5 at equal budget (issue 26): one "t5" model trained on a text-to-text mixture of
four tasks, each example prefixed with its task, against four single-task models of the same size trained for the
same number of steps on their task alone; every model scored on each task's dev split with the task's metric
(translation: BLEU of `qkv bleu`; summarization: ROUGE-L F of `qkv rouge`; sentiment and paraphrase: accuracy of
the generated label word). Prints one JSON line per (model, task) and a table.

The mixture is built here with T5's examples-proportional mixing with cap K (the rates of qkv_mix_rates,
include/qkv/mixture.h): STEPS * BATCH training examples drawn task by task at those rates. The engine does not yet
read a list of tasks from the run config, nor initialise a run from a pretrained one, so this compares multi-task
against single-task training from scratch (no span-corruption pretraining first).

    bench/quality/t5.py --qkv build/qkv [--steps 3000] [--batch 32] [--cap 20000] [--limit 300] [--train-limit 0]
"""
import argparse
import json
import os
import random
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "..", "..", "shared", "data")
LABELS = {"sentiment": {"0": "negative", "1": "positive"}, "paraphrase": {"0": "no", "1": "yes"}}


def rows(task, split, limit):
    out = []
    with open(os.path.join(DATA, task, split + ".tsv"), encoding="utf-8") as f:
        for line in f:
            p = line.rstrip("\n").split("\t")
            if task == "translation":
                out.append(("translate English to Spanish: " + p[0], p[1]))
            elif task == "summarization":
                out.append(("summarize: " + p[0], p[1]))
            elif task == "sentiment":
                out.append(("sentiment: " + p[1], LABELS[task][p[0]]))
            else:
                out.append(("paraphrase: sentence1: " + p[1] + " sentence2: " + p[2], LABELS[task][p[0]]))
            if limit and len(out) >= limit:
                break
    return out


def rates(sizes, cap):
    capped = [min(n, cap) if cap else n for n in sizes]
    return [c / sum(capped) for c in capped]


def write(path, pairs):
    with open(path, "w", encoding="utf-8") as f:
        for s, t in pairs:
            f.write(s + "\t" + t + "\n")


def train(qkv, d, name, train_file, dev_file, a):
    cfg = {"model": {"type": "t5", "d_model": 128, "n_heads": 4, "d_ff": 512, "dropout": 0.1},
           "data": {"train": train_file, "dev": dev_file, "shared_vocab": True, "max_len": 96, "max_vocab": 16000},
           "train": {"steps": a.steps, "batch_size": a.batch, "optimizer": {"lr": 0.001}, "log_every": 200},
           "eval": {"every": a.steps}, "seed": 1}
    path = os.path.join(d, name + ".json")
    with open(path, "w") as f:
        json.dump(cfg, f)
    run = os.path.join(d, name)
    subprocess.run([qkv, "train", "--config", path, "--run", run, "--quiet"], check=True)
    return run


def score(qkv, d, run, task, dev):
    src, ref, hyp = (os.path.join(d, run.split("/")[-1] + "." + task + x) for x in (".src", ".ref", ".hyp"))
    with open(src, "w", encoding="utf-8") as f:
        f.writelines(s + "\n" for s, _ in dev)
    with open(ref, "w", encoding="utf-8") as f:
        f.writelines(t + "\n" for _, t in dev)
    with open(src, encoding="utf-8") as fi, open(hyp, "w", encoding="utf-8") as fo:
        subprocess.run([qkv, "translate", "--run", run], stdin=fi, stdout=fo, check=True)
    if task == "translation":
        out = subprocess.run([qkv, "bleu", "-r", ref, "-i", hyp], capture_output=True, text=True, check=True).stdout
        return "bleu", float(out.split()[2])
    if task == "summarization":
        out = subprocess.run([qkv, "rouge", "-r", ref, "-i", hyp, "--json"], capture_output=True, text=True,
                             check=True).stdout
        return "rougeL", json.loads(out)["rougeL"]["f1"]
    with open(hyp, encoding="utf-8") as f:
        got = [line.strip() for line in f]
    return "accuracy", 100.0 * sum(g == t for g, (_, t) in zip(got, dev)) / len(dev)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--qkv", default=os.path.join(HERE, "..", "..", "build", "qkv"))
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--cap", type=int, default=20000)
    ap.add_argument("--limit", type=int, default=300, help="dev examples scored per task")
    ap.add_argument("--train-limit", type=int, default=0, help="training examples read per task (0: all)")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    tasks = ["translation", "summarization", "sentiment", "paraphrase"]
    d = a.out or tempfile.mkdtemp(prefix="t5q")
    os.makedirs(d, exist_ok=True)
    tr = {t: rows(t, "train", a.train_limit) for t in tasks}
    dev = {t: rows(t, "dev", a.limit) for t in tasks}
    r = rates([len(tr[t]) for t in tasks], a.cap)
    rng = random.Random(1)
    mix = []
    for _ in range(a.steps * a.batch):
        t = rng.choices(tasks, weights=r)[0]
        mix.append(rng.choice(tr[t]))
    write(os.path.join(d, "mix.tsv"), mix)
    write(os.path.join(d, "mix_dev.tsv"), [p for t in tasks for p in dev[t]])
    print(json.dumps({"mixing": "proportional", "cap": a.cap, "rates": dict(zip(tasks, [round(x, 4) for x in r])),
                      "train_examples": {t: len(tr[t]) for t in tasks}}), flush=True)
    runs = {"multi": train(a.qkv, d, "multi", os.path.join(d, "mix.tsv"), os.path.join(d, "mix_dev.tsv"), a)}
    for t in tasks:
        write(os.path.join(d, t + ".tsv"), tr[t])
        write(os.path.join(d, t + "_dev.tsv"), dev[t])
        runs[t] = train(a.qkv, d, "single_" + t, os.path.join(d, t + ".tsv"), os.path.join(d, t + "_dev.tsv"), a)
    table = {}
    for t in tasks:
        for kind in ("multi", "single"):
            metric, v = score(a.qkv, d, runs["multi" if kind == "multi" else t], t, dev[t])
            table[(t, kind)] = v
            print(json.dumps({"bench": "t5_quality", "task": t, "model": kind, "metric": metric, "value": round(v, 2),
                              "steps": a.steps, "batch": a.batch, "dev_examples": len(dev[t])}), flush=True)
    print("task            multi   single", file=sys.stderr)
    for t in tasks:
        print("%-14s %7.2f %8.2f" % (t, table[(t, "multi")], table[(t, "single")]), file=sys.stderr)


if __name__ == "__main__":
    main()
