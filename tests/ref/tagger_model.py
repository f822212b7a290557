"""The tagger (src/models/tagger.c) as torch modules with qkv's parameter names: embedding, rnn (torch.nn.LSTM,
batch_first, packed by sentence length) or pos + encoder (tests/ref/cls_model.py's blocks), output. Used by
tests/ref/tagger.py (fixtures) and bench/quality/tagger.py (the PyTorch side of the quality comparison)."""
import math
import os
import sys

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cls_model import Encoder, Positions  # noqa: E402


class Tagger(nn.Module):
    def __init__(self, V, C, d, layers=1, bidirectional=True, encoder="lstm", heads=4, d_ff=512, max_len=512,
                 dropout=0.0):
        super().__init__()
        self.kind, self.dropout = encoder, dropout
        if encoder == "lstm":
            self.embedding = nn.Embedding(V, d)
            self.rnn = nn.LSTM(d, d, num_layers=layers, bidirectional=bidirectional, batch_first=True,
                               dropout=dropout if layers > 1 else 0.0)
            self.output = nn.Linear(d * (2 if bidirectional else 1), C)
        else:
            self.embedding = nn.Embedding(V, d)
            self.pos = Positions(max_len, d, False)
            self.encoder = Encoder(layers, d, heads, d_ff, torch.relu, True)
            self.output = nn.Linear(d, C)
            self.scale = math.sqrt(d)
            for layer in self.encoder.layers:  # cls_model's blocks have no dropout: qkv's attention weights have it
                layer.self_attn.drop = nn.Dropout(dropout)

    def forward(self, ids, mask):
        """ids int [B, T], mask [B, T] (1 = token, tokens first) -> log-probabilities [B, T, C]."""
        T = ids.shape[1]
        x = self.embedding(ids.long())
        if self.kind == "lstm":
            lengths = mask.sum(1).long().cpu()
            packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
            out, _ = self.rnn(packed)
            x, _ = pad_packed_sequence(out, batch_first=True, total_length=T)
            x = nn.functional.dropout(x, self.dropout, self.training)
        else:
            # qkv's (and torch.nn.TransformerEncoderLayer's) dropout: on the positions' sum, the attention weights,
            # each sublayer's output and the feed-forward's inner activations
            drop = lambda t: nn.functional.dropout(t, self.dropout, self.training)  # noqa: E731
            x = drop(self.pos(x * self.scale))
            pad = (mask == 0).int()
            for l in self.encoder.layers:
                x = x + drop(l.self_attn(l.norm1(x), pad))
                x = x + drop(l.linear2(drop(torch.relu(l.linear1(l.norm2(x))))))
            x = self.encoder.norm(x)
        return torch.log_softmax(self.output(x), dim=-1)

    def loss(self, ids, mask, targets):
        """Mean NLL over the tokens of mask."""
        lp = self.forward(ids, mask)
        t = targets.long().masked_fill(mask == 0, -100)
        return nn.functional.nll_loss(lp.reshape(-1, lp.shape[-1]), t.reshape(-1), ignore_index=-100)
