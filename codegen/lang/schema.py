"""PyTorch's operator schema language: a tokenizer, a recursive-descent parser and a printer.

``FunctionSchema.parse(text)`` accepts what ``torch._C.parse_schema`` accepts, reads it to
the same model (types, list sizes, defaults, alias sets) and ``str(schema)`` prints the
canonical text that torch prints, so the model can be compared with torch's own parser
(tests/test_schema.py).  The grammar follows torch/csrc/jit/frontend/lexer.h,
function_schema_parser.cpp and schema_type_parser.cpp; where torch's behaviour is odd (a
bare ``!`` alias, the ``int[2] x=1`` default broadcast, ``(*|)``, a line break outside
parentheses ending the schema) it is reproduced on purpose and commented.

What torch accepts but reads otherwise than written is refused here, with a message that
says so: ``Union(...)`` types (torch merges and reorders their members) and ``Scalar??``
(a union to torch), a complex default without its ``j`` (torch drops the last character:
``complex c=1.5`` is 1j), an exponent ``1E3`` where torch reads an integer (1), hexadecimal
numbers, list sizes beyond int32, device indices beyond 127, octal escapes beyond ASCII, and
a value of the wrong kind in ``int[0] x=1.5``.  Type variables (``t``, ``t.x``) are parsed as
torch._C.parse_schema does; torch.library refuses them outside aten:: and prim::, and the
code generator refuses them as unsupported types.

Why not ``torch._C.parse_schema`` itself?  The code generator must run (and report
positioned errors) without importing torch, and it needs a typed model it can
query (is this argument written to? is this a SymInt list?), which torch's
C++ objects expose only partially.
"""

from __future__ import annotations

import math
import re
import sys
from dataclasses import dataclass, field
from typing import Callable, Iterator, NoReturn, Union

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
_GENERIC_TYPES = {"Dict": 2, "Future": 1, "RRef": 1, "Await": 1}
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
        return self.text()

    @property
    def is_fresh(self) -> bool:
        """torch's shorthand `Tensor!`: a fresh write set (`$0`, `$1`, ...) with no after-set."""
        return self.is_write and not self.after and len(self.before) == 1 and self.before[0].startswith("$")

    def text(self, parseable: bool = False) -> str:
        """As torch prints it (`Tensor!` prints `($0! -> )`); `parseable`: a fresh write set as
        `!`, which torch's parser reads back to the same set (it cannot read `$0`)."""
        if parseable and self.is_fresh:
            return "!"
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
    name: str  # Dict, Future, RRef, Await (Union types are refused)
    args: tuple["Type", ...]

    def __str__(self) -> str:
        return f"{self.name}(" + ", ".join(map(str, self.args)) + ")"


_DICT_KEYS = frozenset(BaseType(n) for n in ("int", "float", "complex", "bool", "str", "Tensor", "Any", "Device"))

Type = Union[BaseType, ClassType, ListType, OptionalType, TupleType, GenericType]


def unwrap_optional(t: Type) -> Type:
    return t.elem if isinstance(t, OptionalType) else t


def is_tensor(t: Type) -> bool:
    return isinstance(t, BaseType) and t.name == "Tensor"


def is_tensor_list(t: Type) -> bool:
    """`Tensor[]`, `Tensor(a!)[]` or `Tensor?[]` (an optional list is not: unwrap it first)."""
    return isinstance(t, ListType) and is_tensor(unwrap_optional(t.elem))


