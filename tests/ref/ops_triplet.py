"""Fixtures for tests/test_ops_triplet.c: the Trax course's triplet loss (mean and closest negatives, margin alpha)
over a batch of L2-normalised pairs, each term alone and their sum, averaged over the batch (ops.h)."""
import torch
from fixture import Fixture

F = torch.nn.functional


def triplet(a, b, margin, terms):
    s = a @ b.t()
    n = s.shape[0]
    eye = torch.eye(n)
    pos = torch.diagonal(s)
    off = s * (1.0 - eye)
    mean_neg = off.sum(dim=1) / (n - 1)
    exclude = (eye == 1) | (off > pos.reshape(n, 1))
    closest = (off - 2.0 * exclude.float()).max(dim=1).values
    loss = torch.zeros(())
    if terms & 2:
        loss = loss + torch.clamp(margin - pos + closest, min=0).mean()
    if terms & 1:
        loss = loss + torch.clamp(margin - pos + mean_neg, min=0).mean()
    return loss.reshape(1)


fx = Fixture("ops_triplet", seed=23)
# Unit vectors as the model feeds them; the positives are made closer than chance so both terms see active and
# inactive rows, and some negatives lie above their positive.
a0 = fx.rand(8, 6)
b0 = a0 + 0.8 * fx.rand(8, 6)
a = F.normalize(a0, dim=1)
b = F.normalize(b0, dim=1)
for name, terms in (("mean", 1), ("closest", 2), ("both", 3)):
    fx.case(name, lambda x, y, t=terms: triplet(F.normalize(x, dim=1), F.normalize(y, dim=1), 0.25, t), [a, b])
# Raw (not normalised) inputs straight into the loss, a larger margin: every row active.
fx.case("raw_margin", lambda x, y: triplet(x, y, 1.0, 3), [fx.rand(5, 4), fx.rand(5, 4)])
fx.save()
