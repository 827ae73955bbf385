"""Reproductions of published results at toy scale: each study (one file) measures its sweep's runs and reads
them into a figure and a verdict per claim (andrea.train.studies.report). An experiment names its study
(`study: {name: grokking, ...}`), and the name is mapped onto our own class here, never imported from a file."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from andrea.train.studies.base import Study
from andrea.train.studies.copying import Copying
from andrea.train.studies.diff_noise import DiffNoise
from andrea.train.studies.grokking import Grokking
from andrea.train.studies.induction_bump import InductionBump
from andrea.train.studies.lr_sensitivity import LRSensitivity
from andrea.train.studies.sinks import Sinks
from andrea.train.studies.state_tracking import StateTracking
from andrea.train.studies.zoology import Zoology

STUDIES: dict[str, type[Study]] = {  # in docs/reproductions.md's order
    cls.name: cls for cls in (Zoology, InductionBump, LRSensitivity, Sinks, Grokking, DiffNoise, Copying, StateTracking)
}


def build(settings: Mapping[str, Any]) -> Study:
    """The study a config's `study` node names, with its settings; ValueError in one line naming the key."""
    values = dict(settings)
    name = values.pop("name", None)
    if name not in STUDIES:
        raise ValueError(f"study.name={name!r} is not a study: use one of {', '.join(STUDIES)}")
    return STUDIES[name].build(values)
