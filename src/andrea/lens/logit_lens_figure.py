"""The logit lens as the familiar picture: a grid of layers (rows, the embeddings at the bottom) by positions
(columns), each cell naming the token that layer's residual predicts next there and coloured by its probability.

    top_tokens(lens)                                  (L + 1, T, V) one row's logit lens -> the top token of each
                                                      cell (L + 1, T) and its probability
    draw_logit_lens(lens, tokens, decode, path, title) the PNG
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from torch import Tensor

LABEL = 7  # characters of a token shown in a cell


def top_tokens(lens: Tensor) -> tuple[Tensor, Tensor]:
    """(L + 1, T, V) logits -> the most likely next token of each cell (L + 1, T) and its probability."""
    probabilities, ids = lens.float().softmax(dim=-1).max(dim=-1)
    return ids, probabilities


def draw_logit_lens(
    lens: Tensor, tokens: list[str], decode: Callable[[int], str], path: Path, title: str
) -> Path:  # fmt: skip
    """One row's logit lens (L + 1, T, V) as a PNG at `path`: `tokens` the row's input tokens (T), `decode` a token
    id's text."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ids, probabilities = top_tokens(lens)
    rows, T = ids.shape
    fig, ax = plt.subplots(figsize=(2.2 + 0.62 * T, 1.4 + 0.42 * rows))
    image = ax.imshow(probabilities.numpy(), cmap="viridis", vmin=0, vmax=1, aspect="auto", origin="lower")
    for layer in range(rows):
        for t in range(T):
            p = float(probabilities[layer, t])
            ax.text(t, layer, _label(decode(int(ids[layer, t]))), ha="center", va="center", fontsize=7,
                    color="black" if p > 0.6 else "white")  # fmt: skip
    ax.set_xticks(range(T), [f"{t}: {_label(token)}" for t, token in enumerate(tokens)], rotation=90, fontsize=7)
    ax.set_yticks(range(rows), ["embeddings", *(f"after layer {layer}" for layer in range(rows - 1))], fontsize=7)
    ax.set_xlabel("input token (the cell predicts the token after it)")
    fig.colorbar(image, ax=ax, label="probability of the cell's token", shrink=0.9)
    ax.set_title(title, fontsize=9)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return path


def _label(text: str) -> str:
    shown = text.replace("\n", "⏎")
    return shown if len(shown) <= LABEL else f"{shown[: LABEL - 1]}…"
