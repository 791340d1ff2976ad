"""Pointwise expressions: ``pointwise: <expression>`` in a declaration.

The expression is written in Python's expression syntax and parsed with Python's own
parser (``ast``), which gives operator precedence, positions and error messages for free.
It may be preceded by ``name = expression`` lines that bind intermediate values::

    pointwise: |
      inner = 0.7978845608 * (self + 0.044715 * self * self * self)
      0.5 * self * (1 + tanh(inner))

An op with several returns ends with one value per return, in order (``sin(self), cos(self)``):
every output is computed in the same pass over memory.

Names are the op's Tensor arguments (one element each), its numeric scalar arguments and
earlier bindings.  The translation is one C++ expression text over a value type ``Tv``
that is a scalar (``float``, ``double``, ``int64_t``...) or an ``at::vec::Vectorized`` of
one, so the same text is the scalar CPU loop, the vectorized CPU loop and the CUDA loop:
literals and scalar arguments become ``Tv(...)`` and functions are ``opwrap::pw::``
overloads (``runtime/include/opwrap/runtime/pointwise.h``) for both kinds of value.

A name is any name the schema allows (``default``, ``new``, ``Tv``, ``opwrap_out``): the
translation names each argument and binding by a C++ identifier of its own (``idents``:
``default_``), decided once here with codegen/core/names.py, away from C++'s keywords and
the functor's own names (``FUNCTOR_NAMES``); the expression keeps the schema's names.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from . import pysyntax
from ..core.diagnostics import Diagnostics, Loc, did_you_mean
from ..core.names import Scope
from .schema import BaseType, FunctionSchema, is_tensor

VALUE_TYPE = "Tv"  # the C++ value type the expression is written over
# What the functor's template (templates/pointwise/op.h.j2) declares around the expression:
# its type parameters.  Its locals (sincos pairs) are fresh names of the same scope.
FUNCTOR_NAMES = (VALUE_TYPE, "opmath_t")


@dataclass(frozen=True)
class Function:
    arity: int
    floating: bool  # defined for floating-point values only
    doc: str


FUNCTIONS: dict[str, Function] = {
    "abs": Function(1, False, "|x|"),
    "exp": Function(1, True, "e^x"),
    "fast_exp": Function(1, True, "e^x within 20 ulp in vectorized CPU loops (at::vec's exp_u20, as aten's "
                         "softmax uses), by the GPU's special function unit for float32 on CUDA (__expf: "
                         "within 2 + 1.2|x| ulp), e^x elsewhere"),
    "expm1": Function(1, True, "e^x - 1"),
    "log": Function(1, True, "natural logarithm"),
    "log1p": Function(1, True, "log(1 + x)"),
    "log2": Function(1, True, "base-2 logarithm"),
    "log10": Function(1, True, "base-10 logarithm"),
    "sqrt": Function(1, True, "square root"),
    "rsqrt": Function(1, True, "1 / sqrt(x)"),
    "reciprocal": Function(1, True, "1 / x"),
    "sin": Function(1, True, "sine"),
    "cos": Function(1, True, "cosine"),
    "tan": Function(1, True, "tangent"),
    "tanh": Function(1, True, "hyperbolic tangent"),
    "sigmoid": Function(1, True, "1 / (1 + e^-x)"),
    "erf": Function(1, True, "error function"),
    "erfc": Function(1, True, "1 - erf(x)"),
    "floor": Function(1, True, "round down"),
    "ceil": Function(1, True, "round up"),
    "trunc": Function(1, True, "round toward zero"),
    "relu": Function(1, False, "maximum(x, 0)"),
    "pow": Function(2, True, "x^y (also written x ** y)"),
    "maximum": Function(2, False, "the larger value; NaN if either is NaN"),
    "minimum": Function(2, False, "the smaller value; NaN if either is NaN"),
    "clamp": Function(3, False, "minimum(maximum(x, lo), hi)"),
    "where": Function(3, False, "where(condition, a, b): a where the comparison holds, else b"),
}
ALIASES = {"max": "maximum", "min": "minimum"}

_BINOPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/"}
_COMPARE = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!="}
# Scalar argument types a pointwise op may take, and how each becomes the computation type.
SCALAR_TYPES = {"float": "static_cast<opmath_t>({name})", "int": "static_cast<opmath_t>({name})",
                "SymInt": "static_cast<opmath_t>({name}.guard_int(__FILE__, __LINE__))",
                "bool": "static_cast<opmath_t>({name})", "Scalar": "{name}.to<opmath_t>()"}


@dataclass(frozen=True)
class Expression:
    """A checked pointwise expression and its C++ translation."""

    source: str
    bindings: tuple[tuple[str, str, str], ...]  # (name, C++ type, C++ expression), in order
    results: tuple[str, ...]  # C++ expression of each result, in the order of the schema's returns
    tensors: tuple[str, ...]  # the Tensor arguments, in schema order (the iterator's inputs)
    scalars: tuple[tuple[str, str], ...]  # (argument, C++ conversion of `{name}` to opmath_t), in schema order
    floating: bool  # uses a floating-point-only function or '/'
    loc: Loc
    # The C++ identifier of each argument and binding in the functor (its operator()'s
    # parameters, its members, its locals): the schema's name, or `default_` for `default`.
    idents: tuple[tuple[str, str], ...] = ()

    def ident(self, name: str) -> str:
        """The C++ identifier of argument or binding `name` in the functor."""
        return dict(self.idents)[name]


class ExpressionError(Exception):
    """A problem at `node` of an expression (the row-wise language raises it too)."""

    def __init__(self, node: ast.AST | None, message: str, hint: str = ""):
        super().__init__(message)
        self.node, self.message, self.hint = node, message, hint


def parse(text: str, schema: FunctionSchema, loc_at, diag: Diagnostics) -> Expression | None:
    """Parse and check `text`.  `loc_at(line, col)` maps a 1-based line and 0-based column
    of the text to a declaration position.  Reports errors to `diag`; None when any."""
    try:
        module = pysyntax.parse(text, mode="exec", names=[a.name for a in schema.arguments])
    except SyntaxError as e:
        diag.error(loc_at(e.lineno or 1, (e.offset or 1) - 1), f"invalid pointwise expression: {e.msg}")
        return None
    tensors = [a for a in schema.arguments if is_tensor(a.type)]
    scalars = [a for a in schema.arguments if isinstance(a.type, BaseType) and a.type.name in SCALAR_TYPES]
    ok = True
    for a in schema.arguments:
        if a not in tensors and a not in scalars:
            diag.error(loc_at(1, 0), f"argument '{a.name}' of type {a.type} cannot be used by a pointwise op; "
                       f"Tensor and {', '.join(sorted(SCALAR_TYPES))} arguments can")
            ok = False
    if not ok:
        return None
    try:
        assignments, values = statements(module, len(schema.returns), "pointwise expression", "expression")
        # Twice: the first pass finds the values whose sine and cosine are both taken, the
        # second computes each pair with one sincos() (one range reduction, not two).  Each
        # names the arguments and bindings the same way, before any name of its own.
        names = [a.name for a in schema.arguments] + [target.id for target, _ in assignments]
        first = _translate(Translator({a.name for a in tensors}, {a.name for a in scalars}, scope=user_scope(names)),
                           assignments, values)
        scope = user_scope(names)
        tr = Translator({a.name for a in tensors}, {a.name for a in scalars}, first.sincos_arguments(), scope)
        bindings, results = _translate(tr, assignments, values).output
    except ExpressionError as e:
        node = e.node
        loc = loc_at(node.lineno, node.col_offset) if node is not None else loc_at(1, 0)
        diag.error(loc, e.message, e.hint)
        return None
    for a in tensors:
        if a.name not in tr.used:
            diag.error(loc_at(1, 0), f"Tensor argument '{a.name}' is not used by the pointwise expression")
            ok = False
    if not ok:
        return None
    return Expression(
        source=text, bindings=bindings, results=results, tensors=tuple(a.name for a in tensors),
        scalars=tuple((a.name, SCALAR_TYPES[a.type.name]) for a in scalars if a.name in tr.used),
        floating=tr.floating, loc=loc_at(1, 0), idents=tuple(scope.names.items()))


def check_declaration(decl, lib, diag: Diagnostics) -> None:
    """What a pointwise declaration must be in every target (the plugins of both call it): its
    dtypes (declared, real, floating where the expression needs it) and an out= overload's shape."""
    e = decl.expression
    if e is None:
        return
    if e.floating:
        ints = [dt.name for dt in decl.dtypes if not dt.is_floating]
        if ints:
            diag.error(e.loc, f"the expression uses '/' or a floating-point function, but the op declares integer "
                       f"dtypes ({', '.join(ints)})", "declare floating dtypes only; integer inputs then promote "
                       "to float as in torch.div")
    if not decl.dtypes and not decl.failed("dtypes"):
        diag.error(decl.loc, "missing 'dtypes': list the dtypes the expression is computed for")
    odd = [dt for dt in decl.dtypes if not dt.pointwise]
    if odd:
        diag.error(decl.field_loc("dtypes"), f"pointwise expressions support real floating and integer dtypes "
                   f"that aten's vectorized loops take, not {', '.join(dt.name for dt in odd)}",
                   "a kernel of your own (`kernels:`) takes any dtype" if any(
                       not dt.vectorized for dt in odd) else "")
    if decl.out_arguments:
        outs = decl.out_arguments
        ret = decl.schema.returns
        if len(outs) != 1 or len(ret) != 1 or decl.schema.aliased_argument(ret[0]) is not outs[0]:
            diag.error(decl.func_loc, "a pointwise out= overload writes one out= argument and returns it: "
                       "'name.out(..., *, Tensor(a!) out) -> Tensor(a!)'")
        elif not any(x.name == decl.name and not x.overload and x.expression is not None
                     for x in lib.declarations):
            diag.error(decl.func_loc, f"the out= overload '{decl.op_name}' runs the loops of its functional op "
                       f"'{decl.name}', which must be declared with the same pointwise expression")


