"""andrea-export: an andrea-train checkpoint -> a safetensors file of its network (weights, its
config and tokenizer as metadata; no optimizer state, no pickle), which andrea-sample,
andrea-inspect and andrea.models.export.load read.

    andrea-export <run dir>/checkpoints/last.ckpt                  # -> <run dir>/checkpoints/last.safetensors
    andrea-export <run dir>/checkpoints/last.ckpt model.safetensors
    andrea-export <ckpt> model.safetensors --force                 # replace an existing file

A bad argument or file is refused in one line (exit 2); an existing file is kept unless --force.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

COMMAND = "andrea-export"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog=COMMAND,
        description="andrea-export: an andrea-train checkpoint's network as safetensors, loaded with no pickle.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="example: andrea-export <run dir>/checkpoints/last.ckpt model.safetensors",
    )
    parser.add_argument("checkpoint", help="an andrea-train .ckpt, e.g. <run dir>/checkpoints/last.ckpt")
    parser.add_argument("out", nargs="?", help="the .safetensors file (default: beside the checkpoint)")
    parser.add_argument("--force", action="store_true", help="replace OUT if it exists")
    args = parser.parse_args(argv)
    checkpoint = Path(args.checkpoint)
    out = Path(args.out) if args.out else checkpoint.with_suffix(".safetensors")

    def fail(message: str) -> None:
        print(f"{COMMAND}: error: {message}", file=sys.stderr)
        sys.exit(2)

    if out.suffix != ".safetensors":
        fail(f"out={out} must end in .safetensors")
    if out.exists() and not args.force:
        fail(f"{out} exists; give another file, or --force to replace it")
    from andrea.models.files.checkpoint import export_checkpoint
    from andrea.models.files.export import load

    try:
        written = export_checkpoint(checkpoint, out)
        net, _ = load(written)
    except (ValueError, FileNotFoundError, IsADirectoryError) as err:
        fail(str(err).splitlines()[0])
    parameters = sum(p.numel() for p in net.parameters())
    print(f"exported {written} ({parameters:,} parameters)")


if __name__ == "__main__":
    main()
