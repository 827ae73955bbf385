"""What a composed training config says on its own, checked before anything is built (andrea.train.config
builds the run's parts next). Every refusal is one line that names the config key and how to fix it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
from hydra.utils import get_class, instantiate
from omegaconf import DictConfig, OmegaConf

from andrea.attention.spec import NETWORK, AttentionSpec
from andrea.lens.interventions import parse_heads
from andrea.train.checks_data import check_data
from andrea.train.checks_files import apply_init_from, check_checkpoint, check_run_start
from andrea.train.checks_layers import AttentionParts, attention_parts, check_mixers, network_layers
from andrea.train.checks_study import check_study
from andrea.train.errors import ConfigError
from andrea.train.hydra_run import is_multirun, launcher_target, task_overrides
from andrea.train.keys import check_added_keys, check_ranges, check_targets
from andrea.train.kind_defaults import drop_unused_attention, fill_kind_defaults
from andrea.train.maps_settings import check_settings as check_maps
from andrea.utils.rules import SettingError

if TYPE_CHECKING:
    from andrea.models.files.schema import NetSpec
    from andrea.models.memory import Estimate


def _get(cfg: DictConfig, key: str, default: Any = None) -> Any:
    return OmegaConf.select(cfg, key, default=default)


@dataclass
class Checked:
    """What the checks found: the training memory the run needs (None for a model andrea does not know), and
    the attention parts every layer shares, built once and checked (None: the network builds its own)."""

    memory: Estimate | None
    attention: AttentionParts | None
    finished: str | None = None  # ckpt_path already holds the whole run: what to say instead of training


def check_config(cfg: DictConfig, here: bool = True) -> Checked:
    """Every check of a run, once, before anything is built: refuse an impossible config with a one-line
    ConfigError naming the key. With `init_from` (GPT-2 weights to fine-tune), model.net first becomes the
    network those weights need. `here=False` checks a run planned for another machine (andrea-train
    --dry-run): everything but whether this machine has the run's GPU."""
    apply_init_from(cfg)
    fill_kind_defaults(cfg)
    drop_unused_attention(cfg)
    _check_model(cfg)
    _check_keys_and_values(cfg)
    estimate = _validate_memory(cfg, here)
    _validate_trainer(cfg)
    finished = check_checkpoint(cfg)
    check_run_start(cfg)
    if _get(cfg, "model.net.attention") is not None:  # None: the no-attention ablation
        _validate_attention(cfg)
    _validate_ablate(cfg)
    if _get(cfg, "model.scheduler") is not None:  # built once on a stand-in optimizer: its own checks refuse
        instantiate(cfg.model.scheduler)(torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=1.0))
    maps = _get(cfg, "callbacks.attention_maps")
    _refuse(check_maps(maps) if isinstance(maps, DictConfig) else None)
    _validate_distributed(cfg)
    check_data(cfg)
    layers = network_layers(cfg)  # each layer's spec, once, for the checks that read the layers
    check_mixers(cfg, layers)
    check_study(cfg)
    attention = attention_parts(cfg, layers, on_cpu(cfg))
    if here:
        check_accelerator(cfg)
    return Checked(estimate, attention, finished)


def _check_keys_and_values(cfg: DictConfig) -> None:
    """Every key is one its node takes, and every documented value is in its range."""
    for key in ("trainer.max_epochs", "trainer.max_steps"):
        if _get(cfg, key) == 0 and not isinstance(_get(cfg, key), bool):
            raise ConfigError(f"{key}=0 trains nothing; give a positive number (-1 for no limit on max_steps)")
    _refuse(check_added_keys(cfg, task_overrides()) or check_targets(cfg) or check_ranges(cfg))
    mode = _get(cfg, "logger.wandb.mode")
    if mode is not None and mode not in ("online", "offline", "disabled"):
        raise ConfigError(f"logger.wandb.mode={mode!r} must be online, offline or disabled")


def _refuse(problem: str | None) -> None:
    if problem:
        raise ConfigError(problem)


