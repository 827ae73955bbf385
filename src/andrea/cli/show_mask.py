"""andrea-show-mask: draw a mask so a learner can see it.

    andrea-show-mask "causal & sliding_window(window=4)" --length 12 -o window.png

Prints the mask as text (■ attend, · masked; rows are queries, columns keys)
and writes it as a PNG. Any registered strategy, composed with & and |.
"""

from __future__ import annotations

import argparse
import re

from andrea.attention import mask_registry, parse_mask
from andrea.attention.masks.draw import mask_as_text


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="andrea-show-mask",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog='example: andrea-show-mask "prefix_lm(prefix_len=4) & sliding_window(window=3)" --length 10',
    )
    parser.add_argument("expression", help=f"a mask expression over: {', '.join(mask_registry.names())}")
    parser.add_argument("--length", type=int, default=16, help="sequence length to draw (default 16)")
    parser.add_argument(
        "-o", "--output", help="PNG file to write (default: the mask's name, e.g. causal_sliding_window_4.png)"
    )
    args = parser.parse_args(argv)
    if args.length <= 0:
        parser.error(f"--length={args.length} must be a positive integer")
    try:
        mask = parse_mask(args.expression)
        if mask.batch_dependent:
            raise ValueError(
                f"mask {mask.name} needs per-batch data (lengths or document ids) and cannot be drawn alone"
            )
    except ValueError as err:
        parser.error(str(err))
    print(mask.name)
    print(mask_as_text(mask, args.length))
    print(f"wrote {mask.draw(args.output or file_name(mask.name), length=args.length)}")


def file_name(mask_name: str) -> str:
    """A plain file name for a mask: letters, digits and underscores (no parentheses, & or | a shell trips on)."""
    return re.sub(r"[^A-Za-z0-9]+", "_", mask_name).strip("_") + ".png"


if __name__ == "__main__":
    main()
