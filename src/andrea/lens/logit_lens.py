"""The logit lens (nostalgebraist, 2020): the residual stream after each layer read as the network reads its last
one, through the final norm and the unembedding, to see at which depth a prediction forms.

    residual_stream(net, ids) -> (n_layer + 1, B, T, D)    [0] the embeddings (resid_pre of layer 0), [l] the
                                                           residual after layer l (resid_post of layer l - 1)
    logit_lens(net, ids)      -> (n_layer + 1, B, T, V)    each through the final norm, with its own scale, and
                                                           the unembedding (and Gemma 2's soft-cap): [n_layer] is
                                                           the network's own logits

As TransformerLens computes it: `cache.accumulated_resid()`, then `ln_final` and `unembed` on every layer's.
"""

from __future__ import annotations

import torch
from torch import Tensor

from andrea.lens.cache import run_with_cache
from andrea.models.network import Network


def residual_stream(net: Network, ids: Tensor) -> Tensor:
    """ids (B, T) -> the residual stream entering the first layer and leaving each: (n_layer + 1, B, T, D)."""
    names = ["blocks.0.hook_resid_pre", *(f"blocks.{layer}.hook_resid_post" for layer in range(len(net.mixers)))]
    _, cache = run_with_cache(net, ids, names)
    return torch.stack([cache[name] for name in names])


@torch.no_grad()
def logit_lens(net: Network, ids: Tensor) -> Tensor:
    """ids (B, T) -> every layer's residual read as logits: (n_layer + 1, B, T, V), the last the network's own."""
    if getattr(net, "readout", None) is not None:  # MAD's pooled readout: every position from the last one
        raise ValueError(
            "logit_lens reads each position's next-token logits, and model.net.readout=pooled_last rebuilds every "
            "position from the last one's code; use a network with model.net.readout=next_token"
        )
    return net.unembed(residual_stream(net, ids))
