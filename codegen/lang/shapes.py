"""The shape rule: one small expression language, rendered to C++ (output allocation and
input checks in the real kernel) and to Python (the fake kernel), so both use one rule.

A declaration's ``shape:`` maps argument and return names to shapes::

    shape:
      input:  [N, K]        # an input contract: rank 2, binds N and K
      weight: [M, K]        # rank 2, dim 1 must equal K
      bias:   [M]           # optional tensor: checked when given
      result: [N, M]        # an output: allocated with this shape

A shape is a list of dimensions or, for outputs, one expression naming a whole shape
(``size`` for an ``int[]`` argument, ``self.shape``).  A dimension is an integer, a name
(a dimension variable bound by an input, or an ``int``/``SymInt`` argument), ``*S`` (a
run of dimensions, at most one per shape), ``_`` (an input dimension of any size), or an
expression over those with ``+ - * //``, ``x.size(i)``, ``x.shape[i]``, ``x.dim()``,
``x.numel()``, ``l[i]``, ``len(l)`` and ``sum(t.size(0) for t in tensors)``.

An input dimension binds the one name in it that nothing has bound yet, when the
expression is linear in it (``2 * H``, ``H * 2 + 1``, ``heads * head_size`` with ``heads``
an int argument): the checks compute it as ``(size - b) / a`` and check that it divides
and is not negative.  Names are bound by the required tensors first (in argument order),
then by the ``Tensor[]``/``Tensor?[]`` lists (every given element has the list's contract,
runs included: ``xs: ["*S"]`` is elements of one shape of any rank; the first binds, and a
later list with the name alone in a dimension binds it where the earlier held no tensor),
then by the optional tensors (checked when given).  A name that only an optional tensor
binds may be unbound, so no output and no other expression may use it; a name that only
lists bind is required to be bound (one of them must hold a tensor: checked after the last)
where something else uses it.

An output's shape may be ``reduce(self, dim, keepdim)``: ``self``'s shape with the dimensions
the ``int``/``int?``/``int[]``/``int[]?`` argument ``dim`` names reduced, as aten's
reductions over dims do it (dims wrapped, ``None`` or ``[]`` meaning all, a dimension named
twice or out of range an error; kept as size 1 when the ``bool`` argument ``keepdim`` is
true), computed by one run-time helper in each language (``opwrap::rt::reduced_shape``,
``_runtime.reduced_shape``).

A ``Tensor[]`` return's shape is a list comprehension, one shape per element:
``"[[N // chunks, D] for i in range(chunks)]"``, ``"[[s, D] for s in split_sizes]"``,
``"[[t.size(0), D] for t in tensors]"``; ``range(?n)`` is a length only the kernel knows.

Expressions are parsed with Python's own ``ast`` (the grammar is a strict subset of
Python's), then checked here against the schema.  Every function over the parsed expression
IR goes through one walker: ``walk`` for the questions (the names and tensors an expression
reads), ``ExprVisitor`` for the rest (the C++ and Python printers, the linear solver, and
``codegen/testing.py``'s evaluator), so a new node class is added in one place and every
visitor that lacks a method for it fails when it is defined.
"""

from __future__ import annotations

import ast
import re
import typing
from dataclasses import dataclass, fields
from typing import Generic, Iterator, Mapping, TypeVar

from . import pysyntax
from ..core.diagnostics import Diagnostics, Loc
from ..core.literals import cpp_string
from .schema import BaseType, FunctionSchema, ListType, is_tensor, is_tensor_list, unwrap_optional


# ---------------------------------------------------------------------------- expression IR

@dataclass(frozen=True)
class Num:
    value: int


@dataclass(frozen=True)
class Var:
    name: str  # a dimension variable, an int/SymInt argument, or a comprehension's int variable


@dataclass(frozen=True)
class TensorSize:
    tensor: str  # a Tensor argument, or the variable of a comprehension over a tensor list
    dim: "Expr"


@dataclass(frozen=True)
class TensorRank:
    tensor: str


@dataclass(frozen=True)
class TensorNumel:
    tensor: str


@dataclass(frozen=True)
class ListItem:
    list: str
    index: "Expr"


@dataclass(frozen=True)
class ListLen:
    list: str  # an int[] argument or a tensor list


@dataclass(frozen=True)
class BinOp:
    op: str  # + - * //
    lhs: "Expr"
    rhs: "Expr"


@dataclass(frozen=True)
class Neg:
    operand: "Expr"


@dataclass(frozen=True)
class Dynamic:
    """`?name`: an output dimension known only once the kernel has run (data-dependent,
    like nonzero's).  The real kernel receives the output with 0 there and resizes it; the
    fake kernel takes a fresh symbolic size from `torch.library.get_ctx().new_dynamic_size()`.
    Outputs naming the same `?name` share the size."""

    name: str


@dataclass(frozen=True)
class Free:
    """`_`: an input dimension of any size (checked for nothing but its existence)."""


@dataclass(frozen=True)
class ListSum:
    """`sum(<body> for <var> in <list>)`: over a tensor list (its given elements; `var` is a
    tensor in `body`) or an int[] argument (`var` is an int)."""

    list: str
    var: str
    body: "Expr"
    of_tensors: bool


Expr = Num | Var | TensorSize | TensorRank | TensorNumel | ListItem | ListLen | BinOp | Neg | Dynamic | Free | ListSum


@dataclass(frozen=True)
class Dim:
    expr: Expr
    star: bool  # `*S`: a run of dimensions; expr is then a Var
    text: str
    loc: Loc


@dataclass(frozen=True)
class WholeShape:
    """An output shape given as one expression: an int[] argument or `x.shape`."""

    source: str  # argument name
    is_tensor: bool
    text: str
    loc: Loc


@dataclass(frozen=True)
class Reduction:
    """An output shape `reduce(self, dim, keepdim)`: the shape of tensor `tensor` with the
    dimensions that argument `dims` names reduced, as aten's reductions over dims
    (`sum.dim_IntList`): `dims` an `int`, `int?`, `int[]`/`int[N]` or `int[]?`/`int[N]?`
    argument, its dims wrapped (-1 the last), `None` or an empty list meaning every
    dimension, a dimension named twice or out of range an error naming the op and `dims`;
    each reduced dimension is kept as a 1 when `keepdim` (a `bool` argument, or `True` /
    `False`; `False` when left out) is true, else dropped."""

    tensor: str
    dims: str
    keepdim: str | bool
    text: str
    loc: Loc


@dataclass(frozen=True)
class ListShape:
    """A `Tensor[]` return's shapes, or an input tensor list's: `[<dims> for <var> in
    <source>]`.  `kind` is "index" (`range(length)`: `var` an int from 0), "int" (an int[]
    argument: `var` its items) or "tensor" (a Tensor[] argument: `var` its tensors);
    `length` is the number of elements, a `Dynamic` when only the kernel knows it
    (`range(?n)`, a return's only).  An input list's rule is a contract: it holds `length`
    tensors, element i of the shape the comprehension gives with `var` the source's i-th
    item (`like`: `[p.shape for p in params]`, the shape of the source's i-th tensor); its
    dimensions bind nothing (`_` any size), so every name in them is bound before."""

    var: str
    kind: str
    source: str  # the list argument; "" for range()
    length: Expr
    dims: tuple[Dim, ...]
    text: str
    like: bool = False  # an input list's `[p.shape for p in params]`: each element the source element's shape
    length_text: str = ""  # the length as the rule says it: `len(params)`, `n`

    @property
    def dynamic(self) -> bool:
        return isinstance(self.length, Dynamic)


@dataclass(frozen=True)
class Shape:
    target: str  # argument or return name
    dims: tuple[Dim, ...] | None
    whole: WholeShape | None
    loc: Loc
    each: ListShape | None = None  # a Tensor[] return: one shape per element
    reduce: Reduction | None = None  # `reduce(self, dim, keepdim)`: an output's shape

    @property
    def text(self) -> str:
        if self.whole is not None:
            return self.whole.text
        if self.reduce is not None:
            return self.reduce.text
        if self.each is not None:
            return self.each.text
        return "[" + ", ".join(d.text for d in self.dims) + "]"


# ------------------------------------------------------------------------ walking the IR

NODES: tuple[type, ...] = typing.get_args(Expr)  # the node classes, in the order of `Expr`


def children(e: Expr) -> tuple[Expr, ...]:
    """The sub-expressions of `e`, left to right: its fields that hold nodes."""
    return tuple(v for f in fields(e) if isinstance(v := getattr(e, f.name), NODES))


def walk(e: Expr, bound: frozenset[str] = frozenset()) -> Iterator[tuple[Expr, frozenset[str]]]:
    """Every node of `e`, each before its sub-expressions and those left to right, with the
    names bound around it by the sums that hold it (a sum's variable is local to its body)."""
    yield e, bound
    inner = bound | {e.var} if isinstance(e, ListSum) else bound
    for c in children(e):
        yield from walk(c, inner)


