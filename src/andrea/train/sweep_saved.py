"""What a sweep's saved config (multirun.yaml in the sweep dir, read as plain values) says about its report: the
keys whose best run stands for each point (`report.best_over`), and the reproduction it is (`study`)."""

from __future__ import annotations

from pathlib import Path

from andrea.utils.run_result import RunResult


def saved(sweep_dir: Path, key: str) -> object:
    """A top-level key of the config Hydra saved in the sweep dir (multirun.yaml), read as plain values."""
    import yaml

    try:
        config = yaml.safe_load((sweep_dir / "multirun.yaml").read_text())
    except (OSError, yaml.YAMLError):
        return None
    return config.get(key) if isinstance(config, dict) else None


def best_over(sweep_dir: Path) -> list[str]:
    """The sweep's `report.best_over`."""
    report = saved(sweep_dir, "report")
    keys = report.get("best_over") if isinstance(report, dict) else None
    return [str(key) for key in keys] if isinstance(keys, list) else []


def study_section(sweep_dir: Path, results: list[RunResult]) -> str:
    """A reproduction's verdicts and figure (andrea.train.studies.report) for report.html; '' without a study."""
    from andrea.train.studies.report import write_study

    study = saved(sweep_dir, "study")
    return write_study(sweep_dir, study, results) if isinstance(study, dict) else ""
