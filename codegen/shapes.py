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
run of dimensions, at most one per shape), or an expression over those with ``+ - * //``,
``x.size(i)``, ``x.shape[i]``, ``x.dim()``, ``x.numel()``, ``l[i]`` and ``len(l)``.
Expressions are parsed with Python's own ``ast`` (the grammar is a strict subset of
Python's), then checked here against the schema.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Mapping

from . import pysyntax
from .diagnostics import Diagnostics, Loc
from .api.names import cpp_string
from .schema import BaseType, FunctionSchema, ListType, is_tensor, unwrap_optional


# ---------------------------------------------------------------------------- expression IR

@dataclass(frozen=True)
class Num:
    value: int


@dataclass(frozen=True)
class Var:
    name: str  # a dimension variable or an int/SymInt argument


@dataclass(frozen=True)
class TensorSize:
    tensor: str
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
    list: str


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


Expr = Num | Var | TensorSize | TensorRank | TensorNumel | ListItem | ListLen | BinOp | Neg | Dynamic


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
class Shape:
    target: str  # argument or return name
    dims: tuple[Dim, ...] | None
    whole: WholeShape | None
    loc: Loc

    @property
    def text(self) -> str:
        if self.whole is not None:
            return self.whole.text
        return "[" + ", ".join(d.text for d in self.dims) + "]"


# ------------------------------------------------------------------------------- parsing

class _ExprParser:
    def __init__(self, schema: FunctionSchema, diag: Diagnostics, loc: Loc, text: str):
        self.schema, self.diag, self.loc, self.text = schema, diag, loc, text

    def fail(self, node: ast.AST | None, message: str) -> None:
        col = getattr(node, "col_offset", 0) if node is not None else 0
        raise _ShapeError(self.loc.shifted(col), message)

    def tensor_arg(self, node: ast.AST) -> str:
        if not isinstance(node, ast.Name):
            self.fail(node, "expected an argument name")
        a = self.schema.argument(node.id)
        if a is None or not is_tensor(unwrap_optional(a.type)):
            self.fail(node, f"'{node.id}' is not a Tensor argument of {self.schema.name}")
        return node.id

    def int_list_arg(self, node: ast.AST) -> str:
        if isinstance(node, ast.Name):
            a = self.schema.argument(node.id)
            if a is not None and isinstance(a.type, ListType) and a.type.elem in (BaseType("int"), BaseType("SymInt")):
                return node.id
        self.fail(node, f"'{ast.unparse(node)}' is not an int[] argument")

    def expr(self, node: ast.AST) -> Expr:
        if isinstance(node, ast.Constant) and type(node.value) is int:
            return Num(node.value)
        if isinstance(node, ast.Name):
            a = self.schema.argument(node.id)
            if a is not None and unwrap_optional(a.type) not in (BaseType("int"), BaseType("SymInt")):
                self.fail(node, f"argument '{node.id}' is a {a.type}, not an int; use {node.id}.size(i) "
                          f"or {node.id}.dim()" if is_tensor(unwrap_optional(a.type)) else
                          f"argument '{node.id}' has type {a.type}, which is not a dimension")
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
            return ListLen(self.int_list_arg(node.args[0]))
        if isinstance(node, ast.Subscript):
            target = node.value
            if isinstance(target, ast.Attribute) and target.attr == "shape":
                return TensorSize(self.tensor_arg(target.value), self.expr(node.slice))
            return ListItem(self.int_list_arg(target), self.expr(node.slice))
        self.fail(node, f"unsupported shape expression '{ast.unparse(node)}'; use integers, names, "
                  "+ - * //, x.size(i), x.shape[i], x.dim(), x.numel(), l[i], len(l)")

    def parse(self, text: str) -> ast.AST:
        try:
            return pysyntax.parse(text.strip(), mode="eval").body
        except SyntaxError as e:
            raise _ShapeError(self.loc.shifted(max((e.offset or 1) - 1, 0)), f"malformed shape expression: {e.msg}")


_BINOPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.FloorDiv: "//"}


class _ShapeError(Exception):
    def __init__(self, loc: Loc, message: str):
        self.loc, self.message = loc, message


