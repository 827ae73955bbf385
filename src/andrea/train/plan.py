"""A sweep planned before it runs (`andrea-train ... --dry-run`): every job's config composed, checked and built
as its run would build it (model and data module, no step taken and no file written), and what it will cost:

    steps     trainer.max_steps, else trainer.max_epochs x the optimizer steps an epoch (the data module's batches
              over trainer.accumulate_grad_batches; the fewer, where both are given); early stopping may end a job
              sooner: a plan is the most a job takes
    tokens    steps x the tokens of one optimizer step (its batches, on every device)
    memory    the training memory andrea estimates (andrea.models.memory), marked ! above an H100's 80 GiB
    FLOPs     6 x the network's matrix weights a token (forward and backward) + 12 x T x d_model a token and
              attention layer (scores and their weighted sum, forward and backward): the usual estimate, which
              leaves out the norms, softmax, recurrences and the validation passes
    minutes   on one H100, planned, not measured: the FLOPs at UTILISATION of its dense bf16 peak, and never less
              than STEP_FLOOR_S an optimizer step (at these sizes the kernel launches and Lightning's loop, not the
              arithmetic, set the pace)

The recipes' plans (conf/experiment/gpu/) are how docs/reproductions.md gives each one's minutes.
"""

from __future__ import annotations

import math
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from omegaconf import DictConfig, OmegaConf
from torch import nn

from andrea.train.errors import ConfigError

H100_BF16_FLOPS = 989e12  # an H100 SXM's dense bf16 peak (NVIDIA's datasheet, without sparsity)
UTILISATION = 0.3  # the share of the peak a small model's training is planned to reach (assumed)
STEP_FLOOR_S = 0.015  # the least time an optimizer step is planned to take, whatever its FLOPs (assumed)
H100_MEMORY_GIB = 80  # an H100's memory: a job estimated above it is marked `!`
WIDTHS = (4, 11, 10, 7, 14, 8, 8)  # the table's columns


@dataclass(frozen=True)
class JobPlan:
    label: str  # the job's overrides
    parameters: int
    memory_gib: float | None  # the training memory andrea estimates (andrea.models.memory), where it can
    steps: int
    tokens: int
    flops: float

    @property
    def h100_minutes(self) -> float:
        return max(self.flops / (H100_BF16_FLOPS * UTILISATION), self.steps * STEP_FLOOR_S) / 60


def job_plan(cfg: DictConfig, label: str, seen: dict[str, tuple[int | None, int, int]] | None = None) -> JobPlan:
    """One job's plan, from its parts built as its run builds them (checked for the machine it is planned for,
    not this one: andrea.train.checks.check_config's here=False). `seen`: the batches of each data config already
    built, by its YAML (a sweep's jobs mostly share their data). A batch is a step's share of each device
    (`trainer.accumulate_grad_batches` of them a step); `trainer.devices` -1 or "auto" is planned as one."""
    from andrea.train.config import validate

    parts = validate(cfg, here=False)
    seen = {} if seen is None else seen
    data = OmegaConf.to_yaml(cfg.data)
    if data not in seen:
        seen[data] = _batches(parts.datamodule)
    batches, batch_tokens, seq_len = seen[data]
    accumulate = int(OmegaConf.select(cfg, "trainer.accumulate_grad_batches", default=1) or 1)
    devices = OmegaConf.select(cfg, "trainer.devices", default=1)
    steps = _steps(cfg, batches, accumulate)
    net = getattr(parts.module, "net", parts.module)  # andrea's module holds its network as `net`; a user's may not
    memory = None if parts.memory is None else parts.memory.total_bytes / 2**30
    tokens = steps * accumulate * (devices if isinstance(devices, int) and devices > 0 else 1) * batch_tokens
    parameters = sum(p.numel() for p in net.parameters())
    return JobPlan(label, parameters, memory, steps, tokens, _flops_per_token(net, cfg, seq_len) * tokens)


def _flops_per_token(net: nn.Module, cfg: DictConfig, seq_len: int) -> float:
    """6 x the matrix weights (forward and backward) + 12 x T x d_model for each attention layer."""
    matrices = sum(m.weight.numel() for m in net.modules() if isinstance(m, nn.Linear))
    attention = sum(getattr(spec, "has_attention", False) for spec in getattr(net, "layer_specs", ()))
    d_model = int(OmegaConf.select(cfg, "model.net.d_model", default=0) or 0)
    return float(6 * matrices + 12 * attention * seq_len * d_model)


