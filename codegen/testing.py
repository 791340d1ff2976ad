"""Test inputs and checks for every op of a library, derived from its declarations.

A library's test suite collects its ops from the declarations (``declared_ops``) and, for
each op and declared dtype, asks for sample inputs built from the op's shape rule
(``sample_inputs``): dimension names get sizes, ``*runs`` get ranks, and inputs whose
contract is an expression get the size it computes, so every sample satisfies the
contract the kernel checks.  ``check_op`` then runs PyTorch's own utilities on it:
``torch.library.opcheck`` (with and without ``requires_grad``), ``gradcheck`` and
``gradgradcheck`` in float64, and a comparison with a reference implementation.

Imports torch lazily, so ``codegen`` itself never needs it.
"""

from __future__ import annotations

import math
import random
import re
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from .core import torch_compat
from .api import types
from .core.config import load_config
from .lang.derivatives import has_forward
from .core.dtypes import DTYPES, GROUPS
from .front.model import Declaration
from .lang.schema import BaseType, ListType, is_tensor, is_tensor_list, unwrap_optional
from .lang.shapes import (BinOp, Dynamic, ExprVisitor, Free, ListItem, ListLen, ListSum, Neg, Num, TensorNumel, TensorRank,
                     TensorSize, Var, names_in)


def declared_ops(root: str | Path) -> list[Declaration]:
    """The declarations of the library at ``root``, as the code generator sees them."""
    from .pipeline.passes import generate

    return list(generate(load_config(Path(root))).library.declarations)


@dataclass
class SampleInput:
    args: tuple
    kwargs: dict = field(default_factory=dict)
    name: str = ""

    def clone(self, device=None) -> "SampleInput":
        """A copy whose tensors keep their sizes, strides and storage offsets (gapped,
        transposed and expanded tensors stay so, and tensors that share memory still share
        it), on `device` (default: where they are); generators keep their state."""
        import torch

        storages: dict = {}  # the copy of each storage, so that tensors sharing one still do

        def c(v):
            if isinstance(v, torch.Tensor):
                return _copy_keeping_layout(v, storages, device)
            if isinstance(v, (list, tuple)) and any(isinstance(x, torch.Tensor) for x in v):
                return type(v)(c(x) for x in v)
            if isinstance(v, torch.Generator):
                if device is None or torch.device(device) == v.device:
                    g = torch.Generator(device=v.device)
                    g.set_state(v.get_state())
                    return g
                return torch.Generator(device=device).manual_seed(v.initial_seed())  # states differ by device
            return v
        return SampleInput(tuple(c(a) for a in self.args), {k: c(v) for k, v in self.kwargs.items()}, self.name)


def _copy_keeping_layout(t, storages: dict, device=None):
    """A copy of `t` with its layout: its storage copied (once per storage) and `t`'s view
    of it made again."""
    import torch

    target = t.device if device is None else torch.device(device)
    if t.layout != torch.strided or t.is_conj() or t.is_neg() or t.device.type == "meta":
        return t.detach().to(target, copy=True).requires_grad_(t.requires_grad)
    storage = t.untyped_storage()
    key = (t.device, storage.data_ptr(), storage.nbytes())
    if key not in storages:
        raw = torch.empty(0, dtype=torch.uint8, device=t.device).set_(storage)  # the storage's bytes
        storages[key] = raw.to(target, copy=True).untyped_storage()
    copy = torch.empty(0, dtype=t.dtype, device=target).set_(storages[key], t.storage_offset(), t.size(), t.stride())
    return copy.requires_grad_(t.requires_grad)


def differentiable_inputs(decl: Declaration) -> set[str]:
    """Tensor inputs that have a derivative formula and are not written in place."""
    d = decl.derivatives
    if d is None or not any(d.output_differentiability):
        return set()
    return {n for f in d.formulas if f.differentiable for n in f.inputs
            if not decl.schema.argument(n).is_write}


def dtype_combinations(decl: Declaration) -> list[dict[str, Any]]:
    """Every combination of the op's dtype variables (codegen/lang/dtype_rules.py): dicts from
    variable name to DType, the primary (`scalar_t`) first.  One variable: its dtypes."""
    names = [v.name for v in decl.variables]
    return [dict(zip(names, combo)) for combo in decl.dtype_combinations()]


def case_id(decl: Declaration, combo: dict[str, Any]) -> str:
    """A test id for one combination: `op-dtype`, then `variable=dtype` for each further
    dtype variable (`embedding_bag-float32-indices_t=int64`)."""
    (_, dt), *others = combo.items()
    return "-".join([decl.op_name, dt.name, *(f"{v}={d.name}" for v, d in others)])


def for_gradients(decl: Declaration, combo: dict[str, Any]) -> bool:
    """Whether gradcheck fits this combination of dtype variables: the primary one (unless it
    lists integer dtypes only: indices beside float weights), every floating one and a
    return's (to_dtype's result_t) are float64."""
    returns = set(decl.return_names)
    for i, v in enumerate(decl.variables):
        d = combo[v.name]
        primary = i == 0 and any(x.is_floating or x.is_complex for x in v.dtypes)
        if (primary or d.is_floating or v.owner in returns) and d.name != "float64":
            return False
    return True


def sample_inputs(decl: Declaration, dtype, *, requires_grad: bool = False, seed: int = 0,
                  prepare: Callable[[dict], dict] | None = None, device: str = "cpu",
                  dtypes: dict[str, Any] | None = None) -> list[SampleInput]:
    """Inputs satisfying the op's shape rule, for `dtype` (the primary dtype variable's;
    `dtypes` may give the others', by variable name, as torch.dtype or DType; by default
    the first of each).  One sample with every default, one with optional tensors and
    generators given and non-Tensor defaults changed; a pointwise op's inputs of one shape,
    broadcasting, and strided.  Integer tensors named in `index:` hold values in their
    bounds; `ScalarType` arguments a dtype the return may have; `Tensor[]` arguments one to
    three elements.  An out= op (`decl.out_arguments`) gets out tensors of the right size,
    and two samples more: outs empty, and outs of a wrong size (to be resized, with a
    warning).  `prepare` may adjust the arguments (a dict by name) of each sample, e.g. to
    sort boundaries."""
    import torch

    out = []
    # Pointwise expressions: same shapes, broadcasting shapes, and non-contiguous inputs.
    variants = ["same_shape", "broadcast", "strided"] if decl.expression is not None else ["defaults", "all_given"]
    if decl.expression is None and not any(a.default is not None or a.is_optional for a in decl.schema.arguments):
        variants.remove("all_given")  # it would be the same call
    if decl.out_arguments:
        variants += ["out_empty", "out_wrong_size"]
    for variant in variants:
        rng = random.Random(f"{decl.op_name}:{dtype}:{seed}:{variant}")
        values = _arguments(decl, dtype, rng, variant == "all_given", requires_grad, variant, dtypes=dtypes)
        if prepare is not None:
            values = prepare(dict(values))
        out.append(_to_sample(decl, values, variant))
    if device != "cpu":  # the same values on every device, so results can be compared
        out = [s.clone(device) for s in out]
    return out


class Unsatisfiable(Exception):
    """No values satisfy the op's contract for the sizes chosen (an index bound with an
    empty range, say, for a tensor that is not empty)."""


def _dtype_var_of(decl: Declaration, name: str):
    return decl.dtype_var(name)


def _dtype_for(decl: Declaration, name: str, dtype, dtypes: dict[str, Any] | None):
    """The dtype of tensor argument or return `name` in a sample whose primary dtype is
    `dtype`; None for a return whose dtype has no variable."""
    var = _dtype_var_of(decl, name)
    if var is None:
        return None
    if var.name == decl.variables[0].name:
        return dtype
    chosen = (dtypes or {}).get(var.name, var.dtypes[0])
    return chosen if not hasattr(chosen, "scalar_type") else torch_dtype(chosen)