def parse_shape(schema: FunctionSchema, target: str, value: object, loc: Loc, item_locs: list[Loc],
                is_output: bool, diag: Diagnostics) -> Shape | None:
    """Parse one `shape:` entry.  ``value`` is a list of str/int items or one str."""
    try:
        if isinstance(value, str):
            p = _ExprParser(schema, diag, loc, value)
            node = p.parse(value)
            if isinstance(node, ast.Attribute) and node.attr == "shape":
                return Shape(target, None, WholeShape(p.tensor_arg(node.value), True, value, loc), loc)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "sizes" \
                    and not node.args:
                return Shape(target, None, WholeShape(p.tensor_arg(node.func.value), True, value, loc), loc)
            return Shape(target, None, WholeShape(p.int_list_arg(node), False, value, loc), loc)
        if not isinstance(value, list):
            raise _ShapeError(loc, "a shape must be a list of dimensions like [N, K] or an expression like 'size'")
        dims = []
        for item, iloc in zip(value, item_locs):
            if isinstance(item, bool) or not isinstance(item, (int, str)):
                raise _ShapeError(iloc, f"a dimension must be an integer or an expression, not {item!r}")
            text = str(item)
            star = text.lstrip().startswith("*")
            p = _ExprParser(schema, diag, iloc, text)
            if text.lstrip().startswith("?"):
                name = text.strip()[1:].strip()
                if not name.isidentifier():
                    raise _ShapeError(iloc, "'?' must be followed by a name, as in ?nnz")
                if not is_output:
                    raise _ShapeError(iloc, f"'?{name}' (a data-dependent size) is for outputs; an input's "
                                      "dimensions are known")
                dims.append(Dim(Dynamic(name), False, f"?{name}", iloc))
            elif star:
                name = text.strip()[1:].strip()
                if not name.isidentifier():
                    raise _ShapeError(iloc, f"'*' must be followed by a dimension-run name, as in *batch")
                dims.append(Dim(Var(name), True, f"*{name}", iloc))
            else:
                dims.append(Dim(p.expr(p.parse(text)), False, text.strip(), iloc))
        stars = [d for d in dims if d.star]
        if len(stars) > 1:
            raise _ShapeError(stars[1].loc, "a shape may have at most one '*' run of dimensions")
        return Shape(target, tuple(dims), None, loc)
    except _ShapeError as e:
        diag.error(e.loc, e.message)
        return None


# ------------------------------------------------------------------------------ analysis

@dataclass(frozen=True)
class Binding:
    """Where a dimension variable comes from: `tensor.size(index)` or a run of them."""

    name: str
    tensor: str
    start: int  # dim index from the front (>= 0) or from the back (< 0) for after a star
    run: bool = False
    run_stop: int = 0  # for a run: number of dims after it in the tensor's shape


@dataclass(frozen=True)
class ShapePlan:
    """Input contracts in argument order, then output shapes, checked for consistency."""

    inputs: tuple[Shape, ...]
    outputs: tuple[Shape, ...]
    bindings: tuple[Binding, ...]

    def binding(self, name: str) -> Binding | None:
        return next((b for b in self.bindings if b.name == name), None)


