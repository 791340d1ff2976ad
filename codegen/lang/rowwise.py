"""Row-wise programs: ``rowwise: <program>`` in a declaration.

An op that reduces each row of its inputs and may map the row again (rms_norm, layer_norm,
softmax, log_softmax, logsumexp, a sum with an epilogue) is written as a few lines in the
language of pointwise expressions (codegen/lang/pointwise.py), plus reductions over the row::

    shape:
      input: ["*B", D]          # rows: the run *B; the row: the dimensions after it
      weight: [D]               # a column operand: the same for every row
      out: input.shape          # one value per element of a row
      rstd: ["*B"]              # one value per row
    rowwise: |
      rstd = rsqrt(mean(input * input) + eps)
      input * rstd * weight, rstd

The shape rule says what each tensor is (one source of truth for shapes): a *row* tensor is
``["*B", <row dims>]`` (or the ``.shape`` of one), a *column* tensor is ``[<row dims>]`` and
a *per-row* tensor is ``["*B"]``.  Every value of the program is either an element value
(it varies along the row: row and column tensors, and what is computed from them) or a row
value (one per row: scalar arguments, per-row tensors, reductions, and what is computed
from those only).  ``sum(e)``, ``mean(e)``, ``max(e)`` and ``min(e)`` of an element value
``e`` reduce it over the row.  The last line gives one value per return, in order.

The program is compiled into *stages*: a reduction that uses the result of another runs in
a later pass over the row, and reductions that do not depend on each other share a pass
(``mean(x)`` and ``mean(x * x)`` are one loop).  The generated code is a struct per op
holding the row values, with one member function per element function; the CPU and CUDA
loops (templates/rowwise/) call them over a scalar or an ``at::vec::Vectorized``.  As in
pointwise expressions, a name is any name the schema allows: each argument and binding has
a C++ identifier of its own in the struct (``idents``), and every name the translation adds
(members, functions) is a fresh one of the same scope.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, replace

from . import pysyntax
from ..core.diagnostics import Diagnostics, Loc, did_you_mean
from .pointwise import (ALIASES, ELEMENT_FUNCTIONS, FUNCTIONS, SCALAR_TYPES, VALUE_TYPE, ExpressionError, Translator,
                        statements, user_scope)
from .schema import BaseType, FunctionSchema, is_tensor
from .shapes import Shape

# Reductions over the row: (identity's C++ text over opmath_t, the runtime's combiner).
REDUCTIONS = {"sum": "Sum", "mean": "Sum", "max": "Max", "min": "Min"}
PREFIX = "opwrap_"  # the names of generated members and functions start with it (fresh ones: see user_scope)


@dataclass(frozen=True)
class ElemFunction:
    """A function of the row's elements: a member template `name<Tv>(inputs...)`."""

    name: str
    inputs: tuple[str, ...]  # the element tensors it reads (schema order), then the cached bindings
    bindings: tuple[tuple[str, str], ...]  # the element bindings it needs, in order: (C++ identifier, C++)
    value: str  # C++ over Tv
    costly: bool = False  # calls a floating-point function (exp, log, ...) for each element


@dataclass(frozen=True)
class Reduction:
    member: str  # the row member that holds the result
    kind: str  # sum, mean, max, min
    combiner: str  # opwrap::rt::rowwise::<combiner>
    stage: int  # the pass over the row that computes it (1-based)
    function: ElemFunction  # its argument


@dataclass(frozen=True)
class RowOutput:
    name: str  # the return
    per_row: bool  # one value per row (else one per element of the row)
    function: ElemFunction  # no inputs when the value is a row value


