"""Python's own parser for the bits of declarations written in Python syntax (pointwise
expressions, shape rules, fake method bodies), without the SyntaxWarnings CPython prints for
text like `1else`: a declaration's problems are reported as positioned errors, never as
interpreter warnings on stderr.

The schema language takes some of Python's keywords as names (`from`, `lambda`, `yield`,
`try`, `await`...), none of which these languages use as keywords: given such `names`,
`parse` reads each as a name (an `ast.Name` of that id), so an expression writes an argument
as the schema names it (`from * 2`)."""

from __future__ import annotations

import ast
import keyword
import re
import warnings


def parse(text: str, mode: str = "exec", names=()) -> ast.AST:
    stand_ins = _stand_ins(text, [n for n in names if keyword.iskeyword(n)])
    for name, stand_in in stand_ins.items():
        text = re.sub(rf"(?<![\w.]){name}(?!\w)", stand_in, text)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SyntaxWarning)
        tree = ast.parse(text, mode=mode)
    if stand_ins:
        back = {s: n for n, s in stand_ins.items()}
        for node in ast.walk(tree):
            if isinstance(node, ast.Name) and node.id in back:
                node.id = back[node.id]
    return tree


def _stand_ins(text: str, keywords: list[str]) -> dict[str, str]:
    """For each keyword, an identifier of the same length (so that every position in the text
    stays where it was) that the text does not use: the keyword with one letter made `_`."""
    words = set(re.findall(r"\w+", text))
    out: dict[str, str] = {}
    for kw in keywords:
        for i in range(len(kw)):
            candidate = kw[:i] + "_" + kw[i + 1:]
            if candidate not in words and candidate not in out.values() and not keyword.iskeyword(candidate):
                out[kw] = candidate
                break
    return out
