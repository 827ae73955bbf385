"""The README and the docs pages tell the truth: the config-group table lists every option conf/ holds, the
experiments table is the experiments' own lines, every block runs as written on a fresh checkout or says why not,
and the numbers they quote are the code's."""

import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).parents[1]


def site_pages() -> list[Path]:
    """The docs pages in the order of the site's nav (mkdocs.yml), the order a reader takes them in."""

    def walk(node) -> list[str]:
        if isinstance(node, str):
            return [node]
        items = node.values() if isinstance(node, dict) else node
        return [page for item in items for page in walk(item)]

    nav = yaml.safe_load((ROOT / "mkdocs.yml").read_text())["nav"]
    return [ROOT / "docs" / page for page in walk(nav) if "/" not in page]  # api/ pages hold no blocks


PAGES = [ROOT / "README.md", *site_pages()]  # the README, then every guide of the docs site in the nav's order


def test_every_docs_page_is_in_the_site_s_nav():
    assert set(site_pages()) == set((ROOT / "docs").glob("*.md"))


def config_table() -> dict[str, set[str]]:
    """group -> the option names its row of the config-group table gives (keys like `mask.window` left out)."""
    table = {}
    for line in (ROOT / "docs" / "training.md").read_text().splitlines():
        row = re.match(r"^\| `(\w+)/` \| (.*) \|$", line)
        if row:
            table[row[1]] = {name for name in re.findall(r"`([^`]+)`", row[2]) if not re.search(r"[.=/\\ ]", name)}
    return table


def test_the_config_group_table_lists_every_option_conf_holds():
    table = config_table()
    groups = {path.name for path in (ROOT / "conf").iterdir() if path.is_dir() and path.name != "hydra"}
    assert set(table) == groups
    for group in groups:  # a group's subgroups' options too (arm/diff_noise: softmax, diff)
        options = {path.stem for path in (ROOT / "conf" / group).rglob("*.yaml")}
        assert table[group] == options, (group, table[group] ^ options)


def test_the_readme_s_experiments_table_is_each_experiment_s_own_summary_line():
    """One row per conf/experiment file, its text the file's `# summary:` line, which andrea-train --help prints."""
    from andrea.train.experiments import summaries

    rows = dict(re.findall(r"^\| `([\w/-]+)` \| (.+) \|$", (ROOT / "README.md").read_text(), re.MULTILINE))
    assert rows == summaries()


@pytest.mark.parametrize("page", PAGES, ids=lambda path: str(path.relative_to(ROOT)))
def test_every_fenced_block_is_run_or_says_why_not(page):
    """A block added to the README or a docs page without a marker fails here: it is run by the slow test below,
    shortened only through the arguments its marker appends, or marked not runnable here with the reason."""
    from .readme_blocks import blocks

    found = blocks(page)
    where = page.relative_to(ROOT)
    unmarked = [f"{where}:{block.line} ({block.language or 'text'})" for block in found if block.marker is None]
    assert not unmarked, f"add a <!-- readme: ... --> marker before: {', '.join(unmarked)}"
    assert sum(block.runs for block in found) >= (1 if page.name == "README.md" else 0)  # the README's tour
    for block in found:
        assert block.marker is not None  # every block is marked (above)
        assert block.runs or len(block.marker.removeprefix("not run here: ")) > 5, block.line  # a reason


def test_the_tour_s_wall_times_are_read_by_the_block_runner():
    """The runs whose time the tour gives are the ones the slow block runner times and holds to it."""
    from .readme_blocks import blocks

    stated = {command: t for b in blocks() if b.runs for command, t in b.timed_commands() if t is not None}
    assert stated == {
        ".venv/bin/andrea-train": (15.0, 15.0),
        ".venv/bin/andrea-train experiment=induction": (20.0, 20.0),
        ".venv/bin/andrea-train experiment=shakespeare-chars": (120.0, 120.0),
    }


def newest(paths):
    paths = sorted(paths, key=lambda p: p.stat().st_mtime)
    assert paths, "an earlier README block should have made it"
    return paths[-1]


def resolve(command: str, folder: Path, appended: str) -> str:
    """The README's placeholders, as the runs of earlier blocks in `folder` fill them, with paths relative to it as a
    user types them; outside a checkout, `.venv/bin/`, `scripts/` and `examples/` are the running ones'."""
    last_run = lambda: newest((folder / "logs" / "train" / "runs").iterdir()).relative_to(folder)  # noqa: E731
    last_ckpt = lambda: newest(folder.glob("logs/*/runs/*/checkpoints/last.ckpt")).relative_to(folder)  # noqa: E731
    substitutions: dict[str, str | Callable[[], str]] = {
        "<same overrides>": appended,
        "logs/train/runs/<run>": lambda: str(last_run()),
        "<run dir>": lambda: str(last_run()),
        "<a repetition run>": lambda: str(last_run()),
        "<ckpt>": lambda: str(last_run() / "checkpoints" / "last.ckpt"),
        "logs/.../checkpoints/last.ckpt": lambda: str(last_ckpt()),
        "ckpt_path=...": lambda: f"ckpt_path={last_ckpt()}",
    }
    for placeholder, value in substitutions.items():
        if placeholder in command:
            command = command.replace(placeholder, value if isinstance(value, str) else value())
    for task in re.findall(r"logs/([\w-]+)/runs/<run>", command):
        run = newest((folder / "logs" / task / "runs").iterdir()).relative_to(folder)
        command = command.replace(f"logs/{task}/runs/<run>", str(run))
    if (folder / ".venv").exists():  # a checkout: everything as written
        return command
    command = re.sub(r"(^|\s)\.venv/bin/", rf"\g<1>{Path(sys.executable).parent}/", command)
    return re.sub(r"(^|\s|\$\()(scripts|examples)/", rf"\g<1>{ROOT}/\g<2>/", command)