@dataclass(frozen=True)
class RowProgram:
    source: str
    loc: Loc
    row_tensors: tuple[str, ...]  # inputs ["*B", <row dims>]
    column_tensors: tuple[str, ...]  # inputs [<row dims>]
    per_row_tensors: tuple[str, ...]  # inputs ["*B"]
    owner: str  # the op whose kernels run it (an out= overload runs its functional op's)
    scalars: tuple[tuple[str, str], ...]  # (argument, C++ conversion of `{name}` to opmath_t)
    row_dims: int  # how many trailing dimensions a row spans
    reductions: tuple[Reduction, ...]
    steps: tuple[tuple[int, str, str], ...]  # row statements: (stage after which it runs, member, C++)
    bindings: tuple[str, ...]  # the row bindings (members: C++ identifiers)
    outputs: tuple[RowOutput, ...]  # in the order of the schema's returns
    floating: bool
    # Costly element bindings used in two passes or more (softmax's exp(self - m), in its sum
    # and its output): computed once, in the first of them, into a row buffer (CPU) that the
    # later passes read; on CUDA the passes recompute them (`function` computes one).
    cached: tuple[tuple[str, int, ElemFunction], ...] = ()  # (binding, the pass computing it, function)
    # The C++ identifier of each argument and binding in the struct (its members, its
    # functions' parameters and locals): the schema's name, or `default_` for `default`.
    idents: tuple[tuple[str, str], ...] = ()
    count: str = PREFIX + "n"  # the member holding the row's length
    stage_functions: tuple[str, ...] = ()  # the member function of each stage's row statements, from 0

    def ident(self, name: str) -> str:
        """The C++ identifier of argument or binding `name` in the struct."""
        return dict(self.idents)[name]

    @property
    def stages(self) -> int:
        return max((r.stage for r in self.reductions), default=0)

    @property
    def element_inputs(self) -> tuple[str, ...]:
        return self.row_tensors + self.column_tensors

    def reductions_of(self, stage: int) -> tuple[Reduction, ...]:
        return tuple(r for r in self.reductions if r.stage == stage)

    def steps_of(self, stage: int) -> tuple[tuple[str, str], ...]:
        return tuple((m, v) for s, m, v in self.steps if s == stage)

    @property
    def functions(self) -> tuple[ElemFunction, ...]:
        return (tuple(f for _, _, f in self.cached) + tuple(r.function for r in self.reductions)
                + tuple(o.function for o in self.outputs))

    def cached_in(self, stage: int) -> tuple[tuple[str, ElemFunction], ...]:
        return tuple((b, f) for b, s, f in self.cached if s == stage)


def classify(schema: FunctionSchema, shapes: dict[str, Shape], like: str) -> tuple[dict[str, str], int, str]:
    """Each tensor argument and return's role ("row", "column", "per_row"), how many
    dimensions a row spans, and an error ("" when none), from the shape rule."""
    roles: dict[str, str] = {}
    row_dims: tuple[str, ...] | None = None
    names = [a.name for a in schema.arguments if is_tensor(a.type)] + list(schema.return_names())
    whole: dict[str, str] = {}
    for name in names:
        s = shapes.get(name)
        if s is None:
            if name in schema.return_names() and like:
                whole[name] = like
                continue
            return {}, 0, f"'{name}' has no shape rule: a row-wise op declares each tensor's shape, as " \
                          f"[\"*B\", D] (rows), [D] (the same for every row) or [\"*B\"] (one value per row)"
        if s.whole is not None:
            if not s.whole.is_tensor:
                return {}, 0, f"the shape of '{name}' must be a tensor's shape ('x.shape') or a list of dimensions"
            whole[name] = s.whole.source
            continue
        if s.reduce is not None:
            return {}, 0, f"the shape of '{name}' is a reduction over dims: a row-wise op reduces its rows, " \
                          "[\"*B\"] (one value per row)"
        if s.dims is None:
            return {}, 0, f"'{name}' cannot be a list of tensors in a row-wise op"
        dims = s.dims
        if dims and dims[0].star:
            rest = tuple(d.text for d in dims[1:])
            if any(d.star for d in dims[1:]):
                return {}, 0, f"the shape of '{name}' has more than one run"
            if not rest:
                roles[name] = "per_row"
                continue
            if row_dims is not None and rest != row_dims:
                return {}, 0, f"the rows of '{name}' are {list(rest)}, but another tensor's are {list(row_dims)}: " \
                              f"every row tensor has the same row dimensions"
            row_dims = rest
            roles[name] = "row"
        else:
            roles[name] = ("column", tuple(d.text for d in dims))  # checked below, once the row is known
    if row_dims is None:
        return {}, 0, "no tensor has rows: a row-wise op needs an input shaped [\"*B\", <row dimensions>] " \
                      "(the run *B is the rows)"
    for name, role in list(roles.items()):
        if isinstance(role, tuple):
            if role[1] != row_dims:
                return {}, 0, f"the shape of '{name}' is {list(role[1])}: a row-wise op's tensors are rows " \
                              f"[\"*B\", {', '.join(row_dims)}], columns [{', '.join(row_dims)}] or per-row [\"*B\"]"
            roles[name] = "column"
    for name, source in whole.items():
        if source not in roles:
            return {}, 0, f"'{name}' takes the shape of '{source}', which has no role in the row"
        roles[name] = roles[source]
    return roles, len(row_dims), ""


