"""The attention explorer: one self-contained HTML page (no network) showing every layer and head of a
network for one input. Hover a token to see what it attends to in the selected head, and with what
weight; click a head to select it; each head shows its role scores; with a run dir, the maps the run
drew across its training steps.

The weights travel inside the page as bytes (round(255 · A), base64): about L · H · T² bytes; signed
weights (differential attention) as round(127.5 · (A / max|A| + 1)).
"""

from __future__ import annotations

import base64
import html
import json
import math
from pathlib import Path

import torch
from torch import Tensor

from andrea.lens.heads import SHORT_NAMES, head_name

SCRIPT = """
const D = JSON.parse(document.getElementById("data").textContent);
const W = Uint8Array.from(atob(D.weights), c => c.charCodeAt(0));
const {L, H, T} = D;
const byte = (l, h, t, j) => W[((l * H + h) * T + t) * T + j];
const weight = (l, h, t, j) => D.signed ? (byte(l, h, t, j) / 127.5 - 1) * D.limit : byte(l, h, t, j) / 255;
let selected = {l: 0, h: 0}, query = null;

function drawHead(canvas, l, h) {
  const ctx = canvas.getContext("2d"), img = ctx.createImageData(T, T);
  for (let t = 0; t < T; t++) for (let j = 0; j < T; j++) {
    const w = weight(l, h, t, j) / D.limit, v = Math.sqrt(Math.abs(w)), i = 4 * (t * T + j);  // sqrt: faint ones show
    const [r, g, b] = w < 0 ? [40, 200, 200] : [200, 140, 40];  // subtracted: blue for a weight, red below 0
    img.data[i] = 255 - r * v; img.data[i + 1] = 255 - g * v; img.data[i + 2] = 255 - b * v; img.data[i + 3] = 255;
  }
  ctx.putImageData(img, 0, 0);
}

function showQuery(t) {
  query = t;
  const {l, h} = selected;
  const keys = document.querySelectorAll("#keys .tok");
  const ranked = [];
  keys.forEach((span, j) => {
    const w = weight(l, h, t, j);
    const shade = Math.min(1, Math.abs(w) / D.limit).toFixed(3);
    span.style.background = w < 0 ? `rgba(200, 40, 40, ${shade})` : `rgba(230, 120, 20, ${shade})`;
    span.title = `weight ${w.toFixed(3)}`;
    span.dataset.weight = w.toFixed(3);
    ranked.push([w, j]);
  });
  ranked.sort((a, b) => b[0] - a[0]);
  const top = ranked.slice(0, 3).map(([w, j]) => `${JSON.stringify(D.tokens[j])} (${j}) ${w.toFixed(2)}`);
  document.getElementById("readout").textContent =
    `L${l}H${h}: query ${JSON.stringify(D.tokens[t])} (${t}) attends to ${top.join(", ")}`;
  document.querySelectorAll("#queries .tok").forEach((span, i) => span.classList.toggle("query", i === t));
}

function select(l, h) {
  selected = {l, h};
  document.querySelectorAll(".head").forEach(card =>
    card.classList.toggle("selected", +card.dataset.layer === l && +card.dataset.head === h));
  document.getElementById("selected").textContent = `L${l}H${h}`;
  if (query !== null) showQuery(query);
}

document.querySelectorAll(".head").forEach(card => {
  drawHead(card.querySelector("canvas"), +card.dataset.layer, +card.dataset.head);
  card.addEventListener("click", () => select(+card.dataset.layer, +card.dataset.head));
});
document.querySelectorAll("#queries .tok").forEach((span, t) =>
  span.addEventListener("mouseenter", () => showQuery(t)));
document.querySelectorAll(".steps input").forEach(slider => slider.addEventListener("input", () => {
  const frames = D.steps[slider.dataset.layer], [step, src] = frames[+slider.value];
  const box = slider.closest(".steps");
  box.querySelector("img").src = src;
  box.querySelector(".step").textContent = `step ${step}`;
}));
select(0, 0);
"""

