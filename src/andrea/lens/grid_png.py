"""A PNG grid of attention maps, one heatmap per head with a shared, named colour bar, drawn straight into pixels
(numpy for the heatmaps, Pillow for the text): about a tenth of what matplotlib's figure machinery costs, which
matters because maps are drawn while a model trains. andrea.lens.viz decides the layout; this module paints it."""

from __future__ import annotations

from functools import cache, lru_cache
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
from PIL import Image, ImageDraw, ImageFont
from torch import Tensor

from andrea.lens.viz import (
    MASKED_RGB,
    PANEL,
    GridLayout,
    colour_values,
    colours,
    faded,
    grid_layout,
    left_out_swatch,
    scale_marks,
)

MARGIN = 4  # pixels of white round the header's text
NAME_ROOM = 24  # from the header's last line to a panel's top: the panel's name (12 pt) and a gap either side


class _Line(NamedTuple):
    """One line of the header, `bottom` the y of its descender line."""

    text: str
    font: ImageFont.FreeTypeFont
    colour: str
    bottom: int


def save_attention_grid(weights: Tensor | np.ndarray, path: str | Path, title: str = "", **drawn: Any) -> str:
    """render_attention_grid's picture as a PNG at `path` (its folder made); returns the path."""
    return save_png(render_attention_grid(weights, title, **drawn), path)


def save_png(image: Image.Image, path: str | Path) -> str:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    image.save(path, compress_level=1)  # zlib's fastest: about half the default's time, a tenth larger
    return str(path)


