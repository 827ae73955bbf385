"""The selections of keys (andrea.attention.selection) against dense attention, one layer as a model trains and
runs it: `scripts/bench_attention.py --selections` prints the table.

One attention layer (d_model 256, 4 heads of 64, RoPE, the sdpa backend, B = 1) with selection none, dsa, moba
and nsa, forward (eval, no gradient) and forward + backward (training: DSA's indexer loss included), at each T:
the median ms, the ratio to the dense layer's, and the peak memory torch's allocator holds during one call. A cell
that does not fit the memory limit (the process's address space, set by the script) says so. The settings keep
each paper's proportions where a CPU's lengths allow (SETTINGS), the same at every T.

How the selections run here: each chooses its keys and the layer runs the backend under a mask of them (the
`Selected` mask, (B, H, T, S) booleans), so attention itself costs what dense attention under a mask costs, plus
the choice; what a kernel that gathers only the chosen keys would save is not measured.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from andrea.attention import MultiHeadSelfAttention
from andrea.bench.timing import median_ms, peak_memory_mib

D_MODEL, N_HEAD = 256, 4
SETTINGS: dict[str, dict[str, Any] | None] = {
    "none": None,
    "dsa": {"name": "dsa", "topk": 512, "index_heads": 4, "index_head_dim": 32},  # the paper: 2048 of 128k, 64 heads
    "moba": {"name": "moba", "block_size": 128, "topk_blocks": 3},  # the paper: 4096 and 12 (3 at 8k)
    "nsa": {"name": "nsa", "block_size": 64, "topk_blocks": 8, "window": 256},  # the paper: 64, 16 and 512
}
PASSES = ("fwd", "fwd+bwd")


def layer_call(selection: str, seq_len: int, backward: bool) -> Callable[[], object]:
    """One call of the layer on a fresh input: forward in eval, or forward and backward in training."""
    torch.manual_seed(0)
    layer = MultiHeadSelfAttention(D_MODEL, N_HEAD, backend="sdpa", max_context=seq_len, position="rope",
                                   selection=SETTINGS[selection])  # fmt: skip
    layer.train(backward)
    x = torch.randn(1, seq_len, D_MODEL, requires_grad=backward)

    def call() -> object:
        with torch.set_grad_enabled(backward):
            y = layer(x)[0]
            if backward:
                own = getattr(layer.selection, "own_loss", None)  # DSA's indexer loss, as training adds it
                (y.sum() if own is None else y.sum() + own).backward()
                x.grad = None
                layer.zero_grad(set_to_none=True)
        return y

    return call


def measure(selection: str, seq_len: int, backward: bool, repeats: int) -> tuple[float, float] | str:
    """(median ms, peak MiB) of one cell, or why it has none."""
    try:
        call = layer_call(selection, seq_len, backward)
        return median_ms({selection: call}, repeats=repeats, warmup=1)[selection], peak_memory_mib(call)
    except (RuntimeError, MemoryError) as error:  # the address-space limit: an allocation fails
        if "memory" not in str(error).lower() and not isinstance(error, MemoryError):
            raise
        return "did not fit the memory limit"


def selection_table(seq_lens: list[int], repeats: int) -> dict[tuple[int, str, str], tuple[float, float] | str]:
    """Print the table, row by row, and return its cells (T, pass, selection) -> (ms, MiB) or a reason."""
    print("| T | pass | selection | median ms | × dense | peak MiB | mem × dense |")
    print("|---:|---|---|---:|---:|---:|---:|")
    cells: dict[tuple[int, str, str], tuple[float, float] | str] = {}
    for seq_len in seq_lens:
        rounds = max(1, round(repeats * (1024 / seq_len) ** 0.5))
        for pass_name in PASSES:
            for selection in SETTINGS:
                cell = measure(selection, seq_len, pass_name != "fwd", rounds)
                cells[(seq_len, pass_name, selection)] = cell
                print(_row(seq_len, pass_name, selection, cell, cells.get((seq_len, pass_name, "none"))), flush=True)
    return cells


def _row(seq_len: int, pass_name: str, selection: str, cell: Any, dense: Any) -> str:
    if isinstance(cell, str):
        return f"| {seq_len} | {pass_name} | {selection} | n/a: {cell} | | | |"
    (ms, mib), (dense_ms, dense_mib) = cell, dense if isinstance(dense, tuple) else (float("nan"), float("nan"))
    ratios = f"{ms / dense_ms:.2f} | {mib:.0f} | {mib / dense_mib:.2f}"
    return f"| {seq_len} | {pass_name} | {selection} | {ms:.1f} | {ratios} |"


def crossovers(cells: dict[tuple[int, str, str], tuple[float, float] | str], seq_lens: list[int]) -> list[str]:
    """Per selection and pass, the first T at which it runs faster than the dense layer, or that none did."""
    lines = []
    for selection in [name for name in SETTINGS if name != "none"]:
        for pass_name in PASSES:
            faster = [
                T for T in seq_lens
                if isinstance(cell := cells[(T, pass_name, selection)], tuple)
                and isinstance(dense := cells[(T, pass_name, "none")], tuple) and cell[0] < dense[0]
            ]  # fmt: skip
            said = f"crossover at T={faster[0]}" if faster else f"none on a CPU up to T={max(seq_lens)}"
            lines.append(f"- {selection} {pass_name}: {said}")
    return lines
