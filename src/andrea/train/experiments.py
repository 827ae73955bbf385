"""The experiments andrea ships (conf/experiment/*.yaml, and the GPU recipes in conf/experiment/gpu/ as
`gpu/<name>`), each with the one line its file's `# summary:` comment gives: what `andrea-train --help` lists
under "Experiments". Read as text from the installed package's configs."""

from __future__ import annotations

from importlib.resources import files

SUMMARY = "# summary: "


def summaries() -> dict[str, str]:
    """{experiment name: its one-line summary}, sorted by name ('' where a file has no summary line); a folder's
    experiments named `<folder>/<name>`, as experiment= takes them."""
    found = {}
    root = files("andrea.conf").joinpath("experiment")
    folders = [entry for entry in root.iterdir() if entry.is_dir() and entry.name[0] not in "._"]
    for folder, prefix in [(root, ""), *((folder, f"{folder.name}/") for folder in folders)]:
        for entry in folder.iterdir():
            if entry.name.endswith(".yaml"):
                lines = entry.read_text(encoding="utf-8").splitlines()
                found[prefix + entry.name.removesuffix(".yaml")] = next(
                    (line.removeprefix(SUMMARY).strip() for line in lines if line.startswith(SUMMARY)), ""
                )
    return dict(sorted(found.items()))


def help_lines() -> str:
    """The experiments as --help lists them: `  name   summary`, one a line."""
    found = summaries()
    width = max(map(len, found), default=0)
    return "\n".join(f"  {name:<{width}}  {summary}" for name, summary in found.items())
