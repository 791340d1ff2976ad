"""The README and the documentation pages (docs/*.md) as the tests read them: each page's
fenced code blocks, and the pages as the docs build renders them (docs/hooks.py)."""

from __future__ import annotations

import importlib.util
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
# Blocks of these languages are run by tests/test_docs.py; every other block is text to read.
PYTHON, SHELL = {"python"}, {"sh", "bash", "shell"}
# On the line before a Python or shell block that must not run, with the reason:
# <!-- docs-test: skip: installs from the package index (minutes) -->
SKIP = re.compile(r"^<!-- docs-test: skip: (?P<reason>.*\S) -->$")
FENCE = re.compile(r"^```(?P<lang>[\w+-]*)\s*$")


@dataclass(frozen=True)
class Block:
    page: str  # README.md or docs/<name>.md
    line: int  # of the opening fence, 1-based
    lang: str  # "" when the fence names none
    text: str
    skip: str | None  # the reason it is not run

    @property
    def runs(self) -> bool:
        return self.skip is None and self.lang in PYTHON | SHELL


def pages() -> list[Path]:
    return [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]


def name(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def blocks(path: Path) -> list[Block]:
    """Every fenced block of a page (fences at the start of a line), in order."""
    lines = path.read_text(encoding="utf-8").split("\n")
    found, i = [], 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        end = next((j for j in range(i + 1, len(lines)) if lines[j] == "```"), None)
        assert end is not None, f"{name(path)}:{i + 1}: unclosed code block"
        skip = SKIP.match(lines[i - 1]) if i else None
        found.append(Block(name(path), i + 1, m["lang"], "\n".join(lines[i + 1:end]) + "\n",
                           skip["reason"] if skip else None))
        i = end + 1
    return found


@cache
def hooks() -> ModuleType:
    """docs/hooks.py, the MkDocs hook that fills the generated parts of the pages."""
    spec = importlib.util.spec_from_file_location("opwrap_docs_hooks", DOCS / "hooks.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def source(page: str) -> str:
    """A page as written: `page` is a file name in docs/."""
    return (DOCS / page).read_text(encoding="utf-8")


def rendered(page: str) -> str:
    """A page as the docs build gives it to Markdown: its markers replaced by generated text."""
    return hooks().render(source(page))
