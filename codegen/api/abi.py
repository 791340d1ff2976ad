"""Kernels behind the C ABI (`kernels: {CPU: {abi: c|rust, ...}}`): what each schema type is
in C (runtime/include/opwrap/kernel_abi.h), in the Rust bindings' FFI and in the safe Rust
function a Rust kernel implements; and, per op, the prototypes of the symbols the wrapper
calls.

The wrapper around a foreign kernel is the C++ kernel's wrapper (codegen/api/kernel.py:
checks, contiguity, allocation from the shape rule, dtype dispatch, device guard); only its
call changes: `plan_call` asks `abi_arguments` here how to pass each argument, and calls one
symbol per dtype combination (`ForeignKernel.symbol_for`).  The C prototype header
(`abi/<op>.h`) and the Rust bindings (`rust/kernels.rs`) are rendered from `prototypes`,
from the same rows, so the wrapper, the header and the bindings cannot disagree: a kernel
whose signature differs from them does not compile.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..lang.schema import Argument
from . import types
from ..core.names import cpp_ident
from .outputs import kernel_outputs, wrapper_outputs
from .types import AbiRow, Binding, CType, ReturnRow

# Views of the type table's `abi` and `abi_return` columns, by the table's key
# (types.type_key): every schema type a foreign kernel can take, and every non-Tensor type it
# can return (a pointer it writes, after the outputs).
ROWS: dict[str, AbiRow] = {k: r.abi for k, r in types.TABLE.items() if r.abi is not None}
RETURNS: dict[str, ReturnRow] = {k: r.abi_return for k, r in types.TABLE.items() if r.abi_return is not None}


def _type_row(t, mutable: bool = False):
    try:
        return types.row(t, mutable)
    except types.UnsupportedType:
        return None


def return_row(r) -> ReturnRow | None:
    """The ABI row of a return the kernel computes, None when a foreign kernel cannot return its type."""
    tr = _type_row(r.type)
    return tr.abi_return if tr is not None else None


# The Rust element type of each dtype (its Element impls: runtime/include/opwrap/kernel_abi.rs).
RUST_ELEMENTS = {"float32": "f32", "float64": "f64", "float16": "Half", "bfloat16": "BFloat16", "uint8": "u8",
                 "int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64", "bool": "bool"}
ANY_ELEMENT = "AnyDType"  # a tensor whose dtype no dtype variable or fixed rule gives

RUST_KEYWORDS = frozenset("""
as async await break const continue crate dyn else enum extern false fn for if impl in let loop match mod move
mut pub ref return self Self static struct super trait true type unsafe use where while abstract become box do
final macro override priv try typeof unsized virtual yield gen ctx
""".split())


def rust_ident(name: str, taken=()) -> str:
    out = name
    while out in RUST_KEYWORDS or out in taken:
        out += "_"
    return out


def row(a: Argument) -> AbiRow | None:
    """The ABI row of an argument, None when a foreign kernel cannot take its type."""
    tr = _type_row(a.type, a.is_write)
    return tr.abi if tr is not None else None


def unsupported(decl) -> list[str]:
    """Why `decl` cannot have a foreign kernel (one message per problem; [] when it can)."""
    out = []
    for a in decl.schema.arguments:
        if row(a) is None:
            out.append(f"argument '{a.name}' of type {a.type} cannot be passed to a kernel behind the C ABI "
                       f"(types it takes: {', '.join(sorted(set(ROWS) - {'Tensor(a!)', 'Tensor(a!)?'}))})")
    for _, r, o in kernel_outputs(decl):
        if return_row(r) is None:
            what = "a view of an input" if o.made_by == "alias" else f"a {r.type} the kernel makes"
            out.append(f"return '{o.name}' is {what}; a kernel behind the C ABI returns int, float or bool values, "
                       "and writes Tensor outputs the wrapper allocates from a shape rule (`\"?n\"` for a size "
                       "it finds out: it resizes the output)")
    return out


def _dtype(decl, name: str, combo):
    """The dtype of tensor argument or return `name` in dtype combination `combo`: its
    variable's, else a return's fixed dtype rule's; None when neither gives one."""
    var = decl.dtype_var(name)
    if var is not None:
        return combo[[v.name for v in decl.variables].index(var.name)]
    rule = decl.output_dtype_rule(name) if name in decl.return_names else None
    return rule.fixed if rule is not None else None


def element(decl, name: str, combo) -> str:
    """The Rust element type of tensor argument or return `name` in dtype combination `combo`."""
    dt = _dtype(decl, name, combo)
    return RUST_ELEMENTS.get(dt.name, ANY_ELEMENT) if dt is not None else ANY_ELEMENT