def is_list_of_tensors(a: "Argument") -> bool:
    """The argument is a list of tensors, optional or not."""
    return is_tensor_list(unwrap_optional(a.type))


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
        if self.kind == "list" and isinstance(v, tuple):
            return "[" + ", ".join(repr(x) for x in v) + "]"
        if self.kind == "float" and isinstance(v, float) and not math.isfinite(v):
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
    if isinstance(v, complex):  # c10's printComplex: the sign, then the magnitude of the imaginary part
        return f"{format_double(v.real)}{'+' if v.imag >= 0 else '-'}{format_double(abs(v.imag))}j"
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

    def text(self, parseable: bool = False) -> str:
        return _format_argument(self.type, self.alias, self.name, self.default, parseable)

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

    def text(self, parseable: bool = False) -> str:
        return _format_argument(self.type, self.alias, self.name or "", None, parseable)

    @property
    def is_write(self) -> bool:
        return self.alias is not None and self.alias.is_write


def _format_argument(t: Type, alias: AliasInfo | None, name: str, default: Default | None,
                     parseable: bool = False) -> str:
    # Mirrors c10::operator<<(ostream&, const Argument&): the alias goes after the element
    # type of a list, the '?' always last ("Tensor(a!)?"), sized lists print their size.
    inner = unwrap_optional(t)
    if isinstance(inner, ListType):
        text = str(inner.elem)
        if alias is not None and alias.contained:
            text += alias.contained[0].text(parseable)
        text += f"[{inner.size if inner.size is not None else ''}]"
    else:
        text = str(inner)
    if alias is not None and alias.before:
        text += alias.text(parseable)
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
        return self.text()

    def text(self, parseable: bool = False) -> str:
        """As torch prints the schema; `parseable`: as torch's parser reads it back to the same
        schema (what a library registers: torch prints `Tensor!` as `Tensor($0! -> )`, which
        it cannot parse)."""
        out = self.name + (f".{self.overload_name}" if self.overload_name else "") + "("
        parts, seen_kwarg_only = [], False
        for a in self.arguments:
            if a.kwarg_only and not seen_kwarg_only:
                parts.append("*")
                seen_kwarg_only = True
            parts.append(a.text(parseable))
        if self.is_vararg:
            parts.append("...")
        out += ", ".join(parts) + ") -> "
        rets = [r.text(parseable) for r in self.returns] + (["..."] if self.is_varret else [])
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
# Words torch's JIT lexer reserves (its token table, torch/csrc/jit/frontend/lexer.h): they can
# name neither a type nor an argument, an alias set or an operator.  `NoneType` is a token too,
# which the type parser accepts as a type and nothing else does.
_KEYWORDS = frozenset(
    "def return raise import as in is not and or if else elif while for pass break continue del "
    "with global assert class Ellipsis".split())
_CONSTS = frozenset(("True", "False", "None", "NoneType"))
# Escapes torch's parseStringLiteral knows; `\r` and `\0` are not among them (it reads a
# backslash and a digit as a three-digit octal escape), and `\x`, `\u` it refuses.
_ESCAPES = {"\\": "\\", "'": "'", '"': '"', "\n": "\n", "a": "\a", "b": "\b", "f": "\f", "n": "\n",
            "v": "\v", "t": "\t"}
_BLANKS = " \t\r\v\f"  # C's isspace() less the newline, which ends a declaration
_DIGITS = "0123456789"
_HEX_DIGITS = "0123456789abcdefABCDEF"


def _ident_start(c: str) -> bool:
    return c.isascii() and (c.isalpha() or c == "_")  # torch's lexer: C's isalpha, C locale


def _ident_char(c: str) -> bool:
    return c.isascii() and (c.isalnum() or c == "_")


def tokenize(text: str) -> Iterator[Token]:
    """Torch's lexer, for what a schema can hold.  A line break inside brackets is blank
    space; outside them it ends the declaration, so it is a "newline" token, which only
    leading and trailing line breaks are not.  `#` starts a comment (but `# type:` is a
    token of its own, which no schema may hold) and a backslash before a line break joins
    the lines."""
    toks = list(_raw_tokens(text))
    body = [k for k, t in enumerate(toks) if t.kind not in ("newline", "eof")]
    for k, t in enumerate(toks):
        if t.kind != "newline" or (body and body[0] < k < body[-1]):
            yield t


