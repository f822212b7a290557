#!/usr/bin/python3
"""Reformer LM quality, memory and chat (issue 27), all through the qkv CLI. One JSON line per measurement.

  /usr/bin/python3 bench/quality/reformer.py quality --seconds S [--toy] [--threads 2]
  /usr/bin/python3 bench/quality/reformer.py memory [--lengths 1024,2048,4096] [--toy] [--budget-gib 24]
  /usr/bin/python3 bench/quality/reformer.py chat --seconds S [--toy] [--script FILE]

quality: reformer_lm (bench/quality/lm_reformer_16k.json) and gpt (bench/quality/lm_gpt.json) each train S seconds
of training proper (train.max_seconds; evaluations not counted) on ../shared/data/lm, then `qkv eval` scores the
best dev checkpoint on dev and test: bits per character (char tokenizer, one <nl> token a line end). Equal
wall-clock, not equal steps: the models do different work per step.

memory: for each model and each context length T, two training steps at batch 1 with seq_len = n_ctx = T (the
reformer with axial positions split as squarely as T allows); the peak resident set of the `qkv train` process
(wait4's ru_maxrss). The longest context that fits in --budget-gib is then EXTRAPOLATED from a least-squares fit,
RSS = a + b T for reformer_lm (memory O(T chunk_len)) and a + b T + c T^2 for gpt (its attention keeps a [T, T]
score matrix per head and layer for the backward), and printed as such: only the measured points are measurements.

chat: `qkv data dialogue` over the training and dev novels, a reformer_lm trained S seconds on the conversations
(bench/quality/lm_reformer_16k.json at the conversations' lengths), then `qkv chat --script` on a short session
(or --script FILE); prints the transcript and the run's dev bits per character.

--toy shrinks every model (d 32, 2 layers, contexts of 256) so the whole script checks itself in a minute; its
numbers mean nothing. Run from the repository root; --qkv picks the binary (default build/qkv)."""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
LN2 = math.log(2.0)
CONFIGS = {"reformer_lm": os.path.join(HERE, "lm_reformer_16k.json"), "gpt": os.path.join(HERE, "lm_gpt.json")}
# --toy: small enough for a smoke run; the same keys the full configs set.
TOY = {
    "reformer_lm": ["model.d_model=32", "model.n_layers=2", "model.n_heads=2", "model.d_head=16", "model.d_ff=64",
                    "model.n_ctx=256", "model.chunk_len=32", "model.axial_shape=\"16,16\"", "model.ff_chunk=0",
                    "data.seq_len=256", "train.batch_size=4", "eval.every=20", "eval.max_batches=2"],
    "gpt": ["model.d_model=32", "model.n_layers=2", "model.n_heads=2", "model.d_ff=64", "model.n_ctx=256",
            "data.seq_len=256", "train.batch_size=4", "eval.every=20", "eval.max_batches=2"],
}


def emit(obj):
    print(json.dumps(obj), flush=True)


def run_child(cmd, env=None):
    """Runs cmd; returns (exit code, peak RSS in MiB of that process), via wait4."""
    p = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    err = p.stderr.read().decode(errors="replace") if p.stderr else ""
    if p.returncode != 0:
        sys.stderr.write(err[-2000:])
    return p.returncode, usage.ru_maxrss / 1024.0


def sets(pairs):
    out = []
    for kv in pairs:
        out += ["--set", kv]
    return out


def train(qkv, model, run, extra, threads):
    env = dict(os.environ, QKV_THREADS=str(threads))
    cmd = [qkv, "train", "--config", CONFIGS[model], "--run", run, "--quiet"] + sets(extra)
    return run_child(cmd, env)


def bits(qkv, run, split, threads):
    out = subprocess.run([qkv, "eval", "--run", run, "--split", split, "--json"], cwd=ROOT,
                         env=dict(os.environ, QKV_THREADS=str(threads)), stdout=subprocess.PIPE, text=True)
    try:
        return round(json.loads(out.stdout.strip().splitlines()[-1])["loss"] / LN2, 4)
    except (ValueError, IndexError, KeyError):
        return None


def end_record(run):
    ends = [json.loads(l) for l in open(os.path.join(run, "log.jsonl")) if '"kind":"end"' in l]
    return ends[-1] if ends else {}


def quality(a):
    for model in ("reformer_lm", "gpt"):
        run = tempfile.mkdtemp(prefix=f"qkv-{model}-")
        extra = (TOY[model] if a.toy else []) + ["train.steps=1000000", f"train.max_seconds={a.seconds}"]
        rc, rss = train(a.qkv, model, run, extra, a.threads)
        if rc != 0:
            emit({"part": "quality", "model": model, "status": "train failed", "returncode": rc})
            continue
        end = end_record(run)
        emit({"part": "quality", "model": model, "toy": a.toy, "train_seconds": round(end.get("train_seconds", 0), 1),
              "steps": end.get("step"), "dev_bits_per_char": bits(a.qkv, run, "dev", a.threads),
              "test_bits_per_char": bits(a.qkv, run, "test", a.threads), "peak_rss_mib": round(rss, 1),
              "run": run, "status": "ok"})


def fit(ts, ys, degree):
    """Least squares y = sum_k c_k T^k, k = 0..degree (normal equations; a handful of points)."""
    n = degree + 1
    A = [[sum(t ** (i + j) for t in ts) for j in range(n)] for i in range(n)]
    b = [sum(y * t ** i for t, y in zip(ts, ys)) for i in range(n)]
    for i in range(n):  # Gauss-Jordan
        p = max(range(i, n), key=lambda r: abs(A[r][i]))
        A[i], A[p], b[i], b[p] = A[p], A[i], b[p], b[i]
        for r in range(n):
            if r != i and A[i][i]:
                f = A[r][i] / A[i][i]
                A[r] = [x - f * y for x, y in zip(A[r], A[i])]
                b[r] -= f * b[i]
    return [b[i] / A[i][i] if A[i][i] else 0.0 for i in range(n)]


