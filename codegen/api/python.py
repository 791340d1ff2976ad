"""Schema types and names in the generated Python, in one place.

- Types: the Python annotation of every schema type (for the typed wrappers and their
  `.pyi`), read from the `python` column of the type table (codegen/api/types.py), and how
  the fake kernel makes a return the kernel itself computes (`fake` column).
- Names: the Python identifier of every schema name.  A name that is a Python keyword
  (`from`, `lambda`) or that the generated module itself binds (`torch`, the wrapper
  module's helpers) gets a trailing `_` (codegen/core/names.py).  The schema keeps its name:
  `torch.ops.<ns>.<op>` takes it as a keyword (`**{"from": x}`); the typed wrapper takes
  the identifier (`from_=x`).  Op functions are renamed the same way (`ops.int_` for an op
  named `int`, which would hide the builtin in the module's annotations).
- Signatures: `PythonSignature` (the typed wrapper) and `FakeSignature` (the fake kernel).
- The docstring facts that `help()` shows, shared by the wrapper and the fast binding.

Plugins read this module; no plugin imports another.
"""

from __future__ import annotations


import keyword
import textwrap
from dataclasses import dataclass
from typing import Iterable

from ..lang.schema import Argument, BaseType, ClassType, FunctionSchema, ListType, OptionalType, Type, is_list_of_tensors, is_tensor, unwrap_optional
from . import types
from ..core.names import py_ident

UnsupportedType = types.UnsupportedType

# Names ops.py binds at module level and uses in annotations or wrapper bodies: an op's
# function must not rebind them.  (Builtins used in annotations are among them.)
OPS_MODULE_NAMES = frozenset({
    "annotations", "typing", "Iterable", "List", "Optional", "Sequence", "Tuple", "Union", "torch", "Tensor",
    "handle_torch_function", "has_torch_function", "_ops", "_runtime", "load_fast", "WRAPPERS", "int", "float", "bool", "str",
    "complex", "tuple", "list", "dict", "object", "property", "globals", "type", "super",
})
# Names a wrapper's body uses besides its parameters (its own name and result class are added).
WRAPPER_LOCALS = frozenset({"handle_torch_function", "has_torch_function", "_ops", "_runtime", "torch"})
# Names a fake kernel's body uses besides its parameters: the module `torch`, the helpers,
# and the locals it binds for outputs (`_out0`..., `_result`) and keyword-only arguments (`_kwargs`).
FAKE_LOCALS = frozenset({"torch", "_runtime", "_kwargs", "_result"})


# ----------------------------------------------------------------------------------- types

def annotation(t: Type) -> str:
    """The annotation of an argument of type `t`, as the typed wrapper and `.pyi` spell it:
    the type table's `python` column, or built from the element's (`bool[3]`, class types)."""
    if isinstance(t, ClassType):
        return "torch.ScriptObject"
    try:
        python = types.row(t).python
    except UnsupportedType:
        python = None
    if python is not None:
        return python
    if isinstance(t, OptionalType):
        return f"Optional[{annotation(t.elem)}]"
    if isinstance(t, ListType):
        return f"Sequence[{annotation(t.elem)}]"
    raise UnsupportedType(str(t), "no Python type")


def return_annotation_of(t: Type) -> str:
    """The annotation of a returned value: lists come back as lists."""
    if isinstance(t, OptionalType):
        return f"Optional[{return_annotation_of(t.elem)}]"
    if isinstance(t, ListType):
        return f"List[{return_annotation_of(t.elem)}]"
    return annotation(t)


def python_default(a: Argument) -> str:
    """An argument's default as Python source: enum defaults are torch's objects
    (`ScalarType dtype=long` -> `torch.long`, `MemoryFormat m=contiguous_format` ->
    `torch.contiguous_format`)."""
    d = a.default
    assert d is not None
    if d.kind == "enum" and unwrap_optional(a.type) in (BaseType("ScalarType"), BaseType("Layout"), BaseType("MemoryFormat")):
        return f"torch.{d.text}"
    return d.python()


def fake_return(t: Type) -> str | None:
    """How a fake kernel makes a return of type `t` that the kernel computes from the data
    (`OutputSpec.made_by == "kernel"`): `"unbacked"` (a `SymInt`: a data-dependent symbol,
    codegen/pyruntime.py `data_dependent_int`), or None: it cannot."""
    if isinstance(t, (OptionalType, ListType, ClassType)):
        return None
    try:
        return types.row(t).fake
    except UnsupportedType:
        return None


