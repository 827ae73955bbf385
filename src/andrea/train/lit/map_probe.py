"""What AttentionMaps hands its drawing worker and gets back: a record's weights as numpy arrays with how to draw
them (`probe_job`, on the training thread), and the maps drawn from them (`draw`, on the worker: numpy and Pillow
only, no torch op off the training thread), each as its PNG and its pixels, which a dashboard takes from memory."""

from __future__ import annotations

import os
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from torch import Tensor

from andrea.lens.grid_png import render_attention_grid, save_png
from andrea.lens.selection_maps import SelectionMap, drawn
from andrea.lens.viz import map_file
from andrea.models.network import Network
from andrea.models.weight_styles import WeightStyle, allowed_of, weight_styles

LOWEST_PRIORITY = 19  # the drawing worker's nice value


def lowest_priority() -> None:
    """Run the calling thread (the drawing worker's) at the lowest CPU priority; Linux gives each thread a nice
    value of its own. At the training thread's priority, a record's drawing (about 0.9 s of numpy, Pillow and
    Python for the small GPT's four PNGs) takes its share of the two cores from every step while it lasts: a step
    of 55 ms took 185 ms. At the lowest, it draws in what training leaves idle, and the step is unchanged
    (scripts/bench_pipeline.py's step column). Elsewhere (macOS sets a whole process's priority) nothing changes."""
    if sys.platform == "linux":
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), LOWEST_PRIORITY)


@dataclass
class Probe:
    """What the training thread hands the worker: the drawn row's weights and how to draw them."""

    step: int
    maps: dict[int, np.ndarray]  # layer -> (H, T, T) weights of the drawn row (the window's)
    start: int  # the window's first position
    tokens: list[str] | None  # the drawn row's decoded tokens (text data)
    styles: list[WeightStyle]  # each layer's label, mask, what its weights are, whether they can be negative
    hidden: dict[int, np.ndarray] = field(default_factory=dict)  # layer -> (T, T) True where the mask hides a key
    left_out: dict[int, np.ndarray] = field(default_factory=dict)  # layer -> (H, T, T) a selection's left-out keys


@dataclass(frozen=True)
class DrawnMap:
    """One layer's map: its PNG, and the same picture's pixels (H, W, 3) uint8, for a dashboard to take as they are."""

    layer: int
    path: Path
    pixels: np.ndarray


@dataclass
class Drawn:  # what the worker hands back: the step and its maps
    step: int
    maps: list[DrawnMap] = field(default_factory=list)


def probe_job(
    net: Network,
    weights: list[Tensor],
    row_ids: list[int],
    row: int,
    tokenizer: Any,
    step: int,
    window: int | None,
    layers: list[int] | None,
    selected: dict[int, SelectionMap],
) -> Probe:
    """Row `row`'s maps, of `weights` one (B, H, T, T) per layer, as the worker draws them: the chosen layers, the
    last `window` positions, the row's tokens (text data), the cells each layer's mask hides; for a layer with a
    selection of keys (`selected`, andrea.lens.selection_maps), its dense weights and the keys it left out."""
    tokens = [tokenizer.decode([i]).replace("\n", "⏎") for i in row_ids] if tokenizer is not None else None
    start = max(0, weights[0].shape[-1] - window) if window else 0
    chosen = range(len(weights)) if layers is None else layers
    shown = drawn(weights, selected)
    maps = {layer: shown[layer][row, :, start:, start:].float().cpu().numpy() for layer in chosen}
    left_out = {i: m.left_out[row, :, start:, start:].cpu().numpy() for i, m in selected.items() if i in maps}
    allowed = allowed_of(net, weights[0].shape[-1])  # None: a mask of the batch's, not drawn
    hidden = {} if allowed is None else {layer: (~allowed[layer][start:, start:]).numpy() for layer in chosen}
    return Probe(step, maps, start, tokens, weight_styles(net), hidden, left_out)


def draw(job: Probe, out_dir: Path, row: int, scale: str) -> Drawn:
    """A map per chosen layer: its PNG in `out_dir`, and its pixels."""
    drawn = Drawn(job.step)
    for layer, shown in job.maps.items():
        style = job.styles[layer]
        title = f"layer {layer} · step {job.step} · {style.mask} · {style.label} · probe row {row}"
        image = render_attention_grid(
            shown, title, scale, job.start, job.tokens, signed=style.signed, subtitle=style.meaning,
            masked=job.hidden.get(layer), left_out=job.left_out.get(layer),
        )  # fmt: skip
        path = Path(save_png(image, out_dir / map_file(layer, job.step)))
        drawn.maps.append(DrawnMap(layer, path, np.asarray(image)))
    return drawn
