"""Does pretraining pay? (issue 25) Fine-tunes the encoder of a qkv bert run on three tasks of ../shared/data and the
same architecture from scratch with the same fine-tuning budget (steps, batch, optimiser, schedule), and prints one
JSON line per pair with the test scores:
  sentiment  bert_classifier on sentiment/{train,dev,test}.tsv             test accuracy, macro F1
  pos        bert_tagger on pos/{train,dev,test}.tsv (each word its first WordPiece)   test token accuracy
  cloze_qa   bert + data.task qa on `qkv data cloze-qa -n 3` of lm/{train,dev,test}.txt   test EM, F1
and for sentiment the transfer controls from the pretrained encoder: frozen (finetune.mode head), gradual unfreezing
(one more layer from the top every steps / (layers + 2)) and adapters (model.adapter_dim, finetune.mode adapters).
Both sides read the pretrained run's vocab.txt, so only the weights differ.
  python3 bench/quality/transfer.py PRETRAINED_RUN [--steps N] [--qkv BIN] [--data DIR] [--out DIR]
The scripts run qkv; they import nothing beyond the standard library."""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def sh(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode:
        sys.exit(f"transfer: {' '.join(cmd)} failed ({r.returncode}):\n{r.stderr[-2000:]}")
    return r.stdout


def filter_tagging(src, dst, max_words):
    """Copies a token-per-line file without the sentences longer than max_words (the encoder's positions)."""
    kept = dropped = 0
    with open(src) as f, open(dst, "w") as out:
        sent = []
        for line in list(f) + ["\n"]:
            if line.strip():
                sent.append(line)
                continue
            if sent:
                if len(sent) <= max_words:
                    out.write("".join(sent) + "\n")
                    kept += 1
                else:
                    dropped += 1
            sent = []
    return kept, dropped


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("pretrained", help="a qkv bert run directory (config.json, vocab.txt, a checkpoint)")
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--qkv", default=os.path.join(HERE, "..", "..", "build", "qkv"))
    ap.add_argument("--data", default=os.path.join(HERE, "..", "..", "..", "shared", "data"))
    ap.add_argument("--out", default="transfer_out")
    ap.add_argument("--tasks", default="sentiment,pos,cloze_qa")
    ap.add_argument("--variants", default="frozen,gradual,adapters", help="sentiment controls ('' for none)")
    ap.add_argument("--adapter-dim", type=int, default=64)
    a = ap.parse_args()
    pre = os.path.abspath(a.pretrained)
    data = os.path.abspath(a.data)
    out = os.path.abspath(a.out)
    os.makedirs(out, exist_ok=True)
    pcfg = json.load(open(os.path.join(pre, "config.json")))
    vocab = os.path.join(pre, "vocab.txt")
    if pcfg["model"].get("type") != "bert" or not os.path.exists(vocab):
        sys.exit(f"transfer: {pre} is not a bert run with a vocab.txt")
    enc = {k: v for k, v in pcfg["model"].items() if k not in ("type", "nsp")}
    max_len = min(128, int(enc.get("max_positions", 512)))
    lowercase = pcfg["data"].get("lowercase", True)
    n_layers = int(enc.get("n_layers", 4))

    def config(mtype, dat, model_extra=None, finetune=None):
        model = dict(enc, type=mtype, **(model_extra or {}))
        d = dict(dat, tokenizer="wordpiece", vocab_file=vocab, lowercase=lowercase)
        return {"model": model, "data": d, "finetune": finetune or {},
                "train": {"steps": a.steps, "batch_size": a.batch, "checkpoint_every": 0, "log_every": 50,
                          "clip_norm": 1.0,
                          "optimizer": {"name": "adamw", "lr": a.lr, "weight_decay": 0.01},
                          "schedule": {"spec": "constant * linear_warmup", "warmup_steps": max(1, a.steps // 10)}},
                "eval": {"every": 0}, "seed": 1}

    def run(name, cfg):
        path = os.path.join(out, name + ".json")
        json.dump(cfg, open(path, "w"), indent=1)
        rdir = os.path.join(out, name)
        sh(["rm", "-rf", rdir])
        sh([a.qkv, "train", "--config", path, "--run", rdir, "--quiet"])
        return json.loads(sh([a.qkv, "eval", "--run", rdir, "--split", "test", "--json"]))

    def pair(task, mtype, dat, keys):
        res = {}
        for side in ("pretrained", "scratch"):
            ft = {"init_from": pre} if side == "pretrained" else {}
            m = run(f"{task}_{side}", config(mtype, dat, finetune=ft))
            res[side] = {k: m.get(k) for k in keys}
        line = {"task": task, "steps": a.steps, "pretrained_run": pre, **res}
        line["pretrained_better"] = all((res["pretrained"][k] or 0) > (res["scratch"][k] or 0) for k in keys)
        print(json.dumps(line), flush=True)

    tasks = a.tasks.split(",")
    if "sentiment" in tasks:
        s = os.path.join(data, "sentiment")
        dat = {"train": f"{s}/train.tsv", "dev": f"{s}/dev.tsv", "test": f"{s}/test.tsv", "max_len": max_len}
        pair("sentiment", "bert_classifier", dat, ["accuracy", "macro_f1"])
        every = max(1, a.steps // (n_layers + 2))
        controls = {"frozen": ({}, {"mode": "head"}), "gradual": ({}, {"unfreeze_every": every}),
                    "adapters": ({"adapter_dim": a.adapter_dim}, {"mode": "adapters"})}
        for v in [v for v in a.variants.split(",") if v]:
            extra, ft = controls[v]
            m = run(f"sentiment_{v}", config("bert_classifier", dat, extra, dict(ft, init_from=pre)))
            print(json.dumps({"task": "sentiment", "variant": v, "steps": a.steps, "accuracy": m.get("accuracy"),
                              "macro_f1": m.get("macro_f1")}), flush=True)
    if "pos" in tasks:
        files = {}
        for split in ("train", "dev", "test"):
            files[split] = os.path.join(out, f"pos_{split}.tsv")
            kept, dropped = filter_tagging(os.path.join(data, "pos", f"{split}.tsv"), files[split], max_len)
            if dropped:
                print(f"transfer: pos/{split}.tsv: {dropped} of {kept + dropped} sentences longer than {max_len} "
                      "words left out", file=sys.stderr)
        pair("pos", "bert_tagger", dict(files, max_len=max_len), ["accuracy"])
    if "cloze_qa" in tasks:
        files = {}
        for split in ("train", "dev", "test"):
            files[split] = os.path.join(out, f"cloze_{split}.jsonl")
            sh([a.qkv, "data", "cloze-qa", "-n", "3", "-o", files[split], os.path.join(data, "lm", f"{split}.txt")])
        pair("cloze_qa", "bert", dict(files, task="qa", max_len=max_len), ["exact_match", "f1"])


if __name__ == "__main__":
    main()