def names_in(e: Expr) -> Iterator[str]:
    """The names an expression reads, in order and with repeats: dimension variables and int
    arguments (not the variables of its own sums)."""
    return (n.name for n, bound in walk(e) if isinstance(n, Var) and n.name not in bound)


def tensors_in(e: Expr) -> Iterator[str]:
    """The tensors whose sizes an expression reads (not its sums' variables)."""
    return (n.tensor for n, bound in walk(e)
            if isinstance(n, (TensorSize, TensorRank, TensorNumel)) and n.tensor not in bound)


def loop_variables(e: Expr) -> Iterator[str]:
    """The variables of the sums in `e`."""
    return (n.var for n, _ in walk(e) if isinstance(n, ListSum))


R = TypeVar("R")


class ExprVisitor(Generic[R]):
    """A function over the expression IR, one method per node class, as `ast.NodeVisitor`:
    `visit(e)` calls `visit_<class name>(e)`, which visits the sub-expressions it needs (a
    printer or an evaluator changes its names or values at a sum's body).  A subclass has a
    method for every class of `NODES`, checked when it is defined, so a new node class names
    every visitor that must learn it; `partial=True` leaves the rest to `generic_visit`."""

    def __init_subclass__(cls, partial: bool = False, **kwargs):
        super().__init_subclass__(**kwargs)
        missing = [n.__name__ for n in NODES if not hasattr(cls, f"visit_{n.__name__}")]
        if missing and not partial:
            raise TypeError(f"{cls.__name__} has no method for {', '.join(missing)}: define visit_{missing[0]}, "
                            "or declare the class partial=True and handle the rest in generic_visit")

    def visit(self, e: Expr) -> R:
        method = getattr(self, f"visit_{type(e).__name__}", None)
        return method(e) if method is not None else self.generic_visit(e)

    def generic_visit(self, e: Expr) -> R:
        raise TypeError(f"{type(self).__name__} has no method for {type(e).__name__}")


# ------------------------------------------------------------------------------- parsing

_INT = (BaseType("int"), BaseType("SymInt"))


def _is_int_list(t) -> bool:
    return isinstance(t, ListType) and t.elem in _INT


class _ExprParser:
    def __init__(self, schema: FunctionSchema, diag: Diagnostics, loc: Loc, text: str,
                 dynamic_cols: frozenset[int] = frozenset()):
        self.schema, self.diag, self.loc, self.text = schema, diag, loc, text
        self.locals: dict[str, str] = {}  # comprehension variables: name -> "tensor" | "int"
        self.dynamic_cols = dynamic_cols  # columns of `?name` in a comprehension (parsed as `_name`)

    def fail(self, node: ast.AST | None, message: str) -> None:
        col = getattr(node, "col_offset", 0) if node is not None else 0
        raise _ShapeError(self.loc.shifted(col), message)

    def tensor_arg(self, node: ast.AST) -> str:
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
            a = self.schema.argument(node.value.id)
            if a is not None and is_tensor_list(unwrap_optional(a.type)):
                self.fail(node, f"'{ast.unparse(node)}': the elements of a tensor list are named through its shape, "
                          f"which every element has: {node.value.id}: [\"*S\"] (a run: any rank) or [N, D], "
                          "then [\"*S\"] or N is an element's shape or size")
        if not isinstance(node, ast.Name):
            self.fail(node, "expected an argument name")
        if self.locals.get(node.id) == "tensor":
            return node.id
        a = self.schema.argument(node.id)
        if a is not None and is_tensor_list(unwrap_optional(a.type)):
            self.fail(node, f"'{node.id}' is a list of tensors; use len({node.id}) or "
                      f"sum(t.size(0) for t in {node.id})")
        if a is None or not is_tensor(unwrap_optional(a.type)):
            self.fail(node, f"'{node.id}' is not a Tensor argument of {self.schema.name}")
        return node.id

    def int_list_arg(self, node: ast.AST, tensors: bool = False) -> str:
        if isinstance(node, ast.Name):
            a = self.schema.argument(node.id)
            if a is not None and (_is_int_list(a.type) or (tensors and is_tensor_list(unwrap_optional(a.type)))):
                return node.id
        self.fail(node, f"'{ast.unparse(node)}' is not an int[] argument" + (" or a tensor list" if tensors else ""))

    def expr(self, node: ast.AST) -> Expr:
        if isinstance(node, ast.Constant) and type(node.value) is int:
            return Num(node.value)
        if isinstance(node, ast.Name):
            if node.col_offset in self.dynamic_cols:
                return Dynamic(node.id[1:])
            if self.locals.get(node.id) == "int":
                return Var(node.id)
            if self.locals.get(node.id) == "tensor":
                self.fail(node, f"'{node.id}' is a tensor; use {node.id}.size(i) or {node.id}.dim()")
            a = self.schema.argument(node.id)
            if a is not None and unwrap_optional(a.type) not in _INT:
                self.fail(node, f"argument '{node.id}' is a {a.type}, not an int; use {node.id}.size(i) "
                          f"or {node.id}.dim()" if is_tensor(unwrap_optional(a.type)) else
                          f"argument '{node.id}' has type {a.type}, which is not a dimension")
            if node.id == "_":
                self.fail(node, "'_' (a dimension of any size) stands alone as an input dimension, not in an "
                          "expression")
            if not node.id.isidentifier() or node.id.startswith("_"):
                self.fail(node, f"'{node.id}' is not a valid dimension name")
            return Var(node.id)
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            return BinOp(_BINOPS[type(node.op)], self.expr(node.left), self.expr(node.right))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return Neg(self.expr(node.operand))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and not node.keywords:
            method, obj = node.func.attr, node.func.value
            if method == "size" and len(node.args) == 1:
                return TensorSize(self.tensor_arg(obj), self.expr(node.args[0]))
            if method == "dim" and not node.args:
                return TensorRank(self.tensor_arg(obj))
            if method == "numel" and not node.args:
                return TensorNumel(self.tensor_arg(obj))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "len" \
                and len(node.args) == 1 and not node.keywords:
            return ListLen(self.int_list_arg(node.args[0], tensors=True))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "sum" \
                and len(node.args) == 1 and not node.keywords and isinstance(node.args[0], ast.GeneratorExp):
            return self.list_sum(node.args[0])
        if isinstance(node, ast.Subscript):
            target = node.value
            if isinstance(target, ast.Attribute) and target.attr == "shape":
                return TensorSize(self.tensor_arg(target.value), self.expr(node.slice))
            return ListItem(self.int_list_arg(target), self.expr(node.slice))
        self.fail(node, f"unsupported shape expression '{ast.unparse(node)}'; use integers, names, "
                  "+ - * //, x.size(i), x.shape[i], x.dim(), x.numel(), l[i], len(l), "
                  "sum(t.size(0) for t in tensors)")

    def comprehension(self, gen: ast.comprehension, node: ast.AST) -> tuple[str, str, str, Expr]:
        """`for <var> in <iter>` of a sum or a Tensor[] return's shapes: (var, kind, source, length)."""
        if gen.ifs or gen.is_async or not isinstance(gen.target, ast.Name):
            self.fail(gen.target, "expected 'for <name> in <list>' with no 'if'")
        var = gen.target.id
        if self.schema.argument(var) is not None or var in self.locals:
            self.fail(gen.target, f"the loop variable '{var}' must not be the name of an argument")
        it = gen.iter
        if isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "range" \
                and len(it.args) == 1 and not it.keywords:
            return var, "index", "", self.expr(it.args[0])
        if isinstance(it, ast.Name):
            a = self.schema.argument(it.id)
            if a is not None and _is_int_list(a.type):
                return var, "int", it.id, ListLen(it.id)
            if a is not None and is_tensor_list(unwrap_optional(a.type)):
                return var, "tensor", it.id, ListLen(it.id)
        self.fail(it, f"'{ast.unparse(it)}' is not range(n), an int[] argument or a tensor list")

    def list_sum(self, g: ast.GeneratorExp) -> Expr:
        if len(g.generators) != 1:
            self.fail(g, "a sum has one 'for'")
        var, kind, source, _ = self.comprehension(g.generators[0], g)
        if kind == "index":
            self.fail(g.generators[0].iter, "a sum runs over a list argument: sum(t.size(0) for t in tensors)")
        self.locals[var] = kind
        try:
            return ListSum(source, var, self.expr(g.elt), kind == "tensor")
        finally:
            del self.locals[var]

    def parse(self, text: str) -> ast.AST:
        try:
            names = [a.name for a in self.schema.arguments] + list(self.schema.return_names())
            return pysyntax.parse(text.strip(), mode="eval", names=names).body
        except SyntaxError as e:
            raise _ShapeError(self.loc.shifted(max((e.offset or 1) - 1, 0)), f"malformed shape expression: {e.msg}")


_BINOPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.FloorDiv: "//"}
_DYNAMIC = re.compile(r"\?(?=[A-Za-z_])")


class _ShapeError(Exception):
    def __init__(self, loc: Loc, message: str):
        self.loc, self.message = loc, message


def _list_return(schema: FunctionSchema, target: str) -> bool:
    names = schema.return_names()
    return target in names and is_tensor_list(schema.returns[names.index(target)].type)


def parse_shape(schema: FunctionSchema, target: str, value: object, loc: Loc, item_locs: list[Loc],
                is_output: bool, diag: Diagnostics) -> Shape | None:
    """Parse one `shape:` entry.  ``value`` is a list of str/int items or one str."""
    try:
        a = schema.argument(target)
        in_list = a is not None and is_tensor_list(unwrap_optional(a.type))
        if is_output and _list_return(schema, target):
            if not isinstance(value, str):
                raise _ShapeError(loc, f"'{target}' is a Tensor[] return: its shape is a list comprehension with "
                                  "one shape per element, as in \"[[N // chunks, D] for i in range(chunks)]\"")
            return Shape(target, None, None, loc, _parse_list_shape(schema, value, loc, diag))
        if isinstance(value, str):
            p = _ExprParser(schema, diag, loc, value)
            node = p.parse(_DYNAMIC.sub("_", value)) if in_list and not is_output else p.parse(value)
            if isinstance(node, ast.ListComp) and in_list and not is_output:
                return Shape(target, None, None, loc, _parse_list_shape(schema, value, loc, diag, input_list=target))
            if isinstance(node, ast.ListComp):
                raise _ShapeError(loc, "a list comprehension is the shape of a Tensor[] return or a tensor list "
                                  f"argument; '{target}' is neither")
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "reduce":
                if not is_output:
                    raise _ShapeError(loc, f"reduce(...) is the shape of an output; '{target}' is an input")
                return Shape(target, None, None, loc, reduce=_parse_reduction(p, node, value, loc))
            if in_list:
                raise _ShapeError(loc, f"'{target}' is a tensor list: its shape is a list of dimensions that every "
                                  "element has, as in [_, D], or one shape per element, as in "
                                  "\"[p.shape for p in params]\"")
            if isinstance(node, ast.Attribute) and node.attr == "shape":
                return Shape(target, None, WholeShape(p.tensor_arg(node.value), True, value, loc), loc)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "sizes" \
                    and not node.args:
                return Shape(target, None, WholeShape(p.tensor_arg(node.func.value), True, value, loc), loc)
            return Shape(target, None, WholeShape(p.int_list_arg(node), False, value, loc), loc)
        if not isinstance(value, list):
            raise _ShapeError(loc, "a shape must be a list of dimensions like [N, K] or an expression like 'size'")
        dims = [_parse_dim(schema, item, iloc, is_output, diag) for item, iloc in zip(value, item_locs)]
        stars = [d for d in dims if d.star]
        if len(stars) > 1:
            raise _ShapeError(stars[1].loc, "a shape may have at most one '*' run of dimensions")
        return Shape(target, tuple(dims), None, loc)
    except _ShapeError as e:
        diag.error(e.loc, e.message)
        return None


_DIM_TYPES = "an int, int?, int[] or int[]? argument"


def _parse_reduction(p: _ExprParser, node: ast.Call, text: str, loc: Loc) -> Reduction:
    """`reduce(<tensor>, <dims argument>[, <keepdim>])`; `keepdim` may also be given by name."""
    args = list(node.args)
    for k in node.keywords:
        if k.arg != "keepdim" or len(args) != 2:
            p.fail(k.value if k.arg else node, "reduce(...) takes a tensor, the dims argument and keepdim, as in "
                   "reduce(self, dim, keepdim)")
        args.append(k.value)
    if len(args) not in (2, 3):
        p.fail(node, f"reduce(...) takes a tensor, the dims argument and keepdim (reduce(self, dim, keepdim)), "
               f"not {len(args)} argument{'s' if len(args) != 1 else ''}")
    tensor = p.tensor_arg(args[0])
    a = p.schema.argument(args[1].id) if isinstance(args[1], ast.Name) else None
    t = unwrap_optional(a.type) if a is not None else None
    if t is None or not (t == BaseType("int") or (isinstance(t, ListType) and t.elem == BaseType("int"))):
        p.fail(args[1], f"'{ast.unparse(args[1])}' is not {_DIM_TYPES} of {p.schema.name} (the dimensions "
               f"reduce(...) reduces)")
    keepdim: str | bool = False
    if len(args) == 3:
        k = args[2]
        if isinstance(k, ast.Constant) and isinstance(k.value, bool):
            keepdim = k.value
        else:
            b = p.schema.argument(k.id) if isinstance(k, ast.Name) else None
            if b is None or b.type != BaseType("bool"):
                p.fail(k, f"'{ast.unparse(k)}' is neither a bool argument of {p.schema.name} nor True or False "
                       "(whether reduced dimensions are kept, as size 1)")
            keepdim = k.id
    return Reduction(tensor, a.name, keepdim, text.strip(), loc)


def _parse_dim(schema: FunctionSchema, item: object, iloc: Loc, is_output: bool, diag: Diagnostics,
               parser: _ExprParser | None = None) -> Dim:
    if isinstance(item, bool) or not isinstance(item, (int, str)):
        raise _ShapeError(iloc, f"a dimension must be an integer or an expression, not {item!r}")
    text = str(item)
    p = parser or _ExprParser(schema, diag, iloc, text)
    stripped = text.strip()
    if stripped.startswith("?"):
        name = stripped[1:].strip()
        if not name.isidentifier():
            raise _ShapeError(iloc, "'?' must be followed by a name, as in ?nnz")
        if not is_output:
            raise _ShapeError(iloc, f"'?{name}' (a data-dependent size) is for outputs; an input's dimensions are known")
        return Dim(Dynamic(name), False, f"?{name}", iloc)
    if stripped.startswith("*"):
        name = stripped[1:].strip()
        if not name.isidentifier():
            raise _ShapeError(iloc, "'*' must be followed by a dimension-run name, as in *batch")
        return Dim(Var(name), True, f"*{name}", iloc)
    if stripped == "_":
        if is_output:
            raise _ShapeError(iloc, "'_' (a dimension of any size) is for inputs; an output's sizes must be known")
        return Dim(Free(), False, "_", iloc)
    return Dim(p.expr(p.parse(text)), False, stripped, iloc)


def _parse_list_shape(schema: FunctionSchema, value: str, loc: Loc, diag: Diagnostics,
                      input_list: str | None = None) -> ListShape:
    """`[[<dims>] for <var> in <iterable>]`, with `?name` a data-dependent size (a return's);
    for `input_list`, an input tensor list, also `[<var>.shape for <var> in <tensor list>]`
    and `_` dimensions."""
    stripped = value.strip()
    lead = len(value) - len(value.lstrip())
    cols = frozenset(m.start() for m in _DYNAMIC.finditer(stripped))
    text = _DYNAMIC.sub("_", stripped)  # `?n` -> `_n`, same length: the columns stay right
    if input_list is not None and cols:
        raise _ShapeError(loc.shifted(lead + min(cols)), f"'{input_list}' is an input: its sizes are known, and a "
                          "'?' size (data-dependent) is an output's")
    p = _ExprParser(schema, diag, loc.shifted(lead), text, cols)
    node = p.parse(text)
    element = "[[<dims>] for t in tensors] or [t.shape for t in tensors]" if input_list else "[[<dims>] for ...]"
    like = (input_list is not None and isinstance(node, ast.ListComp) and isinstance(node.elt, ast.Attribute)
            and node.elt.attr == "shape")
    if not isinstance(node, ast.ListComp) or len(node.generators) != 1 or not (isinstance(node.elt, ast.List) or like):
        if input_list is not None:
            raise _ShapeError(loc, f"a tensor list's shape per element is a list comprehension over another list, "
                              f"as in \"[p.shape for p in params]\" or \"[[s, D] for s in sizes]\" ({element})")
        raise _ShapeError(loc, "a Tensor[] return's shape is a list comprehension with one shape per element, "
                          "as in \"[[N // chunks, D] for i in range(chunks)]\"")
    gen = node.generators[0]
    var, kind, source, length = p.comprehension(gen, node)
    what = "an input list's" if input_list is not None else "a Tensor[] return's"
    if kind == "tensor":
        a = schema.argument(source)
        if isinstance(a.type, ListType) and not is_tensor(a.type.elem):
            raise _ShapeError(loc.shifted(lead + gen.iter.col_offset),
                              f"'{source}' may hold None; {what} shapes come from a Tensor[] argument")
    if input_list is not None and source == input_list:
        raise _ShapeError(loc.shifted(lead + gen.iter.col_offset),
                          f"'{input_list}' cannot take its shapes from its own elements; name another list")
    length_text = (f"len({source})" if kind != "index" else
                   ast.get_source_segment(text, gen.iter.args[0]) or ast.unparse(gen.iter.args[0]))
    if like:
        if not (isinstance(node.elt.value, ast.Name) and node.elt.value.id == var and kind == "tensor"):
            raise _ShapeError(loc.shifted(lead + node.elt.col_offset),
                              f"'{ast.unparse(node.elt)}': an element's whole shape is the shape of the loop's "
                              f"tensor, as in [p.shape for p in params]; else list its dimensions ({element})")
        return ListShape(var, kind, source, length, (), stripped, True, length_text)
    p.locals[var] = kind
    dims = []
    for item in node.elt.elts:
        iloc = loc.shifted(lead + item.col_offset)
        if isinstance(item, ast.Starred):
            if not isinstance(item.value, ast.Name):
                raise _ShapeError(iloc, "'*' must be followed by a dimension-run name, as in *batch")
            dims.append(Dim(Var(item.value.id), True, f"*{item.value.id}", iloc))
            continue
        if input_list is not None and isinstance(item, ast.Name) and item.id == "_":
            dims.append(Dim(Free(), False, "_", iloc))
            continue
        sub = _ExprParser(schema, diag, loc.shifted(lead), text, cols)
        sub.locals = p.locals
        dims.append(Dim(sub.expr(item), False, ast.get_source_segment(value.strip(), item) or ast.unparse(item), iloc))
    if sum(d.star for d in dims) > 1:
        raise _ShapeError([d for d in dims if d.star][1].loc, "a shape may have at most one '*' run of dimensions")
    return ListShape(var, kind, source, length, tuple(dims), stripped, False, length_text)


