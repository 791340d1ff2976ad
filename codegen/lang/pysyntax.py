"""Python's own parser for the bits of declarations written in Python syntax (pointwise
expressions, shape rules, fake method bodies), without the SyntaxWarnings CPython prints for
text like `1else`: a declaration's problems are reported as positioned errors, never as
interpreter warnings on stderr."""

from __future__ import annotations

import ast
import warnings


def parse(text: str, mode: str = "exec") -> ast.AST:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SyntaxWarning)
        return ast.parse(text, mode=mode)
