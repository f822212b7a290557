"""PyTorch references for the translation models (tests/test_seq2seq.c): the LSTM encoder-decoder with dot /
general / additive attention, with and without input feeding, and the encoder-decoder Transformer (post- and
pre-norm), on padded sources. Every case stores the logits, the parameters (randomised) and every parameter gradient.
The modules generalise ../shared/bench/torch_ref.py's Seq2Seq and NMT with the same parameter names.
Run: /usr/bin/python3 tests/ref/seq2seq.py"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from nn_common import Fixture, module_case, randomise

fx = Fixture("seq2seq", seed=31)


class Score(nn.Module):
    """Names as qkv's score attention: W (general), W1 / W2 / v (additive, with biases)."""

    def __init__(self, kind, h):
        super().__init__()
        self.kind = kind
        if kind == "general":
            self.W = nn.Linear(h, h, bias=False)
        if kind == "additive":
            self.W1, self.W2, self.v = nn.Linear(h, h), nn.Linear(h, h), nn.Linear(h, 1)

    def forward(self, s, h, pad):  # s [B, T, H], h [B, S, H], pad [B, S]
        if self.kind == "dot":
            e = s @ h.transpose(1, 2)
        elif self.kind == "general":
            e = s @ self.W(h).transpose(1, 2)
        else:
            e = self.v(torch.tanh(self.W1(h)[:, None, :, :] + self.W2(s)[:, :, None, :])).squeeze(-1)
        a = e.masked_fill(pad.bool()[:, None, :], float("-inf")).softmax(-1)
        return a @ h, a


class LSTMSeq2Seq(nn.Module):
    def __init__(self, vs, vt, e, h, layers, kind, feed):
        super().__init__()
        self.feed, self.layers, self.h = feed, layers, h
        self.src_emb, self.tgt_emb = nn.Embedding(vs, e), nn.Embedding(vt, e)
        self.enc = nn.LSTM(e, h, layers, batch_first=True)
        self.dec = nn.LSTM(e + (h if feed else 0), h, layers, batch_first=True)
        self.attn = Score(kind, h)
        self.combine = nn.Linear(2 * h, h, bias=False)
        self.gen = nn.Linear(h, vt)

    def forward(self, src, pad, tgt):
        S = src.shape[1]
        lengths = (pad == 0).sum(1)
        packed = nn.utils.rnn.pack_padded_sequence(self.src_emb(src.long()), lengths, batch_first=True,
                                                   enforce_sorted=False)
        out, (hn, cn) = self.enc(packed)
        henc, _ = nn.utils.rnn.pad_packed_sequence(out, batch_first=True, total_length=S)
        xt = self.tgt_emb(tgt.long())
        if not self.feed:
            hdec, _ = self.dec(xt, (hn, cn))
            ctx, _ = self.attn(hdec, henc, pad)
            return self.gen(torch.tanh(self.combine(torch.cat([ctx, hdec], -1))))
        h, c = list(hn.unbind(0)), list(cn.unbind(0))
        feed = torch.zeros(src.shape[0], self.h)
        outs = []
        for t in range(xt.shape[1]):
            x = torch.cat([xt[:, t], feed], -1)
            for k in range(self.layers):
                g = (x @ getattr(self.dec, f"weight_ih_l{k}").T + getattr(self.dec, f"bias_ih_l{k}")
                     + h[k] @ getattr(self.dec, f"weight_hh_l{k}").T + getattr(self.dec, f"bias_hh_l{k}"))
                i, f, gg, o = g.chunk(4, -1)
                c[k] = torch.sigmoid(f) * c[k] + torch.sigmoid(i) * torch.tanh(gg)
                h[k] = torch.sigmoid(o) * torch.tanh(c[k])
                x = h[k]
            ctx, _ = self.attn(x[:, None], henc, pad)
            feed = torch.tanh(self.combine(torch.cat([ctx[:, 0], x], -1)))
            outs.append(feed)
        return self.gen(torch.stack(outs, 1))


def sinusoid(max_len, d):
    pe = torch.zeros(max_len, d)
    pos = torch.arange(max_len, dtype=torch.float32).unsqueeze(1)
    div = torch.exp(torch.arange(0, d, 2, dtype=torch.float32) * (-math.log(10000.0) / d))
    pe[:, 0::2] = torch.sin(pos * div)
    pe[:, 1::2] = torch.cos(pos * div)
    return pe


class NMT(nn.Module):
    def __init__(self, vs, vt, d, heads, ff, n_enc, n_dec, norm_first, act, max_len):
        super().__init__()
        self.src_emb, self.tgt_emb = nn.Embedding(vs, d), nn.Embedding(vt, d)
        self.register_buffer("pe", sinusoid(max_len, d))
        self.tf = nn.Transformer(d_model=d, nhead=heads, num_encoder_layers=n_enc, num_decoder_layers=n_dec,
                                 dim_feedforward=ff, dropout=0.0, activation=act, batch_first=True,
                                 norm_first=norm_first)
        self.gen = nn.Linear(d, vt)
        self.scale = math.sqrt(d)

    def forward(self, src, pad, tgt):
        S, T = src.shape[1], tgt.shape[1]
        xs = self.src_emb(src.long()) * self.scale + self.pe[:S]
        xt = self.tgt_emb(tgt.long()) * self.scale + self.pe[:T]
        causal = torch.triu(torch.full((T, T), float("-inf")), diagonal=1)
        y = self.tf(xs, xt, tgt_mask=causal, src_key_padding_mask=pad.bool(), memory_key_padding_mask=pad.bool())
        return self.gen(y)


VS, VT, B, S, T = 11, 13, 3, 5, 4
pad = torch.tensor([[0, 0, 0, 0, 0], [0, 0, 0, 1, 1], [0, 0, 0, 0, 1]], dtype=torch.int32)
for key, layers, kind, feed in [("lstm_dot", 1, "dot", False), ("lstm_general_feed", 2, "general", True),
                                ("lstm_additive", 1, "additive", False), ("lstm_dot_feed", 1, "dot", True)]:
    m = LSTMSeq2Seq(VS, VT, 6, 5, layers, kind, feed)
    randomise(fx, m)
    src, tgt = fx.randint(VS, B, S), fx.randint(VT, B, T)
    module_case(fx, key, m, lambda a, p, b, m=m: m(a, p, b), [src, pad, tgt])

for key, norm_first, act, n_enc, n_dec in [("tf_post", False, "relu", 2, 2), ("tf_pre", True, "gelu", 1, 2)]:
    m = NMT(VS, VT, 8, 2, 16, n_enc, n_dec, norm_first, act, 16)
    randomise(fx, m)
    src, tgt = fx.randint(VS, B, S), fx.randint(VT, B, T)
    module_case(fx, key, m, lambda a, p, b, m=m: m(a, p, b), [src, pad, tgt])
fx.save()