def user_scope(names, reserved=FUNCTOR_NAMES) -> Scope:
    """The scope of an expression's generated code with `names` (its arguments, then its
    bindings: the schema's and the program's names) given their identifiers first, in order,
    so that every name the translation adds (`scope.fresh`) keeps clear of them."""
    scope = Scope(reserved)
    for n in names:
        scope.name(n)
    return scope


def _translate(tr: Translator, assignments: list, values: list) -> Translator:
    """Translate a program's bindings and results with `tr`; its `output` is then
    (bindings, results) as Expression holds them."""
    bindings: list[tuple[str, str, str]] = []
    for target, value in assignments:
        name = target.id
        if name in tr.names or name in FUNCTIONS:
            raise ExpressionError(target, f"'{name}' is already defined")
        cpp = tr.value(value)
        bindings += tr.take_pending() + [(tr.ident(name), VALUE_TYPE, cpp)]
        tr.names[name] = "binding"
    results = [tr.value(v) for v in values]
    tr.output = (tuple(bindings + tr.take_pending()), tuple(results))
    return tr


def statements(module: ast.Module, returns: int, what: str, noun: str) -> tuple[list, list]:
    """The lines of a program: `name = value` bindings, then one value per return (`a, b`
    for several, computed in one pass): ([(target, value)], [value])."""
    body = module.body
    if not body:
        raise ExpressionError(None, f"empty {what}")
    assignments = []
    for stmt in body[:-1]:
        if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)):
            raise ExpressionError(stmt, "each line before the last must bind one name: 'name = expression'")
        assignments.append((stmt.targets[0], stmt.value))
    last = body[-1]
    if not isinstance(last, ast.Expr):
        raise ExpressionError(last, "the last line must be the result expression")
    values = last.value.elts if isinstance(last.value, ast.Tuple) else [last.value]
    if len(values) != returns:
        raise ExpressionError(last.value, f"the {noun} computes {len(values)} value{'s' if len(values) > 1 else ''}, "
                     f"but the op returns {returns}", "the last line lists one value per return, in order: 'a, b'")
    return assignments, values


