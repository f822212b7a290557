"""PyTorch reference of qkv's "t5" model type (tests/test_t5.c): T5 as Hugging Face's T5ForConditionalGeneration
computes it with tied embeddings (relative position bias from layer 0 of each stack shared by all its layers,
T5LayerNorm = RMS norm without bias, pre-norm, bias-free dense layers, unscaled attention logits, decoder output
times d_model^-0.5 before the tied output projection), written here with the same parameter names so the
state_dict loads into qkv by name. Dropout 0. Cases store the logits under teacher forcing and the masked
cross-entropy loss, with every parameter gradient.
Run: /usr/bin/python3 tests/ref/t5_model.py"""
import torch
import torch.nn.functional as F

from nn_common import Fixture, module_case
from t5_arch import T5


def randomise(fx, m):
    with torch.no_grad():
        for name, p in m.named_parameters():
            r = fx.rand(*p.shape) * 0.5
            if "layer_norm" in name:
                r = r + 1.0
            p.copy_(r)


fx = Fixture("t5_model", seed=26)
V, B, S, T = 23, 2, 12, 9
src = fx.randint(V, B, S, low=1)
pad = torch.zeros(B, S)
pad[1, 8:] = 1.0
tgt = fx.randint(V, B, T, low=1)
out = fx.randint(V, B, T, low=1)
tmask = torch.ones(B, T)
tmask[1, 6:] = 0.0

torch.manual_seed(0)
m = T5(V, 16, 2, 8, 24, 2, 2, 8, 10)
randomise(fx, m)
module_case(fx, "logits", m, lambda s, p, t: m(s, p, t), [src, pad, tgt], grad=[False, False, False])


def loss(s, p, t, o, w):
    logits = m(s, p, t)
    ce = F.cross_entropy(logits.reshape(-1, V), o.long().reshape(-1), reduction="none")
    return ((ce * w.reshape(-1)).sum() / w.sum()).reshape(1)


module_case(fx, "loss", m, loss, [src, pad, tgt, out, tmask], grad=[False] * 5)
# d_kv unlike d_model / H, 3 heads, one encoder layer.
m = T5(V, 12, 3, 5, 20, 1, 2, 16, 20)
randomise(fx, m)
module_case(fx, "logits_dkv", m, lambda s, p, t: m(s, p, t), [src, pad, tgt], grad=[False, False, False])
fx.save()
