"""PyTorch references for the attention modules (tests/test_nn_attention.c): torch.nn.MultiheadAttention (fused
in_proj, key padding, causal, cross, need_weights per head), separate q/k/v/out projections, and the score
functions dot / general / additive / scaled dot with padding. Run: /usr/bin/python3 tests/ref/nn_attention.py"""
import math

import torch
import torch.nn.functional as F

from nn_common import Fixture, module_case, randomise

fx = Fixture("nn_attention", seed=23)
E, H = 8, 2


def causal_mask(t):
    return torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1)


# ---- torch.nn.MultiheadAttention, fused in_proj ----
mha = torch.nn.MultiheadAttention(E, H, batch_first=True)
randomise(fx, mha)
pad = torch.tensor([[0, 0, 0, 0, 0], [0, 0, 0, 1, 1]], dtype=torch.int32)
x = fx.rand(2, 5, E)
module_case(fx, "mha_self_pad", mha, lambda t, m: mha(t, t, t, key_padding_mask=m.bool(), need_weights=False)[0],
            [x, pad],
            extra=lambda: {"weights": mha(x, x, x, key_padding_mask=pad.bool(), need_weights=True,
                                          average_attn_weights=False)[1]})

mha2 = torch.nn.MultiheadAttention(E, H, batch_first=True)
randomise(fx, mha2)
x = fx.rand(2, 4, E)
module_case(fx, "mha_causal", mha2, lambda t: mha2(t, t, t, attn_mask=causal_mask(4), need_weights=False)[0], [x],
            extra=lambda: {"weights": mha2(x, x, x, attn_mask=causal_mask(4), need_weights=True,
                                           average_attn_weights=False)[1]})

mha3 = torch.nn.MultiheadAttention(E, H, batch_first=True)
randomise(fx, mha3)
kpad = torch.tensor([[0, 0, 0, 0, 1, 1], [0, 0, 0, 0, 0, 0]], dtype=torch.int32)
module_case(fx, "mha_cross", mha3, lambda q, k, v, m: mha3(q, k, v, key_padding_mask=m.bool(), need_weights=False)[0],
            [fx.rand(2, 3, E), fx.rand(2, 6, E), fx.rand(2, 6, E), kpad])


# ---- separate q/k/v/out Linears (kdim, vdim differ from E) ----
class SeparateMHA(torch.nn.Module):
    def __init__(self, e, h, kdim, vdim):
        super().__init__()
        self.h = h
        self.q_proj, self.k_proj = torch.nn.Linear(e, e), torch.nn.Linear(kdim, e)
        self.v_proj, self.out_proj = torch.nn.Linear(vdim, e), torch.nn.Linear(e, e)

    def forward(self, q, k, v, pad):
        B, Tq, e = q.shape[0], q.shape[1], self.q_proj.out_features
        heads = lambda t: t.view(B, t.shape[1], self.h, e // self.h).transpose(1, 2)  # noqa: E731
        qh, kh, vh = heads(self.q_proj(q)), heads(self.k_proj(k)), heads(self.v_proj(v))
        s = qh @ kh.transpose(-1, -2) / math.sqrt(e // self.h)
        s = s.masked_fill(pad.bool()[:, None, None, :], float("-inf"))
        o = (s.softmax(-1) @ vh).transpose(1, 2).reshape(B, Tq, e)
        return self.out_proj(o)


sep = SeparateMHA(E, H, 6, 5)
randomise(fx, sep)
module_case(fx, "mha_separate", sep, lambda q, k, v, m: sep(q, k, v, m),
            [fx.rand(2, 3, E), fx.rand(2, 4, 6), fx.rand(2, 4, 5), torch.tensor([[0, 0, 0, 1], [0, 0, 0, 0]],
                                                                                dtype=torch.int32)])


# ---- score functions ----
class Score(torch.nn.Module):
    def __init__(self, kind, dq, dk, da=0, bias=False):
        super().__init__()
        self.kind, self.dk = kind, dk
        if kind == "general":
            self.W = torch.nn.Linear(dk, dq, bias=False)
        if kind == "additive":
            self.W1, self.W2 = torch.nn.Linear(dk, da, bias), torch.nn.Linear(dq, da, bias)
            self.v = torch.nn.Linear(da, 1, bias)

    def weights(self, s, h, pad):
        if self.kind in ("dot", "scaled_dot"):
            e = s @ h.transpose(1, 2)
            if self.kind == "scaled_dot":
                e = e / math.sqrt(self.dk)
        elif self.kind == "general":
            e = s @ self.W(h).transpose(1, 2)
        else:
            e = self.v(torch.tanh(self.W1(h)[:, None, :, :] + self.W2(s)[:, :, None, :])).squeeze(-1)
        return e.masked_fill(pad.bool()[:, None, :], float("-inf")).softmax(-1)

    def forward(self, s, h, pad):
        return self.weights(s, h, pad) @ h


spad = torch.tensor([[0, 0, 0, 0, 1], [0, 0, 0, 0, 0], [0, 1, 1, 1, 1]], dtype=torch.int32)
for kind, dq, da, bias in [("dot", 6, 0, False), ("general", 4, 0, False), ("additive", 4, 7, True),
                           ("scaled_dot", 6, 0, False)]:
    m = Score(kind, dq, 6, da, bias)
    randomise(fx, m)
    s, h = fx.rand(3, 2, dq), fx.rand(3, 5, 6)
    module_case(fx, "score_" + kind, m, lambda a, b, p, m=m: m(a, b, p), [s, h, spad],
                extra=lambda m=m, s=s, h=h: {"weights": m.weights(s, h, spad)})
fx.save()
