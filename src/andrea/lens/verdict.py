"""Every head's role scores on a probe batch, the best head per role, and whether the head a task
needs appeared (each synthetic task declares its Pattern: andrea.data.tasks)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

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
    rows: int = 0  # the probe rows the scores are averaged over

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
        scores[role] = RoleScores(role, values, metric.queries(), tl, rows=input_ids.shape[0])
    return scores


def verdict(pattern: Pattern, scores: dict[str, RoleScores], reads: dict[str, dict] | None = None) -> dict:
    """Whether the pattern's head appeared: {"needs", "role", "appeared" (bool, or None: cannot tell), "best",
    "score", "heads" (every head meeting the role, best first), "reads" (andrea.lens.circuit.sources: the
    earlier head each of them reads, where the role reads one), "text"}."""
    found: dict[str, Any] = {"needs": pattern.what, "role": pattern.role, "appeared": None, "best": None}
    found |= {"score": None, "heads": [], "reads": reads or {}}
    if pattern.role is None:
        return {**found, "text": f"this task needs no attention ({pattern.what})"}
    best = scores[pattern.role].best(pattern.min_layer)
    if best is None:
        return {**found, "text": f"needs {pattern.what}: cannot tell, {pattern.role} is not applicable to the probe"}
    head, value, queries = best
    appeared = value >= THRESHOLD
    heads = [[name, score] for name, score in meeting(scores[pattern.role].values, THRESHOLD, pattern.min_layer)]
    rows = f"on {scores[pattern.role].rows} probe rows"
    text = (
        f"needs {pattern.what}: found, {head} scores {value:.2f} as {pattern.role} (>= {THRESHOLD})"
        if appeared
        else f"needs {pattern.what}: NOT found, the best is {head} at {value:.2f} as {pattern.role} (< {THRESHOLD})"
    )
    others = [f"{name} {score:.2f}" for name, score in heads if name != head]
    text += f", and {', '.join(others)}" if others else ""
    text += "".join(_read_text(pattern.role, reads or {}, scores))
    return {**found, "appeared": appeared, "best": head, "score": value, "heads": heads, "text": f"{text} ({rows})"}


def _read_text(role: str, reads: dict[str, dict], scores: dict[str, RoleScores]) -> list[str]:
    """'; L1H0, L1H2 read L0H3, previous_token 0.40 (ablated: induction 0.97 -> 0.08, K-composition 0.31)'
    per earlier head read."""
    by_source: dict[str, list[str]] = {}
    for reader, read in sorted(reads.items()):
        by_source.setdefault(read["reads"], []).append(reader)
    parts = []
    for source, readers in by_source.items():
        before = sum(reads[r]["score"] for r in readers) / len(readers)
        after = sum(reads[r]["ablated"] for r in readers) / len(readers)
        compositions = [reads[r]["composition"] for r in readers if reads[r]["composition"] is not None]
        mode = reads[readers[0]]["mode"]
        composed = f", {mode}-composition {sum(compositions) / len(compositions):.2f}" if compositions else ""
        verb = "reads" if len(readers) == 1 else "read"
        source_role = reads[readers[0]]["source_role"]
        layer, head = parse_head(source)
        own = f", {source_role} {float(scores[source_role].values[layer, head]):.2f}" if source_role in scores else ""
        parts.append(
            f"; {', '.join(readers)} {verb} {source}{own} (ablated: {role} {before:.2f} -> {after:.2f}{composed})"
        )
    return parts


def meeting(values: Tensor, threshold: float, min_layer: int = 0) -> list[tuple[str, float]]:
    """Every head (name, score) in layers >= min_layer whose score (L, H) reaches the threshold, best first."""
    found = [
        (head_name(layer, head), float(values[layer, head]))
        for layer in range(min_layer, values.shape[0])
        for head in range(values.shape[1])
        if float(values[layer, head]) >= threshold  # NaN (not applicable) never does
    ]
    return sorted(found, key=lambda item: -item[1])


def summary(scores: dict[str, RoleScores], pattern: Pattern | None = None) -> dict[str, dict]:
    """Per role: the best head (highest score; for entropy, the lowest: the most focused), its score,
    the queries it rests on, and TransformerLens's figure for that head; or n/a. The role a task's `pattern`
    needs is looked for where the verdict looks (layers >= its min_layer), so that both name the same head."""
    out: dict[str, dict] = {}
    for role, s in scores.items():
        values = -s.values if role == "entropy" else s.values
        min_layer = pattern.min_layer if pattern is not None and role == pattern.role else 0
        best = RoleScores(role, values, s.queries).best(min_layer)
        if best is None:
            out[role] = {"best": None, "score": None, "queries": 0, "transformer_lens": None}
            continue
        head, value, queries = best
        layer, h = parse_head(head)
        tl = float(s.transformer_lens[layer, h]) if s.transformer_lens is not None else None
        out[role] = {"best": head, "score": float(s.values[layer, h]), "queries": queries, "transformer_lens": tl}
        if min_layer:
            out[role]["min_layer"] = min_layer
    return out


def describe(roles: dict[str, dict]) -> str:
    """One line: `previous_token L0H1 0.97 (TL 0.91) · induction L1H2 0.88 (layers >= 1, as the task needs) · ...`."""
    parts = []
    for role, r in roles.items():
        if r["best"] is None:
            parts.append(f"{role} n/a")
            continue
        tl = f" (TL {r['transformer_lens']:.2f})" if r["transformer_lens"] is not None else ""
        where = f" (layers >= {r['min_layer']}, as the task needs)" if r.get("min_layer") else ""
        parts.append(f"{role} {r['best']} {r['score']:.2f}{tl}{where}")
    return " · ".join(parts)
