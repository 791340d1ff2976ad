"""Typed declaration fields, in the spirit of MLIR ODS records.

Every field of an op declaration, core or plugin, is a ``Field``: a ``FieldType`` and its
documentation.  The loader checks each value against its type before anything reads it,
and hands on the checked Python value, frozen (lists become tuples, mappings tuples of
``(key, value)`` pairs, as in the model), so no plugin ever sees a value of the wrong type.
A wrong value is a positioned error at the offending node that says what was expected::

    declarations/ops.yaml:4:13: error: 'autocast' must be one of lower_precision, fp32, promote, not a list

A plugin declares its fields the same way::

    class Autocast(Plugin):
        fields = {"autocast": Field(Enum("lower_precision", "fp32", "promote", what="autocast policy"),
                                    "the autocast policy")}

and a plain string (``fields = {"since": "the version that added the op"}``) still works:
it means ``Field(Any(), doc)``, any plain YAML data, frozen the same way.

Types: ``Any``, ``String``, ``Bool``, ``Int``, ``Enum``, ``Identifier``, ``Pattern``,
``RelativePath``, ``ListOf``, ``MappingOf``, ``OneOf``, ``Schema`` (a schema string, parsed
to a ``FunctionSchema``), ``PyTarget`` (a Python ``module:attr``), ``CppExpr`` (a C++
expression) and ``TorchTag`` (a tag of the installed torch).

Checking is linear in the size of the file, YAML aliases included: each (node, type) pair
is checked once (an error in a value shared through an alias is reported once, at the
node the alias names), and a field whose value would expand, through aliases, to more than
``MAX_NODES`` nodes or ``MAX_DEPTH`` levels is refused before anything walks it.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path, PurePosixPath
from typing import Any as AnyValue, Mapping

import yaml

from ..core.diagnostics import Diagnostics, did_you_mean
from ..core.torch_compat import VERSIONED_TAGS
from ..core.yaml_nodes import loc_of, scalar_text_loc

# A field value may expand (through YAML aliases) to at most this many nodes, nested at most
# this deep: a few kilobytes of aliases could otherwise stand for an exponentially large value.
MAX_NODES = 10_000
MAX_DEPTH = 64

_STR, _BOOL, _INT, _FLOAT, _NULL = (f"tag:yaml.org,2002:{t}" for t in ("str", "bool", "int", "float", "null"))
_CONSTRUCT = yaml.constructor.SafeConstructor()
_SCALAR, _SEQ, _MAP = yaml.ScalarNode, yaml.SequenceNode, yaml.MappingNode


class _Invalid:
    def __repr__(self) -> str:
        return "INVALID"


INVALID: AnyValue = _Invalid()
"""What a check returns for a value that is not of its type (the error is reported)."""


class Checker:
    """Checks the nodes of one file against field types, reporting to `diag` at the node.

    Each (node, type) pair is checked once, so a value shared through YAML aliases costs its
    size once and its errors are reported once."""

    def __init__(self, diag: Diagnostics, path: str, aliases: bool = True):
        self.diag, self.path = diag, path
        self.aliases = aliases  # whether the file has any (without, its text bounds every value)
        self._memo: dict[tuple[int, int], AnyValue] = {}
        self._extent: dict[int, tuple[int, int]] = {}  # node id -> (expanded size, capped; depth)
        self._keep: list[yaml.Node] = []  # memo keys are ids: keep their nodes alive

    def field(self, name: str, field: "Field", node: yaml.Node, key: yaml.Node | None = None) -> AnyValue:
        """The checked value of field `name` (whose key is `key`), or INVALID."""
        if not self.bounded(node, f"'{name}'", key):
            return INVALID
        return self.check(field.type, node, name)

    def bounded(self, node: yaml.Node, what: str, at: yaml.Node | None = None) -> bool:
        """Whether a value's expansion is within MAX_NODES and MAX_DEPTH; else an error at
        `at` (the field's key: the value may be an alias of a node elsewhere)."""
        if not self.aliases:
            return True
        size, depth = self.extent(node)
        at = at or node
        if size > MAX_NODES:
            self.error(at, f"{what} expands to more than {MAX_NODES:,} YAML nodes (through aliases)",
                       "write the value out, or alias a smaller part of it")
            return False
        if depth > MAX_DEPTH:
            self.error(at, f"{what} is nested more than {MAX_DEPTH} levels deep (through aliases)")
            return False
        return True

    def check(self, ftype: "FieldType", node: yaml.Node, where: str) -> AnyValue:
        if not self.aliases:  # a tree: each node is reached once anyway
            return ftype.check(node, self, where)
        key = (id(node), id(ftype))
        if key not in self._memo:
            self._keep.append(node)
            self._memo[key] = ftype.check(node, self, where)
        return self._memo[key]

    def error(self, node: yaml.Node, message: str, hint: str = "") -> None:
        self.diag.error(loc_of(node, self.path), message, hint)

    def silent(self) -> "Checker":
        """A checker for trying a value against a type without reporting anything."""
        return Checker(Diagnostics(), self.path, self.aliases)

    def extent(self, root: yaml.Node) -> tuple[int, int]:
        """(size, depth) of a node's value with every alias expanded; the size capped just
        past MAX_NODES.  Linear: each node is measured once (the file is acyclic: the
        loader refuses an alias inside the collection it names before any field is read)."""
        memo = self._extent
        stack: list[tuple[yaml.Node, bool]] = [(root, False)]
        while stack:
            node, done = stack.pop()
            if id(node) in memo:
                continue
            kids = children(node)
            if not done:
                stack.append((node, True))
                stack.extend((k, False) for k in kids if id(k) not in memo)
                continue
            size, depth = 1, 0
            for k in kids:
                s, d = memo[id(k)]
                size, depth = min(size + s, MAX_NODES + 1), max(depth, d)
            self._keep.append(node)
            memo[id(node)] = (size, depth + 1)
        return memo[id(root)]


def children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, _SEQ):
        return list(node.value)
    if isinstance(node, _MAP):
        return [n for kv in node.value for n in kv]
    return []


