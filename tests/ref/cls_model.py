"""PyTorch reference for the Transformer classifier (src/models/transformer_classifier.c, tests/test_cls_model.c).

The module tree below has exactly qkv's parameter names (embedding, pos, encoder.layers.<i>.self_attn.{q,k,v,out}_proj,
linear1/2, norm1/2, encoder.norm, classifier). Cases: pre-LN multi-head ReLU with sinusoidal positions, sqrt(d)
embedding scale and padded sentences; post-LN single-head GELU with learned positions, no scale, no padding.
Dropout 0, training mode. Stored besides the usual module case: each layer's attention weights "K.attn.<i>"
[B, H, T, T]. Run: /usr/bin/python3 tests/ref/cls_model.py"""
import math

import torch
from torch import nn

from nn_common import Fixture, module_case, randomise


def sinusoid(max_len, d):
    pe = torch.zeros(max_len, d)
    pos = torch.arange(max_len, dtype=torch.float32).unsqueeze(1)
    div = torch.exp(torch.arange(0, d, 2, dtype=torch.float32) * (-math.log(10000.0) / d))
    pe[:, 0::2] = torch.sin(pos * div)
    pe[:, 1::2] = torch.cos(pos * div)
    return pe


class SelfAttention(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.h = h
        self.q_proj, self.k_proj, self.v_proj, self.out_proj = (nn.Linear(d, d) for _ in range(4))
        self.weights = None
        self.drop = None  # optional attention-weight dropout (bench/quality/sentiment.py); off in the fixtures

    def forward(self, x, pad):
        B, T, d = x.shape
        dh = d // self.h
        q, k, v = (p(x).view(B, T, self.h, dh).transpose(1, 2) for p in (self.q_proj, self.k_proj, self.v_proj))
        s = q @ k.transpose(-2, -1) / math.sqrt(dh)
        if pad is not None:
            s = s.masked_fill(pad.bool()[:, None, None, :], float("-inf"))
        a = torch.softmax(s, dim=-1)
        self.weights = a.detach()
        if self.drop is not None:
            a = self.drop(a)
        return self.out_proj((a @ v).transpose(1, 2).reshape(B, T, d))


class Block(nn.Module):
    def __init__(self, d, h, f, act, pre):
        super().__init__()
        self.self_attn = SelfAttention(d, h)
        self.linear1, self.linear2 = nn.Linear(d, f), nn.Linear(f, d)
        self.norm1, self.norm2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.act, self.pre = act, pre

    def ff(self, x):
        return self.linear2(self.act(self.linear1(x)))

    def forward(self, x, pad):
        if self.pre:
            x = x + self.self_attn(self.norm1(x), pad)
            return x + self.ff(self.norm2(x))
        x = self.norm1(x + self.self_attn(x, pad))
        return self.norm2(x + self.ff(x))


class Positions(nn.Module):
    def __init__(self, max_len, d, learned):
        super().__init__()
        if learned:
            self.weight = nn.Parameter(torch.zeros(max_len, d))
        else:
            self.register_buffer("pe", sinusoid(max_len, d))

    def forward(self, x):
        table = self.weight if hasattr(self, "weight") else self.pe
        return x + table[: x.shape[1]]


class Encoder(nn.Module):
    def __init__(self, n, d, h, f, act, pre):
        super().__init__()
        self.layers = nn.ModuleList(Block(d, h, f, act, pre) for _ in range(n))
        if pre:
            self.norm = nn.LayerNorm(d)


class Classifier(nn.Module):
    def __init__(self, V, C, d, n, h, f, act, pre, learned_pos, scale, max_len=16):
        super().__init__()
        self.embedding = nn.Embedding(V, d)
        self.pos = Positions(max_len, d, learned_pos)
        self.encoder = Encoder(n, d, h, f, act, pre)
        self.classifier = nn.Linear(d, C)
        self.scale = math.sqrt(d) if scale else 1.0

    def forward(self, ids, pad=None):
        x = self.pos(self.embedding(ids.long()) * self.scale)
        for layer in self.encoder.layers:
            x = layer(x, pad)
        if hasattr(self.encoder, "norm"):
            x = self.encoder.norm(x)
        return torch.log_softmax(self.classifier(x[:, 0]), dim=-1)


def main():
    fx = Fixture("cls_model", seed=8)
    V, C, D, FF = 20, 3, 8, 16
    attn = lambda m: (lambda: {f"attn.{i}": l.self_attn.weights for i, l in enumerate(m.encoder.layers)})

    pre = Classifier(V, C, D, n=2, h=2, f=FF, act=torch.relu, pre=True, learned_pos=False, scale=True)
    randomise(fx, pre)
    ids = fx.randint(V, 3, 6)
    pad = torch.tensor([[0, 0, 0, 0, 0, 0], [0, 0, 0, 0, 1, 1], [0, 0, 1, 1, 1, 1]], dtype=torch.int32)
    module_case(fx, "pre_relu_padded", pre, lambda i, m: pre(i, m), [ids, pad], extra=attn(pre))

    post = Classifier(V, C, D, n=2, h=1, f=FF, act=nn.functional.gelu, pre=False, learned_pos=True, scale=False)
    randomise(fx, post)
    module_case(fx, "post_gelu_learned", post, lambda i: post(i), [fx.randint(V, 2, 5)], extra=attn(post))
    fx.save()


if __name__ == "__main__":
    main()
