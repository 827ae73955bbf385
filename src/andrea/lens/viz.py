"""Pictures of attention: text heatmaps for the terminal, PNG grids for files and dashboards.

The PNG grid is drawn straight into pixels (numpy for the heatmaps, Pillow for the text): about
a tenth of what matplotlib's figure machinery costs, which matters because maps are drawn while a
model trains. `grid_layout` decides everything (grid, ticks, labels, scale); `save_attention_grid`
only paints it.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFont
from torch import Tensor

SHADES = " ░▒▓█"
SCALES = ("log", "row", "linear")
SCALE_LABELS = {
    "log": "attention weight (log scale)",
    "row": "weight / its row's largest (row-normalised)",
    "linear": "attention weight",
}
SIGNED_LABEL = "signed weight (linear: red < 0 < blue)"  # weights that can be negative: differential attention
# a key the mask hides from the query: a grey on neither colour scale (viridis has none; red-white-blue's 0 is
# near-white), so that it never reads as a weight of 0; the PNG maps and the explorer page alike
MASKED_RGB = (184, 180, 172)  # a warm grey: no antialiased black text on white gives it either
MASKED_LABEL = "masked: the query may not see the key"
MAX_TOKEN_LABELS = 48  # beyond this many positions, numbered ticks instead of the tokens
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


@cache
def _font(size: int) -> ImageFont.FreeTypeFont:
    from matplotlib import font_manager

    return ImageFont.truetype(font_manager.findfont("DejaVu Sans"), size)


def colours(values: np.ndarray, signed: bool = False) -> np.ndarray:
    """Values in [0, 1] -> RGB: viridis, or red-white-blue (white at 0.5) for signed weights."""
    from matplotlib import colormaps

    return (colormaps["RdBu" if signed else "viridis"](values)[..., :3] * 255).astype(np.uint8)


def save_attention_grid(
    weights: Tensor | np.ndarray,
    path: str | Path,
    title: str = "",
    scale: str = "log",
    start: int = 0,
    tokens: list[str] | None = None,
    signed: bool = False,
    subtitle: str = "",
    masked: np.ndarray | None = None,
) -> str:
    """(H, T, S) per-head weights as a PNG grid of heatmaps with one shared, named colour bar. Given a
    numpy array it runs no torch op: safe on a worker thread beside a training loop's thread pool.
    `signed` weights (a mechanism's `signed`) get a red-white-blue scale symmetric about 0 instead; the
    subtitle, under the title, says what the weights are (the mechanism's weights_meaning). `masked`
    ((T, S) or (H|1, T, S) booleans, True where the mask hides the key) paints those cells MASKED_RGB, named
    under the colour bar."""
    n_head, T, S = weights.shape
    if isinstance(weights, Tensor):
        weights = weights.float().cpu().numpy()
    limit = (float(np.abs(weights).max()) or 1.0) if signed else None  # signed: the largest weight either way
    layout = grid_layout(n_head, T, S, scale, start, tokens, limit)
    px = max(1, PANEL // max(T, S), 12 if layout.tokens else 1)  # pixels per position; a token's line of text
    height, width = T * px, S * px
    small, text = _font(10), _font(12)
    label_w = max((int(small.getlength(label)) for _, label in layout.y_ticks), default=0) + 8
    label_h = (
        max((int(small.getlength(label)) for _, label in layout.x_ticks), default=0) if layout.tokens else 12
    ) + 8
    left, top, gap_x, gap_y = label_w + 22, 44, label_w + 14, label_h + 26
    colour_bar = 110
    canvas_w = left + layout.columns * width + (layout.columns - 1) * gap_x + colour_bar
    grid_h = layout.rows * height + (layout.rows - 1) * gap_y
    canvas_h = max(top + grid_h + label_h + 24, top + max(grid_h, 60) + 44)  # the bar, and the masked swatch
    image = Image.new("RGB", (canvas_w, canvas_h), "white")
    draw = ImageDraw.Draw(image)
    pixels = colours(colour_values(weights, layout), signed)  # (H, T, S, 3)
    if masked is not None:
        pixels[np.broadcast_to(masked, (n_head, T, S))] = MASKED_RGB
    for h in range(n_head):
        row, column = divmod(h, layout.columns)
        x0, y0 = left + column * (width + gap_x), top + row * (height + gap_y)
        panel = Image.fromarray(np.repeat(np.repeat(pixels[h], px, axis=0), px, axis=1))
        image.paste(panel, (x0, y0))
        draw.text((x0 + width // 2, y0 - 4), f"head {h}", fill="black", font=text, anchor="md")
        for i, label in layout.y_ticks:  # query ticks, left of each panel
            y = y0 + i * px + px // 2
            draw.line((x0 - 3, y, x0 - 1, y), fill="black")
            draw.text((x0 - 5, y), label, fill="black", font=small, anchor="rm")
        for i, label in layout.x_ticks:  # key ticks, under each panel (tokens turned upright)
            x = x0 + i * px + px // 2
            draw.line((x, y0 + height, x, y0 + height + 2), fill="black")
            if layout.tokens:
                image.paste((0, 0, 0), (x - 6, y0 + height + 4), _upright(label, small, 12))
            else:
                draw.text((x, y0 + height + 4), label, fill="black", font=small, anchor="mt")
    bar_h = _colour_bar(
        draw, image, layout, canvas_w - colour_bar + 20, top, layout.rows * height + (layout.rows - 1) * gap_y
    )
    if masked is not None and masked.any():  # the masked cells' swatch under the bar
        x, y = canvas_w - colour_bar + 20, top + bar_h + 10
        draw.rectangle((x, y, x + 13, y + 13), fill=MASKED_RGB)
        for i, word in enumerate(("masked", "(not seen)")):
            draw.text((x + 18, y + 7 + 12 * i), word, fill="black", font=small, anchor="lm")
    draw.text((canvas_w // 2, 4), title, fill="black", font=text, anchor="mt")
    draw.text((canvas_w // 2, 19), subtitle, fill="dimgray", font=small, anchor="mt")
    axis = ("key", "query") if layout.tokens else ("key position", "query position")
    draw.text((left + (canvas_w - colour_bar - left) // 2, canvas_h - 4), axis[0], fill="black", font=text, anchor="md")
    query = _upright(axis[1], text, 16)
    image.paste((0, 0, 0), (4, top + (canvas_h - top) // 2 - query.height // 2), query)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    image.save(path, compress_level=1)  # zlib's fastest: about half the default's time, a tenth larger
    return str(path)


def _colour_bar(draw: ImageDraw.ImageDraw, image: Image.Image, layout: GridLayout, x: int, y: int, h: int) -> int:
    """A vertical viridis bar with its values and its scale's name; returns its height."""
    h = max(h, 60)
    ramp = colours(np.linspace(1, 0, h)[:, None].repeat(14, axis=1), layout.limit is not None)
    image.paste(Image.fromarray(ramp), (x, y))
    small = _font(10)
    for fraction, label in scale_marks(layout):
        yy = y + int(fraction * (h - 1))
        draw.line((x + 14, yy, x + 17, yy), fill="black")
        draw.text((x + 20, yy), label, fill="black", font=small, anchor="lm")
    name = _upright(layout.colour_label, small, 12)
    image.paste((0, 0, 0), (x + 56, y + max(0, (h - name.height) // 2)), name)
    return h


def scale_marks(layout: GridLayout) -> list[tuple[float, str]]:
    """The colour bar's labelled values: (fraction of the way down from its top, label)."""
    if layout.limit is not None:
        return [(1.0 - (v + 1) / 2, f"{v * layout.limit:.2g}") for v in (-1.0, -0.5, 0.0, 0.5, 1.0)]
    if layout.scale == "log":
        low = math.log10(layout.floor)  # the bottom of the bar
        return [(1.0 - (e - low) / -low, f"1e{e}" if e else "1") for e in range(math.ceil(low), 1)]
    return [(1.0 - v, f"{v:g}") for v in (0.0, 0.25, 0.5, 0.75, 1.0)]


def _upright(label: str, font: ImageFont.FreeTypeFont, line_height: int) -> Image.Image:
    """`label` as a mask to paste in black, turned to read bottom to top."""
    word = Image.new("L", (int(font.getlength(label)) + 2, line_height), 0)
    ImageDraw.Draw(word).text((0, 0), label, fill=255, font=font)
    return word.rotate(90, expand=True)
