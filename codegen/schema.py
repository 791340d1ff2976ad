"""PyTorch's operator schema language: a tokenizer, a recursive-descent parser and a printer.

``FunctionSchema.parse(text)`` accepts what ``torch._C.parse_schema`` accepts and
``str(schema)`` prints the canonical text that torch prints, so the model can be
compared with torch's own parser (see tests/test_schema_corpus.py).  The grammar
follows torch/csrc/jit/frontend/function_schema_parser.cpp and
schema_type_parser.cpp; where torch's behaviour is odd (a bare ``!`` alias, the
``int[2] x=1`` default broadcast) it is reproduced on purpose and commented.

Why not ``torch._C.parse_schema`` itself?  The code generator must run (and report
positioned errors) without importing torch, and it needs a typed model it can
query (is this argument written to? is this a SymInt list?), which torch's
C++ objects expose only partially.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Iterator, Union

__all__ = [
    "SchemaError", "AliasInfo", "BaseType", "ListType", "OptionalType", "TupleType",
    "GenericType", "ClassType", "Type", "Argument", "Return", "FunctionSchema",
]


class SchemaError(ValueError):
    """A malformed schema; ``offset`` is the 0-based character position of the problem."""

    def __init__(self, message: str, offset: int, text: str = ""):
        self.message = message
        self.offset = offset
        self.text = text
        super().__init__(f"column {offset + 1}: {message}" + (f"\n  {text}\n  {' ' * offset}^" if text else ""))


# --------------------------------------------------------------------------------------------
# Types
# --------------------------------------------------------------------------------------------

# Base type names the schema language knows (torch's SchemaTypeParser::parseBaseType), mapped
# to the name torch prints for them.  Lower-case names that are not listed are type variables.
_BASE_TYPES = {
    "Tensor": "Tensor", "Generator": "Generator", "ScalarType": "ScalarType", "Layout": "Layout",
    "MemoryFormat": "MemoryFormat", "Storage": "Storage", "QScheme": "QScheme",
    "Quantizer": "Quantizer", "ConstQuantizerPtr": "int", "Device": "Device",
    "DeviceIndex": "int", "Stream": "Stream", "Scalar": "Scalar", "str": "str",
    "float": "float", "complex": "complex", "int": "int", "SymInt": "SymInt", "bool": "bool",
    "SymBool": "SymBool", "None": "NoneType", "NoneType": "NoneType", "Capsule": "Capsule", "Any": "Any",
    "AnyClassType": "AnyClassType", "AnyEnumType": "AnyEnumType",
}
_GENERIC_TYPES = {"Dict": 2, "Future": 1, "RRef": 1, "Await": 1, "Union": None}
_CLASS_PREFIX = "__torch__.torch.classes."


@dataclass(frozen=True)
class AliasInfo:
    """An alias annotation: ``(a)``, ``(a!)``, ``(a -> *)``, ``(*)``.

    ``contained`` holds the element annotation of a list (``Tensor(a!)[]``), as torch does.
    """

    before: tuple[str, ...] = ()
    after: tuple[str, ...] = ()
    is_write: bool = False
    contained: tuple["AliasInfo", ...] = ()

    def __str__(self) -> str:
        text = "|".join(self.before) + ("!" if self.is_write else "")
        if set(self.before) != set(self.after):
            text += " -> " + "|".join(self.after)
        return f"({text})"


@dataclass(frozen=True)
class BaseType:
    name: str  # canonical: "Tensor", "int", "SymInt", "float", ... or a type variable "t"

    def __str__(self) -> str:
        return self.name

    @property
    def is_type_var(self) -> bool:
        return self.name not in _BASE_TYPES.values()


@dataclass(frozen=True)
class ClassType:
    qualified_name: str  # "__torch__.torch.classes.ns.Name"

    def __str__(self) -> str:
        return self.qualified_name

    @property
    def namespace(self) -> str:
        return self.qualified_name[len(_CLASS_PREFIX):].split(".")[0]

    @property
    def class_name(self) -> str:
        return self.qualified_name.rsplit(".", 1)[1]


@dataclass(frozen=True)
class ListType:
    elem: "Type"
    size: int | None = None  # int[2]: only on an argument's outermost list, as in torch

    def __str__(self) -> str:
        return f"{self.elem}[]"


@dataclass(frozen=True)
class OptionalType:
    elem: "Type"

    def __str__(self) -> str:
        return f"{self.elem}?"


@dataclass(frozen=True)
class TupleType:
    elems: tuple["Type", ...]

    def __str__(self) -> str:
        return "(" + ", ".join(map(str, self.elems)) + ")"


@dataclass(frozen=True)
class GenericType:
    name: str  # Dict, Future, RRef, Await, Union
    args: tuple["Type", ...]

    def __str__(self) -> str:
        return f"{self.name}(" + ", ".join(map(str, self.args)) + ")"


_DICT_KEYS = frozenset(BaseType(n) for n in ("int", "float", "complex", "bool", "str", "Tensor", "Any", "Device"))

Type = Union[BaseType, ClassType, ListType, OptionalType, TupleType, GenericType]


def unwrap_optional(t: Type) -> Type:
    return t.elem if isinstance(t, OptionalType) else t


def is_tensor(t: Type) -> bool:
    return isinstance(t, BaseType) and t.name == "Tensor"


# --------------------------------------------------------------------------------------------
# Default values
# --------------------------------------------------------------------------------------------

def format_double(d: float) -> str:
    """Print a double as torch's IValue printer does (integral values end in '.')."""
    if math.isfinite(d) and d == math.floor(d) and abs(d) < 2.0**63:
        return f"{int(d)}."
    return "%.17g" % d


