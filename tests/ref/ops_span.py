"""Fixtures for tests/test_ops_span.c: extractive QA's span loss, (CE(start) + CE(end)) / 2 with the softmax over the
allowed (context) positions only, as ops.h's qkv_span_loss; cross-entropy of logits masked with -inf."""
import torch
from fixture import Fixture

F = torch.nn.functional


def span_loss(start, end, spans, allowed):
    keep = allowed != 0
    s = start.masked_fill(~keep, float("-inf"))
    e = end.masked_fill(~keep, float("-inf"))
    spans = spans.long()
    return ((F.cross_entropy(s, spans[:, 0]) + F.cross_entropy(e, spans[:, 1])) / 2).reshape(1)


fx = Fixture("ops_span", seed=31)
B, T = 4, 9
# Question tokens (0..2) and padding (last positions of some rows) are not allowed; golds lie in the context.
allowed = torch.zeros(B, T)
for b, n in enumerate((9, 7, 8, 5)):
    allowed[b, 3:n] = 1
spans = torch.tensor([[3, 5], [4, 4], [6, 7], [3, 4]], dtype=torch.int32)
fx.case("masked", span_loss, [fx.rand(B, T, lo=-3, hi=3), fx.rand(B, T, lo=-3, hi=3), spans, allowed],
        grad=[True, True, False, False])
fx.case("all", span_loss, [fx.rand(2, 6), fx.rand(2, 6), torch.tensor([[0, 5], [2, 1]], dtype=torch.int32),
                           torch.ones(2, 6)], grad=[True, True, False, False])
fx.save()
