"""Draw a mask as a picture a learner can read: rows are queries, columns keys."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from torch import Tensor

if TYPE_CHECKING:
    from andrea.attention.masks.base import Mask


def _grid(mask: Mask, length: int, batch_index: int) -> Tensor:
    """(length, length) booleans of one sequence (masks that ignore the batch have one)."""
    return mask.dense(length, length, batch_size=batch_index + 1)[batch_index if mask.batch_dependent else 0, 0]


def mask_as_text(mask: Mask, length: int = 16, batch_index: int = 0) -> str:
    """The mask as rows of '■' (attend) and '·' (masked), query 0 on top."""
    allowed = _grid(mask, length, batch_index)
    return "\n".join("".join("■" if a else "·" for a in row) for row in allowed.tolist())


def draw_mask(mask: Mask, path: str | Path, length: int = 16, batch_index: int = 0) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    allowed = _grid(mask, length, batch_index).float().cpu().numpy()
    fig, ax = plt.subplots(figsize=(4.2, 4.0), dpi=100)
    ax.imshow(allowed, cmap="Blues", vmin=0, vmax=1, interpolation="nearest")
    ax.set_title(mask.name, fontsize=10)
    ax.set_xlabel("key position j")
    ax.set_ylabel("query position i")
    ax.set_xticks(range(0, length, max(1, length // 8)))
    ax.set_yticks(range(0, length, max(1, length // 8)))
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return str(path)
