"""Compile the triton backend's kernels for a Hopper GPU (sm_90) without one, and print what the compiler made.

    python scripts/kernel_report.py                    # every variant the backend accepts, as a Markdown table
    python scripts/kernel_report.py --json bf16 64 causal    # one variant, one JSON line per kernel

Each variant (dtype, head_dim, mask: causal parameters alone, every optional input at once (ALiBi,
lengths, documents, a dense tile), or causal with mechanism=softcap's cap of 50 in the scores, or with
mechanism=sigmoid at its bias for T = 1024; or `decode`: the forward alone, causal, for one query) is
compiled with the tiles and warps the backend launches that kernel with, as a real launch at T = S = 1024
(decode: T = 1) specialises it (divisibility hints on pointers and sizes), and ptxas reads the PTX for
sm_90a; the backward's pre-pass (δ, elementwise) as a sink's gradient launches it. Per kernel: its tile,
registers per thread, bytes spilled, shared memory, asynchronous copies (cp.async), tensor-core
instructions (wgmma), and for each inner loop of its PTX the mask's instructions (integer comparisons, and
selects that put -inf in a score) on its fastest path (past every branch it can skip: the backward's mask)
and over all of it. The blocks
seen whole need none: the forward's middle loop, the backward's path past the branch; what comparisons
remain there are the loop's counter and the bounds of the next tiles' copies. Needs Triton with its NVIDIA
backend (the `triton` extra); TRITON_INTERPRET must be unset.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

# each kernel, and its tiles' key in the backend's _block_sizes
KERNELS = {"attention_forward": "forward", "attention_backward_delta": "delta", "attention_backward_dq": "dq",
           "attention_backward_dkdv": "dkdv"}  # fmt: skip
POINTERS = {"Slopes": "*fp32", "Lengths": "*i64", "Docs": "*i64", "Dense": "*i8", "LSE": "*fp32", "Delta": "*fp32",
            "dLSE": "*fp32"}  # fmt: skip
STRIDES = {f"{x}_s{dim}" for x in ("q", "k", "v", "do") for dim in "bht"}  # (B, H, T) strides of q, k, v, do
INTS = {"dense_sb", "dense_sh", "dense_st", "H", "group", "T", "S", "D", "prefix", "window"} | STRIDES
# a launch at T = S = 1024 (q, k, v views of a fused projection) marks every fresh pointer and every int 16 divides
DIVISIBLE = {"T", "S", "D", "prefix"} | STRIDES
# Every variant the backend accepts on a GPU: 16-bit up to MAX_HEAD_DIM, float32 up to FLOAT32_MAX_HEAD_DIM.
VARIANTS = [
    (dtype, head_dim, mask)
    for dtype, head_dims in (("bf16", (64, 128, 256)), ("fp32", (64,)))
    for head_dim in head_dims
    for mask in ("causal", "every-input", "softcap", "sigmoid")
]
# Decoding: the forward alone (generation runs no backward), causal, one query over 1024 keys, on its own tiles.
DECODE = [
    (dtype, head_dim) for dtype, head_dims in (("bf16", (64, 128, 256)), ("fp32", (64,))) for head_dim in head_dims
]


# The mask's instructions: integer comparisons (positions against bounds, windows, lengths, documents) and the
# selects that put -inf in a score (float32 -inf is 0fFF800000 in PTX).
MASK_OPS = (r"\bsetp\.\w+\.[su](32|64)\b", r"\bselp\.f32\b.*0fFF800000")


def _blocks(ptx: str) -> list[tuple[str, str, list[str]]]:
    """The PTX's basic blocks as (name, innermost loop header or "", lines), from LLVM's comments on them."""
    blocks: list[tuple[str, str, list[str]]] = []
    lines = ptx.splitlines()
    for i, line in enumerate(lines):
        start = re.match(r"^(?:\$L__(BB\w+):|// %(bb\.\d+):)", line)
        if start:
            name, notes = start.group(1) or start.group(2), " ".join(lines[i : i + 3])
            inner = re.search(r"Header=(BB\w+)", notes)
            header = name if "Inner Loop Header" in notes else inner.group(1) if inner else ""
            blocks.append((name, header, []))
        elif blocks:
            blocks[-1][2].append(line)
    return blocks


def loops(ptx: str) -> list[tuple[int, int, int, int]]:
    """For each innermost loop of a kernel's PTX, in program order: (integer comparisons, -inf selects) on the
    path that skips every block a branch can jump over (the mask's), then the same over all of its blocks."""
    blocks = _blocks(ptx)
    inner = {name for name, header, _ in blocks if header == name}
    found = []
    for loop in [name for name, _, _ in blocks if name in inner]:
        members = [(i, name, body) for i, (name, header, body) in enumerate(blocks) if header == loop]
        skipped = set()
        for i, _, body in members:  # an if without else: a conditional branch over the next block to where it goes
            jump = re.search(r"@!?%p\d+ bra\s+\$L__(BB\w+);", "\n".join(body[-2:]))
            joins = jump and i + 1 < len(blocks) and blocks[i + 1][1] == loop
            if joins and re.search(rf"bra\.uni\s+\$L__{jump.group(1)};", "\n".join(blocks[i + 1][2][-2:])):
                skipped.add(i + 1)
        fast = [line for i, _, body in members if i not in skipped for line in body]
        every = [line for _, _, body in members for line in body]
        found.append(
            tuple(sum(bool(re.search(op, line)) for line in lines) for lines in (fast, every) for op in MASK_OPS)
        )
    return found


def _flags(dtype: str, head_dim: int, mask: str) -> dict:
    """The constexprs a launch of the variant compiles with, tiles aside."""
    from andrea.attention.backends.triton_tiles import _block_d

    every = mask == "every-input"
    return dict(CAUSAL=True, BAND=False, HAS_ALIBI=every, HAS_LENGTHS=every, HAS_DOCS=every, HAS_DENSE=every,
                CAP=50.0 if mask == "softcap" else 0.0,
                SIGMOID=mask == "sigmoid", BIAS=-6.931471805599453 if mask == "sigmoid" else 0.0,  # -log(1024)
                UPCAST=False, PRECISION="tf32x3" if dtype == "fp32" else "tf32", HAS_DLSE=True,
                EVEN_D=_block_d(head_dim) == head_dim)  # fmt: skip


def ptxas_path(arch: int) -> str:
    """The ptxas Triton itself compiles for sm_`arch` with, asked of the installed Triton: the call has changed
    between releases (get_ptxas(arch) giving a tool with a .path, or a (path, version) pair; get_ptxas() with
    no argument; before those, _path_to_binary), and so has which binary serves which GPU generation."""
    from triton.backends.nvidia import compiler

    get_ptxas = getattr(compiler, "get_ptxas", None)
    if get_ptxas is None:
        tool = compiler._path_to_binary("ptxas")
    else:
        try:
            tool = get_ptxas(arch)
        except TypeError:  # a release whose get_ptxas takes no architecture
            tool = get_ptxas()
    return tool.path if hasattr(tool, "path") else tool[0]


def compile_kernel(dtype: str, head_dim: int, mask: str, name: str, tiles: dict, divisible: set = DIVISIBLE) -> dict:
    """One kernel of the variant compiled for sm_90a with the given tiles and launch options: its row."""
    from triton import compile
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from andrea.attention.backends import flash_kernels

    ptxas = ptxas_path(90)
    kernel, tiles = getattr(flash_kernels, name), dict(tiles)
    options = dict(num_warps=tiles.pop("num_warps"), num_stages=tiles.pop("num_stages"))
    flags = _flags(dtype, head_dim, mask) | tiles
    signature = {arg: "constexpr" if arg in flags else "fp32" if arg == "scale" else "i32" if arg in INTS
                 else POINTERS.get(arg, "*" + dtype) for arg in kernel.arg_names}  # fmt: skip
    hints = {(i,): [["tt.divisibility", 16]] for i, arg in enumerate(kernel.arg_names)
             if signature[arg].startswith("*") or arg in divisible}  # fmt: skip
    constants = {arg: flags[arg] for arg in kernel.arg_names if arg in flags}
    compiled = compile(ASTSource(kernel, signature, constants, hints), target=GPUTarget("cuda", 90, 32),
                       options=options)  # fmt: skip
    ptx = compiled.asm["ptx"]
    with tempfile.NamedTemporaryFile("w", suffix=".ptx") as file:
        file.write(ptx)
        file.flush()
        report = subprocess.run([ptxas, "-arch=sm_90a", "-v", file.name, "-o", os.devnull],
                                capture_output=True, text=True, check=True).stderr  # fmt: skip
    tile = f"{tiles['BLOCK_M']}x{tiles['BLOCK_N']}" if "BLOCK_N" in tiles else f"{tiles['BLOCK_M']} rows"  # δ's: rows
    return dict(
        kernel=name, tile=tile, warps=options["num_warps"], stages=options["num_stages"],
        registers=int(re.search(r"Used (\d+) registers", report).group(1)),
        spills=sum(map(int, re.findall(r"(\d+) bytes spill stores", report))), shared=compiled.metadata.shared,
        async_copies=ptx.count("cp.async"), wgmma=ptx.count("wgmma.mma_async"), loops=loops(ptx),
    )  # fmt: skip


def compile_variant(dtype: str, head_dim: int, mask: str) -> list[dict]:
    """One row per kernel of the variant, each compiled with the tiles the backend launches it with; mask
    "decode": the forward alone, on the tiles of one query."""
    import torch

    from andrea.attention.backends.triton_tiles import _block_sizes

    kernel_math = mask if mask in ("softcap", "sigmoid") else "softmax"
    dtypes = {"fp32": torch.float32, "bf16": torch.bfloat16}
    queries = 1 if mask == "decode" else None
    tiles = _block_sizes(head_dim, dtypes[dtype], torch.device("cuda"), kernel_math, queries=queries)
    if mask == "decode":
        return [compile_kernel(dtype, head_dim, "causal", "attention_forward", tiles["forward"], DIVISIBLE - {"T"})]
    return [compile_kernel(dtype, head_dim, mask, name, tiles[short]) for name, short in KERNELS.items()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", nargs=3, metavar=("DTYPE", "HEAD_DIM", "MASK"), help="one variant, as JSON lines")
    args = parser.parse_args()
    if "TRITON_INTERPRET" in os.environ:
        sys.exit("kernel_report.py: unset TRITON_INTERPRET (the interpreter compiles nothing)")
    if args.json:
        dtype, head_dim, mask = args.json
        for row in compile_variant(dtype, int(head_dim), mask):
            print(json.dumps(row))
        return
    print(
        "| dtype | d | mask | kernel | tile M x N, warps | registers | spilled B | shared KB | cp.async | wgmma | "
        "inner loops: compares, -inf selects (fastest path / all) |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for dtype, head_dim, mask in [*VARIANTS, *((dtype, head_dim, "decode") for dtype, head_dim in DECODE)]:
        for row in compile_variant(dtype, head_dim, mask):
            print(f"| {dtype} | {head_dim} | {mask} | {row['kernel']} | {row['tile']}, {row['warps']} | "
                  f"{row['registers']} | {row['spills']} | "
                  f"{row['shared'] / 1024:.0f} | {row['async_copies']} | {row['wgmma']} | "
                  f"{' '.join('({}, {} / {}, {})'.format(*loop) for loop in row['loops'])} |", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
