"""One validation step for a composed training config, run before anything is built.

Every refusal is one line that names the config key and how to fix it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from hydra.errors import InstantiationException
from hydra.utils import get_class, instantiate
from omegaconf import DictConfig, OmegaConf, open_dict
from omegaconf.errors import InterpolationResolutionError

from andrea.attention import HeadConfig, UnsupportedAttentionError, backend_registry, get_backend
from andrea.attention.positions import ALiBi
from andrea.lens.interventions import parse_heads
from andrea.train.hydra_run import is_multirun, launcher_target, task_overrides
from andrea.train.keys import check_added_keys, check_ranges

if TYPE_CHECKING:
    from andrea.models.files.schema import NetSpec
    from andrea.models.memory import Estimate


class ConfigError(ValueError):
    """A composed config that cannot run."""


def _get(cfg: DictConfig, key: str, default: Any = None) -> Any:
    return OmegaConf.select(cfg, key, default=default)


def validate(cfg: DictConfig) -> None:
    """Refuse an impossible config with a one-line ConfigError naming the key. With `init_from` (GPT-2
    weights to fine-tune), model.net first becomes the network those weights need."""
    try:
        _apply_init_from(cfg)
        _validate(cfg)
    except ConfigError:
        raise
    except InstantiationException as err:  # Hydra wraps what the constructor raised
        raise ConfigError(_constructor_message(err)) from None
    except InterpolationResolutionError as err:  # a resolver refused, e.g. a missing data package
        cause = err.__cause__ if isinstance(err.__cause__, ValueError) else err
        raise ConfigError(str(cause).splitlines()[0]) from None
    except ValueError as err:  # the zoo's own one-line messages already name the key
        raise ConfigError(str(err).splitlines()[0]) from None


def _constructor_message(err: InstantiationException) -> str:
    """The one line to show for a constructor that refused its config."""
    import re

    cause = err.__cause__
    if isinstance(cause, (ValueError, OSError)):  # the zoo's own messages name the key already
        return (
            cause.args[0]
            if isinstance(cause, OSError) and cause.args and isinstance(cause.args[0], str)
            else str(cause)
        ).splitlines()[0]
    unknown = re.search(r"unexpected keyword argument '(\w+)'", str(cause))
    node = re.search(r"full_key: ([\w.]+)", str(err))
    target = re.search(r"target '([\w.]+)'", str(err))
    if unknown and node:
        where = target.group(1).rsplit(".", 1)[-1] if target else "its target"
        return f"{node.group(1)}.{unknown.group(1)} is not a setting of {where}; drop the override"
    return " ".join(str(err).split())


def _validate(cfg: DictConfig) -> None:
    net = _get(cfg, "model.net")
    if net is None:
        raise ConfigError("model.net is missing: choose a model, e.g. model=toy")
    position, supported = _get(cfg, "position.kind"), getattr(get_class(net._target_), "positions", None)
    if position is not None and supported is not None and position not in supported:
        raise ConfigError(
            f"position.kind={position!r} is not one of {', '.join(supported)} for model.net={net._target_}"
        )
    for key in ("trainer.max_epochs", "trainer.max_steps"):
        if _get(cfg, key) == 0 and not isinstance(_get(cfg, key), bool):
            raise ConfigError(f"{key}=0 trains nothing; give a positive number (-1 for no limit on max_steps)")
    problem = check_added_keys(cfg, task_overrides()) or check_ranges(cfg)
    if problem:
        raise ConfigError(problem)
    _validate_memory(cfg)
    _validate_trainer(cfg)
    _validate_checkpoint(cfg)
    mode = _get(cfg, "logger.wandb.mode")
    if mode is not None and mode not in ("online", "offline", "disabled"):
        raise ConfigError(f"logger.wandb.mode={mode!r} must be online, offline or disabled")
    if _get(cfg, "model.net.attention") is not None:  # None: the no-attention ablation
        _validate_attention(cfg, _get(cfg, "data.seq_len"))
    _validate_ablate(cfg)
    if _get(cfg, "model.scheduler") is not None:  # built once on a stand-in optimizer: its own checks refuse
        instantiate(cfg.model.scheduler)(torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=1.0))
    row, rows = _get(cfg, "callbacks.attention_maps.row"), _get(cfg, "callbacks.attention_maps.probe_rows")
    if isinstance(row, int) and isinstance(rows, int) and row >= rows:
        raise ConfigError(
            f"callbacks.attention_maps.row={row} must be below callbacks.attention_maps.probe_rows={rows}; "
            "pick a row in range, or draw more probe rows"
        )
    data = instantiate(cfg.data)  # checks data.* itself; builds no tensors yet (imports Lightning: last)
    _validate_distributed(cfg)
    accelerator = _get(cfg, "trainer.accelerator", "cpu")
    if accelerator in ("gpu", "cuda") and not torch.cuda.is_available():
        raise ConfigError(
            f"trainer.accelerator={accelerator} but torch sees no GPU here; train with trainer=cpu (or trainer=ddp_cpu)"
        )
    net_vocab = _get(cfg, "model.net.vocab_size")
    if isinstance(net_vocab, int) and net_vocab < data.vocab_size:
        raise ConfigError(
            f"model.net.vocab_size={net_vocab} is smaller than the data's vocabulary ({data.vocab_size}): token ids "
            f"up to {data.vocab_size - 1} would index past the embedding; drop the override"
        )
    if _get(cfg, "model.net.max_context", data.seq_len) < data.seq_len:
        raise ConfigError(
            f"data.seq_len={data.seq_len} exceeds model.net.max_context={net.max_context}; raise max_context"
        )
    if data.num_train < data.batch_size:
        raise ConfigError(
            f"data.num_train={data.num_train} is smaller than data.batch_size={data.batch_size}: "
            "not one full batch to train on; lower the batch size or make more rows"
        )


def training_estimate(cfg: DictConfig) -> tuple[NetSpec, Estimate] | None:
    """What training this config needs in memory (andrea.models.memory), None for a model andrea
    does not know (a user's own `_target_`) or data without a fixed window."""
    from andrea.models import memory
    from andrea.models.files import schema as net_config

    batch_size, seq_len = _get(cfg, "data.batch_size"), _get(cfg, "data.seq_len")
    if not (isinstance(batch_size, int) and isinstance(seq_len, int)):
        return None
    try:
        spec = net_config.parse(OmegaConf.to_container(cfg.model.net, resolve=True), "model.net", "model.net")
    except ValueError:  # not one of andrea's models: its constructor checks it
        return None
    maps = _get(cfg, "callbacks.attention_maps")
    probe_rows = _get(cfg, "callbacks.attention_maps.probe_rows", 8) if maps is not None else 0
    return spec, memory.training(spec, batch_size, seq_len, probe_rows)


def _validate_memory(cfg: DictConfig) -> None:
    """Refuse a run whose estimated training memory exceeds the device's, before allocating any of it."""
    from andrea.models import memory

    found = training_estimate(cfg)
    if found is None:
        return
    spec, need = found
    data = {"batch_size": cfg.data.batch_size, "seq_len": cfg.data.seq_len, "vocab_size": _get(cfg, "data.vocab_size")}
    keys = {name: f"model.net.{name}" for name in memory.REFERENCE} | {
        "batch_size": "data.batch_size",
        "seq_len": "data.seq_len",
    }
    if spec.fields["max_context"] == data["seq_len"]:  # presets take it from data.*: name the key a user sets
        keys["max_context"] = "data.seq_len"
    if spec.fields["vocab_size"] == data["vocab_size"]:
        keys["vocab_size"] = "data.vocab_size"
    device = "cpu" if _on_cpu(cfg) or not torch.cuda.is_available() else "cuda"
    problem = memory.too_big(need, {**spec.fields, **data}, keys, device, "training")
    if problem:
        raise ConfigError(f"{problem}; lower {problem.split('=')[0]}")


def _apply_init_from(cfg: DictConfig) -> None:
    """init_from=<GPT-2 folder>: model.net takes the sizes, biases and activation of its config.json
    (read as data: andrea.models.files.gpt2); the attention backend and mask stay the run's own."""
    folder = cfg.get("init_from")
    if folder is None:
        return
    from andrea.models.files import gpt2

    if not isinstance(folder, str):
        raise ConfigError(f"init_from={folder!r} must be the path of a Hugging Face GPT-2 folder")
    try:
        weights = gpt2.weights_file(folder)
        config = gpt2.net_config(weights.parent / "config.json")
    except (FileNotFoundError, ValueError) as err:
        raise ConfigError(f"init_from={folder}: {str(err).splitlines()[0]}") from None
    if _get(cfg, "position.kind", "learned") != "learned":
        raise ConfigError(
            f"init_from={folder}: GPT-2's weights need learned positions; drop position={cfg.position.kind}"
        )
    attention = config.pop("attention")
    with open_dict(cfg):
        net = cfg.model.net
        for key, value in config.items():
            net[key] = value
        net.attention.n_head = attention["n_head"]
        net.attention.n_kv_head = attention["n_head"]  # GPT-2 has a key/value head per query head


def _validate_checkpoint(cfg: DictConfig) -> None:
    """ckpt_path: a readable andrea-train checkpoint of this very model, loaded with no pickled code."""
    from andrea.models.files import schema as net_config
    from andrea.models.files.checkpoint import CHECKPOINT_CONFIG_KEY, read_checkpoint

    if cfg.get("ckpt_path") is None:
        return
    path = Path(cfg.ckpt_path)
    try:
        saved = read_checkpoint(path)[CHECKPOINT_CONFIG_KEY]
        net_config.parse(saved, f"ckpt_path={path}", CHECKPOINT_CONFIG_KEY)  # data only: nothing it names is built
    except (FileNotFoundError, ValueError) as err:
        raise ConfigError(str(err)) from None
    current = OmegaConf.to_container(cfg.model.net, resolve=True)
    for key, was, now in _differences(saved, current, "model.net"):
        if key.endswith((".backend", ".backend_options")) or ".backend_options." in key:
            continue  # another backend computes the same function of the same weights
        raise ConfigError(
            f"ckpt_path={path} holds a model with {key}={was!r}, this run builds {key}={now!r}; "
            "resume with the overrides the run was started with"
        )


def _differences(a: Any, b: Any, prefix: str) -> Iterator[tuple[str, Any, Any]]:
    """(key, a's value, b's value) for every leaf where two nested configs differ."""
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b)):
            yield from _differences(a.get(key), b.get(key), f"{prefix}.{key}")
    elif a != b:
        yield prefix, a, b


