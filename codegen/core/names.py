"""Names in generated code: the one place that decides how a schema name (op, overload,
argument, return) becomes a C++ or Python identifier.  (How text becomes a C++ or Python
string literal is `codegen/core/literals.py`.)  It sits in `core`, below the languages,
because the pointwise and row-wise languages (codegen/lang) translate schema names into C++
too.

The schema language accepts names that are keywords of C++ or Python (`delete`, `int`,
`default`, `from`, `lambda`) or that clash with the locals the generated code declares
(`kOp`, `dtype`, `options`).  Generated code never uses a schema name as an identifier
directly: it asks `cpp_ident`/`py_ident`, which append `_` until the name is neither a
keyword nor one of the names already taken in that scope.  The registered schema and every
user-facing message keep the schema's own name.
"""

from __future__ import annotations

import keyword
import re
from typing import Iterable

# C++20 keywords and alternative tokens, plus the names a generated scope must not
# shadow (`std`, `at`, `c10`, `torch` namespaces; macro-like identifiers from the headers we include).
CPP_KEYWORDS = frozenset("""
alignas alignof and and_eq asm auto bitand bitor bool break case catch char char8_t char16_t
char32_t class compl concept const consteval constexpr constinit const_cast continue co_await
co_return co_yield decltype default delete do double dynamic_cast else enum explicit export
extern false float for friend goto if inline int long mutable namespace new noexcept not
not_eq nullptr operator or or_eq private protected public register reinterpret_cast requires
return short signed sizeof static static_assert static_cast struct switch template this
thread_local throw true try typedef typeid typename union unsigned using virtual void volatile
wchar_t while xor xor_eq
std at c10 torch caffe2 opwrap TORCH_CHECK NULL assert errno
""".split())

# Python keywords.  Soft keywords (`match`, `case`, `type`, `_`) are identifiers, so a
# parameter may be named `type`; the names a generated module itself uses (`torch`, its
# helpers) are passed as `taken` by codegen/api/python.py, per module.
PY_KEYWORDS = frozenset(keyword.kwlist)


def _free(name: str, keywords: frozenset[str], taken: Iterable[str]) -> str:
    """`name`, with `_` appended until it is neither a keyword nor taken."""
    taken = set(taken)
    out = name
    while out in keywords or out in taken:
        out += "_"
    return out


def cpp_ident(name: str, taken: Iterable[str] = ()) -> str:
    """`name` as a C++ identifier in a scope where `taken` names are already declared."""
    return _free(name, CPP_KEYWORDS, taken)


def py_ident(name: str, taken: Iterable[str] = ()) -> str:
    """`name` as a Python identifier (parameter, local) where `taken` names are already used."""
    return _free(name, PY_KEYWORDS, taken)


class Scope:
    """The identifiers of one generated C++ scope (a wrapper function): every schema name
    gets one identifier (`name`), and every local the generator adds gets a fresh one
    (`fresh`), so no argument, return or local can clash with another or with a keyword.
    `reserved` names are locals the template itself declares."""

    def __init__(self, reserved: Iterable[str] = ()):
        self.taken: set[str] = set(reserved)
        self.names: dict[str, str] = {}

    def name(self, schema_name: str) -> str:
        """The identifier of an argument (the same one each time it is asked)."""
        if schema_name not in self.names:
            self.names[schema_name] = self.fresh(schema_name)
        return self.names[schema_name]

    def fresh(self, base: str) -> str:
        """A new identifier, `base` or `base_`, `base__`...: neither a keyword nor taken."""
        out = cpp_ident(base, self.taken)
        self.taken.add(out)
        return out


def camel_case(ident: str) -> str:
    """`layer_norm_backward` -> `LayerNormBackward` (generated C++ type names)."""
    return "".join(p[:1].upper() + p[1:] for p in re.split(r"_+", ident) if p)