def analyze(schema: FunctionSchema, shapes: dict[str, Shape], output_names: tuple[str, ...],
            diag: Diagnostics) -> ShapePlan:
    bindings: dict[str, Binding] = {}
    int_args = {a.name for a in schema.arguments if unwrap_optional(a.type) in (BaseType("int"), BaseType("SymInt"))}
    inputs = []
    for a in schema.arguments:
        s = shapes.get(a.name)
        if s is None:
            continue
        inputs.append(s)
        if s.whole is not None:
            if s.whole.source == a.name:
                diag.error(s.loc, f"the shape of '{a.name}' cannot be its own shape")
            continue
        n = len(s.dims)
        star = next((i for i, d in enumerate(s.dims) if d.star), None)
        for i, d in enumerate(s.dims):
            if isinstance(d.expr, Var) and d.expr.name not in bindings and d.expr.name not in int_args:
                if a.is_optional:
                    diag.error(d.loc, f"dimension '{d.expr.name}' is first bound by optional argument '{a.name}'; "
                               "bind it from a required argument listed earlier")
                    continue
                if d.star:
                    bindings[d.expr.name] = Binding(d.expr.name, a.name, i, True, n - i - 1)
                else:
                    bindings[d.expr.name] = Binding(d.expr.name, a.name, i if star is None or i < star else i - n)
            elif d.star and d.expr.name in int_args:
                diag.error(d.loc, f"'*{d.expr.name}' names an int argument, not a run of dimensions")
            else:
                _check_names(d.expr, bindings, int_args, d.loc, diag, star_ok=d.star)
    outputs = []
    for name in output_names:
        s = shapes.get(name)
        if s is None:
            continue
        outputs.append(s)
        for d in s.dims or ():
            _check_names(d.expr, bindings, int_args, d.loc, diag, star_ok=d.star)
    return ShapePlan(tuple(inputs), tuple(outputs), tuple(bindings.values()))


def _check_names(e: Expr, bindings: dict[str, Binding], int_args: set[str], loc: Loc, diag: Diagnostics,
                 star_ok: bool) -> None:
    for v in _vars(e):
        b = bindings.get(v)
        if b is None and v not in int_args:
            diag.error(loc, f"unknown dimension '{v}': bind it in the shape of an input listed before, "
                       "or name an int argument")
        elif b is not None and b.run != star_ok:
            diag.error(loc, f"'{v}' is a run of dimensions; write it as '*{v}'" if b.run else
                       f"'{v}' is a single dimension, not a run; write it without '*'")


def _vars(e: Expr):
    if isinstance(e, Var):
        yield e.name
    elif isinstance(e, BinOp):
        yield from _vars(e.lhs)
        yield from _vars(e.rhs)
    elif isinstance(e, Neg):
        yield from _vars(e.operand)
    elif isinstance(e, (TensorSize, ListItem)):
        yield from _vars(e.dim if isinstance(e, TensorSize) else e.index)


# ------------------------------------------------------------------------------ rendering

def render_cpp(e: Expr, names: Mapping[str, str] | None = None) -> str:
    """`e` in C++; `names` maps the schema's names (arguments, dimension variables) to the C++
    expressions that hold them in the generated scope (default: the names themselves)."""
    return _render(e, python=False, names=names or {})


def render_python(e: Expr, names: Mapping[str, str] | None = None) -> str:
    """`e` in Python; `names` maps schema names to the fake kernel's locals (see `render_cpp`)."""
    return _render(e, python=True, names=names or {})


# C++ shape arithmetic is overflow-checked (runtime checks.h); Python's ints do not overflow.
_CPP_CHECKED = {"+": "shape_add", "-": "shape_sub", "*": "shape_mul"}


def _render(e: Expr, python: bool, names: Mapping[str, str]) -> str:
    """One printer for both languages; they differ only in list access and floor division."""
    def r(x: Expr) -> str:
        return _render(x, python, names)

    def n(name: str) -> str:
        return names.get(name, name)

    if isinstance(e, Num):
        return str(e.value)
    if isinstance(e, Var):
        return n(e.name)
    if isinstance(e, TensorSize):
        return f"{n(e.tensor)}.size({r(e.dim)})"
    if isinstance(e, TensorRank):
        return f"{n(e.tensor)}.dim()"
    if isinstance(e, TensorNumel):
        return f"{n(e.tensor)}.numel()"
    if isinstance(e, ListItem):
        return f"{n(e.list)}[{r(e.index)}]" if python else f"opwrap::rt::list_item({n(e.list)}, {r(e.index)})"
    if isinstance(e, ListLen):
        return f"len({n(e.list)})" if python else f"static_cast<int64_t>({n(e.list)}.size())"
    if isinstance(e, BinOp):
        if not python:  # inside a generated wrapper, where kOp names the op
            if e.op == "//":
                return f"opwrap::rt::floordiv({r(e.lhs)}, {r(e.rhs)})"
            return f"opwrap::rt::{_CPP_CHECKED[e.op]}(kOp, {r(e.lhs)}, {r(e.rhs)})"
        return f"({r(e.lhs)} {e.op} {r(e.rhs)})"
    if isinstance(e, Neg):
        return f"(-{r(e.operand)})" if python else f"opwrap::rt::shape_sub(kOp, 0, {r(e.operand)})"
    if isinstance(e, Dynamic):
        return e.name if python else "0"
    raise TypeError(e)


