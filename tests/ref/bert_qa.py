"""PyTorch reference for span QA on BERT (the qa task's head over the bert model type's features; tests/test_bert.c):
tests/ref/bert_model.py's encoder, then qa_outputs (Linear E -> 2, BertForQuestionAnswering's name) giving start and
end logits, loss = (CE_start + CE_end) / 2 with the softmax over the allowed (context) positions only (other logits
-inf), as qkv_span_loss. Stored: the encoder's and the head's parameters "p.<name>", their gradients "g.<name>",
the inputs, the logits and the loss. Run: /usr/bin/python3 tests/ref/bert_qa.py"""
import torch

from bert_model import Bert
from fixture import Fixture

V, E, L, H, I, P, TV = 50, 16, 2, 4, 32, 12, 2
B, T = 3, 10
fx = Fixture("bert_qa", seed=26)
torch.manual_seed(26)

m = Bert(V, E, L, H, I, P, TV)
qa = torch.nn.Linear(E, 2)
with torch.no_grad():
    for name, p in list(m.params().items()) + [("qa_outputs.weight", qa.weight), ("qa_outputs.bias", qa.bias)]:
        if name.endswith("LayerNorm.weight"):
            p.copy_(1.0 + 0.2 * torch.randn(p.shape))
        else:
            p.copy_(0.2 * torch.randn(p.shape))
ids = torch.randint(5, V, (B, T))
ids[:, 0] = 2  # [CLS] question [SEP] context [SEP]
ids[:, 4] = 3
ids[:, T - 1] = 3
ids[2, 8:] = 0  # row 2 padded from position 8 ([SEP] at 7)
ids[2, 7] = 3
types = torch.zeros(B, T, dtype=torch.long)
types[:, 5:] = 1
types[2, 8:] = 0
mask = (ids != 0).long()
allowed = torch.zeros(B, T)
allowed[:, 5:T - 1] = 1
allowed[2, 7:] = 0
spans = torch.tensor([[5, 6], [7, 7], [5, 6]])

x = m.encode(ids, types, mask)
z = qa(x)
start, end = z[..., 0], z[..., 1]
neg = torch.finfo(torch.float32).min
ce = torch.nn.functional.cross_entropy
ms, me = start.masked_fill(allowed == 0, neg), end.masked_fill(allowed == 0, neg)
loss = (ce(ms, spans[:, 0]) + ce(me, spans[:, 1])) / 2
loss.backward()
t = fx.tensors
enc = {k: v for k, v in m.params().items() if k.startswith("bert.")}
enc["qa_outputs.weight"], enc["qa_outputs.bias"] = qa.weight, qa.bias
for name, p in enc.items():
    t["p." + name] = p.detach().numpy()
    if p.grad is not None:
        t["g." + name] = p.grad.numpy()
t["ids"] = ids.int().numpy()
t["types"] = types.int().numpy()
t["mask"] = mask.int().numpy()
t["allowed"] = allowed.numpy()
t["spans"] = spans.int().numpy()
t["start"] = start.detach().numpy()
t["end"] = end.detach().numpy()
t["loss"] = loss.detach().reshape(1).numpy()
fx.save()
