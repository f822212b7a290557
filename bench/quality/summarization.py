#!/usr/bin/python3
"""Summarization quality: qkv vs. a PyTorch reference on Debian package descriptions -> synopses
(../shared/data/summarization), same decoder-only model, data, tokenizer, optimiser and steps (issue 24). Prints one
JSON line per side with the dev summary loss (nats per summary token) and greedy ROUGE-1/2/L F of test articles, then
a comparison line.

  /usr/bin/python3 bench/quality/summarization.py [--qkv build/qkv] [--steps N | --seconds S] [--threads 2]
                                                  [--limit N] [--only qkv|torch] [--out DIR] [--cpu N]
                                                  [--eval-minutes M] [--tokenizer RUN]
  /usr/bin/python3 bench/quality/summarization.py --plot QKV.jsonl TORCH.jsonl -o curve.svg [--limit N]

--cpu N pins this process and its children to core N (os.sched_setaffinity; threads default to 1). --eval-minutes M:
dev evals (loss, greedy ROUGE-L of the first 200 dev articles) every M minutes of training on both sides (qkv's
eval.every_seconds), evaluation time excluded from both clocks; --out DIR then holds one JSONL curve per engine
(summ_TAG_qkv.jsonl, summ_TAG_torch.jsonl: the eval records, then a "test" record with the final scores). --plot
is the merge step: both curves in one SVG, and JSON lines with each side's 15- and 60-minute points, final test
ROUGE and the lead baseline. --tokenizer RUN: both sides use that run's BPE. bench/quality/summarization_pair.sh
runs the two sides at once, each on its own core, then merges.

--steps: same steps; the comparison checks qkv's dev loss <= torch's + 1%. --seconds: equal wall-clock (training
proper on each side, evaluations not counted); the comparison checks qkv's test ROUGE-L > torch's. Needs a quiet
machine. --limit N: test articles decoded for ROUGE (default 500; 0 = all). --out DIR keeps qkv's run, torch's dev
curve (qkv's log format: loss and greedy ROUGE-L of 200 dev articles at every evaluation) and the SVG of both.

The qkv side is `qkv train` (bench/quality/summarization.json), `qkv eval --split dev`, `qkv summarize` on the
test articles and `qkv rouge` against their summaries. The torch side uses qkv's run for its tokenizer (the BPE
qkv trained on the training split: `qkv tokenize encode --bpe RUN`, <pad> </s> <sep> the three ids after it) and
rebuilds qkv's sequences: article ids cut to max_len - summary_max_len - 3, </s> <sep>, summary ids cut to
summary_max_len, </s>; loss weights data.article_weight on predictions of the prompt's tokens and 1 on the
summary's, the weighted mean as qkv_cross_entropy's token_weight. The model is tests/ref/lm_model.py's GPT at the
config's sizes (qkv's `gpt`); batches are uniform random draws of whole examples (qkv's run then turns length
bucketing off), AdamW without decay on 1-D parameters. Greedy decoding stops at </s>, and both sides are scored by
`qkv rouge` (rouge-score's tokenizer), so the scorer is the same."""
import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))


def read_tsv(path, limit=0):
    rows = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            a, s = line.rstrip("\n").split("\t", 1)
            rows.append((a, s))
            if limit and len(rows) == limit:
                break
    return rows


