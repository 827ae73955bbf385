"""The README tells the truth about what is installed: its config-group table lists every option conf/ holds."""

import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]


def readme_table() -> dict[str, set[str]]:
    """group -> the option names its row of the README's config-group table gives (keys like `mask.window` left out)."""
    table = {}
    for line in (ROOT / "README.md").read_text().splitlines():
        row = re.match(r"^\| `(\w+)/` \| (.*) \|$", line)
        if row:
            table[row[1]] = {name for name in re.findall(r"`([^`]+)`", row[2]) if not re.search(r"[.=/\\ ]", name)}
    return table


def test_the_config_group_table_lists_every_option_conf_holds():
    table = readme_table()
    groups = {path.name for path in (ROOT / "conf").iterdir() if path.is_dir() and path.name != "hydra"}
    assert set(table) == groups
    for group in groups:
        options = {path.stem for path in (ROOT / "conf" / group).glob("*.yaml")}
        assert table[group] == options, (group, table[group] ^ options)


PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]  # the README and every page of the docs site


@pytest.mark.parametrize("page", PAGES, ids=lambda path: str(path.relative_to(ROOT)))
def test_every_fenced_block_is_run_or_says_why_not(page):
    """A block added to the README or a docs page without a marker fails here: it is run by the slow test below,
    shortened only through the arguments its marker appends, or marked not runnable here with the reason."""
    from .readme_blocks import blocks

    found = blocks(page)
    where = page.relative_to(ROOT)
    unmarked = [f"{where}:{block.line} ({block.language or 'text'})" for block in found if block.marker is None]
    assert not unmarked, f"add a <!-- readme: ... --> marker before: {', '.join(unmarked)}"
    assert sum(block.runs for block in found) >= (10 if page.name == "README.md" else 0)
    for block in found:
        assert block.marker is not None  # every block is marked (above)
        assert block.runs or len(block.marker.removeprefix("not run here: ")) > 5, block.line  # a reason


def newest(paths):
    paths = sorted(paths, key=lambda p: p.stat().st_mtime)
    assert paths, "an earlier README block should have made it"
    return paths[-1]


def resolve(command: str, folder: Path, appended: str) -> str:
    """The README's placeholders, as the runs of earlier blocks in `folder` fill them."""
    bin_dir = str(Path(sys.executable).parent)
    last_run = lambda: newest((folder / "logs" / "train" / "runs").iterdir())  # noqa: E731
    last_ckpt = lambda: newest(folder.glob("logs/*/runs/*/checkpoints/last.ckpt"))  # noqa: E731
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
        command = command.replace(f"logs/{task}/runs/<run>", str(newest((folder / "logs" / task / "runs").iterdir())))
    command = re.sub(r"(^|\s)\.venv/bin/", rf"\g<1>{bin_dir}/", command)
    return re.sub(r"(^|\s|\$\()(scripts|examples)/", rf"\g<1>{ROOT}/\g<2>/", command)


@pytest.mark.slow(
    reason="every runnable block of the README, then the docs pages', shortened where its marker says (~6 min)"
)
def test_the_readme_runs_as_written(tmp_path):
    from tests.compose import plain_env

    from .readme_blocks import blocks

    (tmp_path / "home").mkdir()
    env = plain_env(tmp_path / "home")
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    for page, block in ((path, block) for path in PAGES for block in blocks(path)):  # the README's first
        if not block.runs:
            continue
        appended = block.extra.get("andrea-train", "")
        for command in block.commands() if block.language == "bash" else ["\n".join(block.lines)]:
            resolved = resolve(command, tmp_path, appended)
            if block.language == "python":
                script = tmp_path / f"block_{block.line}.py"
                script.write_text(resolved)
                args = [sys.executable, str(script)]
            else:
                args = ["bash", "-c", resolved]
            done = subprocess.run(args, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900,
                                  stdin=subprocess.DEVNULL)  # fmt: skip
            where = page.relative_to(ROOT)
            assert done.returncode == 0, f"{where}:{block.line}: {resolved}\n{done.stderr[-3000:]}"


@pytest.mark.slow(reason="runs andrea-train and builds every preset to count its parameters (~13 s)")
def test_the_numbers_the_readme_quotes_are_the_code_s(tmp_path):
    """Parameter counts, the attention layer's size and the refusal line, as the code gives them today."""
    from andrea.models.gpt import GPT

    readme = " ".join((ROOT / "README.md").read_text().split())
    counts = {
        "ANDREA-120M": GPT().num_parameters(),
        "GPT-2 with biases": GPT(bias=True, activation="gelu_tanh").num_parameters(),
        "ANDREA-12M": GPT(max_context=256, n_layer=6, d_model=192, attention={"n_head": 6}).num_parameters(),
        "an attention layer": sum(p.numel() for p in GPT(n_layer=1).attention[0].parameters()),
    }
    for what, count in counts.items():
        assert f"{count:,}" in readme, f"{what}: {count:,} parameters is not what the README says"
    refusal = subprocess.run(
        [str(Path(sys.executable).with_name("andrea-train")), "heads.n_kv_head=3"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
    ).stderr.strip()  # fmt: skip
    assert f"`{refusal}`" in readme, refusal


def test_ci_runs_the_readme_s_two_set_up_commands_first_as_written():
    """CI proves what a user does: .ci/run's first two commands are the README's set-up blocks, word for word."""
    from .readme_blocks import blocks

    set_up = [block.lines for block in blocks()[:2]]
    assert [len(lines) for lines in set_up] == [1, 1] and "andrea-train" in set_up[0][0] and "pytest" in set_up[1][0]
    script = (ROOT / ".ci" / "run").read_text().splitlines()
    commands = [line for line in script if line.strip() and not line.startswith(("#", "set ", "cd "))]
    assert commands[:2] == [set_up[0][0], set_up[1][0]]
