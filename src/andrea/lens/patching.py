"""Activation patching: run a corrupted input with one activation taken from a clean run, and measure.

    metric(logits) -> a number (a 0-d tensor), e.g. the logit difference of the right and a wrong answer

    patch_heads(net, clean, corrupted, metric)      (L, H): head (l, h)'s output z at every position from
                                                    the clean run, all else from the corrupted run
    patch_residual(net, clean, corrupted, metric)   (L, T): the residual stream entering layer l at position
                                                    t from the clean run (TransformerLens's resid_pre)

Where the metric moves back toward its clean value, that activation carries what the corruption broke.
The same computations as TransformerLens's `get_act_patch_attn_head_out_all_pos` and
`get_act_patch_resid_pre` (tests/lens/test_transformer_lens_parity.py).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from andrea.core.hook_points import HookPoint
from andrea.lens.cache import hooks, run_with_cache
from andrea.models.network import Network, heads_shape

Metric = Callable[[Tensor], Tensor]


def _check(clean: Tensor, corrupted: Tensor) -> None:
    if clean.shape != corrupted.shape:
        raise ValueError(
            f"the clean input {tuple(clean.shape)} and the corrupted one {tuple(corrupted.shape)} must have one "
            "shape: patching puts an activation of one position of one run into the same position of the other"
        )


@torch.no_grad()
def _patched(net: Network, corrupted: Tensor, metric: Metric, name: str, put: Callable[[Tensor], Tensor]) -> float:
    def hook(x: Tensor, point: HookPoint) -> Tensor:
        return put(x.clone())

    with hooks(net, {name: hook}):
        return float(metric(net(corrupted)[0]))


def patch_heads(net: Network, clean: Tensor, corrupted: Tensor, metric: Metric) -> Tensor:
    """(L, H): the metric on `corrupted` (B, T) with one head's output taken from the run on `clean`."""
    _check(clean, corrupted)
    n_layer, n_head = heads_shape(net)
    _, cache = run_with_cache(net, clean, names=[f"blocks.{layer}.attn.hook_z" for layer in range(n_layer)])
    result = torch.zeros(n_layer, n_head)
    for layer in range(n_layer):
        name = f"blocks.{layer}.attn.hook_z"
        for head in range(n_head):

            def put(z: Tensor, clean_z: Tensor = cache[name], head: int = head) -> Tensor:
                z[:, :, head] = clean_z[:, :, head]  # (B, T, d)
                return z

            result[layer, head] = _patched(net, corrupted, metric, name, put)
    return result


def patch_residual(net: Network, clean: Tensor, corrupted: Tensor, metric: Metric) -> Tensor:
    """(L, T): the metric on `corrupted` (B, T) with the residual stream entering one layer at one position
    taken from the run on `clean`."""
    _check(clean, corrupted)
    n_layer, T = len(net.mixers), clean.shape[1]
    names = [f"blocks.{layer}.hook_resid_pre" for layer in range(n_layer)]
    _, cache = run_with_cache(net, clean, names=names)
    result = torch.zeros(n_layer, T)
    for layer, name in enumerate(names):
        for position in range(T):

            def put(x: Tensor, clean_x: Tensor = cache[name], position: int = position) -> Tensor:
                x[:, position] = clean_x[:, position]  # (B, D)
                return x

            result[layer, position] = _patched(net, corrupted, metric, name, put)
    return result