class Bpe:
    def __init__(self, qkv, run):
        self.qkv, self.run = qkv, run
        vocab = json.load(open(os.path.join(run, "vocab.json"), encoding="utf-8"))
        self.pad, self.eos, self.sep = vocab["<pad>"], vocab["</s>"], vocab["<sep>"]
        self.size = max(vocab.values()) + 1
        keep = list(range(0x21, 0x7F)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
        b2u, extra = {}, 0
        for b in range(256):
            if b in keep:
                b2u[b] = chr(b)
            else:
                b2u[b] = chr(256 + extra)
                extra += 1
        back = {u: b for b, u in b2u.items()}
        self.bytes = {i: bytes(back[c] for c in t) for t, i in vocab.items()
                      if i not in (self.pad, self.eos, self.sep) and all(c in back for c in t)}

    def encode(self, lines):
        out = subprocess.run([self.qkv, "tokenize", "encode", "--bpe", self.run], input="\n".join(lines) + "\n",
                             capture_output=True, text=True, check=True).stdout.split("\n")
        return [[int(x) for x in out[i].split()] for i in range(len(lines))]

    def decode(self, ids):
        return b"".join(self.bytes.get(i, b"") for i in ids).decode("utf-8", errors="replace").replace("\n", " ")


def examples(rows, bpe, d):
    room, S = d["max_len"] - d["summary_max_len"] - 3, d["summary_max_len"]
    arts = bpe.encode([a for a, _ in rows])
    sums = bpe.encode([s for _, s in rows])
    out = []
    for a, s in zip(arts, sums):
        prompt = a[:room] + [bpe.eos, bpe.sep]
        out.append((prompt, prompt + s[:S] + [bpe.eos]))
    return out


def rouge(qkv, hyps, refs, tmp):
    h, r = os.path.join(tmp, "hyp.txt"), os.path.join(tmp, "ref.txt")
    open(h, "w", encoding="utf-8").write("\n".join(hyps) + "\n")
    open(r, "w", encoding="utf-8").write("\n".join(refs) + "\n")
    res = {}
    for stem in (False, True):
        out = subprocess.run([qkv, "rouge", "-r", r, "-i", h, "--json"] + (["--stem"] if stem else []),
                             capture_output=True, text=True, check=True).stdout
        j = json.loads(out)
        for k in ("rouge1", "rouge2", "rougeL"):
            res[k + ("_stem" if stem else "")] = round(j[k]["f1"], 2)
    return res


def greedy_batch(model, bpe, prompts, max_new, n_ctx, rows=32):
    """Greedy summaries of many prompts, `rows` at a time (prompts of similar length together). No KV cache: each
    step runs the rows' whole sequences, right-padded, and projects only each row's last position (causal
    attention: the padding after it changes nothing)."""
    import torch

    tr = model.transformer
    order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]))
    outs = [None] * len(prompts)
    with torch.no_grad():
        for s in range(0, len(order), rows):
            idx = order[s:s + rows]
            seqs = [list(prompts[i]) for i in idx]
            gen = [[] for _ in idx]
            live = list(range(len(idx)))
            for _ in range(max_new):
                if not live:
                    break
                T = max(len(seqs[r]) for r in live)
                x = torch.full((len(live), T), bpe.pad, dtype=torch.long)
                for k, r in enumerate(live):
                    x[k, :len(seqs[r])] = torch.tensor(seqs[r])
                h = tr.wte(x) + tr.wpe.weight[:T]
                for blk in tr.h:
                    h = blk(h)
                last = torch.tensor([len(seqs[r]) - 1 for r in live])
                h = tr.ln_f(h[torch.arange(len(live)), last])
                nxt = model.lm_head(h).argmax(-1).tolist()
                still = []
                for k, r in enumerate(live):
                    if nxt[k] == bpe.eos:
                        continue
                    gen[r].append(nxt[k])
                    seqs[r].append(nxt[k])
                    if len(gen[r]) < max_new and len(seqs[r]) < n_ctx:
                        still.append(r)
                live = still
            for k, i in enumerate(idx):
                outs[i] = bpe.decode(gen[k])
    return outs


