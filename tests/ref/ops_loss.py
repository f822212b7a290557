"""Fixtures for tests/test_ops_loss.c: cross_entropy (class axis last in qkv, so >2-D logits are permuted to put
classes at dim 1 for torch), mse, cosine_similarity. Class and token weights are inputs without gradients.
Scalar results are stored with shape [1] (the C side reshapes likewise): Fixture draws the upstream gradient with
torch.rand(*shape), which needs at least one dimension."""
import torch
import torch.nn.functional as F
from fixture import Fixture

fx = Fixture("ops_loss", seed=5)


def case(key, fn, inputs, grad=None):
    fx.case(key, lambda *xs: (lambda y: y.reshape(1) if y.dim() == 0 else y)(fn(*xs)), inputs, grad)


def ce(z, t, w=None, **kw):
    """torch cross_entropy with qkv's layout: logits [..., C], targets [...]."""
    if z.dim() > 2:
        z = z.movedim(-1, 1)
    return F.cross_entropy(z, t.long(), weight=w, **kw)


def ce_tw(z, t, w, tw, ignore_index=-100, label_smoothing=0.0, reduction="mean"):
    """qkv's token_weight extension: per-token losses scaled by tw; mean divides by sum(w[t] * tw) over counted
    tokens."""
    per = ce(z, t, w, ignore_index=ignore_index, label_smoothing=label_smoothing, reduction="none") * tw
    if reduction == "none":
        return per
    if reduction == "sum":
        return per.sum()
    keep = t != ignore_index
    return per.sum() / (w[t.long().clamp(min=0)] * tw * keep).sum()


t6 = torch.tensor([0, 3, -100, 4, 1, 3], dtype=torch.int32)
case("ce_basic", lambda z, t: ce(z, t), [fx.rand(6, 5, lo=-3, hi=3), t6])
t23 = torch.tensor([[2, 0, 4], [-100, 1, 1]], dtype=torch.int32)
case("ce_3d", lambda z, t: ce(z, t), [fx.rand(2, 3, 5, lo=-3, hi=3), t23])
tneg = torch.tensor([[2, -1, 4], [3, 1, -1]], dtype=torch.int32)
cw = fx.rand(5, lo=0.2, hi=2.0)
tw = fx.rand(2, 3, lo=0.0, hi=1.0)
for red in ["mean", "sum", "none"]:
    case(f"ce_ws_{red}", lambda z, t, w, red=red: ce(z, t, w, ignore_index=-1, label_smoothing=0.1, reduction=red),
         [fx.rand(2, 3, 5, lo=-3, hi=3), tneg, cw], grad=[True, False, False])
    case(f"ce_smooth_{red}", lambda z, t, red=red: ce(z, t, label_smoothing=0.25, reduction=red),
         [fx.rand(6, 5, lo=-3, hi=3), t6])
    case(f"ce_tw_{red}", lambda z, t, w, tw, red=red: ce_tw(z, t, w, tw, ignore_index=-1, label_smoothing=0.1,
                                                           reduction=red),
         [fx.rand(2, 3, 5, lo=-3, hi=3), tneg, cw, tw], grad=[True, False, False, False])
t0 = torch.tensor([0, 3, 0, 4, 1, 2, 0, 4], dtype=torch.int32)  # ignore_index 0, inside the class range
case("ce_ignore0", lambda z, t: ce(z, t, ignore_index=0), [fx.rand(8, 5, lo=-3, hi=3), t0])
case("ce_big", lambda z, t: ce(z, t), [fx.rand(4, 37, lo=-40, hi=40), fx.randint(37, 4)])  # stability
for red in ["mean", "sum", "none"]:  # torch warns on broadcasting targets; broadcast explicitly
    case(f"mse_{red}", lambda a, b, red=red: F.mse_loss(*torch.broadcast_tensors(a, b), reduction=red),
         [fx.rand(2, 3, 4), fx.rand(3, 1)])
case("cos_last", lambda a, b: F.cosine_similarity(a, b, dim=-1), [fx.rand(2, 3, 4), fx.rand(3, 4)])
case("cos_axis1", lambda a, b: F.cosine_similarity(a, b, dim=1), [fx.rand(2, 5, 3), fx.rand(2, 5, 1)])
small = fx.rand(3, 4) * torch.tensor([[1.0], [0.01], [0.05]])  # rows 1 and 2 have norms below eps
case("cos_eps", lambda a, b: F.cosine_similarity(a, b, dim=1, eps=0.1), [small, fx.rand(3, 4)])
fx.save()