# ------------------------------------------------------------------------------ analysis

@dataclass(frozen=True)
class Binding:
    """Where a dimension variable comes from: `tensor.size(index)` or a run of them.  `maybe`:
    first bound by an optional tensor or a tensor list, so it may be unbound at run time (a
    local that starts unbound: -1 in C++, None in Python)."""

    name: str
    tensor: str
    start: int  # dim index from the front (>= 0) or from the back (< 0) for after a star
    run: bool = False
    run_stop: int = 0  # for a run: number of dims after it in the tensor's shape
    maybe: bool = False


@dataclass(frozen=True)
class ShapePlan:
    """Input contracts in the order they are checked (required tensors, tensor lists, optional
    tensors, each in argument order), then output shapes, checked for consistency.
    `required`: for a tensor list, the names it binds that something after it uses, so the
    list (or an earlier list that binds them too) must bind them (hold a tensor); it is the
    last list whose contract binds them."""

    inputs: tuple[Shape, ...]
    outputs: tuple[Shape, ...]
    bindings: tuple[Binding, ...]
    required: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def binding(self, name: str) -> Binding | None:
        return next((b for b in self.bindings if b.name == name), None)

    def required_after(self, list_arg: str) -> tuple[str, ...]:
        return dict(self.required).get(list_arg, ())


def _order(schema: FunctionSchema, shapes: Mapping[str, Shape]) -> list[tuple[object, Shape, str]]:
    """(argument, shape, kind) of the input contracts in check order; kind is "required",
    "list", "each" (a tensor list with one shape per element, from another list: after every
    other list, since it binds nothing and may use what they bind) or "optional"."""
    groups: dict[str, list] = {"required": [], "list": [], "each": [], "optional": []}
    for a in schema.arguments:
        s = shapes.get(a.name)
        if s is None:
            continue
        kind = ("each" if s.each is not None else "list") if is_tensor_list(unwrap_optional(a.type)) else \
            "optional" if a.is_optional else "required"
        groups[kind].append((a, s, kind))
    return groups["required"] + groups["list"] + groups["each"] + groups["optional"]


def analyze(schema: FunctionSchema, shapes: dict[str, Shape], output_names: tuple[str, ...],
            diag: Diagnostics, uses: tuple[tuple[Expr, Loc], ...] = ()) -> ShapePlan:
    """Check the contracts and output shapes against the schema and each other, and plan the
    checks.  `uses`: other expressions evaluated after the input checks (such as `index:`
    bounds), with their locations; they are held to an output's rules (no `_`, no name that
    may be unbound) and a tensor list whose name they use must hold a tensor."""
    bindings: dict[str, Binding] = {}
    int_args = {a.name for a in schema.arguments if unwrap_optional(a.type) in _INT}
    optional_tensors = {a.name for a in schema.arguments
                        if a.is_optional and is_tensor(unwrap_optional(a.type))}
    only_optional: dict[str, str] = {}  # name -> the optional tensor that binds it
    list_bound: dict[str, str] = {}  # name -> the first tensor list that binds it
    binders: dict[str, list[str]] = {}  # name -> the lists that bind it, the first given element of all
    needed: list[str] = []  # names lists bind that something after them uses: some list must bind them
    inputs = []

    def use(e: Expr, loc: Loc, star_ok: bool, where: str | None, unknown: str | None = None) -> None:
        """Names in `e` must be bound (but `unknown`, which `e` binds); optional tensors' sizes
        and names only optional tensors bind are usable only in their own contracts."""
        for v in loop_variables(e):
            if v in bindings:
                diag.error(loc, f"the loop variable '{v}' is also a dimension name; name it otherwise")
        for t in tensors_in(e):
            if t in optional_tensors and t != where:
                diag.error(loc, f"'{t}' is optional (it may be None), so its sizes cannot be used here; name its "
                           f"dimensions in its own shape instead")
        for v in names_in(e):
            if v == unknown:
                continue
            b = bindings.get(v)
            if b is None and v not in int_args:
                diag.error(loc, f"unknown dimension '{v}': bind it in the shape of an input, or name an int argument")
            elif b is not None and b.run != star_ok:
                diag.error(loc, f"'{v}' is a run of dimensions; write it as '*{v}'" if b.run else
                           f"'{v}' is a single dimension, not a run; write it without '*'")
            elif v in only_optional:
                diag.error(loc, f"dimension '{v}' is bound only by optional argument '{only_optional[v]}', so it is "
                           "unknown when that is None; bind it in the shape of a required argument, or "
                           "leave it out here")
            elif v in list_bound and where not in binders[v] and v not in needed:
                needed.append(v)

    for a, s, kind in _order(schema, shapes):
        inputs.append(s)
        if s.each is not None:
            _use_each(s, use, bindings, diag)
            continue
        if s.whole is not None:
            if s.whole.source == a.name:
                diag.error(s.loc, f"the shape of '{a.name}' cannot be its own shape")
            else:
                use(TensorSize(s.whole.source, Num(0)), s.loc, False, a.name)
            continue
        n = len(s.dims)
        star = next((i for i, d in enumerate(s.dims) if d.star), None)
        for i, d in enumerate(s.dims):
            start = i if star is None or i < star else i - n
            if d.star:
                name = d.expr.name
                if name in int_args:
                    diag.error(d.loc, f"'*{name}' names an int argument, not a run of dimensions")
                elif name not in bindings:
                    if kind == "optional":
                        diag.error(d.loc, f"the run '*{name}' is first bound by {_kind_words(kind)} '{a.name}'; "
                                   "bind it in the shape of a required Tensor argument or a tensor list")
                        continue
                    # a list's first element binds it, the others are checked against it
                    bindings[name] = Binding(name, a.name, i, True, n - i - 1, maybe=kind == "list")
                    if kind == "list":
                        list_bound[name] = a.name
                        binders[name] = [a.name]
                elif kind == "list" and name in binders and name not in needed:
                    binders[name].append(a.name)  # bound by this list where the ones before held no tensor
                else:
                    use(d.expr, d.loc, True, a.name)
                continue
            if isinstance(d.expr, Free):
                continue
            # The names this dimension may bind: unbound ones, and (in an optional tensor's or a
            # list's contract) those that only optional tensors bind, bound at run time if at all.
            unknowns = sorted({v for v in names_in(d.expr) if v not in int_args and (
                v not in bindings or (kind != "required" and (v in only_optional or list_bound.get(v) == a.name)))})
            if not unknowns and kind == "list":
                # A name an earlier list binds, alone unknown in a linear dimension: bound by this
                # list too where the earlier ones held no tensor (`xs: [D], ys: [D]`).
                others = sorted({v for v in names_in(d.expr) if v in binders and v not in needed})
                if len(others) == 1 and _linear(d.expr, others[0]) is not None:
                    if a.name not in binders[others[0]]:
                        binders[others[0]].append(a.name)
                    use(d.expr, d.loc, False, a.name, unknown=others[0])
                    continue
            if not unknowns:
                use(d.expr, d.loc, False, a.name)
                continue
            if len(unknowns) > 1:
                diag.error(d.loc, f"'{d.text}' has {len(unknowns)} unknown dimensions ({', '.join(unknowns)}); an input "
                           "dimension binds one: bind the others in the shape of an input before")
                for x in unknowns:  # reported once, here
                    bindings.setdefault(x, Binding(x, a.name, start))
                continue
            x = unknowns[0]
            if _linear(d.expr, x) is None:
                diag.error(d.loc, f"'{d.text}' cannot bind dimension '{x}': an input dimension binds a name through a "
                           f"linear expression such as 2 * {x} or {x} + 1; bind '{x}' in an input before, or "
                           "name an int argument")
                bindings.setdefault(x, Binding(x, a.name, start))  # reported once, here
                continue
            use(d.expr, d.loc, False, a.name, unknown=x)
            if x in bindings:
                continue
            bindings[x] = Binding(x, a.name, start, maybe=kind != "required")
            if kind == "optional":
                only_optional[x] = a.name
            elif kind == "list":
                list_bound[x] = a.name
                binders[x] = [a.name]
    outputs = []
    for name in output_names:
        s = shapes.get(name)
        if s is None:
            continue
        outputs.append(s)
        if s.reduce is not None:
            use(TensorSize(s.reduce.tensor, Num(0)), s.loc, False, None)
        if s.each is not None:
            _use_each(s, use, bindings, diag)
            continue
        for d in s.dims or ():
            use(d.expr, d.loc, d.star, None)
    for e, loc in uses:
        if isinstance(e, Free):
            diag.error(loc, "'_' (a dimension of any size) is for input shapes; a bound must be known")
        elif isinstance(e, Dynamic):
            diag.error(loc, f"'?{e.name}' (a data-dependent size) is for outputs; a bound must be known")
        else:
            use(e, loc, False, None)
    return ShapePlan(tuple(inputs), tuple(outputs), tuple(bindings.values()),
                     tuple(_required_after(needed, binders)))


