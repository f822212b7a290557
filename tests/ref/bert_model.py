"""BertForPreTraining as torch modules with Hugging Face's state_dict names (bert.embeddings.*,
bert.encoder.layer.<i>.*, bert.pooler.dense, cls.predictions.transform.*, cls.predictions.bias with the decoder tied to
the word embeddings, cls.seq_relationship), computed as transformers' modeling_bert: attention mask added as
(1 - mask) * finfo.min, exact gelu, post-LN, dropout p after the embeddings and each sub-layer output and on the
attention weights. The MLM head runs on the labelled positions only when gather=True (BERT's TF code; HF computes
every position and ignores the rest: the loss is the same). Used by tests/ref/bert_pretrain.py and bench/bert_ref.py."""
import math

import torch
from torch import nn


class Layer(nn.Module):
    def __init__(self, E, H, I, p=0.0):
        super().__init__()
        self.E, self.H = E, H
        self.q, self.k, self.v = nn.Linear(E, E), nn.Linear(E, E), nn.Linear(E, E)
        self.o, self.ln1 = nn.Linear(E, E), nn.LayerNorm(E, eps=1e-12)
        self.i, self.out, self.ln2 = nn.Linear(E, I), nn.Linear(I, E), nn.LayerNorm(E, eps=1e-12)
        self.drop = nn.Dropout(p)

    def names(self, prefix):
        return {f"{prefix}attention.self.query": self.q, f"{prefix}attention.self.key": self.k,
                f"{prefix}attention.self.value": self.v, f"{prefix}attention.output.dense": self.o,
                f"{prefix}attention.output.LayerNorm": self.ln1, f"{prefix}intermediate.dense": self.i,
                f"{prefix}output.dense": self.out, f"{prefix}output.LayerNorm": self.ln2}

    def forward(self, x, add_mask):
        b, t, _ = x.shape
        d = self.E // self.H
        q, k, v = (p(x).view(b, t, self.H, d).transpose(1, 2) for p in (self.q, self.k, self.v))
        s = q @ k.transpose(-1, -2) / math.sqrt(d) + add_mask
        a = (self.drop(torch.softmax(s, dim=-1)) @ v).transpose(1, 2).reshape(b, t, self.E)
        x = self.ln1(self.drop(self.o(a)) + x)
        return self.ln2(self.drop(self.out(nn.functional.gelu(self.i(x)))) + x)


class Bert(nn.Module):
    def __init__(self, V, E, L, H, I, P, TV=2, p=0.0):
        super().__init__()
        self.V = V
        self.word, self.pos, self.typ = nn.Embedding(V, E), nn.Embedding(P, E), nn.Embedding(TV, E)
        self.emb_ln = nn.LayerNorm(E, eps=1e-12)
        self.layers = nn.ModuleList(Layer(E, H, I, p) for _ in range(L))
        self.pooler, self.nsp = nn.Linear(E, E), nn.Linear(E, 2)
        self.transform, self.t_ln = nn.Linear(E, E), nn.LayerNorm(E, eps=1e-12)
        self.bias = nn.Parameter(torch.zeros(V))
        self.drop = nn.Dropout(p)

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

    def encode(self, ids, types, mask):
        """The last hidden state [B, T, E] (BertModel's sequence output)."""
        pos = torch.arange(ids.shape[1])[None, :]
        x = self.drop(self.emb_ln(self.word(ids) + self.pos(pos) + self.typ(types)))
        add_mask = (1.0 - mask[:, None, None, :].float()) * torch.finfo(torch.float32).min
        for l in self.layers:
            x = l(x, add_mask)
        return x

    def forward(self, ids, types, mask, labels, nsp_labels, gather=False):
        x = self.encode(ids, types, mask)
        pooled = torch.tanh(self.pooler(x[:, 0]))
        h = x.reshape(-1, x.shape[-1])
        lab = labels.reshape(-1)
        if gather:
            keep = lab != -100
            h, lab = h[keep], lab[keep]
        h = self.t_ln(nn.functional.gelu(self.transform(h)))
        logits = h @ self.word.weight.t() + self.bias
        mlm = nn.functional.cross_entropy(logits, lab, ignore_index=-100)
        nsp = nn.functional.cross_entropy(self.nsp(pooled), nsp_labels)
        return mlm, nsp
