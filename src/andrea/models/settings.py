"""The network's settings, declared once (nanoGPT's GPTConfig, as rules): the models check their
arguments against NET, the config checks read it as `model.net.*` (andrea.train.keys.RANGES), and the
model-file schema checks a file's fields with it.

    vocab_size, max_context, d_model, n_layer, mlp_ratio    positive integers
    dropout      a number in [0, 1)
    bias         true or false (GPT only)
    activation   gelu, gelu_tanh (GPT-2's tanh approximation) or relu (the grokking papers' MLP) (GPT only)
    position     learned, rope, alibi or none: where positions enter (andrea.attention.positions)
"""

from __future__ import annotations

from andrea.attention.positions import POSITIONS
from andrea.utils.rules import BOOLEAN, POSITIVE, Rule, number, one_of

ACTIVATIONS = ("gelu", "gelu_tanh", "relu")
SIZES = ("vocab_size", "max_context", "d_model", "n_layer", "mlp_ratio")

NET: dict[str, Rule] = {
    **dict.fromkeys(SIZES, POSITIVE),
    "dropout": number(0.0, 1.0, high_open=True),
    "bias": BOOLEAN,
    "activation": one_of(*ACTIVATIONS),
    "position": one_of(*POSITIONS),
}