def freeze(node: yaml.Node) -> AnyValue:
    """Plain YAML data as frozen Python: scalars as YAML 1.1 reads them, sequences as tuples,
    mappings as tuples of (key, value) pairs.  Shared nodes give shared values."""
    memo: dict[int, AnyValue] = {}
    stack: list[tuple[yaml.Node, bool]] = [(node, False)]
    while stack:
        n, done = stack.pop()
        if id(n) in memo:
            continue
        if isinstance(n, _SCALAR):
            memo[id(n)] = scalar_value(n)
            continue
        kids = children(n)
        if not done:
            stack.append((n, True))
            stack.extend((k, False) for k in kids if id(k) not in memo)
            continue
        if isinstance(n, _SEQ):
            memo[id(n)] = tuple(memo[id(k)] for k in n.value)
        else:
            memo[id(n)] = tuple((memo[id(k)], memo[id(v)]) for k, v in n.value)
    return memo[id(node)]


def scalar_value(node: yaml.ScalarNode) -> AnyValue:
    tag = node.tag
    if tag == _STR:
        return node.value
    if tag == _INT:
        return _CONSTRUCT.construct_yaml_int(node)
    if tag == _FLOAT:
        return _CONSTRUCT.construct_yaml_float(node)
    if tag == _BOOL:
        return _CONSTRUCT.construct_yaml_bool(node)
    if tag == _NULL:
        return None
    return node.value  # (other tags are refused for the whole file before fields are read)


def given(node: yaml.Node) -> str:
    """What a node is, for 'must be X, not <given>'."""
    if isinstance(node, _SEQ):
        return "a list"
    if isinstance(node, _MAP):
        return "a mapping"
    if node.tag == _NULL:
        return "empty" if not node.value else f"'{node.value}' (null)"
    if node.tag == _BOOL:
        return f"{node.value} (a boolean)"
    if node.tag in (_INT, _FLOAT):
        return f"the number {node.value}"
    text = node.value if len(node.value) <= 40 else node.value[:37] + "..."
    return f"'{text}'" if text.strip() else "an empty string"


