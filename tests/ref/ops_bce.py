"""Fixtures for tests/test_ops_bce.c: binary_cross_entropy_with_logits with and without pos_weight, every
reduction, gradients to logits and targets."""
import torch
from fixture import Fixture

F = torch.nn.functional
fx = Fixture("ops_bce", seed=5)
x = fx.rand(4, 3, lo=-6, hi=6)
y = fx.rand(4, 3)
pw = fx.rand(3, lo=0.5, hi=3)
fx.case("mean", lambda x, y: F.binary_cross_entropy_with_logits(x, y).reshape(1), [x, y])
fx.case("sum_pos_weight", lambda x, y, p: F.binary_cross_entropy_with_logits(x, y, pos_weight=p, reduction="sum")
        .reshape(1), [x, y, pw], grad=[True, True, False])
fx.case("none", lambda x, y: F.binary_cross_entropy_with_logits(x, y, reduction="none"), [x, y])
fx.case("extreme", lambda x, y: F.binary_cross_entropy_with_logits(x, y, reduction="none"),
        [torch.tensor([-100.0, -20.0, 0.0, 20.0, 100.0]), torch.tensor([1.0, 0.0, 0.5, 1.0, 0.0])])
fx.save()