def variables(plan: "ShapePlan") -> set[str]:
    """Every name the shape rule's expressions use: arguments and dimension variables."""
    out: set[str] = set()
    for s in plan.inputs + plan.outputs:
        for d in s.dims or ():
            out.update(v.name for v in _vars(d.expr) if isinstance(v, Var))
    return out


def cpp_input_checks(plan: ShapePlan, op: str, schema: FunctionSchema,
                     names: Mapping[str, str] | None = None) -> list[str]:
    """C++ statements that check every input contract and bind its dimension variables.
    `op` is a C++ expression naming the op in messages (the generated `kOp`); `names` maps
    schema names to their C++ expressions (see `render_cpp`), and an optional tensor `x`
    with a contract to the local bound to its value, under the key `x?`."""
    names = names or {}

    def n(name: str) -> str:
        return names.get(name, name)

    lines: list[str] = []
    bound: set[str] = set()
    for s in plan.inputs:
        arg = schema.argument(s.target)
        t = names.get(s.target + "?", n(s.target) + "_") if arg.is_optional else n(s.target)
        if s.whole is not None:
            expected = f"{n(s.whole.source)}.sizes()" if s.whole.is_tensor else n(s.whole.source)
            body = [f'opwrap::rt::check_shape({op}, {cpp_string(s.target)}, {t}, {expected}, {cpp_string(s.whole.text)});']
            lines.extend(_guard_optional(arg, n(s.target), t, body))
            continue
        count = len(s.dims)
        star = next((i for i, d in enumerate(s.dims) if d.star), None)
        body: list[str] = []
        rank = count - (1 if star is not None else 0)
        body.append(f'opwrap::rt::check_rank({op}, {cpp_string(s.target)}, {t}, {rank}, '
                    f'{"true" if star is not None else "false"}, {cpp_string(s.text)});')
        for i, d in enumerate(s.dims):
            index = i if star is None or i < star else i - count
            if d.star:
                name = d.expr.name
                run = f"{t}.sizes().slice({i}, {t}.dim() - {count - 1})"
                if name in bound:
                    body.append(f'opwrap::rt::check_run({op}, {cpp_string(s.target)}, {t}, {i}, {n(name)}, '
                                f'{cpp_string(name)});')
                else:
                    body.append(f"const std::vector<int64_t> {n(name)} = {run}.vec();")
                    bound.add(name)
            elif isinstance(d.expr, Var) and d.expr.name not in bound and plan.binding(d.expr.name) is not None:
                body.append(f"const int64_t {n(d.expr.name)} = {t}.size({index});")
                bound.add(d.expr.name)
            else:
                body.append(f'opwrap::rt::check_size({op}, {cpp_string(s.target)}, {t}, {index}, '
                            f'{render_cpp(d.expr, names)}, {cpp_string(d.text)});')
        lines.extend(_guard_optional(arg, n(s.target), t, body))
    return lines


def _guard_optional(arg, value: str, bound: str, body: list[str]) -> list[str]:
    """Run `body` only when the optional tensor `value` is given, with `bound` bound to it."""
    if not arg.is_optional:
        return body
    return ([f"if ({value}.has_value() && {value}->defined()) {{", f"  const at::Tensor& {bound} = *{value};"]
            + ["  " + b for b in body] + ["}"])


def cpp_output_shape(s: Shape, names: Mapping[str, str] | None = None) -> str:
    """A C++ expression of type std::vector<int64_t> for an output's shape."""
    names = names or {}
    if s.whole is not None:
        src = names.get(s.whole.source, s.whole.source)
        return f"{src}.sizes().vec()" if s.whole.is_tensor else f"{src}.vec()"
    if not any(d.star for d in s.dims):
        return "std::vector<int64_t>{" + ", ".join(render_cpp(d.expr, names) for d in s.dims) + "}"
    pieces, run = [], []
    for d in s.dims:
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


