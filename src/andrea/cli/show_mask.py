"""andrea-show-mask: draw a mask so a learner can see it.

    andrea-show-mask "causal & sliding_window(window=4)" --length 12 -o window.png

Prints the mask as text (■ attend, · masked; rows are queries, columns keys)
and writes it as a PNG. Any registered strategy, composed with & and |.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from andrea.attention import mask_registry, parse_mask
from andrea.attention.masks.draw import mask_as_text
from andrea.cli.app import fail
from andrea.utils.files import staged, unwritable

if TYPE_CHECKING:
    from andrea.attention.masks.base import Mask

COMMAND = "andrea-show-mask"
# The picture is 420 pixels wide: past this many positions a cell is smaller than a pixel (and a text row
# wider than any terminal), while the dense mask drawn grows as the square of the length.
MAX_LENGTH = 256


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog=COMMAND,
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog='example: andrea-show-mask "prefix_lm(prefix_len=4) & sliding_window(window=3)" --length 10',
    )
    parser.add_argument("expression", help=f"a mask expression over: {', '.join(mask_registry.names())}")
    parser.add_argument(
        "--length", type=int, default=16, help=f"sequence length to draw (default 16, at most {MAX_LENGTH})"
    )
    parser.add_argument(
        "-o",
        "--output",
        help="PNG file to write, or a folder to write it in (default: the mask's name here, e.g. "
        "causal_sliding_window_4.png)",
    )
    args = parser.parse_args(argv)
    if args.length <= 0:
        fail(COMMAND, f"--length={args.length} must be a positive integer", 2)
    if args.length > MAX_LENGTH:
        fail(COMMAND, f"--length={args.length} is more than {MAX_LENGTH}, past which the picture's cells are "
             f"smaller than its pixels; draw at most {MAX_LENGTH} positions", 2)  # fmt: skip
    try:
        mask = parse_mask(args.expression)
        if mask.batch_dependent:
            raise ValueError(
                f"mask {mask.name} needs per-batch data (lengths or document ids) and cannot be drawn alone"
            )
    except ValueError as err:
        fail(COMMAND, str(err), 2)
    out = output_path(args.output, mask.name)
    print(mask.name)
    print(mask_as_text(mask, args.length))
    draw(mask, out, args.length)
    print(f"wrote {out}")


def output_path(output: str | None, mask_name: str) -> Path:
    """Where the PNG goes: -o's file; inside -o's folder under the mask's name, as andrea-inspect's out= puts its
    page (the last line names it); else the mask's name here. Refused in one line where it cannot be written."""
    out = Path(output) if output else Path(file_name(mask_name))
    if out.is_dir():
        out = out / file_name(mask_name)
    problem = unwritable(out)
    if problem:
        refuse(out, problem)
    if out.suffix.lower() != ".png":  # matplotlib would write another format, or add .png to a name without one
        refuse(out, "does not end in .png")
    return out


def draw(mask: Mask, out: Path, length: int) -> None:
    """The picture at `out`, whole or not at all: a disk that fills mid-write leaves what `out` held."""
    try:
        with staged(out.parent) as staging:
            mask.draw(staging / out.name, length=length)
    except OSError as err:
        refuse(out, f"cannot be written ({err.strerror or err})")


def refuse(out: Path, problem: str) -> NoReturn:
    fail(COMMAND, f"-o {out} {problem}; give a writable .png file, or a folder to write it in", 2)


def file_name(mask_name: str) -> str:
    """A plain file name for a mask: letters, digits and underscores (no parentheses, & or | a shell trips on)."""
    return re.sub(r"[^A-Za-z0-9]+", "_", mask_name).strip("_") + ".png"


if __name__ == "__main__":
    main()
