#!/usr/bin/python3
"""Reformer LM quality, memory and chat (issue 27), all through the qkv CLI. One JSON line per measurement.

  /usr/bin/python3 bench/quality/reformer.py quality --seconds S [--concurrent] [--toy] [--threads N] [--out DIR]
  /usr/bin/python3 bench/quality/reformer.py memory [--lengths 1024,2048,4096] [--toy] [--budget-gib 24]
  /usr/bin/python3 bench/quality/reformer.py chat --seconds S [--toy] [--script FILE] [--out DIR]
  /usr/bin/python3 bench/quality/reformer.py throughput [--lengths 1024,4096,16384] [--steps 5] [--threads N]

quality: reformer_lm (bench/quality/lm_reformer_16k.json) and gpt (bench/quality/lm_gpt.json) each train S seconds
of training proper (train.max_seconds; evaluations not counted) on ../shared/data/lm, then `qkv eval` scores the
best dev checkpoint on dev and test: bits per character (char tokenizer, one <nl> token a line end). Equal
wall-clock, not equal steps: the models do different work per step. By default the two train one after the other
(--threads 2); --concurrent trains both at the same time, one thread each (--threads defaults to 1 there), so on a
shared machine both see the same load for the same seconds. Each training record has the process's wall seconds,
user and system CPU seconds and peak RSS (wait4), beside the run's own step count and seconds of training proper;
"load" records sample the load average every minute while training runs.

memory: for each model and each context length T, two training steps at batch 1 with seq_len = n_ctx = T (the
reformer with axial positions split as squarely as T allows); the peak resident set of the `qkv train` process
(wait4's ru_maxrss). The longest context that fits in --budget-gib is then EXTRAPOLATED from a least-squares fit,
RSS = a + b T for reformer_lm (memory O(T chunk_len)) and a + b T + c T^2 for gpt, and printed as such: only the
measured points are measurements.

chat: `qkv data dialogue` over the training and dev novels, a reformer_lm (the architecture of
bench/quality/lm_reformer_16k.json) trained S seconds on the conversations with --chat-seq-len windows of the
conversation stream (the windows are cut from one stream, so they need not hold a whole conversation; the model's
positions bound the chat's context), evaluated on the dev conversations --evals times so that best.safetensors is
the checkpoint of lowest dev loss, then `qkv chat --script` on a session made of real lines: the first user turns
(Person 1) of the first dev conversations whose opening is short, /save after the first conversation and /reset
between them (or --script FILE). Prints the transcript and the run's dev bits per character.

throughput: training speed of the two models at equal width and depth (reformer_lm set to the GPT's d and
n_layers), batch 1, one window of T tokens a step, for each T: the median of `qkv train`'s logged tok_per_s over the
steps after the first, and the process's peak RSS and CPU seconds.

--toy shrinks every model (d 32, 2 layers, contexts of 256) so the whole script checks itself in a minute; its
numbers mean nothing. Run from the repository root; --qkv picks the binary (default build/qkv); --out keeps the
runs under DIR (default: fresh temporary directories)."""
import argparse
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
LN2 = math.log(2.0)
MODELS = ("reformer_lm", "gpt")
CONFIGS = {"reformer_lm": os.path.join(HERE, "lm_reformer_16k.json"), "gpt": os.path.join(HERE, "lm_gpt.json")}
# --toy: small enough for a smoke run; the same keys the full configs set.
TOY = {
    "reformer_lm": ["model.d_model=32", "model.n_layers=2", "model.n_heads=2", "model.d_head=16", "model.d_ff=64",
                    "model.n_ctx=256", "model.chunk_len=32", "model.axial_shape=\"16,16\"", "model.ff_chunk=0",
                    "data.seq_len=256", "train.batch_size=4", "eval.every=20", "eval.max_batches=2"],
    "gpt": ["model.d_model=32", "model.n_layers=2", "model.n_heads=2", "model.d_ff=64", "model.n_ctx=256",
            "data.seq_len=256", "train.batch_size=4", "eval.every=20", "eval.max_batches=2"],
}
LOAD_EVERY = 60.0  # seconds between load-average samples while children train


def emit(obj):
    print(json.dumps(obj), flush=True)


