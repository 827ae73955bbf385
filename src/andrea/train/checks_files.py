"""The files a training config names, read as data before anything is built: `init_from` (a Hugging Face
GPT-2, OLMo 3 or Gemma 3 folder whose shape model.net takes) and `ckpt_path` (a checkpoint of this very model to
resume)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf, open_dict

from andrea.train.errors import ConfigError


def apply_init_from(cfg: DictConfig) -> None:
    """init_from=<folder>: model.net takes the network of its config.json (read as data): GPT-2's sizes, biases and
    activation (andrea.models.files.gpt2), or an OLMo 3 or Gemma 3 network whole (andrea.models.files.hf_families);
    the attention backend stays the run's own. init_from=<an andrea-train .ckpt>: the run's own network, which
    must be the checkpoint's but for its selections of keys (a dense run's weights into a DSA run)."""
    folder = cfg.get("init_from")
    if folder is None:
        return
    from andrea.models.files import gpt2
    from andrea.models.files.hf_families import FAMILIES
    from andrea.models.files.hf_folder import model_type_of

    if not isinstance(folder, str):
        raise ConfigError(f"init_from={folder!r} must be the path of a Hugging Face GPT-2, OLMo 3 or Gemma 3 folder")
    if folder.endswith(".ckpt"):  # a run's checkpoint: this run's network, checked once its kinds are filled
        return
    family = FAMILIES.get(str(model_type_of(Path(folder))))
    if family is not None:
        _apply_family(cfg, folder, family)
        return
    try:
        weights = gpt2.weights_file(folder)
        config = gpt2.net_config(weights.parent / "config.json")
    except (FileNotFoundError, ValueError) as err:
        raise ConfigError(f"init_from={folder}: {str(err).splitlines()[0]}") from None
    if OmegaConf.select(cfg, "position.kind", default="learned") != "learned":
        raise ConfigError(
            f"init_from={folder}: GPT-2's weights need learned positions; drop position={cfg.position.kind}"
        )
    _take_network(cfg, config)  # GPT-2 has a key/value head per query head: its config names none


def check_run_start(cfg: DictConfig) -> None:
    """init_from=<.ckpt>: a readable andrea-train checkpoint (no pickled code) whose network is this run's (its layer
    kinds filled, as the checkpoint saved them) but for its selections of keys and its backend: the weights it holds
    are every weight of this network but a selection's (DSA's indexer starts fresh; its dense warm-up,
    selection.train_indexer=dense, trains it from them)."""
    start = cfg.get("init_from")
    if not isinstance(start, str) or not start.endswith(".ckpt"):
        return
    _saved_network(
        cfg, Path(start), "init_from", lambda key: "selection" in key.split("."),
        "a run's checkpoint starts a run of the same network, its selections of keys aside: give the overrides its "
        "run had",
    )  # fmt: skip


def _apply_family(cfg: DictConfig, folder: str, family: Any) -> None:
    """model.net becomes the family's network (its kinds, pattern and parts), its heads the folder's; the data's
    tokenizer stays, so its vocabulary must be the folder's."""
    try:
        config = family.net_config(Path(folder))
    except ValueError as err:
        raise ConfigError(f"init_from={folder}: {str(err).splitlines()[0]}") from None
    vocab = OmegaConf.select(cfg, "data.vocab_size")
    if vocab != config["vocab_size"]:
        raise ConfigError(
            f"init_from={folder}: its vocabulary has {config['vocab_size']} tokens, the data's {vocab}; give data "
            f"whose tokenizer has {config['vocab_size']} tokens (the folder's own tokenizer is not read)"
        )
    _take_network(cfg, config)


def _take_network(cfg: DictConfig, config: dict[str, Any]) -> None:
    """model.net takes a folder's net config: every setting, and of its attention the heads only (the backend and
    the rest stay the run's)."""
    attention = config.pop("attention")
    with open_dict(cfg):
        net = cfg.model.net
        for key, value in config.items():
            net[key] = value
        net.attention.n_head = attention["n_head"]
        net.attention.n_kv_head = attention.get("n_kv_head") or attention["n_head"]


