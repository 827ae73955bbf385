"""A sweep planned before it runs (`andrea-train ... --dry-run`): every job's config composed, checked and built
as its run would build it (model and data module, no step taken and no file written), and what it will cost:

    steps     trainer.max_steps, else trainer.max_epochs x the data module's batches an epoch (the fewer, where
              both are given); early stopping may end a job sooner: a plan is the most a job takes
    tokens    steps x the tokens of one training batch
    FLOPs     6 x the network's matrix weights a token (forward and backward) + 12 x T x d_model a token and
              attention layer (scores and their weighted sum, forward and backward): the usual estimate, which
              leaves out the norms, softmax, recurrences and the validation passes
    minutes   on one H100, planned, not measured: the FLOPs at UTILISATION of its dense bf16 peak, and never less
              than STEP_FLOOR_S an optimizer step (at these sizes the kernel launches and Lightning's loop, not the
              arithmetic, set the pace)

The recipes' plans (conf/experiment/gpu/) are how docs/reproductions.md gives each one's minutes.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from omegaconf import DictConfig, OmegaConf
from torch import nn

H100_BF16_FLOPS = 989e12  # an H100 SXM's dense bf16 peak (NVIDIA's datasheet, without sparsity)
UTILISATION = 0.3  # the share of the peak a small model's training is planned to reach (assumed)
STEP_FLOOR_S = 0.015  # the least time an optimizer step is planned to take, whatever its FLOPs (assumed)
WIDTHS = (4, 11, 9, 7, 14, 8, 8)  # the table's columns


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


def job_plan(cfg: DictConfig, label: str, seen: dict[str, tuple[int, int, int]] | None = None) -> JobPlan:
    """One job's plan, from its parts built as its run builds them (checked for the machine it is planned for,
    not this one: andrea.train.checks.check_config's here=False). `seen`: the batches of each data config already
    built, by its YAML (a sweep's jobs mostly share their data)."""
    from andrea.train.config import validate

    parts = validate(cfg, here=False)
    seen = {} if seen is None else seen
    data = OmegaConf.to_yaml(cfg.data)
    if data not in seen:
        seen[data] = _batches(parts.datamodule)
    batches, tokens_per_step, seq_len = seen[data]
    steps = _steps(cfg, batches)
    net = parts.module.net
    matrices = sum(m.weight.numel() for m in net.modules() if isinstance(m, nn.Linear))
    attention = sum(getattr(spec, "has_attention", False) for spec in getattr(net, "layer_specs", ()))
    d_model = int(OmegaConf.select(cfg, "model.net.d_model", default=0) or 0)
    per_token = 6 * matrices + 12 * attention * seq_len * d_model
    parameters = sum(p.numel() for p in net.parameters())
    memory = None if parts.memory is None else parts.memory.total_bytes / 2**30
    tokens = steps * tokens_per_step
    return JobPlan(label, parameters, memory, steps, tokens, float(per_token) * tokens)


def _batches(datamodule: Any) -> tuple[int, int, int]:
    """The data module's training batches an epoch, the tokens of one batch and its length."""
    datamodule.setup("fit")
    loader = datamodule.train_dataloader()
    ids = next(iter(loader))["input_ids"]
    return len(loader), ids.numel(), ids.shape[1]


def _steps(cfg: DictConfig, batches: int) -> int:
    max_steps = int(OmegaConf.select(cfg, "trainer.max_steps", default=-1) or -1)
    max_epochs = int(OmegaConf.select(cfg, "trainer.max_epochs", default=-1) or -1)
    limit = OmegaConf.select(cfg, "trainer.limit_train_batches", default=None)
    if isinstance(limit, float) and limit <= 1.0:
        batches = max(1, int(batches * limit))
    elif isinstance(limit, int):
        batches = min(batches, limit)
    by_epochs = max_epochs * batches if max_epochs > 0 else None
    if max_steps > 0:
        return max_steps if by_epochs is None else min(max_steps, by_epochs)
    if by_epochs is None:
        raise ValueError("trainer.max_steps and trainer.max_epochs are both unlimited: the plan has no end to count")
    return by_epochs


def plan_sweep(points: Sequence[Sequence[str]], compose: Callable[[list[str]], DictConfig]) -> list[JobPlan]:
    """Each job's plan: `points` its overrides, as the sweeper launches them; `compose` its config from them."""
    seen: dict[str, tuple[int, int, int]] = {}
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
    return "\n".join(rows)


def _gib(size: float | None) -> str:
    return "?" if size is None else f"{size:.1f} GiB"
