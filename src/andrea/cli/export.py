"""andrea-export: an andrea-train checkpoint -> a safetensors file of its network (weights, its
config and tokenizer as metadata; no optimizer state, no pickle), which andrea-sample,
andrea-inspect and andrea.models.export.load read.

    andrea-export <run dir>/checkpoints/last.ckpt                  # -> <run dir>/checkpoints/last.safetensors
    andrea-export <run dir>/checkpoints/last.ckpt model.safetensors
    andrea-export <ckpt> model.safetensors --force                 # replace an existing file

A bad argument or file, or a place the export cannot be written to, is refused in one line (exit 2) before the
checkpoint is read; an existing file is kept unless --force.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import NoReturn

from andrea.utils.files import unwritable

COMMAND = "andrea-export"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog=COMMAND,
        description="andrea-export: an andrea-train checkpoint's network as safetensors, loaded with no pickle, or "
        "(--format hf) as a Hugging Face folder (GPT-2's, or OLMo 3's or Gemma 3's where GPT-2 cannot hold it) that "
        "transformers loads.",
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
        help="andrea (default): one .safetensors; hf: a Hugging Face folder (GPT-2, OLMo 3, Gemma 3)",
    )
    parser.add_argument("--force", action="store_true", help="replace OUT if it exists")
    args = parser.parse_args(argv)
    checkpoint = Path(args.checkpoint)
    if args.format == "hf":
        _export_hf(checkpoint, Path(args.out) if args.out else checkpoint.with_suffix(".hf"), args.force)
        return
    out = Path(args.out) if args.out else checkpoint.with_suffix(".safetensors")
    refuse_unwritable(out, "a writable .safetensors file")
    if out.suffix != ".safetensors":
        fail(f"out={out} must end in .safetensors (a folder: --format hf)")
    if out.exists() and not args.force:
        fail(f"{out} exists; give another file, or --force to replace it")
    from andrea.models.files.checkpoint import load_checkpoint
    from andrea.models.files.export import load, save

    try:
        net, config, tokenizer = load_checkpoint(checkpoint)
        with said_in_one_line(out):
            written = save(net, config, out, tokenizer)
        net, _ = load(written)
    except (ValueError, FileNotFoundError, IsADirectoryError) as err:
        fail(str(err).splitlines()[0])
    parameters = sum(p.numel() for p in net.parameters())
    print(f"exported {written} ({parameters:,} parameters)")


def _export_hf(checkpoint: Path, folder: Path, force: bool) -> None:
    """The checkpoint's network as a Hugging Face GPT-2 folder (andrea.models.files.hf_export)."""
    if folder.suffix == ".safetensors" or folder.is_file():
        fail(f"out={folder}: --format hf writes a folder; give a folder's path")
    refuse_unwritable(folder, "a writable folder", folder=True)
    if folder.exists() and any(folder.iterdir()) and not force:
        fail(f"{folder} exists and is not empty; give another folder, or --force to write into it")
    from andrea.models.files.checkpoint import load_checkpoint
    from andrea.models.files.hf_export import write_folder

    try:
        net, config, tokenizer = load_checkpoint(checkpoint)
        with said_in_one_line(folder):
            written = write_folder(net, config, tokenizer, folder)
    except (ValueError, FileNotFoundError, IsADirectoryError) as err:
        fail(str(err).splitlines()[0])
    print(f"exported {folder}: {', '.join(written)}")
    if "vocab.json" not in written:
        reads = f"{tokenizer} tokens, which GPT-2's tokenizer does not hold" if tokenizer else "token ids, not text"
        print(f"no tokenizer files: the model reads {reads}")


def refuse_unwritable(out: Path, wanted: str, folder: bool = False) -> None:
    """Refused before the checkpoint is read: a place the export cannot be written to (a read-only folder, a
    device such as /dev/null, a link to nothing) ends in one line, and nothing is written."""
    problem = unwritable(out, folder)
    if problem:
        fail(f"out={out} {problem}; give {wanted}")


@contextmanager
def said_in_one_line(out: Path) -> Iterator[None]:
    """A write that fails on the way (a disk that fills) in one line; the writers leave what `out` held."""
    from safetensors import SafetensorError

    try:
        yield
    except (OSError, SafetensorError) as err:
        reason = getattr(err, "strerror", None) or str(err).splitlines()[0]
        fail(f"out={out} cannot be written ({reason}); give a place with room for it")


def fail(message: str) -> NoReturn:
    print(f"{COMMAND}: error: {message}", file=sys.stderr)
    sys.exit(2)


if __name__ == "__main__":
    main()