def check_checkpoint(cfg: DictConfig) -> str | None:
    """ckpt_path: a readable andrea-train checkpoint of this very model, loaded (once) with no pickled code;
    returns what to say instead of training when it already holds the whole run (`nothing_left`), else None."""
    if cfg.get("ckpt_path") is None:
        return None
    path = Path(cfg.ckpt_path)
    state = _saved_network(
        cfg, path, "ckpt_path", lambda key: False, "resume with the overrides the run was started with"
    )
    return nothing_left(cfg, path, state)


def _saved_network(
    cfg: DictConfig, path: Path, setting: str, may_differ: Callable[[str], bool], fix: str
) -> dict[str, Any]:  # fmt: skip
    """The checkpoint `setting` names, read as data (no pickled code; nothing its config names is built), its
    network compared with this run's: the first setting that differs, but a backend's and those `may_differ`
    allows, refused in one line ending with `fix`. Returns the checkpoint's contents."""
    from andrea.models.files import schema as net_config
    from andrea.models.files.checkpoint import CHECKPOINT_CONFIG_KEY, read_checkpoint, saved_config

    try:
        state = read_checkpoint(path, setting)
        saved = saved_config(state, f"{setting}={path}")  # an older file: with its math's settings
        net_config.parse(saved, f"{setting}={path}", CHECKPOINT_CONFIG_KEY)
    except (FileNotFoundError, ValueError) as err:
        raise ConfigError(str(err)) from None
    current = OmegaConf.to_container(cfg.model.net, resolve=True)
    for key, was, now in _differences(saved, current, "model.net"):
        if _computes_alike(key) or may_differ(key):
            continue
        raise ConfigError(f"{setting}={path} holds a model with {key}={was!r}, this run builds {key}={now!r}; {fix}")
    return state


def nothing_left(cfg: DictConfig, path: Path, state: dict[str, Any]) -> str | None:
    """What to say instead of training when the checkpoint `state` already holds the whole run the config asks for
    (its steps reach trainer.max_steps, or its epochs trainer.max_epochs, the last one finished); None otherwise.
    Read from the checkpoint's own counters, before anything is built or written."""
    step, max_steps, max_epochs = (
        int(state.get("global_step", 0)),
        cfg.trainer.get("max_steps"),
        cfg.trainer.get("max_epochs"),
    )
    if isinstance(max_steps, int) and max_steps > 0 and step >= max_steps:
        reached = f"step {step} of trainer.max_steps={max_steps}"
    else:
        try:
            finished = bool(state["loops"]["fit_loop"]["epoch_loop.batch_progress"]["is_last_batch"])
            epochs = int(state["epoch"]) + finished  # the last epoch counts once its last batch is trained
        except (KeyError, TypeError, ValueError):
            return None
        if not isinstance(max_epochs, int) or max_epochs < 0 or epochs < max_epochs:
            return None
        reached = f"epoch {epochs} of trainer.max_epochs={max_epochs} (step {step})"
    return (
        f"ckpt_path={path} already holds the whole run ({reached}): nothing left to train, every file of the run "
        "left as it was; raise trainer.max_steps or trainer.max_epochs to train on"
    )


def _computes_alike(key: str) -> bool:
    """A setting two runs of the same weights may differ in: another backend computes the same function."""
    return key.endswith((".backend", ".backend_options")) or ".backend_options." in key


def _differences(a: Any, b: Any, prefix: str) -> Iterator[tuple[str, Any, Any]]:
    """(key, a's value, b's value) for every leaf where two nested configs differ."""
    if isinstance(a, dict) and isinstance(b, dict):
        if a.get("name") != b.get("name"):  # another variant (a mechanism, a position): its own options differ too
            yield f"{prefix}.name", a.get("name"), b.get("name")
            return
        for key in sorted(set(a) | set(b)):
            yield from _differences(a.get(key), b.get(key), f"{prefix}.{key}")
    elif a != b:
        yield prefix, a, b
