"""Pictures of attention: text heatmaps for the terminal, PNG grids for files and dashboards."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure
from torch import Tensor

SHADES = " ░▒▓█"
SCALES = ("log", "row", "linear")
SCALE_LABELS = {
    "log": "attention weight (log scale)",
    "row": "weight / its row's largest (row-normalised)",
    "linear": "attention weight",
}
MAX_TOKEN_LABELS = 48  # beyond this many positions, numbered ticks instead of the tokens


def weights_as_text(weights: Tensor) -> str:
    """(T, S) weights in [0, 1] as shaded characters, one row per query."""
    levels = (weights.clamp(0, 1) * (len(SHADES) - 1)).round().long().tolist()
    return "\n".join("".join(SHADES[level] * 2 for level in row) for row in levels)


def _ticks(n: int, start: int) -> list[int]:
    """Tick indices for n positions: every position up to 16, else a round step giving ~8 ticks."""
    step = 1 if n <= 16 else next(s for s in (2, 4, 5, 8, 10, 16, 20, 25, 32, 50, 64, 100, 128, 256) if n / s <= 8)
    first = (-start) % step  # ticks on positions that are multiples of the step
    return list(range(first, n, step))


def attention_figure(
    weights: Tensor,
    title: str = "",
    scale: str = "log",
    start: int = 0,
    tokens: list[str] | None = None,
) -> Figure:
    """(H, T, S) per-head weights as a near-square grid of heatmaps with one shared, named colour bar.

    scale: "log" (weights near 1/T stay visible), "row" (each query row divided by its largest
    weight) or "linear". start: the absolute position of the first row and column (a window).
    tokens: the decoded token of each position, drawn on both axes when there are few enough.
    """
    from matplotlib.colors import LogNorm, Normalize

    if scale not in SCALES:
        raise ValueError(f"scale={scale!r} must be one of {', '.join(SCALES)}")
    n_head, T, S = weights.shape
    columns = math.ceil(math.sqrt(n_head))  # 4 heads: 2 x 2, 12: 4 x 3 — readable at a card's width
    rows = math.ceil(n_head / columns)
    panel = 2.6 if tokens is None or T > MAX_TOKEN_LABELS else 3.4
    fig = Figure(figsize=(panel * columns + 1.2, panel * rows + 0.6), dpi=100, layout="constrained")
    axes = fig.subplots(rows, columns, squeeze=False)
    values = weights.float().cpu()
    if scale == "row":
        values = values / values.amax(dim=-1, keepdim=True).clamp(min=1e-12)
    floor = min(1e-3, 0.1 / max(S, 1))
    norm = LogNorm(vmin=floor, vmax=1.0) if scale == "log" else Normalize(vmin=0.0, vmax=1.0)
    labelled = tokens is not None and max(T, S) <= MAX_TOKEN_LABELS
    for h, ax in enumerate(axes.flat):
        if h >= n_head:
            ax.set_axis_off()
            continue
        shown = values[h].clamp(min=floor) if scale == "log" else values[h]
        image = ax.imshow(shown.numpy(), cmap="viridis", norm=norm, interpolation="nearest")
        ax.set_title(f"head {h}", fontsize=9)
        for n, set_ticks, set_labels in (
            (S, ax.set_xticks, ax.set_xticklabels),
            (T, ax.set_yticks, ax.set_yticklabels),
        ):
            ticks = list(range(n)) if labelled else _ticks(n, start)
            assert tokens is not None or not labelled
            labels = [tokens[start + t] if tokens is not None and labelled else str(start + t) for t in ticks]
            set_ticks(ticks)
            set_labels(labels, fontsize=6 if labelled else 7)
        if labelled:
            ax.tick_params(axis="x", labelrotation=90)
    fig.supxlabel("key" if labelled else "key position", fontsize=9)
    fig.supylabel("query" if labelled else "query position", fontsize=9)
    fig.colorbar(image, ax=axes, shrink=0.8, label=SCALE_LABELS[scale])
    if title:
        fig.suptitle(title, fontsize=10)
    return fig


def save_attention_grid(weights: Tensor, path: str | Path, **options: Any) -> str:
    """attention_figure(weights, **options) as a PNG at `path`. Uses no pyplot state: safe on a worker thread."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    attention_figure(weights, **options).savefig(path)
    return str(path)