def no_fake_reason(t: Type, name: str) -> str:
    """Why a fake kernel cannot make the kernel-made return `name` of type `t`, and what to
    declare instead (the end of the NotImplementedError it raises)."""
    if str(t) == "Tensor":
        return (f"made by the kernel, and no rule gives its shape: add a 'shape:' rule for '{name}' (or 'like:') "
                "to the declaration")
    if str(t) == "int":
        return ("an int the kernel computes from the data: declare it SymInt, which torch.compile and torch.export "
                "trace as a data-dependent value")
    return f"a {t} the kernel computes from the data, which torch.compile and torch.export cannot trace"


# ----------------------------------------------------------------------------------- names

def is_keyword_name(name: str) -> bool:
    """Whether `name` can be written as `name=value` in a Python call."""
    return name.isidentifier() and not keyword.iskeyword(name)


def identifiers(names: Iterable[str], taken: Iterable[str] = ()) -> dict[str, str]:
    """Python identifiers for `names`, distinct from each other and from `taken`: a name
    that is already one keeps itself; the others get trailing `_`s (in order)."""
    names = list(names)
    taken = set(taken)
    out: dict[str, str] = {}
    for n in names:
        if is_keyword_name(n) and n not in taken:
            out[n] = n
    used = taken | set(out.values())
    for n in names:
        if n not in out:
            out[n] = py_ident(n, used | set(names) - {n})
            used.add(out[n])
    return out


def function_names(decls) -> dict[str, str]:
    """The Python function of each op (by `decl.ident`) in `<package>.ops`."""
    return identifiers([d.ident for d in decls], OPS_MODULE_NAMES)


def op_expression(packet: str, name: str, overload: str) -> str:
    """The OpOverload `<packet>.<name>.<overload>` (`packet`: `torch.ops.<ns>` or a name
    bound to it), with getattr for a name Python cannot write as an attribute (`from`)."""
    expr = f"{packet}.{name}" if is_keyword_name(name) else f"getattr({packet}, {name!r})"
    overload = overload or "default"
    return f"{expr}.{overload}" if is_keyword_name(overload) else f"getattr({expr}, {overload!r})"


def functional_of(decl, decls):
    """The functional op of an out= overload (torchgen's grouping): the op of the same name
    that writes nothing, whose arguments are the overload's without the out= ones and which
    returns one value per out= argument (the one without an overload name first).  None for
    an op that is not an out= overload returning its out= arguments in order, or has no such
    functional op."""
    outs = decl.out_arguments
    rets = decl.schema.returns
    if not outs or len(rets) != len(outs) or any(decl.schema.aliased_argument(r) is not a for r, a in zip(rets, outs)):
        return None
    inputs = [str(a) for a in decl.schema.arguments if a not in outs]
    found = [f for f in decls if f.name == decl.name and not f.schema.is_mutable
             and [str(a) for a in f.schema.arguments] == inputs and len(f.schema.returns) == len(outs)]
    return min(found, key=lambda f: f.overload != "", default=None)


def out_overloads(decls) -> dict:
    """Each functional op's out= overload, by the functional op's `ident` (the one named
    `out` first, where several are declared)."""
    found: dict = {}
    for d in sorted(decls, key=lambda d: d.overload != "out"):
        f = functional_of(d, decls)
        if f is not None and f.ident not in found:
            found[f.ident] = d
    return found


def result_class_name(function: str) -> str:
    return "".join(p.capitalize() for p in function.split("_") if p) + "Result"


def has_named_returns(schema: FunctionSchema) -> bool:
    return len(schema.returns) > 1 and all(r.name for r in schema.returns)


# ------------------------------------------------------------------------------ signatures

@dataclass(frozen=True)
class PyArg:
    name: str  # the schema's name
    ident: str  # the Python parameter
    annotation: str
    default: str | None  # Python source
    kwarg_only: bool
    tensor_like: bool  # may carry __torch_function__