def dtype_text(decl, name: str, combo) -> str:
    dt = _dtype(decl, name, combo)
    return dt.name if dt is not None else "any dtype"


@dataclass(frozen=True)
class Param:
    """One parameter of a foreign kernel's symbol, in order."""

    name: str  # as the schema names it
    c_name: str
    rust_name: str
    c: CType  # C type
    rust_ffi: str
    rust: str  # safe Rust type ({T} filled in per combination by `rust_type`)
    to_rust: str
    tensor: bool  # a tensor (its element type varies with the dtype combination)
    kind: str  # AbiRow.kind; "output" (allocated by the wrapper, or an out= argument); "return"


def params(decl) -> list[Param]:
    """The parameters after `opwrap_context* ctx`: the arguments, the outputs the wrapper
    allocates, then a pointer per non-Tensor return the kernel computes."""
    taken_c, taken_r = {"ctx"}, {"ctx"}
    out = []

    def add(name, c, ffi, rust, to_rust, tensor, kind):
        c_name = cpp_ident(name, taken_c)
        r_name = rust_ident(name, taken_r)
        taken_c.add(c_name)
        taken_r.add(r_name)
        out.append(Param(name, c_name, r_name, CType.parse(c), ffi, rust, to_rust, tensor, kind))

    outs = {a.name for a in decl.out_arguments}
    for a in decl.schema.arguments:
        r = row(a)
        if r is None:
            continue
        # out= arguments are outputs: a kernel may resize them (a data-dependent size)
        add(a.name, r.c, r.rust_ffi, r.rust, r.to_rust, r.kind != "value", "output" if a.name in outs else r.kind)
    for _, o in wrapper_outputs(decl):
        add(o.name, "opwrap_tensor*", "*mut RawTensor", "TensorMut<'_, {T}>", "TensorMut::<{T}>::from_raw({}, ctx)",
            True, "output")
    for _, r, o in kernel_outputs(decl):
        rr = return_row(r)
        if rr is not None:
            add(o.name, rr.c, rr.rust_ffi, rr.rust, "", False, "return")
    return out


def rust_type(decl, p: Param, combo) -> str:
    return p.rust.replace("{T}", element(decl, p.name, combo)) if p.tensor else p.rust


def c_prototype(decl, symbol: str) -> str:
    """`int32_t symbol(opwrap_context* ctx, ...)`."""
    ps = ", ".join(["opwrap_context* ctx"] + [Binding(p.c_name, p.c, p.name).decl() for p in params(decl)])
    return f"int32_t {symbol}({ps})"


def rust_returns(ps: list[Param]) -> str:
    """The Ok type of the safe Rust function with parameters `ps` (`params`): (), one value,
    or a tuple."""
    rets = [p.rust for p in ps if p.kind == "return"]
    return "()" if not rets else rets[0] if len(rets) == 1 else "(" + ", ".join(rets) + ")"


@dataclass(frozen=True)
class Symbol:
    """One exported symbol of a foreign kernel: a dtype combination."""

    name: str
    combo: tuple
    dtypes: str  # "input, target: float32; result: float32", for comments


def symbols(decl, key: str) -> list[Symbol]:
    spec = decl.foreign_kernel(key)
    out = []
    tensors = [p.name for p in params(decl) if p.tensor or p.kind == "output"]
    for combo in decl.dtype_combinations():
        by_dtype: dict[str, list[str]] = {}
        for name in tensors:
            by_dtype.setdefault(dtype_text(decl, name, combo), []).append(name)
        text = "; ".join(f"{', '.join(names)}: {dt}" for dt, names in by_dtype.items())
        out.append(Symbol(spec.symbol_for(combo), combo, text))
    return out


def wrapper_pass(kind: str, value: str, local: str) -> tuple[list[str], str]:
    """How the wrapper passes kernel value `value` (a C++ expression) of `kind`: the
    statements that make `local` (when it needs one) and the argument expression."""
    if kind == "tensor":
        return [f"const opwrap_tensor {local} = opwrap::rt::abi::view({value});"], f"&{local}"
    if kind in ("written", "output"):
        make = "output" if kind == "output" else "written"
        return [f"opwrap_tensor {local} = opwrap::rt::abi::{make}({value});"], f"&{local}"
    if kind == "optional":
        return [f"opwrap::rt::abi::OptionalView {local}({value});"], f"{local}.get()"
    if kind == "list":
        return [f"const opwrap::rt::abi::ListView {local}({value});"], f"{local}.get()"
    return [], f"opwrap::rt::abi::arg({value})"


__all__ = ["ROWS", "RETURNS", "Param", "Symbol", "params", "symbols", "unsupported", "c_prototype", "rust_type",
           "rust_returns", "wrapper_pass", "row", "element", "RUST_ELEMENTS"]
