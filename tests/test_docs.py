"""The README and the documentation pages (docs/): every Python and shell code block runs as
written (blocks marked `<!-- docs-test: skip: reason -->` excepted), a value a Python line's
comment claims (`x.shape  # torch.Size([3])`) is checked, the generated parts render, and the
pages name what the code has (every plugin, every CLI command)."""

from __future__ import annotations

import ast
import io
import os
import re
import subprocess
import sys
import tokenize
from pathlib import Path

import pytest
import torch

from docs_pages import PYTHON, ROOT, SHELL, blocks, hooks, name, pages, rendered, source

ALL = [b for p in pages() for b in blocks(p)]


def runnable(langs: set[str]) -> list[str]:
    return sorted({b.page for b in ALL if b.lang in langs and b.runs})


def test_every_block_names_its_language_and_every_skip_says_why():
    """A block with no language would be neither run nor known to be text: `text` marks text."""
    for b in ALL:
        assert b.lang, f"{b.page}:{b.line}: name the block's language (`text` for output or prose)"
        if b.skip is not None:
            assert b.lang in PYTHON | SHELL, f"{b.page}:{b.line}: only Python and shell blocks run, so only they are skipped"
    for p in pages():
        text = p.read_text(encoding="utf-8")
        assert text.count("docs-test:") == sum(b.skip is not None for b in ALL if b.page == name(p)), \
            f"{name(p)}: a docs-test comment not on the line before a block, or not `docs-test: skip: <reason>`"
    assert runnable(PYTHON) and runnable(SHELL)


def _claims(text: str) -> dict[int, str]:
    """Line number -> the comment on that line."""
    return {tok.start[0]: tok.string[1:].strip()
            for tok in tokenize.generate_tokens(io.StringIO(text).readline) if tok.type == tokenize.COMMENT}


def _check_claim(value, claim: str, where: str) -> None:
    """A comment that is a Python value (`tensor([0, 1])`, `torch.Size([2])`) must equal the line's value."""
    try:
        expected = eval(claim, {"torch": torch, "tensor": torch.tensor})
    except Exception:
        return  # words, not a value
    if isinstance(value, torch.Tensor):
        assert isinstance(expected, torch.Tensor) and torch.equal(value, expected), f"{where}: {value!r}, not {claim}"
    else:
        assert value == expected, f"{where}: {value!r}, not {claim}"


@pytest.mark.parametrize("page", runnable(PYTHON))
def test_python_blocks_run(page):
    """A page's Python blocks run in order in one namespace, on the built library."""
    namespace: dict = {"__name__": "__docs__"}
    torch.manual_seed(0)
    for b in ALL:
        if b.page != page or b.lang not in PYTHON or not b.runs:
            continue
        claims = _claims(b.text)
        for stmt in ast.parse(b.text, filename=f"{page}:{b.line}").body:
            where = f"{page}:{b.line + stmt.lineno}"
            if isinstance(stmt, ast.Expr) and stmt.end_lineno in claims:
                value = eval(compile(ast.Expression(stmt.value), where, "eval"), namespace)
                _check_claim(value, claims[stmt.end_lineno], where)
            else:
                exec(compile(ast.Module([stmt], []), where, "exec"), namespace)


@pytest.mark.parametrize("page", runnable(SHELL))
def test_shell_blocks_run(page, tmp_path):
    """A page's shell blocks run in order, each from one temporary directory, with the venv's
    commands (`codegen`, `python`) first on PATH."""
    env = dict(os.environ, PATH=str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""))
    for b in ALL:
        if b.page != page or b.lang not in SHELL or not b.runs:
            continue
        r = subprocess.run(["bash", "-euo", "pipefail", "-c", b.text], cwd=tmp_path, env=env,
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, f"{page}:{b.line}: exit {r.returncode}\n{b.text}\n{r.stdout}\n{r.stderr}"
    if page == "README.md":
        # The tutorial shows the declaration and kernel that `codegen init` writes, as written.
        shown = [b.text for b in ALL if b.page == page and b.lang in ("yaml", "cpp")]
        scaffold = (tmp_path / "mylib/declarations/scale.yaml").read_text() + (tmp_path / "mylib/kernels/scale.h").read_text()
        assert shown and all(text in scaffold for text in shown), "README's tutorial differs from what codegen init writes"


def test_every_marker_renders_and_the_build_uses_the_hook():
    import yaml
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    assert config["hooks"] == ["docs/hooks.py"] and config["strict"] is True
    markers = {p.name: hooks().MARKER.findall(p.read_text()) for p in pages()}
    assert sum(map(len, markers.values())) == 5, markers  # fields, types, dtypes, torch, cli
    for page, found in markers.items():
        if found:
            text = rendered(page)
            assert not hooks().MARKER.search(text) and "<!--" not in text.replace("<!-- docs-test", ""), page
    with pytest.raises(KeyError):
        hooks().render("<!-- table: nosuch -->")


def test_the_cli_page_is_every_command_s_help():
    import click
    from opwrap_codegen.cli import main
    assert "<!-- cli -->" in source("cli.md")
    page = rendered("cli.md")
    assert "$ codegen --help" in page
    for cmd_name, command in main.commands.items():
        assert f"### codegen {cmd_name}\n" in page and f"$ codegen {cmd_name} --help" in page
        for param in command.params:
            if isinstance(param, click.Option):
                assert any(opt in page for opt in param.opts), (cmd_name, param.opts)


def test_the_plugin_page_names_every_built_in_plugin():
    from opwrap_codegen.plugins import builtin_plugins
    page = source("plugins.md")
    listed = re.findall(r"^\| `([\w-]+)` \|", page, flags=re.M)
    assert listed == ["schema"] + [p.name for p in builtin_plugins()], listed


def test_links_between_pages_lead_to_pages():
    """mkdocs --strict checks the docs' links; this checks the README's too (GitHub renders both)."""
    for p in pages():
        for target in re.findall(r"\]\(([^)#:\s]+\.md)(?:#[^)]*)?\)", p.read_text(encoding="utf-8")):
            assert (p.parent / target).is_file(), f"{name(p)}: link to {target}, which is not a page"