def parse(text: str, schema: FunctionSchema, shapes: dict[str, Shape], like: str, loc_at,
          diag: Diagnostics) -> RowProgram | None:
    """Parse and check `text` against the schema and its shape rule (`shapes`, by target)."""
    roles, row_dims, problem = classify(schema, shapes, like)
    if problem:
        diag.error(loc_at(1, 0), problem)
        return None
    returns = schema.return_names()
    ok = True
    for r in schema.returns:
        if r.type != BaseType("Tensor") or r.alias is not None:
            diag.error(loc_at(1, 0), "a row-wise op returns new Tensors: '-> Tensor' or '-> (Tensor a, Tensor b)'")
            return None
    for name in returns:
        if roles.get(name) == "column":
            diag.error(loc_at(1, 0), f"the return '{name}' is shaped like a column: a row-wise op returns rows "
                       "or one value per row")
            ok = False
    tensors = [a for a in schema.arguments if is_tensor(a.type)]
    scalars = [a for a in schema.arguments if isinstance(a.type, BaseType) and a.type.name in SCALAR_TYPES]
    for a in schema.arguments:
        if a not in tensors and a not in scalars:
            diag.error(loc_at(1, 0), f"argument '{a.name}' of type {a.type} cannot be used by a row-wise op; "
                       f"Tensor and {', '.join(sorted(SCALAR_TYPES))} arguments can")
            ok = False
    if not ok:
        return None
    try:
        module = pysyntax.parse(text, mode="exec", names=[a.name for a in schema.arguments])
    except SyntaxError as e:
        diag.error(loc_at(e.lineno or 1, (e.offset or 1) - 1), f"invalid row-wise program: {e.msg}")
        return None
    try:
        assignments, values = statements(module, len(returns), "row-wise program", "program")
        tr = _RowTranslator({a.name: roles[a.name] for a in tensors}, {a.name for a in scalars},
                            user_scope([a.name for a in schema.arguments] + [t.id for t, _ in assignments]))
        for target, value in assignments:
            tr.bind(target, value)
        outputs = []
        for i, (name, node) in enumerate(zip(returns, values)):
            per_row = roles[name] == "per_row"
            fn, elem, _ = tr.function(node, tr.scope.fresh(f"{PREFIX}out{i}"))
            if per_row and elem:
                raise ExpressionError(node, f"the return '{name}' has one value per row, but this value varies along the row",
                             "reduce it: sum(...), mean(...), max(...) or min(...)")
            outputs.append(RowOutput(name, per_row, fn))
    except ExpressionError as e:
        node = e.node
        diag.error(loc_at(node.lineno, node.col_offset) if node is not None else loc_at(1, 0), e.message, e.hint)
        return None
    for a in tensors:
        if a.name not in tr.used:
            diag.error(loc_at(1, 0), f"Tensor argument '{a.name}' is not used by the row-wise program")
            ok = False
    if not ok:
        return None
    if not tr.reductions:
        diag.error(loc_at(1, 0), "the program reduces nothing: use 'pointwise:' for an elementwise op",
                   "reduce over the row with sum(...), mean(...), max(...) or min(...)")
        return None
    cached, assemble = tr.cache_plan(max(r.stage for r in tr.reductions) + 1)
    reductions = tuple(replace(r, function=assemble(r.function.name)) for r in tr.reductions)
    outputs = [replace(o, function=assemble(o.function.name)) for o in outputs]
    by_role = lambda role: tuple(a.name for a in tensors if roles[a.name] == role)  # noqa: E731
    return RowProgram(
        source=text, loc=loc_at(1, 0), owner=schema.ident, row_tensors=by_role("row"), column_tensors=by_role("column"),
        per_row_tensors=by_role("per_row"),
        scalars=tuple((a.name, SCALAR_TYPES[a.type.name]) for a in scalars),
        row_dims=row_dims, reductions=reductions, steps=tuple(tr.steps), bindings=tuple(tr.row_bindings),
        outputs=tuple(outputs), floating=tr.floating, cached=cached,
        idents=tuple((n, tr.ident(n)) for n in [a.name for a in schema.arguments] + [t.id for t, _ in assignments]),
        count=tr.count,
        stage_functions=tuple(tr.scope.fresh(f"{PREFIX}stage{s}") for s in range(max(r.stage for r in reductions) + 1)))