def quote_string(s: str) -> str:
    """c10::printQuotedString."""
    escapes = {"\\": "\\\\", "'": "\\'", '"': '\\"', "\a": "\\a", "\b": "\\b", "\f": "\\f",
               "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v"}
    out = []
    for ch in s:
        if ch in escapes:
            out.append(escapes[ch])
        elif 0x20 <= ord(ch) < 0x7F or ord(ch) > 0x7F:
            out.append(ch)
        else:
            out.append("\\%03o" % ord(ch))
    return '"' + "".join(out) + '"'


@dataclass(frozen=True)
class Default:
    """A parsed default value.  ``value`` is None, bool, int, float, complex, str or a tuple."""

    value: object
    kind: str  # "none" | "bool" | "int" | "float" | "complex" | "str" | "list" | "device" | "enum"
    text: str = ""  # the identifier for kind == "enum" (contiguous_format, long, ...)

    def __str__(self) -> str:
        return _format_value(self.value, self.kind)

    def python(self) -> str:
        """The value as Python source (for stubs and fake kernels)."""
        v = self.value
        if self.kind == "list":
            return "[" + ", ".join(repr(x) for x in v) + "]"
        if self.kind == "float" and not math.isfinite(v):
            return f"float('{v}')"
        return repr(v)


def _format_value(v: object, kind: str) -> str:
    if v is None:
        return "None"
    if isinstance(v, bool):
        return "True" if v else "False"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return format_double(v)
    if isinstance(v, complex):
        return f"{format_double(v.real)}+{format_double(v.imag)}j"
    if isinstance(v, tuple):
        return "[" + ", ".join(_format_value(x, "") for x in v) + "]"
    if kind == "device":
        return str(v)
    return quote_string(str(v))


# Identifiers accepted as numeric defaults (torch's parseSingleConstant), as c10::ScalarType codes.
_ENUM_DEFAULTS = {"float": 6, "complex": 9, "long": 4, "strided": 0, "Mean": 1, "contiguous_format": 0}
_DTYPE_CODES = {
    "uint8": 0, "int8": 1, "int16": 2, "int32": 3, "int64": 4, "float16": 5, "float32": 6,
    "float64": 7, "complex32": 8, "complex64": 9, "complex128": 10, "bool": 11, "qint8": 12,
    "quint8": 13, "qint32": 14, "bfloat16": 15, "quint4x2": 16, "quint2x4": 17,
    "float8_e5m2": 23, "float8_e4m3fn": 24, "float8_e5m2fnuz": 25, "float8_e4m3fnuz": 26,
    "uint16": 27, "uint32": 28, "uint64": 29,
    "half": 5, "double": 7, "cfloat": 9, "cdouble": 10, "short": 2, "int": 3, "byte": 0, "char": 1,
    "chalf": 8, "bits8": 21,
}


