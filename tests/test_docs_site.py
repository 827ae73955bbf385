"""The documentation site (mkdocs.yml) builds with every warning an error; a browser shows its front page and
an API page generated from the docstrings; and every name of andrea's that the guides' code uses has its entry,
with its docstring and signature, on its package's API page."""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import inspect
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).parents[1]

# Dotted names in the guides' code that are not Python: entry-point groups, an export's metadata keys, and the
# configs' package Hydra reads (pkg://andrea.conf). Every other andrea.<...> a guide writes must import.
NOT_PYTHON = {
    "andrea.attention_backends": "an entry-point group",
    "andrea.attention_masks": "an entry-point group",
    "andrea.attention_mechanisms": "an entry-point group",
    "andrea.attention_selections": "an entry-point group",
    "andrea.class_default": "a config resolver (${andrea.class_default:})",
    "andrea.longest_row": "a config resolver (${andrea.longest_row:${data}})",
    "andrea.conf": "the configs' package, and an entry-point group",
    "andrea.format": "an export's metadata key",
    "andrea.model.net": "an export's metadata key",
    "andrea.tokenizer": "an export's metadata key",
}
# Names the guides use whose class has no docstring in src: their entry is listed, with nothing to show. Give the
# class its docstring, and its name leaves this list (the test says so).
NO_DOCSTRING_YET = {"andrea.attention.Capabilities", "andrea.attention.KeyPadding", "andrea.mixers.TokenMixer"}
NAV_PAGE = re.compile(r"^\s*- (?:[^\n:]+: )?([\w/.-]+\.md)\s*$", re.M)  # a page of mkdocs.yml's nav
FENCE = re.compile(r"^[ \t]*(`{3,}|~{3,})[^\n]*\n(.*?)^[ \t]*\1[ \t]*$", re.M | re.S)
INLINE = re.compile(r"(`+)((?:(?!\n[ \t]*\n).)+?)\1", re.S)  # inline code, never across a blank line
DOTTED = re.compile(r"(?<![\w.])andrea(?:\.[A-Za-z_]\w*)+")
FROM_IMPORT = re.compile(r"\bfrom\s+(andrea(?:\.\w+)*)\s+import\s+(\([^)]*\)|[^\n;#]+)")
IDENTIFIER = re.compile(r"(?<![\w.])[A-Za-z_]\w*")


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[subprocess.CompletedProcess, Path]:
    """mkdocs build --strict into a temporary folder, once for this file's tests."""
    site = tmp_path_factory.mktemp("docs") / "site"
    mkdocs = Path(sys.executable).with_name("mkdocs")
    done = subprocess.run(
        [str(mkdocs), "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    return done, site


def site_of(built: tuple[subprocess.CompletedProcess, Path]) -> Path:
    done, site = built
    assert done.returncode == 0, done.stderr[-3000:]
    return site


@pytest.mark.slow  # reason: starts a browser (Debian's Chromium, installed by .ci/run)
def test_the_site_builds_strict_and_a_browser_shows_its_front_page_and_an_api_page(built, browser, tmp_path):
    from selenium.webdriver.common.by import By

    site = site_of(built)
    browser.get((site / "index.html").as_uri())
    assert browser.find_element(By.TAG_NAME, "h1").text == "andrea"
    nav = [a.text for a in browser.find_elements(By.CSS_SELECTOR, "nav.md-nav a") if a.text]
    assert "Reproductions" in nav and "The lens (andrea.lens)" in nav
    headings = [h.text for h in browser.find_elements(By.CSS_SELECTOR, "article h2")]
    assert headings[:3] == ["Set-up", "A ten-minute tour", "Experiments"], headings  # taken from the README
    code = " ".join(block.text for block in browser.find_elements(By.CSS_SELECTOR, "article pre"))
    assert "andrea-inspect logs/induction/runs/<run>/checkpoints/last.ckpt" in code
    from andrea.train.experiments import summaries

    rows = browser.find_elements(By.CSS_SELECTOR, "article table tbody tr")
    assert {row.find_element(By.TAG_NAME, "td").text for row in rows} == set(summaries())  # one row per experiment
    browser.save_screenshot(str(tmp_path / "front.png"))
    browser.get((site / "api" / "lens" / "index.html").as_uri())
    headings = [h.text for h in browser.find_elements(By.CSS_SELECTOR, ".doc-heading")]
    assert any(h.startswith("run_with_cache") for h in headings), headings  # from the docstrings
    assert "Looking inside a network" in browser.find_element(By.CSS_SELECTOR, ".doc-contents").text
    browser.save_screenshot(str(tmp_path / "api.png"))
    assert (tmp_path / "front.png").stat().st_size > 10_000 and (tmp_path / "api.png").stat().st_size > 10_000


# What the guides' code names: the guides are README.md and the nav's pages outside api/; their code the fenced
# blocks and the inline code (not the prose, nor an HTML comment).


def guides() -> list[Path]:
    pages = NAV_PAGE.findall((ROOT / "mkdocs.yml").read_text())
    assert "lens.md" in pages and "api/lens.md" in pages, pages  # the nav was read
    return [ROOT / "README.md", *(ROOT / "docs" / page for page in pages if not page.startswith("api/"))]


def code_of(markdown: str) -> str:
    markdown = re.sub(r"<!--.*?-->", "", markdown, flags=re.S)
    blocks = [match.group(2) for match in FENCE.finditer(markdown)]
    inline = [match.group(2) for match in INLINE.finditer(FENCE.sub("", markdown))]
    return "\n".join(blocks + inline)


def imported(code: str) -> dict[str, str]:
    """{name as the code uses it: its dotted name} for every `from andrea... import ...`."""
    names = {}
    for module, listed in FROM_IMPORT.findall(code):
        for item in listed.strip("()").split(","):
            name, _, alias = item.strip().partition(" as ")
            if name:
                names[alias.strip() or name] = f"{module}.{name}"
    return names


def resolve(dotted: str) -> tuple[str, Any]:
    """(the module that holds it, the object) for an andrea.<...> name; AttributeError if andrea has none."""
    parts = dotted.split(".")
    depth = 1
    module = importlib.import_module(parts[0])
    while depth < len(parts) and hasattr(module, "__path__"):
        if importlib.util.find_spec(".".join(parts[: depth + 1])) is None:
            break
        depth += 1
        module = importlib.import_module(".".join(parts[:depth]))
    found: Any = module
    for part in parts[depth:]:
        found = getattr(found, part)
    return module.__name__, found


def public_api(module: ModuleType) -> set[str]:
    """A module's classes and functions: those its __all__ lists, else those defined in it under a public name."""
    listed = getattr(module, "__all__", None)
    names = listed if listed is not None else [name for name in vars(module) if not name.startswith("_")]
    objects = {name: getattr(module, name) for name in names}
    return {
        name
        for name, obj in objects.items()
        if (inspect.isclass(obj) or inspect.isfunction(obj))
        and (listed is not None or obj.__module__ == module.__name__)
    }


def references(code: str) -> set[str]:
    """Every andrea name the code uses: written out whole (andrea.lens.patching.patch_heads), imported (from
    andrea.lens import hooks), an imported module's attribute (export.load), and a class or function of a module
    the code names, written bare (`ablation_loss(...)` beside `andrea.lens.interventions`)."""
    names = imported(code)
    found = set(DOTTED.findall(code)) | set(names.values())
    modules: dict[str, ModuleType] = {}
    for dotted in sorted(found - set(NOT_PYTHON)):
        try:
            module, obj = resolve(dotted)
        except AttributeError:
            continue  # the test names it
        modules[module] = importlib.import_module(module)
        if inspect.ismodule(obj):
            modules[obj.__name__] = obj
    for alias, dotted in names.items():
        if dotted in modules:
            found |= {f"{dotted}.{attr}" for attr in re.findall(rf"(?<![\w.]){alias}\.(\w+)", code)}
    identifiers = set(IDENTIFIER.findall(code))
    for name, holder in modules.items():
        found |= {f"{name}.{bare}" for bare in public_api(holder) & identifiers}
    return found - set(NOT_PYTHON)


# What an API page documents: mkdocstrings writes each object as a div.doc-object holding its heading (the
# object's dotted path its id; a function's signature in it) and a div.doc-contents (its docstring, its
# separate signature when asked for, and its members in a div.doc-children).

NOT_DOCSTRING = frozenset({"doc-children", "doc-class-bases", "doc-signature"})  # in a doc-contents
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


@dataclass
class Element:
    tag: str
    attrs: dict[str, str | None]
    children: list[Element | str] = field(default_factory=list)

    def classes(self) -> list[str]:
        return (self.attrs.get("class") or "").split()

    def elements(self) -> list[Element]:
        return [child for child in self.children if isinstance(child, Element)]

    def walk(self) -> Iterator[Element]:
        yield self
        for child in self.elements():
            yield from child.walk()

    def text(self, leave_out: frozenset[str] = frozenset({"doc-children"})) -> str:
        """Its text, without what sits in an element of a class in leave_out (by default its members')."""
        parts = [
            child if isinstance(child, str) else "" if leave_out & set(child.classes()) else child.text(leave_out)
            for child in self.children
        ]
        return "".join(parts)


class Tree(HTMLParser):
    def __init__(self, html: str) -> None:
        super().__init__()
        self.root = Element("document", {})
        self.open = [self.root]
        self.feed(html)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        element = Element(tag, dict(attrs))
        self.open[-1].children.append(element)
        if tag not in VOID:
            self.open.append(element)

    def handle_endtag(self, tag: str) -> None:
        tags = [element.tag for element in self.open]
        if tag in tags[1:]:  # closes it and whatever was left open inside it
            del self.open[len(tags) - 1 - tags[::-1].index(tag) :]

    def handle_data(self, data: str) -> None:
        self.open[-1].children.append(data)


def documented(page: Path) -> dict[str, Element]:
    """{id: its div.doc-object} for every object the page documents."""
    objects = {}
    for element in Tree(page.read_text()).root.walk():
        heading = [child for child in element.elements() if "doc-heading" in child.classes()]
        if "doc-object" in element.classes() and heading and heading[0].attrs.get("id"):
            objects[str(heading[0].attrs["id"])] = element
    return objects


def problem_with(dotted: str, site: Path, pages: dict[Path, dict[str, Element]]) -> str | None:
    """What is wrong with the entry of a name on its package's API page (api/<package>/), if anything."""
    try:
        module, obj = resolve(dotted)
    except AttributeError:
        return f"{dotted}: andrea has no such name"
    page = site / "api" / module.split(".")[1] / "index.html"
    if not page.exists():
        return f"{dotted}: there is no API page for andrea.{module.split('.')[1]} (docs/api/, mkdocs.yml's nav)"
    objects = pages.setdefault(page, documented(page))
    # a re-exported name may be documented where it is defined (andrea.lens.hooks as andrea.lens.cache.hooks)
    own = inspect.isclass(obj) or inspect.isfunction(obj)
    where = [dotted, f"{obj.__module__}.{obj.__qualname__}"] if own else [dotted]
    entry = next((objects[name] for name in where if name in objects), None)
    if entry is None:
        return f"{dotted}: not on {page.relative_to(site)}, whose {len(objects)} entries are all other names"
    if not own:
        return None
    (heading, *_), contents = entry.elements(), [e for e in entry.elements() if "doc-contents" in e.classes()]
    shown = bool(contents) and bool(contents[0].text(NOT_DOCSTRING).strip())
    if shown == (dotted in NO_DOCSTRING_YET):
        return f"{dotted}: its entry on {page.relative_to(site)} shows {'a' if shown else 'no'} docstring" + (
            " (drop it from NO_DOCSTRING_YET)" if shown else ""
        )
    signature = heading.text() + "".join(e.text() for e in entry.elements() if "doc-signature" in e.classes())
    init = vars(obj).get("__init__") if inspect.isclass(obj) else None  # a class's own, else object()'s or typing's
    built = (
        inspect.isfunction(obj)
        or dataclasses.is_dataclass(obj)
        or str(getattr(init, "__module__", "")).startswith("andrea.")
    )
    if built and "(" not in signature:
        return f"{dotted}: its entry on {page.relative_to(site)} shows no signature ({heading.text().strip()!r})"
    return None


@pytest.mark.slow  # reason: builds the site (the browser test above shares the build)
def test_every_andrea_name_the_guides_code_uses_is_documented_on_its_api_page(built):
    site = site_of(built)
    used = {(guide.name, dotted) for guide in guides() for dotted in references(code_of(guide.read_text()))}
    names = {dotted for _, dotted in used}
    # the reading itself: a whole name, an import, an imported module's attribute, a bare name beside its module
    assert {
        "andrea.mixers.linear_layer.LinearMixer",
        "andrea.lens.hooks",
        "andrea.models.files.export.load",
        "andrea.lens.interventions.ablation_loss",
    } <= names, sorted(names)
    assert names >= NO_DOCSTRING_YET, NO_DOCSTRING_YET - names  # a name no guide uses any more leaves the list
    pages: dict[Path, dict[str, Element]] = {}
    problems = {dotted: problem_with(dotted, site, pages) for dotted in sorted(names)}
    wrong = [f"{problem} (used in {', '.join(sorted(g for g, d in used if d == dotted))})"
             for dotted, problem in problems.items() if problem]  # fmt: skip
    assert not wrong, "\n".join(wrong)
