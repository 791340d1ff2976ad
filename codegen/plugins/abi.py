"""Bindings of the kernels behind the C ABI (`kernels: {CPU: {abi: c|rust, ...}}`):

- ``abi/<op>.h``: the C prototypes of an op's symbols, one per dtype combination, which the
  generated wrapper calls and a C, CUDA C or C++ kernel file includes, so that a definition
  that does not match is a compile error;
- ``rust/kernels.rs``: for the ops whose kernels are Rust functions, the exported
  ``extern "C"`` symbols, each calling ``crate::<function>`` with safe views, so that a Rust
  function with the wrong signature does not compile, and catching panics at the boundary;
- ``rust/kernel_abi.rs`` beside it: the ABI's ``#[repr(C)]`` types, the safe views and the
  call, which depend on no declaration: a copy of the runtime's Rust source,
  runtime/include/opwrap/kernel_abi.rs (compiled on its own by tests/test_rust_runtime.py),
  that kernels.rs brings in as a module (``#[path = "kernel_abi.rs"] mod kernel_abi;``), so
  a crate finds it through the generated directory, as it finds kernels.rs.

The prototypes and the symbols are rendered from codegen/api/abi.py, the table the
wrapper's call is planned from.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..api import abi
from .base import Output, Plugin

RUST_BINDINGS = "rust/kernels.rs"
RUST_RUNTIME = "rust/kernel_abi.rs"
# The runtime's Rust source, as named in the copy's banner (the toolchain ships it in
# opwrap_codegen/include/, with the support headers).
RUST_RUNTIME_SOURCE = "runtime/include/opwrap/kernel_abi.rs"


def rust_runtime_path() -> Path:
    """runtime/include/opwrap/kernel_abi.rs of a source checkout, or the installed toolchain's."""
    here = Path(__file__).resolve().parents[2] / RUST_RUNTIME_SOURCE
    if here.is_file():
        return here
    from importlib.resources import files
    return Path(str(files("opwrap_codegen") / "include" / "opwrap" / "kernel_abi.rs"))


@dataclass(frozen=True)
class RustOp:
    """One Rust kernel's symbols, as the template lays them out."""

    decl: object
    function: str
    symbols: tuple
    params: tuple

    @property
    def inputs(self):
        return [p for p in self.params if p.kind != "return"]

    @property
    def returned(self):
        return [p for p in self.params if p.kind == "return"]

    @property
    def returns(self) -> str:
        return abi.rust_returns(list(self.params))

    def signature(self, symbol) -> str:
        """The safe function `crate::<function>` must be, for one dtype combination."""
        args = "".join(f", {p.rust_name}: {abi.rust_type(self.decl, p, symbol.combo)}" for p in self.inputs)
        return f"fn {self.function.rsplit('::', 1)[-1]}(ctx: &Context{args}) -> Result<{self.returns}>"

    def body(self, symbol) -> list[str]:
        """The statements of a symbol's closure: the call with safe views, then the returned
        values written through their pointers."""
        def convert(p) -> str:
            value = p.to_rust.replace("{T}", abi.element(self.decl, p.name, symbol.combo)).format(p.rust_name)
            return f"unsafe {{ {value} }}" if p.tensor else value  # views of raw pointers
        args = "".join(", " + convert(p) for p in self.inputs)
        call = f"crate::{self.function}(ctx{args})"
        rets = self.returned
        if not rets:
            return [call]
        lines = [f"let value = {call}?;"]
        if len(rets) == 1:
            lines.append(f"unsafe {{ *{rets[0].rust_name} = value }};")
        else:
            lines += [f"unsafe {{ *{p.rust_name} = value.{k} }};" for k, p in enumerate(rets)]
        return lines + ["Ok(())"]


class AbiBindings(Plugin):
    name = "abi"

    def emit(self, lib, ctx):
        ns = lib.namespace
        rust_ops, seen = [], set()
        for d in lib.declarations:
            if not d.foreign:
                continue
            foreign = [(key, spec, abi.symbols(d, key)) for key, spec in d.foreign]
            template = "abi/op.h.j2"
            guard = f"{ns}_ABI_{d.ident}_H".upper()
            text = ctx.render(template, namespace=ns, decl=d, foreign=foreign, guard=guard,
                              keys=" and ".join(k for k, _ in d.foreign),
                              prototype=lambda symbol, d=d: abi.c_prototype(d, symbol))
            yield Output(f"abi/{d.ident}.h", text, (d.path, ctx.template_source(template)))
            for key, spec, symbols in foreign:
                if spec.abi == "rust" and spec.symbol not in seen:  # an out= overload shares its op's symbols
                    seen.add(spec.symbol)
                    rust_ops.append(RustOp(d, spec.function, tuple(symbols), tuple(abi.params(d))))
        if rust_ops:
            template = "abi/kernels.rs.j2"
            yield Output(RUST_BINDINGS, ctx.render(template, namespace=ns, ops=rust_ops),
                         tuple(sorted({op.decl.path for op in rust_ops})) + (ctx.template_source(template),))
            yield Output(RUST_RUNTIME, rust_runtime_path().read_text(encoding="utf-8"), (RUST_RUNTIME_SOURCE,))
