#!/usr/bin/python3
"""Multi-task against single-task T5 at a fixed total budget (issue 26), all through the training engine.

One tokenizer for every model (--tokenizer bpe, the default): a byte-level BPE of --bpe-vocab tokens learned by
`qkv tokenize train --corpus` from the pretraining corpus plus the training files of the tasks (never a dev or test
split), so every model can spell Spanish, package names and the label words (no <unk>). Every run takes it through
data.tokenizer_from and reserves the sentinel ids (data.keep_sentinels), so all models have the same shape.
--tokenizer word is the earlier setup: the pretraining run's 16k English words for the multi-task model, each
single-task model's own 16k words.

The multi-task model: span-corruption pretraining on the English corpus of ../shared/data (data.task
span_corruption over the directory: qkv_documents' training documents, never a dev or test split) for
PRETRAIN steps, then multi-task fine-tuning for STEPS - PRETRAIN steps from those weights (finetune.init_from, with
the pretraining tokenizer: data.tokenizer_from, data.keep_sentinels) on five tasks listed in data.tasks and mixed
in the engine (--mixing: examples-proportional with cap K, temperature T over the capped counts, or equal):
    translate English to Spanish (BLEU), summarize (ROUGE-L F), sentiment (accuracy of the label word),
    question/context cloze QA from `qkv data cloze-qa` (SQuAD EM/F1), paraphrase (accuracy of yes/no).
Each single-task model has the same size and trains STEPS steps from scratch on its task alone (data.tasks with
one task). Every model is scored by `qkv eval --split dev` (per-task metrics of greedy decodes) on the first LIMIT
dev examples of each task. Prints one JSON line per (task, model), then a table on stderr. Run again with the same
--out after a stop, it skips the trainings that finished and resumes the interrupted one from its last checkpoint.
Another --mixing with the same --out trains only its own multi-task run (multi_equal, multi_temperature2, ...) and
reuses the pretraining run and the single-task models (--no-singles: trains and scores the multi-task run alone,
e.g. beside a running proportional one, once the pretraining run has finished).

    bench/quality/t5.py --qkv build/qkv [--steps 3000] [--pretrain 1000] [--batch 32] [--cap 20000] [--limit 300]
                        [--train-limit 0] [--d-model 128] [--pretrain-lr 3e-4] [--tokenizer bpe|word] [--bpe-vocab 8000]
                        [--mixing proportional|temperature|equal] [--temperature 2] [--out DIR]
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.normpath(os.path.join(HERE, "..", "..", "..", "shared", "data"))
TASKS = [  # name, data.tasks element without files, source folder (None: the cloze file), metric key
    ("translate", {"prefix": "translate English to Spanish:"}, "translation", "bleu"),
    ("summarize", {"metric": "rouge"}, "summarization", "rougeL"),
    ("sentiment", {"format": "label", "labels": "negative,positive"}, "sentiment", "accuracy"),
    ("qa", {"format": "qa"}, None, "f1"),
    ("paraphrase", {"format": "pair_label", "labels": "no,yes"}, "paraphrase", "accuracy"),
]


def head(src, dst, n):
    with open(src, encoding="utf-8") as fi, open(dst, "w", encoding="utf-8") as fo:
        for i, line in enumerate(fi):
            if n and i >= n:
                break
            fo.write(line)
    return dst


def files(qkv, d, a):
    """Each task's train and dev files, cut to the limits (cloze QA made from the Austen text first)."""
    out = {}
    for name, _, folder, _ in TASKS:
        tr = os.path.join(d, ("cloze_train.jsonl" if folder is None else name + "_train.tsv"))
        dv = os.path.join(d, ("cloze_dev.jsonl" if folder is None else name + "_dev.tsv"))
        if os.path.exists(tr) and os.path.exists(dv):
            out[name] = (tr, dv)  # made by an earlier call with the same --out (a run beside may be reading them)
            continue
        if folder is None:
            tr, dv = os.path.join(d, "cloze_train.jsonl"), os.path.join(d, "cloze_dev.jsonl")
            mx = ["--max", str(a.train_limit)] if a.train_limit else []
            n = str(a.cloze_sentences)
            subprocess.run([qkv, "data", "cloze-qa", "-n", n, *mx, "-o", tr, os.path.join(DATA, "lm", "train.txt")],
                           check=True, capture_output=True)
            subprocess.run([qkv, "data", "cloze-qa", "-n", n, "--max", str(a.limit), "-o", dv,
                            os.path.join(DATA, "lm", "dev.txt")], check=True, capture_output=True)
            out[name] = (tr, dv)
        else:
            out[name] = (head(os.path.join(DATA, folder, "train.tsv"), os.path.join(d, name + "_train.tsv"), a.train_limit),
                         head(os.path.join(DATA, folder, "dev.tsv"), os.path.join(d, name + "_dev.tsv"), a.limit))
    return out