def _raw_tokens(text: str) -> Iterator[Token]:
    i, n, depth = 0, len(text), 0
    while i < n:
        c = text[i]
        if c in _BLANKS:
            i += 1
        elif c == "\\" and text.startswith("\n", i + 1):
            i += 2
        elif c == "#":
            if text.startswith("# type:", i):
                raise SchemaError("a '# type:' comment cannot appear in a schema", i, text)
            while i < n and text[i] != "\n":
                i += 1
        elif c == "\n":
            if depth == 0:
                yield Token("newline", c, i)
            i += 1
        elif _ident_start(c):
            j = i + 1
            while j < n and _ident_char(text[j]):
                j += 1
            word = text[i:j]
            kind = "keyword" if word in _KEYWORDS else "const" if word in _CONSTS else "ident"
            yield Token(kind, word, i)
            i = j
        elif c in _DIGITS or (c == "." and i + 1 < n and text[i + 1] in _DIGITS):
            j = _number_end(text, i)
            yield Token("number", text[i:j], i)
            i = j
        elif c in "\"'":
            tok, i = _string(text, i)
            yield tok
        elif text.startswith("->", i):
            yield Token("->", "->", i)
            i += 2
        elif text.startswith("...", i):
            yield Token("...", "...", i)
            i += 3
        elif c in _PUNCT:
            if c in "([":
                depth += 1
            elif c in ")]" and depth:
                depth -= 1
            yield Token(c, c, i)
            i += 1
        else:
            raise SchemaError(f"unexpected character {c!r}", i, text)
    yield Token("eof", "", n)


def _number_end(text: str, i: int) -> int:
    """The end of the number at `i`: digits, a fraction, an exponent, then an optional `j`
    (torch's lexer takes what C's strtod reads, and a `j` after it)."""
    n = len(text)
    if text.startswith(("0x", "0X"), i) and (text[i + 2:i + 3] in tuple(_HEX_DIGITS) or (
            text[i + 2:i + 3] == "." and text[i + 3:i + 4] in tuple(_HEX_DIGITS))):
        # strtod reads C's hexadecimal floats; torch then takes '0x10' for 16.0 or for the
        # integer 0, depending on the argument's type.
        raise SchemaError("hexadecimal numbers are not supported; write the number in decimal", i, text)
    j = i
    while j < n and text[j] in _DIGITS:
        j += 1
    if j < n and text[j] == "." and not text.startswith("...", j):
        j += 1
        while j < n and text[j] in _DIGITS:
            j += 1
    if j < n and text[j] in "eE":
        k = j + 1
        if k < n and text[k] in "+-":
            k += 1
        if k < n and text[k] in _DIGITS:
            j = k
            while j < n and text[j] in _DIGITS:
                j += 1
    if j < n and text[j] == "j":
        j += 1
    if j < n and _ident_char(text[j]):
        raise SchemaError(f"malformed number '{text[i:j + 1]}'", i, text)
    return j


def _string(text: str, i: int) -> tuple[Token, int]:
    """The string literal at `i`, in single, double or tripled quotes (torch's lexer and its
    parseStringLiteral), and the index past it."""
    n, quote = len(text), text[i] * (3 if text.startswith(text[i] * 3, i) else 1)
    j, chars = i + len(quote), []
    while not text.startswith(quote, j):
        if j >= n:
            raise SchemaError("unterminated string literal", i, text)
        ch = text[j]
        if ch == "\n" and len(quote) == 1:
            raise SchemaError("a line break inside a string literal (write it as \\n)", j, text)
        if ch != "\\":
            chars.append(ch)
            j += 1
            continue
        esc, octal = text[j + 1:j + 2], text[j + 1:j + 4]
        if esc in _ESCAPES:
            chars.append(_ESCAPES[esc])
            j += 2
        elif len(octal) == 3 and all(d in "01234567" for d in octal) and int(octal, 8) < 256:
            if int(octal, 8) > 0o177:
                # torch keeps the byte, which leaves the string invalid UTF-8
                raise SchemaError(f"the octal escape \\{octal} is not an ASCII character; write the "
                                  "character itself", j, text)
            chars.append(chr(int(octal, 8)))
            j += 4
        elif not esc:
            raise SchemaError("unterminated string literal", i, text)
        else:
            raise SchemaError(f"unsupported escape sequence \\{esc} in a string literal; the escapes are "
                              "\\\\ \\' \\\" \\a \\b \\f \\n \\t \\v and three octal digits (\\101)", j, text)
    return Token("string", "".join(chars), i), j + len(quote)