def _arguments(decl: Declaration, dtype, rng: random.Random, all_given: bool, requires_grad: bool,
               variant: str = "", env: dict[str, Any] | None = None,
               dtypes: dict[str, Any] | None = None) -> dict[str, Any]:
    import torch

    s = decl.schema
    env = {} if env is None else env  # dimension variables and int arguments; preset ones are kept
    preset = set(env)
    shapes: dict[str, list[int]] = {}
    values: dict[str, Any] = {}
    grads = differentiable_inputs(decl) if requires_grad else set()
    outs = {a.name for a in decl.out_arguments}
    for a in s.arguments:  # non-tensor arguments first: shapes may name them
        t = unwrap_optional(a.type)
        if is_tensor(t) or is_tensor_list(t):
            continue
        if a.name in env:
            values[a.name] = env[a.name]
            continue
        if a.default is not None and not all_given:
            continue
        sample = _sample(t)
        if sample == "dtype":
            v = _scalar_type_value(decl, a, dtype, dtypes) if all_given or not a.is_optional else None
        elif sample == "generator":
            v = torch.Generator().manual_seed(rng.randrange(2**31)) if all_given or not a.is_optional else None
        else:
            v = _scalar_value(a, t, sample, rng, all_given)
        if v is not _SKIP:
            values[a.name] = v
            env[a.name] = v
    def drawn_after(a) -> int:  # a list shaped after another list after it (and after the lists it holds)
        sh = decl.shape_of(a.name)
        return 0 if sh is None or sh.each is None or sh.each.kind != "tensor" else \
            1 + drawn_after(s.argument(sh.each.source))

    for a in sorted(s.arguments, key=drawn_after):
        t = unwrap_optional(a.type)
        if not (is_tensor(t) or is_tensor_list(t)) or a.name in outs:
            continue
        if a.is_optional and not all_given:
            continue
        a_dtype = _dtype_for(decl, a.name, dtype, dtypes)
        each = decl.shape_of(a.name).each if decl.shape_of(a.name) is not None else None
        if each is not None:  # one element per item of its source list, of the shape the comprehension gives
            shapes_ = _each_shapes(each, env, shapes, rng)
            env.setdefault(_LIST_SHAPES, {})[a.name] = shapes_
            xs = [_tensor(sh, a_dtype, rng) for sh in shapes_]
            for x in xs:
                if a.name in grads and x.is_floating_point():
                    x.requires_grad_(True)
            values[a.name] = xs
            continue
        if is_tensor_list(t):  # one to three elements, each satisfying the list's contract (the first binds)
            xs = []
            for _ in range(rng.randint(1, 3)):
                shape = _input_shape(decl, a.name, env, shapes, rng) if xs == [] or decl.shape_of(a.name) else shapes[a.name]
                shapes.setdefault(a.name, shape)
                env.setdefault(_LIST_SHAPES, {}).setdefault(a.name, []).append(shape)
                xs.append(_tensor(shape, a_dtype, rng))
            for x in xs:
                if a.name in grads and x.is_floating_point():
                    x.requires_grad_(True)
            values[a.name] = xs
            continue
        if decl.expression is not None:
            x = _pointwise_input(a.name == decl.expression.tensors[0], variant, a_dtype, rng, env)
            shapes[a.name] = list(x.shape)
        else:
            shape = _input_shape(decl, a.name, env, shapes, rng)
            shapes[a.name] = shape
            x = _tensor(shape, a_dtype, rng)
        if a.name in grads and x.is_floating_point():
            x.requires_grad_(True)
        values[a.name] = x
    for r in _reductions(decl):  # the dims of `reduce(self, dim, keepdim)`: dimensions of its tensor
        x = values.get(r.tensor)
        if r.dims in values and r.dims not in preset and isinstance(x, torch.Tensor):
            values[r.dims] = env[r.dims] = _reduced_dims_value(s.argument(r.dims).type, x.dim(), rng)
    for b in decl.index_bounds:  # integer values in [low, high); a tensor list's in every element
        x = values.get(b.argument)
        if not isinstance(x, (torch.Tensor, list)):
            continue
        low, high = evaluate(b.low, env, shapes), evaluate(b.high, env, shapes)
        env.setdefault(_INDEX_RANGES, {})[b.argument] = (low, high)
        g = torch.Generator().manual_seed(rng.randrange(2**31))

        def drawn(t):
            if t is None:
                return None
            if high <= low and t.numel():
                raise Unsatisfiable(f"{decl.op_name}: '{b.argument}' must hold values in [{low}, {high})")
            return torch.randint(low, max(high, low + 1), t.shape, generator=g, dtype=torch.int64).to(t.dtype)

        values[b.argument] = [drawn(t) for t in x] if isinstance(x, list) else drawn(x)
    for a in decl.out_arguments:  # after the inputs: their size and dtype are the result's
        values[a.name] = _out_tensor(decl, a, variant, dtype, dtypes, values, env, shapes, rng)
    return values


def _reductions(decl: Declaration) -> list:
    """The `reduce(self, dim, keepdim)` shapes of the op's outputs (codegen/lang/shapes.py's Reduction)."""
    return [sh.reduce for sh in decl.shapes if sh is not None and sh.reduce is not None]


def _reduced_dims_value(t, rank: int, rng: random.Random) -> Any:
    """A valid value of a reduction's dims argument of type `t` for a tensor of `rank`
    dimensions: some of its dimensions, each from the front or the back (-1 the last); for
    an optional argument sometimes None, for a list sometimes [] (both: every dimension)."""
    n = max(rank, 1)
    picked = [d - n if rng.random() < 0.5 else d for d in rng.sample(range(n), rng.randint(1, n))]
    inner = unwrap_optional(t)
    if not isinstance(inner, ListType):
        return None if t != inner and rng.random() < 0.25 else picked[0]
    if t != inner and rng.random() < 0.2:
        return None
    return [] if rng.random() < 0.15 else picked


def _from_front(dims: Any, rank: int) -> Any:
    """A reduction's dims (an int or a list) counted from the front of a tensor of `rank`
    dimensions."""
    n = max(rank, 1)
    return dims % n if isinstance(dims, int) else [d % n for d in dims]


_INDEX_RANGES = "__index_ranges"  # env key: {argument: (low, high)} of the index bounds, as evaluated


def _scalar_type_value(decl: Declaration, a, dtype, dtypes):
    """A dtype the return whose rule reads `a` may have: its variable's (from the mapping),
    else the primary dtype."""
    for name in decl.return_names:
        rule = decl.output_dtype_rule(name)
        if rule is not None and rule.kind == "arg" and rule.names[0] == a.name:
            d = _dtype_for(decl, name, dtype, dtypes)
            if d is not None:
                return d
    return dtype


def _out_tensor(decl: Declaration, a, variant: str, dtype, dtypes, values: dict, env: dict, shapes: dict,
                rng: random.Random):
    """An out= argument: the result's dtype; its size right, empty (`out_empty`) or wrong
    (`out_wrong_size`: one more row, or two elements for a 0-d result)."""
    import torch

    ret = next((n for n, r in zip(decl.return_names, decl.schema.returns)
                if decl.schema.aliased_argument(r) is not None and decl.schema.aliased_argument(r).name == a.name), None)
    rule = decl.output_dtype_rule(ret) if ret is not None else None
    out_dtype = (_rule_dtype(decl, rule, values, torch) if rule is not None else None) \
        or _dtype_for(decl, a.name, dtype, dtypes)
    if variant == "out_empty":
        return torch.empty(0, dtype=out_dtype)
    if decl.expression is not None:
        x = _pointwise_input(True, variant, out_dtype, rng, env)
        shape = list(x.shape)
    else:
        try:
            shape = _input_shape(decl, a.name, env, shapes, rng)
        except Unsatisfiable:  # a size only the kernel knows: every out is resized
            return _tensor([2] if variant == "out_wrong_size" else [0], out_dtype, rng)
        x = _tensor(shape, out_dtype, rng)
    if variant == "out_wrong_size":
        return _tensor([shape[0] + 1, *shape[1:]] if shape else [2], out_dtype, rng)
    return x


def _to_sample(decl: Declaration, values: dict[str, Any], name: str) -> SampleInput:
    args, kwargs = [], {}
    skipped = False  # after a left-out argument, the rest go by name
    for a in decl.schema.arguments:
        if a.name not in values:
            skipped = True
            continue
        if a.kwarg_only or skipped:
            kwargs[a.name] = values[a.name]
        else:
            args.append(values[a.name])
    return SampleInput(tuple(args), kwargs, name)


