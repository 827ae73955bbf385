"""The fenced blocks of README.md and of the docs pages, each with the marker that says how the tests treat it.

A marker is an HTML comment on the line right before the block's opening fence (invisible once rendered):

    <!-- readme: run -->                                   every line runs as written
    <!-- readme: run | andrea-train: trainer.max_steps=8 -->   ... with these arguments appended to each line of
                                                           that command (a documented way to shorten it)
    <!-- readme: not run here: GPU (every GPU of the machine) -->   with the reason, read by the test

Lines run in order, block after block, the README's first, then each docs page's, in one folder of the test's (so a
later block finds the runs an earlier one made), as a user's shell runs them (no test-only variables). Placeholders
name what an earlier block made: `logs/train/runs/<run>`, `<run dir>`, `<a repetition run>` and `<ckpt>` the newest
run of andrea-train's default task (and its last.ckpt), `logs/<task>/runs/<run>` the newest run of that task,
`logs/.../checkpoints/last.ckpt` and `ckpt_path=...` the newest checkpoint, `<same overrides>` the block's appended
arguments. `pip install` lines are not run: the set-up installs what they name (.ci/run does too). A wall time
the comment line above a command gives, `(20 s)` or `(1.5 to 2 min)`, is kept true: the command, run unshortened,
takes no more than half as long again, and no less than half.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).parents[1]
MARKER = re.compile(r"^<!-- readme: (run|not run here: .+?)((?: \| [^|]+?: [^|]+?)*) -->$")


@dataclass
class Block:
    line: int  # of the opening fence, 1-based
    language: str
    lines: list[str]
    marker: str | None  # "run", "not run here: <reason>", or None (unmarked)
    extra: dict[str, str] = field(default_factory=dict)  # command -> arguments appended to its lines

    @property
    def runs(self) -> bool:
        return self.marker == "run"

    def commands(self) -> list[str]:
        """The block's command lines, comments and continuations joined, pip installs left out."""
        return [command for command, _ in self.timed_commands()]

    def timed_commands(self) -> list[tuple[str, tuple[float, float] | None]]:
        """Each command with the wall time, in seconds (least, most), that the comment line right above it states:
        `# ... (20 s)`, `# ... (1.5 to 2 min)`; None where it states none."""
        joined, pending = [], ""
        for raw in self.lines:
            text = raw.rstrip()
            if text.endswith("\\"):
                pending += text[:-1] + " "
                continue
            joined.append(pending + text)
            pending = ""
        out, stated = [], None
        for line in joined:
            text = re.split(r"\s{2,}# |^# ", line)[0].strip() if self.language == "bash" else line
            if self.language == "bash" and line.startswith("# "):
                stated = _stated_time(line)
            if not text or re.match(r"^(\S*/)?pip install", text):
                continue
            for command, arguments in self.extra.items():
                if re.match(rf"^(\S*/)?{re.escape(command)}\b", text) or f" {command} " in f" {text} ":
                    text, stated = f"{text} {arguments}", None  # shortened: its stated time is not this run's
            out.append((text, stated))
            stated = None
        return out


def _stated_time(comment: str) -> tuple[float, float] | None:
    """(least, most) seconds of the last `(N s)`, `(N min)` or `(N to M min)` a comment gives, or None."""
    found = re.findall(r"\((\d+(?:\.\d+)?)(?: to (\d+(?:\.\d+)?))? (s|min)\)", comment)
    if not found:
        return None
    least, most, unit = found[-1]
    scale = 60.0 if unit == "min" else 1.0
    return float(least) * scale, float(most or least) * scale


def blocks(path: Path = ROOT / "README.md") -> list[Block]:
    lines = path.read_text().splitlines()
    found, i = [], 0
    while i < len(lines):
        fence = re.match(r"^```(\w*)$", lines[i])
        if not fence:
            i += 1
            continue
        end = next(j for j in range(i + 1, len(lines)) if lines[j] == "```")
        match = MARKER.match(lines[i - 1]) if i else None
        extra = {}
        if match and match[2]:
            for part in match[2].split(" | ")[1:]:
                command, arguments = part.split(": ", 1)
                extra[command.strip()] = arguments.strip()
        found.append(Block(i + 1, fence[1], lines[i + 1 : end], match[1] if match else None, extra))
        i = end + 1
    return found
