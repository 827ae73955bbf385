"""What a reproduction is made of: a Study measures its runs while they train (`probe`) and once they end
(`final`), then reads its sweep's jobs into a figure and a verdict per published claim (`findings`).

A study's settings are fixed in its experiment's config (`study: {name: ..., ...}`) before the first run; its
thresholds are class constants, written down with the claim they judge, never moved after a run.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import torch
from torch import Tensor

from andrea.models import streaming
from andrea.models.network import Network, network
from andrea.train.sweep_groups import standing
from andrea.utils.rules import BOOLEAN, FINITE, Rule, enforce, integer
from andrea.utils.run_result import RunResult
from andrea.utils.typed_settings import signature_rules

HOLDS, FAILS, UNSURE = "holds", "does not hold", "inconclusive"
TYPED: dict[Any, Rule] = {bool: BOOLEAN, int: integer(0), float: FINITE}  # a study's settings by their fields' types
VERDICTS = (HOLDS, FAILS, UNSURE)


@dataclass(frozen=True)
class Claim:
    """One published claim: what it says, the paper's figure for it, what andrea measured, and the verdict."""

    claim: str
    paper: str
    ours: str
    verdict: str

    def __post_init__(self) -> None:
        assert self.verdict in VERDICTS, self.verdict


@dataclass
class Job:
    """One completed job of a study's sweep: its result, read by its settings and the study's records."""

    result: RunResult

    def setting(self, key: str, default: Any = None) -> Any:
        """A value of the job's resolved config by its dotted key (`model.net.d_model`)."""
        node: Any = self.result.config or {}
        for part in key.split("."):
            if not isinstance(node, Mapping) or part not in node:
                return default
            node = node[part]
        return node

    @property
    def series(self) -> list[dict[str, float]]:
        """The probe's records, each {"step": ..., measured: value}."""
        return list((self.result.study or {}).get("series") or [])

    @property
    def final(self) -> dict[str, Any]:
        return dict((self.result.study or {}).get("final") or {})

    def curve(self, name: str) -> tuple[list[int], list[float]]:
        """(steps, values) of one measured number over training."""
        rows = [row for row in self.series if row.get(name) is not None]
        return [int(row["step"]) for row in rows], [float(row[name]) for row in rows]


@dataclass
class Study:
    """A reproduction's measurements and verdicts. Subclasses add their settings as fields and set the class
    constants; `every_n_steps` is how often `probe` records (0: never, only `final`)."""

    name: ClassVar[str]
    title: ClassVar[str]  # the paper(s), as docs/reproductions.md heads the section
    tasks: ClassVar[tuple[str, ...]] = ()  # the data modules' `name`s it reads (empty: any)
    every_n_steps: int = 0

    def probe(self, module: torch.nn.Module, data: Any) -> dict[str, float]:
        """Numbers to record now, from the model in eval mode under no_grad (`data`: the run's data module)."""
        return {}

    def final(self, module: torch.nn.Module, data: Any) -> dict[str, Any]:
        """Numbers from the trained model, kept in result.json beside the probe's records."""
        return {}

    def refuses(self, net: Network) -> str | None:
        """Why a run of this network cannot be measured by the study (its measurements would fail after training),
        or None; asked of the run's network built on the meta device, before anything trains."""
        return None

    def findings(self, jobs: list[Job], figure: Path) -> list[Claim]:
        """The verdict of each claim from the sweep's completed jobs; the figure drawn at `figure`."""
        raise NotImplementedError

    @classmethod
    def build(cls, settings: Mapping[str, Any]) -> Study:
        """The study with `settings` (the config's `study` node without `name`); one line for an unknown key."""
        fields = [f.name for f in dataclasses.fields(cls)]
        for key in settings:
            if key not in fields:
                close = difflib.get_close_matches(str(key), fields, n=1)
                hint = f" (did you mean study.{close[0]}?)" if close else ""
                raise ValueError(f"study.{key} is not a setting of the {cls.name} study{hint}; it takes {fields}")
        enforce(signature_rules(cls, TYPED), settings, "study.")  # its fields' types: every_n_steps=true is no step
        return cls(**settings)


def by_setting(jobs: list[Job], key: str, default: Any = None) -> dict[Any, list[Job]]:
    """The jobs grouped by one setting's value (`mechanism.name`, `model.net.n_layer`), in the order each value
    first appears."""
    groups: dict[Any, list[Job]] = {}
    for job in jobs:
        groups.setdefault(job.setting(key, default), []).append(job)
    return groups


def best_by(jobs: list[Job], key: Callable[[Job], Any]) -> dict[Any, Job]:
    """Each key's best job (a model's, over the learning rates), by the rule the sweep report's best_over uses
    (andrea.train.sweep_groups.standing), in the order the keys first appear."""
    best: dict[Any, Job] = {}
    for job in jobs:
        k = key(job)
        if k not in best or standing(job.result) > standing(best[k].result):
            best[k] = job
    return best


def net_of(module: torch.nn.Module) -> Network:
    """The network a LanguageModelModule trains."""
    return network(module.get_submodule("net"))


def logits(module: torch.nn.Module, ids: Tensor) -> Tensor:
    """(B, T, V) logits of the network a LanguageModelModule trains."""
    return net_of(module)(ids)[0]


def token_losses(module: torch.nn.Module, ids: Tensor, targets: Tensor) -> Tensor:
    """(B, T) cross-entropy of each position's prediction of `targets` (same shape as ids)."""
    return streaming.token_losses(logits(module, ids), targets)


def resting_on(claim: Claim, precondition: Claim | None, reason: str | None = None) -> Claim:
    """`claim`, whose verdict means something only where `precondition` holds: inconclusive where it did not, saying
    which (`reason`, else the precondition's own words and verdict). A verdict inconclusive already stays so."""
    if claim.verdict == UNSURE or (precondition is not None and precondition.verdict == HOLDS):
        return claim
    said = reason or (f"'{precondition.claim}' {precondition.verdict}" if precondition else "its precondition failed")
    return dataclasses.replace(claim, ours=f"{claim.ours}; judged on a failed precondition ({said})", verdict=UNSURE)


def judged(outcomes: list[bool]) -> str:
    """A claim judged in several runs (seeds, mixers, widths): holds in all, fails in none, else inconclusive."""
    return HOLDS if outcomes and all(outcomes) else FAILS if outcomes and not any(outcomes) else UNSURE


def first_reaching(steps: list[int], values: list[float], level: float, above: bool = True) -> int | None:
    """The first step whose value reaches `level` (from below with `above`, else from above), None if none."""
    for step, value in zip(steps, values, strict=True):
        if (value >= level) if above else (value <= level):
            return step
    return None