_SKIP = object()


def _sample(t) -> str | None:
    """The type table's `sample` column for type `t` (codegen/api/types.py), None for a type
    it has no row for."""
    try:
        return types.row(t).sample
    except types.UnsupportedType:
        return None


# The sample values of the type table's `sample` column (types.SAMPLES), but for the ones
# made from the declaration: (t, rng, changed) -> value.
_SAMPLE_VALUES: dict[str, Callable[[Any, random.Random, bool], Any]] = {
    "int": lambda t, rng, changed: rng.randint(1, 4),
    "ints": lambda t, rng, changed: [rng.randint(1, 4) for _ in range(t.size or rng.randint(1, 3))],
    "float": lambda t, rng, changed: 0.5 if changed else 1.5,
    "bool": lambda t, rng, changed: changed,
}


def _scalar_value(a, t, sample: str | None, rng: random.Random, changed: bool):
    if sample in _SAMPLE_VALUES:
        return _SAMPLE_VALUES[sample](t, rng, changed)
    if sample == "str" and a.default is None:
        return ""  # no value fits every op: `prepare` gives one
    if a.default is not None:
        return _SKIP
    raise NotImplementedError(f"no sample value for argument '{a.name}' of type {a.type}")


def _pointwise_input(first: bool, variant: str, dtype, rng: random.Random, env: dict):
    """An input of a pointwise op: all of one shape; or the others broadcasting against the
    first (a suffix of its shape with some sizes 1); or transposed, non-contiguous views."""
    shape = env.setdefault("__pointwise_shape", [rng.randint(2, 5) for _ in range(3)])
    if variant == "broadcast" and not first:
        suffix = shape[rng.randint(1, len(shape) - 1):]
        return _tensor([1 if rng.random() < 0.3 else n for n in suffix], dtype, rng)
    if variant == "strided":
        return _tensor(list(reversed(shape)), dtype, rng).permute(2, 1, 0)
    return _tensor(shape, dtype, rng)


def _input_shape(decl: Declaration, name: str, env: dict, shapes: dict, rng: random.Random) -> list[int]:
    """A shape satisfying `name`'s contract: its names take the values bound so far (an
    unbound one, alone in a dimension or in a linear expression such as `2 * H`, is bound
    here), `_` any size, runs their bound dimensions."""
    low = env.get(_MIN_FREE_SIZE, 1)
    shape = decl.shape_of(name)
    if shape is None:  # no contract: any shape
        return [rng.randint(low, 4) for _ in range(rng.randint(1, 3))]
    if shape.whole is not None:
        w = shape.whole
        return list(shapes[w.source]) if w.is_tensor else list(env[w.source])
    if shape.dims is None:
        raise Unsatisfiable(f"{decl.op_name}: '{name}' has one shape per element of another list ({shape.text})")
    out: list[int] = []
    for d in shape.dims:
        if d.star:
            run = env.setdefault(d.expr.name, [rng.randint(1, 3) for _ in range(rng.randint(0, 2))])
            out.extend(run)
        elif isinstance(d.expr, Free):
            out.append(rng.randint(low, 4))
        elif isinstance(d.expr, Dynamic):
            raise Unsatisfiable(f"{decl.op_name}: '{name}' has a size only the kernel knows ({d.text})")
        else:
            unbound = sorted({v for v in names_in(d.expr) if v not in env})
            for _ in range(20):  # values that make the size at least `low`
                trial = {**env, **{v: rng.randint(low, 4) for v in unbound}}
                if evaluate(d.expr, trial, shapes) >= low:
                    break
            env.update({v: trial[v] for v in unbound})
            out.append(evaluate(d.expr, env, shapes))
    return out


_LIST_SHAPES = "__list_shapes"  # env key: {Tensor[] argument: [the shape of each element]}


def _each_shapes(each, env: dict, shapes: dict, rng: random.Random) -> list[list[int]]:
    """The element shapes of an input list shaped after another (`[p.shape for p in params]`,
    `[[s, D] for s in sizes]`, `[[i, _] for i in range(n)]`): one per item of the source."""
    low = env.get(_MIN_FREE_SIZE, 1)
    if each.kind == "tensor":
        items = env[_LIST_SHAPES][each.source]
        if each.like:
            return [list(sh) for sh in items]
        scopes = [(env, {**shapes, each.var: list(sh)}) for sh in items]
    else:
        items = env[each.source] if each.kind == "int" else range(evaluate(each.length, env, shapes))
        scopes = [({**env, each.var: v}, shapes) for v in items]
    out = []
    for e, sh in scopes:
        dims: list[int] = []
        for d in each.dims:
            if d.star:
                dims.extend(env[d.expr.name])
            elif isinstance(d.expr, Free):
                dims.append(rng.randint(low, 4))
            else:
                dims.append(evaluate(d.expr, e, sh))
        out.append(dims)
    return out


def evaluate(e, env: dict, shapes: dict[str, list[int]]) -> int:
    """The value of a shape expression, given dimension variables and int arguments
    (`env`; a Tensor[] argument's element shapes under env[_LIST_SHAPES]) and input shapes."""
    return _Evaluator(env, shapes).visit(e)


