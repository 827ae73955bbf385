"""Activation patching between a clean and a corrupted input as a picture: what andrea-inspect's `patch=`
writes. The metric is the logit difference at the last position between the clean run's answer and the
corrupted run's (each its top token, unless given), and each patch is read as the share of the clean-minus-
corrupted difference it restores:

    restored = (metric(patched) - metric(corrupted)) / (metric(clean) - metric(corrupted))

1 where an activation from the clean run brings the clean answer back whole, 0 where it changes nothing.
The shares mean that only while the gap they divide, clean - corrupted, is wide and positive: a gap under
MIN_GAP (in logits) makes every share a ratio of noise, and a negative one (answers given that the corrupted
run favours more than the clean one) turns them around. Such a report says so: a warning in the printed
line, in the JSON (`warning`) and across the picture.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from andrea.lens.heads import head_name
from andrea.lens.patching import patch_heads, patch_residual
from andrea.models.network import Network

MIN_GAP = 0.1  # logits: below it, clean - corrupted is too small for shares of it to mean anything


def gap_warning(gap: float, min_gap: float = MIN_GAP) -> str | None:
    """What is wrong with the clean-minus-corrupted gap the shares divide, or None."""
    if gap < 0:
        return (
            f"the clean-corrupted gap is {gap:.3f}, of the wrong sign: the corrupted input favours the answer more "
            "than the clean one, so each share is turned around"
        )
    if gap < min_gap:
        return f"the clean-corrupted gap is {gap:.3g}, under {min_gap:g}: the shares are ratios of noise"
    return None


@torch.no_grad()
def patching_report(
    net: Network,
    clean: Tensor,
    corrupted: Tensor,
    tokens: list[str],
    answers: tuple[int, int] | None = None,
    min_gap: float = MIN_GAP,
) -> dict[str, Any]:
    """clean, corrupted (1, T) -> {"answer", "wrong", "clean", "corrupted" (the metric on each), "gap" (their
    difference), "warning" (None, or what makes the shares unreliable), "heads" (L, H) and "residual" (L, T)
    restored shares, "best_head", "tokens"}."""
    if answers is None:
        answers = (int(net(clean)[0][0, -1].argmax()), int(net(corrupted)[0][0, -1].argmax()))
    answer, wrong = answers
    if answer == wrong:
        raise ValueError(
            f"the clean and the corrupted input both predict token {answer} next: give answer=<id> and wrong=<id> "
            "(the logit difference to restore), or a corruption that changes the prediction"
        )

    def metric(logits: Tensor) -> Tensor:
        return logits[:, -1, answer] - logits[:, -1, wrong]

    clean_value, corrupted_value = float(metric(net(clean)[0])), float(metric(net(corrupted)[0]))
    span = clean_value - corrupted_value
    if span == 0:
        raise ValueError(
            f"logit[{answer}] - logit[{wrong}] is {clean_value:.3f} on the clean and the corrupted input alike: "
            "nothing to restore; give other answer= and wrong=, or a corruption that changes them"
        )
    heads = (patch_heads(net, clean, corrupted, metric) - corrupted_value) / span  # (L, H)
    residual = (patch_residual(net, clean, corrupted, metric) - corrupted_value) / span  # (L, T)
    layer, head = divmod(int(heads.argmax()), heads.shape[1])
    return {
        "answer": answer, "wrong": wrong, "clean": clean_value, "corrupted": corrupted_value, "gap": span,
        "warning": gap_warning(span, min_gap),
        "heads": heads.tolist(), "residual": residual.tolist(), "best_head": head_name(layer, head),
        "best_restored": float(heads[layer, head]), "tokens": tokens,
    }  # fmt: skip


def draw_patching(report: dict[str, Any], path: Path, title: str) -> Path:
    """Two heatmaps on one red-white-blue scale, -1 to 1: per head (layer x head) and per residual position
    (layer x token)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    heads, residual, tokens = report["heads"], report["residual"], report["tokens"]
    n_layer, n_head, T = len(heads), len(heads[0]), len(tokens)
    fig, (left, right) = plt.subplots(
        1, 2, figsize=(3 + 0.35 * n_head + 0.32 * T, 1.6 + 0.38 * n_layer), gridspec_kw={"width_ratios": [n_head, T]}
    )
    for ax, values, xlabel in ((left, heads, "head"), (right, residual, "residual stream entering the layer, at")):
        image = ax.imshow(values, cmap="RdBu", vmin=-1, vmax=1, aspect="auto", interpolation="nearest")
        ax.set_ylabel("layer")
        ax.set_yticks(range(n_layer))
        ax.set_xlabel(xlabel)
    left.set_xticks(range(n_head))
    right.set_xticks(range(T), [f"{t}: {token}" for t, token in enumerate(tokens)], rotation=90, fontsize=7)
    left.set_title("one head's output\nfrom the clean run", fontsize=9)
    right.set_title("one position of the residual stream from the clean run", fontsize=9)
    fig.colorbar(image, ax=[left, right], label="share of the clean answer restored", shrink=0.9)
    fig.suptitle(title, fontsize=9, y=1.06)
    if report.get("warning"):
        fig.text(0.5, 1.06, f"WARNING: {report['warning']}", ha="center", va="bottom", fontsize=8, color="#b00000")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return path


def write_patching(report: dict[str, Any], stem: Path, title: str) -> str:
    """<stem>.patch.png and <stem>.patch.json; returns the line andrea-inspect prints."""
    png = draw_patching(report, Path(f"{stem}.patch.png"), title)
    Path(f"{stem}.patch.json").write_text(json.dumps(report, indent=2))
    warning = f"\npatching: warning: {report['warning']}" if report.get("warning") else ""
    return (
        f"patching: logit[{report['answer']}] - logit[{report['wrong']}] is {report['clean']:.3f} clean, "
        f"{report['corrupted']:.3f} corrupted; {report['best_head']} from the clean run restores "
        f"{report['best_restored']:.0%} of it; {png} (and .json){warning}"
    )
