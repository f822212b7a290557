"""Fixtures for tests/test_reversible.c: a stack of reversible residual blocks (include/qkv/nn_reversible.h),
y1 = x1 + f(x2), y2 = x2 + g(y1) on the two halves of the last axis, f and g small feed-forwards
tanh(x W1^T + b1) W2^T. PyTorch computes it the ordinary way (keeping every activation); qkv reconstructs the inputs
from the outputs in its backward, so equal gradients check the reconstruction end to end."""
import torch
from fixture import Fixture


def ff(x, w1, b1, w2):
    return torch.tanh(x @ w1.t() + b1) @ w2.t()


def stack(x, *w):
    d = x.shape[-1] // 2
    x1, x2 = x[..., :d], x[..., d:]
    for b in range(len(w) // 6):
        f, g = w[6 * b:6 * b + 3], w[6 * b + 3:6 * b + 6]
        x1 = x1 + ff(x2, *f)
        x2 = x2 + ff(x1, *g)
    return torch.cat([x1, x2], dim=-1)


fx = Fixture("reversible", seed=31)
d, h = 4, 6
for name, n in (("one_block", 1), ("two_blocks", 2)):
    weights = []
    for _ in range(2 * n):
        weights += [fx.rand(h, d, lo=-0.6, hi=0.6), fx.rand(h, lo=-0.2, hi=0.2), fx.rand(d, h, lo=-0.6, hi=0.6)]
    fx.case(name, stack, [fx.rand(2, 5, 2 * d)] + weights)
fx.save()