class _Evaluator(ExprVisitor[int]):
    def __init__(self, env: dict, shapes: dict[str, list[int]]):
        self.env, self.shapes = env, shapes

    def visit_Num(self, e: Num) -> int:
        return e.value

    def visit_Var(self, e: Var) -> int:
        return self.env[e.name]

    def visit_TensorSize(self, e: TensorSize) -> int:
        return self.shapes[e.tensor][self.visit(e.dim)]

    def visit_TensorRank(self, e: TensorRank) -> int:
        return len(self.shapes[e.tensor])

    def visit_TensorNumel(self, e: TensorNumel) -> int:
        return math.prod(self.shapes[e.tensor])

    def visit_ListItem(self, e: ListItem) -> int:
        return self.env[e.list][self.visit(e.index)]

    def visit_ListLen(self, e: ListLen) -> int:
        lists = self.env.get(_LIST_SHAPES, {})
        return len(lists[e.list]) if e.list in lists else len(self.env[e.list])

    def visit_ListSum(self, e: ListSum) -> int:
        if e.of_tensors:
            return sum(_Evaluator(self.env, {**self.shapes, e.var: list(sh)}).visit(e.body)
                       for sh in self.env[_LIST_SHAPES][e.list])
        return sum(_Evaluator({**self.env, e.var: v}, self.shapes).visit(e.body) for v in self.env[e.list])

    def visit_Neg(self, e: Neg) -> int:
        return -self.visit(e.operand)

    def visit_BinOp(self, e: BinOp) -> int:
        lhs, rhs = self.visit(e.lhs), self.visit(e.rhs)
        return {"+": lhs + rhs, "-": lhs - rhs, "*": lhs * rhs, "//": lhs // rhs if rhs else 0}[e.op]

    def visit_Dynamic(self, e: Dynamic) -> int:
        raise TypeError(e)  # only the kernel knows it

    def visit_Free(self, e: Free) -> int:
        raise TypeError(e)  # any size: no one value


def _tensor(shape, dtype, rng: random.Random):
    import torch

    g = torch.Generator().manual_seed(rng.randrange(2**31))
    if dtype.is_floating_point or dtype.is_complex:
        return torch.randn(shape, generator=g, dtype=torch.float64).to(dtype)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    if dtype in (torch.uint16, torch.uint32, torch.uint64):  # values a signed reference holds
        return torch.randint(0, 10, shape, generator=g, dtype=torch.int64).to(dtype)
    return torch.randint(-9, 10, shape, generator=g, dtype=torch.int64).to(dtype)


def torch_dtype(d):
    import torch

    return getattr(torch, d.name)


def call(op, sample: SampleInput):
    return op(*sample.args, **sample.kwargs)


def as_tuple(x) -> tuple:
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


def check_reference(decl: Declaration, op, sample: SampleInput, reference: Callable, *,
                    layout: str | None = None) -> None:
    """The op's results equal the reference's, computed in float64 for floating inputs and
    cast to the result's declared dtype, within the default tolerance of that dtype.

    - The op gets a copy of the sample that keeps every tensor's strides, and a spy on the
      op (`LayoutSpy`) asserts that the tensors reaching it have the sample's sizes and
      strides; `layout` says what the sample is for: "non-contiguous" (every tensor of more
      than one element arrives non-contiguous) or "expanded" (every input of more than one
      element arrives with a stride 0).
    - Each result's dtype is the declaration's dtype rule evaluated on the sample
      (`expected_dtypes`), or where the rule gives none (the dtype the op dispatches on)
      the op's fake kernel's (FakeTensorMode).
    - In-place and out= ops are compared through the argument they write, which must be
      the result; an out= argument of the wrong size must be resized with aten's warning."""
    import warnings

    import torch

    ours = sample.clone()
    with warnings.catch_warnings(record=True) as caught, _stderr() as stderr, LayoutSpy(decl) as spy, \
            torch.random.fork_rng():
        warnings.simplefilter("always")
        torch.manual_seed(0)  # a random op draws what its reference draws, generator given or not
        result = call(op, ours)
    _check_layout(decl, sample, spy, layout)
    if sample.name == "out_wrong_size":  # a C++ TORCH_WARN reaches Python's warnings only through torch's own bindings
        assert any("was resized" in str(w.message) for w in caught) or "was resized" in stderr(), \
            f"{decl.op_name}: an out= argument of the wrong size was resized without aten's warning"
    upcast = SampleInput(*_map_tensors(sample.clone(), lambda t: (t.double() if t.is_floating_point() else t).detach().contiguous()))
    with torch.random.fork_rng():
        torch.manual_seed(0)
        expected = _results(decl, reference(*upcast.args, **upcast.kwargs))
    actual = _results(decl, result)
    assert len(actual) == len(expected), f"{decl.op_name}: {len(actual)} results, reference gave {len(expected)}"
    dtypes = expected_dtypes(decl, sample)
    # the fake kernel only where the rule gives no dtype here: running it is slow (see
    # docs/bundled-ops.md), and opcheck's test_faketensor compares the fake kernel's dtypes
    # with the real ones' in any case
    fake = fake_dtypes(decl, op, sample) if None in dtypes else [None] * len(dtypes)
    for ret, got, want, dtype, fake_dtype in zip(decl.schema.returns, actual, expected, dtypes, fake):
        aliased = decl.schema.aliased_argument(ret)
        if aliased is not None:
            written = bind(decl, ours)[aliased.name]
            assert got is written or got.data_ptr() == written.data_ptr(), \
                f"{decl.op_name}: the result must be the '{aliased.name}' argument itself"
        if isinstance(got, (list, tuple)) and all(isinstance(g, torch.Tensor) for g in got):  # a Tensor[] return
            assert len(got) == len(want), f"{decl.op_name}: a list of {len(got)} tensors, the reference's has {len(want)}"
            fakes = fake_dtype if isinstance(fake_dtype, list) else [fake_dtype] * len(got)
            for g, w, f in zip(got, want, fakes):
                _compare(decl, g, w, dtype, f)
        elif isinstance(got, torch.Tensor):
            _compare(decl, got, want, dtype, fake_dtype)
        else:
            assert got == want, f"{decl.op_name}: {got!r} differs from its reference {want!r}"
    # written arguments the op does not return: as the reference left its copies of them
    returned = {a.name for r in decl.schema.returns if (a := decl.schema.aliased_argument(r)) is not None}
    mine, theirs = bind(decl, ours), bind(decl, upcast)
    for a in decl.schema.arguments:
        if not a.is_write or a.name in returned:
            continue
        got, want = mine.get(a.name), theirs.get(a.name)
        if isinstance(got, torch.Tensor):
            torch.testing.assert_close(got.detach(), want.to(got.dtype), equal_nan=True,
                                       msg=lambda m: f"{decl.op_name}: '{a.name}' as written differs from its reference: {m}")
        elif isinstance(got, (list, tuple)):  # a Tensor(a!)[]: element by element
            for i, (g, w) in enumerate(zip(got, want)):
                if isinstance(g, torch.Tensor):
                    torch.testing.assert_close(g.detach(), w.to(g.dtype), equal_nan=True,
                                               msg=lambda m: f"{decl.op_name}: '{a.name}[{i}]' as written differs "
                                                             f"from its reference: {m}")


def _results(decl: Declaration, result) -> tuple:
    """The op's (or reference's) results, one per return: a Tensor[] return is one list."""
    if len(decl.schema.returns) == 1:
        return (result,)
    return as_tuple(result)


def _compare(decl: Declaration, got, want, dtype, fake_dtype) -> None:
    import torch

    if dtype is not None:
        assert got.dtype == dtype, f"{decl.op_name}: result dtype {got.dtype}, but its dtype rule gives {dtype}"
    if fake_dtype is not None:
        assert got.dtype == fake_dtype, f"{decl.op_name}: result dtype {got.dtype}, its fake kernel's {fake_dtype}"
    want = torch.as_tensor(want).to(got.dtype)
    torch.testing.assert_close(got.detach(), want, equal_nan=True,
                               msg=lambda m: f"{decl.op_name} ({got.dtype}) differs from its reference: {m}")


@contextmanager
def _stderr():
    """What is written to file descriptor 2 in the block (C++ warnings printed by c10's
    default handler), as a function called after it."""
    import os
    import sys
    import tempfile

    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as f:
        text = ""
        os.dup2(f.fileno(), 2)
        try:
            yield lambda: text
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            f.seek(0)
            text = f.read().decode(errors="replace")
            sys.stderr.write(text)  # still shown


def bind(decl: Declaration, sample: SampleInput) -> dict[str, Any]:
    """The sample's values by argument name (positional ones in schema order, the rest by
    keyword), as the op receives them."""
    positional = [a.name for a in decl.schema.arguments if not a.kwarg_only]
    return {**dict(zip(positional, sample.args)), **sample.kwargs}


def _is_decl_op(decl: Declaration, func) -> bool:
    schema = getattr(func, "_schema", None)
    return (schema is not None and schema.name.split("::")[-1] == decl.name
            and schema.overload_name == decl.overload)


def _layout_of(v):
    import torch

    if isinstance(v, torch.Tensor):
        return (tuple(v.shape), v.stride(), v.storage_offset())
    if isinstance(v, (list, tuple)) and any(isinstance(x, torch.Tensor) for x in v):
        return [_layout_of(x) for x in v]
    return None


def LayoutSpy(decl: Declaration):
    """A TorchDispatchMode recording, for each call of `decl`'s op below autograd (where
    its kernel wrapper runs), the layout (sizes, strides, storage offset) of each tensor
    argument by name: `spy.calls` is a list of {name: layout}."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Spy(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.calls: list[dict[str, Any]] = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if _is_decl_op(decl, func):
                values = bind(decl, SampleInput(tuple(args), dict(kwargs)))
                self.calls.append({k: lay for k, v in values.items() if (lay := _layout_of(v)) is not None})
            return func(*args, **kwargs)

    return Spy()


def _check_layout(decl: Declaration, sample: SampleInput, spy, layout: str | None) -> None:
    assert len(spy.calls) == 1, f"{decl.op_name}: the op was called {len(spy.calls)} times, not once"
    received = spy.calls[0]
    written = {a.name for a in decl.schema.arguments if a.is_write}
    for name, value in bind(decl, sample).items():
        want = _layout_of(value)
        if want is None:
            continue
        got = received.get(name)
        assert got == want, (f"{decl.op_name}: '{name}' reached the op with (sizes, strides, offset) {got}, "
                             f"but the sample's is {want}")
        for size, stride, _ in (got if isinstance(got, list) else [got]):
            if math.prod(size) <= 1:
                continue
            if layout == "non-contiguous":
                assert not _is_contiguous(size, stride), \
                    f"{decl.op_name}: '{name}' reached the op contiguous in a non-contiguous case: {stride}"
            elif layout == "expanded" and name not in written:
                assert any(st == 0 and n > 1 for n, st in zip(size, stride)), \
                    f"{decl.op_name}: '{name}' reached the op not expanded in an expanded case: {stride}"


def _is_contiguous(size, stride) -> bool:
    expected = 1
    for n, st in reversed(list(zip(size, stride))):
        if n != 1 and st != expected:
            return False
        expected *= n
    return True


def expected_dtypes(decl: Declaration, sample: SampleInput) -> list:
    """The dtype of each return by the declaration's dtype rule, evaluated on the sample's
    values (None where the rule is not a static one: the dtype the op dispatches on)."""
    import torch

    values = bind(decl, sample)
    rule_of = getattr(decl, "output_dtype_rule", None)
    out = []
    for name in decl.return_names:
        if rule_of is None:  # a model before dtype rules: a dtype name or a tensor argument
            text = decl.output_dtype(name)
            given = values.get(text)
            out.append(getattr(torch, text) if text in DTYPES else given.dtype if isinstance(given, torch.Tensor) else None)
            continue
        rule = rule_of(name)
        out.append(None if rule is None else _rule_dtype(decl, rule, values, torch))
    return out


def _rule_dtype(decl: Declaration, rule, values: dict, torch):
    if rule.kind == "dtype":
        return getattr(torch, rule.names[0])
    if rule.kind == "tensor":
        return values[rule.names[0]].dtype
    if rule.kind == "promote":
        from torch._prims_common import ELEMENTWISE_TYPE_PROMOTION_KIND, elementwise_dtypes
        return elementwise_dtypes(*(values[n] for n in rule.names),
                                  type_promotion_kind=ELEMENTWISE_TYPE_PROMOTION_KIND.DEFAULT)[1]
    if rule.kind == "arg":
        a = decl.schema.argument(rule.names[0])
        given = values.get(a.name, None)
        if given is None and a.default is not None and a.default.value is not None:
            return None  # a default dtype written in the schema: the fake kernel says it
        if given is not None:
            return given
        if rule.fallback == "default":
            return torch.get_default_dtype()
        if rule.integers:
            return _integers(values[rule.fallback].dtype, torch)
        return values[rule.fallback].dtype if rule.fallback else None
    if rule.kind == "integers":
        return _integers(values[rule.names[0]].dtype, torch)
    if rule.kind == "given":  # an optional tensor's dtype where given
        given = values.get(rule.names[0])
        if given is not None:
            return given.dtype
        if rule.fallback == "default":
            return torch.get_default_dtype()
        return getattr(torch, rule.fallback) if rule.fallback in DTYPES else values[rule.fallback].dtype
    raise ValueError(f"unknown dtype rule kind {rule.kind!r}")


def _integers(dtype, torch):
    """`promote_integers`: an integral or bool dtype is int64."""
    return dtype if dtype.is_floating_point or dtype.is_complex else torch.int64


def fake_dtypes(decl: Declaration, op, sample: SampleInput) -> list:
    """The dtype of each Tensor return of the op's fake kernel on fake copies of the sample
    (None for other returns)."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    mode = FakeTensorMode(shape_env=ShapeEnv())  # a shape env: data-dependent sizes become symbols
    fake = lambda v: mode.from_tensor(v) if isinstance(v, torch.Tensor) else v  # noqa: E731
    copy = sample.clone()
    args = tuple(type(a)(fake(x) for x in a) if isinstance(a, (list, tuple)) else fake(a) for a in copy.args)
    kwargs = {k: type(v)(fake(x) for x in v) if isinstance(v, (list, tuple)) else fake(v) for k, v in copy.kwargs.items()}
    import warnings

    with mode, warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*was resized")  # an out= resized: check_reference checks the real op's
        result = op(*args, **kwargs)
    return [r.dtype if isinstance(r, torch.Tensor) else [x.dtype for x in r]
            if isinstance(r, (list, tuple)) and all(isinstance(x, torch.Tensor) for x in r) else None
            for r in _results(decl, result)]


def _map_tensors(sample: SampleInput, fn):
    import torch

    def f(v):
        if isinstance(v, torch.Tensor):
            return fn(v)
        if isinstance(v, (list, tuple)) and any(isinstance(x, torch.Tensor) for x in v):  # a Tensor[]'s elements
            return type(v)(f(x) for x in v)
        return v
    return tuple(f(a) for a in sample.args), {k: f(v) for k, v in sample.kwargs.items()}


def check_gradients(decl: Declaration, op, sample: SampleInput) -> None:
    """gradcheck (and its forward-mode check where the op has forward derivatives), and
    gradgradcheck (forward over reverse too) unless the op is once_differentiable (then a double
    backward must raise).  `sample` is float64 with requires_grad set on the inputs that
    have formulas.  In-place ops are checked on a copy of the written argument, so its
    gradient flows too."""
    import torch

    names = [a.name for a in decl.schema.arguments if not a.kwarg_only]
    written = {a.name for a in decl.schema.arguments if a.is_write}
    inputs = [list(v) if isinstance(v, (list, tuple)) else v for v in sample.args]
    diff = differentiable_inputs(decl)
    for i, n in enumerate(names[: len(inputs)]):
        if n in written and isinstance(inputs[i], torch.Tensor) and inputs[i].dtype.is_floating_point:
            inputs[i] = inputs[i].detach().clone().requires_grad_(True)
    # (argument, element of a Tensor[] or None) of each tensor that requires grad
    positions = [(i, None) for i, v in enumerate(inputs) if isinstance(v, torch.Tensor) and v.requires_grad] + [
        (i, j) for i, v in enumerate(inputs) if isinstance(v, list)
        for j, x in enumerate(v) if isinstance(x, torch.Tensor) and x.requires_grad]

    fn = differentiable_function(decl, op, inputs, sample.kwargs, positions)
    tensors = tuple(inputs[i] if j is None else inputs[i][j] for i, j in positions)
    given = {n for n, v in bind(decl, sample).items() if v is not None}
    if not tensors and diff and not diff & given:  # its differentiable inputs are optional and not given
        return
    assert tensors or not diff, f"{decl.op_name}: no input requires grad"
    if not tensors:
        return
    # Forward mode (jvp, jacfwd) too, where the op has forward derivatives (a 'result:' formula,
    # or derived for a pointwise op): its tangents against the numerical Jacobian.
    forward = has_forward(decl)
    assert torch.autograd.gradcheck(fn, tensors, check_undefined_grad=True, check_forward_ad=forward)
    if decl.derivatives.once_differentiable:
        outs = fn(*tensors)
        grads = torch.autograd.grad(sum(o.sum() for o in outs), tensors, create_graph=True)
        try:
            sum(g.sum() for g in grads).backward()
        except RuntimeError as e:
            assert "once_differentiable" in str(e), e
        else:
            raise AssertionError(f"{decl.op_name} is once_differentiable, but a double backward did not raise")
    else:
        # Forward over reverse (torch.func.hessian's jacfwd of jacrev) as well as reverse over
        # reverse: the backward formulas' own forward derivatives.
        assert torch.autograd.gradgradcheck(fn, tensors, check_fwd_over_rev=forward)


def differentiable_function(decl: Declaration, op, inputs: list, kwargs: dict, positions: list) -> Callable:
    """The op as a pure function of the tensors at `positions` (argument index, and the
    element of a Tensor[] or None), giving its differentiable results flattened: what
    gradcheck and the torch.func transforms take.  `inputs` holds the other arguments (a
    Tensor[] as a list).  Written arguments are cloned first, so calls do not accumulate,
    and a random op draws the same numbers on every call."""
    import torch

    names = [a.name for a in decl.schema.arguments if not a.kwarg_only]
    written = {a.name for a in decl.schema.arguments if a.is_write}

    def fn(*tensors):
        args = [list(v) if isinstance(v, list) else v for v in inputs]
        for (i, j), t in zip(positions, tensors):
            if j is None:
                args[i] = t
            else:
                args[i][j] = t
        for i, n in enumerate(names[: len(args)]):
            if n in written and isinstance(args[i], torch.Tensor):
                args[i] = args[i].clone()
        outs = _results(decl, op(*args, **kwargs))
        keep = [o for o, ok in zip(outs, decl.derivatives.output_differentiability) if ok]
        return tuple(x for o in keep for x in (o if isinstance(o, (list, tuple)) else [o]))

    if any(unwrap_optional(a.type) == BaseType("Generator") for a in decl.schema.arguments):  # a random op
        return _same_draws(fn, (*inputs, *kwargs.values()))
    return fn


def _same_draws(fn, values):
    """`fn`, drawing the same random numbers on every call (a random op under gradcheck):
    the default generator seeded and each given generator's state restored, per call."""
    import torch

    generators = [(g, g.get_state()) for g in values if isinstance(g, torch.Generator)]

    def seeded(*args):
        with torch.random.fork_rng():
            torch.manual_seed(0)
            for g, state in generators:
                g.set_state(state)
            return fn(*args)
    return seeded


def check_same_as_cpu(decl: Declaration, op, sample: SampleInput, device) -> None:
    """The op on `device` gives the CPU kernel's results: each return (each element of a
    Tensor[] return), and each argument it writes (all an op that returns nothing gives).  The
    sample goes to `device` whole, tensors in lists included, with its layouts kept."""
    import torch

    cpu, other = sample.clone(), sample.clone(device)
    state = torch.get_rng_state()
    want = call(op, cpu)
    torch.set_rng_state(state)  # a random op's second call on the CPU draws what the first drew
    got = call(op, other)
    pairs = [(f"return {i}", w, g) for i, (w, g) in enumerate(zip(_flat(want), _flat(got)))]
    names = [a.name for a in decl.schema.arguments if not a.kwarg_only]
    for a in decl.schema.arguments:
        if a.is_write:
            pick = (lambda s: s.args[names.index(a.name)]) if a.name in names[: len(sample.args)] else (
                lambda s: s.kwargs.get(a.name))
            pairs += [(f"argument '{a.name}'", w, g) for w, g in zip(_flat(pick(cpu)), _flat(pick(other)))]
    for what, w, g in pairs:
        assert g.device.type == torch.device(device).type, f"{decl.op_name}: {what} on {g.device}"
        torch.testing.assert_close(g.detach().cpu(), w.detach(), equal_nan=True,
                                   msg=lambda m: f"{decl.op_name} on {device} ({g.dtype}), {what}, differs from CPU: {m}")


def _flat(value) -> list:
    """The tensors of a return or argument: itself, the elements of a list or tuple, none for None."""
    import torch

    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _flat(v)]
    return []