def _quote_hint(node: yaml.Node) -> str:
    if isinstance(node, _SCALAR) and node.tag in (_BOOL, _INT, _FLOAT, _NULL) and node.value:
        return f"YAML reads {node.value} as a {'number' if node.tag in (_INT, _FLOAT) else 'boolean or null'}; " \
               f"quote it: '{node.value}'"
    return ""


# ---------------------------------------------------------------------------- types
class FieldType:
    """A type of declaration values.  `check` returns the checked value or INVALID after
    reporting; `describe` is a noun phrase ("a list of dtype names") and `plural` its plural,
    both for messages and the generated field reference; `kinds` are the node classes the
    type can accept (so that OneOf knows which alternative a node is meant for)."""

    kinds: tuple[type, ...] = (_SCALAR,)

    def check(self, node: yaml.Node, ck: Checker, where: str) -> AnyValue:
        raise NotImplementedError

    def describe(self) -> str:
        raise NotImplementedError

    def plural(self) -> str:
        raise NotImplementedError

    def fail(self, node: yaml.Node, ck: Checker, where: str, hint: str = "") -> AnyValue:
        ck.error(node, f"'{where}' must be {self.describe()}, not {given(node)}", hint)
        return INVALID


@dataclass(frozen=True)
class Any(FieldType):
    """Any plain YAML data (the meaning of a plugin field declared with a plain string)."""

    kinds = (_SCALAR, _SEQ, _MAP)

    def check(self, node, ck, where):
        return freeze(node)

    def describe(self):
        return "any YAML value"

    def plural(self):
        return "YAML values"


@dataclass(frozen=True)
class String(FieldType):
    """A string (YAML must read it as one: quote numbers and booleans)."""

    nonempty: bool = False
    noun: str = ""  # what the string holds, for messages: "a shape expression"
    nouns: str = ""  # its plural: "shape expressions"

    def check(self, node, ck, where):
        if not isinstance(node, _SCALAR) or node.tag != _STR or (self.nonempty and not node.value.strip()):
            return self.fail(node, ck, where, _quote_hint(node))
        return node.value

    def describe(self):
        return self.noun or ("a non-empty string" if self.nonempty else "a string")

    def plural(self):
        return self.nouns or ("non-empty strings" if self.nonempty else "strings")


@dataclass(frozen=True)
class Bool(FieldType):
    def check(self, node, ck, where):
        if not isinstance(node, _SCALAR) or node.tag != _BOOL:
            return self.fail(node, ck, where)
        return _CONSTRUCT.construct_yaml_bool(node)

    def describe(self):
        return "true or false"

    def plural(self):
        return "true/false values"


@dataclass(frozen=True)
class Int(FieldType):
    min: int | None = None
    max: int | None = None

    def check(self, node, ck, where):
        if not isinstance(node, _SCALAR) or node.tag != _INT:
            return self.fail(node, ck, where)
        value = _CONSTRUCT.construct_yaml_int(node)
        if (self.min is not None and value < self.min) or (self.max is not None and value > self.max):
            return self.fail(node, ck, where)
        return value

    def describe(self):
        if self.min is not None and self.max is not None:
            return f"an integer from {self.min} to {self.max}"
        if self.min is not None:
            return f"an integer >= {self.min}"
        return "an integer" if self.max is None else f"an integer <= {self.max}"

    def plural(self):
        return "integers"