STYLE = """
body { font: 14px system-ui, sans-serif; margin: 1.2em; color: #222; }
.strip { display: flex; flex-wrap: wrap; gap: 2px; margin: 0.3em 0 0.8em; }
.tok { font-family: ui-monospace, monospace; padding: 2px 4px; border: 1px solid #ddd; border-radius: 3px;
       white-space: pre; cursor: default; }
#queries .tok.query { outline: 2px solid #1f5fbf; }
#readout { min-height: 1.4em; font-weight: 600; }
.layer { display: flex; flex-wrap: wrap; gap: 8px; margin-bottom: 10px; align-items: flex-start; }
.layer h3 { width: 4.5em; margin: 0; font-size: 13px; }
.head { border: 2px solid #ddd; border-radius: 4px; padding: 4px; cursor: pointer; width: 132px; }
.head.selected { border-color: #1f5fbf; }
.head canvas { width: 120px; height: 120px; image-rendering: pixelated; display: block; border: 1px solid #eee; }
.head .name { font-weight: 600; font-size: 12px; }
.head .scores { font-size: 11px; color: #555; }
.steps { display: inline-block; margin: 0 12px 12px 0; }
.steps img { max-width: 480px; display: block; }
"""


def explorer_page(
    tokens: list[str],
    weights: list[Tensor],
    scores: dict[str, Tensor],
    title: str,
    steps: dict[int, list[tuple[int, Path]]] | None = None,
    meaning: str = "softmax weights (each row sums to 1)",
    signed: bool = False,
) -> str:
    """The page for one input: tokens (T,), weights one (H, T, T) per layer, scores role -> (L, H)
    (NaN: not applicable), steps layer -> [(step, PNG path)] drawn during training; `meaning` says what
    the weights are and `signed` whether they can be negative (the mechanism's weights_meaning, signed)."""
    L, (H, T, _) = len(weights), weights[0].shape
    stacked = torch.stack([w.float() for w in weights])  # (L, H, T, T)
    limit = (stacked.abs().max().item() or 1.0) if signed else 1.0
    levels = (stacked / limit + 1) * 127.5 if signed else stacked.clamp(0, 1) * 255  # one byte a weight
    quantised = levels.round().to(torch.uint8)
    data = {
        "L": L,
        "H": H,
        "T": T,
        "signed": signed,
        "limit": limit,
        "tokens": tokens,
        "weights": base64.b64encode(quantised.contiguous().numpy().tobytes()).decode(),
        "steps": {
            str(layer): [[step, _data_url(path)] for step, path in frames] for layer, frames in (steps or {}).items()
        },
    }
    strip = "".join(f'<span class="tok">{html.escape(token)}</span>' for token in tokens)
    layers = "".join(
        f'<div class="layer"><h3>layer {layer}</h3>'
        + "".join(_head_card(layer, head, T, scores) for head in range(H))
        + "</div>"
        for layer in range(L)
    )
    step_views = "".join(_steps_view(layer, frames) for layer, frames in (steps or {}).items() if frames)
    payload = json.dumps(data).replace("</", "<\\/")  # never closes the script element early
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title><style>{STYLE}</style></head><body>
<h1>{html.escape(title)}</h1>
<p>Hover a token to see what it attends to in the selected head (<b id="selected"></b>); click a head to
select it. Maps: query rows, key columns, colour = sqrt(weight){", red where it is negative" if signed else ""}.
Weights: {html.escape(meaning)}.</p>
<div>queries (hover):</div><div id="queries" class="strip">{strip}</div>
<div>keys, shaded by the weight the query gives them:</div><div id="keys" class="strip">{strip}</div>
<div id="readout"></div>
<h2>Every layer and head</h2>{layers}
{f"<h2>Across training</h2>{step_views}" if step_views else ""}
<script type="application/json" id="data">{payload}</script>
<script>{SCRIPT}</script>
</body></html>
"""


def _head_card(layer: int, head: int, T: int, scores: dict[str, Tensor]) -> str:
    parts = []
    for role, values in scores.items():
        value = float(values[layer, head])
        parts.append(f"{SHORT_NAMES.get(role, role)} {'n/a' if math.isnan(value) else f'{value:.2f}'}")
    return (
        f'<div class="head" data-layer="{layer}" data-head="{head}">'
        f'<div class="name">{head_name(layer, head)}</div><canvas width="{T}" height="{T}"></canvas>'
        f'<div class="scores">{html.escape(" · ".join(parts))}</div></div>'
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