def longest(coef, budget_mib):
    """The largest T with sum_k c_k T^k <= budget (bisection over a growing range), or None."""
    f = lambda t: sum(c * t ** k for k, c in enumerate(coef))
    if f(1) > budget_mib:
        return None
    lo, hi = 1, 2
    while f(hi) <= budget_mib and hi < 1 << 40:
        lo, hi = hi, hi * 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if f(mid) <= budget_mib else (lo, mid)
    return lo


def memory(a):
    lengths = [int(x) for x in a.lengths.split(",")]
    for model in ("reformer_lm", "gpt"):
        ts, ys = [], []
        for T in lengths:
            run = tempfile.mkdtemp(prefix=f"qkv-mem-{model}-")
            extra = (TOY[model] if a.toy else []) + [
                f"model.n_ctx={T}", f"data.seq_len={T}", "train.batch_size=1", "train.steps=2", "eval.every=1000000"]
            if model == "reformer_lm":
                extra.append("model.axial_shape=\"\"")
            rc, rss = train(a.qkv, model, run, extra, a.threads)
            emit({"part": "memory", "model": model, "toy": a.toy, "seq_len": T, "measured": True,
                  "peak_rss_mib": round(rss, 1), "status": "ok" if rc == 0 else f"train failed ({rc})"})
            if rc == 0:
                ts.append(T)
                ys.append(rss)
        degree = 1 if model == "reformer_lm" else 2
        if len(ts) > degree:
            coef = fit(ts, ys, degree)
            emit({"part": "memory", "model": model, "toy": a.toy, "measured": False,
                  "extrapolated_from": ts, "fit": "a + b T" if degree == 1 else "a + b T + c T^2",
                  "coefficients_mib": [round(c, 9) for c in coef], "budget_gib": a.budget_gib,
                  "longest_context_extrapolated": longest(coef, a.budget_gib * 1024.0)})


SESSION = ["Good morning! How do you do?", "Shall we walk to Meryton today?", "/reset",
           "I have heard that he is a very agreeable man."]


def chat(a):
    work = tempfile.mkdtemp(prefix="qkv-chat-")
    data = os.path.join(ROOT, "..", "shared", "data", "lm")
    train_txt, dev_txt = os.path.join(work, "dialogue.txt"), os.path.join(work, "dialogue_dev.txt")
    for src, dst in ((os.path.join(data, "train.txt"), train_txt), (os.path.join(data, "dev.txt"), dev_txt)):
        r = subprocess.run([a.qkv, "data", "dialogue", "-o", dst, src], cwd=ROOT, stderr=subprocess.PIPE, text=True)
        if r.returncode != 0:
            emit({"part": "chat", "status": "data dialogue failed", "stderr": r.stderr.strip()})
            return
        emit({"part": "chat", "step": "data dialogue", "file": dst, "summary": r.stderr.strip()})
    longest_line = max(len(l) for l in open(train_txt, encoding="utf-8"))
    run = os.path.join(work, "run")
    extra = (TOY["reformer_lm"] if a.toy else []) + [
        f"data.train=\"{train_txt}\"", f"data.dev=\"{dev_txt}\"", "train.steps=1000000",
        f"train.max_seconds={a.seconds}"]
    if not a.toy:  # the conversations' lengths, not 16k: a conversation is one line
        T = min(16384, 1 << max(10, math.ceil(math.log2(longest_line + 2))))
        extra += [f"model.n_ctx={T}", f"data.seq_len={T}", "model.axial_shape=\"\"", "train.batch_size=4"]
    rc, _ = train(a.qkv, "reformer_lm", run, extra, a.threads)
    if rc != 0:
        emit({"part": "chat", "status": "train failed", "returncode": rc})
        return
    end = end_record(run)
    script = a.script
    if not script:
        script = os.path.join(work, "script.txt")
        with open(script, "w", encoding="utf-8") as f:
            f.write("\n".join(SESSION) + "\n")
    r = subprocess.run([a.qkv, "chat", "--run", run, "--script", script, "--max-tokens", str(a.max_tokens)],
                       cwd=ROOT, env=dict(os.environ, QKV_THREADS=str(a.threads)), stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True)
    emit({"part": "chat", "toy": a.toy, "train_seconds": round(end.get("train_seconds", 0), 1),
          "steps": end.get("step"), "dev_bits_per_char": bits(a.qkv, run, "dev", a.threads), "run": run,
          "status": "ok" if r.returncode == 0 else f"chat failed ({r.returncode})"})
    sys.stdout.write(r.stdout)
    if r.returncode != 0:
        sys.stderr.write(r.stderr[-2000:])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("part", choices=["quality", "memory", "chat"])
    ap.add_argument("--qkv", default=os.path.join(ROOT, "build", "qkv"))
    ap.add_argument("--seconds", type=float, default=600, help="training budget per model (quality, chat)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--toy", action="store_true", help="tiny models: checks the script, measures nothing")
    ap.add_argument("--lengths", default="1024,2048,4096", help="memory: context lengths measured")
    ap.add_argument("--budget-gib", type=float, default=24.0, help="memory: the budget extrapolated to")
    ap.add_argument("--script", help="chat: a session file (default: a short built-in one)")
    ap.add_argument("--max-tokens", type=int, default=200, help="chat: longest reply")
    a = ap.parse_args()
    a.qkv = os.path.abspath(a.qkv)
    {"quality": quality, "memory": memory, "chat": chat}[a.part](a)


if __name__ == "__main__":
    main()
