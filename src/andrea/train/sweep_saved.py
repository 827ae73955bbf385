"""What a sweep's saved config (multirun.yaml in the sweep dir, read as plain values) says about its report: the
keys whose best run stands for each point (`report.best_over`), whether it scores MAD (`report.mad_score`), and
the reproduction it is (`study`)."""

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


def mad_section(sweep_dir: Path, results: list[RunResult]) -> str:
    """With `report.mad_score`: MAD's scores of the sweep's models (andrea.train.mad_score) in mad_scores.md, and
    their table for report.html; '' without."""
    import html

    from andrea.train.mad_score import MAD_SCORES, mad_scores, mad_table, score_rows

    report = saved(sweep_dir, "report")
    if not (isinstance(report, dict) and report.get("mad_score") is True):
        return ""
    rows = score_rows(mad_scores(results, best_over(sweep_dir)))
    (sweep_dir / MAD_SCORES).write_text("# MAD scores\n\n" + mad_table(rows))
    head = "".join(f"<th>{html.escape(c)}</th>" for c in rows[0]) if rows else ""
    body = "".join("<tr>" + "".join(f"<td>{html.escape(v)}</td>" for v in row.values()) + "</tr>" for row in rows)
    what = "the mean over each task's settings of the best run over report.best_over, by val/acc_macro"
    table = f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
    return f"<h2>MAD scores</h2><p>{html.escape(what)}</p>{table}"


def study_section(sweep_dir: Path, results: list[RunResult]) -> str:
    """A reproduction's verdicts and figure (andrea.train.studies.report) for report.html; '' without a study."""
    from andrea.train.studies.report import write_study

    study = saved(sweep_dir, "study")
    return write_study(sweep_dir, study, results) if isinstance(study, dict) else ""
