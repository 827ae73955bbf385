"""andrea-inspect: every layer and head of a trained network on one input, as an explorer page;
heads ablated on request; the head-importance table of a run's validation data.

    andrea-inspect <run dir>/checkpoints/last.ckpt                 # the run's first validation row
    andrea-inspect model.safetensors "ROMEO: But soft"              # any text (or ids, tokenizer=ids)
    andrea-inspect <ckpt> ablate=[L0H1] ablation=mean               # what the network does without L0H1
    andrea-inspect <ckpt> importance=true                           # the head-importance table
    andrea-inspect gpt2 importance=true importance_data=text.txt    # ... on a text file (a GPT-2 folder)
    andrea-inspect <ckpt> "3 1 4 1" patch="3 1 5 1"                 # patching: the input into a corrupted one

The first two arguments may be given bare (the checkpoint, then the input) or as ckpt_path= and
input=. Every setting is checked before the model is loaded; a bad one is refused in one line.
"""

from __future__ import annotations

import difflib
import hashlib
import re
import sys
from importlib.resources import files
from pathlib import Path
from typing import TYPE_CHECKING

import hydra
import torch
import yaml
from omegaconf import DictConfig, OmegaConf
from torch import Tensor

from andrea.cli.app import SettingError, run_app
from andrea.cli.inspect_reports import ablation_effect, importance, patching
from andrea.cli.inspect_run import task_head, training_frames, validation_batches, validation_rows
from andrea.cli.prompt import encode_prompt, pick_tokenizer, token_labels
from andrea.train.hydra_run import task_overrides
from andrea.train.keys import check_added_keys
from andrea.utils.rules import BOOLEAN, first_problem, integer, one_of

COMMAND = "andrea-inspect"
SETTINGS = {
    "importance": BOOLEAN,
    "importance_batches": integer(1, 10_000),
    "max_tokens": integer(2, 4096),
    "ablation": one_of("zero", "mean"),
}

if TYPE_CHECKING:
    from andrea.lens.explorer import About
    from andrea.models.network import Network


def check_settings(cfg: DictConfig) -> None:
    problem = check_added_keys(cfg, task_overrides())
    if problem:
        raise SettingError(problem)
    if OmegaConf.is_missing(cfg, "ckpt_path"):
        raise SettingError(f"a checkpoint is required: {COMMAND} <run dir>/checkpoints/last.ckpt [input]")
    problem = first_problem(SETTINGS, cfg)
    if problem:
        raise SettingError(problem)
    if cfg.importance_data:
        from andrea.data.text import text_files

        path = Path(cfg.importance_data)
        if path.is_dir() or not path.exists():
            raise SettingError(
                f"importance_data={path} is {'a folder' if path.exists() else 'not there'}; give a text file"
            )
        text_files(path, key="importance_data")  # a special file, or too big: one line, now
    if (cfg.answer is None) != (cfg.wrong is None):
        raise SettingError("answer= and wrong= go together: the logit difference patching restores (or give neither)")
    if not OmegaConf.is_list(cfg.ablate):
        raise SettingError(f"ablate={cfg.ablate!r} must be a list of heads, e.g. ablate=[L0H1,L1H3]")


def run_dir_of(cfg: DictConfig) -> Path | None:
    """The run the checkpoint belongs to: run_dir=, else <run dir>/checkpoints/<file>'s run dir."""
    if cfg.run_dir:
        return Path(cfg.run_dir)
    ckpt = Path(cfg.ckpt_path).resolve()
    return ckpt.parent.parent if ckpt.parent.name == "checkpoints" else None


