"""Fixtures for tests/test_ops_conv.c: qkv_conv1d (channels last, torch's weight layout) against
torch.nn.functional.conv1d on the transposed input, and max-over-time pooling over unpadded steps (qkv_nn_masked_max)
against masked_fill(-inf) + max. Run: /usr/bin/python3 tests/ref/ops_conv.py"""
import torch
from fixture import Fixture

F = torch.nn.functional


def conv(x, w, b=None, padding=0):
    return F.conv1d(x.transpose(1, 2), w, b, padding=padding).transpose(1, 2)


def masked_max(x, pad):
    return x.masked_fill(pad.bool()[:, :, None], float("-inf")).max(dim=1).values


fx = Fixture("ops_conv", seed=31)
fx.case("valid", lambda x, w, b: conv(x, w, b), [fx.rand(3, 7, 4), fx.rand(5, 4, 3), fx.rand(5)])
fx.case("padded", lambda x, w, b: conv(x, w, b, padding=2), [fx.rand(2, 6, 3), fx.rand(4, 3, 3), fx.rand(4)])
fx.case("wide_nobias", lambda x, w: conv(x, w, None, padding=4), [fx.rand(2, 3, 6), fx.rand(3, 6, 5)])
fx.case("one_row", lambda x, w, b: conv(x, w, b, padding=1), [fx.rand(1, 9, 2), fx.rand(6, 2, 1), fx.rand(6)])
fx.case("width_is_length", lambda x, w, b: conv(x, w, b), [fx.rand(4, 5, 3), fx.rand(2, 3, 5), fx.rand(2)])
pad = torch.tensor([[0, 0, 0, 0, 0], [0, 0, 0, 1, 1], [1, 0, 0, 1, 0]], dtype=torch.int32)
fx.case("masked_max", masked_max, [fx.rand(3, 5, 4), pad])
fx.save()