def _validate_ablate(cfg: DictConfig) -> None:
    ablate = _get(cfg, "model.ablate")
    if not ablate:
        return
    if isinstance(ablate, str) or not OmegaConf.is_list(ablate):
        raise ConfigError(f"model.ablate={ablate!r} must be a list of heads, e.g. model.ablate=[L0H1,L1H3]")
    n_layer = _get(cfg, "model.net.n_layer", 1)
    n_head = _get(cfg, "model.net.attention.n_head", 0) if _get(cfg, "model.net.attention") is not None else 0
    parse_heads(list(ablate), n_layer if _get(cfg, "model.net.attention") is not None else 0, n_head, "model.ablate")


def _validate_distributed(cfg: DictConfig) -> None:
    """What a data- or model-parallel run cannot do."""
    strategy = str(_get(cfg, "trainer.strategy", "") or "").lower()
    if not ("ddp" in strategy or "fsdp" in strategy):
        return
    if _get(cfg, "model.nonfinite") == "skip":
        raise ConfigError(
            "model.nonfinite=skip: Lightning cannot skip a step in distributed training; use model.nonfinite=stop"
        )
    if "fsdp" in strategy and _get(cfg, "callbacks.attention_maps") is not None:
        raise ConfigError(
            "callbacks.attention_maps runs the network outside FSDP's forward, where its weights are sharded; "
            "add ~callbacks.attention_maps, or use trainer=ddp"
        )
    launcher = launcher_target()
    devices = _get(cfg, "trainer.devices")
    if "Slurm" in launcher and not (isinstance(devices, int) and devices > 0):
        raise ConfigError(
            f"trainer.devices={devices} with hydra/launcher=slurm: give the number of GPUs per node, e.g. "
            "trainer.devices=4"
        )


