"""What the explorer page shows, computed from a network: the views (one input; the mean over many rows), the
direct logit attribution toward the network's own prediction, and the composition scores."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import torch
from torch import Tensor

from andrea.lens.attribution import Attribution, logit_attribution
from andrea.lens.composition import MODES, composition_scores
from andrea.lens.explorer import About, View, explorer_page
from andrea.lens.verdict import score_heads, summary
from andrea.models.network import Network, all_attention
from andrea.models.weight_styles import allowed_of, weight_styles


def _scores(net: Network, weights: list[Tensor], ids: Tensor) -> tuple[dict[str, Tensor], dict[str, tuple[str, float]]]:
    """Every role's scores (L, H), and its best head with its score (by the run summary's rule: the highest, the
    lowest entropy), where any head has one."""
    normalised = all(style.rows_sum_to_one for style in weight_styles(net))
    scores = score_heads(weights, ids, rows_sum_to_one=normalised)
    best = {role: (found["best"], found["score"]) for role, found in summary(scores).items() if found["best"]}
    return {role: s.values for role, s in scores.items()}, best


@torch.no_grad()
def input_view(net: Network, ids: Tensor, tokens: list[str]) -> View:
    """ids (1, T): its maps and its role scores."""
    _, weights = net(ids, return_weights=True)
    scores, best = _scores(net, weights, ids)
    return View(
        "this input", tokens, [w[0].float().cpu() for w in weights], scores, allowed_of(net, ids.shape[1]), best
    )


@torch.no_grad()
def mean_view(net: Network, rows: Tensor, what: str) -> View:
    """rows (B, T): the mean pattern over them, and the role scores over all of them (tokens: positions)."""
    _, weights = net(rows, return_weights=True)
    T = rows.shape[1]
    mean = [w.float().mean(dim=0).cpu() for w in weights]  # (H, T, T) per layer
    name, (scores, best) = f"mean over {rows.shape[0]} {what}", _scores(net, weights, rows)
    return View(name, [str(t) for t in range(T)], mean, scores, allowed_of(net, T), best)


@torch.no_grad()
def prediction_attribution(net: Network, ids: Tensor, decode: Callable[[int], str]) -> tuple[str, Attribution]:
    """The direct logit attribution toward the network's top next-token prediction after ids (1, T)."""
    top = int(net(ids)[0][0, -1].argmax())
    return f"token {decode(top)!r} ({top}), the network's prediction", logit_attribution(net, ids, target=top)


def all_compositions(net: Network) -> dict[str, Tensor] | None:
    """Q-, K- and V-composition (L, H, L, H); None with one layer, latent heads (no per-head W_K, W_V), or a layer
    whose mixer is not attention."""
    if len(net.mixers) < 2 or not all_attention(net) or net.attention[0].latent is not None:
        return None
    return {mode: composition_scores(net, mode) for mode in MODES}


def explorer_for(
    net: Network,
    ids: Tensor,
    tokens: list[str],
    about: About,
    decode: Callable[[int], str],
    rows: tuple[Tensor, str] | None = None,
    steps: dict[int, list[tuple[int, Path]]] | None = None,
) -> str:
    """The explorer page of `net` (with whatever hooks are attached: an ablation) for ids (1, T), and, given
    rows ((B, T') ids, what they are), their mean view beside it."""
    views = [input_view(net, ids, tokens)] + ([mean_view(net, *rows)] if rows is not None else [])
    attribution = prediction_attribution(net, ids, decode)
    return explorer_page(views, about, steps, attribution, all_compositions(net))
