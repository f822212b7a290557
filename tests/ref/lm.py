"""PyTorch references for the language models (tests/test_lm.c): a small GPT-2-style LM (tied and untied head; Hugging
Face parameter names, torch Linear layout) and the Trax-style recurrent LM (GRU and LSTM). Each case stores the
parameters, the logits for given ids and every parameter gradient for a random upstream gradient; "gpt_loss" is the
masked next-token cross-entropy the model type minimises. Run: /usr/bin/python3 tests/ref/lm.py"""
import torch
import torch.nn.functional as F
from torch import nn

import lm_model
from nn_common import Fixture, module_case, randomise

fx = Fixture("lm", seed=91)
V, N_CTX, D, H, FF, L = 11, 8, 8, 2, 16, 2


def GPT(tied):
    return lm_model.GPT(V, N_CTX, D, H, FF, L, tied)


ids = fx.randint(V, 2, 6)
for key, tied in [("gpt_tied", True), ("gpt_untied", False)]:
    m = GPT(tied)
    randomise(fx, m)
    module_case(fx, key, m, lambda i, m=m: m(i), [ids])

m = GPT(True)
randomise(fx, m)
targets = fx.randint(V, 2, 6)
mask = torch.tensor([[1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 0, 0]], dtype=torch.float32)


def masked_ce(i, t, w):
    loss = F.cross_entropy(m(i).reshape(-1, V), t.long().reshape(-1), reduction="none")
    return (loss * w.reshape(-1)).sum() / w.sum()


module_case(fx, "gpt_loss", m, masked_ce, [ids, targets, mask], grad=[False, False, False])


class RnnLM(nn.Module):
    def __init__(self, cell):
        super().__init__()
        self.embedding = nn.Embedding(V, D)
        self.rnn = cell(D, D, num_layers=2, batch_first=True)
        self.output = nn.Linear(D, V)

    def forward(self, ids):
        return F.log_softmax(self.output(self.rnn(self.embedding(ids.long()))[0]), -1)


for key, cell in [("rnnlm_gru", nn.GRU), ("rnnlm_lstm", nn.LSTM)]:
    m = RnnLM(cell)
    randomise(fx, m)
    module_case(fx, key, m, lambda i, m=m: m(i), [ids])

fx.save()
