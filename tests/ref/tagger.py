"""PyTorch reference for the tagger (tests/test_tagger.c): log-probabilities and every parameter gradient of a
2-layer BiLSTM tagger and of a 2-block Transformer tagger on padded sentences, and the masked loss (padding out of
the mean whatever its targets). Dropout 0, training mode. Run: /usr/bin/python3 tests/ref/tagger.py"""
import torch

from nn_common import Fixture, module_case, randomise
from tagger_model import Tagger


def main():
    fx = Fixture("tagger", seed=23)
    V, C, D = 20, 5, 6
    ids = fx.randint(V, 3, 6)
    mask = torch.tensor([[1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 0, 0], [1, 1, 0, 0, 0, 0]], dtype=torch.int32)
    targets = fx.randint(C, 3, 6)

    lstm = Tagger(V, C, D, layers=2, bidirectional=True)
    randomise(fx, lstm)
    module_case(fx, "bilstm", lstm, lambda i, m: lstm(i, m), [ids, mask])
    module_case(fx, "bilstm_loss", lstm, lambda i, m, t: lstm.loss(i, m, t).reshape(1), [ids, mask, targets])

    uni = Tagger(V, C, D, layers=1, bidirectional=False)
    randomise(fx, uni)
    module_case(fx, "lstm", uni, lambda i, m: uni(i, m), [ids, mask])

    tf = Tagger(V, C, 8, layers=2, encoder="transformer", heads=2, d_ff=16, max_len=16)
    randomise(fx, tf)
    module_case(fx, "transformer", tf, lambda i, m: tf(i, m), [ids, mask])
    module_case(fx, "transformer_loss", tf, lambda i, m, t: tf.loss(i, m, t).reshape(1), [ids, mask, targets])
    fx.save()


if __name__ == "__main__":
    main()