def _use_each(s: Shape, use, bindings: Mapping[str, Binding], diag: Diagnostics) -> None:
    """The names a list comprehension's shapes read (a Tensor[] return's, or an input list's,
    whose dimensions bind nothing) must be bound: all but its loop variable."""
    e = s.each
    use(e.length, s.loc, False, None)
    if e.var in bindings:
        diag.error(s.loc, f"the loop variable '{e.var}' is also a dimension name; name it otherwise")
    for d in e.dims:
        if isinstance(d.expr, Free):
            continue
        for v in names_in(d.expr):
            if v != e.var:
                use(Var(v), d.loc, d.star, None)
        for t in tensors_in(d.expr):
            if t != e.var:
                use(TensorSize(t, Num(0)), d.loc, False, None)


def _required_after(needed: list[str], binders: dict[str, list[str]]) -> list[tuple[str, tuple[str, ...]]]:
    """(list, names): after the last list that binds each needed name, it must be bound."""
    out: dict[str, list[str]] = {}
    for v in needed:
        out.setdefault(binders[v][-1], []).append(v)
    return [(k, tuple(v)) for k, v in out.items()]


def _kind_words(kind: str) -> str:
    return {"list": "tensor list", "optional": "optional argument"}.get(kind, "argument")


# ---------------------------------------------------------------------- linear expressions

def _add(a: Expr, b: Expr) -> Expr:
    if isinstance(a, Num) and isinstance(b, Num):
        return Num(a.value + b.value)
    if a == Num(0):
        return b
    if b == Num(0):
        return a
    return BinOp("+", a, b)


def _neg(a: Expr) -> Expr:
    return Num(-a.value) if isinstance(a, Num) else a.operand if isinstance(a, Neg) else Neg(a)


def _mul(a: Expr, b: Expr) -> Expr:
    if isinstance(a, Num) and isinstance(b, Num):
        return Num(a.value * b.value)
    if a == Num(1):
        return b
    if b == Num(1):
        return a
    if Num(0) in (a, b):
        return Num(0)
    return BinOp("*", a, b)


class _Linear(ExprVisitor[tuple[Expr, Expr] | None], partial=True):
    """(a, b) with e == a * x + b and neither reading x, or None where e is not linear in x."""

    def __init__(self, x: str):
        self.x = x

    def visit(self, e: Expr) -> tuple[Expr, Expr] | None:
        if e == Var(self.x):
            return Num(1), Num(0)
        if self.x not in set(names_in(e)):
            return Num(0), e
        return super().visit(e)

    def generic_visit(self, e: Expr) -> None:
        return None  # a size, an index, a sum: not invertible

    def visit_Neg(self, e: Neg) -> tuple[Expr, Expr] | None:
        r = self.visit(e.operand)
        return None if r is None else (_neg(r[0]), _neg(r[1]))

    def visit_BinOp(self, e: BinOp) -> tuple[Expr, Expr] | None:
        if e.op in "+-":
            lhs, rhs = self.visit(e.lhs), self.visit(e.rhs)
            if lhs is None or rhs is None:
                return None
            if e.op == "-":
                rhs = (_neg(rhs[0]), _neg(rhs[1]))
            return _add(lhs[0], rhs[0]), _add(lhs[1], rhs[1])
        if e.op == "*":
            lx, rx = self.x in set(names_in(e.lhs)), self.x in set(names_in(e.rhs))
            if lx and rx:
                return None
            inner, factor = (self.visit(e.lhs), e.rhs) if lx else (self.visit(e.rhs), e.lhs)
            return None if inner is None else (_mul(inner[0], factor), _mul(inner[1], factor))
        return None  # //: not invertible


def _linear(e: Expr, x: str) -> tuple[Expr, Expr] | None:
    """(a, b) with e == a * x + b and neither reading x; None when e is not linear in x (or
    its factor is 0)."""
    r = _Linear(x).visit(e)
    return None if r is None or r[0] == Num(0) else r


# ------------------------------------------------------------------------------ rendering

def render_cpp(e: Expr, names: Mapping[str, str] | None = None) -> str:
    """`e` in C++; `names` maps the schema's names (arguments, dimension variables) to the C++
    expressions that hold them in the generated scope (default: the names themselves)."""
    return _CppPrinter(names or {}).visit(e)


def render_python(e: Expr, names: Mapping[str, str] | None = None) -> str:
    """`e` in Python; `names` maps schema names to the fake kernel's locals (see `render_cpp`)."""
    return _PythonPrinter(names or {}).visit(e)


class _Printer(ExprVisitor[str], partial=True):
    """What both languages spell alike: names (through `names`), sizes, ranks, numels."""

    def __init__(self, names: Mapping[str, str]):
        self.names = names

    def name(self, name: str) -> str:
        return self.names.get(name, name)

    def body_printer(self, e: ListSum) -> "_Printer":
        """The printer of a sum's body, where its loop variable is itself."""
        return type(self)({k: v for k, v in self.names.items() if k != e.var})

    def visit_Var(self, e: Var) -> str:
        return self.name(e.name)

    def visit_TensorSize(self, e: TensorSize) -> str:
        return f"{self.name(e.tensor)}.size({self.visit(e.dim)})"

    def visit_TensorRank(self, e: TensorRank) -> str:
        return f"{self.name(e.tensor)}.dim()"

    def visit_TensorNumel(self, e: TensorNumel) -> str:
        return f"{self.name(e.tensor)}.numel()"

    def visit_Free(self, e: Free) -> str:
        raise TypeError(e)  # `_` has no value; analyze keeps it out of every expression that is printed


class _PythonPrinter(_Printer):
    def visit_Num(self, e: Num) -> str:
        return str(e.value)

    def visit_ListItem(self, e: ListItem) -> str:
        return f"{self.name(e.list)}[{self.visit(e.index)}]"

    def visit_ListLen(self, e: ListLen) -> str:
        return f"len({self.name(e.list)})"

    def visit_ListSum(self, e: ListSum) -> str:
        given = f" if {e.var} is not None" if e.of_tensors else ""
        return f"sum(({self.body_printer(e).visit(e.body)}) for {e.var} in {self.name(e.list)}{given})"

    def visit_BinOp(self, e: BinOp) -> str:
        return f"({self.visit(e.lhs)} {e.op} {self.visit(e.rhs)})"

    def visit_Neg(self, e: Neg) -> str:
        return f"(-{self.visit(e.operand)})"

    def visit_Dynamic(self, e: Dynamic) -> str:
        return e.name


# C++ shape arithmetic is overflow-checked (runtime checks.h); Python's ints do not overflow.
_CPP_CHECKED = {"+": "shape_add", "-": "shape_sub", "*": "shape_mul"}