@dataclass(frozen=True)
class OutParam:
    """The `out=` keyword of a functional op's wrapper, as torch's functions take it: one
    tensor, or a tuple of them for several outputs (`torch.max(x, 1, out=(values, indices))`).
    Given, the wrapper calls the op's out= overload `op` with it."""

    op: str  # the out= overload's attribute path, `name.out`
    names: tuple[str, ...]  # the out= overload's out= arguments, in order

    @property
    def annotation(self) -> str:
        if len(self.names) == 1:
            return "Optional[Tensor]"
        return "Optional[Tuple[" + ", ".join("Tensor" for _ in self.names) + "]]"

    def call_arguments(self) -> list[str]:
        values = ["out"] if len(self.names) == 1 else [f"out[{i}]" for i in range(len(self.names))]
        plain = [f"{n}={v}" for n, v in zip(self.names, values) if is_keyword_name(n)]
        spelled = [f"{n!r}: {v}" for n, v in zip(self.names, values) if not is_keyword_name(n)]
        return plain + (["**{" + ", ".join(spelled) + "}"] if spelled else [])


@dataclass(frozen=True)
class PythonSignature:
    """The typed wrapper `<package>.ops.<name>` of one op."""

    name: str
    op: str  # the OpOverload attribute path: `name.overload` or `name.default`
    args: tuple[PyArg, ...]
    returns: str
    result_class: str  # "" unless the returns are named
    fields: tuple[tuple[str, str], ...]  # (property, annotation) of the result class
    out: OutParam | None = None  # the `out=` keyword, for a functional op with an out= overload

    def parameters(self, annotated: bool = True) -> str:
        """`name: Annotation = default`, with `*` before keyword-only ones (`out=` last)."""
        out, kw = [], False
        for a in self.args:
            if a.kwarg_only and not kw:
                out.append("*")
                kw = True
            text = f"{a.ident}: {a.annotation}" if annotated else a.ident
            if a.default is not None:
                text += f" = {a.default}" if annotated else f"={a.default}"
            out.append(text)
        if self.out is not None:
            out += ([] if kw else ["*"]) + [f"out: {self.out.annotation} = None" if annotated else "out=None"]
        return ", ".join(out)

    def wrapper_call(self) -> str:
        """The wrapper's own parameters passed on as it takes them (handle_torch_function);
        `out` only when it is given, as torch's own functions pass it to __torch_function__."""
        return ", ".join([f"{a.ident}={a.ident}" if a.kwarg_only else a.ident for a in self.args]
                         + (['**({"out": out} if out is not None else {})'] if self.out is not None else []))

    def out_call(self) -> str:
        """The call of the out= overload: the op's arguments, then the out= ones."""
        assert self.out is not None
        return ", ".join(([self.op_call()] if self.args else []) + self.out.call_arguments())

    def op_call(self) -> str:
        """The call of the op: positionally, keyword-only arguments by their schema names
        (those that are no Python identifier in one `**{...}`)."""
        out = [a.ident if not a.kwarg_only else f"{a.name}={a.ident}" for a in self.args
               if not a.kwarg_only or is_keyword_name(a.name)]
        spelled = [f"{a.name!r}: {a.ident}" for a in self.args if a.kwarg_only and not is_keyword_name(a.name)]
        if spelled:
            out.append("**{" + ", ".join(spelled) + "}")
        return ", ".join(out)

    @property
    def relevant(self) -> tuple[str, ...]:
        out = () if self.out is None else ("out",) if len(self.out.names) == 1 else ("*(out or ())",)
        return tuple(a.ident for a in self.args if a.tensor_like) + out


def python_signature(decl, function: str, out_overload=None) -> PythonSignature:
    """The typed wrapper of `decl`, named `function` (from `function_names`); with
    `out_overload` (its out= overload, from `out_overloads`) it takes `out=` too, unless an
    argument of its own is named `out`."""
    s = decl.schema
    named = has_named_returns(s)
    result_class = result_class_name(function) if named else ""
    out = None
    if out_overload is not None and not any(a.name == "out" for a in s.arguments):
        out = OutParam(f"{out_overload.name}.{out_overload.overload}", tuple(a.name for a in out_overload.out_arguments))
    taken = {"out"} if out is not None else set()
    idents = identifiers([a.name for a in s.arguments], WRAPPER_LOCALS | taken | {function, result_class} - {""})
    args = tuple(PyArg(a.name, idents[a.name], annotation(a.type), python_default(a) if a.default is not None else None,
                       a.kwarg_only, _tensor_like(a.type)) for a in s.arguments)
    rets = s.returns
    fields: tuple[tuple[str, str], ...] = ()
    if not rets:
        returns = "None"
    elif len(rets) == 1:
        returns = return_annotation_of(rets[0].type)
    elif named:
        props = identifiers([r.name for r in rets], OPS_MODULE_NAMES | {"count", "index"})
        fields = tuple((props[r.name], return_annotation_of(r.type)) for r in rets)
        returns = result_class
    else:
        returns = "Tuple[" + ", ".join(return_annotation_of(r.type) for r in rets) + "]"
    return PythonSignature(function, f"{decl.name}.{decl.overload or 'default'}", args, returns, result_class, fields, out)


