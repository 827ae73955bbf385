"""What andrea-inspect reads from the run a checkpoint came from (its run dir): its validation batches (or a text
file's, importance_data=), its first validation rows for the page's mean view, the maps it drew across training,
and the head its task needs."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import torch
from omegaconf import DictConfig
from torch import Tensor

from andrea.cli.app import SettingError

if TYPE_CHECKING:
    from andrea.utils.run_result import RunResult


def validation_batches(
    run_dir: Path | None, cfg: DictConfig, why: str, tokenizer: object = None, context: int = 128
) -> list[tuple[Tensor, Tensor]]:
    """(input ids, labels): `importance_batches` batches of importance_data=<text file>'s text, cut into rows of
    at most `context` tokens, when it is given; else of the run's validation data."""
    if cfg.get("importance_data"):
        return text_batches(Path(cfg.importance_data), tokenizer, min(context, 128), cfg)
    if run_dir is None:
        raise SettingError(
            f"{why} needs data: give run_dir=<the checkpoint's run>, or importance_data=<a text file> (a GPT-2 folder)"
        )
    return run_batches(run_dir, cfg)


def run_batches(run_dir: Path, cfg: DictConfig) -> list[tuple[Tensor, Tensor]]:
    """(input ids, labels) of the run's first `importance_batches` validation batches."""
    from andrea.data.from_run import data_from_run

    data = data_from_run(run_dir)
    data.setup("validate")
    loaders = data.val_dataloader()
    batches = []
    for batch in loaders[0] if isinstance(loaders, list) else loaders:  # the validation set, not an evaluation set
        batches.append((batch["input_ids"].to(cfg.device), batch["labels"].to(cfg.device)))
        if len(batches) == cfg.importance_batches:
            break
    return batches


def text_batches(path: Path, tokenizer: object, T: int, cfg: DictConfig, rows: int = 8) -> list[tuple[Tensor, Tensor]]:
    """A text file read as data (a regular UTF-8 file, within data.max_bytes' default), tokenised, and cut into
    batches of `rows` rows of T tokens with the next tokens as labels."""
    from andrea.data.text import decode_text, text_files

    if path.is_dir():
        raise SettingError(f"importance_data={path} is a folder; give one text file")
    (file,) = text_files(path, key="importance_data")  # missing, special or too big: refused in one line
    ids = torch.tensor(tokenizer.encode(decode_text(file, file.read_bytes(), key="importance_data")))  # type: ignore[attr-defined]  # a Tokenizer or TokenIds
    per_batch = rows * (T + 1)
    if len(ids) < T + 1:
        raise SettingError(
            f"importance_data={path} holds {len(ids)} tokens, fewer than one row of {T + 1}; give more text"
        )
    batches = []
    for start in range(0, min(len(ids), cfg.importance_batches * per_batch), per_batch):
        chunk = ids[start : start + per_batch]
        chunk = chunk[: len(chunk) // (T + 1) * (T + 1)].view(-1, T + 1).to(cfg.device)  # (rows, T + 1)
        if len(chunk):
            batches.append((chunk[:, :-1], chunk[:, 1:]))
    return batches


def validation_rows(run_dir: Path | None, cfg: DictConfig) -> tuple[Tensor, str] | None:
    """The run's first validation batch (B, T) for the explorer's mean view, when it lies at hand."""
    if run_dir is None or not (run_dir / "result.json").is_file():
        return None
    ids, _ = run_batches(run_dir, cfg)[0]  # the run's own rows, whatever importance_data says
    return (ids, "validation rows") if ids.shape[1] <= cfg.max_tokens else None


def training_frames(run_dir: Path | None) -> dict[int, list[tuple[int, Path]]]:
    """layer -> [(step, PNG)] of the maps the run drew, in the folder its result.json names."""
    from andrea.lens.viz import MAPS_DIR, parse_map_file

    frames: dict[int, list[tuple[int, Path]]] = {}
    if run_dir is None:
        return frames
    result = _result(run_dir)
    drawn = result.attention_maps if result is not None else None
    folder = run_dir / (Path(drawn).name if drawn else MAPS_DIR)  # the run's own folder, wherever the run dir is now
    for png in sorted(folder.glob("*.png")):
        found = parse_map_file(png.name)
        if found is not None:
            frames.setdefault(found[0], []).append((found[1], png))
    return {layer: sorted(found) for layer, found in sorted(frames.items())}


def task_head(run_dir: Path | None) -> tuple[str, str] | None:
    """The head the run's task needs and the run found best for it (its result's verdict: "L1H2" and why), or
    None: no run, a task that needs no attention, or a run that recorded no verdict."""
    result = _result(run_dir) if run_dir is not None else None
    verdict = result.verdict if result is not None else None
    if not verdict or not verdict.get("best"):
        return None
    return str(verdict["best"]), f"the run's best {verdict['role']} head, what its task needs ({verdict['needs']})"


def _result(run_dir: Path) -> RunResult | None:
    """The run's result.json, read as andrea-train wrote it (one line refusing any other file); None without one."""
    from andrea.utils.run_result import RESULT_FILE, RunResult

    path = run_dir / RESULT_FILE
    return RunResult.read(path) if path.is_file() else None
