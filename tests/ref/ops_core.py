"""Fixtures for tests/test_ops_core.c: matmul, linear, elementwise broadcasting, shape ops."""
import torch
from fixture import Fixture

fx = Fixture("ops_core", seed=1)
fx.case("matmul_batched", lambda a, b: a @ b, [fx.rand(2, 3, 5, 4), fx.rand(2, 3, 4, 6)])
fx.case("matmul_broadcast", lambda a, b: a @ b, [fx.rand(1, 5, 4), fx.rand(3, 4, 2)])
fx.case("linear", torch.nn.functional.linear, [fx.rand(2, 7, 8), fx.rand(5, 8), fx.rand(5)])
fx.case("elementwise", lambda a, b: (a + b) * a / b - a, [fx.rand(2, 3, 4), fx.rand(3, 1, lo=0.5, hi=2.0)])
fx.case("shape", lambda x: torch.cat([x.permute(1, 2, 0)[1:4:2]] * 2, dim=-1), [fx.rand(3, 5, 4)])
fx.case("affine", lambda x: x * -1.5 + 0.25, [fx.rand(3, 4)])
fx.case("reshape_transpose", lambda x: x.transpose(0, 2).reshape(4, -1) * 2.0, [fx.rand(3, 2, 4)])
fx.case("stack_split", lambda a, b: torch.stack([a, b], dim=1).split([1, 2], dim=2)[1] * 3.0,
        [fx.rand(2, 3), fx.rand(2, 3)])
fx.case("broadcast_to", lambda x, y: x.expand(2, 3, 4) * y, [fx.rand(3, 1), fx.rand(2, 3, 4)])
fx.save()