def torch_side(cfg, qkv, run, steps, threads, seconds, limit, curve, tmp, eval_seconds=0.0):
    import torch
    import torch.nn.functional as F

    sys.path.insert(0, os.path.join(ROOT, "tests", "ref"))
    import lm_model

    torch.set_num_threads(threads)
    seed = cfg.get("seed", 1)
    torch.manual_seed(seed)
    random.seed(seed)
    d, m, t = cfg["data"], cfg["model"], cfg["train"]
    bpe = Bpe(qkv, run)
    train = examples(read_tsv(os.path.join(ROOT, d["train"])), bpe, d)
    dev_rows = read_tsv(os.path.join(ROOT, d["dev"]))
    dev = examples(dev_rows, bpe, d)
    test_rows = read_tsv(os.path.join(ROOT, d["test"]), limit)
    V, B, aw = bpe.size, t["batch_size"], d.get("article_weight", 0.0)
    model = lm_model.GPT(V, m["n_ctx"], m["d_model"], m["n_heads"], m["d_ff"], m["n_layers"], m.get("tied", True))
    o = t["optimizer"]
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": o.get("weight_decay", 0.01)},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=o["lr"], betas=(o.get("beta1", 0.9), o.get("beta2", 0.999)),
                            eps=o.get("eps", 1e-8))

    def batch(items, weight):
        T = max(len(seq) for _, seq in items) - 1
        x = torch.full((len(items), T), bpe.pad, dtype=torch.long)
        y = torch.full((len(items), T), -100, dtype=torch.long)
        w = torch.zeros(len(items), T)
        for r, (prompt, seq) in enumerate(items):
            n = len(seq) - 1
            x[r, :n], y[r, :n] = torch.tensor(seq[:-1]), torch.tensor(seq[1:])
            w[r, :n] = torch.tensor([1.0 if j + 1 >= len(prompt) else weight for j in range(n)])
        return x, y, w

    def weighted_loss(x, y, w):
        ce = F.cross_entropy(model(x).reshape(-1, V), y.reshape(-1), reduction="none", ignore_index=-100)
        w = w.reshape(-1)
        return (ce * w).sum(), w.sum()

    def dev_loss():
        model.eval()
        tot, cnt = 0.0, 0.0
        with torch.no_grad():
            for s in range(0, len(dev), 64):
                a, b = weighted_loss(*batch(dev[s:s + 64], 0.0))
                tot, cnt = tot + a.item(), cnt + b.item()
        model.train()
        return tot / cnt

    def rouge_of(rows, exs):
        model.eval()
        hyps = greedy_batch(model, bpe, [p for p, _ in exs], d["summary_max_len"] + 1, m["n_ctx"])
        model.train()
        return rouge(qkv, hyps, [s for _, s in rows], tmp)

    every = cfg["eval"]["every"]
    trained, t_mark, done, best, best_state = 0.0, time.time(), 0, None, None
    next_eval, last = eval_seconds, [-1]

    def evaluate(step):
        nonlocal best, best_state
        last[0] = step
        dl = dev_loss()
        if best is None or dl < best:
            best, best_state = dl, {k: v.clone() for k, v in model.state_dict().items()}
        if curve:
            rec = {"kind": "eval", "engine": "torch", "split": "dev", "step": step, "loss": dl,
                   "train_seconds": trained}
            c0 = time.process_time()
            rec.update(rouge_of(dev_rows[:200], dev[:200]))
            rec["decode_cpu_seconds"] = round(time.process_time() - c0, 1)
            curve.write(json.dumps(rec) + "\n")
            curve.flush()

    for step in range(1, steps + 1):
        if seconds and trained + time.time() - t_mark >= seconds:
            break
        x, y, w = batch(random.sample(train, B), aw)
        a, b = weighted_loss(x, y, w)
        loss = a / b
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        done = step
        if step % 100 == 0:
            print(f"# torch step {step} loss {loss.item():.4f}", file=sys.stderr, flush=True)
        timed = eval_seconds and trained + time.time() - t_mark >= next_eval
        if timed or (not eval_seconds and (step % every == 0 or step == steps)):
            trained += time.time() - t_mark
            while eval_seconds and trained >= next_eval:
                next_eval += eval_seconds
            evaluate(step)
            t_mark = time.time()
    trained += time.time() - t_mark
    if (seconds or eval_seconds) and last[0] != done:  # the last steps count too (as qkv's time-limited runs)
        evaluate(done)
    if best_state:
        model.load_state_dict(best_state)
    res = {"side": "torch", "dev_loss": round(best if best is not None else dev_loss(), 4), "steps": done,
           "train_seconds": round(trained, 1), "test_articles": len(test_rows)}
    c0 = time.process_time()
    res.update(rouge_of(test_rows, examples(test_rows, bpe, d)))
    res["test_decode_cpu_seconds"] = round(time.process_time() - c0, 1)
    return res