class Child:
    """A child process whose wall time, CPU time and peak RSS are taken from wait4 when it ends. Its stderr goes to
    a file (a pipe could fill while the parent waits on another child)."""

    def __init__(self, name, cmd, env, err_path):
        self.name, self.err_path = name, err_path
        self.err = open(err_path, "wb")
        self.t0 = time.monotonic()
        self.p = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=self.err)
        self.done = False

    def poll(self, block):
        pid, status, usage = os.wait4(self.p.pid, 0 if block else os.WNOHANG)
        if pid == 0:
            return False
        self.wall = time.monotonic() - self.t0
        self.p.returncode = self.rc = os.waitstatus_to_exitcode(status)
        self.user, self.sys, self.rss_mib = usage.ru_utime, usage.ru_stime, usage.ru_maxrss / 1024.0
        self.err.close()
        self.done = True
        if self.rc != 0:
            with open(self.err_path, "rb") as f:
                sys.stderr.write(f.read()[-2000:].decode(errors="replace"))
        return True

    def usage(self):
        return {"returncode": self.rc, "wall_s": round(self.wall, 1), "cpu_user_s": round(self.user, 1),
                "cpu_sys_s": round(self.sys, 1), "cpu_s": round(self.user + self.sys, 1),
                "peak_rss_mib": round(self.rss_mib, 1)}


def wait_all(children, part, on_done=None):
    """Waits for every child (one-second polls, no busy loop), sampling the load average every LOAD_EVERY s."""
    t0, next_load = time.monotonic(), 0.0
    while not all(c.done for c in children):
        now = time.monotonic() - t0
        if now >= next_load:
            emit({"part": part, "load": [round(x, 2) for x in os.getloadavg()], "t_s": round(now),
                  "running": [c.name for c in children if not c.done]})
            next_load += LOAD_EVERY
        for c in children:
            if not c.done and c.poll(False) and on_done:
                on_done(c)
        time.sleep(1.0)


def run_child(cmd, env=None, err_path=None):
    """Runs cmd to its end; returns its Child (returncode, wall, CPU seconds, peak RSS)."""
    c = Child(os.path.basename(cmd[0]), cmd, env, err_path or os.devnull)
    c.poll(True)
    return c


def sets(pairs):
    out = []
    for kv in pairs:
        out += ["--set", kv]
    return out


def train_cmd(qkv, model, run, extra):
    return [qkv, "train", "--config", CONFIGS[model], "--run", run, "--quiet"] + sets(extra)


def thread_env(threads):
    return dict(os.environ, QKV_THREADS=str(threads))


def bits(qkv, run, split, threads):
    out = subprocess.run([qkv, "eval", "--run", run, "--split", split, "--json"], cwd=ROOT,
                         env=thread_env(threads), stdout=subprocess.PIPE, text=True)
    try:
        return round(json.loads(out.stdout.strip().splitlines()[-1])["loss"] / LN2, 4)
    except (ValueError, IndexError, KeyError):
        return None


def end_record(run):
    try:
        ends = [json.loads(l) for l in open(os.path.join(run, "log.jsonl")) if '"kind":"end"' in l]
    except OSError:
        return {}
    return ends[-1] if ends else {}


def new_dir(a, prefix):
    if a.out:
        os.makedirs(a.out, exist_ok=True)
    return tempfile.mkdtemp(prefix=prefix, dir=a.out or None)


def every_seconds(a):
    return [f"eval.every_seconds={a.seconds / a.evals:g}"] if a.evals else []


def quality(a):
    runs = {m: new_dir(a, f"qkv-{m}-") for m in MODELS}
    extra = {m: (TOY[m] if a.toy else []) + ["train.steps=1000000", f"train.max_seconds={a.seconds}"] + every_seconds(a)
             for m in MODELS}
    mode = "concurrent" if a.concurrent else "sequential"
    trained = {}

    def record(c):
        end = end_record(runs[c.name])
        trained[c.name] = dict({"part": "quality", "model": c.name, "toy": a.toy, "mode": mode,
                                "threads": a.threads, "budget_s": a.seconds,
                                "train_seconds": round(end.get("train_seconds", 0), 1),
                                "elapsed_s": round(end.get("elapsed", 0), 1), "steps": end.get("step"),
                                "best_step": end.get("best_step"), "outcome": end.get("outcome")}, **c.usage())
        emit(dict(trained[c.name], event="trained", run=runs[c.name]))

    def start(m):
        return Child(m, train_cmd(a.qkv, m, runs[m], extra[m]), thread_env(a.threads),
                     os.path.join(runs[m], "train.stderr"))

    if a.concurrent:
        wait_all([start(m) for m in MODELS], "quality", record)
    else:
        for m in MODELS:
            wait_all([start(m)], "quality", record)

    def score(m, out):
        out[m] = {"dev_bits_per_char": bits(a.qkv, runs[m], "dev", a.threads),
                  "test_bits_per_char": bits(a.qkv, runs[m], "test", a.threads)}

    ok = [m for m in MODELS if trained[m]["returncode"] == 0]
    scores = {}
    if a.concurrent:  # the two models' scoring side by side too, one thread each
        ts = [threading.Thread(target=score, args=(m, scores)) for m in ok]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
    else:
        for m in ok:
            score(m, scores)
    for m in MODELS:
        if m not in ok:
            emit(dict(trained[m], status="train failed", run=runs[m]))
        else:
            emit(dict(trained[m], **scores[m], run=runs[m], status="ok"))


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
    for model in MODELS:
        ts, ys = [], []
        for T in lengths:
            run = new_dir(a, f"qkv-mem-{model}-")
            extra = (TOY[model] if a.toy else []) + [
                f"model.n_ctx={T}", f"data.seq_len={T}", "train.batch_size=1", "train.steps=2", "eval.every=1000000"]
            if model == "reformer_lm":
                extra.append("model.axial_shape=\"\"")
            c = run_child(train_cmd(a.qkv, model, run, extra), thread_env(a.threads), os.path.join(run, "train.stderr"))
            emit({"part": "memory", "model": model, "toy": a.toy, "seq_len": T, "measured": True,
                  "peak_rss_mib": round(c.rss_mib, 1), "status": "ok" if c.rc == 0 else f"train failed ({c.rc})"})
            if c.rc == 0:
                ts.append(T)
                ys.append(c.rss_mib)
        degree = 1 if model == "reformer_lm" else 2
        if len(ts) > degree:
            coef = fit(ts, ys, degree)
            emit({"part": "memory", "model": model, "toy": a.toy, "measured": False,
                  "extrapolated_from": ts, "fit": "a + b T" if degree == 1 else "a + b T + c T^2",
                  "coefficients_mib": [round(c, 9) for c in coef], "budget_gib": a.budget_gib,
                  "longest_context_extrapolated": longest(coef, a.budget_gib * 1024.0)})