@dataclass(frozen=True)
class Enum(FieldType):
    """One of a fixed set of names.  With `what` ("dtype"), an unknown name is reported as
    "unknown dtype 'x'", with a near-miss suggestion and the valid names."""

    choices: tuple[str, ...] = ()
    what: str = ""

    def __init__(self, *choices: str, what: str = ""):
        object.__setattr__(self, "choices", tuple(choices))
        object.__setattr__(self, "what", what)

    @property
    def values(self) -> tuple[str, ...]:
        return self.choices

    def check(self, node, ck, where):
        named = isinstance(node, _SCALAR) and node.tag == _STR
        if named and node.value in self.values:
            return node.value
        if named and self.what:
            hint = did_you_mean(node.value, self.values)
            valid = f"valid {_plural(self.what)}: " + ", ".join(self.values)
            ck.error(node, f"unknown {self.what} '{node.value}'", f"{hint} {valid}" if hint else valid)
            return INVALID
        near = did_you_mean(str(node.value), self.values) if isinstance(node, _SCALAR) else ""
        return self.fail(node, ck, where, near or _quote_hint(node))

    def describe(self):
        if self.what and len(self.values) > 6:
            return f"a {self.what} name"
        return "one of " + ", ".join(self.values)

    def plural(self):
        return f"{self.what} names" if self.what else "names among " + ", ".join(self.values)


def _plural(noun: str) -> str:
    return noun[:-1] + "ies" if noun.endswith("y") and noun[-2:-1] not in "aeiou" else noun + "s"


@dataclass(frozen=True)
class TorchTag(Enum):
    """A tag of the installed torch (`torch.Tag`), as `m.def` takes it."""

    def __init__(self):
        super().__init__(what="tag")

    @property
    def values(self) -> tuple[str, ...]:
        return torch_tags()

    def describe(self):
        return "a tag of the installed torch (torch.Tag)"

    def plural(self):
        return "tags of the installed torch (torch.Tag)"


@cache
def torch_tags() -> tuple[str, ...]:
    """The names of `torch.Tag`, and the tags of newer releases that opwrap registers
    through torch_compat.h on every release (`torch_compat.VERSIONED_TAGS`).  Read without
    importing torch (a second or two) from the tags.yaml that torch's Tag enum is generated
    from, shipped with the installed torch as torchgen/packaged/ATen/native/tags.yaml; from
    torch itself when it is already imported or that file is missing."""
    if "torch" not in sys.modules:
        spec = importlib.util.find_spec("torchgen")
        for loc in (spec.submodule_search_locations or []) if spec else []:
            tags = Path(loc, "packaged", "ATen", "native", "tags.yaml")
            if tags.is_file():
                names = re.findall(r"^- tag: *(\w+)", tags.read_text(encoding="utf-8"), re.M)
                return tuple(sorted({*names, *VERSIONED_TAGS}))
    import torch

    return tuple(sorted({*torch.Tag.__members__, *VERSIONED_TAGS}))


@dataclass(frozen=True)
class Pattern(FieldType):
    """A string matching a regular expression (whole), described by `noun`."""

    regex: str = ""
    noun: str = ""
    nouns: str = ""  # the plural of noun

    def check(self, node, ck, where):
        if not isinstance(node, _SCALAR) or node.tag != _STR or not re.fullmatch(self.regex, node.value):
            return self.fail(node, ck, where, _quote_hint(node))
        return node.value

    def describe(self):
        return self.noun

    def plural(self):
        return self.nouns or f"strings, each {self.noun}"


_IDENT = r"[A-Za-z_][A-Za-z0-9_]*"


@dataclass(frozen=True)
class Identifier(Pattern):
    """A C++ and Python identifier."""

    regex: str = _IDENT
    noun: str = "an identifier"
    nouns: str = "identifiers"


@dataclass(frozen=True)
class PyTarget(Pattern):
    """A Python object named as `module:attr` (imported when the library is imported, not
    when it is generated)."""

    regex: str = rf"{_IDENT}(\.{_IDENT})*:{_IDENT}"
    noun: str = "a Python name as 'module:attr'"
    nouns: str = "Python names as 'module:attr'"