@dataclass(frozen=True)
class _Raw:
    """An element expression as translated: its C++ and what it reads directly."""

    cpp: str
    tensors: frozenset[str]  # element tensors it names
    bindings: frozenset[str]  # element bindings it names
    costly: bool  # calls a floating-point function (exp, log, ...), itself or through a binding


# The namespace of the functions a row program computes once a row (its per-row statements,
# hoisted parts and per-row outputs): the element functions where a target declares no others.
# The stable target's element functions are branch-free polynomials for float (exp, log, tanh),
# so that its loops vectorize; once a row, one value at a time, libm's are faster (float's log
# 11 ns against 24-28 ns), and <opwrap/stable/math.h> gives those here.
ROW_FUNCTIONS = "opwrap::pw::per_row"


class _RowTranslator(Translator):
    """The pointwise translator, knowing which values vary along the row.  While one
    expression is translated, `tensors` and `direct` collect the element tensors and element
    bindings it names, `stage` the latest pass whose row values it uses and `costly` whether
    it calls a floating-point function."""

    def __init__(self, roles: dict[str, str], scalars: set[str], scope):
        elem = {n for n, r in roles.items() if r in ("row", "column")}
        super().__init__(elem, scalars | {n for n, r in roles.items() if r == "per_row"}, scope=scope)
        self.count = self.scope.fresh(f"{PREFIX}n")
        self.order = [n for n in roles if n in elem]  # schema order
        self.stage_of: dict[str, int] = {n: 0 for n, r in roles.items() if r == "per_row"}
        self.stage_of.update({n: 0 for n in scalars})
        self.elem_defs: dict[str, _Raw] = {}  # element bindings, in order
        self.raw: dict[str, _Raw] = {}  # element functions by name
        self.pass_of: dict[str, int] = {}  # a reduction's function -> its pass
        self.reductions: list[Reduction] = []
        self.steps: list[tuple[int, str, str]] = []
        self.row_bindings: list[str] = []
        self.hoisted: list[str] = []
        self.elem_root = False
        self._reset()

    def _reset(self):
        self.tensors: set[str] = set()
        self.direct: set[str] = set()
        self.stage = 0
        self.costly = False

    def _capture(self, node: ast.AST, hoist: bool = True) -> tuple[_Raw, int]:
        """Translate `node` on its own.  In an element expression, `hoist`: its parts that
        are the same for the whole row are computed once a row (`_hoist`)."""
        saved = (self.tensors, self.direct, self.stage, self.costly, self.elem_root, self.functions)
        self._reset()
        varies = self._varies(node)
        self.elem_root = hoist and varies
        self.functions = ELEMENT_FUNCTIONS if varies else ROW_FUNCTIONS
        try:
            cpp = self.value(node)
            return _Raw(cpp, frozenset(self.tensors), frozenset(self.direct), self.costly), self.stage
        finally:
            self.tensors, self.direct, self.stage, self.costly, self.elem_root, self.functions = saved

    def _varies(self, node: ast.AST) -> bool:
        """Whether `node` varies along the row (a reduction's value does not)."""
        if isinstance(node, ast.Name):
            return self.names.get(node.id) in ("tensor", "elem")
        if isinstance(node, ast.Call) and self._is_reduction(node):
            return False
        return any(self._varies(c) for c in ast.iter_child_nodes(node))

    @staticmethod
    def _is_reduction(node: ast.Call) -> bool:
        return isinstance(node.func, ast.Name) and node.func.id in REDUCTIONS and len(node.args) == 1 \
            and not node.keywords

    def _hoist(self, node: ast.AST) -> str:
        """A part of an element expression that is the same for the whole row (`log(sum(e))`
        in `x - m - log(sum(e))`): a row member, computed once a row by its stage's statements."""
        raw, stage = self._capture(node, hoist=False)
        self.costly |= raw.costly
        member = self.scope.fresh(f"{PREFIX}h{len(self.hoisted)}")
        self.hoisted.append(member)
        self.row_bindings.append(member)
        self.steps.append((stage, member, raw.cpp))
        self.stage_of[member] = stage
        self.stage = max(self.stage, stage)
        return f"{VALUE_TYPE}({member})"

    def function(self, node: ast.AST, name: str) -> tuple[ElemFunction, bool, int]:
        """The element function computing `node` (assembled by cache_plan), whether it
        varies along the row, its stage."""
        raw, stage = self._capture(node)
        self.raw[name] = raw
        return ElemFunction(name, (), (), raw.cpp), bool(raw.tensors or raw.bindings), stage

    def bind(self, target: ast.Name, node: ast.AST) -> None:
        name = target.id
        if name in self.names or name in FUNCTIONS or name in REDUCTIONS:
            raise ExpressionError(target, f"'{name}' is already defined")
        raw, stage = self._capture(node)
        self.stage_of[name] = stage
        if raw.tensors or raw.bindings:
            self.elem_defs[name] = raw
            self.names[name] = "elem"
        else:
            self.steps.append((stage, self.ident(name), raw.cpp))
            self.row_bindings.append(self.ident(name))
            self.names[name] = "row"

    def _closure(self, raw: _Raw, cached: frozenset[str]) -> tuple[set[str], set[str], set[str]]:
        """The bindings `raw` needs computed, the tensors it reads and the cached bindings it
        takes as inputs, when the `cached` ones are inputs."""
        need, tensors, inputs = set(), set(raw.tensors), set()
        todo = list(raw.bindings)
        while todo:
            b = todo.pop()
            if b in cached:
                inputs.add(b)
            elif b not in need:
                need.add(b)
                tensors |= self.elem_defs[b].tensors
                todo.extend(self.elem_defs[b].bindings)
        return need, tensors, inputs

    def _assemble(self, name: str, raw: _Raw, cached: frozenset[str]) -> ElemFunction:
        need, tensors, inputs = self._closure(raw, cached)
        return ElemFunction(name, tuple(n for n in self.order if n in tensors)
                            + tuple(b for b in self.elem_defs if b in inputs),
                            tuple((self.ident(b), d.cpp) for b, d in self.elem_defs.items() if b in need), raw.cpp,
                            raw.costly or any(self.elem_defs[b].costly for b in need))

    def cache_plan(self, output_pass: int):
        """Which costly element bindings are computed once into a row buffer (those that
        functions of two passes or more need), and a function assembling each element
        function with them as inputs."""
        passes: dict[str, set[int]] = {}
        for fn, raw in self.raw.items():
            p = self.pass_of.get(fn, output_pass)
            for b in self._closure(raw, frozenset())[0]:
                passes.setdefault(b, set()).add(p)
        cached = frozenset(b for b, ps in passes.items() if len(ps) >= 2 and self._costly(b))
        plan = tuple((b, min(passes[b]), self._assemble(self.scope.fresh(f"{PREFIX}bind_{b}"), self.elem_defs[b],
                                                                  frozenset()))
                     for b in self.elem_defs if b in cached)
        return plan, lambda fn: self._assemble(fn, self.raw[fn], cached)

    def _costly(self, b: str) -> bool:
        d = self.elem_defs[b]
        return d.costly or any(self._costly(x) for x in d.bindings)

    def value(self, node: ast.AST) -> str:
        if self.elem_root and isinstance(node, (ast.BinOp, ast.UnaryOp, ast.Call)) and not self._varies(node) \
                and not (isinstance(node, ast.Call) and self._is_reduction(node)):
            return self._hoist(node)
        if self.elem_root and isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div) \
                and not self._varies(node.right):
            # x / s, s the same for the row: x times 1 / s, the reciprocal computed once a row (as
            # aten's softmax and norms do; a vector division costs several multiplications).
            self.floating = True
            inverse = ast.copy_location(ast.BinOp(ast.Constant(1), ast.Div(), node.right), node.right)
            return f"({self.value(node.left)} * {self._hoist(inverse)})"
        if isinstance(node, ast.Name):
            kind = self.names.get(node.id)
            if kind == "elem":
                self.used.add(node.id)
                self.direct.add(node.id)
                self.stage = max(self.stage, self.stage_of[node.id])
                return self.ident(node.id)
            if kind == "row":
                self.used.add(node.id)
                self.stage = max(self.stage, self.stage_of[node.id])
                return f"{VALUE_TYPE}({self.ident(node.id)})"
            if kind == "tensor":
                self.tensors.add(node.id)
            elif kind == "scalar":
                self.stage = max(self.stage, self.stage_of.get(node.id, 0))
        return super().value(node)

    def call(self, node: ast.Call) -> str:
        if isinstance(node.func, ast.Name) and node.func.id in REDUCTIONS and len(node.args) == 1 and not node.keywords:
            return self.reduction(node.func.id, node.args[0], node)
        if isinstance(node.func, ast.Name) and node.func.id not in FUNCTIONS and node.func.id not in ALIASES \
                and node.func.id not in REDUCTIONS:
            raise ExpressionError(node.func, f"unknown function '{node.func.id}' in row-wise program",
                         did_you_mean(node.func.id, list(FUNCTIONS) + list(REDUCTIONS)))
        fn = FUNCTIONS.get(ALIASES.get(node.func.id, node.func.id)) if isinstance(node.func, ast.Name) else None
        if fn is not None and fn.floating:
            self.costly = True
        return super().call(node)

    def reduction(self, kind: str, arg: ast.AST, node: ast.Call) -> str:
        member = self.scope.fresh(f"{PREFIX}r{len(self.reductions)}")
        fn, elem, stage = self.function(arg, self.scope.fresh(f"{PREFIX}reduce{len(self.reductions)}"))
        if not elem:
            raise ExpressionError(arg, f"{kind}() reduces over the row, but its argument is the same for every element "
                         "of the row")
        if kind == "mean":
            self.floating = True
        r = Reduction(member, kind, REDUCTIONS[kind], stage + 1, fn)
        self.reductions.append(r)
        self.pass_of[fn.name] = r.stage
        if kind == "mean":  # the pass's sum becomes the mean once the pass is done
            self.steps.append((r.stage, member, f"{member} / {self.count}"))
        self.stage_of[member] = r.stage
        self.stage = max(self.stage, r.stage)
        return f"{VALUE_TYPE}({member})"


def check_declaration(decl, diag: Diagnostics, computed_in: str, odd_hint: str = "") -> None:
    """What a row-wise declaration must be in every target (the plugins of both call it): its
    dtypes declared, each one the program computes in (`computed_in`, the target's words for
    them; `odd_hint` what to do instead), and one dtype for every tensor."""
    if decl.rows is None:
        return
    if not decl.dtypes and not decl.failed("dtypes"):
        diag.error(decl.loc, "missing 'dtypes': list the floating dtypes the program is computed for")
    odd = [dt.name for dt in decl.dtypes if not dt.rowwise]
    if odd:
        diag.error(decl.field_loc("dtypes"), f"row-wise programs compute in {computed_in}, not {', '.join(odd)}",
                   odd_hint)
    if decl.dtype_vars or decl.dtype_rules:
        diag.error(decl.field_loc("dtypes"), "every tensor of a row-wise op has the dtype it dispatches on",
                   "a per-argument 'dtypes:' mapping or a 'dtype:' rule needs a hand-written kernel")