# --------------------------------------------------------------------------------------------
# Arguments and schemas
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Argument:
    name: str
    type: Type
    default: Default | None = None
    alias: AliasInfo | None = None
    kwarg_only: bool = False

    def __str__(self) -> str:
        return _format_argument(self.type, self.alias, self.name, self.default)

    @property
    def is_write(self) -> bool:
        return self.alias is not None and self.alias.is_write

    @property
    def is_optional(self) -> bool:
        return isinstance(self.type, OptionalType)


@dataclass(frozen=True)
class Return:
    name: str | None
    type: Type
    alias: AliasInfo | None = None

    def __str__(self) -> str:
        return _format_argument(self.type, self.alias, self.name or "", None)

    @property
    def is_write(self) -> bool:
        return self.alias is not None and self.alias.is_write


def _format_argument(t: Type, alias: AliasInfo | None, name: str, default: Default | None) -> str:
    # Mirrors c10::operator<<(ostream&, const Argument&): the alias goes after the element
    # type of a list, the '?' always last ("Tensor(a!)?"), sized lists print their size.
    inner = unwrap_optional(t)
    if isinstance(inner, ListType):
        text = str(inner.elem)
        if alias is not None and alias.contained:
            text += str(alias.contained[0])
        text += f"[{inner.size if inner.size is not None else ''}]"
    else:
        text = str(inner)
    if alias is not None and alias.before:
        text += str(alias)
    if isinstance(t, OptionalType):
        text += "?"
    if name:
        text += " " + name
    if default is not None:
        text += "=" + _format_default(t, default)
    return text


def _format_default(t: Type, default: Default) -> str:
    # torch prints `int[2] stride=1` for an all-equal int list of more than one element.
    if isinstance(t, ListType) and t.elem == BaseType("int") and isinstance(default.value, tuple):
        vals = default.value
        if len(vals) > 1 and all(v == vals[0] for v in vals):
            return _format_value(vals[0], "")
    return str(default)


@dataclass(frozen=True)
class FunctionSchema:
    name: str  # may be namespace-qualified: "aten::add"
    overload_name: str
    arguments: tuple[Argument, ...]
    returns: tuple[Return, ...]
    is_vararg: bool = False
    is_varret: bool = False

    @staticmethod
    def parse(text: str) -> "FunctionSchema":
        return _Parser(text).parse_schema()

    def __str__(self) -> str:
        out = self.name + (f".{self.overload_name}" if self.overload_name else "") + "("
        parts, seen_kwarg_only = [], False
        for a in self.arguments:
            if a.kwarg_only and not seen_kwarg_only:
                parts.append("*")
                seen_kwarg_only = True
            parts.append(str(a))
        if self.is_vararg:
            parts.append("...")
        out += ", ".join(parts) + ") -> "
        rets = [str(r) for r in self.returns] + (["..."] if self.is_varret else [])
        single = (len(self.returns) == 1 and not self.is_varret) or (not self.returns and self.is_varret)
        # A lone return that starts with '(' (a tuple type) needs parentheses to parse back.
        if single and not rets[0].startswith("("):
            return out + rets[0]
        return out + "(" + ", ".join(rets) + ")"

    # Queries used by the generators ----------------------------------------------------

    @property
    def base_name(self) -> str:
        return self.name.split("::")[-1]

    @property
    def ident(self) -> str:
        """A C++/Python identifier of the op: `name` or `name_overload` (no namespace)."""
        return self.base_name + (f"_{self.overload_name}" if self.overload_name else "")

    @property
    def qualified_name(self) -> str:
        return self.name + (f".{self.overload_name}" if self.overload_name else "")

    @property
    def is_inplace(self) -> bool:
        """An in-place op by torch's convention: a name ending in '_' and a mutated 'self'."""
        return self.base_name.endswith("_") and any(a.name == "self" and a.is_write for a in self.arguments)

    @property
    def is_mutable(self) -> bool:
        return any(a.is_write for a in self.arguments)

    def argument(self, name: str) -> Argument | None:
        return next((a for a in self.arguments if a.name == name), None)

    def return_names(self) -> tuple[str, ...]:
        """Names for the returns: declared names, else 'result' or 'result0', 'result1', ..."""
        if len(self.returns) == 1:
            return (self.returns[0].name or "result",)
        return tuple(r.name or f"result{i}" for i, r in enumerate(self.returns))

    def aliased_argument(self, ret: Return) -> Argument | None:
        """The argument a return aliases (`Tensor(a!) self ... -> Tensor(a!)`), if any."""
        if ret.alias is None:
            return None
        for a in self.arguments:
            if a.alias is not None and set(a.alias.before) & set(ret.alias.before) - {"*"}:
                return a
        return None


