"""PyTorch reference for the recurrent classifier (src/models/rnn_classifier.c, tests/test_rnn_classifier.c): an
embedding, torch's nn.RNN / nn.LSTM / nn.GRU (batch first, qkv's parameter names), the state at each sentence's last
token (padding after the tokens), a dense layer. Cases: vanilla RNN, LSTM (2 layers) and GRU on a padded batch.
Output: logits. Run: /usr/bin/python3 tests/ref/rnn_cls_model.py"""
import torch
from torch import nn

from nn_common import Fixture, module_case, randomise

CELLS = {"rnn": nn.RNN, "lstm": nn.LSTM, "gru": nn.GRU}


class RNNClassifier(nn.Module):
    def __init__(self, V, C, d, h, cell, layers):
        super().__init__()
        self.embedding = nn.Embedding(V, d)
        self.rnn = CELLS[cell](d, h, num_layers=layers, batch_first=True)
        self.classifier = nn.Linear(h, C)

    def forward(self, ids, mask):
        states, _ = self.rnn(self.embedding(ids.long()))
        last = mask.long().sum(dim=1) - 1
        return self.classifier(states[torch.arange(ids.shape[0]), last])


def main():
    fx = Fixture("rnn_cls_model", seed=21)
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0], [1, 0, 0, 0, 0]], dtype=torch.int32)
    for cell, layers in (("rnn", 1), ("lstm", 2), ("gru", 1)):
        m = RNNClassifier(13, 3, 5, 6, cell, layers)
        randomise(fx, m)
        module_case(fx, cell, m, lambda i, k, m=m: m(i, k), [fx.randint(13, 3, 5), mask])
    fx.save()


if __name__ == "__main__":
    main()