def check_opcheck(op, sample: SampleInput) -> None:
    """torch.library.opcheck with its default test utilities (for some samples all but
    test_aot_dispatch_dynamic: below)."""
    import torch

    import warnings

    # opcheck's test_aot_dispatch_dynamic, left out where it cannot pass: a sample whose
    # out= arguments must be resized (it fails for aten's own add.out), or one holding a
    # torch.Generator (it reseeds only the default generator between the eager and the
    # traced call, so a given one draws other numbers the second time)
    resized = sample.name in ("out_empty", "out_wrong_size")
    seeded = any(isinstance(v, torch.Generator) for v in (*sample.args, *sample.kwargs.values()))
    # Before torch 2.13, AOT dispatch refuses every op that returns a written argument
    # (torch_compat.FEATURES, "mutable_returns"): it is left out, and must fail as recorded.
    old_torch = returns_written(op) and not torch_compat.supports("mutable_returns")
    utils = ["test_schema", "test_autograd_registration", "test_faketensor", "test_aot_dispatch_dynamic"]
    if resized or seeded or old_torch:
        utils.remove("test_aot_dispatch_dynamic")
    # opcheck's test_schema compares each input before and after the call with
    # torch.allclose, which torch implements for no float8 dtype ("mul_cpu_reduced_float" not
    # implemented for 'Float8_e4m3fn'): left out for a sample holding a float8 tensor.
    if any(t.dtype in _float8_dtypes() for t in _sample_tensors(sample)):
        utils.remove("test_schema")
    utils = {"test_utils": tuple(utils)} if len(utils) < 4 else {}
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*was resized")  # the fake kernel's, as aten's: expected here
        result = torch.library.opcheck(op, sample.args, sample.kwargs, **utils)
        if old_torch and not (resized or seeded):
            aot = torch.library.opcheck(op, sample.args, sample.kwargs, test_utils="test_aot_dispatch_dynamic",
                                        raise_exception=False)["test_aot_dispatch_dynamic"]
            assert re.search(torch_compat.FEATURE["mutable_returns"].error or "", str(aot)), aot
    failed = {k: v for k, v in result.items() if v != "SUCCESS"}
    assert not failed, failed