# --------------------------------------------------------------------------------------------
# Tokenizer
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Token:
    kind: str  # "ident" | "number" | "string" | "->" | "..." | "::" | one punctuation char | "eof"
    text: str
    offset: int


_PUNCT = set("()[],?!*=.:|-")
# Words torch's JIT lexer reserves: they can name neither a type nor an argument.
_KEYWORDS = frozenset(
    "def return raise import as in is not and or if else elif while for pass break continue del "
    "with global assert class".split())
_ESCAPES = {"\\": "\\", "'": "'", '"': '"', "a": "\a", "b": "\b", "f": "\f", "n": "\n",
            "r": "\r", "t": "\t", "v": "\v"}


def tokenize(text: str) -> Iterator[Token]:
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c in " \t\n\r":
            i += 1
        elif c.isalpha() or c == "_":
            j = i + 1
            while j < n and (text[j].isalnum() or text[j] == "_"):
                j += 1
            word = text[i:j]
            kind = "keyword" if word in _KEYWORDS else "const" if word in ("True", "False", "None") else "ident"
            yield Token(kind, word, i)
            i = j
        elif c.isdigit() or (c == "." and i + 1 < n and text[i + 1].isdigit()):
            j = i
            while j < n and text[j].isdigit():
                j += 1
            if j < n and text[j] == "." and not text.startswith("...", j):
                j += 1
                while j < n and text[j].isdigit():
                    j += 1
            if j < n and text[j] in "eE":
                k = j + 1
                if k < n and text[k] in "+-":
                    k += 1
                if k < n and text[k].isdigit():
                    j = k
                    while j < n and text[j].isdigit():
                        j += 1
            if j < n and text[j] == "j":
                j += 1
            if j < n and (text[j].isalnum() or text[j] == "_"):
                raise SchemaError(f"malformed number '{text[i:j + 1]}'", i, text)
            yield Token("number", text[i:j], i)
            i = j
        elif c in "\"'":
            j, chars = i + 1, []
            while True:
                if j >= n:
                    raise SchemaError("unterminated string literal", i, text)
                if text[j] == c:
                    break
                if text[j] == "\\":
                    if j + 1 >= n or text[j + 1] not in _ESCAPES:
                        raise SchemaError("unsupported escape sequence in string literal", j, text)
                    chars.append(_ESCAPES[text[j + 1]])
                    j += 2
                else:
                    chars.append(text[j])
                    j += 1
            yield Token("string", "".join(chars), i)
            i = j + 1
        elif text.startswith("->", i):
            yield Token("->", "->", i)
            i += 2
        elif text.startswith("...", i):
            yield Token("...", "...", i)
            i += 3
        elif c in _PUNCT:
            yield Token(c, c, i)
            i += 1
        else:
            raise SchemaError(f"unexpected character {c!r}", i, text)
    yield Token("eof", "", n)