def bpe(a, d):
    """The shared byte-level BPE: the pretraining corpus (--corpus) and the tasks' training files (the cloze QA file
    is made from the Austen text the corpus already holds), learned once per --out."""
    out = os.path.join(d, "tokenizer")
    if not os.path.exists(os.path.join(out, "merges.txt")):
        tasks = [os.path.join(DATA, folder, "train.tsv") for _, _, folder, _ in TASKS if folder]
        subprocess.run([a.qkv, "tokenize", "train", "--vocab-size", str(a.bpe_vocab), "--corpus", DATA, "--out", out,
                        *tasks], check=True, capture_output=True)
    return out


def model(a):
    return {"type": "t5", "d_model": a.d_model, "n_heads": 4, "d_ff": 4 * a.d_model, "dropout": 0.1}


def train(qkv, d, name, cfg):
    path = os.path.join(d, name + ".json")
    with open(path, "w") as f:
        json.dump(cfg, f)
    run = os.path.join(d, name)
    log = os.path.join(run, "log.jsonl")
    ends = [json.loads(x) for x in open(log) if '"kind":"end"' in x] if os.path.exists(log) else []
    if ends and ends[-1].get("outcome") == "finished":
        return run  # finished by an earlier call with the same --out: the long script resumes across sessions
    resume = ["--resume"] if any(f.startswith("ckpt-") for f in (os.listdir(run) if os.path.isdir(run) else [])) else []
    if not resume and os.path.isdir(run):
        shutil.rmtree(run)  # stopped before its first checkpoint
    subprocess.run([qkv, "train", "--config", path, "--run", run, "--quiet"] + resume, check=True)
    return run