class _CppPrinter(_Printer):
    """C++ inside a generated wrapper, where `kOp` names the op in the runtime's messages."""

    def visit_Num(self, e: Num) -> str:
        return str(e.value) if e.value >= 0 else f"({e.value})"

    def visit_ListItem(self, e: ListItem) -> str:
        return f"opwrap::rt::list_item({self.name(e.list)}, {self.visit(e.index)})"

    def visit_ListLen(self, e: ListLen) -> str:
        return f"static_cast<int64_t>({self.name(e.list)}.size())"

    def visit_ListSum(self, e: ListSum) -> str:
        param = "const auto&" if e.of_tensors else "int64_t"  # a tensor of either target
        return (f"opwrap::rt::list_sum(kOp, {self.name(e.list)}, [&]({param} {e.var}) -> int64_t {{ "
                f"return {self.body_printer(e).visit(e.body)}; }})")

    def visit_BinOp(self, e: BinOp) -> str:
        if e.op == "//":
            return f"opwrap::rt::floordiv({self.visit(e.lhs)}, {self.visit(e.rhs)})"
        return f"opwrap::rt::{_CPP_CHECKED[e.op]}(kOp, {self.visit(e.lhs)}, {self.visit(e.rhs)})"

    def visit_Neg(self, e: Neg) -> str:
        return f"opwrap::rt::shape_sub(kOp, 0, {self.visit(e.operand)})"

    def visit_Dynamic(self, e: Dynamic) -> str:
        return "0"  # the wrapper allocates 0 there; the kernel resizes


def variables(plan: "ShapePlan") -> set[str]:
    """Every name the shape rule's expressions use: arguments and dimension variables (not
    the variables of comprehensions, which are locals of their own loops)."""
    out: set[str] = set()
    for s in plan.inputs + plan.outputs:
        if s.each is not None:
            out.update(v for d in s.each.dims for v in names_in(d.expr) if v != s.each.var)
            out.update(names_in(s.each.length))
        for d in s.dims or ():
            if not isinstance(d.expr, (Free, Dynamic)):
                out.update(names_in(d.expr))
    return out


# ---------------------------------------------------------------------- input contracts

@dataclass(frozen=True)
class _Step:
    """One action of the input contracts on one dimension, the same in both languages."""

    kind: str  # rank | bind | bind_linear | maybe_bind | maybe_bind_linear | check | bind_run | check_run | maybe_bind_run
    index: int = 0  # the dimension (from the back when < 0)
    dim: Dim | None = None
    var: str = ""
    a: Expr | None = None  # bind_linear: size == a * var + b
    b: Expr | None = None


@dataclass(frozen=True)
class _Contract:
    arg: str
    kind: str  # required | list | each | optional
    shape: Shape
    steps: tuple[_Step, ...]
    declare: tuple[str, ...] = ()  # names this contract may bind at run time, declared unbound before it
    require: tuple[str, ...] = ()  # after a list: names it must have bound


def _contracts(plan: ShapePlan, schema: FunctionSchema) -> list[_Contract]:
    """The input contracts as steps: which dimension binds what, which checks."""
    int_args = {a.name for a in schema.arguments if unwrap_optional(a.type) in _INT}
    bound: set[str] = set(int_args)  # bound for certain here
    maybe_set: set[str] = set()  # runtime-bound names that some earlier contract may have set
    declared: set[str] = set()
    out = []
    for a, s, kind in _order(schema, {sh.target: sh for sh in plan.inputs}):
        steps: list[_Step] = []
        declare: list[str] = []
        if s.each is not None:  # binds nothing: a check of each dimension it lists
            dims = s.each.dims
            star = next((i for i, d in enumerate(dims) if d.star), None)
            if not s.each.like:
                steps.append(_Step("rank", len(dims) - (star is not None), None, "at_least" if star is not None else ""))
            for i, d in enumerate(dims):
                if not isinstance(d.expr, Free):
                    index = i if star is None or i < star else i - len(dims)
                    steps.append(_Step("check_run" if d.star else "check", i if d.star else index, d,
                                       d.expr.name if d.star else ""))
            out.append(_Contract(a.name, kind, s, tuple(steps)))
            continue
        if s.whole is None:
            count = len(s.dims)
            star = next((i for i, d in enumerate(s.dims) if d.star), None)
            steps.append(_Step("rank", count - (1 if star is not None else 0), None, "at_least" if star is not None else ""))
            binds_here: list[str] = []
            for i, d in enumerate(s.dims):
                index = i if star is None or i < star else i - count
                if d.star:
                    x = d.expr.name
                    b = plan.binding(x)
                    if x in bound:
                        steps.append(_Step("check_run", i, d, x))
                    elif b is not None and b.maybe:  # a list's: bound by its first given element
                        if x not in declared:
                            declared.add(x)
                            declare.append(x)
                        steps.append(_Step("maybe_bind_run", i, d, x))
                        binds_here.append(x)
                    else:
                        steps.append(_Step("bind_run", i, d, x))
                        bound.add(x)
                    continue
                if isinstance(d.expr, Free):
                    continue
                # (a name an earlier dimension of this element bound is known here)
                unknown = [v for v in names_in(d.expr) if v not in bound and v not in binds_here]
                if not unknown:
                    steps.append(_Step("check", index, d))
                    continue
                x = unknown[0]
                lin = _linear(d.expr, x)
                if lin is None:
                    continue  # reported by analyze
                b = plan.binding(x)
                if b is not None and b.maybe:
                    if x not in declared:
                        declared.add(x)
                        declare.append(x)
                    # a list binds from its first given element, checks the rest: always at run time
                    runtime = kind == "list" or x in maybe_set or x in binds_here
                    simple = d.expr == Var(x)
                    steps.append(_Step(("maybe_bind" if runtime else "bind") + ("" if simple else "_linear"),
                                       index, d, x, *([] if simple else lin)))
                    binds_here.append(x)
                else:
                    steps.append(_Step("bind" if d.expr == Var(x) else "bind_linear", index, d, x,
                                       *([] if d.expr == Var(x) else lin)))
                    bound.add(x)
            maybe_set.update(binds_here)
        require = plan.required_after(a.name) if kind == "list" else ()
        bound.update(require)
        out.append(_Contract(a.name, kind, s, tuple(steps), tuple(declare), tuple(require)))
    return out


def _guard_optional(arg, value: str, bound: str, body: list[str]) -> list[str]:
    """Run `body` only when the optional tensor `value` is given, with `bound` bound to it."""
    if not arg.is_optional:
        return body
    return ([f"if ({value}.has_value() && {value}->defined()) {{", f"  const auto& {bound} = *{value};"]  # a tensor of either target
            + ["  " + b for b in body] + ["}"])