def _on_cpu(cfg: DictConfig) -> bool:
    accelerator = _get(cfg, "trainer.accelerator", "cpu")
    return accelerator == "cpu" or (accelerator == "auto" and not torch.cuda.is_available())


def _validate_trainer(cfg: DictConfig) -> None:
    strategy = str(_get(cfg, "trainer.strategy", "") or "").lower()
    launcher = launcher_target()
    if ("ddp" in strategy or "fsdp" in strategy) and is_multirun() and "Slurm" not in launcher:
        raise ConfigError(
            "trainer.strategy=ddp in a multirun: each DDP process would start its own sweep; "
            "run DDP jobs one at a time (no -m), or sweep with hydra/launcher=slurm (one SLURM task per GPU)"
        )
    precision = str(_get(cfg, "trainer.precision", ""))
    if precision in ("16-mixed", "16") and _on_cpu(cfg):
        raise ConfigError(
            f"trainer.precision={precision}: float16 mixed precision needs a GPU; on CPU use "
            "trainer.precision=bf16-mixed or 32-true"
        )
    if (
        precision.startswith("bf16")
        and not _on_cpu(cfg)
        and torch.cuda.is_available()
        and not torch.cuda.is_bf16_supported()
    ):
        raise ConfigError(f"trainer.precision={precision} needs a GPU with bfloat16; use trainer.precision=16-mixed")


def _validate_attention(cfg: DictConfig, seq_len: int) -> None:
    heads = HeadConfig(cfg.heads.n_head, cfg.heads.n_kv_head)  # heads.n_kv_head must divide heads.n_head
    head_dim = heads.head_dim(_get(cfg, "model.net.d_model"), key="model.net.d_model")
    name = cfg.attention.backend
    if name not in backend_registry.names():
        raise ConfigError(f"attention.backend={name!r} is unknown; available: {', '.join(backend_registry.names())}")
    backend = get_backend(name, **(_get(cfg, "attention.options") or {}))
    mask = instantiate(cfg.mask)  # mask.window, mask.prefix_len, ... are checked by the mask itself
    if isinstance(seq_len, int):
        mask.check_context(seq_len)  # and against the context: any mask, a plugin's too
    position = _get(cfg, "position.kind")
    if position == "rope" and head_dim % 2:
        raise ConfigError(f"position=rope needs an even head_dim, got model.net.d_model / heads.n_head = {head_dim}")
    score_mod = ALiBi(heads.n_head) if position == "alibi" else None
    device = "cpu" if _on_cpu(cfg) else "cuda"
    try:  # the backend's own checks (capabilities, constraints), for the device training will run on
        backend.check(mask=mask, device=device, needs_grad=True, score_mod=score_mod, head_dim=head_dim)
    except UnsupportedAttentionError as err:
        raise ConfigError(f"attention={name}: {err}" + (" (trainer=gpu)" if device == "cpu" else "")) from None
