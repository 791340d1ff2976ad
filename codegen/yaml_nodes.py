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


def construct(node: yaml.Node) -> Any:
    loader = yaml.SafeLoader("")
    try:
        return loader.construct_object(node, deep=True)
    finally:
        loader.dispose()
