"""The circuit behind a verdict: every head that meets the task's role, and, for heads that need an earlier
one (an induction head reads a previous-token head through its keys), which earlier head that is.

An induction head at position t attends to the token after an earlier copy of t's token; it can only find
that token if an earlier head has written "my previous token was ..." into each position: the previous-token
head, read through the induction head's keys (K-composition). `sources` finds it by ablation: each head of the
earlier layers is mean-ablated in turn (its average output kept, its information removed) and the reader's role
score recomputed on the same rows; the head whose ablation lowers the readers' scores most is the one they
read. Its K-composition with each reader (andrea.lens.composition) is given beside it, from the weights alone.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from andrea.lens import verdict as verdicts
from andrea.lens.composition import composition_scores
from andrea.lens.heads import head_name, parse_head
from andrea.lens.interventions import head_means, intervene
from andrea.models.network import Network, heads_shape

if TYPE_CHECKING:
    from andrea.data.tasks import Pattern

# the roles whose heads read an earlier head: the composition they read it through, and the earlier head's role
READS = {"induction": ("K", "previous_token")}

Score = Callable[[list[Tensor]], Tensor]  # the weights of every layer -> (L, H) role scores


@torch.no_grad()
def sources(net: Network, ids: Tensor, readers: list[str], role: str, score: Score) -> dict[str, dict]:
    """For each reader head, the earlier head whose mean ablation lowers its `role` score most on ids (B, T):
    {reader: {"reads": head, "score": the reader's score, "ablated": its score with that head ablated,
    "composition": their composition, "mode": its kind (K for induction), "source_role": the earlier head's
    role}}; {} when `role` reads no earlier head or nothing meets it."""
    if role not in READS or not readers:
        return {}
    base = score(net(ids, return_weights=True)[1])  # (L, H)
    ablated = _ablated_scores(net, ids, min(parse_head(r)[0] for r in readers), score)
    mode, source_role = READS[role]
    composition = composition_scores(net, mode) if net.attention[0].latent is None else None
    found = {}
    for reader in readers:
        r_layer, r_head = parse_head(reader)
        earlier = [key for key in ablated if key[0] < r_layer]
        if not earlier:
            continue
        layer, head = min(earlier, key=lambda key: float(ablated[key][r_layer, r_head]))
        found[reader] = {
            "reads": head_name(layer, head),
            "score": float(base[r_layer, r_head]),
            "ablated": float(ablated[(layer, head)][r_layer, r_head]),
            "composition": None if composition is None else float(composition[layer, head, r_layer, r_head]),
            "mode": mode,
            "source_role": source_role,
        }
    return found


def _ablated_scores(net: Network, ids: Tensor, layers: int, score: Score) -> dict[tuple[int, int], Tensor]:
    """(layer, head) -> the (L, H) role scores with that head mean-ablated, for every head of the first `layers`."""
    _, n_head = heads_shape(net)
    means = head_means(net, [ids])
    ablated: dict[tuple[int, int], Tensor] = {}
    for layer in range(layers):
        for head in range(n_head):
            with intervene(net, {(layer, head): None}, means):
                ablated[(layer, head)] = score(net(ids, return_weights=True)[1])
    return ablated


def traced_verdict(
    net: Network, ids: Tensor, pattern: Pattern, scores: dict[str, verdicts.RoleScores], rows_sum_to_one: bool
) -> dict:
    """The task's verdict on the probe rows ids (B, T), with every head meeting its role and, for a role that
    reads an earlier head, the head each of them reads (andrea.lens.verdict.verdict's `reads`)."""
    role = pattern.role
    if role is None or role not in scores:
        return verdicts.verdict(pattern, scores)
    readers = [head for head, _ in verdicts.meeting(scores[role].values, verdicts.THRESHOLD, pattern.min_layer)]

    def score(weights: list[Tensor]) -> Tensor:
        return verdicts.score_heads(weights, ids, (role,), rows_sum_to_one=rows_sum_to_one)[role].values

    return verdicts.verdict(pattern, scores, sources(net, ids, readers, role, score))