@dataclass(frozen=True)
class RelativePath(FieldType):
    """A relative path inside a project directory, with one of the given suffixes."""

    suffixes: tuple[str, ...] = ()
    noun: str = "a relative path"

    def check(self, node, ck, where):
        text = node.value if isinstance(node, _SCALAR) and node.tag == _STR else None
        if text is None or not re.fullmatch(r"[A-Za-z0-9_./-]+", text) or text.startswith("/") \
                or ".." in PurePosixPath(text).parts or not text.endswith(self.suffixes):
            return self.fail(node, ck, where)
        return text

    def describe(self):
        return f"{self.noun} ending in {_either(self.suffixes)}"

    def plural(self):
        return f"relative paths ending in {_either(self.suffixes)}"


def _either(words) -> str:
    words = list(words)
    return ", ".join(words[:-1]) + " or " + words[-1] if len(words) > 1 else words[0]


@dataclass(frozen=True)
class CppExpr(FieldType):
    """A C++ expression: a non-empty string whose brackets balance and which holds no `;`
    outside string and character literals (it is pasted into generated code)."""

    def check(self, node, ck, where):
        if not isinstance(node, _SCALAR) or node.tag != _STR or not node.value.strip():
            return self.fail(node, ck, where)
        problem = _cpp_problem(node.value)
        if problem is not None:
            offset, message = problem
            ck.diag.error(scalar_text_loc(node, ck.path, offset), f"'{where}' is not a C++ expression: {message}")
            return INVALID
        return node.value

    def describe(self):
        return "a C++ expression"

    def plural(self):
        return "C++ expressions"


_CLOSE = {")": "(", "]": "[", "}": "{"}


def _cpp_problem(text: str) -> tuple[int, str] | None:
    opened: list[tuple[int, str]] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            if j >= n:
                return i, "unterminated " + ("string" if c == '"' else "character") + " literal"
            i = j
        elif c in "([{":
            opened.append((i, c))
        elif c in ")]}":
            if not opened or opened[-1][1] != _CLOSE[c]:
                return i, f"unmatched '{c}'"
            opened.pop()
        elif c == ";":
            return i, "';' ends a statement"
        i += 1
    if opened:
        return opened[-1][0], f"'{opened[-1][1]}' is never closed"
    return None


@dataclass(frozen=True)
class Schema(FieldType):
    """A schema string in PyTorch's schema language, parsed to a `FunctionSchema`."""

    def check(self, node, ck, where):
        from ..lang.schema import FunctionSchema, SchemaError

        if not isinstance(node, _SCALAR) or node.tag != _STR or not node.value.strip():
            return self.fail(node, ck, where)
        try:
            return FunctionSchema.parse(node.value)
        except SchemaError as err:
            ck.diag.error(scalar_text_loc(node, ck.path, err.offset), f"invalid schema: {err.message}")
            return INVALID

    def describe(self):
        return "a schema string like 'myadd(Tensor self, Tensor other) -> Tensor'"

    def plural(self):
        return "schema strings"


@dataclass(frozen=True)
class ListOf(FieldType):
    item: FieldType = String()
    nonempty: bool = False
    unique: bool = False

    kinds = (_SEQ,)

    def check(self, node, ck, where):
        if not isinstance(node, _SEQ):
            return self.fail(node, ck, where)
        if self.nonempty and not node.value:
            ck.error(node, f"'{where}' must not be empty")
            return INVALID
        out, ok, seen = [], True, set()
        for i, item in enumerate(node.value):
            v = ck.check(self.item, item, f"{where}[{i}]")
            ok = ok and v is not INVALID
            if self.unique and v is not INVALID:
                if v in seen:
                    ck.error(item, f"'{v}' is listed twice in '{where}'")
                    ok = False
                seen.add(v)
            out.append(v)
        return tuple(out) if ok else INVALID

    def describe(self):
        return ("a non-empty list of " if self.nonempty else "a list of ") + self.item.plural()

    def plural(self):
        return "lists of " + self.item.plural()