def throughput(a):
    """Training tokens/s of the two models at equal width and depth (the GPT's d and layers for both), batch 1, one
    window of T tokens a step: the median over the logged steps after the first (warm-up) of `qkv train`'s own
    tok_per_s, and the peak RSS of the process."""
    layers = json.load(open(CONFIGS["gpt"]))["model"]["n_layers"]
    for T in [int(x) for x in a.lengths.split(",")]:
        for model in MODELS:
            run = new_dir(a, f"qkv-tput-{model}-")
            extra = (TOY[model] if a.toy else []) + [
                f"model.n_ctx={T}", f"data.seq_len={T}", "train.batch_size=1", f"train.steps={a.steps}",
                "train.log_every=1", "eval.every=1000000"]
            if model == "reformer_lm":
                extra += ["model.axial_shape=\"\""] + ([] if a.toy else [f"model.n_layers={layers}"])
            c = run_child(train_cmd(a.qkv, model, run, extra), thread_env(a.threads), os.path.join(run, "train.stderr"))
            rates = []
            if c.rc == 0:
                for line in open(os.path.join(run, "log.jsonl")):
                    r = json.loads(line)
                    if r.get("kind") == "train" and r.get("step", 0) >= 2 and "tok_per_s" in r:
                        rates.append(r["tok_per_s"])
            rates.sort()
            emit({"part": "throughput", "model": model, "toy": a.toy, "seq_len": T, "n_layers": layers,
                  "threads": a.threads, "steps": len(rates) + 1,
                  "tokens_per_s_median": round(rates[len(rates) // 2], 1) if rates else None,
                  "peak_rss_mib": round(c.rss_mib, 1), "cpu_s": round(c.user + c.sys, 1),
                  "status": "ok" if c.rc == 0 and rates else f"train failed ({c.rc})"})


TURN = re.compile(r"(?:^| )Person ([12]): ")


def turns(line):
    """[(speaker, text)] of one `qkv data dialogue` line."""
    parts = TURN.split(line.strip())
    return [(parts[i], parts[i + 1].strip()) for i in range(1, len(parts) - 1, 2)]


def session_from(dev_dialogue, save_path, conversations=3, opening_max=100, user_turns=2):
    """Script lines taken from the dev novel's conversations: Person 1's first `user_turns` turns of the first
    `conversations` conversations whose opening line is at most `opening_max` characters, /save after the first,
    /reset between them. Real lines, not invented ones; the model answers in place of Person 2."""
    lines, used = [], 0
    for line in open(dev_dialogue, encoding="utf-8"):
        t = turns(line)
        user = [s for who, s in t if who == "1"][:user_turns]
        if len(user) < user_turns or len(user[0]) > opening_max or any(len(s) > 300 for s in user):
            continue
        if used:
            lines.append("/reset")
        lines += user
        used += 1
        if used == 1:
            lines.append(f"/save {save_path}")
        if used == conversations:
            break
    return lines


def chat(a):
    work = new_dir(a, "qkv-chat-")
    data = os.path.join(ROOT, "..", "shared", "data", "lm")
    train_txt, dev_txt = os.path.join(work, "dialogue.txt"), os.path.join(work, "dialogue_dev.txt")
    for src, dst in ((os.path.join(data, "train.txt"), train_txt), (os.path.join(data, "dev.txt"), dev_txt)):
        r = subprocess.run([a.qkv, "data", "dialogue", "-o", dst, src], cwd=ROOT, stderr=subprocess.PIPE, text=True)
        if r.returncode != 0:
            emit({"part": "chat", "status": "data dialogue failed", "stderr": r.stderr.strip()})
            return
        emit({"part": "chat", "step": "data dialogue", "file": dst, "summary": r.stderr.strip()})
    run = os.path.join(work, "run")
    extra = (TOY["reformer_lm"] if a.toy else []) + [
        f"data.train=\"{train_txt}\"", f"data.dev=\"{dev_txt}\"", "train.steps=1000000",
        f"train.max_seconds={a.seconds}", "eval.max_batches=0"] + every_seconds(a)
    if not a.toy:
        T = a.chat_seq_len
        extra += [f"model.n_ctx={T}", f"data.seq_len={T}", "model.axial_shape=\"\"",
                  f"train.batch_size={a.chat_batch}", f"eval.batch_size={a.chat_batch}"]
    c = Child("reformer_lm", train_cmd(a.qkv, "reformer_lm", run, extra), thread_env(a.threads),
              os.path.join(work, "train.stderr"))
    wait_all([c], "chat")
    end = end_record(run)
    rec = dict({"part": "chat", "toy": a.toy, "threads": a.threads, "budget_s": a.seconds,
                "train_seconds": round(end.get("train_seconds", 0), 1), "steps": end.get("step"),
                "best_step": end.get("best_step"), "run": run}, **c.usage())
    if c.rc != 0:
        emit(dict(rec, status="train failed"))
        return
    script = a.script
    if not script:
        lines = session_from(dev_txt, os.path.join(work, "saved.txt"))
        script = os.path.join(work, "script.txt")
        with open(script, "w", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
    r = subprocess.run([a.qkv, "chat", "--run", run, "--script", script, "--max-tokens", str(a.max_tokens)],
                       cwd=ROOT, env=thread_env(a.threads), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    with open(os.path.join(work, "transcript.txt"), "w", encoding="utf-8") as f:
        f.write(r.stdout)
    emit(dict(rec, dev_bits_per_char=bits(a.qkv, run, "dev", a.threads), script=script,
              transcript=os.path.join(work, "transcript.txt"),
              status="ok" if r.returncode == 0 else f"chat failed ({r.returncode})"))
    sys.stdout.write(r.stdout)
    if r.returncode != 0:
        sys.stderr.write(r.stderr[-2000:])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("part", choices=["quality", "memory", "chat", "throughput"])
    ap.add_argument("--qkv", default=os.path.join(ROOT, "build", "qkv"))
    ap.add_argument("--seconds", type=float, default=600, help="training budget per model (quality, chat)")
    ap.add_argument("--threads", type=int, help="threads of each qkv process (default 2, --concurrent 1)")
    ap.add_argument("--concurrent", action="store_true",
                    help="quality: train (then score) both models at the same time, --threads each")
    ap.add_argument("--evals", type=int,
                    help="dev evaluations during training, every seconds/N of training proper (0: only the "
                         "configs' eval.every and the last; default 0 for quality, 4 for chat)")
    ap.add_argument("--out", help="keep the runs under this directory (default: temporary directories)")
    ap.add_argument("--toy", action="store_true", help="tiny models: checks the script, measures nothing")
    ap.add_argument("--lengths", default="1024,2048,4096", help="memory, throughput: context lengths measured")
    ap.add_argument("--steps", type=int, default=5, help="throughput: training steps per model and length")
    ap.add_argument("--budget-gib", type=float, default=24.0, help="memory: the budget extrapolated to")
    ap.add_argument("--script", help="chat: a session file (default: real lines of the dev conversations)")
    ap.add_argument("--max-tokens", type=int, default=200, help="chat: longest reply")
    ap.add_argument("--chat-seq-len", type=int, default=2048, help="chat: training windows and model positions")
    ap.add_argument("--chat-batch", type=int, default=2, help="chat: windows per step")
    a = ap.parse_args()
    a.qkv = os.path.abspath(a.qkv)
    if a.out:
        a.out = os.path.abspath(a.out)
    if a.threads is None:
        a.threads = 1 if a.concurrent else 2
    if a.evals is None:
        a.evals = 4 if a.part == "chat" else 0
    {"quality": quality, "memory": memory, "chat": chat, "throughput": throughput}[a.part](a)


if __name__ == "__main__":
    main()
