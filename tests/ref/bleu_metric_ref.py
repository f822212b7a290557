"""Reference data for tests/test_metrics_bleu.c.

sacrebleu is not installable here, so this transcribes its documented behaviour in plain Python: the 13a tokenizer
(the four regexes of sacrebleu's tokenizer_re.py and the replacements of tokenizer_13a.py, run with Python's re),
n-gram clipping over references, closest reference length and exp smoothing. Writes tests/fixtures/bleu_ref.jsonl:
  {"line": <raw text>, "tok": <13a tokenization>}                     -- translation + summarization dev lines
  {"corpus": <name>, "lowercase": bool, "n_refs": k, "counts": [...], "totals": [...], "hyp_len": h, "ref_len": r,
   "score": s}                                                         -- corpus BLEU on shared paraphrase dev

    /usr/bin/python3 tests/ref/bleu_metric_ref.py [SHARED_DIR]
"""
import collections
import json
import math
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SHARED = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "..", "..", "shared")

RULES = [
    (re.compile(r'([\{-\~\[-\` -\&\(-\+\:-\@\/])'), r' \1 '),
    (re.compile(r'([^0-9])([\.,])'), r'\1 \2 '),
    (re.compile(r'([\.,])([^0-9])'), r' \1 \2'),
    (re.compile(r'([0-9])(-)'), r'\1 \2 '),
]


def tok13a(line):
    line = line.replace('<skipped>', '').replace('-\n', '').replace('\n', ' ')
    if '&' in line:
        line = line.replace('&quot;', '"').replace('&amp;', '&').replace('&lt;', '<').replace('&gt;', '>')
    line = f' {line} '
    for r, s in RULES:
        line = r.sub(s, line)
    return ' '.join(line.split())


def ngrams(toks, n_max=4):
    c = collections.Counter()
    for n in range(1, n_max + 1):
        for i in range(len(toks) - n + 1):
            c[tuple(toks[i:i + n])] += 1
    return c


def corpus_bleu(hyps, ref_streams, lowercase):
    prep = (lambda s: tok13a((s.lower() if lowercase else s).rstrip()).split())
    counts, totals, hyp_len, ref_len = [0] * 4, [0] * 4, 0, 0
    for i, h in enumerate(hyps):
        ht = prep(h)
        refs = [prep(rs[i]) for rs in ref_streams]
        rmax = collections.Counter()
        for r in refs:
            for g, c in ngrams(r).items():
                rmax[g] = max(rmax[g], c)
        best = None
        for r in refs:
            d = abs(len(ht) - len(r))
            if best is None or d < best[0] or (d == best[0] and len(r) < best[1]):
                best = (d, len(r))
        for g, c in ngrams(ht).items():
            totals[len(g) - 1] += c
            counts[len(g) - 1] += min(c, rmax[g])
        hyp_len += len(ht)
        ref_len += best[1]
    bp = 1.0 if hyp_len >= ref_len else (math.exp(1 - ref_len / hyp_len) if hyp_len else 0.0)
    prec, smooth = [], 1.0
    for n in range(4):
        if counts[n] == 0:
            smooth *= 2
            prec.append(100.0 / (smooth * totals[n]))
        else:
            prec.append(100.0 * counts[n] / totals[n])
    score = bp * math.exp(sum(math.log(p) for p in prec) / 4)
    return counts, totals, hyp_len, ref_len, score


def main():
    out = open(os.path.join(HERE, "..", "fixtures", "bleu_ref.jsonl"), "w", encoding="utf-8")
    for rel, step in (("data/translation/dev.tsv", 9), ("data/summarization/dev.tsv", 27)):
        with open(os.path.join(SHARED, rel), encoding="utf-8") as f:
            for k, line in enumerate(f):
                if k % step == 0:
                    for field in line.rstrip("\n").split("\t"):
                        out.write(json.dumps({"line": field, "tok": tok13a(field)}, ensure_ascii=False) + "\n")
    extra = ["Price: $3.50, or 1,000.5 units -- 10-20% off!", "&quot;Hi&quot; &amp;amp; <tag> x.y z,w", "a.-b",
             "\u00bfQu\u00e9 tal?\u00a0Bien. \u201cok\u201d", "line-\nbreak<skipped>", "3.-4. 5,a ,6 .7 8."]
    for e in extra:
        out.write(json.dumps({"line": e, "tok": tok13a(e)}, ensure_ascii=False) + "\n")
    hyps, refs = [], []
    with open(os.path.join(SHARED, "data/paraphrase/dev.tsv"), encoding="utf-8") as f:
        for line in f:
            label, kjv, web = line.rstrip("\n").split("\t")
            if label == "1":
                hyps.append(web)
                refs.append(kjv)
    second = refs[1:] + refs[:1]  # an unrelated second reference: exercises clipping and closest length
    for name, streams in (("paraphrase-dev-positive", [refs]), ("paraphrase-dev-positive-2refs", [refs, second])):
        for lc in (False, True):
            c, t, h, r, s = corpus_bleu(hyps, streams, lc)
            out.write(json.dumps({"corpus": name, "lowercase": lc, "n_refs": len(streams), "counts": c, "totals": t,
                                  "hyp_len": h, "ref_len": r, "score": s}) + "\n")
    out.close()
    print(f"{len(hyps)} paraphrase pairs")


main()
