"""PyTorch reference for the CNN classifier (src/models/cnn_classifier.c, tests/test_cnn_classifier.c): Kim (2014)
with qkv's parameter names (embedding, convs.<i>, classifier). Padding steps are zeroed before the convolutions and
left out of the max over time (a window is kept when it holds a token). Cases: wide widths 2,3 on a padded batch
(one sentence shorter than a filter); valid width 2 alone, no padding. Dropout 0. Output: logits.
Run: /usr/bin/python3 tests/ref/cnn_model.py"""
import torch
from torch import nn

from nn_common import Fixture, module_case, randomise


class CNN(nn.Module):
    def __init__(self, V, C, d, filters, widths, wide):
        super().__init__()
        self.embedding = nn.Embedding(V, d)
        self.convs = nn.ModuleList(nn.Conv1d(d, filters, k, padding=k - 1 if wide else 0) for k in widths)
        self.classifier = nn.Linear(filters * len(widths), C)
        self.widths, self.wide = widths, wide

    def forward(self, ids, mask):
        tok = mask.float()
        x = self.embedding(ids.long()) * tok[:, :, None]
        feats = []
        for k, conv in zip(self.widths, self.convs):
            y = torch.relu(conv(x.transpose(1, 2))).transpose(1, 2)  # [B, T_out, F]
            p = k - 1 if self.wide else 0
            # window t covers inputs t - p .. t - p + k - 1: kept if any of them is a token
            padded = nn.functional.pad(tok, (p, p))
            keep = padded.unfold(1, k, 1).amax(dim=2) > 0
            feats.append(y.masked_fill(~keep[:, :, None], float("-inf")).max(dim=1).values)
        return self.classifier(torch.cat(feats, dim=1))


def main():
    fx = Fixture("cnn_model", seed=12)
    V, C, D = 15, 3, 6
    wide = CNN(V, C, D, filters=4, widths=(2, 3), wide=True)
    randomise(fx, wide)
    ids = fx.randint(V, 3, 5)
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0], [1, 0, 0, 0, 0]], dtype=torch.int32)
    module_case(fx, "wide_padded", wide, lambda i, m: wide(i, m), [ids, mask])
    valid = CNN(V, 2, D, filters=5, widths=(2,), wide=False)
    randomise(fx, valid)
    module_case(fx, "valid", valid, lambda i, m: valid(i, m),
                [fx.randint(V, 2, 4), torch.ones(2, 4, dtype=torch.int32)])
    fx.save()


if __name__ == "__main__":
    main()
