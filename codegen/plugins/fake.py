"""Fake kernels for torch.compile and torch.export: `torch.library.register_fake` functions
built from the same shape rule and dtype rule that allocate the real outputs, so the two
cannot disagree.  The TORCH_LIBRARY block names their module with `m.set_python_module`,
so loading the shared library alone is enough for torch to find them.

A return the kernel makes itself (`OutputSpec.made_by == "kernel"`: no shape rule, no
`like`, or not a tensor) has no rule to fake it from:

- a `SymInt` is an unbacked symbol, as torch's fake tensors make for `Tensor.item()`
  (torch.compile takes it with `capture_scalar_outputs` and breaks the graph there
  otherwise; torch.export takes it).  An `int`, `float` or `bool` cannot be: torch turns
  the fake kernel's value into a plain number;
- anything else gets a fake kernel that raises a NotImplementedError naming the op and the
  return and saying what to declare (a `shape:` rule for a tensor, `SymInt` for an `int`).
  That is clearer than no fake kernel at all, which torch reports as an operator with no
  fake implementation, without the fix.

Such ops are not declared `pt2_compliant_tag`.  The generated code calls the helpers of
the library's `_runtime.py` (codegen/pyruntime.py)."""

from __future__ import annotations

from dataclasses import replace

from ..api import python as py
from ..api.names import cpp_string, py_string
from ..dtypes import DTYPES
from ..schema import ListType
from ..shapes import dynamic_sizes, python_input_checks, python_output_shape
from .base import Output, Plugin


def fake_module(lib) -> str:
    return f"{lib.config.python_package}._generated.fake"


def fakeable(decl, scalars: bool = True) -> bool:
    """Whether the fake kernel computes every return (no NotImplementedError); with
    `scalars=False`, without data-dependent scalars either.  A pointwise expression's
    outputs follow aten's elementwise rule."""
    if decl.expression is not None:
        return True
    return all(o.made_by != "kernel" or (scalars and py.fake_return(r.type) is not None)
               for o, r in zip(decl.outputs(), decl.schema.returns))


def python_names(decl) -> bool:
    """Whether every argument of the op can be a Python parameter of its own name."""
    return all(py.is_keyword_name(a.name) for a in decl.schema.arguments)


def _tuple(items: list[str]) -> str:
    return "(" + "".join(f"{x}, " for x in items).rstrip(" ") + ")"


class FakeKernels(Plugin):
    name = "fake"

    def transform(self, lib, diag):
        """Every op with a generated fake kernel that computes all its returns is declared
        pt2_compliant_tag: its fake kernel comes from the same shape rule as its real
        outputs, and codegen.testing's opcheck suite (run by the library's tests) checks
        the claim for every op and dtype.  Left out: ops with a data-dependent scalar
        return (opcheck's fake tests do not take them), and ops with an argument named like
        a Python keyword, which torch (2.14) cannot check or compile: torch.fx makes a Python
        signature of the schema (opcheck's test_schema, inductor's lowering) and writes
        keyword arguments as `from=...` in its generated code."""
        return replace(lib, declarations=tuple(
            replace(d, tags=d.tags + ("pt2_compliant_tag",))
            if d.kernels and "pt2_compliant_tag" not in d.tags and fakeable(d, scalars=False) and python_names(d) else d
            for d in lib.declarations))

    def library_block(self, lib):
        if any(d.kernels or d.extra_field("method") for d in lib.declarations):
            yield f"m.set_python_module({cpp_string(fake_module(lib))});"

    def emit(self, lib, ctx):
        functions = [f for f in (fake_function(d, lib.namespace) for d in lib.declarations) if f is not None]
        template = "python/fake.py.j2"
        yield Output("python/fake.py", ctx.render(template, namespace=lib.namespace, functions=functions),
                     lib.sources + (ctx.template_source(template),))


def fake_function(d, ns: str) -> dict | None:
    """The template values of one op's fake kernel, or None when it has none."""
    op = f"{ns}::{d.op_name}"
    s = d.schema
    sig = py.fake_signature(s)
    names = sig.idents
    body: list[str] = list(sig.prologue)
    done = dict(op=py_string(op), ident=d.ident, params=sig.params, schema=str(s), body=body)
    if d.extra_field("method"):  # a method call on a custom class: the fake class runs it
        arg, method = py.method_call(d)
        others = ", ".join(names[a.name] for a in s.arguments if a.name != arg)
        body.append(f"return {names[arg]}.{method}({others})")
        return done
    if not d.kernels:
        return None
    lit = py_string(op)
    allowed = _tuple([dt.python for dt in d.dtypes])
    allowed_names = py_string(", ".join(dt.name for dt in d.dtypes))
    if d.expression is not None:  # aten's elementwise rule: broadcast shapes, promoted dtype
        tensors = d.expression.tensors
        float_op = all(dt.is_floating for dt in d.dtypes)
        body.append(f"return _runtime.pointwise_output({lit}, {_tuple([py_string(n) for n in tensors])}, "
                    f"{_tuple([names[n] for n in tensors])}, {allowed}, {allowed_names}, float_op={float_op})")
        return done
    for o, r in zip(d.outputs(), s.returns):
        if o.made_by == "kernel" and py.fake_return(r.type) is None:
            body.append(f"_runtime.no_fake({lit}, {py_string(o.name)}, {py_string(py.no_fake_reason(r.type, o.name))})")
            return done
    tensors = [a for a in d.tensor_inputs if not isinstance(a.type, ListType)]
    required = [a for a in tensors if not a.is_optional]
    if required:
        first = required[0]
        body.append(f"_runtime.check_dtype({lit}, {py_string(first.name)}, {names[first.name]}, {allowed}, {allowed_names})")
        for a in tensors:
            if a is not first:
                body.append(f"_runtime.check_like({lit}, {py_string(a.name)}, {names[a.name]}, "
                            f"{py_string(first.name)}, {names[first.name]})")
    if d.shape_plan is not None:
        body.extend(python_input_checks(d.shape_plan, op, s, names=names))
    for size in dynamic_sizes(o.shape for o in d.outputs() if o.shape is not None):
        body.append(f"{names.get(size, size)} = _runtime.dynamic_size()  # data-dependent")
    device = f"{names[required[0].name]}.device" if required else '"cpu"'
    results = []
    for i, (o, r) in enumerate(zip(d.outputs(), s.returns)):
        if o.made_by == "alias":
            results.append(names[o.aliases])
        elif o.made_by == "kernel":
            results.append(f"_out{i}")
            body.append(f"_out{i} = _runtime.data_dependent_int({lit})")
        else:
            rule = o.dtype
            dtype = DTYPES[rule].python if rule in DTYPES else f"{names[rule]}.dtype"
            shape = python_output_shape(o.shape, names=names) if o.shape is not None else f"{names[d.like]}.shape"
            results.append(f"_out{i}")
            body.append(f"_out{i} = _runtime.new_output({lit}, {py_string(o.name)}, {shape}, {dtype}, {device})")
    body.append("return " + (", ".join(results) if results else "None"))
    return done