def qkv_side(qkv, cfg_path, steps, threads, seconds, limit, run, tmp, eval_seconds=0.0, tokenizer=None):
    env = dict(os.environ, QKV_THREADS=str(threads))
    cmd = [qkv, "train", "--config", cfg_path, "--run", run, "--quiet", "--set", f"train.steps={steps}"]
    every = json.load(open(cfg_path))["eval"]["every"]
    if eval_seconds:  # dev evals at fixed amounts of training time, as the torch side
        cmd += ["--set", "eval.every=0", "--set", f"eval.every_seconds={eval_seconds}"]
    elif not seconds and steps < every:  # at least the last step's eval, for the curve
        cmd += ["--set", f"eval.every={steps}"]
    if tokenizer:
        cmd += ["--set", f"data.vocab_file={os.path.join(tokenizer, 'vocab.json')}",
                "--set", f"data.merges_file={os.path.join(tokenizer, 'merges.txt')}"]
    if not seconds:
        cmd += ["--set", "data.bucket=false"]  # the reference draws uniform random batches
    else:
        cmd += ["--set", f"train.max_seconds={seconds}"]
    if subprocess.run(cmd, cwd=ROOT, env=env).returncode != 0:
        return {"side": "qkv", "status": "train failed", "run": run}
    end = [json.loads(l) for l in open(os.path.join(run, "log.jsonl")) if '"kind":"end"' in l][-1]
    res = {"side": "qkv", "steps": end["step"], "train_seconds": round(end.get("train_seconds", 0), 1), "run": run}
    out = subprocess.run([qkv, "eval", "--run", run, "--split", "dev", "--json"], cwd=ROOT, env=env,
                         stdout=subprocess.PIPE, text=True)
    try:
        ev = json.loads(out.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return dict(res, status="eval failed", returncode=out.returncode)
    res["dev_loss"] = round(ev["loss"], 4)
    res["dev_rougeL_200"] = round(ev.get("rougeL", float("nan")), 2)
    cfg = json.load(open(cfg_path))
    rows = read_tsv(os.path.join(ROOT, cfg["data"]["test"]), limit)
    arts = os.path.join(tmp, "articles.txt")
    open(arts, "w", encoding="utf-8").write("\n".join(a for a, _ in rows) + "\n")
    c0 = os.times().children_user
    hyps = subprocess.run([qkv, "summarize", "--run", run, "--input", arts], cwd=ROOT, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, check=True).stdout
    res["test_articles"] = len(rows)
    res["test_decode_cpu_seconds"] = round(os.times().children_user - c0, 1)
    res.update(rouge(qkv, hyps.split("\n")[:len(rows)], [s for _, s in rows], tmp))  # summaries may be empty
    return res


def qkv_curve(run, path, test):
    """qkv's learning curve in the torch side's format: the run's dev evals, then the final test scores."""
    with open(path, "w") as out:
        for line in open(os.path.join(run, "log.jsonl")):
            rec = json.loads(line)
            if rec.get("kind") == "eval":
                rec["engine"] = "qkv"
                out.write(json.dumps(rec) + "\n")
        out.write(json.dumps(dict(test, kind="test", engine="qkv")) + "\n")


def point(recs, minutes):
    """The dev eval at `minutes` of training: the first at or after it (timed evals come right after the mark);
    None when the run is shorter (a 15-minute run has no 60-minute point)."""
    evals = [r for r in recs if r.get("kind") == "eval" and "rougeL" in r]
    for r in evals:
        if r["train_seconds"] >= minutes * 60 * 0.99:
            return r
    return None


def plot(qkv, sources, out, limit):
    """Merge step: both curves in one SVG (`qkv plot`), then JSON lines: each side's dev ROUGE-L at 15 and 60
    minutes and its final test ROUGE, and the lead baseline of the same test articles."""
    cfg = json.load(open(os.path.join(HERE, "summarization.json")))
    labels = []
    for src in sources:
        recs = [json.loads(l) for l in open(src) if l.strip()]
        engine = next((r.get("engine") for r in recs if r.get("engine")), os.path.basename(src))
        labels.append(f"{engine}={src}")
        for minutes in (15, 60):
            p = point(recs, minutes)
            if p:
                print(json.dumps({"engine": engine, "at_minutes": minutes, "minutes": round(p["train_seconds"] / 60, 2),
                                  "step": p["step"], "dev_rougeL_200": round(p["rougeL"], 2),
                                  "dev_loss": round(p["loss"], 4)}), flush=True)
        test = [r for r in recs if r.get("kind") == "test"]
        if test:
            t = test[-1]
            limit = t.get("test_articles", limit)
            print(json.dumps({"engine": engine, "final": "test", **{k: t[k] for k in t if k.startswith("rouge") or k in (
                "test_articles", "steps", "train_seconds", "dev_loss", "test_decode_cpu_seconds")}}), flush=True)
    rows = read_tsv(os.path.join(ROOT, cfg["data"]["test"]), limit)
    with tempfile.TemporaryDirectory(prefix="qkv-summ-") as tmp:
        lead = os.path.join(tmp, "lead.tsv")
        open(lead, "w", encoding="utf-8").write("".join(f"{a}\t{b}\n" for a, b in rows))
        res = {}
        for stem in (False, True):
            j = json.loads(subprocess.run([qkv, "rouge", "--lead", lead, "--json"] + (["--stem"] if stem else []),
                                          capture_output=True, text=True, check=True).stdout)
            for k in ("rouge1", "rouge2", "rougeL"):
                res[k + ("_stem" if stem else "")] = round(j[k]["f1"], 2)
    print(json.dumps({"engine": "lead", "final": "test", "test_articles": len(rows), **res}), flush=True)
    return subprocess.run([qkv, "plot", "-o", out, "--x", "minutes", "--y", "rougeL", "--title",
                           "summarization, dev ROUGE-L of 200 articles against minutes of training (1 core each)"]
                          + labels).returncode


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--qkv", default=os.path.join(ROOT, "build", "qkv"))
    ap.add_argument("--steps", type=int)
    ap.add_argument("--seconds", type=float, default=0)
    ap.add_argument("--threads", type=int, help="default 2, or 1 with --cpu")
    ap.add_argument("--cpu", type=int, help="pin this process and its children (qkv) to this core")
    ap.add_argument("--eval-minutes", type=float, default=0,
                    help="dev evals (loss, greedy ROUGE-L of the first 200 dev articles) every M minutes of training")
    ap.add_argument("--tokenizer", help="a qkv run whose BPE (vocab.json, merges.txt) both sides use")
    ap.add_argument("--limit", type=int, default=500)
    ap.add_argument("--only", choices=["torch", "qkv"])
    ap.add_argument("--out")
    ap.add_argument("--plot", nargs="+", metavar="CURVE.jsonl", help="merge step: curves of both sides into -o SVG")
    ap.add_argument("-o", dest="svg", default="curve.svg")
    a = ap.parse_args()
    if a.plot:
        sys.exit(plot(a.qkv, a.plot, a.svg, a.limit))
    if a.cpu is not None:
        os.sched_setaffinity(0, {a.cpu})  # inherited by the qkv children
    threads = a.threads or (1 if a.cpu is not None else 2)
    cfg_path = os.path.join(HERE, "summarization.json")
    cfg = json.load(open(cfg_path))
    steps = a.steps or (10 ** 7 if a.seconds else cfg["train"]["steps"])
    tag = f"{a.seconds / 60:g}min" if a.seconds else f"{steps}steps"
    tmp = tempfile.mkdtemp(prefix="qkv-summ-")
    if a.out:
        a.out = os.path.abspath(a.out)  # the qkv children run in the repository
        os.makedirs(a.out, exist_ok=True)
    if a.tokenizer:
        a.tokenizer = os.path.abspath(a.tokenizer)
    run = os.path.join(a.out, f"summ_{tag}_qkv") if a.out else os.path.join(tmp, "run")
    # Only the side that writes the qkv run clears it: `--only torch --tokenizer T` beside `--only qkv` in the same
    # --out must not delete the other process's run.
    if os.path.exists(run) and (a.only != "torch" or not a.tokenizer):
        subprocess.run(["rm", "-rf", run])
    eval_s = a.eval_minutes * 60
    res = {}
    # qkv's run's BPE is the tokenizer of both sides (or --tokenizer's). --only torch without --tokenizer still
    # trains qkv's tokenizer (1 step).
    tok = a.tokenizer
    if a.only != "torch":
        res["qkv"] = qkv_side(a.qkv, cfg_path, steps, threads, a.seconds, a.limit, run, tmp, eval_s, tok)
        print(json.dumps(res["qkv"]), flush=True)
        if a.out and "rougeL" in res["qkv"]:
            qkv_curve(run, os.path.join(a.out, f"summ_{tag}_qkv.jsonl"), res["qkv"])
        tok = tok or run
    elif not tok:
        subprocess.run([a.qkv, "train", "--config", cfg_path, "--run", run, "--quiet", "--set", "train.steps=1"],
                       cwd=ROOT, check=True)
        tok = run
    if a.only != "qkv":
        curve_path = os.path.join(a.out, f"summ_{tag}_torch.jsonl") if a.out else None
        curve = open(curve_path, "w") if curve_path else None
        res["torch"] = torch_side(cfg, a.qkv, tok, steps, threads, a.seconds, a.limit, curve, tmp, eval_s)
        print(json.dumps(res["torch"]), flush=True)
        if curve:
            curve.write(json.dumps(dict(res["torch"], kind="test", engine="torch")) + "\n")
            curve.close()
    if len(res) == 2 and "dev_loss" in res["qkv"]:
        q, t = res["qkv"], res["torch"]
        line = {"comparison": "summarization", "mode": tag, "qkv_dev_loss": q["dev_loss"],
                "torch_dev_loss": t["dev_loss"], "qkv_rougeL": q["rougeL"], "torch_rougeL": t["rougeL"]}
        if a.seconds:
            line["qkv_better"] = q["rougeL"] > t["rougeL"]
        else:
            line["qkv_within_1pct"] = q["dev_loss"] <= t["dev_loss"] * 1.01
        print(json.dumps(line), flush=True)
        if a.out:
            subprocess.run([a.qkv, "plot", "-o", os.path.join(a.out, f"summ_{tag}_curve.svg"), "--x",
                            "minutes" if a.seconds else "step", "--y", "rougeL",
                            "--title", f"summarization, dev ROUGE-L of 200 articles ({tag}, {threads} threads)",
                            f"qkv={run}", f"pytorch={os.path.join(a.out, f'summ_{tag}_torch.jsonl')}"], cwd=ROOT)


if __name__ == "__main__":
    main()