def _tensor_like(t: Type) -> bool:
    t = unwrap_optional(t)
    return is_tensor(t) or (isinstance(t, ListType) and is_tensor(unwrap_optional(t.elem)))


@dataclass(frozen=True)
class FakeSignature:
    """A fake kernel's parameters: torch calls it as it calls the op, so keyword-only
    arguments arrive by their schema names; those that are no Python identifier here
    (`from`, or `torch` in a module that uses torch) come in `**_kwargs` and `prologue`
    binds them."""

    idents: dict[str, str]  # schema name -> local
    params: str
    prologue: tuple[str, ...]


def fake_signature(schema: FunctionSchema, taken: Iterable[str] = ()) -> FakeSignature:
    idents = identifiers([a.name for a in schema.arguments], FAKE_LOCALS | set(taken))
    parts: list[str] = []
    prologue: list[str] = []
    kw = False
    for a in schema.arguments:
        ident = idents[a.name]
        default = f"={python_default(a)}" if a.default is not None else ""
        if a.kwarg_only and ident != a.name:
            fallback = python_default(a) if a.default is not None else None
            get = f"_kwargs[{a.name!r}]" if fallback is None else f"_kwargs.get({a.name!r}, {fallback})"
            prologue.append(f"{ident} = {get}")
            continue
        if a.kwarg_only and not kw:
            parts.append("*")
            kw = True
        parts.append(ident + default)
    if prologue:
        parts.append("**_kwargs")
    return FakeSignature(idents, ", ".join(parts), tuple(prologue))


def method_parameters(schema: FunctionSchema) -> str:
    """`self, ...` of a fake class method (its body, written in the declaration, sees these names)."""
    idents = identifiers([a.name for a in schema.arguments], {"self", "torch"})
    parts, kw = ["self"], False
    for a in schema.arguments:
        if a.kwarg_only and not kw:
            parts.append("*")
            kw = True
        parts.append(idents[a.name] + (f"={python_default(a)}" if a.default is not None else ""))
    return ", ".join(parts)


# ----------------------------------------------------------------------------------- docs

def _dtype_doc(decl) -> str:
    """The dtypes of the docstring: the shared list, or each dtype variable's by the tensors
    that have it (an optional tensor's with the dtype it has when absent)."""
    if not decl.dtype_vars:
        return ", ".join(dt.name for dt in decl.dtypes)

    def names(v) -> str:
        return ", ".join([n for n, var in decl.dtype_owners if var == v.name] or [v.owner])

    return "; ".join(f"{names(v)}: {', '.join(dt.name for dt in v.dtypes)}"
                     + (f" ({v.absent.name} when absent)" if v.absent is not None else "") for v in decl.dtype_vars)


def doc_lines(decl, ns: str) -> list[str]:
    """The docstring of an op's wrapper: `doc:`, then the schema, dtypes, devices and
    whether (and how often) it is differentiable."""
    d = decl.derivatives
    if d is None:
        tensors = decl.tensor_inputs or any(is_list_of_tensors(a) for a in decl.schema.arguments)
        diff = "no (derivative not implemented)" if tensors else "no (no tensor input)"
    elif not d.differentiable:
        diff = "no (its outputs are not differentiable)"
    else:
        inputs = [n for f in d.formulas if f.differentiable for n in f.inputs]
        diff = "yes, with respect to " + ", ".join(inputs)
        diff += "; once (no double backward)" if d.once_differentiable else "; twice (double backward works)"
    lines = textwrap.wrap(decl.doc, 88) if decl.doc else []
    lines += ["", f"Schema: {ns}::{decl.schema}",
              "Dtypes: " + _dtype_doc(decl),
              "Devices: " + ", ".join(decl.devices),
              f"Differentiable: {diff}"]
    autocast = decl.extra_field("autocast")
    if autocast:
        lines.append(f"Autocast: {autocast}")
    return lines


def method_call(decl) -> tuple[str, str]:
    """(class argument, method name) of a `method: <argument>.<method>` op."""
    arg, _, method = str(decl.extra_field("method") or "").partition(".")
    return arg, method
