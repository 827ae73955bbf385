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
        description="andrea-export: an andrea-train checkpoint's network as safetensors, loaded with no pickle, or "
        "(--format hf) as a Hugging Face GPT-2 folder that transformers and TransformerLens load.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n  andrea-export <run dir>/checkpoints/last.ckpt model.safetensors\n"
        "  andrea-export <run dir>/checkpoints/last.ckpt my-gpt --format hf",
    )
    parser.add_argument("checkpoint", help="an andrea-train .ckpt, e.g. <run dir>/checkpoints/last.ckpt")
    parser.add_argument(
        "out", nargs="?", help="the .safetensors file, or the folder with --format hf (default: beside the checkpoint)"
    )
    parser.add_argument(
        "--format",
        choices=("andrea", "hf"),
        default="andrea",
        help="andrea (default): one .safetensors; hf: a GPT-2 folder",
    )
    parser.add_argument("--force", action="store_true", help="replace OUT if it exists")
    args = parser.parse_args(argv)
    checkpoint = Path(args.checkpoint)
    if args.format == "hf":
        _export_hf(checkpoint, Path(args.out) if args.out else checkpoint.with_suffix(".hf"), args.force)
        return
    out = Path(args.out) if args.out else checkpoint.with_suffix(".safetensors")
    if out.suffix != ".safetensors":
        fail(f"out={out} must end in .safetensors (a folder: --format hf)")
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


def _export_hf(checkpoint: Path, folder: Path, force: bool) -> None:
    """The checkpoint's network as a Hugging Face GPT-2 folder (andrea.models.files.hf_export)."""
    if folder.suffix == ".safetensors" or folder.is_file():
        fail(f"out={folder}: --format hf writes a folder; give a folder's path")
    if folder.exists() and any(folder.iterdir()) and not force:
        fail(f"{folder} exists and is not empty; give another folder, or --force to write into it")
    from andrea.models.files.checkpoint import load_checkpoint
    from andrea.models.files.hf_export import write_folder

    try:
        net, config, tokenizer = load_checkpoint(checkpoint)
        written = write_folder(net, config, tokenizer, folder)
    except (ValueError, FileNotFoundError, IsADirectoryError) as err:
        fail(str(err).splitlines()[0])
    print(f"exported {folder}: {', '.join(written)}")
    if "vocab.json" not in written:
        print(f"no tokenizer files: the model reads {tokenizer} tokens, which GPT-2's tokenizer does not hold")


def fail(message: str) -> None:
    print(f"{COMMAND}: error: {message}", file=sys.stderr)
    sys.exit(2)


if __name__ == "__main__":
    main()
