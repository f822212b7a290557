"""PyTorch references for the basic nn layers (tests/test_nn_layers.c): Linear, Embedding with padding_idx,
LayerNorm, the tutorial's sinusoidal positional encoding, F.normalize and masked mean pooling.
Run: /usr/bin/python3 tests/ref/nn_layers.py"""
import math

import torch
import torch.nn.functional as F

from nn_common import Fixture, module_case, randomise

fx = Fixture("nn_layers", seed=11)

lin = torch.nn.Linear(5, 4)
randomise(fx, lin)
module_case(fx, "linear", lin, lambda x: lin(x), [fx.rand(2, 3, 5)])

lin_nb = torch.nn.Linear(6, 3, bias=False)
randomise(fx, lin_nb)
module_case(fx, "linear_nobias", lin_nb, lambda x: lin_nb(x), [fx.rand(4, 6)])

emb = torch.nn.Embedding(10, 4, padding_idx=1)
randomise(fx, emb)
with torch.no_grad():
    emb.weight[1] = fx.rand(4)  # a non-zero padding row: it is output as is but must get no gradient
ids = torch.tensor([[1, 3, 1, 9, 0], [2, 2, 1, 7, 3]], dtype=torch.int32)
module_case(fx, "embedding_pad", emb, lambda i: emb(i.long()), [ids])

emb2 = torch.nn.Embedding(7, 6)
randomise(fx, emb2)
module_case(fx, "embedding_scaled", emb2, lambda i: emb2(i.long()) * math.sqrt(6), [fx.randint(7, 3, 4)])

ln = torch.nn.LayerNorm(6)
randomise(fx, ln)
module_case(fx, "layer_norm", ln, lambda x: ln(x), [fx.rand(2, 3, 6, lo=-2, hi=2)])


def tutorial_pe(max_len, d_model):
    """PositionalEncoding of the PyTorch Transformer tutorial (stored [max_len, d_model])."""
    position = torch.arange(max_len).unsqueeze(1)
    div_term = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
    pe = torch.zeros(max_len, d_model)
    pe[:, 0::2] = torch.sin(position * div_term)
    pe[:, 1::2] = torch.cos(position * div_term)
    return pe


fx.tensors["posenc.pe"] = tutorial_pe(64, 16).numpy()

x = fx.rand(3, 5)
with torch.no_grad():
    x[1] = x[1] * 1e-7  # below eps: the clamped branch
fx.case("l2_normalize", lambda t: F.normalize(t, dim=-1, eps=1e-6), [x])

pad = torch.tensor([[0, 0, 0, 1], [0, 1, 1, 1], [1, 1, 1, 1]], dtype=torch.int32)


def masked_mean(t, m):
    keep = (m == 0).float().unsqueeze(-1)
    return (t * keep).sum(1) / keep.sum(1).clamp(min=1)


fx.case("masked_mean", masked_mean, [fx.rand(3, 4, 2), pad])
fx.save()
