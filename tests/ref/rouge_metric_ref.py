"""Reference ROUGE scores for tests/test_metrics_rouge.c.

rouge-score (Google's package) is not installable here (no pip, no Debian package), so this is an independent
Python implementation of its documented semantics: tokens = runs of [a-z0-9] in text.lower(), NLTK Porter stems for
tokens longer than 3 characters when stemming, ROUGE-N from clipped n-gram overlap, ROUGE-L from the LCS length,
ROUGE-Lsum from the union LCS of each target line against all prediction lines with its anti-double-counting rule.
Pairs are built from the shared summarization dev set (target = synopsis [+ a second line], prediction = sentences
of the long description, one per line). Writes tests/fixtures/rouge_pairs.jsonl, one object per pair:
    {"target": ..., "prediction": ..., "plain": [12 numbers], "stem": [12 numbers]}
with numbers = (P, R, F) for rouge1, rouge2, rougeL, rougeLsum.

    /usr/bin/python3 tests/ref/rouge_metric_ref.py [SHARED_DIR]
"""
import collections
import json
import os
import re
import sys

from nltk.stem.porter import PorterStemmer

HERE = os.path.dirname(os.path.abspath(__file__))
SHARED = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "..", "..", "shared")
STEMMER = PorterStemmer()


def tokenize(text, stem):
    toks = [t for t in re.split(r"[^a-z0-9]+", text.lower()) if t]
    if stem:
        toks = [STEMMER.stem(t) if len(t) > 3 else t for t in toks]
    return toks


def f1(p, r):
    return 2 * p * r / (p + r) if p + r > 0 else 0.0


def rouge_n(t, p, n):
    tc = collections.Counter(tuple(t[i:i + n]) for i in range(len(t) - n + 1))
    pc = collections.Counter(tuple(p[i:i + n]) for i in range(len(p) - n + 1))
    inter = sum(min(c, pc[g]) for g, c in tc.items())
    prec = inter / max(sum(pc.values()), 1)
    rec = inter / max(sum(tc.values()), 1)
    return [prec, rec, f1(prec, rec)]


def lcs_table(a, b):
    t = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]
    for i in range(1, len(a) + 1):
        for j in range(1, len(b) + 1):
            t[i][j] = t[i - 1][j - 1] + 1 if a[i - 1] == b[j - 1] else max(t[i - 1][j], t[i][j - 1])
    return t


def rouge_l(t, p):
    if not t or not p:
        return [0.0, 0.0, 0.0]
    lcs = lcs_table(t, p)[-1][-1]
    return [lcs / len(p), lcs / len(t), f1(lcs / len(p), lcs / len(t))]


def lcs_indices(a, b):
    t = lcs_table(a, b)
    i, j, out = len(a), len(b), []
    while i > 0 and j > 0:
        if a[i - 1] == b[j - 1]:
            out.append(i - 1)
            i, j = i - 1, j - 1
        elif t[i][j - 1] > t[i - 1][j]:
            j -= 1
        else:
            i -= 1
    return set(out)


def rouge_lsum(target, prediction, stem):
    refs = [tokenize(s, stem) for s in target.split("\n") if s]
    cans = [tokenize(s, stem) for s in prediction.split("\n") if s]
    if not refs or not cans:
        return [0.0, 0.0, 0.0]
    m, n = sum(map(len, refs)), sum(map(len, cans))
    if not m or not n:
        return [0.0, 0.0, 0.0]
    cr, cc = collections.Counter(), collections.Counter()
    for s in refs:
        cr.update(s)
    for s in cans:
        cc.update(s)
    hits = 0
    for r in refs:
        union = set()
        for c in cans:
            union |= lcs_indices(r, c)
        for i in sorted(union):
            tok = r[i]
            if cc[tok] > 0 and cr[tok] > 0:
                hits += 1
                cc[tok] -= 1
                cr[tok] -= 1
    prec, rec = hits / n, hits / m
    return [prec, rec, f1(prec, rec)]


def scores(target, prediction, stem):
    t, p = tokenize(target, stem), tokenize(prediction, stem)
    return rouge_n(t, p, 1) + rouge_n(t, p, 2) + rouge_l(t, p) + rouge_lsum(target, prediction, stem)


def main():
    pairs = []
    with open(os.path.join(SHARED, "data/summarization/dev.tsv"), encoding="utf-8") as f:
        for k, line in enumerate(f):
            if k % 18:
                continue
            text, summary = line.rstrip("\n").split("\t")
            sents = [s for s in re.split(r"(?<=\.) ", text)][:3]
            prediction = "\n".join(sents)
            target = summary if k % 36 else summary + "\n" + sents[-1][: len(sents[-1]) // 2]
            pairs.append((target, prediction))
    pairs.append(("The quick brown fox jumps over the lazy dog", "The quick brown dog jumps on the log."))
    pairs.append(("w1 w2 w3 w4 w5", "w1 w2 w6 w7 w8\nw1 w3 w8 w9 w5"))
    pairs.append(("Flying flies fly; running runs ran.", "fly\n\nrun, RUNNING, Ran!"))
    out = os.path.join(HERE, "..", "fixtures", "rouge_pairs.jsonl")
    with open(out, "w", encoding="utf-8") as f:
        for t, p in pairs:
            f.write(json.dumps({"target": t, "prediction": p, "plain": scores(t, p, False),
                                "stem": scores(t, p, True)}, ensure_ascii=False) + "\n")
    print(f"wrote {len(pairs)} pairs to {out}")


main()
