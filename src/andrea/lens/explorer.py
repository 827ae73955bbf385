"""The attention explorer: one self-contained HTML page (no network), titled with the run's name, showing every
layer and head of a network. Views: this input, and (with a run dir) the mean pattern and role scores over the run's
validation rows, each role's best head on it named. Hover a token to see what it attends to in the selected head;
click a head to select it and see it enlarged (its rows and columns labelled with their positions and tokens), with
its composition scores against the heads of other layers; the direct logit attribution of every head; with a run
dir, the maps the run drew across its training steps. `explorer_for` computes the views from a network and writes
the page.

Maps use the PNG maps' colour scale (andrea.lens.viz: viridis on a log scale, red-white-blue for signed
weights), masked cells grey. The weights travel inside the page as bytes: a colour byte, a weight byte
(round(255 · A), or round(127.5 · (A / max|A| + 1)) when signed) and a mask byte per cell: 3 · L · H · T²
bytes a view. The behaviour is explorer.js beside this file.
"""

from __future__ import annotations

import base64
import html
import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from andrea.lens.attribution import Attribution, logit_attribution
from andrea.lens.composition import MODES, composition_scores
from andrea.lens.heads import SHORT_NAMES, head_name, parse_head
from andrea.lens.selection_maps import drawn, selection_maps
from andrea.lens.verdict import score_heads, summary
from andrea.lens.viz import (
    LEFT_OUT_FADE,
    LEFT_OUT_LABEL,
    MASKED_LABEL,
    MASKED_RGB,
    GridLayout,
    colour_values,
    colours,
    grid_layout,
    left_out_swatch,
    scale_marks,
)
from andrea.models.network import Network, all_attention
from andrea.models.weight_styles import allowed_of, weight_styles


@dataclass(frozen=True)
class View:
    """One set of maps: tokens (T,), weights one (H, T, T) per layer, scores role -> (L, H) (NaN: not
    applicable), allowed one (T, T) per layer (True where the mask lets the query see the key; None: all), best
    role -> (its best head on these maps, "L1H2", and its score); a layer with a selection of keys shows the weights
    dense attention would give (andrea.lens.selection_maps), left_out marking the keys its selection left out."""

    name: str
    tokens: list[str]
    weights: list[Tensor]
    scores: dict[str, Tensor]
    allowed: list[Tensor] | None = None
    best: dict[str, tuple[str, float]] = field(default_factory=dict)
    left_out: list[Tensor] | None = None  # one (H, T, T) per layer: keys a selection left out (weights then dense)


@dataclass(frozen=True)
class About:
    """What the page names: where the weights come from, what they mean, which heads are ablated."""

    checkpoint: str
    backend: str = ""
    mechanism: str = "softmax"
    mask: str = ""
    meaning: str = "softmax weights (each row sums to 1)"
    signed: bool = False
    ablated: list[str] = field(default_factory=list)
    ablation: str = "zero"
    start: str | None = None  # the head the page opens on (the run's task's best, "L1H2"); None: L0H0
    start_why: str = ""  # why that head, said beside it
    run: str = ""  # the run's name, its folder's: the page's title ("": the checkpoint's name)


def _encode(view: View, signed: bool, limit: float) -> dict:
    stacked = torch.stack([w.float() for w in view.weights])  # (L, H, T, T)
    L, H, T, _ = stacked.shape
    layout = grid_layout(H, T, T, scale="log", limit=limit if signed else None)
    shade = np.round(colour_values(stacked.reshape(L * H, T, T), layout) * 255).astype(np.uint8)
    levels = (stacked / limit + 1) * 127.5 if signed else stacked.clamp(0, 1) * 255  # one byte a weight
    allowed = torch.stack(view.allowed) if view.allowed is not None else torch.ones(L, T, T, dtype=torch.bool)
    scores = {
        role: [[None if math.isnan(x) else x for x in row] for row in s.tolist()] for role, s in view.scores.items()
    }
    return {
        "name": view.name, "T": T, "tokens": view.tokens, "scores": scores,
        "colours": _b64(shade), "weights": _b64(levels.round().to(torch.uint8).numpy()),
        "masked": _b64((~allowed).to(torch.uint8).numpy()),
        "left_out": _left_out(view),
        "best": {role: [*parse_head(head), score] for role, (head, score) in view.best.items()},
    }  # fmt: skip


def _left_out(view: View) -> str | None:
    """The left-out bytes (L, H, T, T), 1 where a selection left the key out; None where no layer has one."""
    return None if view.left_out is None else _b64(torch.stack(view.left_out).to(torch.uint8).numpy())


def _b64(array: np.ndarray) -> str:
    return base64.b64encode(np.ascontiguousarray(array).tobytes()).decode()


