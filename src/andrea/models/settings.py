"""The network's settings, declared once (nanoGPT's GPTConfig, as rules): the models check their
arguments against NET, the config checks read it as `model.net.*` (andrea.train.keys.RANGES), and the
model-file schema checks a file's fields with it.

    vocab_size, max_context, d_model, n_layer, mlp_ratio    positive integers
    dropout      a number in [0, 1)
    bias         true or false (GPT only)
    activation   gelu, gelu_tanh (GPT-2's tanh approximation), relu (the grokking papers' MLP), or a gated MLP:
                 swiglu, geglu (GPT only; andrea.models.mlp)
    position     learned, rope, alibi or none: where positions enter (andrea.attention.positions)
    d_mlp        the MLP's hidden width, a positive integer; null: mlp_ratio · d_model (GPT only)
    norm         layernorm, rmsnorm, gemma_rmsnorm or none, with norm_eps > 0 (GPT only; andrea.models.norms)
    norm_place   pre, post or both: the norms before each sub-layer, after it, or both (GPT only)
    tie_embeddings, embed_scale    true or false: the LM head is the embedding; embeddings times sqrt(d_model)
    logit_softcap                  null, or c > 0: logits c · tanh(logits / c)
    init_std     the weights' initial standard deviation, a number > 0; null: 1/sqrt(d_model) (GPT only)
    readout      next_token (the LM head at every position) or pooled_last (MAD's autoencoder: every position
                 decoded from the last one's code; andrea.models.pooled_readout) (GPT only)
"""

from __future__ import annotations

from andrea.attention.positions import POSITIONS
from andrea.models.pooled_readout import READOUTS
from andrea.utils.rules import BOOLEAN, POSITIVE, Rule, number, one_of, optional

ACTIVATIONS = ("gelu", "gelu_tanh", "relu", "swiglu", "geglu")
NORMS = ("layernorm", "rmsnorm", "gemma_rmsnorm", "none")
NORM_PLACES = ("pre", "post", "both")
SIZES = ("vocab_size", "max_context", "d_model", "n_layer", "mlp_ratio")

NET: dict[str, Rule] = {
    **dict.fromkeys(SIZES, POSITIVE),
    "dropout": number(0.0, 1.0, high_open=True),
    "bias": BOOLEAN,
    "activation": one_of(*ACTIVATIONS),
    "position": one_of(*POSITIONS),
    "d_mlp": optional(POSITIVE),
    "norm": one_of(*NORMS),
    "norm_eps": number(0.0, 1.0, low_open=True),
    "norm_place": one_of(*NORM_PLACES),
    "tie_embeddings": BOOLEAN,
    "embed_scale": BOOLEAN,
    "logit_softcap": optional(number(0.0, None, low_open=True)),
    "init_std": optional(number(0.0, None, low_open=True)),
    "readout": one_of(*READOUTS),
}
