"""MkDocs hook (mkdocs.yml `hooks:`): fills the generated parts of the pages at build time.

A page holds a marker where generated text goes, on a line of its own:

- `<!-- table: fields -->`: the declaration fields, the core's and the built-in plugins'
  (the typed field records);
- `<!-- table: types -->`: the schema types, what a kernel receives and returns for each;
- `<!-- table: dtypes -->`: the dtypes, their C++ types and groups;
- `<!-- table: torch -->`: each torch feature against each claimed torch release;
- `<!-- cli -->`: `codegen --help` and every subcommand's `--help`, from the click commands.

`render(markdown)` replaces them; tests/test_docs.py and the table tests call it too."""

from __future__ import annotations

import re
from collections.abc import Callable


def _tables() -> dict[str, Callable[[], str]]:
    """Marker name -> the function that writes the table (opwrap_codegen.reference)."""
    from opwrap_codegen.reference import TABLES
    return dict(TABLES)


def cli_reference() -> str:
    """`codegen --help`, then each subcommand's help, as Markdown: one section a command, its
    help text in a `text` block."""
    import click

    from opwrap_codegen.cli import main

    def helptext(command: click.Command, name: str, parent: click.Context | None) -> str:
        ctx = click.Context(command, info_name=name, parent=parent, terminal_width=100, max_content_width=100)
        return command.get_help(ctx)

    root = click.Context(main, info_name="codegen", terminal_width=100, max_content_width=100)
    parts = ["```text", "$ codegen --help", helptext(main, "codegen", None), "```", ""]
    assert isinstance(main, click.Group)
    for name in sorted(main.commands):
        parts += [f"### codegen {name}", "", "```text", f"$ codegen {name} --help",
                  helptext(main.commands[name], name, root), "```", ""]
    return "\n".join(parts)


MARKER = re.compile(r"^<!-- (table: (?P<table>[a-z]+)|(?P<cli>cli)) -->$", re.MULTILINE)


def render(markdown: str) -> str:
    """The page with every marker replaced by its generated text (an unknown table name is
    a KeyError, so a misspelt marker fails the build)."""
    tables: dict[str, Callable[[], str]] = {}

    def replace(m: re.Match[str]) -> str:
        if m.group("cli"):
            return cli_reference()
        if not tables:
            tables.update(_tables())
        return tables[m.group("table")]().rstrip("\n")

    return MARKER.sub(replace, markdown)


def on_page_markdown(markdown: str, page: object, config: object, files: object) -> str:
    return render(markdown)
