"""Fixtures for tests/test_ops_index.c: embedding, index_select, gather, masked_fill, where.
Int32 inputs are stored as I32 and converted to long inside the lambdas; masks are inputs without gradients."""
import torch
import torch.nn.functional as F
from fixture import Fixture

fx = Fixture("ops_index", seed=3)
ids = torch.tensor([[1, 4, 4, 0, 9], [4, 1, 7, 7, 4], [0, 0, 3, 9, 1]], dtype=torch.int32)  # repeats on purpose
fx.case("embedding", lambda w, i: F.embedding(i.long(), w), [fx.rand(10, 6), ids])
fx.case("index_select_1", lambda x, i: x.index_select(1, i.long()),
        [fx.rand(3, 5, 4), torch.tensor([4, 0, 4, 2], dtype=torch.int32)])
fx.case("index_select_0", lambda x, i: x.index_select(0, i.long()),
        [fx.rand(6, 3), torch.tensor([5, 5, 1], dtype=torch.int32)])
fx.case("gather_1", lambda x, i: x.gather(1, i.long()), [fx.rand(3, 5, 4), fx.randint(5, 2, 6, 3)])
fx.case("gather_last", lambda x, i: x.gather(-1, i.long()), [fx.rand(4, 7), fx.randint(7, 4, 3)])
fx.case("masked_fill_i32", lambda x, m: x.masked_fill(m != 0, -2.5),
        [fx.rand(2, 3, 4), torch.tensor([[1], [0], [1]], dtype=torch.int32)])
fx.case("masked_fill_f32", lambda x, m: x.masked_fill(m != 0, 7.0),
        [fx.rand(2, 3, 4), torch.tensor([0.0, 1.0, 0.0, 0.5])], grad=[True, False])
fx.case("masked_fill_bx", lambda x, m: x.masked_fill(m != 0, 0.0),
        [fx.rand(3, 1), fx.randint(2, 2, 3, 4)])
fx.case("where", lambda c, a, b: torch.where(c != 0, a, b),
        [fx.randint(2, 2, 1, 4), fx.rand(3, 4), fx.rand(2, 3, 1)])
fx.case("where_f32", lambda c, a, b: torch.where(c != 0, a, b),
        [(fx.rand(3, 4) > 0).float(), fx.rand(3, 4), fx.rand(4)], grad=[False, True, True])
fx.save()