def fresh_checkout(folder: Path) -> Path:
    """What a clone of this repository holds (its tracked files, as the working tree has them, and any new file git
    would add), copied into `folder`, with `.venv` the environment running the tests, where the set-up puts it."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, text=True, check=True).stdout  # fmt: skip
    for name in filter(None, listed.split("\0")):
        source = ROOT / name
        if source.is_file():  # a file deleted but not yet staged is listed too
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, folder / name)
    (folder / ".venv").symlink_to(Path(sys.executable).parents[1])
    return folder


@pytest.mark.slow(
    reason="on a fresh checkout: the README's tour as written, then every runnable block of the docs pages (~13 min)"
)
@pytest.mark.alone  # it holds the tour's runs to the wall times the README gives
def test_the_readme_runs_as_written(tmp_path):
    """The README's blocks run first, unshortened unless a marker says so (its tour is), then each docs page's in the
    site's order, all in one fresh checkout, so a block finds what the blocks before it made."""
    from tests.compose import plain_env

    from .readme_blocks import blocks

    checkout = fresh_checkout(tmp_path / "andrea")
    (tmp_path / "home").mkdir()
    env = plain_env(tmp_path / "home")
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    for page, block in ((path, block) for path in PAGES for block in blocks(path)):  # the README's first
        if not block.runs:
            continue
        appended = block.extra.get("andrea-train", "")
        commands = block.timed_commands() if block.language == "bash" else [("\n".join(block.lines), None)]
        for command, stated in commands:
            resolved = resolve(command, checkout, appended)
            if block.language == "python":
                script = tmp_path / f"block_{block.line}.py"
                script.write_text(resolved)
                args = [sys.executable, str(script)]
            else:
                args = ["bash", "-c", resolved]
            start = time.perf_counter()
            done = subprocess.run(args, cwd=checkout, env=env, capture_output=True, text=True, timeout=900,
                                  stdin=subprocess.DEVNULL)  # fmt: skip
            wall, where = time.perf_counter() - start, page.relative_to(ROOT)
            assert done.returncode == 0, f"{where}:{block.line}: {resolved}\n{done.stderr[-3000:]}"
            if stated is not None:  # the wall time the comment above it gives: at most half as long again
                least, most = stated
                said = f"{where}:{block.line}: {resolved} took {wall:.0f} s; the page says {least:.0f}-{most:.0f} s"
                assert least / 2 <= wall <= most * 1.5, said


@pytest.mark.slow(reason="runs andrea-train and builds every preset to count its parameters (~13 s)")
def test_the_numbers_the_readme_quotes_are_the_code_s(tmp_path):
    """Parameter counts, the attention layer's size and the refusal line, as the code gives them today."""
    from andrea.models.gpt import GPT

    quoted = " ".join(" ".join(page.read_text() for page in PAGES).split())
    counts = {
        "ANDREA-120M": GPT().num_parameters(),
        "GPT-2 with biases": GPT(bias=True, activation="gelu_tanh").num_parameters(),
        "ANDREA-12M": GPT(max_context=256, n_layer=6, d_model=192, attention={"n_head": 6}).num_parameters(),
        "an attention layer": sum(p.numel() for p in GPT(n_layer=1).attention[0].parameters()),
    }
    for what, count in counts.items():
        assert f"{count:,}" in quoted, f"{what}: {count:,} parameters is not what the docs say"
    refusal = subprocess.run(
        [str(Path(sys.executable).with_name("andrea-train")), "heads.n_kv_head=3"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
    ).stderr.strip()  # fmt: skip
    assert f"`{refusal}`" in quoted, refusal


def test_ci_runs_the_readme_s_two_set_up_commands_first_as_written():
    """CI proves what a user does: .ci/run's first two commands are the README's set-up blocks, word for word."""
    from .readme_blocks import blocks

    set_up = [block.lines for block in blocks()[:2]]
    assert [len(lines) for lines in set_up] == [1, 1] and "andrea-train" in set_up[0][0] and "pytest" in set_up[1][0]
    script = (ROOT / ".ci" / "run").read_text().splitlines()
    commands = [line for line in script if line.strip() and not line.startswith(("#", "set ", "cd "))]
    assert commands[:2] == [set_up[0][0], set_up[1][0]]