def _float8_dtypes() -> tuple:
    return tuple(torch_dtype(DTYPES[n]) for n in GROUPS["float8"])


def _sample_tensors(sample: SampleInput) -> list:
    """The sample's tensors, those in lists included."""
    import torch

    out = []
    for v in (*sample.args, *sample.kwargs.values()):
        items = v if isinstance(v, (list, tuple)) else (v,)
        out.extend(t for t in items if isinstance(t, torch.Tensor))
    return out


def returns_written(op) -> bool:
    """Whether the OpOverload `op` returns one of its written arguments (Tensor(a!))."""
    return any(r.alias_info is not None and r.alias_info.is_write for r in op._schema.returns)


# --------------------------------------------------------------------------- misuse
@dataclass
class Misuse:
    """A call that breaks the op's contract, or stresses its layout handling.  `names` is
    None when the call is valid and must match the reference (zero-size, non-contiguous and
    expanded inputs); otherwise the RuntimeError must start with the op's name and name one
    of `names` (the argument at fault, or the output it would make)."""

    case: str
    sample: SampleInput
    names: tuple[str, ...] | None
    layout: str | None = None  # "non-contiguous" or "expanded": how the inputs must reach the op


# Dtypes tried where an op's declared dtypes leave one out, in this order.
_OTHER_DTYPES = ("complex64", "bool", "int16", "float16", "int64", "float64", "float32")
HUGE = 2**62