def explorer_page(
    views: list[View],
    about: About,
    steps: dict[int, list[tuple[int, Path]]] | None = None,
    attribution: tuple[str, Attribution] | None = None,
    composition: dict[str, Tensor] | None = None,
) -> str:
    """The page: `views` (the first shown first), steps layer -> [(step, PNG path)] drawn during training,
    attribution (what it is toward, the parts' terms), composition mode -> (L, H, L, H) scores."""
    L, H = len(views[0].weights), views[0].weights[0].shape[0]
    title = about.run or about.checkpoint
    limit = _limit(views) if about.signed else 1.0
    layout = grid_layout(H, 2, 2, scale="log", limit=limit if about.signed else None)
    payload = _payload(views, about, limit, steps, composition)
    layers = "".join(_layer(layer, H, about) for layer in range(L))
    choices = "".join(_choice(i, view) for i, view in enumerate(views))
    frames = "".join(_steps_view(layer, f) for layer, f in (steps or {}).items() if f)
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title><style>{_asset("explorer.css")}</style>
</head><body>
<h1>{html.escape(title)}</h1>
{_about(about)}
<p>Hover a query token to see what it attends to in the selected head (<b id="selected"></b>{_why(about)}); click a
head to select it and enlarge it. Weights: {html.escape(about.meaning)}.</p>
<div class="views">{choices}</div>
<p id="best"></p>
{_legend(layout, views)}
<div>queries (hover):</div><div id="queries" class="strip"></div>
<div>keys, shaded by the weight the query gives them:</div><div id="keys" class="strip"></div>
<div id="readout"></div>
<div class="main"><div><h2>Every layer and head</h2>{layers}</div>
<div class="side"><div id="big-title"></div><div class="big"><div id="big-rows" class="ticks"></div><canvas id="big">
</canvas><div class="axes">query ↓<br>key →</div><div id="big-columns" class="ticks"></div></div>
<div id="composition"></div></div></div>
{_attribution(attribution, L, H) if attribution else ""}
{_across_training(frames, about)}
<script type="application/json" id="data">{payload}</script>
<script>{_asset("explorer.js")}</script>
</body></html>
"""


def _why(about: About) -> str:
    """Why the page opens on its head: the run's task's best over its probe rows; without a task, the first."""
    if not about.start:
        return ", opened on L0H0, the first head: no run's task names a role to choose one by"
    return f", opened on {html.escape(about.start)}: {html.escape(about.start_why)}, over the run's probe rows"


def _limit(views: list[View]) -> float:
    """The largest weight either way over every view: a signed colour scale's ends."""
    every = torch.cat([torch.stack([w.float() for w in v.weights]).flatten() for v in views])
    return every.abs().max().item() or 1.0


def _layer(layer: int, n_head: int, about: About) -> str:
    return f'<div class="layer"><h3>layer {layer}</h3>{"".join(_card(layer, h, about) for h in range(n_head))}</div>'


def _choice(i: int, view: View) -> str:
    checked = " checked" if i == 0 else ""
    return f'<label><input type="radio" name="view" value="{i}"{checked}> {html.escape(view.name)}</label>'


def _payload(
    views: list[View],
    about: About,
    limit: float,
    steps: dict[int, list[tuple[int, Path]]] | None,
    composition: dict[str, Tensor] | None,
) -> str:
    """What the page's script reads, as JSON that cannot close its script element early."""
    data = {
        "L": len(views[0].weights), "H": views[0].weights[0].shape[0], "signed": about.signed, "limit": limit,
        "ablated": about.ablated, "start": list(parse_head(about.start)) if about.start else [0, 0],
        "short": SHORT_NAMES, "views": [_encode(v, about.signed, limit) for v in views],
        "lut": colours(np.linspace(0, 1, 256), about.signed).tolist(), "masked_rgb": list(MASKED_RGB),
        "left_out_fade": LEFT_OUT_FADE,
        "composition": {mode: s.tolist() for mode, s in (composition or {}).items()},
        "steps": {str(layer): [[step, _data_url(p)] for step, p in frames] for layer, frames in (steps or {}).items()},
    }  # fmt: skip
    return json.dumps(data).replace("</", "<\\/")


def _across_training(frames: str, about: About) -> str:
    """The maps the run drew while it trained, when it drew any."""
    without = " while it trained, without the ablation" if about.ablated else ""
    return f"<h2>Across training</h2><p>the maps the run drew{without}</p>{frames}" if frames else ""


def _asset(name: str) -> str:
    return resources.files("andrea.lens").joinpath(name).read_text()


def _about(about: About) -> str:
    parts = [("checkpoint", about.checkpoint), ("backend", about.backend), ("mechanism", about.mechanism)]
    parts += [("mask", about.mask)]
    shown = " · ".join(f"{name} <b>{html.escape(value)}</b>" for name, value in parts if value)
    if about.ablated:
        note = f"ablated ({html.escape(about.ablation)}): {', '.join(about.ablated)}"
        shown += f' · <span class="ablated-note">{note}</span>'
    return f'<p class="about">{shown}</p>'