def _check_model(cfg: DictConfig) -> None:
    """A model is chosen, and its class takes the position scheme asked for."""
    net = _get(cfg, "model.net")
    if net is None:
        raise ConfigError("model.net is missing: choose a model, e.g. model=toy")
    position, supported = _get(cfg, "position.kind"), getattr(get_class(net._target_), "positions", None)
    if position is not None and supported is not None and position not in supported:
        raise ConfigError(
            f"position.kind={position!r} is not one of {', '.join(supported)} for model.net={net._target_}"
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
        # sizes only: the backend checks its options once, as the network builds it
        config = OmegaConf.to_container(cfg.model.net, resolve=True)
        spec = net_config.parse(config, "model.net", "model.net", build_backend=False)
    except ValueError:  # not one of andrea's models: its constructor checks it
        return None
    maps = _get(cfg, "callbacks.attention_maps")
    probe_rows = _get(cfg, "callbacks.attention_maps.probe_rows", 8) if maps is not None else 0
    return spec, memory.training(spec, batch_size, seq_len, probe_rows)


def _validate_memory(cfg: DictConfig, here: bool = True) -> Estimate | None:
    """Refuse a run whose estimated training memory exceeds the device's, before allocating any of it; a run
    planned for another machine (`here=False`) gets its estimate only, this machine's memory saying nothing of
    that one's."""
    from andrea.models import memory, mixer_sizes

    try:
        found = training_estimate(cfg)
    except mixer_sizes.MixerSizeError as err:
        raise ConfigError(f"{err}; lower it") from None
    if found is None:
        return None
    spec, need = found
    if not here:
        return need
    data = {"batch_size": cfg.data.batch_size, "seq_len": cfg.data.seq_len, "vocab_size": _get(cfg, "data.vocab_size")}
    keys = {name: f"model.net.{name}" for name in memory.REFERENCE} | {
        "batch_size": "data.batch_size",
        "seq_len": "data.seq_len",
    }
    if spec.fields["max_context"] == data["seq_len"]:  # presets take it from data.*: name the key a user sets
        keys["max_context"] = "data.seq_len"
    if spec.fields["vocab_size"] == data["vocab_size"]:
        keys["vocab_size"] = "data.vocab_size"
    device = "cpu" if on_cpu(cfg) or not torch.cuda.is_available() else "cuda"
    grown = mixer_sizes.mixer_growth(spec)
    problem = memory.too_big(need, {**spec.fields, **data}, keys, device, "training", grown)
    if problem:
        raise ConfigError(f"{problem}; lower {problem.split('=')[0]}")
    return need


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


def check_accelerator(cfg: DictConfig) -> None:
    """A GPU run where torch sees none (checked last: the parts' own refusals for a GPU come first)."""
    accelerator = _get(cfg, "trainer.accelerator", "cpu")
    if accelerator in ("gpu", "cuda") and not torch.cuda.is_available():
        raise ConfigError(
            f"trainer.accelerator={accelerator} but torch sees no GPU here; train with trainer=cpu (or trainer=ddp_cpu)"
        )


def on_cpu(cfg: DictConfig) -> bool:
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
    _check_precision(cfg)


def _check_precision(cfg: DictConfig) -> None:
    """A precision this machine's device runs: float16 needs a GPU, bfloat16 a GPU that has it."""
    precision = str(_get(cfg, "trainer.precision", ""))
    if precision in ("16-mixed", "16") and on_cpu(cfg):
        raise ConfigError(
            f"trainer.precision={precision}: float16 mixed precision needs a GPU; on CPU use "
            "trainer.precision=bf16-mixed or 32-true"
        )
    if (
        precision.startswith("bf16")
        and not on_cpu(cfg)
        and torch.cuda.is_available()
        and not torch.cuda.is_bf16_supported()
    ):
        raise ConfigError(f"trainer.precision={precision} needs a GPU with bfloat16; use trainer.precision=16-mixed")


def _validate_attention(cfg: DictConfig) -> None:
    """The network's attention read into its AttentionSpec and checked by it, before anything is built (the
    backend, the mechanism and the mask check their own values when the network builds them)."""
    net = OmegaConf.to_container(cfg.model.net, resolve=True)
    assert isinstance(net, dict)  # model.net is a mapping (_check_model)
    sizes = {key: net[key] for key in NETWORK if key in net}
    try:
        AttentionSpec.read({**net["attention"], **sizes}).checked()
    except SettingError as err:
        raise ConfigError(str(err)) from None