def _describe(tok: Token) -> str:
    return "end of schema" if tok.kind == "eof" else repr(tok.text)


# --------------------------------------------------------------------------------------------
# Parser
# --------------------------------------------------------------------------------------------

class _Parser:
    def __init__(self, text: str):
        self.text = text
        self.toks = list(tokenize(text))
        self.pos = 0
        self.fresh_alias = 0

    # token helpers
    @property
    def cur(self) -> Token:
        return self.toks[self.pos]

    def peek(self, k: int = 1) -> Token:
        return self.toks[min(self.pos + k, len(self.toks) - 1)]

    def next(self) -> Token:
        tok = self.cur
        self.pos += 1
        return tok

    def accept(self, kind: str) -> Token | None:
        return self.next() if self.cur.kind == kind else None

    def expect(self, kind: str, what: str | None = None) -> Token:
        if self.cur.kind != kind:
            self.error(f"expected {what or repr(kind)} but found {_describe(self.cur)}")
        return self.next()

    def error(self, message: str, tok: Token | None = None):
        raise SchemaError(message, (tok or self.cur).offset, self.text)

    def comma_list(self, close: str, item: Callable[[], None]) -> None:
        """Parse `item (',' item)* close`, the opening bracket already consumed."""
        if self.accept(close):
            return
        while True:
            item()
            if self.accept(close):
                return
            self.expect(",", f"',' or '{close}'")

    # grammar
    def parse_schema(self) -> FunctionSchema:
        name_tok = self.expect("ident", "an operator name")
        name = name_tok.text
        if self.accept(":"):
            self.expect(":", "'::' after the namespace")
            name += "::" + self.expect("ident", "an operator name after '::'").text
        overload = ""
        if self.accept("."):
            tok = self.expect("ident", "an overload name after '.'")
            overload = tok.text
            if overload == "default" or overload.startswith("__"):
                self.error(f"'{overload}' is not a legal overload name", tok)
        self.expect("(", "'(' to open the argument list")
        args: list[Argument] = []
        state = {"kwarg_only": False, "vararg": False, "seen_default": False}

        def argument() -> None:
            if state["vararg"]:
                self.error("'...' must be the last element of the argument list")
            if self.accept("*"):
                state["kwarg_only"] = True
            elif self.accept("..."):
                state["vararg"] = True
            else:
                start = self.cur
                a = self.parse_argument(kwarg_only=state["kwarg_only"])
                if a.default is not None:
                    state["seen_default"] = True
                elif state["seen_default"] and not a.kwarg_only and not isinstance(a.type, ListType):
                    # torch exempts lists, for old serialized schemas (FunctionSchema::checkSchema)
                    self.error(f"non-default argument '{a.name}' follows a default argument", start)
                args.append(a)

        self.comma_list(")", argument)
        if state["vararg"] and any(a.default is not None for a in args):
            self.error("schemas with a vararg '...' cannot have default values")
        self.expect("->", "'->' before the returns")
        rets: list[Return] = []
        varret = False
        if self.accept("..."):
            varret = True
        elif self.accept("("):
            def ret() -> None:
                nonlocal varret
                if varret:
                    self.error("'...' must be the last element of the return list")
                if self.accept("..."):
                    varret = True
                else:
                    rets.append(self.parse_return())
            self.comma_list(")", ret)
        else:
            rets.append(self.parse_return())
        self.expect("eof", "end of schema")
        return FunctionSchema(name, overload, tuple(args), tuple(rets), state["vararg"], varret)

    def parse_argument(self, kwarg_only: bool) -> Argument:
        t, alias = self.parse_arg_type()
        name = self.expect("ident", "an argument name").text
        default = None
        if self.accept("="):
            default = self.parse_default(t)
        return Argument(name, t, default, alias, kwarg_only)

    def parse_return(self) -> Return:
        t, alias = self.parse_arg_type()
        name = self.next().text if self.cur.kind == "ident" else None
        return Return(name, t, alias)

    def parse_arg_type(self) -> tuple[Type, AliasInfo | None]:
        """A type plus the argument-level sized list suffix `[N]` (function_schema_parser)."""
        t, alias = self.parse_type()
        if self.cur.kind == "[":
            self.next()
            tok = self.expect("number", "a list size")
            digits = tok.text[: len(tok.text) - len(tok.text.lstrip("0123456789"))]
            if not digits:
                self.error(f"list size must be a non-negative integer, not '{tok.text}'", tok)
            size = int(digits)  # torch reads it with std::stoll, which stops at the first non-digit
            self.expect("]", "']'")
            t = ListType(t, size)
            alias = self.wrap_container_alias(alias)
            if self.accept("?"):
                t = OptionalType(t)
        return t, alias

    def wrap_container_alias(self, elem_alias: AliasInfo | None) -> AliasInfo | None:
        container = self.parse_alias()
        if elem_alias is not None:
            if container is None:
                container = AliasInfo(is_write=elem_alias.is_write)
            container = AliasInfo(container.before, container.after, container.is_write,
                                  container.contained + (elem_alias,))
        return container

    def parse_type(self) -> tuple[Type, AliasInfo | None]:
        tok = self.cur
        alias: AliasInfo | None = None
        if tok.kind == "(":
            self.next()
            elems: list[Type] = []
            self.comma_list(")", lambda: elems.append(self.parse_type()[0]))
            t: Type = TupleType(tuple(elems))
        elif tok.kind == "ident" and tok.text in _GENERIC_TYPES and self.peek().kind == "(":
            self.next()
            self.next()
            params: list[Type] = []
            self.comma_list(")", lambda: params.append(self.parse_type()[0]))
            arity = _GENERIC_TYPES[tok.text]
            if arity is not None and len(params) != arity:
                self.error(f"{tok.text} takes {arity} type parameter(s), got {len(params)}", tok)
            t = GenericType(tok.text, tuple(params))
            if tok.text == "Dict":
                key = params[0]
                if key == BaseType("SymInt"):
                    key = BaseType("int")  # torch keys dicts by the SymInt's fake type
                if key not in _DICT_KEYS:
                    self.error(f"cannot create a Dict with key type '{key}'; keys may be "
                               "int, float, complex, bool, str, Tensor or Any", tok)
                t = GenericType("Dict", (key, params[1]))
                alias = self.parse_alias()
        elif tok.kind == "ident" and tok.text == "__torch__":
            parts = [self.next().text]
            for expected in ("torch", "classes", None, None):
                self.expect(".", "'.' in a class type")
                part = self.expect("ident", "a class type component")
                if expected and part.text != expected:
                    self.error(f"expected '{expected}' in '__torch__.torch.classes.<ns>.<Class>'", part)
                parts.append(part.text)
            t = ClassType(".".join(parts))
        elif tok.kind == "ident" or (tok.kind == "const" and tok.text == "None"):
            self.next()
            if tok.text in _BASE_TYPES:
                t = BaseType(_BASE_TYPES[tok.text])
            elif tok.text[0].islower():
                name = tok.text  # a type variable, as in `t[] self`; torch lets it be dotted
                while self.cur.kind == "." and self.peek().kind == "ident":
                    self.next()
                    name += "." + self.next().text
                t = BaseType(name)
            else:
                self.error(f"unknown type '{tok.text}'; common types are Tensor, SymInt, int, float, "
                           "bool, str, Scalar, ScalarType, Device, Layout, MemoryFormat", tok)
            alias = self.parse_alias()
        else:
            self.error(f"expected a type but found {_describe(tok)}")
        while True:
            if self.cur.kind == "[" and self.peek().kind == "]":
                self.next()
                self.next()
                t = ListType(t)
                alias = self.wrap_container_alias(alias)
            elif self.accept("?"):
                if not isinstance(t, OptionalType):  # torch folds `T??` into `T?`
                    t = OptionalType(t)
            else:
                return t, alias

    def parse_alias(self) -> AliasInfo | None:
        if self.accept("("):
            before = self.alias_sets()
            is_write = bool(self.accept("!"))
            after = self.alias_sets() if self.accept("->") else before
            self.expect(")", "')' to close the alias annotation")
            return AliasInfo(before, after, is_write)
        if self.accept("!"):
            # torch's shorthand `Tensor!`: a fresh write set whose after-set stays empty.
            name = f"${self.fresh_alias}"
            self.fresh_alias += 1
            return AliasInfo((name,), (), True)
        return None

    def alias_sets(self) -> tuple[str, ...]:
        sets: list[str] = []
        while True:
            if self.accept("*"):
                if "*" not in sets:
                    sets.append("*")
            else:
                tok = self.expect("ident", "an alias set name or '*'")
                if "*" not in sets:
                    sets.append(tok.text)
            if not self.accept("|"):
                return tuple(sets)

    # defaults (torch's parseDefaultValue / parseSingleConstant)
    def parse_default(self, t: Type) -> Default:
        tok = self.cur
        inner = t
        if isinstance(t, ListType):
            elem = t.elem
            if not (isinstance(elem, BaseType) and elem.name in ("int", "SymInt", "float", "complex", "bool")):
                self.error("list defaults are only supported for int, float, complex and bool lists", tok)
            if self.cur.kind == "ident":
                self.error(f"invalid default value {_describe(self.cur)} for a list")
            if t.size is not None and self.cur.kind != "[":
                v = self.single_constant(elem)
                return Default(tuple([v.value] * t.size), "list")
            self.expect("[", "'[' to open a list default")
            items: list[object] = []
            self.comma_list("]", lambda: items.append(self.single_constant(elem).value))
            return Default(tuple(items), "list")
        if isinstance(inner, BaseType) and inner.name in ("Tensor", "Generator", "Quantizer"):
            return self.none_default()
        if isinstance(inner, BaseType) and inner.name == "Device":
            s = self.expect("string", "a device string").text
            return Default(s, "device")
        if isinstance(inner, (OptionalType,)) or (isinstance(inner, BaseType) and inner.name in (
                "str", "Scalar", "int", "SymInt", "bool", "float", "complex", "ScalarType", "Layout",
                "MemoryFormat")):
            v = self.single_constant(t)
            return v
        self.error(f"type '{t}' cannot have a default value", tok)

    def none_default(self) -> Default:
        tok = self.cur
        if tok.text != "None":
            self.error(f"expected None but found {_describe(tok)}")
        self.next()
        return Default(None, "none")

    def single_constant(self, t: Type) -> Default:
        tok = self.cur
        if tok.kind in ("ident", "const"):
            self.next()
            if tok.text == "True":
                return Default(True, "bool")
            if tok.text == "False":
                return Default(False, "bool")
            if tok.text == "None":
                return Default(None, "none")
            if tok.text in _ENUM_DEFAULTS:
                return Default(_ENUM_DEFAULTS[tok.text], "enum", tok.text)
            base = unwrap_optional(t)
            if isinstance(base, BaseType) and base.name == "ScalarType" and tok.text in _DTYPE_CODES:
                return Default(_DTYPE_CODES[tok.text], "enum", tok.text)
            self.error(f"invalid default value '{tok.text}'", tok)
        if tok.kind == "string":
            self.next()
            return Default(tok.text, "str")
        negative = bool(self.accept("-"))
        num = self.expect("number", "a default value")
        text = ("-" if negative else "") + num.text
        # torch decides on the declared type itself, not the optional's element: `float? x=1` is an int.
        kind = t.name if isinstance(t, BaseType) else ""
        try:
            if kind == "complex" or "j" in text:
                return Default(complex(0, float(text.rstrip("j"))), "complex")
            if kind == "float" or any(c in text for c in ".eE"):
                v = float(text)
                if math.isinf(v):
                    self.error(f"default value {text} is out of range", num)
                return Default(v, "float")
            v = int(text)
        except ValueError:
            self.error(f"malformed number '{text}'", num)
        if not -(2**63) <= v < 2**63:
            self.error(f"default value {text} does not fit in int64", num)
        return Default(v, "int")