def render_attention_grid(
    weights: Tensor | np.ndarray,
    title: str = "",
    scale: str = "log",
    start: int = 0,
    tokens: list[str] | None = None,
    signed: bool = False,
    subtitle: str = "",
    masked: np.ndarray | None = None,
    left_out: np.ndarray | None = None,
) -> Image.Image:
    """(H, T, S) per-head weights as a picture: a grid of heatmaps with one shared, named colour bar. Given a
    numpy array it runs no torch op: safe on a worker thread beside a training loop's thread pool.
    `signed` weights (a mechanism's `signed`) get a red-white-blue scale symmetric about 0 instead; the
    subtitle, under the title (each wrapped to the grid's width), says what the weights are (the mechanism's
    weights_meaning). `masked`
    ((T, S) or (H|1, T, S) booleans, True where the mask hides the key) paints those cells MASKED_RGB, named
    under the colour bar; `left_out` ((H|1, T, S) booleans: keys a selection of keys left out, the weights then
    dense attention's, andrea.lens.selection_maps) paints those cells pale (viz.faded), named there too."""
    n_head, T, S = weights.shape
    if isinstance(weights, Tensor):
        weights = weights.float().cpu().numpy()
    limit = (float(np.abs(weights).max()) or 1.0) if signed else None  # signed: the largest weight either way
    layout = grid_layout(n_head, T, S, scale, start, tokens, limit)
    px = max(1, PANEL // max(T, S), 12 if layout.tokens else 1)  # pixels per position; a token's line of text
    height, width = T * px, S * px
    label_w, label_h = _tick_margins(layout, _font(10))
    left, gap_x, gap_y = label_w + 22, label_w + 14, label_h + 26
    colour_bar = 110
    canvas_w = left + layout.columns * width + (layout.columns - 1) * gap_x + colour_bar
    header, header_h = _header(title, subtitle, canvas_w - 2 * MARGIN)
    top = header_h + NAME_ROOM  # the panels' names sit between the header and the panels
    grid_h = layout.rows * height + (layout.rows - 1) * gap_y
    swatches = 44 + (34 if left_out is not None else 0)  # under the bar: the masked swatch, the left-out one
    canvas_h = max(top + grid_h + label_h + 24, top + max(grid_h, 60) + swatches)
    image = Image.new("RGB", (canvas_w, canvas_h), "white")
    draw = ImageDraw.Draw(image)
    pixels = _cells(weights, layout, signed, masked, left_out)  # (H, T, S, 3)
    for h in range(n_head):
        row, column = divmod(h, layout.columns)
        x0, y0 = left + column * (width + gap_x), top + row * (height + gap_y)
        _panel(draw, image, layout, pixels[h], f"head {h}", (x0, y0), px)
    bar_h = _colour_bar(draw, image, layout, canvas_w - colour_bar + 20, top, grid_h)
    _swatches(draw, (canvas_w - colour_bar + 20, top + bar_h + 10), masked, left_out)
    for line in header:
        draw.text((canvas_w // 2, line.bottom), line.text, fill=line.colour, font=line.font, anchor="md")
    _axis_names(draw, image, layout, (left, top, canvas_w - colour_bar, canvas_h))
    return image


def _header(title: str, subtitle: str, width: int) -> tuple[list[_Line], int]:
    """The title's and the subtitle's lines, each wrapped to `width` pixels, and the y under the last. A subtitle
    says what a weight is (a mixer's implied weights take a sentence): in one line it would run off a narrow grid
    and over the panels' names, so it takes as many lines as it needs and the panels start under them."""
    lines, y = [], MARGIN
    for text, font, colour, height in ((title, _font(12), "black", 15), (subtitle, _font(10), "dimgray", 13)):
        for line in _wrap(text, font, width):
            y += height
            lines.append(_Line(line, font, colour, y))
    return lines, y


def _wrap(text: str, font: ImageFont.FreeTypeFont, width: int) -> list[str]:
    """`text` in lines of whole words at most `width` pixels wide (a longer word alone on its line)."""
    lines: list[str] = []
    for word in text.split():
        if lines and font.getlength(f"{lines[-1]} {word}") <= width:
            lines[-1] += f" {word}"
        else:
            lines.append(word)
    return lines


def _tick_margins(layout: GridLayout, font: ImageFont.FreeTypeFont) -> tuple[int, int]:
    """The room the query ticks take left of a panel, and the key ticks under it (tokens: their length)."""
    width = max((int(font.getlength(label)) for _, label in layout.y_ticks), default=0) + 8
    longest_key = max((int(font.getlength(label)) for _, label in layout.x_ticks), default=0)
    return width, (longest_key if layout.tokens else 12) + 8


def _axis_names(
    draw: ImageDraw.ImageDraw, image: Image.Image, layout: GridLayout, box: tuple[int, int, int, int]
) -> None:
    """The keys' axis name under the grid and the queries' upright left of it, `box` (left, top, right, bottom)."""
    left, top, right, bottom = box
    text = _font(12)
    axis = ("key", "query") if layout.tokens else ("key position", "query position")
    draw.text((left + (right - left) // 2, bottom - 4), axis[0], fill="black", font=text, anchor="md")
    query = _upright(axis[1], text, 16)
    image.paste((0, 0, 0), (4, top + (bottom - top) // 2 - query.height // 2), query)


def _panel(
    draw: ImageDraw.ImageDraw,
    image: Image.Image,
    layout: GridLayout,
    pixels: np.ndarray,
    name: str,
    at: tuple[int, int],
    px: int,
) -> None:
    """One head's heatmap, (T, S, 3) `pixels` at `px` pixels a position, with its name and its query and key ticks."""
    x0, y0 = at
    height, width = pixels.shape[0] * px, pixels.shape[1] * px
    small, text = _font(10), _font(12)
    image.paste(Image.fromarray(np.repeat(np.repeat(pixels, px, axis=0), px, axis=1)), (x0, y0))
    draw.text((x0 + width // 2, y0 - 4), name, fill="black", font=text, anchor="md")
    for i, label in layout.y_ticks:  # query ticks, left of the panel
        y = y0 + i * px + px // 2
        draw.line((x0 - 3, y, x0 - 1, y), fill="black")
        draw.text((x0 - 5, y), label, fill="black", font=small, anchor="rm")
    for i, label in layout.x_ticks:  # key ticks, under the panel (tokens turned upright)
        x = x0 + i * px + px // 2
        draw.line((x, y0 + height, x, y0 + height + 2), fill="black")
        if layout.tokens:
            image.paste((0, 0, 0), (x - 6, y0 + height + 4), _upright(label, small, 12))
        else:
            draw.text((x, y0 + height + 4), label, fill="black", font=small, anchor="mt")


def _cells(
    weights: np.ndarray, layout: GridLayout, signed: bool, masked: np.ndarray | None, left_out: np.ndarray | None
) -> np.ndarray:
    """(H, T, S) weights -> their colours (H, T, S, 3): the scale's, a key left out pale, a masked one grey."""
    pixels = colours(colour_values(weights, layout), signed)
    if left_out is not None:
        pale = np.broadcast_to(left_out, weights.shape)
        pixels[pale] = faded(pixels[pale])
    if masked is not None:
        pixels[np.broadcast_to(masked, weights.shape)] = MASKED_RGB
    return pixels


def _swatches(
    draw: ImageDraw.ImageDraw, at: tuple[int, int], masked: np.ndarray | None, left_out: np.ndarray | None
) -> None:
    """Under the colour bar: the masked cells' swatch, and the left-out cells', where the map has any."""
    x, y = at
    if masked is not None and masked.any():
        _swatch(draw, x, y, MASKED_RGB, ("masked", "(not seen)"))
        y += 34
    if left_out is not None and left_out.any():
        _swatch(draw, x, y, left_out_swatch(), ("left out", "(pale)"))


def _swatch(draw: ImageDraw.ImageDraw, x: int, y: int, rgb: tuple[int, ...], words: tuple[str, str]) -> None:
    """A kind of cell's colour (the masked, the left out), named in two lines, under the colour bar."""
    draw.rectangle((x, y, x + 13, y + 13), fill=rgb)
    for i, word in enumerate(words):
        draw.text((x + 18, y + 7 + 12 * i), word, fill="black", font=_font(10), anchor="lm")


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


@cache
def _font(size: int) -> ImageFont.FreeTypeFont:
    from matplotlib import font_manager

    return ImageFont.truetype(font_manager.findfont("DejaVu Sans"), size)


@lru_cache(maxsize=4096)  # a token's label is drawn under every head of every map: rendered once
def _upright(label: str, font: ImageFont.FreeTypeFont, line_height: int) -> Image.Image:
    """`label` as a mask to paste in black, turned to read bottom to top (shared: pasted, never drawn on)."""
    word = Image.new("L", (int(font.getlength(label)) + 2, line_height), 0)
    ImageDraw.Draw(word).text((0, 0), label, fill=255, font=font)
    return word.rotate(90, expand=True)
