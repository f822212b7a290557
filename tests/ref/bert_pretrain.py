"""PyTorch reference for BERT pretraining (src/models/bert.c, tests/test_bert.c): a BertForPreTraining written out
with Hugging Face's module tree and state_dict names (bert.embeddings.*, bert.encoder.layer.<i>.*, bert.pooler.dense,
cls.predictions.transform.*, cls.predictions.bias with the decoder tied to the word embeddings, cls.seq_relationship),
as transformers' modeling_bert computes it in eval mode (dropout 0): attention mask added as (1 - mask) * finfo.min,
exact gelu, post-LN. Weights are random (std 0.2, LayerNorms around 1) so every gradient is far from zero.
Stored: every parameter "p.<name>" and its gradient "g.<name>" of the total loss (MLM mean CE over labels != -100 +
NSP mean CE), the inputs, and the three losses. Run: /usr/bin/python3 tests/ref/bert_pretrain.py"""
import math

import torch
from torch import nn

from fixture import Fixture

V, E, L, H, I, P, TV = 50, 16, 2, 4, 32, 12, 2
B, T = 3, 10
fx = Fixture("bert_pretrain", seed=25)
torch.manual_seed(25)


class Layer(nn.Module):
    def __init__(self):
        super().__init__()
        self.q, self.k, self.v = nn.Linear(E, E), nn.Linear(E, E), nn.Linear(E, E)
        self.o, self.ln1 = nn.Linear(E, E), nn.LayerNorm(E, eps=1e-12)
        self.i, self.out, self.ln2 = nn.Linear(E, I), nn.Linear(I, E), nn.LayerNorm(E, eps=1e-12)

    def names(self, prefix):
        return {f"{prefix}attention.self.query": self.q, f"{prefix}attention.self.key": self.k,
                f"{prefix}attention.self.value": self.v, f"{prefix}attention.output.dense": self.o,
                f"{prefix}attention.output.LayerNorm": self.ln1, f"{prefix}intermediate.dense": self.i,
                f"{prefix}output.dense": self.out, f"{prefix}output.LayerNorm": self.ln2}

    def forward(self, x, add_mask):
        b, t, _ = x.shape
        d = E // H
        q, k, v = (p(x).view(b, t, H, d).transpose(1, 2) for p in (self.q, self.k, self.v))
        s = q @ k.transpose(-1, -2) / math.sqrt(d) + add_mask
        a = (torch.softmax(s, dim=-1) @ v).transpose(1, 2).reshape(b, t, E)
        x = self.ln1(self.o(a) + x)
        return self.ln2(self.out(nn.functional.gelu(self.i(x))) + x)


class Bert(nn.Module):
    def __init__(self):
        super().__init__()
        self.word, self.pos, self.typ = nn.Embedding(V, E), nn.Embedding(P, E), nn.Embedding(TV, E)
        self.emb_ln = nn.LayerNorm(E, eps=1e-12)
        self.layers = nn.ModuleList(Layer() for _ in range(L))
        self.pooler, self.nsp = nn.Linear(E, E), nn.Linear(E, 2)
        self.transform, self.t_ln = nn.Linear(E, E), nn.LayerNorm(E, eps=1e-12)
        self.bias = nn.Parameter(torch.zeros(V))

    def modules_by_name(self):
        m = {"bert.embeddings.word_embeddings": self.word, "bert.embeddings.position_embeddings": self.pos,
             "bert.embeddings.token_type_embeddings": self.typ, "bert.embeddings.LayerNorm": self.emb_ln,
             "bert.pooler.dense": self.pooler, "cls.seq_relationship": self.nsp,
             "cls.predictions.transform.dense": self.transform, "cls.predictions.transform.LayerNorm": self.t_ln}
        for i, l in enumerate(self.layers):
            m.update(l.names(f"bert.encoder.layer.{i}."))
        return m

    def params(self):
        out = {"cls.predictions.bias": self.bias}
        for name, mod in self.modules_by_name().items():
            for pn, p in mod.named_parameters():
                out[f"{name}.{pn}"] = p
        return out

    def forward(self, ids, types, mask, labels, nsp_labels):
        pos = torch.arange(ids.shape[1])[None, :]
        x = self.emb_ln(self.word(ids) + self.pos(pos) + self.typ(types))
        add_mask = (1.0 - mask[:, None, None, :].float()) * torch.finfo(torch.float32).min
        for l in self.layers:
            x = l(x, add_mask)
        pooled = torch.tanh(self.pooler(x[:, 0]))
        h = self.t_ln(nn.functional.gelu(self.transform(x)))
        logits = h @ self.word.weight.t() + self.bias
        mlm = nn.functional.cross_entropy(logits.view(-1, V), labels.view(-1), ignore_index=-100)
        nsp = nn.functional.cross_entropy(self.nsp(pooled), nsp_labels)
        return mlm, nsp


m = Bert()
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
