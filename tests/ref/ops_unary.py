"""Fixtures for tests/test_ops_unary.c: unary activations and reductions."""
import torch
import torch.nn.functional as F
from fixture import Fixture

fx = Fixture("ops_unary", seed=2)

x = fx.rand(3, 5, 7, lo=-3.0, hi=3.0)
fx.case("relu", F.relu, [x])
fx.case("gelu", F.gelu, [x])
fx.case("gelu_tanh", lambda t: F.gelu(t, approximate="tanh"), [x])
fx.case("tanh", torch.tanh, [x])
fx.case("sigmoid", torch.sigmoid, [x])
fx.case("exp", torch.exp, [x])
pos = fx.rand(4, 6, lo=0.1, hi=4.0)
fx.case("log", torch.log, [pos])
fx.case("sqrt", torch.sqrt, [pos])
# Tails: gelu and sigmoid far from 0, where naive formulas cancel or overflow.
tails = torch.tensor([-10.0, -7.5, -5.0, -3.0, -1e-3, 0.0, 1e-3, 3.0, 5.0, 7.5, 10.0])
fx.case("gelu_tails", F.gelu, [tails])
fx.case("gelu_tanh_tails", lambda t: F.gelu(t, approximate="tanh"), [tails])
fx.case("sigmoid_tails", torch.sigmoid, [tails * 5])
# Non-contiguous input: the C side transposes the same way.
fx.case("gelu_transposed", lambda t: F.gelu(t.transpose(0, 2)), [x])

r = fx.rand(2, 3, 4, 5)
fx.case("sum_axis1_keep", lambda t: t.sum(dim=1, keepdim=True), [r])
fx.case("sum_last", lambda t: t.sum(dim=-1), [r])
fx.case("mean_axis0", lambda t: t.mean(dim=0), [r])
fx.case("mean_last_keep", lambda t: t.mean(dim=-1, keepdim=True), [r])
fx.case("max_axis2", lambda t: t.max(dim=2).values, [r])
fx.case("max_last_keep", lambda t: t.max(dim=-1, keepdim=True).values, [r])
fx.case("sum_transposed", lambda t: t.transpose(1, 3).sum(dim=1), [r])
# fixture.py stores 0-d tensors as [1] (and cannot draw a 0-d upstream gradient): both sides reshape to [1].
fx.case("sum_all", lambda t: t.sum().reshape(1), [r])
fx.case("mean_all", lambda t: t.mean().reshape(1), [r])
big = fx.rand(257, 33)
fx.case("sum_all_big", lambda t: t.sum().reshape(1), [big])
fx.case("sum_rows_long", lambda t: t.sum(dim=-1), [fx.rand(9, 70)])
fx.save()
