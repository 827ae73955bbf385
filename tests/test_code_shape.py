"""The code's shape, counted the strict way: radon's cyclomatic complexity (every `and`, `or`, comprehension and
conditional expression a branch, which ruff's mccabe does not count) at most MAX_COMPLEXITY for every function
outside Triton's kernels, and every source file at most MAX_LINES lines."""

from pathlib import Path

import pytest
from radon.complexity import cc_visit
from radon.visitors import Function

SRC = Path(__file__).parents[1] / "src"
MAX_COMPLEXITY = 10
MAX_LINES = 400  # a ceiling, not a target: files are cut by concept, never to fit it
# @triton.jit kernels are written as Triton's tutorials write them: one function a pass, its branches constexprs
# that compile away (their complexity is not counted); their files are split by pass like any other.
SOURCES = sorted(p for p in SRC.rglob("*.py") if "egg-info" not in str(p))


def functions(blocks: list) -> list[Function]:
    """Every function and method radon found, closures included (a class's methods come listed on their own)."""
    found = []
    for block in blocks:
        if isinstance(block, Function):
            found += [block, *functions(block.closures)]
    return found


def jitted(lines: list[str], function: Function) -> bool:
    above = lines[max(0, function.lineno - 4) : function.lineno - 1]
    return any(line.strip().startswith("@triton.jit") for line in above)


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(SRC)))
def test_every_function_has_at_most_ten_paths(path):
    text = path.read_text()
    lines = text.splitlines()
    too_complex = [
        f"{f.fullname} (line {f.lineno}): {f.complexity}"
        for f in functions(cc_visit(text))
        if f.complexity > MAX_COMPLEXITY and not jitted(lines, f)
    ]
    assert not too_complex, f"split into named steps: {', '.join(too_complex)}"


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(SRC)))
def test_every_file_is_small(path):
    length = len(path.read_text().splitlines())
    assert length <= MAX_LINES, f"{path.relative_to(SRC)} has {length} lines; split it by job"


def test_the_complexity_count_is_radon_s_strict_one():
    """`and` and a comprehension count as branches: a function ruff's mccabe rates 1 is 4 here."""
    (f,) = functions(cc_visit("def f(a, b):\n    return [x for x in a if x] and b or None\n"))
    assert f.complexity >= 4
