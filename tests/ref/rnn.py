"""Fixtures for tests/test_rnn.c: torch.nn.RNN / GRU / LSTM, 1 and 2 layers, uni- and bidirectional, on a padded
batch with mixed lengths through pack_padded_sequence(enforce_sorted=False) / pad_packed_sequence.

Case K (e.g. "lstm_l2_bi") holds K.x [B, T, I], K.lengths (int32), K.h0 (and K.c0), the module's parameters
K.p.<state_dict name>, the outputs K.out, K.h_n (K.c_n), upstream gradients K.gout, K.gh_n (K.gc_n), and the
gradients of L = sum(out * gout) + sum(h_n * gh_n) [+ sum(c_n * gc_n)]: K.grad.x, K.grad.h0 (K.grad.c0) and
K.grad.p.<name> for every parameter."""
import torch
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence
from fixture import Fixture

B, T, I, H = 3, 5, 3, 4
LENGTHS = [2, 5, 4]  # unsorted on purpose: enforce_sorted=False

fx = Fixture("rnn", seed=5)
torch.manual_seed(5)
t = fx.tensors
for kind in ["rnn_tanh", "rnn_relu", "gru", "lstm"]:
    for layers in [1, 2]:
        for bi in [False, True]:
            key = f"{kind}_l{layers}_{'bi' if bi else 'uni'}"
            dirs = 2 if bi else 1
            if kind == "lstm":
                mod = torch.nn.LSTM(I, H, num_layers=layers, bidirectional=bi, batch_first=True)
            elif kind == "gru":
                mod = torch.nn.GRU(I, H, num_layers=layers, bidirectional=bi, batch_first=True)
            else:
                mod = torch.nn.RNN(I, H, num_layers=layers, bidirectional=bi, batch_first=True,
                                   nonlinearity=kind[4:])
            with torch.no_grad():  # weights in +-1 so the gates are neither saturated nor linear
                for p in mod.parameters():
                    p.copy_(fx.rand(*p.shape, lo=-0.8, hi=0.8))
            x = fx.rand(B, T, I).requires_grad_(True)
            h0 = fx.rand(layers * dirs, B, H, lo=-0.5, hi=0.5).requires_grad_(True)
            c0 = fx.rand(layers * dirs, B, H, lo=-0.5, hi=0.5).requires_grad_(True)
            lengths = torch.tensor(LENGTHS, dtype=torch.int64)
            packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
            if kind == "lstm":
                y, (hn, cn) = mod(packed, (h0, c0))
            else:
                y, hn = mod(packed, h0)
            out, _ = pad_packed_sequence(y, batch_first=True, total_length=T)
            gout, ghn = fx.rand(*out.shape), fx.rand(*hn.shape)
            loss = (out * gout).sum() + (hn * ghn).sum()
            if kind == "lstm":
                gcn = fx.rand(*cn.shape)
                loss = loss + (cn * gcn).sum()
            loss.backward()
            t[f"{key}.x"] = x.detach().numpy()
            t[f"{key}.lengths"] = lengths.to(torch.int32).numpy()
            t[f"{key}.h0"] = h0.detach().numpy()
            t[f"{key}.out"] = out.detach().numpy()
            t[f"{key}.h_n"] = hn.detach().numpy()
            t[f"{key}.gout"] = gout.numpy()
            t[f"{key}.gh_n"] = ghn.numpy()
            t[f"{key}.grad.x"] = x.grad.numpy()
            t[f"{key}.grad.h0"] = h0.grad.numpy()
            if kind == "lstm":
                t[f"{key}.c0"] = c0.detach().numpy()
                t[f"{key}.c_n"] = cn.detach().numpy()
                t[f"{key}.gc_n"] = gcn.numpy()
                t[f"{key}.grad.c0"] = c0.grad.numpy()
            for name, p in mod.named_parameters():
                t[f"{key}.p.{name}"] = p.detach().numpy()
                t[f"{key}.grad.p.{name}"] = p.grad.numpy()

# Cells: one step with carried state (torch.nn.RNNCell / GRUCell / LSTMCell share the layers' weight layout).
for kind in ["rnn_tanh", "gru", "lstm"]:
    key = f"cell_{kind}"
    mod = {"rnn_tanh": torch.nn.RNNCell, "gru": torch.nn.GRUCell, "lstm": torch.nn.LSTMCell}[kind](I, H)
    with torch.no_grad():
        for p in mod.parameters():
            p.copy_(fx.rand(*p.shape, lo=-0.8, hi=0.8))
    x = fx.rand(B, I).requires_grad_(True)
    h = fx.rand(B, H).requires_grad_(True)
    c = fx.rand(B, H).requires_grad_(True)
    if kind == "lstm":
        h1, c1 = mod(x, (h, c))
    else:
        h1 = mod(x, h)
    gh = fx.rand(B, H)
    loss = (h1 * gh).sum()
    t[f"{key}.x"] = x.detach().numpy()
    t[f"{key}.h"] = h.detach().numpy()
    t[f"{key}.h_out"] = h1.detach().numpy()
    t[f"{key}.gh_out"] = gh.numpy()
    if kind == "lstm":
        gc = fx.rand(B, H)
        loss = loss + (c1 * gc).sum()
        t[f"{key}.c"] = c.detach().numpy()
        t[f"{key}.c_out"] = c1.detach().numpy()
        t[f"{key}.gc_out"] = gc.numpy()
    loss.backward()
    t[f"{key}.grad.x"] = x.grad.numpy()
    t[f"{key}.grad.h"] = h.grad.numpy()
    if kind == "lstm":
        t[f"{key}.grad.c"] = c.grad.numpy()
    for name, p in mod.named_parameters():
        t[f"{key}.p.{name}"] = p.detach().numpy()
        t[f"{key}.grad.p.{name}"] = p.grad.numpy()
fx.save()