@dataclass(frozen=True)
class MappingOf(FieldType):
    """A mapping; its value is a tuple of (key, value) pairs in the order written.  Keys
    are names (YAML keys are names everywhere in declarations) checked against `key` by
    their text; `fixed` gives the value type of particular keys."""

    key: FieldType = String()
    value: FieldType = String()
    fixed: tuple[tuple[str, FieldType], ...] = ()

    kinds = (_MAP,)

    def check(self, node, ck, where):
        if not isinstance(node, _MAP):
            return self.fail(node, ck, where)
        fixed = dict(self.fixed)
        out, ok = [], True
        for k, v in node.value:
            name = str(k.value)
            if name in fixed:
                kv: AnyValue = name
            else:
                kv = ck.check(self.key, _as_str(k), f"{where} key")
            vv = ck.check(fixed.get(name, self.value), v, f"{where}.{name}")
            ok = ok and kv is not INVALID and vv is not INVALID
            out.append((kv, vv))
        return tuple(out) if ok else INVALID

    def describe(self):
        extra = "".join(f"; '{k}': {t.describe()}" for k, t in self.fixed)
        return f"a mapping of {self.key.plural()} to {self.value.plural()}{extra}"

    def plural(self):
        return f"mappings of {self.key.plural()} to {self.value.plural()}"


def _as_str(key: yaml.Node) -> yaml.Node:
    """A mapping key read by its text: `1:` and `true:` are the names '1' and 'true'."""
    if isinstance(key, _SCALAR) and key.tag != _STR:
        return yaml.ScalarNode(_STR, key.value, key.start_mark, key.end_mark, key.style)
    return key


@dataclass(frozen=True)
class OneOf(FieldType):
    """The first alternative the value is of.  When one alternative alone takes the node's
    kind (a scalar, a list, a mapping), the node is checked against it, so the error is the
    precise one (an unknown dtype at the item it is about)."""

    alternatives: tuple[FieldType, ...] = ()
    noun: str = ""  # instead of listing the alternatives
    nouns: str = ""

    def __init__(self, *alternatives: FieldType, noun: str = "", nouns: str = ""):
        object.__setattr__(self, "alternatives", tuple(alternatives))
        object.__setattr__(self, "noun", noun)
        object.__setattr__(self, "nouns", nouns)

    @property
    def kinds(self):  # type: ignore[override]
        return tuple({k for a in self.alternatives for k in a.kinds})

    def check(self, node, ck, where):
        fitting = [a for a in self.alternatives if isinstance(node, a.kinds)]
        if len(fitting) == 1:
            return ck.check(fitting[0], node, where)
        for alt in fitting:
            value = alt.check(node, ck.silent(), where)
            if value is not INVALID:
                return value
        return self.fail(node, ck, where)

    def describe(self):
        return self.noun or ", or ".join(a.describe() for a in self.alternatives)

    def plural(self):
        return self.nouns or ", or ".join(a.plural() for a in self.alternatives)


# ---------------------------------------------------------------------------- fields
@dataclass(frozen=True)
class Field:
    """One declaration field: its type and its documentation (one paragraph, Markdown)."""

    type: FieldType
    doc: str
    required: bool = False


def as_field(spec: AnyValue) -> Field | None:
    """A plugin's field declaration as a Field: a Field, or a plain string (its doc), which
    means any plain YAML data.  None for anything else."""
    if isinstance(spec, Field):
        return spec
    if isinstance(spec, str):
        return Field(Any(), spec)
    return None


def reference(fields: Mapping[str, Field]) -> str:
    """A Markdown table of fields: name, type, meaning (reference.field_table)."""
    rows = ["| field | type | meaning |", "|---|---|---|"]
    for name, f in fields.items():
        doc = f.doc.replace("|", "\\|").replace("\n", " ")
        rows.append(f"| `{name}` | {f.type.describe().replace('|', '/')} | {doc} |")
    return "\n".join(rows) + "\n"
