"""PyTorch reference for BERT pretraining (src/models/bert.c, tests/test_bert.c): tests/ref/bert_model.py's
BertForPreTraining (Hugging Face's module tree and state_dict names, modeling_bert's computation), dropout 0.
Weights are random (std 0.2, LayerNorms around 1) so every gradient is far from zero.
Stored: every parameter "p.<name>" and its gradient "g.<name>" of the total loss (MLM mean CE over labels != -100 +
NSP mean CE), the inputs, and the three losses. Run: /usr/bin/python3 tests/ref/bert_pretrain.py"""
import torch

from bert_model import Bert
from fixture import Fixture

V, E, L, H, I, P, TV = 50, 16, 2, 4, 32, 12, 2
B, T = 3, 10
fx = Fixture("bert_pretrain", seed=25)
torch.manual_seed(25)

m = Bert(V, E, L, H, I, P, TV)
with torch.no_grad():
    for name, p in m.params().items():
        if name.endswith("LayerNorm.weight"):
            p.copy_(1.0 + 0.2 * torch.randn(p.shape))
        else:
            p.copy_(0.2 * torch.randn(p.shape))
ids = torch.randint(5, V, (B, T))
ids[:, 0] = 2  # [CLS]
ids[:, 5] = 3  # [SEP] after segment A
ids[:, T - 1] = 3
ids[2, 7:] = 0  # row 2 padded from position 7 ([SEP] at 6)
ids[2, 6] = 3
types = torch.zeros(B, T, dtype=torch.long)
types[:, 6:] = 1
types[2, 7:] = 0
mask = (ids != 0).long()
mask[:, 0] = 1
labels = torch.full((B, T), -100, dtype=torch.long)
for b, t in [(0, 1), (0, 3), (0, 8), (1, 2), (1, 6), (2, 1), (2, 4)]:
    labels[b, t] = int(ids[b, t])
    ids[b, t] = 4 if (b + t) % 3 else ids[b, t]  # [MASK] or kept
nsp_labels = torch.tensor([0, 1, 0])
mlm, nsp = m(ids, types, mask, labels, nsp_labels)
loss = mlm + nsp
loss.backward()
t = fx.tensors
for name, p in m.params().items():
    t["p." + name] = p.detach().numpy()
    t["g." + name] = p.grad.numpy()
t["ids"] = ids.int().numpy()
t["types"] = types.int().numpy()
t["mask"] = mask.int().numpy()
t["labels"] = labels.int().numpy()
t["nsp_labels"] = nsp_labels.int().numpy()
t["loss"] = loss.detach().reshape(1).numpy()
t["mlm_loss"] = mlm.detach().reshape(1).numpy()
t["nsp_loss"] = nsp.detach().reshape(1).numpy()
fx.save()
