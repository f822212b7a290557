"""PyTorch side of the translation quality comparison (issue 10): the same data, tokenisation, model,
hyperparameters and number of steps as bench/quality/translation.json gives `qkv train`, then test BLEU with greedy,
beam 4 (GNMT length penalty) and MBR (samples scored against each other with sentence BLEU) decoding. Prints one
JSON line per decoding mode.

    /usr/bin/python3 bench/quality/translation.py --data ../shared/data/translation [--model transformer|lstm]
        [--steps N] [--limit N] [--mbr-limit N] [--qkv build/qkv] [--run QKV_RUN_DIR] [--threads 2]

Tokenisation is what translation.json's data section says, with the same ids as qkv:
  bpe   the byte-level BPE qkv trained for the run in --run (its vocab.json + merges.txt; tgt_vocab.json +
        tgt_merges.txt for the target when vocabularies are separate): sentences are encoded by
        `qkv tokenize encode` (needs --qkv), ids <pad> <s> </s> are the three after the byte-level vocabulary, and
        hypotheses are decoded back to text. BLEU: detokenized hypotheses against the raw reference lines.
  word  qkv's word tokenizer (split on whitespace, case and punctuation kept, <pad> <unk> <s> </s> then the words
        by frequency). BLEU: on the tokenised references.
BLEU is corpus BLEU by `qkv bleu` when --qkv is given (sacrebleu-compatible, 13a tokenizer), else sacrebleu if
importable, else the small implementation below (same formula, exp smoothing; whitespace tokens)."""
import argparse
import collections
import json
import math
import os
import subprocess
import sys
import tempfile
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "ref"))
from cls_model import sinusoid  # noqa: E402  (the same sinusoidal table as qkv's reference tests)
PAD, UNK, BOS, EOS = 0, 1, 2, 3


def read_tsv(path, limit=0, split=True):
    pairs = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            parts = line.rstrip("\n").split("\t")
            if len(parts) >= 2:
                pairs.append((parts[0].split(), parts[1].split()) if split else (parts[0], parts[1]))
            if limit and len(pairs) >= limit:
                break
    return pairs


def build_vocab(seqs, min_freq, max_vocab):
    c = collections.Counter(w for s in seqs for w in s)
    words = sorted((w for w, n in c.items() if n >= min_freq), key=lambda w: (-c[w], w))
    if max_vocab:
        words = words[:max(0, max_vocab - 4)]
    itos = ["<pad>", "<unk>", "<s>", "</s>"] + words
    return {w: i for i, w in enumerate(itos)}, itos


def encode(seq, stoi, max_len):
    return [stoi.get(w, UNK) for w in seq[:max_len]]


