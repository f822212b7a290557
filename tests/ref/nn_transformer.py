"""PyTorch references for the Transformer blocks (tests/test_nn_transformer.c): TransformerEncoderLayer (post-norm
ReLU with padding, pre-norm GELU causal), TransformerDecoderLayer (both norms) and a 2+2-layer torch.nn.Transformer,
batch_first, dropout 0, training mode (no fast path). Run: /usr/bin/python3 tests/ref/nn_transformer.py"""
import torch

from nn_common import Fixture, module_case, randomise

fx = Fixture("nn_transformer", seed=37)
D, H, FF = 8, 2, 16


def causal(t):
    return torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1)


src_pad = torch.tensor([[0, 0, 0, 0, 0], [0, 0, 0, 1, 1]], dtype=torch.int32)

enc = torch.nn.TransformerEncoderLayer(D, H, FF, dropout=0.0, batch_first=True)
randomise(fx, enc)
module_case(fx, "enc_post_relu", enc, lambda x, m: enc(x, src_key_padding_mask=m.bool()), [fx.rand(2, 5, D), src_pad])

enc2 = torch.nn.TransformerEncoderLayer(D, H, FF, dropout=0.0, activation="gelu", norm_first=True, batch_first=True)
randomise(fx, enc2)
module_case(fx, "enc_pre_gelu_causal", enc2, lambda x: enc2(x, src_mask=causal(5)), [fx.rand(2, 5, D)])

for key, norm_first, act in [("dec_post_relu", False, "relu"), ("dec_pre_gelu", True, "gelu")]:
    dec = torch.nn.TransformerDecoderLayer(D, H, FF, dropout=0.0, activation=act, norm_first=norm_first,
                                           batch_first=True)
    randomise(fx, dec)
    module_case(fx, key, dec,
                lambda t, mem, m, dec=dec: dec(t, mem, tgt_mask=causal(4), memory_key_padding_mask=m.bool()),
                [fx.rand(2, 4, D), fx.rand(2, 5, D), src_pad])

tr = torch.nn.Transformer(D, H, num_encoder_layers=2, num_decoder_layers=2, dim_feedforward=FF, dropout=0.0,
                          batch_first=True)
randomise(fx, tr)
module_case(fx, "transformer", tr,
            lambda s, t, m: tr(s, t, tgt_mask=causal(4), src_key_padding_mask=m.bool(),
                               memory_key_padding_mask=m.bool()),
            [fx.rand(2, 5, D), fx.rand(2, 4, D), src_pad])
fx.save()
