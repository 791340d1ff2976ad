"""Text as a C++ or Python string literal in generated code: used by every layer that writes
code, from the shape language's checks (codegen/lang/shapes.py) to the plugins."""

from __future__ import annotations


def cpp_string(s: str) -> str:
    """A C++ string literal holding `s` exactly (quotes, backslashes, newlines, and the second
    `?` of a `??` trigraph-like run escaped; a lone `?`, as in `Tensor?`, stays as it is)."""
    out: list[str] = []
    for ch in s:
        if ch == "\\":
            out.append("\\\\")
        elif ch == '"':
            out.append('\\"')
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "?" and out and out[-1] in ("?", "\\?"):
            out.append("\\?")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\{ord(ch):03o}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def py_string(s: str) -> str:
    """A Python string literal holding `s` exactly."""
    return repr(s)