def input_ids(cfg: DictConfig, tokenizer: object, vocab_size: int, run_dir: Path | None, context: int) -> Tensor:
    """(1, T) ids: the input given, else the run's first validation row, else importance_data's first row."""
    from andrea.data.from_run import data_from_run

    if str(cfg.input):
        ids = encode_prompt(tokenizer, str(cfg.input), vocab_size)  # type: ignore[arg-type]  # a Tokenizer or TokenIds
    elif run_dir is not None:
        ids = data_from_run(run_dir).probe_batch(1)["input_ids"][0].tolist()  # type: ignore[attr-defined]
    elif cfg.importance_data:  # the text's first row
        ids = validation_batches(None, cfg, "the input", tokenizer, min(context, cfg.max_tokens))[0][0][0].tolist()
    else:
        raise SettingError(f'no input: give one ({COMMAND} <ckpt> "text"), or run_dir=<the checkpoint\'s run>')
    if len(ids) > context:
        raise SettingError(
            f"the input is {len(ids)} tokens, more than the model's context of {context} (its max_context); shorten it"
        )
    if len(ids) > cfg.max_tokens:
        raise SettingError(f"the input is {len(ids)} tokens, more than max_tokens={cfg.max_tokens}; shorten it")
    return torch.tensor([ids], device=cfg.device)


def _measures(
    net: object,
    model: Network,
    heads: list[tuple[int, int]],
    ids: Tensor,
    run_dir: Path | None,
    cfg: DictConfig,
    tokenizer: object,
) -> tuple[str | None, str | None, str | None]:
    """What the settings ask besides the page: the heads' importance, the ablation's effect, activation patching."""
    table = importance(net, run_dir, cfg, tokenizer) if cfg.importance else None
    effect = ablation_effect(net, heads, ids, run_dir, cfg, tokenizer) if heads else None
    patched = patching(model, ids, tokenizer, cfg) if str(cfg.patch) else None
    return table, effect, patched


@hydra.main(version_base="1.3", config_path="pkg://andrea.conf", config_name="inspect")
def inspect_app(cfg: DictConfig) -> None:
    from andrea.lens.explorer import explorer_for
    from andrea.lens.interventions import head_means, intervene, parse_heads
    from andrea.models.files.load import load_any
    from andrea.models.network import heads_shape, network

    try:
        check_settings(cfg)
        net, _, trained_with = load_any(cfg.ckpt_path, cfg.device)
        model = network(net)
        n_layer, n_head = heads_shape(model)
        if n_head == 0:
            raise SettingError(f"ckpt_path={cfg.ckpt_path}: the network has no attention layers to inspect")
        heads = parse_heads(list(cfg.ablate), n_layer, n_head)
        run_dir = run_dir_of(cfg)
        tokenizer = pick_tokenizer(cfg.tokenizer, trained_with, model.vocab_size)
        ids = input_ids(cfg, tokenizer, model.vocab_size, run_dir, model.max_context)
        frames = training_frames(run_dir)  # reads the run's result.json: refused here if it is no result
        rows = validation_rows(run_dir, cfg)
        table, effect, patched = _measures(net, model, heads, ids, run_dir, cfg, tokenizer)
    except (SettingError, ValueError, FileNotFoundError) as err:
        print(f"{COMMAND}: error: {err}", file=sys.stderr)
        sys.exit(2)
    about = _about(model, cfg, task_head(run_dir))
    labels = token_labels(tokenizer, ids[0].tolist())
    means = head_means(model, [ids]) if cfg.ablation == "mean" and heads else None
    with intervene(model, dict.fromkeys(heads, None if means is not None else 0.0), means):
        page = explorer_for(model, ids, labels, about, lambda i: token_labels(tokenizer, [i])[0], rows, frames)
    out = _write_page(cfg, page)
    for line in (table, effect, patched):
        if line:
            print(line)
    print(f"explorer: {out}")


