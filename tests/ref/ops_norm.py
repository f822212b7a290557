"""Fixtures for tests/test_ops_norm.c: softmax, log_softmax, layer_norm and dropout (p = 0 and eval mode only:
PyTorch's dropout RNG differs from qkv's Philox stream, so random masks cannot be compared)."""
import torch
import torch.nn.functional as F
from fixture import Fixture

fx = Fixture("ops_norm", seed=3)

x = fx.rand(3, 4, 7, lo=-3.0, hi=3.0)
fx.case("softmax_last", lambda t: F.softmax(t, dim=-1), [x])
fx.case("softmax_axis1", lambda t: F.softmax(t, dim=1), [x])
fx.case("softmax_axis0", lambda t: F.softmax(t, dim=0), [x])
fx.case("softmax_transposed", lambda t: F.softmax(t.transpose(0, 2), dim=-1), [x])
fx.case("log_softmax_last", lambda t: F.log_softmax(t, dim=-1), [x])
fx.case("log_softmax_axis1", lambda t: F.log_softmax(t, dim=-2), [x])
fx.case("log_softmax_transposed", lambda t: F.log_softmax(t.transpose(0, 2), dim=0), [x])
fx.case("softmax_long_row", lambda t: F.softmax(t, dim=-1), [fx.rand(3, 300, lo=-8.0, hi=8.0)])
extreme = torch.tensor([[1000.0, 0.0, -1000.0], [-1e4, 1e4, 0.0], [5.0, 5.0, 5.0]])
fx.case("softmax_extreme", lambda t: F.softmax(t, dim=-1), [extreme])
fx.case("log_softmax_extreme", lambda t: F.log_softmax(t, dim=-1), [extreme])

D = 16
h = fx.rand(4, 6, D, lo=-2.0, hi=2.0)
gamma = fx.rand(D, lo=0.5, hi=1.5)
beta = fx.rand(D)
fx.case("layer_norm", lambda t, g, b: F.layer_norm(t, [D], g, b, 1e-5), [h, gamma, beta])
fx.case("layer_norm_plain", lambda t: F.layer_norm(t, [D], None, None, 1e-5), [h])
fx.case("layer_norm_gamma", lambda t, g: F.layer_norm(t, [D], g, None, 1e-6), [h, gamma])
fx.case("layer_norm_beta", lambda t, b: F.layer_norm(t, [D], None, b, 1e-5), [h, beta])
# Transposed input: normalise over what was axis 0.
h2 = fx.rand(5, 3, 2)
fx.case("layer_norm_transposed", lambda t, g, b: F.layer_norm(t.transpose(0, 2), [5], g, b, 1e-5),
        [h2, fx.rand(5, lo=0.5, hi=1.5), fx.rand(5)])
# Large offset, small spread: E[x^2] - E[x]^2 loses every digit here, and even torch's float32 kernel misses the
# exact answer by more than the tolerance, so the reference is computed in float64 (rounded to float32 at the end).
offset = fx.rand(3, 100, lo=-0.01, hi=0.01) + 50.0
fx.case("layer_norm_offset",
        lambda t, g, b: F.layer_norm(t.double(), [100], g.double(), b.double(), 1e-5).float(),
        [offset, fx.rand(100, lo=0.5, hi=1.5), fx.rand(100)])
fx.case("layer_norm_wide", lambda t, g, b: F.layer_norm(t, [200], g, b, 1e-5),
        [fx.rand(12, 200), fx.rand(200, lo=0.5, hi=1.5), fx.rand(200)])

d = fx.rand(5, 6)
fx.case("dropout_p0", lambda t: F.dropout(t, p=0.0, training=True), [d])
fx.case("dropout_eval", lambda t: F.dropout(t, p=0.5, training=False), [d])
fx.save()
