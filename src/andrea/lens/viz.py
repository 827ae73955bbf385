"""Pictures of attention: text heatmaps for the terminal, PNG grids for files and dashboards.

`grid_layout` decides everything a PNG grid shows (grid, ticks, labels, scale); andrea.lens.grid_png's
`save_attention_grid` only paints it.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np
from torch import Tensor

# a key the mask hides from the query, painted alike by the PNG maps, the explorer page and the mask's own picture
from andrea.attention.masks.draw import MASKED_LABEL as MASKED_LABEL
from andrea.attention.masks.draw import MASKED_RGB as MASKED_RGB

# a key the mask allows and a selection of keys left out (andrea.lens.selection_maps): painted by the weight dense
# attention would give it, faded this far toward white, so chosen (full colour), left out (pale) and masked (grey)
# read apart, and a strong weight on a key left out still shows its hue
LEFT_OUT_FADE = 0.75
LEFT_OUT_LABEL = "left out by the selection (pale: the weight dense attention would give)"

SHADES = " ░▒▓█"
SCALES = ("log", "row", "linear")
SCALE_LABELS = {
    "log": "attention weight (log scale)",
    "row": "weight / its row's largest (row-normalised)",
    "linear": "attention weight",
}
SIGNED_LABEL = "signed weight (linear: red < 0 < blue)"  # weights that can be negative: differential attention
MAX_TOKEN_LABELS = 128  # beyond this many positions, numbered ticks instead of the tokens (sinks' 128 labelled)
PANEL = 256  # pixels a head's map takes at most, each side
MAPS_DIR = "attention_maps"  # a run dir's folder of map PNGs, unless callbacks.attention_maps.dirname says otherwise
_MAP_FILE = re.compile(r"layer(\d+)_step(\d+)\.png")


def map_file(layer: int, step: int) -> str:
    """The PNG of one layer's maps at one training step, as the dashboard callback writes it."""
    return f"layer{layer}_step{step:06d}.png"


def parse_map_file(name: str) -> tuple[int, int] | None:
    """map_file's (layer, step) from a file name; None for any other file."""
    found = _MAP_FILE.fullmatch(name)
    return (int(found[1]), int(found[2])) if found else None


def weights_as_text(weights: Tensor) -> str:
    """(T, S) weights in [0, 1] as shaded characters, one row per query."""
    levels = (weights.clamp(0, 1) * (len(SHADES) - 1)).round().long().tolist()
    return "\n".join("".join(SHADES[level] * 2 for level in row) for row in levels)


def _ticks(n: int, start: int) -> list[int]:
    """Tick indices for n positions: every position up to 16, else a round step giving ~8 ticks."""
    step = 1 if n <= 16 else next(s for s in (2, 4, 5, 8, 10, 16, 20, 25, 32, 50, 64, 100, 128, 256) if n / s <= 8)
    first = (-start) % step  # ticks on positions that are multiples of the step
    return list(range(first, n, step))


@dataclass(frozen=True)
class GridLayout:
    """What a map shows: rows x columns of heads, each axis's ticks (index, label), the colour scale."""

    rows: int
    columns: int
    x_ticks: list[tuple[int, str]]  # keys
    y_ticks: list[tuple[int, str]]  # queries
    tokens: bool  # whether the ticks are the decoded tokens (else absolute positions)
    scale: str
    colour_label: str
    floor: float  # the log scale's lowest weight
    limit: float | None = None  # signed weights: the colour scale runs from -limit to +limit, whatever `scale` says


def grid_layout(
    n_head: int,
    T: int,
    S: int,
    scale: str = "log",
    start: int = 0,
    tokens: list[str] | None = None,
    limit: float | None = None,
) -> GridLayout:
    """A near-square grid (4 heads: 2 x 2, 12: 3 x 4), position ticks counted from `start` (a window's first
    position), or the tokens on both axes when there are few enough, and the named colour scale (a signed,
    linear one from -limit to +limit when `limit` is given)."""
    if scale not in SCALES:
        raise ValueError(f"scale={scale!r} must be one of {', '.join(SCALES)}")
    columns = math.ceil(math.sqrt(n_head))
    labelled = tokens is not None and max(T, S) <= MAX_TOKEN_LABELS

    def ticks(n: int) -> list[tuple[int, str]]:
        if labelled:
            assert tokens is not None
            return [(i, tokens[start + i]) for i in range(n)]
        return [(i, str(start + i)) for i in _ticks(n, start)]

    floor = min(1e-3, 0.1 / max(S, 1))
    label = SCALE_LABELS[scale] if limit is None else SIGNED_LABEL
    return GridLayout(math.ceil(n_head / columns), columns, ticks(S), ticks(T), labelled, scale, label, floor, limit)


def colour_values(weights: Tensor | np.ndarray, layout: GridLayout) -> np.ndarray:
    """(H, T, S) weights -> (H, T, S) values in [0, 1] on the layout's colour scale (0.5 is a weight of 0
    on the signed scale)."""
    w = weights.float().cpu().numpy() if isinstance(weights, Tensor) else weights
    if layout.limit is not None:
        return np.clip(0.5 + 0.5 * w / layout.limit, 0, 1)
    w = np.clip(w, 0, 1)
    if layout.scale == "log":
        return (np.log10(np.maximum(w, layout.floor)) - math.log10(layout.floor)) / -math.log10(layout.floor)
    if layout.scale == "row":
        return w / np.maximum(w.max(axis=-1, keepdims=True), 1e-12)
    return w


def colours(values: np.ndarray, signed: bool = False) -> np.ndarray:
    """Values in [0, 1] -> RGB: viridis, or red-white-blue (white at 0.5) for signed weights."""
    from matplotlib import colormaps

    return (colormaps["RdBu" if signed else "viridis"](values)[..., :3] * 255).astype(np.uint8)


def scale_marks(layout: GridLayout) -> list[tuple[float, str]]:
    """The colour bar's labelled values: (fraction of the way down from its top, label)."""
    if layout.limit is not None:
        return [(1.0 - (v + 1) / 2, f"{v * layout.limit:.2g}") for v in (-1.0, -0.5, 0.0, 0.5, 1.0)]
    if layout.scale == "log":
        low = math.log10(layout.floor)  # the bottom of the bar
        return [(1.0 - (e - low) / -low, f"1e{e}" if e else "1") for e in range(math.ceil(low), 1)]
    return [(1.0 - v, f"{v:g}") for v in (0.0, 0.25, 0.5, 0.75, 1.0)]


def faded(rgb: np.ndarray) -> np.ndarray:
    """(..., 3) uint8 colours -> the same, LEFT_OUT_FADE of the way to white: a key a selection left out."""
    return np.round(rgb * (1 - LEFT_OUT_FADE) + 255 * LEFT_OUT_FADE).astype(np.uint8)


def left_out_swatch() -> tuple[int, ...]:
    """The colour a legend shows for a key left out: the scale's middle, faded."""
    return tuple(int(c) for c in faded(colours(np.array([0.5]))[0]))