def misuse_cases(decl: Declaration, dtype, *, prepare: Callable[[dict], dict] | None = None,
                 dtypes: dict[str, Any] | None = None) -> list[Misuse]:
    """Calls of `decl` (for `dtype`, and `dtypes` for the other dtype variables as in
    `sample_inputs`) with the wrong dtype, a tensor on another device, the wrong rank, sizes
    that break the shape rule or do not broadcast, index values out of their bounds,
    zero-size inputs, non-contiguous and expanded (stride 0) inputs, in-place and out=
    targets that are expanded or overlap an input, and sizes past what int64 or memory
    hold; derived from the declaration, so every op of a library gets them.  An out=
    argument of another size is no misuse (it is resized), one of another dtype is."""
    import torch

    rng = random.Random(f"{decl.op_name}:{dtype}:misuse")
    pointwise = decl.expression is not None
    variant = "same_shape" if pointwise else "defaults"
    # every Tensor argument (optional ones given), and the required ones
    checked = [a for a in decl.schema.arguments if is_tensor(unwrap_optional(a.type)) and not isinstance(a.type, ListType)]
    tensors = [a for a in checked if not a.is_optional]
    outs = {a.name for a in decl.out_arguments}
    outputs = (*decl.return_names, *sorted(outs))  # what an allocation too large is named by
    cases: list[Misuse] = []

    def values(env: dict | None = None, given: bool = False) -> dict[str, Any]:
        """Valid arguments (`given`: optional tensors and non-default values too)."""
        v = _arguments(decl, dtype, random.Random(f"{decl.op_name}:{dtype}:misuse"), given, False, variant, env, dtypes)
        return prepare(dict(v)) if prepare is not None else v

    def add(case: str, v: dict[str, Any], names, layout: str | None = None) -> None:
        cases.append(Misuse(case, _to_sample(decl, v, case), names, layout))

    # dtypes: one the op does not declare; for a pointwise op every input (they promote)
    declared = {torch_dtype(d) for d in decl.dtypes}
    if tensors:
        bad = next(getattr(torch, n) for n in _OTHER_DTYPES if getattr(torch, n) not in declared)
        v = values()
        for a in (tensors if pointwise else tensors[:1]):  # a pointwise op's outs too: nothing to cast
            v[a.name] = v[a.name].to(bad)
        add(f"{tensors[0].name} as {bad}", v, (tensors[0].name,))
        # each further input: a dtype its variable does not allow (one it shares with
        # another argument: any other dtype); an out= argument: one its result cannot be cast to
        for a in checked[1:]:
            if pointwise and a.name not in outs:
                continue
            v = values(given=a.is_optional)
            other = _wrong_dtype(decl, a.name, v[a.name].dtype, a.name in outs)
            v[a.name] = v[a.name].to(other)
            add(f"{a.name} as {other}", v, (a.name,))
    # a ScalarType argument that a typed return's dtype comes from: a dtype it does not list
    for ret in decl.return_names:
        rule, var = decl.output_dtype_rule(ret), decl.dtype_var(ret)
        if rule is None or rule.kind != "arg" or var is None:
            continue
        listed = {torch_dtype(d) for d in var.dtypes}
        other = next((getattr(torch, n) for n in _OTHER_DTYPES if getattr(torch, n) not in listed), None)
        if other is not None:
            add(f"{rule.names[0]} = {other}", {**values(given=True), rule.names[0]: other}, (rule.names[0], ret))
    # devices: every further input on the meta device
    for a in (checked[1:] if tensors else []):
        v = values(given=a.is_optional)
        v[a.name] = v[a.name].to("meta")
        add(f"{a.name} on meta", v, (a.name, tensors[0].name))
    # ranks and sizes
    if pointwise:
        for a in (a for a in tensors[1:] if a.name not in outs):
            v = values()
            shape = list(v[tensors[0].name].shape)
            shape[-1] += 1
            v[a.name] = _tensor(shape, dtype, rng)
            add(f"{a.name} of shape {shape}, not broadcastable", v, (a.name,))
    else:
        bound: set[str] = {a.name for a in decl.schema.arguments if not is_tensor(unwrap_optional(a.type))}
        for a in checked:
            shape = decl.shape_of(a.name)
            if shape is None or shape.whole is not None or a.name in outs:
                continue
            v = values(given=a.is_optional)
            if not any(d.star for d in shape.dims):
                w = v[a.name].unsqueeze(0)
                add(f"{a.name} of rank {w.dim()}", {**v, a.name: w}, (a.name,))
            for i, d in enumerate(shape.dims):
                if d.star:
                    break  # dims after a run would need indexing from the back
                names = set(names_in(d.expr))
                if isinstance(d.expr, (Free, Dynamic)) or names - bound:
                    continue  # any size, or the dimension binds a name
                sizes = list(v[a.name].shape)
                sizes[i] += 1
                add(f"{a.name} with size {sizes[i]} at dimension {i}",
                    {**v, a.name: _tensor(sizes, v[a.name].dtype, rng)}, (a.name,))
            bound |= {n for d in shape.dims for n in names_in(d.expr)}
    # zero-size inputs: every dimension variable (or the broadcast shape) empty in turn
    if pointwise and tensors:
        add("zero-size", values({"__pointwise_shape": [3, 0, 2]}), None)
    else:
        names = sorted({d.expr.name for a in tensors for d in (decl.shape_of(a.name).dims if decl.shape_of(a.name)
                        and decl.shape_of(a.name).whole is None else ()) if isinstance(d.expr, Var)})
        for n in names:
            try:
                add(f"{n} = 0", values({n: [0] if _is_run(decl, n) else 0}, given=True), None)
            except Unsatisfiable:
                pass  # an index into an empty dimension: no valid call has it
    # a reduction's dims: one past the tensor's last dimension, and a dimension named twice
    for r in _reductions(decl):
        v = values(given=True)
        if r.dims not in v or not isinstance(v.get(r.tensor), torch.Tensor):
            continue
        rank = v[r.tensor].dim()
        listed = isinstance(unwrap_optional(decl.schema.argument(r.dims).type), ListType)
        add(f"{r.dims} holding {max(rank, 1)}", {**v, r.dims: [max(rank, 1)] if listed else max(rank, 1)}, (r.dims,))
        if listed and rank:
            add(f"{r.dims} naming dimension 0 twice", {**v, r.dims: [0, -rank]}, (r.dims,))
    # index values one past each end of their bounds
    for b in decl.index_bounds:
        env: dict[str, Any] = {}
        v = values(env, given=True)
        x = v.get(b.argument)
        # a tensor list: its last element given that holds a value (messages name it: `offsets[1]`)
        k = max((i for i, t in enumerate(x) if t is not None and t.numel()), default=None) \
            if isinstance(x, list) else None
        if k is None and (not isinstance(x, torch.Tensor) or not x.numel()):
            continue
        low, high = env[_INDEX_RANGES][b.argument]
        for value in (high, low - 1):
            bad_index = (x if k is None else x[k]).clone()
            bad_index.view(-1)[-1] = value
            if k is None:
                add(f"{b.argument} holding {value}", {**v, b.argument: bad_index}, (b.argument,))
            else:
                add(f"{b.argument}[{k}] holding {value}", {**v, b.argument: [*x[:k], bad_index, *x[k + 1:]]},
                    (f"{b.argument}[{k}]",))
    # tensor lists: their last element of a wrong dtype, or on another device (optional lists
    # are left alone)
    lists = [a for a in decl.schema.arguments if isinstance(a.type, ListType) and a.type.elem == BaseType("Tensor")]
    for a in lists:
        v = values()
        xs = list(v[a.name])
        if not xs:
            continue
        k = len(xs) - 1
        element = f"{a.name}[{k}]"
        names = (element,)
        bad = _wrong_dtype(decl, a.name, xs[k].dtype, False)
        add(f"{element} as {bad}", {**v, a.name: [*xs[:k], xs[k].to(bad)]}, names)
        if len(_flat(list(v.values()))) > 1:  # (the only tensor on meta is a call of the meta kernel, no misuse)
            add(f"{element} on meta", {**v, a.name: [*xs[:k], xs[k].to("meta")]}, names)
    # tensor lists shaped after another: one element short, and the last element with one
    # more dimension (messages name the list, or the element)
    for a in decl.schema.arguments:
        sh = decl.shape_of(a.name)
        if sh is None or sh.each is None or a.name in outs:
            continue
        v = values(given=True)
        xs = list(v[a.name])
        if not xs:
            continue
        add(f"{a.name} one tensor short", {**v, a.name: xs[:-1]}, (a.name,))
        k = len(xs) - 1
        if xs[k] is not None:
            add(f"{a.name}[{k}] of another shape", {**v, a.name: [*xs[:k], xs[k].unsqueeze(-1)]}, (f"{a.name}[{k}]",))
    # layouts: non-contiguous copies of every input (optional ones given, the elements of
    # tensor lists too), and inputs expanded from one element; every dimension 2 or more, so
    # that each tensor has a layout
    if tensors or lists:
        v = values(_sizes_from_two(decl, rng), given=True)
        add("non-contiguous", {k: _each_tensor(x, _noncontiguous) for k, x in v.items()}, None, "non-contiguous")
        written = {a.name for a in decl.schema.arguments if a.is_write}
        v = values(_sizes_from_two(decl, rng), given=True)
        if all(x.numel() for x in _flat(list(v.values()))):
            add("expanded inputs", {k: _each_tensor(x, lambda t: t.flatten()[:1].reshape([1] * t.dim()).expand(t.shape))
                                    if k not in written
                                    else x for k, x in v.items()}, None, "expanded")
    # in place: the written argument expanded, or sharing memory with an input
    for w in (a for a in tensors if a.is_write):
        v = values()
        if v[w.name].numel() > 1:
            add(f"{w.name} expanded", {**v, w.name: v[w.name].flatten()[:1].expand(v[w.name].shape)}, (w.name,))
        for a in tensors:
            v = values()
            if a is w or not v[w.name].numel() or not v[a.name].numel():
                continue
            add(f"{w.name} overlapping {a.name}", {**v, **_overlapping(v[w.name], v[a.name], w.name, a.name)},
                (w.name,))
    # a written tensor list: its last element expanded, or sharing memory with the last element
    # of each other tensor argument (the same tensor where both are written: one tensor in
    # two written lists), or with the first element of its own list
    for w in (a for a in lists if a.is_write):
        v = values()
        if not v[w.name]:
            continue
        k = len(v[w.name]) - 1
        element = f"{w.name}[{k}]"
        x = v[w.name][k]
        if x.numel() > 1:
            add(f"{element} expanded", {**v, w.name: [*v[w.name][:k], x.flatten()[:1].expand(x.shape)]}, (element,))
        for a in (a for a in decl.schema.arguments if a.name in v and (is_tensor(unwrap_optional(a.type)) or a in lists)):
            v = values()
            ws, given = list(v[w.name]), v[a.name]
            listed = isinstance(given, (list, tuple))
            if not isinstance(given, (list, tuple, torch.Tensor)) or (listed and not given):
                continue
            j = (0 if a is w else len(given) - 1) if listed else None
            if a is w and k == 0:
                continue  # one element: nothing else in its list
            if a.is_write and a is not w and lists.index(a) < lists.index(w) if a in lists else False:
                continue  # two written lists: once, from the first
            other = f"{a.name}[{j}]" if listed else a.name
            y = given[j] if listed else given
            if not ws[k].numel() or not y.numel():
                continue
            if a.is_write and a is not w and ws[k].shape == y.shape and ws[k].dtype == y.dtype:
                pair = {element: ws[k], other: ws[k]}  # the very same tensor
                case = f"{element} also {other}"
            else:
                pair = _overlapping(ws[k], y, element, other)
                case = f"{element} overlapping {other}"
            ws[k] = pair[element]
            if a is w:
                ws[j] = pair[other]
                changed = {w.name: ws}
            elif listed:
                changed = {w.name: ws, a.name: [*given[:j], pair[other], *given[j + 1:]]}
            else:
                changed = {w.name: ws, a.name: pair[other]}
            add(case, {**v, **changed}, (element, other))
    # sizes past int64 (int arguments) or past memory (an input expanded, with stride 0, to
    # trillions of elements: its output or contiguous copy cannot be allocated)
    in_contracts = {n for x in checked if (sh := decl.shape_of(x.name)) is not None and sh.dims is not None
                    for d in sh.dims for n in names_in(d.expr)}
    for a in decl.schema.arguments:
        t = unwrap_optional(a.type)
        if a.name in in_contracts:
            continue  # an input's size: no such input can be made
        sample = _sample(t)
        if sample == "ints":
            add(f"{a.name} = [2**62, 2**62]", values({a.name: [HUGE, HUGE]}), (a.name, *outputs))
        elif sample == "int":
            add(f"{a.name} = 2**62", values({a.name: HUGE}), (a.name, *outputs))
    if tensors:
        v = values()
        first = tensors[0].name
        x = v[first]
        if pointwise:
            huge = x.flatten()[:1].view([1] * (x.dim() + 2)).expand(2**20, 2**20, *x.shape)
            add(f"{first} expanded by 2**40", {**v, first: huge}, (first, *outputs))
        elif not tensors[0].is_write and x.dim() and x.numel():
            huge = x.flatten()[:1].view([1] * (x.dim() + 1)).expand(2**40, *x.shape)
            # one more dimension: an input whose contract shares a name with `first`'s (the
            # run of `input: ["*S"], target: ["*S"]`) may be the one that no longer fits
            def names_of(name: str) -> set[str]:
                sh = decl.shape_of(name)
                return {n for d in (sh.dims or ()) for n in names_in(d.expr)} if sh is not None else set()
            linked = tuple(a.name for a in tensors[1:] if names_of(first) & names_of(a.name))
            # a reduction's dims from the front: still valid, and distinct, with the new first dimension
            wrapped = {r.dims: _from_front(v[r.dims], x.dim()) for r in _reductions(decl)
                       if r.tensor == first and v.get(r.dims) is not None}
            add(f"{first} expanded to 2**40 rows", {**v, **wrapped, first: huge}, (first, *linked, *outputs))
    return cases