def _batches(datamodule: Any) -> tuple[int | None, int, int]:
    """The data module's training batches an epoch (None for a loader without a length), the tokens of one batch
    and its length: `input_ids` of a dict batch, else its first tensor."""
    datamodule.setup("fit")
    loader = datamodule.train_dataloader()
    batch = next(iter(loader))
    ids = batch["input_ids"] if isinstance(batch, dict) else batch[0] if isinstance(batch, list | tuple) else batch
    try:
        batches = len(loader)
    except TypeError:  # an iterable dataset: its epoch has no length
        batches = None
    return batches, ids.numel(), ids.shape[-1]


def _steps(cfg: DictConfig, batches: int | None, accumulate: int = 1) -> int:
    """The optimizer steps a job takes at most: trainer.max_steps, or trainer.max_epochs epochs of the batches
    (a step each `accumulate` of them), the fewer where both are given (Lightning's 1,000 epochs where neither is)."""
    max_steps = OmegaConf.select(cfg, "trainer.max_steps", default=-1)
    max_steps = -1 if max_steps is None else int(max_steps)
    max_epochs = OmegaConf.select(cfg, "trainer.max_epochs", default=None)
    max_epochs = (-1 if max_steps > 0 else 1000) if max_epochs is None else int(max_epochs)
    batches = _limited(batches, OmegaConf.select(cfg, "trainer.limit_train_batches", default=None))
    by_epochs = max_epochs * math.ceil(batches / accumulate) if max_epochs > 0 and batches else None
    if max_steps > 0:
        return max_steps if by_epochs is None else min(max_steps, by_epochs)
    if by_epochs is None:
        raise ConfigError(
            "trainer.max_steps is unlimited and the epochs have no end to count (trainer.max_epochs=-1, or a data "
            "loader without a length): set trainer.max_steps to plan the run"
        )
    return by_epochs


def _limited(batches: int | None, limit: object) -> int | None:
    """An epoch's batches under trainer.limit_train_batches: a fraction of them, or at most a count."""
    if batches is None or limit is None or isinstance(limit, bool):
        return batches
    if isinstance(limit, float) and limit <= 1.0:
        return max(1, int(batches * limit))
    return min(batches, int(limit)) if isinstance(limit, int) else batches


def plan_sweep(points: Sequence[Sequence[str]], compose: Callable[[list[str]], DictConfig]) -> list[JobPlan]:
    """Each job's plan: `points` its overrides, as the sweeper launches them; `compose` its config from them."""
    seen: dict[str, tuple[int | None, int, int]] = {}
    plans = []
    with tempfile.TemporaryDirectory() as scratch:  # a text corpus's token cache, kept out of the user's folders
        for point in points:
            cfg = compose(list(point))
            if OmegaConf.select(cfg, "data.cache_dir") is not None:
                cfg.data.cache_dir = scratch
            plans.append(job_plan(cfg, " ".join(point) or "defaults", seen))
    return plans


def table(plans: Sequence[JobPlan]) -> str:
    """The plan as printed: a row a job, then the total."""
    head = ("job", "parameters", "memory", "steps", "tokens", "PFLOP", "H100 min")
    rows = ["  ".join(f"{name:>{width}}" for name, width in zip(head, WIDTHS, strict=True)) + "  overrides"]
    for number, plan in enumerate(plans):
        cells = (f"{number}", f"{plan.parameters:,}", _gib(plan.memory_gib), f"{plan.steps:,}", f"{plan.tokens:,}",
                 f"{plan.flops / 1e15:.2f}", f"{plan.h100_minutes:.1f}")  # fmt: skip
        row = "  ".join(f"{cell:>{width}}" for cell, width in zip(cells, WIDTHS, strict=True))
        rows.append(f"{row}  {plan.label}")
    minutes = sum(plan.h100_minutes for plan in plans)
    rows.append(
        f"{len(plans)} job{'s' * (len(plans) != 1)}, at most {sum(p.steps for p in plans):,} steps: about "
        f"{minutes:.0f} min on one H100 (planned: {UTILISATION:.0%} of its bf16 peak, at least "
        f"{STEP_FLOOR_S * 1000:.0f} ms a step; not measured)"
    )
    over = sum((plan.memory_gib or 0) > H100_MEMORY_GIB for plan in plans)
    if over:
        rows.append(f"{over} job{'s' * (over != 1)} marked ! need more than an H100's {H100_MEMORY_GIB} GiB, estimated")
    return "\n".join(rows)


def _gib(size: float | None) -> str:
    return "?" if size is None else f"{size:.1f} GiB" + "!" * (size > H100_MEMORY_GIB)