def _about(model: Network, cfg: DictConfig, start: tuple[str, str] | None) -> About:
    """The page's header: every layer's mask and label (a mechanism, a mixer), each named once in layer order
    (sliding_window_8 + causal), what the first layer's weights are, and the backend of its attention layers (a
    network without any: its mixers')."""
    from andrea.lens.explorer import About  # noqa: F811  # the class itself, here
    from andrea.models.network import attention_of
    from andrea.models.weight_styles import weight_styles

    styles = weight_styles(model)
    labels = " + ".join(dict.fromkeys(style.label for style in styles))
    masks = " + ".join(dict.fromkeys(style.mask for style in styles))
    backends = [layer.backend.name for layer in attention_of(model) if layer is not None]
    first, run = styles[0], run_dir_of(cfg)
    head, why = start or (None, "")
    return About(
        Path(cfg.ckpt_path).name, " + ".join(dict.fromkeys(backends)) or labels, labels, masks, first.meaning,
        any(style.signed for style in styles), list(cfg.ablate), cfg.ablation, head, why,
        run=run.resolve().name if run is not None else "",
    )  # fmt: skip


def _write_page(cfg: DictConfig, page: str) -> Path:
    """The page at out= (a folder: inside it, under its usual name), else beside the checkpoint; one line if it
    cannot be written."""
    out = Path(cfg.out) if cfg.out else page_path(cfg)
    if out.is_dir():
        out = out / page_path(cfg).name
    try:
        out.write_text(page)
    except OSError as err:
        print(f"{COMMAND}: error: out={out}: the page cannot be written ({err.strerror or err}); give a writable "
              "file or folder", file=sys.stderr)  # fmt: skip
        sys.exit(2)
    return out


def page_path(cfg: DictConfig) -> Path:
    """Beside the checkpoint: <name>.inspect.html for the run's own row, unablated; any other input or ablation
    gets a page of its own, <name>.inspect-<8 hex digits of what was asked>.html."""
    asked = [str(cfg.input), ",".join(cfg.ablate), cfg.ablation if cfg.ablate else ""]
    suffix = "" if not any(asked) else "-" + hashlib.sha1("\0".join(asked).encode()).hexdigest()[:8]
    return Path(cfg.ckpt_path).with_suffix(f".inspect{suffix}.html")


SETTING = re.compile(r"^([+~]{0,2})([A-Za-z_]\w*)[\w.]*(@[\w.]+)?=")  # key=value, as Hydra's overrides write it
KEYS = tuple(yaml.safe_load((files("andrea.conf") / "inspect.yaml").read_text()))  # its settings, hydra's included


def main() -> None:
    """Bare leading arguments are the checkpoint and the input (Hydra takes key=value only): each is bare
    whatever it holds (`x = 1`, `a=b and c=d`) unless it reads as a setting."""
    args, bare = sys.argv[1:], list[str]()
    while args and not args[0].startswith("-") and not _reads_as_setting(args[0]):
        bare.append(args.pop(0))
    if len(bare) > 2:
        print(f"{COMMAND}: error: give the checkpoint, then one input (quote text with spaces)", file=sys.stderr)
        sys.exit(2)
    named = [f"ckpt_path={_quoted(bare[0])}"] if bare else []
    named += [f"input={_quoted(bare[1])}"] if len(bare) > 1 else []
    args = [_text_setting(arg) for arg in args]
    sys.argv = [sys.argv[0], *named, *args]
    run_app(COMMAND, inspect_app)


def _reads_as_setting(arg: str) -> bool:
    """`key=value` whose key is one of the command's settings or close to one (a typo, that Hydra refuses by
    name), or that adds or deletes a key (`+key=value`); any other text is an input or a path, `=` or not."""
    found = SETTING.match(arg)
    if found is None:
        return False
    prefix, key = found.group(1, 2)
    return bool(prefix) or key in KEYS or bool(difflib.get_close_matches(key, KEYS, n=1, cutoff=0.6))


def _text_setting(arg: str) -> str:
    """input=... and patch=... are free text (commas, brackets): quoted for Hydra unless they already are."""
    key, _, value = arg.partition("=")
    if key in ("input", "patch") and value and value[0] not in "'\"":
        return f"{key}={_quoted(value)}"
    return arg


def _quoted(value: str) -> str:
    """A value Hydra's override parser reads back as the same string."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


if __name__ == "__main__":
    main()
