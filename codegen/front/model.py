"""The immutable model every pass reads: one ``Declaration`` per op, one ``Library``."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

from .classes import ClassDecl
from ..core.config import Config
from ..lang.derivatives import Derivatives
from ..core.diagnostics import Loc
from ..lang.dtype_rules import DTypeRule, DTypeVar
from ..core.dtypes import DTYPES, DType
from ..lang.schema import BaseType, FunctionSchema, is_list_of_tensors, is_tensor, unwrap_optional
from ..lang.pointwise import Expression
from ..lang.rowwise import RowProgram
from ..lang.shapes import Expr, Shape, ShapePlan
from ..core.targets import GENERATED


@dataclass(frozen=True)
class IndexBound:
    """`index: {indices: weight.size(0)}`: every value of the integer tensor `argument`
    lies in [low, high); checked by the wrapper before the kernel runs."""

    argument: str
    low: Expr
    high: Expr
    text: str  # as declared, for messages


@dataclass(frozen=True)
class ForeignKernel:
    """A kernel behind the C ABI (runtime/include/opwrap/kernel_abi.h, codegen/api/abi.py):
    the wrapper calls `<symbol>_<dtypes>` (`<dtypes>`: the combination's dtype names joined
    by '_').  `abi: rust`: the generated Rust bindings export those symbols and call
    `crate::<function>`; `abi: c`: the user's C, CUDA C, ... exports them."""

    abi: str  # "c" or "rust"
    symbol: str
    function: str  # abi rust: the Rust function's path in its crate
    loc: Loc

    def symbol_for(self, combo) -> str:
        return self.symbol + "_" + "_".join(d.name for d in combo)


@dataclass(frozen=True)
class OutputSpec:
    """One return, and who makes it (`made_by`):

    - ``"alias"``: the written input `aliases` itself (in place, or an out= argument);
    - ``"wrapper"``: a new tensor the generated wrapper allocates with `shape` (None: the
      shape of `like`) and the dtype rule `dtype`, and passes to the kernel as `at::Tensor&`;
    - ``"kernel"``: a value the kernel itself makes and returns: every non-Tensor return
      (`int`, `float`, `Tensor[]`, ...), a view of an input (`Tensor(a)` with `aliases` set),
      and a Tensor return with neither a shape rule nor `like` (as torchgen's kernels return
      their results).  No fake kernel can know such a
      tensor's shape."""

    name: str
    aliases: str | None  # the input it aliases
    dtype: str  # the dtype rule's text: a dtype name, an input whose dtype it takes, ...
    shape: Shape | None
    made_by: str = "wrapper"
    dtype_rule: DTypeRule | None = None  # None: the dtype the op dispatches on


