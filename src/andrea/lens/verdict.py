"""Every head's role scores on a probe batch, the best head per role, and whether the head a task
needs appeared (each synthetic task declares its Pattern: andrea.data.tasks)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from torch import Tensor

from andrea.lens import transformer_lens
from andrea.lens.head_roles import HEAD_ROLES, role_metric, shares
from andrea.lens.heads import head_name, parse_head

if TYPE_CHECKING:
    from andrea.data.tasks import Pattern

THRESHOLD = 0.5  # a head "is" a role when most of its attention follows the role's pattern


@dataclass
class RoleScores:
    """One role's scores: values (L, H), NaN where not applicable; queries (L, H) each rests on."""

    role: str
    values: Tensor
    queries: Tensor
    transformer_lens: Tensor | None = None  # (L, H), TransformerLens's figure for the same weights

    def best(self, min_layer: int = 0) -> tuple[str, float, int] | None:
        """(head "L<l>H<h>", score, queries) of the highest defined score in layers >= min_layer, or None."""
        found = None
        for layer in range(min_layer, self.values.shape[0]):
            for head in range(self.values.shape[1]):
                value = float(self.values[layer, head])
                if not math.isnan(value) and (found is None or value > found[1]):
                    found = (head_name(layer, head), value, int(self.queries[layer, head]))
        return found


def score_heads(
    weights: list[Tensor], input_ids: Tensor, extra_roles: tuple[str, ...] = (), rows_sum_to_one: bool = True
) -> dict[str, RoleScores]:
    """weights: one (B, H, T, T) per layer, input_ids (B, T) -> every role's scores (HEAD_ROLES + extra).
    Rows that do not sum to 1 (the mechanism says so) are scored as shares of their absolute weight."""
    weights = [w.detach().cpu() if rows_sum_to_one else shares(w.detach().cpu().double()) for w in weights]
    input_ids = input_ids.cpu()
    n_layer, n_head = len(weights), weights[0].shape[1]
    scores = {}
    for role in dict.fromkeys([*HEAD_ROLES, *extra_roles]):
        metric = role_metric(role, n_layer, n_head, sync_on_compute=False)
        metric.update(weights, input_ids)
        tl_role = role if role in transformer_lens.PATTERNS else None
        tl = transformer_lens.detect(weights, input_ids, tl_role) if tl_role else None
        values = metric.compute().reshape(n_layer, n_head)  # torchmetrics squeezes a (1, 1) result
        scores[role] = RoleScores(role, values, metric.queries(), tl)
    return scores


def verdict(pattern: Pattern, scores: dict[str, RoleScores]) -> dict:
    """Whether the pattern's head appeared: {"needs", "role", "appeared" (bool, or None: cannot tell), "text"}."""
    found = {"needs": pattern.what, "role": pattern.role, "appeared": None, "best": None, "score": None}
    if pattern.role is None:
        return {**found, "text": f"this task needs no attention ({pattern.what})"}
    best = scores[pattern.role].best(pattern.min_layer)
    if best is None:
        return {**found, "text": f"needs {pattern.what}: cannot tell, {pattern.role} is not applicable to the probe"}
    head, value, _ = best
    appeared = value >= THRESHOLD
    text = (
        f"needs {pattern.what}: found, {head} scores {value:.2f} as {pattern.role} (>= {THRESHOLD})"
        if appeared
        else f"needs {pattern.what}: NOT found, the best is {head} at {value:.2f} as {pattern.role} (< {THRESHOLD})"
    )
    return {**found, "appeared": appeared, "best": head, "score": value, "text": text}


def summary(scores: dict[str, RoleScores]) -> dict[str, dict]:
    """Per role: the best head (highest score; for entropy, the lowest: the most focused), its score,
    the queries it rests on, and TransformerLens's figure for that head; or n/a."""
    out: dict[str, dict] = {}
    for role, s in scores.items():
        values = -s.values if role == "entropy" else s.values
        best = RoleScores(role, values, s.queries).best()
        if best is None:
            out[role] = {"best": None, "score": None, "queries": 0, "transformer_lens": None}
            continue
        head, value, queries = best
        layer, h = parse_head(head)
        tl = float(s.transformer_lens[layer, h]) if s.transformer_lens is not None else None
        out[role] = {"best": head, "score": float(s.values[layer, h]), "queries": queries, "transformer_lens": tl}
    return out


def describe(roles: dict[str, dict]) -> str:
    """One line: `previous_token L0H1 0.97 (TL 0.91) · induction n/a · ...`."""
    parts = []
    for role, r in roles.items():
        if r["best"] is None:
            parts.append(f"{role} n/a")
            continue
        tl = f" (TL {r['transformer_lens']:.2f})" if r["transformer_lens"] is not None else ""
        parts.append(f"{role} {r['best']} {r['score']:.2f}{tl}")
    return " · ".join(parts)