def _legend(layout: GridLayout, views: list[View]) -> str:
    """The colour scale as a bar with its marks, the masked cells' grey, and (where a view has any) the pale of the
    keys a selection left out."""
    pale = _left_out_swatch() if any(view.left_out is not None for view in views) else ""
    stops = ", ".join(f"rgb{tuple(c)}" for c in colours(np.linspace(0, 1, 9), layout.limit is not None).tolist())
    marks = "".join(
        f'<span style="left: {100 * (1 - fraction):.1f}%">{html.escape(label)}</span>'
        for fraction, label in scale_marks(layout)
    )
    return (
        f'<div class="legend"><div class="bar" style="background: linear-gradient(to right, {stops})"></div>'
        f'<div class="marks">{marks}</div><div>{html.escape(layout.colour_label)}, as in the PNG maps · '
        f'<span class="masked-swatch" style="background: rgb{MASKED_RGB}"></span> {MASKED_LABEL}{pale}</div></div>'
    )


def _left_out_swatch() -> str:
    swatch = left_out_swatch()
    return f' · <span class="masked-swatch" style="background: rgb{swatch}"></span> {LEFT_OUT_LABEL}'


def _card(layer: int, head: int, about: About) -> str:
    name = head_name(layer, head)
    ablated = name in about.ablated
    badge = f'<span class="badge">ablated ({html.escape(about.ablation)})</span>' if ablated else ""
    return (
        f'<div class="head{" ablated" if ablated else ""}" data-layer="{layer}" data-head="{head}">'
        f'<div class="name">{name} {badge}</div><canvas></canvas><div class="scores"></div></div>'
    )


def _attribution(attribution: tuple[str, Attribution], L: int, H: int) -> str:
    """Every part's direct effect as a table, cells shaded blue (toward) or red (against)."""
    toward, a = attribution
    peak = max(float(a.heads[..., 0].abs().max()), 1e-9)

    def cell(value: float) -> str:
        colour = "31, 95, 191" if value >= 0 else "200, 40, 40"
        return f'<td style="background: rgba({colour}, {min(1.0, abs(value) / peak) * 0.6:.2f})">{value:+.2f}</td>'

    mlp = a.mlp.shape[0] > 0
    head_cols = "".join(f"<th>H{h}</th>" for h in range(H))
    rows = "".join(
        f"<tr><th>layer {layer}</th>" + "".join(cell(float(a.heads[layer, h, 0])) for h in range(H))
        + cell(float(a.attn_bias[layer, 0])) + (cell(float(a.mlp[layer, 0])) if mlp else "") + "</tr>"
        for layer in range(L)
    )  # fmt: skip
    rest = f"embeddings {float(a.embed[0]):+.2f} · final norm's bias {float(a.norm_bias[0]):+.2f}"
    return (
        f"<h2>Direct logit attribution</h2><p>What each part writes toward {html.escape(toward)} at the last position, "
        f"read through the final norm (its scale frozen at this input's); the parts add up to the logit, "
        f"{float(a.total[0]):.2f}. {rest}.</p>"
        f'<table class="attribution"><tr><th></th>{head_cols}<th>W_O bias</th>{"<th>MLP</th>" if mlp else ""}</tr>'
        f"{rows}</table>"
    )


def _steps_view(layer: int, frames: list[tuple[int, Path]]) -> str:
    last = len(frames) - 1
    step, path = frames[last]
    return (
        f'<div class="steps"><div>layer {layer} · <span class="step">step {step}</span></div>'
        f'<input type="range" min="0" max="{last}" value="{last}" data-layer="{layer}">'
        f'<img alt="layer {layer} across training" src="{_data_url(path)}"></div>'
    )


def _data_url(path: Path) -> str:
    return "data:image/png;base64," + base64.b64encode(Path(path).read_bytes()).decode()


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
    scores, best = _scores(net, weights, ids)  # from the weights the heads used
    maps, left_out = _drawn(net, ids, weights)
    shown = [w[0].float().cpu() for w in maps]
    left = None if left_out is None else [m[0].cpu() for m in left_out]
    return View("this input", tokens, shown, scores, allowed_of(net, ids.shape[1]), best, left)


@torch.no_grad()
def mean_view(net: Network, rows: Tensor, what: str) -> View:
    """rows (B, T): the mean pattern over them, and the role scores over all of them (tokens: positions)."""
    _, weights = net(rows, return_weights=True)
    T = rows.shape[1]
    maps, left_out = _drawn(net, rows, weights)
    mean = [w.float().mean(dim=0).cpu() for w in maps]  # (H, T, T) per layer
    left = None if left_out is None else [m.all(dim=0).cpu() for m in left_out]  # left out of every row
    name, (scores, best) = f"mean over {rows.shape[0]} {what}", _scores(net, weights, rows)
    return View(name, [str(t) for t in range(T)], mean, scores, allowed_of(net, T), best, left)


def _drawn(net: Network, ids: Tensor, weights: list[Tensor]) -> tuple[list[Tensor], list[Tensor] | None]:
    """What the maps draw: each layer's weights, a selection's layer's dense ones, and (where any layer has a
    selection) the keys each left out, (B, H, T, T) per layer."""
    selected = selection_maps(net, ids)
    if not selected:
        return weights, None
    left_out = [selected[i].left_out if i in selected else torch.zeros_like(w, dtype=torch.bool)
                for i, w in enumerate(weights)]  # fmt: skip
    return drawn(weights, selected), left_out


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