@dataclass(frozen=True)
class Declaration:
    schema: FunctionSchema
    path: str  # the declaration file, relative to the project root
    loc: Loc  # where the entry starts
    func_loc: Loc  # where the schema string starts
    doc: str = ""
    dtypes: tuple[DType, ...] = ()
    kernels: tuple[tuple[str, str], ...] = ()  # (dispatch key, C++ function template name)
    foreign: tuple[tuple[str, ForeignKernel], ...] = ()  # (dispatch key, a kernel behind the C ABI)
    header: str = ""  # kernel header, relative to the kernels directory
    shapes: tuple[Shape, ...] = ()
    shape_plan: ShapePlan | None = None
    output_dtypes: tuple[tuple[str, str], ...] = ()  # (return name, the dtype rule's text)
    dtype_rules: tuple[tuple[str, DTypeRule], ...] = ()  # (return name, its parsed `dtype:` rule)
    # Per-argument dtypes (codegen/lang/dtype_rules.py): the variables, the primary first; and
    # which variable each tensor argument or return named in a `dtypes:` mapping uses.
    # Empty: one variable over `dtypes`, shared by every tensor.
    dtype_vars: tuple[DTypeVar, ...] = ()
    dtype_owners: tuple[tuple[str, str], ...] = ()  # (argument or return name, variable name)
    index_bounds: tuple[IndexBound, ...] = ()
    like: str = ""  # returns take shape and dtype of this input
    contiguous: bool = True
    split_types: bool = False
    tags: tuple[str, ...] = ()
    extra: tuple[tuple[str, Any], ...] = ()  # fields owned by plugins, as loaded from YAML
    field_locs: tuple[tuple[str, Loc], ...] = ()
    derivatives: Derivatives | None = None  # None: no 'derivatives:' field
    pointwise: bool = False  # elementwise: `pointwise: true` or an expression
    expression: Expression | None = None  # `pointwise: <expression>`: kernels generated from it
    rows: RowProgram | None = None  # `rowwise: <program>`: kernels generated from it
    # Fields whose value was wrong (reported by the loader): the Declaration holds their
    # defaults, and checks that depend on one of them skip it, so that an error is not
    # repeated as another.  Never set on a declaration that reaches emission.
    invalid_fields: tuple[str, ...] = ()

    # ---------------------------------------------------------------- derived facts
    @property
    def name(self) -> str:
        return self.schema.base_name

    @property
    def overload(self) -> str:
        return self.schema.overload_name

    @property
    def op_name(self) -> str:
        """`name` or `name.overload`, as registered (without namespace)."""
        return self.schema.qualified_name

    @property
    def ident(self) -> str:
        """A C++/Python identifier unique to this op: `name` or `name_overload`."""
        return self.schema.ident

    def field_loc(self, name: str) -> Loc:
        return dict(self.field_locs).get(name, self.loc)

    def kernel(self, key: str) -> str | None:
        """The kernel the declaration names for dispatch key `key` (`kernels:`), if any."""
        return dict(self.kernels).get(key)

    @property
    def devices(self) -> tuple[str, ...]:
        """The dispatch keys the op has kernels for: those of `kernels:`, or, for a pointwise
        expression or a row-wise program, every device generated kernels exist for."""
        if self.expression is not None or self.rows is not None:
            return tuple(d.key for d in GENERATED)
        return tuple(k for k, _ in self.kernels)

    def foreign_kernel(self, key: str) -> ForeignKernel | None:
        """The kernel of dispatch key `key` when it is behind the C ABI (`{abi: c|rust, ...}`)."""
        return dict(self.foreign).get(key)

    def failed(self, name: str) -> bool:
        """Whether field `name` was given with a wrong value (see `invalid_fields`)."""
        return name in self.invalid_fields

    def extra_field(self, name: str, default: Any = None) -> Any:
        return dict(self.extra).get(name, default)

    @property
    def tensor_inputs(self):
        return [a for a in self.schema.arguments if is_tensor(unwrap_optional(a.type))]

    @property
    def return_names(self) -> tuple[str, ...]:
        return self.schema.return_names()

    def shape_of(self, target: str) -> Shape | None:
        return next((s for s in self.shapes if s.target == target), None)

    def outputs(self) -> tuple[OutputSpec, ...]:
        """The returns as every emitter allocates them: one rule, read by all."""
        out = []
        for ret, name in zip(self.schema.returns, self.return_names):
            aliased = self.schema.aliased_argument(ret)
            shape = self.shape_of(name)
            if aliased is not None and aliased in self.out_arguments:
                shape = self.shape_of(aliased.name)  # the shape an out= argument is resized to
            if aliased is not None and ret.is_write:
                made_by = "alias"
            elif ret.type == BaseType("Tensor") and (shape is not None or self.like):
                made_by = "wrapper"
            else:
                made_by = "kernel"
            out.append(OutputSpec(name, aliased.name if aliased else None, self.output_dtype(name), shape, made_by,
                                  self.output_dtype_rule(name)))
        return tuple(out)

    def output_dtype_rule(self, ret_name: str) -> DTypeRule | None:
        """The parsed dtype rule of a return; None: the dtype the op dispatches on."""
        rule = dict(self.dtype_rules).get(ret_name)
        if rule is not None:
            return rule
        if self.like:
            return DTypeRule("tensor", (self.like,))
        required = [a for a in self.tensor_inputs if not a.is_optional]
        if required:
            return DTypeRule("tensor", (required[0].name,))
        if not self.tensor_inputs and not any(is_list_of_tensors(a) for a in self.schema.arguments):
            return DTypeRule("dtype", (self.dtypes[0].name if self.dtypes else "float32",))
        return None

    # ---------------------------------------------------------------- dtypes
    @property
    def variables(self) -> tuple[DTypeVar, ...]:
        """The dtype variables, the primary (`scalar_t`) first."""
        if self.dtype_vars:
            return self.dtype_vars
        owner = next((a.name for a in self.schema.arguments
                      if is_tensor(unwrap_optional(a.type)) or is_list_of_tensors(a)), "")
        return (DTypeVar("scalar_t", owner, self.dtypes),)

    def variable(self, name: str) -> DTypeVar:
        """The dtype variable called `name` (its template parameter)."""
        return next(v for v in self.variables if v.name == name)

    def dtype_combinations(self) -> list[tuple[DType, ...]]:
        """Every combination of the variables' dtypes, in the variables' order: the kernel's
        instantiations (and the test cases)."""
        return list(itertools.product(*(v.dtypes for v in self.variables)))

    def dtype_var(self, name: str) -> DTypeVar | None:
        """The variable of a tensor argument or return: the one a `dtypes:` mapping gives it,
        else (a return) the one of the tensor its dtype rule names, else (an argument) the
        primary.  None for a return whose dtype has no variable (a dtype name, a ScalarType
        argument or a promotion that the mapping does not type)."""
        owners = dict(self.dtype_owners)
        if name in owners:
            return self.variable(owners[name])
        if name in self.return_names:
            aliased = self.schema.aliased_argument(self.schema.returns[self.return_names.index(name)])
            if aliased is not None:
                return self.dtype_var(aliased.name)
            rule = self.output_dtype_rule(name)
            if rule is None:
                return self.variables[0]
            if rule.kind == "tensor":
                return self.dtype_var(rule.names[0])
            return None
        return self.variables[0]

    @property
    def out_arguments(self):
        """torchgen's out= arguments: keyword-only tensors written in place and returned
        (`*, Tensor(a!) out) -> Tensor(a!)`).  The wrapper resizes each to the shape rule of
        the return that aliases it.  A keyword-only written tensor no return aliases
        (`*, Tensor(a!) acc) -> ()`) is a written argument like any other: checked as an
        input, written in place."""
        s = self.schema
        returned = {id(s.aliased_argument(r)) for r in s.returns if r.is_write}
        return tuple(a for a in s.arguments
                     if a.kwarg_only and a.is_write and is_tensor(unwrap_optional(a.type)) and id(a) in returned)

    @property
    def is_out_variant(self) -> bool:
        return bool(self.out_arguments)

    def output_dtype(self, ret_name: str) -> str:
        """The dtype rule of a return: a dtype name, or the name of an input whose dtype it takes."""
        rule = dict(self.output_dtypes).get(ret_name)
        if rule:
            return rule
        rule = self.output_dtype_rule(ret_name)
        return rule.text if rule is not None else ""


@dataclass(frozen=True)
class Library:
    config: Config
    declarations: tuple[Declaration, ...]
    sources: tuple[str, ...] = ()  # declaration files read, relative to the root
    classes: tuple[ClassDecl, ...] = ()  # custom classes (`- class:` entries)

    @property
    def namespace(self) -> str:
        return self.config.namespace