def _describe(tok: Token) -> str:
    if tok.kind == "newline":
        return "a line break (outside parentheses a line break ends the schema)"
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

    def error(self, message: str, tok: Token | None = None) -> NoReturn:
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
            digits = tok.text[: len(tok.text) - len(tok.text.lstrip(_DIGITS))]
            if not digits:
                self.error(f"list size must be a non-negative integer, not '{tok.text}'", tok)
            size = int(digits)  # torch reads it with std::stoll, which stops at the first non-digit
            if size > _INT32_MAX:
                # torch keeps the size in an int32_t: 4294967298 would be 2
                self.error(f"list size {size} is too large (at most {_INT32_MAX})", tok)
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
            self.comma_list(")", lambda: elems.append(_fake(self.parse_type()[0])))
            t: Type = TupleType(tuple(elems))
        elif tok.kind == "ident" and tok.text == "Union" and self.peek().kind == "(":
            # torch merges and sorts a union's members by its own type order (`Union(str, int)`
            # is Union(int, str), `Union(int, None)` is int?, `Union(int, Scalar)` is
            # Union(float, complex, int)), which this model does not reproduce.
            self.error("Union types are not supported in opwrap schemas", tok)
        elif tok.kind == "ident" and tok.text in _GENERIC_TYPES and self.peek().kind == "(":
            self.next()
            self.next()
            params: list[Type] = []
            # torch builds containers of the parameters' "fake" types: SymInt, ScalarType,
            # Layout and MemoryFormat are int in them (`Dict(str, SymInt)` is Dict(str, int)).
            self.comma_list(")", lambda: params.append(_fake(self.parse_type()[0])))
            arity = _GENERIC_TYPES[tok.text]
            if len(params) != arity:
                self.error(f"{tok.text} takes {arity} type parameter(s), got {len(params)}", tok)
            t = GenericType(tok.text, tuple(params))
            if tok.text == "Dict":
                if params[0] not in _DICT_KEYS:
                    self.error(f"cannot create a Dict with key type '{params[0]}'; keys may be "
                               "int, float, complex, bool, str, Tensor, Device or Any", tok)
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
        elif tok.kind == "ident" and tok.text == "Tensor":
            self.next()
            t = BaseType("Tensor")
            alias = self.parse_alias()
        elif tok.kind == "ident" or (tok.kind == "const" and tok.text in ("None", "NoneType")):
            self.next()
            # torch reads a dotted name after any base type but Tensor (`t.x`, even `int.x`);
            # one that is not a known type and starts lower-case is a type variable.
            name = tok.text
            while self.cur.kind == "." and self.peek().kind == "ident":
                self.next()
                name += "." + self.next().text
            if name in _BASE_TYPES:
                t = BaseType(_BASE_TYPES[name])
            elif name[0].islower():
                t = BaseType(name)  # a type variable, as in `t[] self`
            else:
                self.error(f"unknown type '{name}'; common types are Tensor, SymInt, int, float, "
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
            elif self.cur.kind == "?":
                q = self.next()
                if t == BaseType("NoneType"):
                    self.error("'NoneType?' is not a type: None is already the only value of NoneType", q)
                if t == OptionalType(BaseType("Scalar")):
                    # torch turns an optional Scalar? into the union Union(float, complex, int)?
                    self.error("'Scalar??' is not supported; write 'Scalar?'", q)
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
        """`a|b|*`: a set of alias sets, each once, in the order written.  `*` (every set)
        may follow names but no name may follow it: torch then stops reading names, so it
        rejects `*|a`; what it still reads after `*|` (another `*`, or nothing, as in `(*|)`)
        is read here too."""
        sets: list[str] = []
        while True:
            if self.accept("*"):
                if "*" not in sets:
                    sets.append("*")
            elif "*" in sets:
                if self.cur.kind == "ident":
                    self.error(f"nothing may follow '*' in an alias set: '*' already includes '{self.cur.text}'")
            else:
                tok = self.expect("ident", "an alias set name or '*'")
                if tok.text not in sets:
                    sets.append(tok.text)
            if not self.accept("|"):
                return tuple(sets)

    # defaults (torch's parseDefaultValue / parseSingleConstant / convertToList).  torch reads a
    # default against the argument's "fake" type, where SymInt, ScalarType, Layout and
    # MemoryFormat are int; only dtype names (`ScalarType dtype=float32`) look at the real one.
    def parse_default(self, t: Type) -> Default:
        tok = self.cur
        fake = _fake(t)
        if isinstance(fake, ListType) and isinstance(t, ListType):
            elem = fake.elem
            if not isinstance(elem, BaseType) or elem.name not in _LIST_DEFAULT_ELEMS:
                self.error(f"a {t.elem}[] cannot have a default value; list defaults are only supported for "
                           "lists of int, SymInt, float, complex and bool (or ScalarType, Layout, MemoryFormat)", tok)
            if self.cur.kind == "ident":
                self.error(f"invalid default value {_describe(self.cur)} for a list")
            if t.size is not None and self.cur.kind != "[":
                # `int[2] stride=1`: one value for every element
                return Default(tuple([self.list_element(elem, t.elem)] * t.size), "list")
            self.expect("[", "'[' to open a list default")
            items: list[object] = []
            self.comma_list("]", lambda: items.append(self.list_element(elem, t.elem)))
            return Default(tuple(items), "list")
        if isinstance(fake, BaseType) and fake.name in ("Tensor", "Generator", "Quantizer"):
            return self.none_default()
        if isinstance(fake, BaseType) and fake.name == "Device":
            s = self.expect("string", "a device string")
            self.check_device(s)
            return Default(s.text, "device")
        if isinstance(fake, OptionalType) or (isinstance(fake, BaseType) and fake.name in (
                "str", "Scalar", "int", "bool", "float", "complex")):
            return self.single_constant(fake, t)
        self.error(f"type '{t}' cannot have a default value", tok)

    def list_element(self, elem: BaseType, real_elem: Type) -> object:
        """One element of a list default; torch's convertToList takes only values of the
        element's own kind (an int[] takes no True, a float[] no long, a bool[] no 1)."""
        tok = self.cur
        d = self.single_constant(elem, real_elem)
        kinds = {"int": ("int", "enum"), "float": ("float",), "bool": ("bool",), "complex": ("complex",)}[elem.name]
        if d.kind not in kinds:
            what = {"int": "an integer", "float": "a number", "bool": "True or False",
                    "complex": "an imaginary number like 1.5j"}[elem.name]
            written = self.text[tok.offset:self.cur.offset].strip() if self.cur.offset > tok.offset else tok.text
            self.error(f"an element of a {real_elem}[] default must be {what}, not {written}", tok)
        return d.value

    def check_device(self, tok: Token) -> None:
        """c10::Device's string form: a device type, then an optional index (`cuda:0`)."""
        m = re.fullmatch(r"([a-zA-Z_]+)(?::([1-9][0-9]*|0))?", tok.text)
        if m is None:
            self.error(f"invalid device string {quote_string(tok.text)}: expected a device type and an optional "
                       "index, like \"cpu\" or \"cuda:0\"", tok)
        elif m.group(1) not in _DEVICE_TYPES:
            self.error(f"unknown device type '{m.group(1)}' in {quote_string(tok.text)}; device types are "
                       + ", ".join(_DEVICE_TYPES), tok)
        elif m.group(2) and int(m.group(2)) > 127:
            # c10::DeviceIndex is an int8_t: torch would make cuda:200 into cuda:-56
            self.error(f"device index {m.group(2)} is too large (at most 127)", tok)

    def none_default(self) -> Default:
        tok = self.cur
        if tok.text != "None":
            self.error(f"expected None but found {_describe(tok)}")
        self.next()
        return Default(None, "none")

    def single_constant(self, fake: Type, real: Type) -> Default:
        """torch's parseSingleConstant: `fake` decides how a number reads, `real` whether a
        dtype name may stand for its ScalarType code."""
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
            if unwrap_optional(real) == BaseType("ScalarType") and tok.text in _DTYPE_CODES:
                return Default(_DTYPE_CODES[tok.text], "enum", tok.text)
            self.error(f"invalid default value '{tok.text}'", tok)
        if tok.kind == "string":
            self.next()
            return Default(tok.text, "str")
        negative = bool(self.accept("-"))
        num = self.expect("number", "a default value")
        text = ("-" if negative else "") + num.text
        # torch decides on the declared type itself, not the optional's element: `float? x=1` is an int.
        kind = fake.name if isinstance(fake, BaseType) else ""
        if kind == "complex" or text.endswith("j"):
            if not text.endswith("j"):
                # torch drops the last character, as it would the `j`: 1.5 would be 1j
                self.error(f"a complex default is an imaginary number like {text}j, not {text}", num)
            return Default(complex(0, self.double(text[:-1], num)), "complex")
        if kind == "float" or "." in text or "e" in text:
            return Default(self.double(text, num), "float")
        if "E" in text:
            # torch tests for a lower-case 'e' only and reads the rest with std::stoll, which stops at the 'E'
            self.error(f"write the exponent of {text} with a lower-case 'e': torch reads {text} as the integer "
                       f"{int(text[:text.index('E')])} here", num)
        v = int(text)
        if not -(2**63) <= v < 2**63:
            self.error(f"default value {text} does not fit in int64", num)
        return Default(v, "int")

    def double(self, text: str, num: Token) -> float:
        """std::stod: a finite double, refusing what overflows or underflows (ERANGE)."""
        v = float(text)
        mantissa = text.lower().split("e")[0]
        if math.isinf(v):
            self.error(f"default value {text} is out of range", num)
        if abs(v) < sys.float_info.min and any(d in mantissa for d in "123456789"):
            self.error(f"default value {text} is too small: torch reads no value below "
                       f"{sys.float_info.min!r} other than 0", num)
        return v


def _fake(t: Type) -> Type:
    """torch's "fake" type of a schema type: SymInt, ScalarType, Layout and MemoryFormat are int."""
    if isinstance(t, BaseType) and t.name in ("SymInt", "ScalarType", "Layout", "MemoryFormat"):
        return BaseType("int")
    if isinstance(t, ListType):
        return ListType(_fake(t.elem), t.size)
    if isinstance(t, OptionalType):
        return OptionalType(_fake(t.elem))
    return t


_INT32_MAX = 2**31 - 1
_LIST_DEFAULT_ELEMS = ("int", "float", "bool", "complex")  # of the fake element type
# c10::Device's device types (c10/core/Device.cpp); privateuseone is the default name of a
# backend that torch.utils.rename_privateuse1_backend can rename.
_DEVICE_TYPES = ("cpu", "cuda", "ipu", "xpu", "mkldnn", "opengl", "opencl", "ideep", "hip", "ve", "fpga", "maia",
                 "xla", "lazy", "vulkan", "mps", "meta", "hpu", "mtia", "privateuseone")
