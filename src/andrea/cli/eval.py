"""andrea-eval: a trained model on its task's validation and evaluation sets, at its training settings or any
others, printed as a table and appended beside the checkpoint (eval.md and eval.jsonl; earlier evaluations kept).

    andrea-eval <run dir>/checkpoints/last.ckpt                            # the sets it was validated on
    andrea-eval <ckpt> data.seq_len=128 data.num_kv_pairs=8                # MQAR at twice the length and pairs
    andrea-eval <ckpt> data.p_ignore=0.98 data.eval_sets={}                # flip-flop's sparse tail alone

Each change is a `data.<key>=<value>` of the task's own settings (a YAML value); a key the task does not have,
a value it refuses or a length past the model's context is refused in one line (exit 2) before anything runs.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import textwrap
from pathlib import Path
from typing import Any

import yaml

COMMAND = "andrea-eval"
COLUMNS = ("rows", "loss", "acc", "acc_macro", "perplexity")


def changes(overrides: list[str]) -> dict[str, Any]:
    """`data.<key>=<value>` overrides as {key: plain value}."""
    found = {}
    for override in overrides:
        key, equals, text = override.partition("=")
        if not equals or not key.startswith("data.") or len(key) == len("data."):
            raise ValueError(f"{override!r}: give a change as data.<key>=<value>, e.g. data.seq_len=128")
        try:
            found[key.removeprefix("data.")] = yaml.safe_load(text)
        except yaml.YAMLError:
            raise ValueError(f"{override!r}: {text!r} is not a YAML value") from None
    return found


def table(scores: dict[str, dict[str, float]]) -> str:
    lines = ["| set | " + " | ".join(COLUMNS) + " |", "|---|" + "---:|" * len(COLUMNS)]
    for name, found in scores.items():
        cells = [f"{found['rows']:,.0f}", *(f"{found[c]:.4f}" for c in COLUMNS[1:])]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def check_writable(checkpoint: Path) -> None:
    """eval.md and eval.jsonl can be appended to beside the checkpoint: said before anything is evaluated, not
    after (ValueError naming the file)."""
    from andrea.utils.files import unwritable

    for path in (checkpoint.parent / "eval.md", checkpoint.parent / "eval.jsonl"):
        problem = unwritable(path)  # a folder or device there, a dangling link, a place no file can be made in
        if problem:
            raise ValueError(
                f"{path} cannot be appended to (it {problem}); move it away, or copy the checkpoint somewhere writable"
            )


def write_beside(checkpoint: Path, task: str, settings: dict, scores: dict, argv: list[str]) -> Path:
    """Append this evaluation to eval.md and eval.jsonl beside the checkpoint."""
    when = datetime.datetime.now().isoformat(timespec="seconds")
    command = " ".join([COMMAND, *argv])
    with open(checkpoint.parent / "eval.md", "a") as f:
        f.write(f"\n## {when}: {task}\n\n`{command}`\n\n{table(scores)}\n")
    record = {"when": when, "checkpoint": str(checkpoint), "task": task, "settings": settings, "scores": scores}
    with open(checkpoint.parent / "eval.jsonl", "a") as f:
        f.write(json.dumps(record) + "\n")
    return checkpoint.parent / "eval.md"


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(
        prog=COMMAND,
        description=textwrap.fill(" ".join(__doc__.split("\n\n")[0].split()), 100),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="example: andrea-eval <run dir>/checkpoints/last.ckpt data.seq_len=128 data.num_kv_pairs=8",
    )
    parser.add_argument(
        "checkpoint", help="an andrea-train .ckpt of a synthetic task, e.g. <run dir>/checkpoints/last.ckpt"
    )
    parser.add_argument("changes", nargs="*", help="data.<key>=<value>: the task's settings to change")
    args = parser.parse_args(argv)
    from andrea.models.files.checkpoint import load_checkpoint, read_checkpoint
    from andrea.train.evaluate import build_task, check_fits, evaluate, saved_task

    checkpoint = Path(args.checkpoint)
    try:
        wanted = changes(args.changes)
        name, settings = saved_task(read_checkpoint(checkpoint), f"ckpt_path={checkpoint}")
        task = build_task(name, settings, wanted)
        net, _, _ = load_checkpoint(checkpoint)
        check_fits(net, task)
        check_writable(checkpoint.absolute())
    except (ValueError, FileNotFoundError, IsADirectoryError) as err:
        print(f"{COMMAND}: error: {str(err).splitlines()[0]}", file=sys.stderr)
        sys.exit(2)
    scores = evaluate(net, task)
    print(f"{name} ({', '.join(f'{k}={v}' for k, v in wanted.items()) or 'as trained'}):\n{table(scores)}")
    written = write_beside(checkpoint, name, task.settings(), scores, argv)
    print(f"appended to {written} and eval.jsonl")


if __name__ == "__main__":
    main()