# sin() and cos() of one value share their range reduction: opwrap::pw::sincos computes both.
_SINCOS = {"sin": 0, "cos": 1}


# The C++ namespace of the language's functions (<opwrap/runtime/pointwise.h>, and
# <opwrap/stable/math.h> in the stable-ABI target).
ELEMENT_FUNCTIONS = "opwrap::pw"


class Translator:
    """An expression's AST to C++ over the op's tensors and scalars (the row-wise language
    extends it).  `scope` names every argument and binding in C++ (`user_scope`), and gives
    the translation's own locals fresh names.  Functions are called in the namespace
    `functions`: ELEMENT_FUNCTIONS, or the row-wise language's ROW_FUNCTIONS for what it
    computes once a row."""

    functions = ELEMENT_FUNCTIONS

    def __init__(self, tensors: set[str], scalars: set[str], sincos: tuple[str, ...] = (), scope: Scope | None = None):
        self.scope = scope or user_scope(sorted(tensors | scalars))
        self.names: dict[str, str] = {**{n: "tensor" for n in tensors}, **{n: "scalar" for n in scalars}}
        self.used: set[str] = set()
        self.floating = False
        # The C++ arguments of sin() and cos() calls, and those taken by both, each computed
        # once by a sincos() binding (named by its position here), made before the
        # statement that first needs it (`pending`).
        self.trig: set[tuple[str, str]] = set()
        self.sincos = {arg: self.scope.fresh(f"opwrap_sincos{i}") for i, arg in enumerate(sincos)}
        self.pending: list[tuple[str, str, str]] = []
        self.bound: set[str] = set()
        self.output: tuple[tuple[tuple[str, str, str], ...], tuple[str, ...]] = ((), ())

    def ident(self, name: str) -> str:
        """The C++ identifier of an argument or binding."""
        return self.scope.name(name)

    def sincos_arguments(self) -> tuple[str, ...]:
        """The arguments whose sine and cosine are both taken, in a fixed order."""
        return tuple(sorted({a for f, a in self.trig if ("sin" if f == "cos" else "cos", a) in self.trig}))

    def take_pending(self) -> list[tuple[str, str, str]]:
        pending, self.pending = self.pending, []
        return pending

    def value(self, node: ast.AST) -> str:
        """A C++ expression of type Tv."""
        if isinstance(node, ast.Constant):
            if isinstance(node.value, bool) or not isinstance(node.value, (int, float)):
                raise ExpressionError(node, f"only numbers may appear as literals, not {node.value!r}")
            return f"{VALUE_TYPE}({node.value!r})"
        if isinstance(node, ast.Name):
            kind = self.names.get(node.id)
            if kind is None:
                raise ExpressionError(node, f"unknown name '{node.id}' in pointwise expression",
                             did_you_mean(node.id, list(self.names)))
            self.used.add(node.id)
            return f"{VALUE_TYPE}({self.ident(node.id)})" if kind == "scalar" else self.ident(node.id)
        if isinstance(node, ast.UnaryOp):
            if isinstance(node.op, ast.USub):
                return f"{self.functions}::neg({self.value(node.operand)})"
            if isinstance(node.op, ast.UAdd):
                return self.value(node.operand)
            raise ExpressionError(node, f"operator '{_op_text(node.op)}' is not supported in pointwise expressions")
        if isinstance(node, ast.BinOp):
            if isinstance(node.op, ast.Pow):
                return self.power(node)
            op = _BINOPS.get(type(node.op))
            if op is None:
                raise ExpressionError(node, f"operator '{_op_text(node.op)}' is not supported in pointwise expressions",
                             "use + - * / ** and the functions: " + ", ".join(sorted(FUNCTIONS)))
            if op == "/":
                self.floating = True
            return f"({self.value(node.left)} {op} {self.value(node.right)})"
        if isinstance(node, ast.Call):
            return self.call(node)
        if isinstance(node, ast.Compare):
            raise ExpressionError(node, "a comparison is a condition: use it as the first argument of where(condition, a, b)")
        raise ExpressionError(node, f"{type(node).__name__.lower()} is not supported in pointwise expressions")

    def power(self, node: ast.BinOp) -> str:
        base = self.value(node.left)
        exp = node.right
        k = _small_integer(exp)
        if k is not None:
            # Small integer powers as products (as aten's pow special-cases 2, 3, -1 and -2): as
            # accurate as pow (within an ulp or two), and no call into libm, so every loop vectorizes.
            # x ** 0 is 1, NaN included, as pow.
            if k == 0:
                return f"{VALUE_TYPE}(1)"
            product = "(" + " * ".join([base] * abs(k)) + ")"
            if k > 0:
                return product
            self.floating = True
            return f"({VALUE_TYPE}(1) / {product})"
        self.floating = True
        return f"{self.functions}::pow({base}, {self.value(exp)})"

    def call(self, node: ast.Call) -> str:
        if not isinstance(node.func, ast.Name):
            raise ExpressionError(node.func, "only the built-in functions may be called: " + ", ".join(sorted(FUNCTIONS)))
        name = ALIASES.get(node.func.id, node.func.id)
        fn = FUNCTIONS.get(name)
        if fn is None:
            raise ExpressionError(node.func, f"unknown function '{node.func.id}' in pointwise expression",
                         did_you_mean(node.func.id, list(FUNCTIONS) + list(ALIASES)))
        if node.keywords or len(node.args) != fn.arity:
            raise ExpressionError(node, f"{name}() takes {fn.arity} positional argument{'s' if fn.arity > 1 else ''}")
        self.floating |= fn.floating
        if name == "where":
            cond = node.args[0]
            if not (isinstance(cond, ast.Compare) and len(cond.ops) == 1):
                raise ExpressionError(cond, "the condition of where() must be one comparison, such as 'x > 0'")
            op = _COMPARE[type(cond.ops[0])]
            test = f"({self.value(cond.left)} {op} {self.value(cond.comparators[0])})"
            return f"{self.functions}::where({test}, {self.value(node.args[1])}, {self.value(node.args[2])})"
        args = [self.value(a) for a in node.args]
        if name in _SINCOS:
            self.trig.add((name, args[0]))
            pair = self.sincos.get(args[0])
            if pair is not None:
                if pair not in self.bound:
                    self.bound.add(pair)
                    self.pending.append((pair, f"opwrap::pw::Values<{VALUE_TYPE}, 2>",
                                         f"{self.functions}::sincos({args[0]})"))
                return f"{pair}.v[{_SINCOS[name]}]"
        return f"{self.functions}::{name}(" + ", ".join(args) + ")"


def _small_integer(node: ast.AST) -> int | None:
    """The exponent's value where it is an integer constant from -4 to 8 (`3`, `2.0`, `-2`)."""
    sign = 1
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        sign, node = -1, node.operand
    if not isinstance(node, ast.Constant) or isinstance(node.value, bool) or not isinstance(node.value, (int, float)):
        return None
    value = sign * node.value
    return int(value) if value == int(value) and -4 <= value <= 8 else None


def _op_text(op: ast.AST) -> str:
    return {ast.FloorDiv: "//", ast.Mod: "%", ast.MatMult: "@", ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^",
            ast.LShift: "<<", ast.RShift: ">>", ast.Not: "not", ast.Invert: "~"}.get(type(op), type(op).__name__)