def cpp_input_checks(plan: ShapePlan, op: str, schema: FunctionSchema,
                     names: Mapping[str, str] | None = None) -> list[str]:
    """C++ statements that check every input contract and bind its dimension variables.
    `op` is a C++ expression naming the op in messages (the generated `kOp`); `names` maps
    schema names to their C++ expressions (see `render_cpp`), and an optional tensor `x`
    with a contract to the local bound to its value, under the key `x?`.  Uses the helpers
    of runtime/include/opwrap/runtime/shape_checks.h (included by checks.h)."""
    names = names or {}

    def n(name: str) -> str:
        return names.get(name, name)

    lines: list[str] = []
    outer = names
    for c in _contracts(plan, schema):
        arg = schema.argument(c.arg)
        s = c.shape
        names = outer
        lines.extend((f"opwrap::rt::Run {n(v)};" if plan.binding(v).run else f"int64_t {n(v)} = -1;")
                     + f"  // bound by '{c.arg}' when given" for v in c.declare)
        if c.kind in ("list", "each"):
            t, label = "opwrap_e", "opwrap_name.c_str()"
        else:
            t = names.get(c.arg + "?", n(c.arg) + "_") if arg.is_optional else n(c.arg)
            label = cpp_string(c.arg)
        body: list[str] = []
        if s.whole is not None:
            expected = f"{n(s.whole.source)}.sizes()" if s.whole.is_tensor else n(s.whole.source)
            body.append(f"opwrap::rt::check_shape({op}, {label}, {t}, {expected}, {cpp_string(s.whole.text)});")
        count, spec = len(s.dims or ()), s.text
        e = s.each
        if e is not None:  # the loop variable is the source's item at the element's index
            item = {"tensor": f"{n(e.source)}[opwrap_i]", "index": "static_cast<int64_t>(opwrap_i)",
                    "int": f"opwrap::rt::list_item({n(e.source)}, static_cast<int64_t>(opwrap_i))"}[e.kind]
            names = {**outer, e.var: item}
            count, spec = len(e.dims), _element_text(e)
            if e.like:
                body.append(f"opwrap::rt::check_shape({op}, {label}, {t}, {item}.sizes(), "
                            f"(opwrap::rt::element_name({cpp_string(e.source)}, opwrap_i) + \".shape\").c_str());")
        for st in c.steps:
            d = st.dim
            if st.kind == "rank":
                body.append(f"opwrap::rt::check_rank({op}, {label}, {t}, {st.index}, "
                            f"{'true' if st.var else 'false'}, {cpp_string(spec)});")
            elif st.kind == "bind_run":
                body.append(f"const std::vector<int64_t> {n(st.var)} = {t}.sizes().slice({st.index}, "
                            f"{t}.dim() - {count - 1}).vec();")
            elif st.kind == "check_run":
                body.append(f"opwrap::rt::check_run({op}, {label}, {t}, {st.index}, {count - 1 - st.index}, {n(st.var)}, "
                            f"{cpp_string(st.var)});")
            elif st.kind == "maybe_bind_run":
                body.append(f"opwrap::rt::bind_or_check_run({op}, {label}, {t}, {st.index}, {count - 1 - st.index}, "
                            f"{n(st.var)}, {cpp_string(st.var)});")
            elif st.kind == "bind":
                decl = "" if plan.binding(st.var).maybe else "const int64_t "
                body.append(f"{decl}{n(st.var)} = {t}.size({st.index});")
            elif st.kind == "maybe_bind":
                body.append(f"opwrap::rt::bind_or_check({op}, {label}, {t}, {st.index}, {n(st.var)}, "
                            f"{cpp_string(d.text)});")
            elif st.kind in ("bind_linear", "maybe_bind_linear"):
                call = (f"({op}, {label}, {t}, {st.index}, {render_cpp(st.a, names)}, {render_cpp(st.b, names)}, "
                        f"{cpp_string(d.text)}, {cpp_string(st.var)}")
                if st.kind == "maybe_bind_linear":
                    body.append(f"opwrap::rt::bind_or_check_linear{call}, {n(st.var)});")
                else:
                    decl = "" if plan.binding(st.var).maybe else "const int64_t "
                    body.append(f"{decl}{n(st.var)} = opwrap::rt::bind_linear{call});")
            else:
                body.append(f"opwrap::rt::check_size({op}, {label}, {t}, {st.index}, {render_cpp(d.expr, names)}, "
                            f"{cpp_string(d.text)});")
        if e is not None:
            lines.append(f"opwrap::rt::check_list_input_length({op}, {cpp_string(c.arg)}, {n(c.arg)}.size(), "
                         f"{render_cpp(e.length, outer)}, {cpp_string(e.length_text)}, {cpp_string(e.text)});")
        if c.kind in ("list", "each"):
            lines.append(f"for (size_t opwrap_i = 0; opwrap_i < {n(c.arg)}.size(); ++opwrap_i) {{")
            lines.append(f"  const auto& opwrap_e = opwrap::rt::element({n(c.arg)}, opwrap_i);  // a tensor of either target")
            lines.append("  if (!opwrap_e.defined()) continue;")
            lines.append(f"  const std::string opwrap_name = opwrap::rt::element_name({cpp_string(c.arg)}, opwrap_i);")
            lines.extend("  " + b for b in body)
            lines.append("}")
            lines.extend(f"opwrap::rt::require_bound({op}, {cpp_string(c.arg)}, {n(v)}, {cpp_string(v)}, "
                         f"{cpp_string(s.text)});" for v in c.require)
        else:
            lines.extend(_guard_optional(arg, n(c.arg), t, body))
    return lines


def _element_text(e: ListShape) -> str:
    """An input list's element shape as the rule spells it: `[_, p.size(0)]`."""
    return "[" + ", ".join(d.text for d in e.dims) + "]"


def python_input_checks(plan: ShapePlan, op: str, schema: FunctionSchema,
                        names: Mapping[str, str] | None = None) -> list[str]:
    """The same contracts as `cpp_input_checks`, as `torch._check` calls for a fake kernel:
    SymInt-safe, so dynamic shapes trace through them.  `names` maps schema names to the
    fake kernel's locals (an argument `from` is `from_` there); messages keep the schema's."""
    names = names or {}

    def n(name: str) -> str:
        return names.get(name, name)

    lines: list[str] = []
    outer = names
    for k, c in enumerate(_contracts(plan, schema)):
        arg = schema.argument(c.arg)
        s = c.shape
        names = outer
        lines.extend(f"{n(v)} = None  # bound by '{c.arg}' when given" for v in c.declare)
        if c.kind in ("list", "each"):
            t, label = f"_e{k}", f"{c.arg}[{{_i{k}}}]"
        else:
            t, label = n(c.arg), c.arg
        body: list[str] = []
        if s.whole is not None:
            source = n(s.whole.source)
            expected = f"list({source}.shape)" if s.whole.is_tensor else f"list({source})"
            body.append(f"torch._check(list({t}.shape) == {expected}, lambda: f\"{op}: argument '{label}' has shape "
                        f"{{list({t}.shape)}}, but expected {_py_escape(s.whole.text)} = {{{expected}}}\")")
        count, spec = len(s.dims or ()), s.text
        e = s.each
        if e is not None:  # the loop variable is the source's item at the element's index
            item = f"_i{k}" if e.kind == "index" else f"{n(e.source)}[_i{k}]"
            names = {**outer, e.var: item}
            count, spec = len(e.dims), _element_text(e)
            if e.like:
                expected = f"list({item}.shape)"
                body.append(f"torch._check(list({t}.shape) == {expected}, lambda: f\"{op}: argument '{label}' has "
                            f"shape {{list({t}.shape)}}, but expected {e.source}[{{_i{k}}}].shape = {{{expected}}}\")")

        def at(index: int) -> str:  # a dimension after a run counts from the back: its index as C++ prints it
            return str(index) if index >= 0 else f"{{{t}.dim() - {-index}}}"

        def size_check(index: int, expected: str, text: str) -> str:
            value = "" if text.strip().isdigit() else f" = {{{expected}}}"  # "expected 5", not "expected 5 = 5"
            return (f"torch._check({t}.size({index}) == {expected}, lambda: f\"{op}: argument '{label}' has size "
                    f"{{{t}.size({index})}} at dimension {at(index)}, but expected {_py_escape(text)}{value}\")")

        def linear(st: _Step) -> list[str]:
            size, a, b, var = f"{t}.size({st.index})", render_python(st.a, names), render_python(st.b, names), n(st.var)
            rest = f"{size} - {b}" if st.b != Num(0) else size
            what = f"argument '{label}' has size {{{size}}} at dimension {at(st.index)}, but expected {_py_escape(st.dim.text)}"
            out = [] if isinstance(st.a, Num) else [
                f"torch._check({a} != 0, lambda: f\"{op}: {what} (its factor {_py_escape(render_python(st.a))} is 0)\")"]
            def shown(x: Expr, text: str) -> str:  # a number as it is, an expression as its value
                return str(x.value) if isinstance(x, Num) else f"{{{text}}}"
            rest_shown = f"{{{size}}} - {shown(st.b, b)} = {{{rest}}}" if st.b != Num(0) else f"{{{size}}}"
            return out + [
                f"torch._check(({rest}) % {a} == 0, lambda: f\"{op}: {what} ({rest_shown} is not divisible by "
                f"{shown(st.a, a)})\")",
                f"{var} = ({rest}) // {a}",
                f"torch._check({var} >= 0, lambda: f\"{op}: {what} ({st.var} = {{{var}}} would be negative)\")"]

        for st in c.steps:
            d = st.dim
            if st.kind == "rank":
                cmp, words = (">=", "at least ") if st.var else ("==", "")
                body.append(f"torch._check({t}.dim() {cmp} {st.index}, lambda: f\"{op}: argument '{label}' must have "
                            f"{words}{st.index} dimensions {_py_escape(spec)}, but got {{{t}.dim()}}\")")
            elif st.kind == "bind_run":
                body.append(f"{n(st.var)} = list({t}.shape[{st.index}:{t}.dim() - {count - 1 - st.index}])")
            elif st.kind in ("check_run", "maybe_bind_run"):
                run, var = f"list({t}.shape[{st.index}:{t}.dim() - {count - 1 - st.index}])", n(st.var)
                check = (f"torch._check({run} == {var}, lambda: f\"{op}: argument '{label}' has dimensions "
                         f"{{{run}}} where *{st.var} = {{{var}}} was expected\")")
                if st.kind == "maybe_bind_run":
                    body.extend([f"if {var} is None:", f"    {var} = {run}", "else:", "    " + check])
                else:
                    body.append(check)
            elif st.kind == "bind":
                body.append(f"{n(st.var)} = {t}.size({st.index})")
            elif st.kind == "bind_linear":
                body.extend(linear(st))
            elif st.kind in ("maybe_bind", "maybe_bind_linear"):
                body.append(f"if {n(st.var)} is None:")
                body.extend("    " + x for x in (linear(st) if st.kind == "maybe_bind_linear"
                                                 else [f"{n(st.var)} = {t}.size({st.index})"]))
                body.append("else:")
                body.append("    " + size_check(st.index, render_python(d.expr, names), d.text))
            else:
                body.append(size_check(st.index, render_python(d.expr, names), d.text))
        if e is not None:
            lines.append(f"_runtime.check_list_input_length({op!r}, {c.arg!r}, {n(c.arg)}, "
                         f"{render_python(e.length, outer)}, {e.length_text!r}, {e.text!r})")
        if c.kind in ("list", "each"):
            lines.append(f"for _i{k}, _e{k} in enumerate({n(c.arg)}):")
            lines.append(f"    if _e{k} is None:")
            lines.append("        continue")
            lines.extend("    " + b for b in body)
            lines.extend(f"torch._check({n(v)} is not None, lambda: \"{op}: argument '{c.arg}' holds no tensor, "
                         f"but its shape {_py_escape(s.text)} must give {'*' if plan.binding(v).run else ''}{v}\")"
                         for v in c.require)
        elif arg.is_optional:
            lines.append(f"if {t} is not None:")
            lines.extend("    " + b for b in body)
        else:
            lines.extend(body)
    return lines