def task_list(names, f):
    return [dict({"name": n, "train": f[n][0], "dev": f[n][1]}, **extra) for n, extra, _, _ in TASKS if n in names]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--qkv", default=os.path.join(HERE, "..", "..", "build", "qkv"))
    ap.add_argument("--steps", type=int, default=3000, help="total steps of every model")
    ap.add_argument("--pretrain", type=int, default=1000, help="of which the multi-task model pretrains")
    ap.add_argument("--pretrain-lr", type=float, default=3e-4,
                    help="the span-corruption pretraining's learning rate (at 1e-3 it settles where the decoder ignores "
                         "its encoder and fine-tuning starts worse than random weights: docs/t5.md)")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--cap", type=int, default=20000)
    ap.add_argument("--limit", type=int, default=300, help="dev examples scored per task")
    ap.add_argument("--train-limit", type=int, default=0, help="training examples read per task (0: all)")
    ap.add_argument("--d-model", type=int, default=128)
    ap.add_argument("--max-len", type=int, default=96)
    ap.add_argument("--cloze-sentences", type=int, default=5,
                    help="context sentences of a cloze question (qkv data cloze-qa -n): at 5 the answer lies past "
                         "96 BPE tokens in over half the questions, at 2 within 160 in ~90%%")
    ap.add_argument("--tokenizer", choices=["bpe", "word"], default="bpe")
    ap.add_argument("--bpe-vocab", type=int, default=8000, help="tokens of the shared BPE (256 bytes + merges)")
    ap.add_argument("--mixing", choices=["proportional", "temperature", "equal"], default="proportional")
    ap.add_argument("--temperature", type=float, default=2.0, help="--mixing temperature: T (rates^(1/T))")
    ap.add_argument("--loss-average", choices=["tokens", "examples"], default="tokens",
                    help="train.loss_average of every model (examples: runs named ..._ex)")
    ap.add_argument("--no-singles", action="store_true",
                    help="only the multi-task run (another --mixing beside a run that trains the single-task models)")
    ap.add_argument("--no-multi", action="store_true",
                    help="only the single-task models (beside a run of the same --out that trains the multi-task one; "
                         "start it once that run has made the tokenizer)")
    ap.add_argument("--singles", default="", help="comma-separated tasks whose single-task models train ('': all)")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    if not 0 < a.pretrain < a.steps:
        sys.exit("--pretrain must be in (0, --steps)")
    d = a.out or tempfile.mkdtemp(prefix="t5q")
    os.makedirs(d, exist_ok=True)
    f = files(a.qkv, d, a)
    names = [t[0] for t in TASKS]
    common = {"train": {"batch_size": a.batch, "optimizer": {"lr": 0.001}, "log_every": 100, "checkpoint_every": 250,
                        "loss_average": a.loss_average},
              "eval": {"every": 0, "batch_size": 64}, "seed": 1}
    if a.tokenizer == "bpe":
        tok = bpe(a, d)
        vocab = {"tokenizer": "bpe", "tokenizer_from": tok}
        single_vocab = dict(vocab, keep_sentinels=True)  # the multi-task model's shape
    else:
        vocab = single_vocab = {"max_vocab": 16000}
    pre_train = dict(common["train"], steps=a.pretrain, loss_average="tokens",  # one pretraining run for both averages
                     optimizer={"lr": a.pretrain_lr})
    pre = None if a.no_multi else train(a.qkv, d, "pretrain", dict(common, model=model(a), train=pre_train,
                                           data=dict(vocab, task="span_corruption", train=DATA, max_len=a.max_len)))
    mixing = {"mixing": a.mixing, "mixing_cap": a.cap}
    multi = "multi"
    if a.mixing == "temperature":
        mixing["mixing_temperature"] = a.temperature
        multi += "_temperature%g" % a.temperature
    elif a.mixing == "equal":
        multi += "_equal"
    ex = "_ex" if a.loss_average == "examples" else ""
    multi += ex
    runs = {} if a.no_multi else {"multi": train(a.qkv, d, multi, dict(
        common, model=model(a), train=dict(common["train"], steps=a.steps - a.pretrain),
        data=dict(mixing, tasks=task_list(names, f), max_len=a.max_len, tokenizer_from=pre, keep_sentinels=True,
                  **({"tokenizer": "bpe"} if a.tokenizer == "bpe" else {})),
        finetune={"init_from": pre}))}
    # The smallest task first (a stop for time leaves the single-task models the comparison needs most).
    singles = [] if a.no_singles else [n for n in names if not a.singles or n in a.singles.split(",")]
    for n in sorted(singles, key=lambda n: sum(1 for _ in open(f[n][0], encoding="utf-8"))):
        runs[n] = train(a.qkv, d, "single_" + n + ex, dict(
            common, model=model(a), train=dict(common["train"], steps=a.steps),
            data=dict(single_vocab, tasks=task_list([n], f), max_len=a.max_len)))
    share = [] if a.no_multi else [json.loads(x) for x in open(os.path.join(runs["multi"], "log.jsonl"))
                                   if '"task_share"' in x]
    print(json.dumps({"bench": "t5_quality", "steps": a.steps, "pretrain_steps": a.pretrain, "batch": a.batch,
                      "cap": a.cap, "d_model": a.d_model, "tokenizer": a.tokenizer, "mixing": a.mixing, "loss_average": a.loss_average,
                      "temperature": a.temperature if a.mixing == "temperature" else None, "multi_run": multi,
                      "task_share": share[-1]["task_share"] if share else None}),
          flush=True)
    table = {}
    for kind in ([] if a.no_multi else ["multi"]) + singles:
        out = subprocess.run([a.qkv, "eval", "--run", runs[kind], "--split", "dev", "--json"], capture_output=True,
                             text=True, check=True).stdout
        scores = json.loads(out)["tasks"]
        for n, _, _, key in TASKS:
            if n in scores and (kind == "multi" or kind == n):
                v = scores[n][key]
                table[(n, "multi" if kind == "multi" else "single")] = v
                print(json.dumps({"bench": "t5_quality", "task": n, "model": "multi" if kind == "multi" else "single",
                                  "metric": key, "value": round(v, 2), "dev_examples": scores[n]["examples"]}),
                      flush=True)
    print("task         metric     multi   single", file=sys.stderr)
    for n, _, _, key in TASKS:
        print("%-12s %-8s %7.2f %8.2f" % (n, key, table.get((n, "multi"), float("nan")),
                                          table.get((n, "single"), float("nan"))), file=sys.stderr)


if __name__ == "__main__":
    main()
