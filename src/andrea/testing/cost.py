"""Which of the kit's cells are `slow`: said on each cell as a marker (pytest.param's marks), never matched against
test ids afterwards. `pytest --pyargs andrea.testing` runs them all; andrea's own default run (`-m 'not slow'`)
keeps one cell of each kind of work and leaves the repeats of it to CI's `-m slow`:

    MQA               GQA's extreme (one key head): GQA's cells stay
    bfloat16 backward bfloat16's forward stays
    flex              unfused Flex traces each new shape on CPU (~0.1 s a cell): its bfloat16 cells, and its decode
                      and ALiBi cells but GQA's; a mechanism's decode on Flex but one composed mask's (causal&padding)
    triton            Triton's interpreter: its GQA float32 cells of masks the triton tests do not check over several
                      blocks; a mechanism's parity only for its own kernels (softcap, sink, sigmoid) on a causal mask,
                      GQA, float32; its decode only under causal&document and window|document, GQA
    flex, triton      a mechanism that is another's kernel again (gated, qknorm, gated_qknorm: softmax;
                      sink_off_by_one: sink)
                      under RoPE and ALiBi
    a mixer's row     its float32 cells stay (the setting's math, forward and backward); its bfloat16 and decode
    of kit_settings   cells repeat its default row's kind of work

Each function takes a cell's values by name and returns its marks ([] for a cell the default run keeps).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import pytest

SLOW = [pytest.mark.slow]
# masks tests/attention/test_triton_backend.py checks over several blocks in the default run: their kit cells need not
TRITON_SEVERAL_BLOCKS = ("causal", "document", "padding", "sliding_window_3", "causal&padding", "causal&document")
TRITON_OWN_KERNELS = ("softcap", "sink", "sigmoid")  # mechanisms the triton backend runs with kernels of its own
# another mechanism's kernel, with a setting or a wrap of its own
KERNEL_AGAIN = ("gated", "qknorm", "gated_qknorm", "sink_off_by_one")


def cells(names: Sequence[str], rows: Iterable[tuple[str, ...]], marks: Any) -> list[Any]:
    """Each row of values as a pytest.param with its id (the values joined by '-', as stacked parametrize names
    them) and the marks `marks(**values)` gives."""
    return [pytest.param(*row, id="-".join(row), marks=marks(**dict(zip(names, row, strict=True)))) for row in rows]


def _repeats(heads: str, dtype: str = "float32", direction: str = "forward") -> bool:
    return heads == "mqa" or (dtype == "bfloat16" and direction == "backward")


def parity(backend_name: str, mask_name: str, heads: str, dtype: str, direction: str) -> list[Any]:
    if _repeats(heads, dtype, direction):
        return SLOW
    if backend_name == "flex":
        return SLOW if dtype == "bfloat16" else []
    if backend_name == "triton":
        return SLOW if dtype == "bfloat16" or heads == "mha" or mask_name in TRITON_SEVERAL_BLOCKS else []
    return []


def parity_with_alibi(backend_name: str, mask_name: str, heads: str, direction: str) -> list[Any]:
    del mask_name, direction  # every mask and pass alike
    return SLOW if _repeats(heads) or backend_name == "triton" or (backend_name == "flex" and heads != "gqa") else []


def decode(backend_name: str, mask_name: str, heads: str) -> list[Any]:
    if _repeats(heads) or (backend_name == "flex" and heads != "gqa"):
        return SLOW
    if backend_name == "triton":
        return [] if heads == "gqa" and mask_name in ("causal&document", "window|document") else SLOW
    return []


def mechanism_parity(backend_name: str, mechanism_name: str, mask_name: str, heads: str, variant: str) -> list[Any]:
    dtype, direction = variant.split("-")[:2]
    if _repeats(heads, dtype, direction) or (backend_name == "flex" and dtype == "bfloat16"):
        return SLOW
    if backend_name == "triton":
        own = mechanism_name in TRITON_OWN_KERNELS and mask_name.startswith("causal")
        return [] if own and heads == "gqa" and dtype == "float32" else SLOW
    return []


def mechanism_decode(backend_name: str, mechanism_name: str, mask_name: str, heads: str) -> list[Any]:
    del mechanism_name  # every mechanism alike
    if _repeats(heads) or backend_name == "triton":
        return SLOW
    return SLOW if backend_name == "flex" and (heads != "gqa" or mask_name != "causal&padding") else []


def position_and_mechanism(backend_name: str, mechanism_name: str, position: str) -> list[Any]:
    del position  # RoPE and ALiBi alike
    return SLOW if backend_name in ("flex", "triton") and mechanism_name in KERNEL_AGAIN else []


def mixer_parity(mixer_name: str, form: str, mask_name: str, variant: str) -> list[Any]:
    del form, mask_name  # every form and mask alike
    return SLOW if _settings_row(mixer_name) and variant.startswith("bfloat16") else []


def mixer_decode(mixer_name: str, form: str, mask_name: str, start: str) -> list[Any]:
    del form, mask_name, start  # every form, mask and start alike
    return SLOW if _settings_row(mixer_name) else []


def _settings_row(row: str) -> bool:
    """Whether a token mixer row is one of a mixer's `kit_settings` (andrea.testing.mixer_checks)."""
    from andrea.testing.mixer_checks import mixer_rows

    return bool(mixer_rows()[row][1])
