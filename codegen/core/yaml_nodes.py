"""Positions and values of composed YAML nodes (PyYAML's safe composer keeps a mark on
every node, which is how every declaration error gets its line and column)."""

from __future__ import annotations

from typing import Any

import yaml

from .diagnostics import Loc


def loc_of(node: yaml.Node, path: str) -> Loc:
    m = node.start_mark
    return Loc(path, m.line + 1, m.column + 1)


def scalar_text_loc(node: yaml.ScalarNode, path: str, offset: int) -> Loc:
    """The position of character `offset` of a scalar's value, exact for one-line scalars."""
    base = loc_of(node, path)
    if node.start_mark.line != node.end_mark.line:
        return base
    return base.shifted(offset + (1 if node.style in ("'", '"') else 0))


def text_loc(node: yaml.ScalarNode, path: str, line: int, col: int, source: str) -> Loc:
    """The position of (1-based `line`, 0-based `col`) of a scalar's value: exact for one-line
    scalars and for literal blocks (`|`), whose lines are the source lines after the indicator.
    `source` is the file's text (libyaml's marks do not carry it); only the scalar's own text
    is read (marks index characters), so locating costs the scalar's size, not the file's."""
    if line == 1 and node.start_mark.line == node.end_mark.line:
        return scalar_text_loc(node, path, col)
    if node.style == "|":
        lines = source[node.start_mark.index:node.end_mark.index].split("\n")  # the '|' line, then the block
        content = [ln for ln in lines[1:] if ln.strip()]
        indent = len(content[0]) - len(content[0].lstrip(" ")) if content else 0
        return Loc(path, node.start_mark.line + 1 + line, indent + col + 1)
    return loc_of(node, path)


def construct(node: yaml.Node) -> Any:
    loader = yaml.SafeLoader("")
    try:
        return loader.construct_object(node, deep=True)
    finally:
        loader.dispose()