def python_input_checks(plan: ShapePlan, op: str, schema: FunctionSchema,
                        names: Mapping[str, str] | None = None) -> list[str]:
    """The same contracts as `cpp_input_checks`, as `torch._check` calls for a fake kernel:
    SymInt-safe, so dynamic shapes trace through them.  `names` maps schema names to the
    fake kernel's locals (an argument `from` is `from_` there); messages keep the schema's."""
    names = names or {}

    def n(name: str) -> str:
        return names.get(name, name)

    lines: list[str] = []
    bound: set[str] = set()
    for s in plan.inputs:
        arg = schema.argument(s.target)
        t, label = n(s.target), s.target
        body: list[str] = []
        if s.whole is not None:
            source = n(s.whole.source)
            expected = f"list({source}.shape)" if s.whole.is_tensor else f"list({source})"
            body.append(f"torch._check(list({t}.shape) == {expected}, lambda: f\"{op}: argument '{label}' has shape "
                        f"{{list({t}.shape)}}, but expected {_py_escape(s.whole.text)} = {{{expected}}}\")")
        else:
            count = len(s.dims)
            star = next((i for i, d in enumerate(s.dims) if d.star), None)
            rank = count - (1 if star is not None else 0)
            cmp, words = (">=", "at least ") if star is not None else ("==", "")
            body.append(f"torch._check({t}.dim() {cmp} {rank}, lambda: f\"{op}: argument '{label}' must have {words}{rank} "
                        f"dimensions {_py_escape(s.text)}, but got {{{t}.dim()}}\")")
            for i, d in enumerate(s.dims):
                index = i if star is None or i < star else i - count
                if d.star:
                    run = f"list({t}.shape[{i}:{t}.dim() - {count - 1 - i}])"
                    var = n(d.expr.name)
                    if d.expr.name in bound:
                        body.append(f"torch._check({run} == {var}, lambda: f\"{op}: argument '{label}' has "
                                    f"dimensions {{{run}}} where *{d.expr.name} = {{{var}}} was expected\")")
                    else:
                        body.append(f"{var} = {run}")
                        bound.add(d.expr.name)
                elif isinstance(d.expr, Var) and d.expr.name not in bound and plan.binding(d.expr.name) is not None:
                    body.append(f"{n(d.expr.name)} = {t}.size({index})")
                    bound.add(d.expr.name)
                else:
                    expected = render_python(d.expr, names)
                    body.append(f"torch._check({t}.size({index}) == {expected}, lambda: f\"{op}: argument '{label}' has size "
                                f"{{{t}.size({index})}} at dimension {index}, but expected {_py_escape(d.text)} = {{{expected}}}\")")
        if arg.is_optional:
            lines.append(f"if {t} is not None:")
            lines.extend("    " + b for b in body)
        else:
            lines.extend(body)
    return lines


def dynamic_sizes(shapes) -> list[str]:
    """The `?name` sizes of the given output shapes, in first-use order."""
    out: list[str] = []
    for s in shapes:
        for d in s.dims or ():
            if isinstance(d.expr, Dynamic) and d.expr.name not in out:
                out.append(d.expr.name)
    return out


def python_output_shape(s: Shape, names: Mapping[str, str] | None = None) -> str:
    """A Python list expression for an output's shape (the fake kernel's allocation);
    `names` as in `python_input_checks`."""
    names = names or {}
    if s.whole is not None:
        source = names.get(s.whole.source, s.whole.source)
        return f"list({source}.shape)" if s.whole.is_tensor else f"list({source})"
    return "[" + ", ".join(f"*{names.get(d.expr.name, d.expr.name)}" if d.star else render_python(d.expr, names)
                           for d in s.dims) + "]"


def _py_escape(s: str) -> str:
    return s.replace("\\", "\\\\").replace('"', '\\"').replace("{", "{{").replace("}", "}}")