def byte_to_unicode():
    """GPT-2's byte-level alphabet: printable Latin-1 bytes stand for themselves, the rest for U+0100 onwards."""
    keep = list(range(0x21, 0x7F)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    out, extra = {}, 0
    for b in range(256):
        if b in keep:
            out[b] = chr(b)
        else:
            out[b] = chr(256 + extra)
            extra += 1
    return out


class QkvBpe:
    """One side's BPE of a qkv run. Encoding goes through `qkv tokenize encode`, so the ids are qkv's own;
    decoding maps the byte-level tokens back to bytes (specials skipped; invalid UTF-8 replaced, newlines made
    spaces so a hypothesis stays one line)."""

    def __init__(self, qkv, run, prefix, tmp):
        self.qkv, self.dir = qkv, run
        if prefix:  # `qkv tokenize --bpe DIR` reads DIR/vocab.json + DIR/merges.txt
            self.dir = os.path.join(tmp, prefix.rstrip("_"))
            os.makedirs(self.dir, exist_ok=True)
            for name in ("vocab.json", "merges.txt"):
                os.symlink(os.path.abspath(os.path.join(run, prefix + name)), os.path.join(self.dir, name))
        vocab = json.load(open(os.path.join(self.dir, "vocab.json"), encoding="utf-8"))
        self.size = max(vocab.values()) + 1
        self.pad, self.bos, self.eos = vocab["<pad>"], vocab["<s>"], vocab["</s>"]
        back = {u: b for b, u in byte_to_unicode().items()}
        self.bytes = {i: bytes(back[c] for c in t) for t, i in vocab.items() if i not in (self.pad, self.bos, self.eos)}

    def encode(self, lines, max_len):
        out = subprocess.run([self.qkv, "tokenize", "encode", "--bpe", self.dir], input="\n".join(lines) + "\n",
                             capture_output=True, text=True, check=True).stdout.split("\n")
        return [[int(x) for x in out[i].split()][:max_len] for i in range(len(lines))]

    def decode(self, ids):
        text = b"".join(self.bytes.get(i, b"") for i in ids).decode("utf-8", errors="replace")
        return text.replace("\n", " ")


class NMT(nn.Module):
    """qkv's transformer_seq2seq: torch.nn.Transformer + scaled embeddings + sinusoidal positions + generator."""

    def __init__(self, vs, vt, m, max_len):
        super().__init__()
        d = m["d_model"]
        self.src_emb, self.tgt_emb = nn.Embedding(vs, d), nn.Embedding(vt, d)
        self.register_buffer("pe", sinusoid(max_len, d))
        self.drop = nn.Dropout(m["dropout"])
        self.tf = nn.Transformer(d_model=d, nhead=m["n_heads"], num_encoder_layers=m["n_enc_layers"],
                                 num_decoder_layers=m["n_dec_layers"], dim_feedforward=m["d_ff"],
                                 dropout=m["dropout"], activation=m["activation"], batch_first=True,
                                 norm_first=m["norm"] == "pre")
        self.gen = nn.Linear(d, vt)
        self.scale = math.sqrt(d)

    def encode(self, src, pad):
        x = self.drop(self.src_emb(src) * self.scale + self.pe[:src.shape[1]])
        return self.tf.encoder(x, src_key_padding_mask=pad)

    def decode(self, mem, pad, tgt):
        T = tgt.shape[1]
        x = self.drop(self.tgt_emb(tgt) * self.scale + self.pe[:T])
        causal = torch.triu(torch.full((T, T), float("-inf")), diagonal=1)
        return self.gen(self.tf.decoder(x, mem, tgt_mask=causal, memory_key_padding_mask=pad))

    def forward(self, src, pad, tgt):
        return self.decode(self.encode(src, pad), pad, tgt)


class LSTMSeq2Seq(nn.Module):
    """qkv's lstm_seq2seq with dot / general attention, without input feeding, no dropout."""

    def __init__(self, vs, vt, m, max_len):
        super().__init__()
        e, h = m["embed"], m["hidden"]
        self.src_emb, self.tgt_emb = nn.Embedding(vs, e), nn.Embedding(vt, e)
        self.enc = nn.LSTM(e, h, m["n_layers"], batch_first=True)
        self.dec = nn.LSTM(e, h, m["n_layers"], batch_first=True)
        self.kind = m["attention"]
        if self.kind == "general":
            self.attn = nn.Module()
            self.attn.W = nn.Linear(h, h, bias=False)
        self.combine = nn.Linear(2 * h, h, bias=False)
        self.gen = nn.Linear(h, vt)

    def encode(self, src, pad):
        lengths = (~pad).sum(1).cpu()
        packed = nn.utils.rnn.pack_padded_sequence(self.src_emb(src), lengths, batch_first=True, enforce_sorted=False)
        out, state = self.enc(packed)
        henc, _ = nn.utils.rnn.pad_packed_sequence(out, batch_first=True, total_length=src.shape[1])
        return henc, state

    def decode_steps(self, mem, pad, tgt, state):
        henc = mem
        hdec, state = self.dec(self.tgt_emb(tgt), state)
        keys = self.attn.W(henc) if self.kind == "general" else henc
        a = (hdec @ keys.transpose(1, 2)).masked_fill(pad[:, None, :], float("-inf")).softmax(-1)
        ctx = a @ henc
        return self.gen(torch.tanh(self.combine(torch.cat([ctx, hdec], -1)))), state

    def forward(self, src, pad, tgt):
        henc, state = self.encode(src, pad)
        return self.decode_steps(henc, pad, tgt, state)[0]


def batches(data, bs, gen):
    order = torch.randperm(len(data), generator=gen).tolist()
    for i in range(0, len(order) - bs + 1, bs):
        yield [data[j] for j in order[i:i + bs]]


def collate(items):
    S = max(len(s) for s, _ in items)
    T = max(len(t) for _, t in items) + 1
    src = torch.full((len(items), S), PAD, dtype=torch.long)
    tin = torch.full((len(items), T), PAD, dtype=torch.long)
    tout = torch.full((len(items), T), PAD, dtype=torch.long)
    for i, (s, t) in enumerate(items):
        src[i, :len(s)] = torch.tensor(s)
        tin[i, :len(t) + 1] = torch.tensor([BOS] + t)
        tout[i, :len(t) + 1] = torch.tensor(t + [EOS])
    return src, src == PAD, tin, tout


# ---- decoding: the LSTM carries its state; the Transformer keeps a KV cache (what a PyTorch user writes for
# generation: nn.Transformer has none, and re-running the prefix every step makes decoding quadratic, slower than
# training). The cached step is nn.TransformerDecoderLayer's math on one position; --check-batched compares it with
# the uncached decoder (CACHE False) ----
CACHE = True


def _heads(x, h):  # (n, T, d) -> (n, h, T, d/h)
    n, T, d = x.shape
    return x.view(n, T, h, d // h).transpose(1, 2)


def _attend(q, k, v, mha, key_pad=None):
    """q (n, 1, d), k / v (n, T, d) already projected: softmax(q k^T / sqrt(dh)) v through mha's out_proj."""
    h = mha.num_heads
    qh, kh, vh = _heads(q, h), _heads(k, h), _heads(v, h)
    a = qh @ kh.transpose(-1, -2) / math.sqrt(qh.shape[-1])
    if key_pad is not None:
        a = a.masked_fill(key_pad[:, None, None, :], float("-inf"))
    o = (a.softmax(-1) @ vh).transpose(1, 2).reshape(q.shape)
    return mha.out_proj(o)


def nmt_step(model, mem, pad, tok, cache):
    """One decoder position for rows tok (n,). cache: None, or a tuple of tensors with rows in dim 1 (as the LSTM
    state, so callers select rows alike): per layer the self-attention keys and values so far (T, n, d), then per
    layer the cross-attention keys and values of mem (S, n, d). Returns log-probabilities (n, V) and the cache."""
    layers = model.tf.decoder.layers
    nl, d = len(layers), mem.shape[-1]
    if cache is None:
        cross = []
        for L in layers:
            W, b = L.multihead_attn.in_proj_weight, L.multihead_attn.in_proj_bias
            cross += [F.linear(mem, W[d:2 * d], b[d:2 * d]).transpose(0, 1),
                      F.linear(mem, W[2 * d:], b[2 * d:]).transpose(0, 1)]
        self_kv, t = [None] * (2 * nl), 0
    else:
        self_kv, cross, t = list(cache[:2 * nl]), list(cache[2 * nl:]), cache[0].shape[0]
    x = model.tgt_emb(tok)[:, None] * model.scale + model.pe[t]

    def sa(L, i, y):
        W, b = L.self_attn.in_proj_weight, L.self_attn.in_proj_bias
        q, k, v = F.linear(y, W[:d], b[:d]), F.linear(y, W[d:2 * d], b[d:2 * d]), F.linear(y, W[2 * d:], b[2 * d:])
        k, v = k.transpose(0, 1), v.transpose(0, 1)
        if self_kv[2 * i] is not None:
            k, v = torch.cat([self_kv[2 * i], k]), torch.cat([self_kv[2 * i + 1], v])
        self_kv[2 * i], self_kv[2 * i + 1] = k, v
        return _attend(q, k.transpose(0, 1), v.transpose(0, 1), L.self_attn)

    def ca(L, i, y):
        W, b = L.multihead_attn.in_proj_weight, L.multihead_attn.in_proj_bias
        return _attend(F.linear(y, W[:d], b[:d]), cross[2 * i].transpose(0, 1), cross[2 * i + 1].transpose(0, 1),
                       L.multihead_attn, pad)

    for i, L in enumerate(layers):
        if L.norm_first:
            x = x + sa(L, i, L.norm1(x))
            x = x + ca(L, i, L.norm2(x))
            x = x + L._ff_block(L.norm3(x))
        else:
            x = L.norm1(x + sa(L, i, x))
            x = L.norm2(x + ca(L, i, x))
            x = L.norm3(x + L._ff_block(x))
    if model.tf.decoder.norm is not None:
        x = model.tf.decoder.norm(x)
    return F.log_softmax(model.gen(x[:, 0]), -1), tuple(self_kv + cross)


def cache_error(model, src_ids, tgt):
    """Largest |difference| between nmt_step's log-probabilities and the full decoder's along the target tgt: the
    cache checked directly (an undertrained model's translations barely depend on it)."""
    mem, pad, _ = encode_one(model, src_ids)
    prefix = torch.tensor([[BOS] + tgt])
    full = F.log_softmax(model.decode(mem, pad, prefix), -1)[0]
    state, err = None, 0.0
    for t in range(prefix.shape[1]):
        lp, state = nmt_step(model, mem, pad, prefix[:, t], state)
        err = max(err, (lp[0] - full[t]).abs().max().item())
    return err


def step_logprobs(model, mem, pad, prefix, state=None):
    if isinstance(model, NMT):
        if CACHE:
            return nmt_step(model, mem, pad, prefix[:, -1], state)
        return F.log_softmax(model.decode(mem, pad, prefix)[:, -1], -1), None
    logits, state = model.decode_steps(mem, pad, prefix[:, -1:], state)
    return F.log_softmax(logits[:, -1], -1), state


def encode_one(model, src_ids):
    src = torch.tensor([src_ids])
    pad = src == PAD
    if isinstance(model, NMT):
        return model.encode(src, pad), pad, None
    henc, state = model.encode(src, pad)
    return henc, pad, state


def ban(lp):
    lp[:, PAD] = -float("inf")
    lp[:, BOS] = -float("inf")
    return lp


def greedy(model, src_ids, max_len):
    return sample(model, src_ids, max_len, 1, None)[0]


def sample(model, src_ids, max_len, n, temperature, gen=None):
    mem, pad, state = encode_one(model, src_ids)
    if n > 1:
        mem, pad = mem.expand(n, -1, -1), pad.expand(n, -1)
        if state is not None:
            state = tuple(s.expand(-1, n, -1).contiguous() for s in state)
    prefix = torch.full((n, 1), BOS, dtype=torch.long)
    out, done = [[] for _ in range(n)], [False] * n
    for _ in range(max_len):
        lp, state = step_logprobs(model, mem, pad, prefix, state)
        lp = ban(lp)
        if temperature is None:
            nxt = lp.argmax(-1)
        else:
            nxt = torch.multinomial(F.softmax(lp / temperature, -1), 1, generator=gen)[:, 0]
        for i in range(n):
            if not done[i]:
                out[i].append(int(nxt[i]))
                done[i] = int(nxt[i]) == EOS
        if all(done):
            break
        prefix = torch.cat([prefix, nxt[:, None]], 1)
    return [[t for t in o if t != EOS] for o in out]


def beam(model, src_ids, max_len, k, alpha):
    mem, pad, state = encode_one(model, src_ids)
    lpen = lambda n: ((5 + n) / 6) ** alpha  # noqa: E731
    live = [([], 0.0)]
    fin = []
    for t in range(max_len):
        n = len(live)
        prefix = torch.tensor([[BOS] + h for h, _ in live])
        m, p = mem.expand(n, -1, -1), pad.expand(n, -1)
        # The Transformer re-runs its prefix (nn.Transformer has no cache); the LSTM carries each hypothesis's state.
        lp, state = step_logprobs(model, m, p, prefix, state)
        lp = ban(lp)
        scores = (torch.tensor([s for _, s in live])[:, None] + lp).view(-1)
        top = scores.topk(min(2 * k, scores.numel()))
        nxt, parents = [], []
        V = lp.shape[1]
        for s, idx in zip(top.values.tolist(), top.indices.tolist()):
            r, v = divmod(idx, V)
            if v == EOS:
                fin.append((live[r][0], s / lpen(t + 1)))
            elif len(nxt) < k:
                nxt.append((live[r][0] + [v], s))
                parents.append(r)
            if len(nxt) == k:
                break
        live = nxt
        if state is not None and parents:
            state = tuple(x[:, parents].contiguous() for x in state)
        if len(fin) >= 1:
            worst = sorted((s for _, s in fin), reverse=True)[0]
            if max(s for _, s in live) / lpen(max_len) <= worst:
                live = []
                break
    fin += [(h, s / lpen(len(h))) for h, s in live]
    return max(fin, key=lambda x: x[1])[0]


# ---- batched decoding: the same searches over many sentences at once (padded sources, one forward per step for all
# live rows), so that decoding the test set does not take longer than training. A sentence's result equals the
# one-sentence functions above up to float rounding (translation.py --check-batched compares them) ----
def encode_batch(model, srcs):
    src = torch.full((len(srcs), max(len(s) for s in srcs)), PAD, dtype=torch.long)
    for i, s in enumerate(srcs):
        src[i, :len(s)] = torch.tensor(s)
    pad = src == PAD
    if isinstance(model, NMT):
        return model.encode(src, pad), pad, None
    henc, state = model.encode(src, pad)
    return henc, pad, state


def greedy_batch(model, srcs, max_len):
    mem, pad, state = encode_batch(model, srcs)
    n = len(srcs)
    out = [[] for _ in range(n)]
    rows = torch.arange(n)  # the sentences still decoding; finished ones leave the batch
    prefix = torch.full((n, 1), BOS, dtype=torch.long)
    for _ in range(max_len):
        lp, state = step_logprobs(model, mem, pad, prefix, state)
        nxt = ban(lp).argmax(-1)
        keep = []
        for j, r in enumerate(rows.tolist()):
            v = int(nxt[j])
            if v != EOS:
                out[r].append(v)
                keep.append(j)
        if not keep:
            break
        k = torch.tensor(keep)
        rows, mem, pad = rows[k], mem[k], pad[k]
        prefix = torch.cat([prefix, nxt[:, None]], 1)[k]
        if state is not None:
            state = tuple(x[:, k].contiguous() for x in state)
    return out


def beam_batch(model, srcs, max_len, k, alpha):
    mem0, pad0, state = encode_batch(model, srcs)
    lpen = lambda n: ((5 + n) / 6) ** alpha  # noqa: E731
    B = len(srcs)
    live = [[([], 0.0)] for _ in range(B)]
    fin = [[] for _ in range(B)]
    active = list(range(B))
    # One row per live hypothesis of each active sentence, in that order; state (LSTM, KV cache) follows the rows.
    for t in range(max_len):
        idx = torch.tensor([b for b in active for _ in live[b]])
        prefix = torch.tensor([[BOS] + h for b in active for h, _ in live[b]])
        lp, state = step_logprobs(model, mem0[idx], pad0[idx], prefix, state)
        lp = ban(lp)
        V = lp.shape[1]
        still, parents, row0 = [], [], 0
        for b in active:
            n = len(live[b])
            scores = (torch.tensor([s for _, s in live[b]])[:, None] + lp[row0:row0 + n]).view(-1)
            top = scores.topk(min(2 * k, scores.numel()))
            nxt = []
            for s, i in zip(top.values.tolist(), top.indices.tolist()):
                r, v = divmod(i, V)
                if v == EOS:
                    fin[b].append((live[b][r][0], s / lpen(t + 1)))
                elif len(nxt) < k:
                    nxt.append((live[b][r][0] + [v], s))
                    parents.append(row0 + r)
                if len(nxt) == k:
                    break
            row0 += n
            live[b] = nxt
            if not nxt or fin[b] and max(s for _, s in nxt) / lpen(max_len) <= max(s for _, s in fin[b]):
                parents = parents[:len(parents) - len(nxt)]
                live[b] = []
            else:
                still.append(b)
        active = still
        if not active:
            break
        if state is not None:
            state = tuple(x[:, parents].contiguous() for x in state)
    best = []
    for b in range(B):
        f = fin[b] + [(h, s / lpen(len(h))) for h, s in live[b]]
        best.append(max(f, key=lambda x: x[1])[0])
    return best


def decode_all(fn, srcs, group=64):
    """fn over srcs in groups of similar length (less padding), results in the input order."""
    order = sorted(range(len(srcs)), key=lambda i: len(srcs[i]))
    out = [None] * len(srcs)
    for g in range(0, len(order), group):
        part = order[g:g + group]
        for i, h in zip(part, fn([srcs[i] for i in part])):
            out[i] = h
    return out


# ---- BLEU ----
def ngrams(toks, n):
    return collections.Counter(tuple(toks[i:i + n]) for i in range(len(toks) - n + 1))


def bleu_stats(hyp, ref):
    st = []
    for n in range(1, 5):
        h, r = ngrams(hyp, n), ngrams(ref, n)
        st.append((sum(min(c, r[g]) for g, c in h.items()), max(len(hyp) - n + 1, 0)))
    return st


def bleu_from(stats, hl, rl, effective=False):
    logp, k, used = 0.0, 1, 0
    for m, t in stats:
        if t == 0:
            if effective:
                continue
            return 0.0
        used += 1
        if m == 0:
            k *= 2
            logp += math.log(100.0 / (k * t))
        else:
            logp += math.log(100.0 * m / t)
    if used == 0:
        return 0.0
    bp = 1.0 if hl > rl else (math.exp(1 - rl / hl) if hl > 0 else 0.0)
    return bp * math.exp(logp / used)


def sentence_bleu(hyp, ref):
    return bleu_from(bleu_stats(hyp, ref), len(hyp), len(ref), effective=True)


def corpus_bleu(hyps, refs, qkv=None):
    """hyps, refs: token lists (word runs) or detokenized strings (bpe runs)."""
    if isinstance(hyps[0] if hyps else "", str):
        hyps, refs = [h.split() for h in hyps], [r.split() for r in refs]
    if qkv:
        with tempfile.TemporaryDirectory() as d:
            hp, rp = os.path.join(d, "hyp"), os.path.join(d, "ref")
            open(hp, "w").write("\n".join(" ".join(h) for h in hyps) + "\n")
            open(rp, "w").write("\n".join(" ".join(r) for r in refs) + "\n")
            out = subprocess.run([qkv, "bleu", "-r", rp, "-i", hp, "--json"], capture_output=True, text=True, check=True)
            return json.loads(out.stdout)["score"]
    try:
        import sacrebleu
        return sacrebleu.corpus_bleu([" ".join(h) for h in hyps], [[" ".join(r) for r in refs]]).score
    except ImportError:
        tot = [[0, 0] for _ in range(4)]
        hl = rl = 0
        for h, r in zip(hyps, refs):
            for i, (m, t) in enumerate(bleu_stats(h, r)):
                tot[i][0] += m
                tot[i][1] += t
            hl, rl = hl + len(h), rl + len(r)
        return bleu_from([tuple(x) for x in tot], hl, rl)


def mbr(model, src_ids, max_len, n, gen, words=lambda ids: ids):
    """words: a candidate's tokens for sentence BLEU (word runs: the ids; bpe runs: the decoded text's words)."""
    cands = sample(model, src_ids, max_len, n, 1.0, gen)
    toks = [words(c) for c in cands]
    best, best_e = 0, -1.0
    for i, c in enumerate(toks):
        e = sum(sentence_bleu(c, o) for j, o in enumerate(toks) if j != i) / max(len(toks) - 1, 1)
        if e > best_e + 1e-12:
            best, best_e = i, e
    return cands[best]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=os.path.join(HERE, "..", "..", "..", "shared", "data", "translation"))
    ap.add_argument("--config", default=os.path.join(HERE, "translation.json"))
    ap.add_argument("--model", choices=["transformer", "lstm"], default="transformer")
    ap.add_argument("--steps", type=int, default=0, help="override train.steps")
    ap.add_argument("--limit", type=int, default=0, help="test sentences to decode (0: all)")
    ap.add_argument("--mbr-limit", type=int, default=200, help="test sentences for MBR (slow)")
    ap.add_argument("--mbr-samples", type=int, default=16)
    ap.add_argument("--qkv", default="", help="qkv binary for sacrebleu-compatible BLEU (and bpe encoding)")
    ap.add_argument("--run", default="", help="the qkv run whose trained BPE files to use (bpe data)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--decode-max-len", type=int, default=0, help="override decode.max_len (smoke tests)")
    ap.add_argument("--seconds", type=float, default=0,
                    help="equal wall-clock: train this many seconds (evaluations not counted) instead of --steps")
    ap.add_argument("--eval-every", type=int, default=0, help="override eval.every (steps between dev evaluations)")
    ap.add_argument("--curve-sentences", type=int, default=200,
                    help="dev sentences decoded greedily for the BLEU curve at each evaluation (qkv's "
                         "eval.bleu_max_examples)")
    ap.add_argument("--check-batched", action="store_true",
                    help="decode again one sentence at a time, without the KV cache (MBR: from the same random draws); "
                         "exit 1 unless every translation is the same")
    ap.add_argument("--curve", default="", help="write the dev curve here (JSON lines in qkv's log format)")
    a = ap.parse_args()
    global PAD, BOS, EOS, CACHE
    torch.set_num_threads(a.threads)
    cfg = json.load(open(a.config))
    m = cfg["models"][a.model]
    d, tr = cfg["data"], cfg["train"]
    steps = a.steps or (10 ** 9 if a.seconds else tr["steps"])
    torch.manual_seed(cfg.get("seed", 1))
    bpe = d.get("tokenizer") == "bpe"
    if bpe and not (a.qkv and a.run):
        sys.exit("translation.py: the config uses a bpe tokenizer: pass --qkv BIN and --run DIR (a qkv run trained "
                 "with it, whose vocab.json / merges.txt give the ids)")
    tmp = tempfile.TemporaryDirectory()
    train = read_tsv(os.path.join(a.data, "train.tsv"), split=not bpe)
    test = read_tsv(os.path.join(a.data, "test.tsv"), split=not bpe)
    test = test[:a.limit] if a.limit else test
    L = d["max_len"]
    if bpe:
        sb = QkvBpe(a.qkv, a.run, "", tmp.name)
        tb = sb if d.get("shared_vocab") else QkvBpe(a.qkv, a.run, "tgt_", tmp.name)
        PAD, BOS, EOS = tb.pad, tb.bos, tb.eos
        if (sb.pad, sb.bos, sb.eos) != (PAD, BOS, EOS):
            sys.exit("translation.py: separate BPE vocabularies of different sizes are not supported here")
        vs, vt = sb.size, tb.size
        data = list(zip(sb.encode([s for s, _ in train], L), tb.encode([t for _, t in train], L)))
        srcs = [x or [PAD] for x in sb.encode([s for s, _ in test], L)]
        detok, words = tb.decode, lambda ids: tb.decode(ids).split()
    else:
        sstoi, _ = build_vocab([s for s, _ in train], d["min_freq"], d["max_vocab"])
        tstoi, titos = build_vocab([t for _, t in train], d["min_freq"], d["max_vocab"])
        vs, vt = len(sstoi), len(tstoi)
        data = [(encode(s, sstoi, L), encode(t, tstoi, L)) for s, t in train]
        srcs = [encode(s, sstoi, L) or [UNK] for s, _ in test]
        detok, words = (lambda ids: [titos[i] for i in ids]), (lambda ids: ids)
    data = [x for x in data if x[0]]
    model = (NMT if a.model == "transformer" else LSTMSeq2Seq)(vs, vt, m, m.get("max_len", L + 2))
    o = tr["optimizer"]
    opt = torch.optim.Adam(model.parameters(), lr=o["lr"], betas=(o["beta1"], o["beta2"]), eps=o["eps"])
    gen = torch.Generator().manual_seed(cfg.get("seed", 1))
    dev = read_tsv(os.path.join(a.data, "dev.tsv"), split=not bpe)
    if bpe:
        dev_data = list(zip(sb.encode([x for x, _ in dev], L), tb.encode([y for _, y in dev], L)))
    else:
        dev_data = [(encode(x, sstoi, L), encode(y, tstoi, L)) for x, y in dev]
    dev_data = [x for x in dev_data if x[0]]
    n_bleu = a.curve_sentences
    curve = open(a.curve, "w") if a.curve else None
    every = a.eval_every or cfg["eval"]["every"]

    def dev_loss():
        total, count = 0.0, 0
        for i in range(0, len(dev_data), 64):
            src, pad, tin, tout = collate(dev_data[i:i + 64])
            total += F.cross_entropy(model(src, pad, tin).reshape(-1, vt), tout.reshape(-1), ignore_index=PAD,
                                     reduction="sum").item()
            count += int((tout != PAD).sum())
        return total / count

    best = {"loss": None, "state": None}

    def evaluate(step, trained):
        """Dev loss (picks the best checkpoint, as qkv's eval.metric auto = loss) and greedy BLEU of the first
        curve_sentences dev sentences (qkv's eval.bleu), as one record in qkv's log format."""
        model.eval()
        with torch.no_grad():
            loss = dev_loss()
            rec = {"kind": "eval", "split": "dev", "step": step, "loss": loss}
            if n_bleu:
                hyps = [detok(h) for h in decode_all(lambda g: greedy_batch(model, g, cfg["decode"]["max_len"]),
                                                     [x for x, _ in dev_data[:n_bleu]])]
                refs = [detok(y) for _, y in dev_data[:n_bleu]]
                rec["bleu"] = corpus_bleu(hyps, refs, a.qkv or None)
        model.train()
        rec["train_seconds"] = trained
        if curve:
            curve.write(json.dumps(rec) + "\n")
            curve.flush()
        if best["loss"] is None or loss < best["loss"]:
            best["loss"], best["state"] = loss, {k: v.clone() for k, v in model.state_dict().items()}

    # The clock counts training only (evaluations paused), as qkv's train.max_seconds does.
    trained, t_mark, step, loss_v = 0.0, time.time(), 0, float("nan")
    model.train()
    out_of_time = False
    while step < steps and not out_of_time:
        for items in batches(data, tr["batch_size"], gen):
            if a.seconds and trained + time.time() - t_mark >= a.seconds:
                out_of_time = True
                break
            src, pad, tin, tout = collate(items)
            loss = F.cross_entropy(model(src, pad, tin).reshape(-1, vt), tout.reshape(-1), ignore_index=PAD)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            if tr.get("clip_norm"):
                nn.utils.clip_grad_norm_(model.parameters(), tr["clip_norm"])
            opt.step()
            step, loss_v = step + 1, loss.item()
            if step % every == 0 or step == steps:
                trained += time.time() - t_mark
                evaluate(step, trained)
                t_mark = time.time()
            if step >= steps:
                break
    if step % every and step != steps:  # stopped by the clock: score the last steps too, as qkv does
        trained += time.time() - t_mark
        evaluate(step, trained)
    if best["state"] is not None:
        model.load_state_dict(best["state"])
    steps = step
    train_s = trained
    model.eval()
    refs = [t for _, t in test]
    dec = cfg["decode"]
    if a.decode_max_len:
        dec["max_len"] = a.decode_max_len
    base = {"bench": "translation_quality", "engine": "torch", "model": a.model, "steps": steps,
            "train_s": round(train_s, 1), "final_loss": round(loss_v, 4), "test_sentences": len(test)}
    sgen = torch.Generator().manual_seed(cfg.get("seed", 1))
    with torch.no_grad():
        for mode in ("greedy", "beam", "mbr"):
            n = len(srcs) if mode != "mbr" else min(len(srcs), a.mbr_limit)
            t1 = time.time()
            if mode == "greedy":
                ids = decode_all(lambda g: greedy_batch(model, g, dec["max_len"]), srcs[:n])
            elif mode == "beam":
                ids = decode_all(lambda g: beam_batch(model, g, dec["max_len"], dec["beam"], dec["alpha"]), srcs[:n],
                                 group=16)
            else:
                sgen_start = sgen.get_state()
                ids = [mbr(model, s, dec["max_len"], a.mbr_samples, sgen, words) for s in srcs[:n]]
            if a.check_batched:  # one sentence at a time (MBR: the same draws), without the KV cache: same output
                CACHE = False
                if mode == "mbr":
                    g = torch.Generator()
                    g.set_state(sgen_start)
                    one = [mbr(model, s, dec["max_len"], a.mbr_samples, g, words) for s in srcs[:n]]
                else:
                    one = [greedy(model, s, dec["max_len"]) if mode == "greedy" else
                           beam(model, s, dec["max_len"], dec["beam"], dec["alpha"]) for s in srcs[:n]]
                CACHE = True
                same = sum(x == y for x, y in zip(ids, one))
                err = max(cache_error(model, s, h + [EOS]) for s, h in zip(srcs[:n], ids)) \
                    if isinstance(model, NMT) and mode == "greedy" else 0.0
                print(json.dumps({"check_batched": mode, "same": same, "of": n, "cache_max_abs_err": err}),
                      file=sys.stderr, flush=True)
                if same < n or err > 1e-4:
                    sys.exit("translation.py: batched or cached %s decoding differs from one sentence at a time "
                             "(%d of %d the same, cache error %.3g)" % (mode, same, n, err))
            hyps = [detok(x) for x in ids]
            row = dict(base, decode=mode if mode != "beam" else "beam%d" % dec["beam"], sentences=n,
                       bleu=round(corpus_bleu(hyps, refs[:n], a.qkv or None), 2),
                       decode_s=round(time.time() - t1, 1))
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    sys.exit(main())
