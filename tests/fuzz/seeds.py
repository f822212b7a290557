#!/usr/bin/env python3
"""Seeds for the fuzz harnesses: small slices of the test fixtures and of ../shared (pretrained tokenizers,
vectors, data). Written into OUT/<harness>/ at fuzz time (scripts/fuzz.sh), not stored in the repository.
usage: seeds.py SOURCE_DIR SHARED_DIR OUT"""
import json, os, struct, sys

src, shared, out = sys.argv[1], sys.argv[2], sys.argv[3]
fix = os.path.join(src, "tests", "fixtures")
pre = os.path.join(shared, "pretrained")
data = os.path.join(shared, "data")


def put(harness, name, blob):
    d = os.path.join(out, harness)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(blob if isinstance(blob, bytes) else blob.encode())


def head(path, n_lines=None, n_bytes=None):
    if not os.path.exists(path):
        return None
    with open(path, "rb") as f:
        if n_bytes:
            return f.read(n_bytes)
        return b"".join(f.readline() for _ in range(n_lines))


# safetensors: the small fixtures and the tiny HF models
for root, _, files in os.walk(fix):
    for fn in files:
        p = os.path.join(root, fn)
        if fn.endswith(".safetensors") and os.path.getsize(p) <= 16384:
            put("safetensors", os.path.relpath(p, fix).replace("/", "_"), open(p, "rb").read())
        if fn == "config.json":
            put("hf_config", os.path.relpath(p, fix).replace("/", "_"), open(p, "rb").read())
for m in ("tiny-random-bert", "tiny-random-gpt2", "tiny-random-roberta"):
    c = os.path.join(pre, m, "config.json")
    if os.path.exists(c):
        put("hf_config", m + ".json", open(c, "rb").read())

# WordPiece vocab: the specials, the first words and some ## pieces
v = os.path.join(pre, "bert-base-uncased-tokenizer", "vocab.txt")
if os.path.exists(v):
    lines = open(v, encoding="utf-8").read().split("\n")
    pick = lines[:110] + lines[1996:2300] + [l for l in lines if l.startswith("##")][:200]
    put("wordpiece_vocab", "bert_slice.txt", "\n".join(pick) + "\n")

# GPT-2 BPE: the 256 byte tokens, the first 300 merges and their results
vj, mt = os.path.join(pre, "gpt2-tokenizer", "vocab.json"), os.path.join(pre, "gpt2-tokenizer", "merges.txt")
if os.path.exists(vj):
    vocab = json.load(open(vj, encoding="utf-8"))
    merges = open(mt, encoding="utf-8").read().split("\n")
    body = [m for m in merges[1:301] if m]
    keep = {t: i for t, i in vocab.items() if i < 256}
    for m in body:
        a, b = m.split(" ")
        keep[a + b] = len(keep)
    keep["<|endoftext|>"] = len(keep)
    put("bpe_vocab", "gpt2_slice", json.dumps(keep, ensure_ascii=False) + "\n#----\n" + merges[0] + "\n" +
        "\n".join(body) + "\n")

# Text for the tokenizers, the metrics and the readers
for name, path in (("bert_ref", os.path.join(pre, "bert-base-uncased-tokenizer", "reference.jsonl")),
                   ("gpt2_ref", os.path.join(pre, "gpt2-tokenizer", "reference.jsonl"))):
    b = head(path, 3)
    if b:
        put("tokenize", name, b)
        put("data_reader", name, bytes([3]) + b)
for t in ("sentiment", "spam", "paraphrase", "pos", "summarization", "translation"):
    b = head(os.path.join(data, t, "dev.tsv"), 6)
    if b:
        put("data_reader", t, bytes([1]) + b)
        put("tokenize", t, b)
        put("metrics", t, b.replace(b"\t", b"\n#----\n", 1))
lm = head(os.path.join(data, "lm", "dev.txt"), 12)
if lm:
    put("data_reader", "lm", bytes([0]) + lm)
    for k in (1, 2, 3):
        put("task_data", "lm%d" % k, bytes([k]) + lm)
for k, t in ((0, "sentiment"), (0, "spam"), (4, "translation"), (5, "translation")):
    b = head(os.path.join(data, t, "dev.tsv"), 10)
    if b:
        put("task_data", "%s%d" % (t, k), bytes([k]) + b)
for fn in ("bleu_ref.jsonl", "rouge_pairs.jsonl"):
    b = head(os.path.join(fix, fn), 4)
    if b:
        put("data_reader", fn, bytes([3]) + b)
        for i, line in enumerate(b.split(b"\n")[:3]):
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            vals = [v for v in rec.values() if isinstance(v, str)]
            if len(vals) >= 2:
                put("metrics", "%s%d" % (fn, i), (vals[0] + "\n#----\n" + vals[1]).encode())

# Vectors: GloVe text, word2vec text (with a header) and word2vec binary
g = os.path.join(pre, "glove-6B-100d-top20k", "glove.6B.100d.top20k.txt")
if os.path.exists(g):
    rows = [l.split(" ") for l in head(g, 6).decode().strip().split("\n")]
    small = [[r[0]] + r[1:9] for r in rows]
    text = "".join(" ".join(r) + "\n" for r in small)
    put("glove", "glove", b"\x01" + text.encode())
    put("glove", "w2v_text", b"\x00" + ("%d 8\n" % len(small) + text).encode())
    binary = ("%d 8\n" % len(small)).encode() + b"".join(
        r[0].encode() + b" " + struct.pack("<8f", *map(float, r[1:])) + b"\n" for r in small)
    put("glove", "w2v_binary", b"\x02" + binary)

# Token shards: version 1, uint16 and uint32 ids
def shard(width, vocab, ids):
    h = b"QKVTOKS\0" + struct.pack("<IIQQ", 1, width, vocab, len(ids))
    h += b"\0" * (64 - len(h))
    return h + b"".join(struct.pack("<H" if width == 2 else "<I", i) for i in ids)
put("shard", "u16", shard(2, 300, list(range(0, 300, 7))))
put("shard", "u32", shard(4, 70000, [0, 69999, 5, 65536]))