# ----------------------------------------------------------------------------------- outputs

def dynamic_sizes(shapes) -> list[str]:
    """The `?name` sizes of the given output shapes, in first-use order (a Tensor[] return's
    data-dependent length is not one: only its kernel can make it)."""
    out: list[str] = []
    for s in shapes:
        for d in (s.each.dims if s.each is not None else s.dims or ()):
            if isinstance(d.expr, Dynamic) and d.expr.name not in out:
                out.append(d.expr.name)
    return out


def _cpp_dims(dims: tuple[Dim, ...], names: Mapping[str, str]) -> str:
    if not any(d.star for d in dims):
        return "std::vector<int64_t>{" + ", ".join(render_cpp(d.expr, names) for d in dims) + "}"
    pieces, run = [], []
    for d in dims:
        if d.star:
            if run:
                pieces.append("{" + ", ".join(run) + "}")
                run = []
            pieces.append(names.get(d.expr.name, d.expr.name))
        else:
            run.append(render_cpp(d.expr, names))
    if run:
        pieces.append("{" + ", ".join(run) + "}")
    return "opwrap::rt::concat({" + ", ".join(pieces) + "})"


def cpp_output_shape(s: Shape, names: Mapping[str, str] | None = None) -> str:
    """A C++ expression of type std::vector<int64_t> for an output's shape (not a Tensor[]
    return's: see `cpp_list_output`)."""
    names = names or {}
    if s.each is not None:
        raise ValueError(f"'{s.target}' is a Tensor[] return; use cpp_list_output")
    if s.whole is not None:
        src = names.get(s.whole.source, s.whole.source)
        return f"{src}.sizes().vec()" if s.whole.is_tensor else f"{src}.vec()"
    if s.reduce is not None:
        r = s.reduce
        keepdim = names.get(r.keepdim, r.keepdim) if isinstance(r.keepdim, str) else str(r.keepdim).lower()
        return (f"opwrap::rt::reduced_shape(kOp, {cpp_string(r.dims)}, {cpp_string(r.tensor)}, "
                f"{names.get(r.tensor, r.tensor)}, {names.get(r.dims, r.dims)}, {keepdim})")
    return _cpp_dims(s.dims, names)


def is_list_output(s: Shape | None) -> bool:
    """Whether `s` is a Tensor[] return's shapes that the wrapper can allocate (its length is
    known before the kernel runs); one of data-dependent length is the kernel's to make."""
    return s is not None and s.each is not None and not s.each.dynamic


def cpp_list_output(s: Shape, var: str, options: str, names: Mapping[str, str] | None = None,
                    op: str = "kOp") -> list[str]:
    """C++ statements that declare `std::vector<at::Tensor> var` and fill it with one tensor
    per element of the Tensor[] return `s` (see `is_list_output`), each allocated with its
    shape (checked as `check_output_shape` checks one) and the `at::TensorOptions` expression
    `options`.  Messages name the element: `result[2]`."""
    names = names or {}
    e = s.each
    loop = {"index": f"for (int64_t {e.var} = 0; {e.var} < opwrap_n; ++{e.var}) {{",
            "int": f"for (const int64_t {e.var} : {names.get(e.source, e.source)}) {{",
            "tensor": f"for (const at::Tensor& {e.var} : {names.get(e.source, e.source)}) {{"}[e.kind]
    inner = {k: v for k, v in names.items() if k != e.var}
    return [
        f"std::vector<at::Tensor> {var};",
        "{",
        f"  const int64_t opwrap_n = {render_cpp(e.length, names)};",
        f"  opwrap::rt::check_list_length({op}, {cpp_string(s.target)}, opwrap_n, {cpp_string(e.text)});",
        f"  {var}.reserve(static_cast<size_t>(opwrap_n));",
        f"  {loop}",
        f"    const std::string opwrap_name = opwrap::rt::element_name({cpp_string(s.target)}, {var}.size());",
        f"    const std::vector<int64_t> opwrap_shape = {_cpp_dims(e.dims, inner)};",
        f"    opwrap::rt::check_output_shape({op}, opwrap_name.c_str(), opwrap_shape, {cpp_string(e.text)});",
        f"    {var}.push_back(opwrap::rt::empty({op}, opwrap_name.c_str(), opwrap_shape, {options}));",
        "  }",
        "}",
    ]


def cpp_list_output_checks(s: Shape, var: str, names: Mapping[str, str] | None = None,
                           op: str = "kOp") -> list[str]:
    """C++ statements that check a Tensor[] return `var` the kernel made (a
    `std::vector<at::Tensor>`) against its shape rule `s` (see `is_list_output`): its length
    and each element's shape, so that the real kernel cannot disagree with the fake one."""
    names = names or {}
    e = s.each
    inner = {k: v for k, v in names.items() if k != e.var}
    source = names.get(e.source, e.source)
    bind = {"index": f"const int64_t {e.var} = static_cast<int64_t>(opwrap_k);",
            "int": f"const int64_t {e.var} = {source}[opwrap_k];",
            "tensor": f"const at::Tensor& {e.var} = {source}[opwrap_k];"}[e.kind]
    return [
        f"opwrap::rt::check_list_output_length({op}, {cpp_string(s.target)}, {var}.size(), "
        f"{render_cpp(e.length, names)}, {cpp_string(e.text)});",
        f"for (size_t opwrap_k = 0; opwrap_k < {var}.size(); ++opwrap_k) {{",
        f"  {bind}",
        f"  opwrap::rt::check_list_output_shape({op}, {cpp_string(s.target)}, opwrap_k, {var}[opwrap_k], "
        f"{_cpp_dims(e.dims, inner)}, {cpp_string(e.text)});",
        "}",
    ]


def python_output_shape(s: Shape, names: Mapping[str, str] | None = None, op: str = "") -> str:
    """A Python list expression for an output's shape (the fake kernel's allocation);
    `names` as in `python_input_checks`; `op` a Python expression naming the op in messages
    (a reduction's checks).  For a Tensor[] return, the shape of one element, inside the loop
    `python_list_loop` gives."""
    names = names or {}
    if s.reduce is not None:
        r = s.reduce
        keepdim = names.get(r.keepdim, r.keepdim) if isinstance(r.keepdim, str) else str(r.keepdim)
        return (f"_runtime.reduced_shape({op or repr('')}, {r.dims!r}, {r.tensor!r}, {names.get(r.tensor, r.tensor)}, "
                f"{names.get(r.dims, r.dims)}, {keepdim})")
    if s.whole is not None:
        source = names.get(s.whole.source, s.whole.source)
        return f"list({source}.shape)" if s.whole.is_tensor else f"list({source})"
    if s.each is not None:
        names = {k: v for k, v in names.items() if k != s.each.var}
    return "[" + ", ".join(f"*{names.get(d.expr.name, d.expr.name)}" if d.star else render_python(d.expr, names)
                           for d in (s.each.dims if s.each is not None else s.dims)) + "]"


def python_list_loop(s: Shape, names: Mapping[str, str] | None = None) -> str:
    """The `for` clause of a comprehension over a Tensor[] return's elements (see
    `is_list_output`), for the fake kernel: `[<element> for i in range(chunks)]`."""
    names = names or {}
    e = s.each
    source = render_python(e.length, names) if e.kind == "index" else names.get(e.source, e.source)
    return f"for {e.var} in " + (f"range({source})" if e.kind == "index" else source)


def _py_escape(s: str) -> str:
    return s.replace("\\", "\\\\").replace('"', '\\"').replace("{", "{{").replace("}", "}}")
