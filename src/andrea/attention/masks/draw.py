"""Draw a mask as a picture a learner can read: rows are queries, columns keys.

The picture speaks the attention maps' language (andrea.lens.viz, the explorer page): a key the mask hides is
painted MASKED_RGB, the grey every map paints it, so that a mask and the maps drawn under it read alike. The grey
is defined here, in the layer every picture can import, and the maps take it from here.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from torch import Tensor

if TYPE_CHECKING:
    from andrea.attention.masks.base import Mask

# a key the mask hides from the query: a grey on neither of the maps' colour scales (viridis has none; red-white-
# blue's 0 is near-white), so that it never reads as a weight of 0
MASKED_RGB = (184, 180, 172)  # a warm grey: no antialiased black text on white gives it either
MASKED_LABEL = "masked: the query may not see the key"
# a key the query sees: a colour of the maps' own scale (viridis' middle), as a map paints a kept key by its weight
KEPT_RGB = (33, 145, 140)
KEPT_LABEL = "kept: the query may see the key"


def _grid(mask: Mask, length: int, batch_index: int) -> Tensor:
    """(length, length) booleans of one sequence (masks that ignore the batch have one)."""
    return mask.dense(length, length, batch_size=batch_index + 1)[batch_index if mask.batch_dependent else 0, 0]


def mask_as_text(mask: Mask, length: int = 16, batch_index: int = 0) -> str:
    """The mask as rows of '■' (attend) and '·' (masked), query 0 on top."""
    allowed = _grid(mask, length, batch_index)
    return "\n".join("".join("■" if a else "·" for a in row) for row in allowed.tolist())


def draw_mask(mask: Mask, path: str | Path, length: int = 16, batch_index: int = 0) -> str:
    """The mask of one sequence as a PNG: kept cells KEPT_RGB, masked ones MASKED_RGB, with a legend naming both."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    allowed = _grid(mask, length, batch_index).cpu().numpy()
    pixels = np.where(allowed[..., None], np.array(KEPT_RGB, np.uint8), np.array(MASKED_RGB, np.uint8))
    fig, ax = plt.subplots(figsize=(4.2, 4.6), dpi=100)
    ax.imshow(pixels, interpolation="nearest")
    ax.set_title(mask.name, fontsize=10)
    ax.set_xlabel("key position j")
    ax.set_ylabel("query position i")
    ax.set_xticks(range(0, length, max(1, length // 8)))
    ax.set_yticks(range(0, length, max(1, length // 8)))
    legend = ((KEPT_RGB, KEPT_LABEL), (MASKED_RGB, MASKED_LABEL))
    swatches = [Patch(color=_fraction(rgb), label=label) for rgb, label in legend]
    ax.legend(handles=swatches, loc="upper center", bbox_to_anchor=(0.5, -0.12), frameon=False, fontsize=8)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return str(path)


def _fraction(rgb: tuple[int, int, int]) -> tuple[float, float, float]:
    """An 8-bit colour as matplotlib takes it, each channel in [0, 1]."""
    red, green, blue = (channel / 255 for channel in rgb)
    return red, green, blue