_MIN_FREE_SIZE = "__min_free_size"  # env key: the least size of an input without a shape rule


def _sizes_from_two(decl: Declaration, rng: random.Random) -> dict[str, Any]:
    """Every dimension variable of the tensor arguments' shape rules bound to 2-4 (runs to
    one or two such sizes), and inputs without a shape rule of such sizes."""
    env: dict[str, Any] = {_MIN_FREE_SIZE: 2}
    for a in decl.schema.arguments:
        shape = decl.shape_of(a.name)
        if shape is None or shape.dims is None:
            continue
        for d in shape.dims:
            if isinstance(d.expr, Var) and d.expr.name not in env:
                env[d.expr.name] = ([rng.randint(2, 4) for _ in range(rng.randint(1, 2))] if d.star
                                    else rng.randint(2, 4))
    return env


def _overlapping(w, a, w_name: str, a_name: str) -> dict:
    """Copies of `w` and `a` in one buffer, `a` starting inside `w`'s last element (each
    keeps its dtype: an index tensor may overlap float data); `a`'s values are kept."""
    import torch

    wb, ab = w.numel() * w.element_size(), a.numel() * a.element_size()
    start = (wb - 1) // a.element_size() * a.element_size()  # inside w's last element, aligned for a's dtype
    buf = torch.empty(start + ab, dtype=torch.uint8)
    w2 = buf[:wb].view(w.dtype).view(w.shape)
    a2 = buf[start:].view(a.dtype).view(a.shape)
    w2.copy_(w)
    a2.copy_(a)
    return {w_name: w2, a_name: a2}


def _wrong_dtype(decl: Declaration, name: str, current, out: bool):
    """A dtype argument `name` may not have: for an out= argument one its result (of dtype
    `current`) cannot be cast to; for an argument owning a dtype variable one the variable
    does not list; else (it shares the variable, or the primary) another one than `current`."""
    import torch

    var = decl.dtype_var(name)
    listed = {torch_dtype(d) for d in var.dtypes} if var is not None and var.owner == name else set()
    for n in _OTHER_DTYPES + ("int32", "bool"):
        d = getattr(torch, n)
        if d == current or d in listed or (out and torch.can_cast(current, d)):
            continue
        return d
    raise AssertionError(f"{decl.op_name}: no dtype is wrong for '{name}'")


def _is_run(decl: Declaration, name: str) -> bool:
    return any(d.star and d.expr.name == name for a in decl.tensor_inputs
               for d in ((decl.shape_of(a.name).dims or ()) if decl.shape_of(a.name) else ()))


def _each_tensor(x, fn):
    """fn(x) for a tensor, [fn(t) for t in x] for a tensor list; other values as they are."""
    import torch

    if isinstance(x, torch.Tensor):
        return fn(x)
    if isinstance(x, (list, tuple)) and any(isinstance(t, torch.Tensor) for t in x):
        return [fn(t) if isinstance(t, torch.Tensor) else t for t in x]
    return x


def _noncontiguous(x):
    """A copy of `x` whose elements are two apart in memory."""
    import torch

    y = torch.empty((*x.shape, 2), dtype=x.dtype)[..., 0]
    return y.copy_(x)


def check_misuse(decl: Declaration, op, misuse: Misuse, reference: Callable, namespace: str) -> None:
    """The documented outcome of `misuse`: a RuntimeError naming the op and one of
    `misuse.names`, or, for a valid call, the reference's result."""
    if misuse.names is None:
        check_reference(decl, op, misuse.sample, reference, layout=misuse.layout)
        return
    try:
        result = call(op, misuse.sample)
    except RuntimeError as e:
        message = str(e)
        assert f"{namespace}::{decl.op_name}" in message, f"{decl.op_name} ({misuse.case}): the error does not name the op: {message}"
        assert any(f"'{n}'" in message for n in misuse.names), \
            f"{decl.op_name} ({misuse.case}): the error names none of {misuse.names}: {message}"
        return
    raise AssertionError(f"{decl.op_name} ({misuse.case}): expected a RuntimeError, got {type(result).__name__}")
