"""The tiles each of triton's kernels (andrea.attention.backends.flash_kernels) launches with: by input width,
head_dim and GPU, and under Triton's interpreter; scripts/bench_tiles.py measures other tables by patching TILES."""

from __future__ import annotations

import functools

import torch
from torch import Tensor

FLOAT32_MAX_HEAD_DIM = 64  # on a GPU: float32 tiles of a wider head do not fit in shared memory


# Each kernel's (BLOCK_M, BLOCK_N, num_warps, num_stages) on a GPU, by input width and BLOCK_D (d <= 64 as 64):
# the largest tiles, then the most stages, that compile for sm_90 with no register spilled and on the tensor
# cores' wgmma where a tile can be (scripts/kernel_report.py, docs/kernel_report.md; tests/attention/
# test_triton_backend.py holds every variant to it). dk/dv computes k qᵀ: its key tile is the dots' M side.
TILES = {
    ("16-bit", 64): dict(forward=(128, 64, 8, 3), dq=(64, 64, 4, 3), dkdv=(32, 128, 8, 3)),
    ("16-bit", 128): dict(forward=(64, 64, 8, 3), dq=(64, 64, 8, 3), dkdv=(32, 64, 8, 3)),
    # d = 256: dk/dv's 16 keys are under wgmma's 64 rows (mma instead; 64 keys spill 56-176 bytes)
    ("16-bit", 256): dict(forward=(64, 32, 8, 3), dq=(64, 16, 8, 3), dkdv=(64, 16, 8, 2)),
    ("float32", 64): dict(forward=(32, 32, 4, 3), dq=(32, 32, 4, 2), dkdv=(16, 32, 4, 3)),  # tf32x3: 3 dots each
}
MECHANISM_TILES = {  # where a mechanism's kernel compiles better with tiles of its own
    ("sigmoid", "float32", 64): dict(dkdv=(16, 64, 4, 2)),  # 32 keys: Triton does not pipeline its loop
}
HOPPER = (9, 0)  # TILES' GPU; an older one (99-163 KB of shared memory per block, not 227) runs 2 stages at most
# A forward of at most DECODE_QUERIES queries (decoding from a KV cache: one) runs DECODE_TILES, 16 rows on 4 warps
# (mma): the rows of a 64- or 128-row tile past them would be computed for nothing, where decoding is bound by
# reading k and v; no spill at any head_dim (the kernel report's decode rows)
DECODE_QUERIES = 16
DECODE_TILES = {"16-bit": (16, 64, 4, 3), "float32": (16, 32, 4, 3)}


@functools.cache
def _capability(device: torch.device) -> tuple[int, int]:
    """The CUDA device's compute capability, read once per device."""
    return torch.cuda.get_device_capability(device)


def _block_sizes(
    head_dim: int,
    dtype: torch.dtype,
    device: torch.device,
    kernel: str = "softmax",
    capability: tuple = HOPPER,
    queries: int | None = None,
) -> dict[str, dict]:
    """Each kernel's tiles and launch options, {"forward", "dq", "dkdv", "delta"}: TILES on a GPU (float32 only
    up to FLOAT32_MAX_HEAD_DIM; before Hopper with 2 stages at most; a forward of DECODE_QUERIES queries or fewer
    on 16 rows), 16 x 16 under the interpreter (small tiles keep the tests quick); δ's pre-pass (no loop, no
    dot) dq's rows on Triton's default 4 warps."""
    block_d = _block_d(head_dim)
    if device.type == "cpu":
        tiles = dict(BLOCK_M=16, BLOCK_N=16, BLOCK_D=block_d)
        return dict(forward=tiles, dq=tiles, dkdv=tiles, delta=dict(BLOCK_M=16, BLOCK_D=block_d))
    width = "float32" if dtype == torch.float32 else "16-bit"
    chosen = TILES[width, max(64, block_d)] | MECHANISM_TILES.get((kernel, width, max(64, block_d)), {})
    if queries is not None and queries <= DECODE_QUERIES:
        chosen = chosen | dict(forward=DECODE_TILES[width])
    most = 3 if tuple(capability) >= HOPPER else 2
    sizes = {
        name: dict(BLOCK_M=m, BLOCK_N=n, BLOCK_D=block_d, num_warps=warps, num_stages=min(stages, most))
        for name, (m, n, warps, stages) in chosen.items()
    }
    return sizes | dict(delta=dict(BLOCK_M=sizes["dq"]["BLOCK_M"], BLOCK_D=block_d, num_warps=4, num_stages=most))


def _tiles_for(q: Tensor, kernel: str) -> dict[str, dict]:
    """`_block_sizes` for a call's q on its own device."""
    capability = _capability(q.device) if q.device.type == "cuda" else HOPPER
    return _block_sizes(q.shape[-1], q.dtype, q.device, kernel, capability, queries=q.shape[2])


def _block_d(head_dim: int) -> int:
    """The tiles' width: head_dim padded to a power of two, at least 16 (a tensor-core dot's least)."""
    return max(16, 1 << (head_dim - 1).bit_length())
