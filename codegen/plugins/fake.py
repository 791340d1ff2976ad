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

Such ops are not declared `pt2_compliant_tag`.

`fake: module:function` is the escape hatch for results no rule expresses (a reduction over
an `int[1]? dim` with `keepdim` has one: `reduce(self, dim, keepdim)`, codegen/lang/shapes.py):
a fake kernel written in Python, called with the
op's arguments as `torch.library.register_fake` calls one, after the generated dtype,
device and input shape checks.  It computes every return, so no return may have a shape
rule too (the real outputs would follow the rule, the fake ones the function); the kernel
makes them.  The op is then declared `pt2_compliant_tag`, and opcheck checks the function
against the kernel as it checks a generated fake kernel.  It is imported when first
called, not when the library is, so it may import the library.

The generated code calls the helpers of the library's `_runtime.py` (codegen/pyruntime.py)."""

from __future__ import annotations

from dataclasses import replace

from ..api import python as py
from ..core.literals import cpp_string, py_string
from ..front.fields import Field, PyTarget
from ..lang.dtype_rules import render_python as render_rule
from ..lang.schema import is_list_of_tensors
from ..lang.shapes import dynamic_sizes, is_list_output, python_input_checks, python_list_loop, python_output_shape
from .base import Output, Plugin


def fake_module(lib) -> str:
    return f"{lib.config.python_package}._generated.fake"


def fakeable(decl, scalars: bool = True) -> bool:
    """Whether the fake kernel computes every return (no NotImplementedError); with
    `scalars=False`, without data-dependent scalars either.  A pointwise expression's
    outputs follow aten's elementwise rule."""
    if decl.expression is not None or decl.extra_field("fake"):
        return True
    return all(o.made_by != "kernel" or is_list_output(o.shape) or (scalars and py.fake_return(r.type) is not None)
               for o, r in zip(decl.outputs(), decl.schema.returns))


def python_names(decl) -> bool:
    """Whether every argument of the op can be a Python parameter of its own name."""
    return all(py.is_keyword_name(a.name) for a in decl.schema.arguments)


def _dtype_checks(d, lit: str, names: dict[str, str]) -> list[str]:
    """The fake kernel's dtype and device checks, as the real wrapper's: the first tensor of
    each dtype variable has one of its dtypes, the others that one's dtype; every tensor the
    first tensor's device.  out= arguments take their dtype from the result (below)."""
    s = d.schema
    outs = {a.name for a in d.out_arguments}
    singles = [a for a in d.tensor_inputs if a.name not in outs]
    required = [a for a in singles if not a.is_optional]
    lists = [a for a in s.arguments if is_list_of_tensors(a)]
    first = required[0] if required else None
    owner: dict[str, str] = {}  # variable -> the argument that declared it
    body = []
    # the device every element of a list must be on: the first required tensor's, else the first
    # tensor given (named as the real wrapper names it: a lone list's first element)
    if first is not None:
        device_ref = f", {py_string(first.name)}, {names[first.name]}"
    elif lists:
        tensors = [a for a in s.arguments if a in singles or a in lists]
        body.append(f"_given, _given_name = _runtime.first_named({_tuple([py_string(a.name) for a in tensors])}, "
                    f"{_tuple([names[a.name] for a in tensors])})")
        device_ref = ", _given_name, _given"
    for a in required + lists + [a for a in singles if a.is_optional]:
        var = d.dtype_var(a.name)
        value = names[a.name]
        if a in lists:
            ref = owner.get(var.name)
            if ref is None:  # the list declares its variable: its first element's dtype, for the lists after it
                owner[var.name] = f"{a.name}[0]"
                ref_value = "None"
            elif ref.endswith("[0]"):  # declared by a list before: its first element (when it has one)
                ref_value = f"({names[ref[:-3]]}[0] if {names[ref[:-3]]} else None)"
            else:
                ref_value = names[ref]
            body.append(f"_runtime.check_list({lit}, {py_string(a.name)}, {value}, {_allowed(var)}, "
                        f"{py_string(ref if ref_value != 'None' else '')}, {ref_value}{device_ref})")
            continue
        if first is None:
            continue
        if var.name not in owner:
            guard = f"if {value} is not None: " if a.is_optional else ""
            body.append(f"{guard}_runtime.check_dtype({lit}, {py_string(a.name)}, {value}, {_allowed(var)})")
            if not a.is_optional:
                owner[var.name] = a.name
            if a is not first:
                body.append(f"_runtime.check_device({lit}, {py_string(a.name)}, {value}, {py_string(first.name)}, "
                            f"{names[first.name]})")
        else:
            ref = owner[var.name]
            body.append(f"_runtime.check_like({lit}, {py_string(a.name)}, {value}, {py_string(ref)}, {names[ref]})")
            if ref != first.name:
                body.append(f"_runtime.check_device({lit}, {py_string(a.name)}, {value}, {py_string(first.name)}, "
                            f"{names[first.name]})")
    return body


def _allowed(var) -> str:
    """A dtype variable's dtypes as the runtime checks take them: (torch dtypes), "names"."""
    return f"{_tuple([dt.python for dt in var.dtypes])}, {py_string(', '.join(dt.name for dt in var.dtypes))}"


def _tuple(items: list[str]) -> str:
    return "(" + "".join(f"{x}, " for x in items).rstrip(" ") + ")"


class FakeKernels(Plugin):
    name = "fake"
    fields = {
        "fake": Field(PyTarget(), "a fake kernel written in Python, `module:function` (e.g. `mylib.fakes:mysum`), "
                      "for results no shape rule expresses: called with the op's arguments as "
                      "`torch.library.register_fake` calls one, after the generated dtype, device and input shape "
                      "checks, it returns every result (no return has a shape rule then: the kernel makes them). "
                      "Imported when first called; checked by opcheck as a generated fake kernel is."),
    }

    def validate(self, decl, lib, diag):
        if not decl.extra_field("fake"):
            return
        where = decl.field_loc("fake")
        if decl.expression is not None or decl.rows is not None:
            diag.error(where, "a pointwise or row-wise op's fake kernel is generated from its expression or program",
                       "leave 'fake' out")
        elif decl.extra_field("method"):
            diag.error(where, "a custom class method is faked by its fake class's method", "leave 'fake' out")
        else:
            ruled = [o.name for o in decl.outputs() if o.made_by == "wrapper"]
            if ruled:
                diag.error(where, f"'fake' computes every return, but {', '.join(repr(n) for n in ruled)} "
                           f"{'has' if len(ruled) == 1 else 'have'} a shape rule too (the real output would follow "
                           "the rule, the fake one the function)",
                           "leave the return out of 'shape:' (and 'like:'): the kernel makes it and returns it")

    def transform(self, lib, diag):
        """Every op with a generated fake kernel that computes all its returns is declared
        pt2_compliant_tag: its fake kernel comes from the same shape rule as its real
        outputs, and opwrap_codegen.testing's opcheck suite (run by the library's tests) checks
        the claim for every op and dtype.  Left out: ops with a data-dependent scalar
        return (opcheck's fake tests do not take them), and ops with an argument named like
        a Python keyword, which torch (2.14) cannot check or compile: torch.fx makes a Python
        signature of the schema (opcheck's test_schema, inductor's lowering) and writes
        keyword arguments as `from=...` in its generated code."""
        return replace(lib, declarations=tuple(
            replace(d, tags=d.tags + ("pt2_compliant_tag",))
            if d.devices and "pt2_compliant_tag" not in d.tags and fakeable(d, scalars=False) and python_names(d) else d
            for d in lib.declarations))

    def library_block(self, lib):
        if any(d.devices or d.extra_field("method") for d in lib.declarations):
            yield f"m.set_python_module({cpp_string(fake_module(lib))});"

    def emit(self, lib, ctx):
        functions = [f for f in (fake_function(d, lib.namespace) for d in lib.declarations) if f is not None]
        template = "python/fake.py.j2"
        yield Output("python/fake.py", ctx.render(template, namespace=lib.namespace, functions=functions),
                     lib.sources + (ctx.template_source(template),))


def _pointwise_body(d, names: dict[str, str], lit: str, allowed: str, allowed_names: str) -> list[str]:
    """The fake kernel of a pointwise expression: aten's elementwise rule (broadcast shapes,
    promoted dtype)."""
    s = d.schema
    tensors = d.expression.tensors
    float_op = all(dt.is_floating for dt in d.dtypes)
    result = (f"_runtime.pointwise_output({lit}, {_tuple([py_string(n) for n in tensors])}, "
              f"{_tuple([names[n] for n in tensors])}, {allowed}, {allowed_names}, float_op={float_op})")
    if d.out_arguments:  # an out= overload: written to the out= argument as TensorIterator does
        out = d.out_arguments[0].name
        return [f"return _runtime.pointwise_out({lit}, {py_string(out)}, {names[out]}, {result})"]
    if len(s.returns) == 1:
        return [f"return {result}"]
    # Several outputs of one TensorIterator: the same shape, dtype and strides.
    return ["_result = " + result,
            "return " + ", ".join(["_result"] + ["torch.empty_like(_result)"] * (len(s.returns) - 1))]


def _declared_body(d, names: dict[str, str], lit: str, op: str) -> list[str]:
    """The fake kernel of an op declaring one in Python (`fake: module:function`): the
    generated checks, then the function, called as register_fake calls a fake kernel."""
    s = d.schema
    body = _dtype_checks(d, lit, names)
    if d.shape_plan is not None:
        body.extend(python_input_checks(d.shape_plan, op, s, names=names))
    for o in d.outputs():  # a return with dtypes of its own: its rule's value is among them, as the wrapper checks
        var = dict(d.dtype_owners).get(o.name)
        if var is not None and o.dtype_rule is not None:
            body.append(f"_runtime.check_output_dtype({lit}, {py_string(o.name)}, {render_rule(o.dtype_rule, names)}, "
                        f"{_allowed(d.variable(var))}, {py_string(o.dtype_rule.text)})")
    module, _, function = d.extra_field("fake").partition(":")
    args = [names[a.name] if not a.kwarg_only else f"{a.name}={names[a.name]}" if py.is_keyword_name(a.name)
            else f"**{{{py_string(a.name)}: {names[a.name]}}}" for a in s.arguments]
    return body + [f"return _runtime.load_function({py_string(module)}, {py_string(function)})({', '.join(args)})"]


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
    if not d.devices:
        return None
    lit = py_string(op)
    allowed = _tuple([dt.python for dt in d.dtypes])
    allowed_names = py_string(", ".join(dt.name for dt in d.dtypes))
    if d.expression is not None:  # aten's elementwise rule: broadcast shapes, promoted dtype
        body.extend(_pointwise_body(d, names, lit, allowed, allowed_names))
        return done
    if d.extra_field("fake"):
        body.extend(_declared_body(d, names, lit, op))
        return done
    for o, r in zip(d.outputs(), s.returns):
        if o.made_by == "kernel" and py.fake_return(r.type) is None and not is_list_output(o.shape):
            why = (f"a list whose length only the kernel knows ({o.shape.text}), which torch.compile and torch.export "
                   "cannot trace" if o.shape is not None and o.shape.each is not None else
                   f"a Tensor[] the kernel makes, and no rule gives its shapes: add a 'shape:' rule for '{o.name}' "
                   "that lists them, such as \"[[N, D] for i in range(n)]\"" if str(r.type) == "Tensor[]" else
                   py.no_fake_reason(r.type, o.name))
            body.append(f"_runtime.no_fake({lit}, {py_string(o.name)}, {py_string(why)})")
            return done
    body.extend(_dtype_checks(d, lit, names))
    if d.shape_plan is not None:
        body.extend(python_input_checks(d.shape_plan, op, s, names=names))
    for size in dynamic_sizes(o.shape for o in d.outputs() if o.shape is not None):
        body.append(f"{names.get(size, size)} = _runtime.dynamic_size()  # data-dependent")
    required = [a for a in d.tensor_inputs if not a.is_optional]
    lists = [a for a in s.arguments if is_list_of_tensors(a)]
    if required:
        device, dispatched = f"{names[required[0].name]}.device", f"{names[required[0].name]}.dtype"
    elif d.tensor_inputs or lists:  # the first tensor given, as the real wrapper dispatches
        given = _tuple([names[a.name] for a in s.arguments if a in d.tensor_inputs or a in lists])
        body.append(f"_first = _runtime.first_given({given})")
        device, dispatched = "_first.device", "_first.dtype"
    else:
        device, dispatched = '"cpu"', d.dtypes[0].python if d.dtypes else "torch.float32"
    results = []
    for i, (o, r) in enumerate(zip(d.outputs(), s.returns)):
        dtype = render_rule(o.dtype_rule, names) if o.dtype_rule is not None else dispatched
        if is_list_output(o.shape):  # a Tensor[] return: one new tensor per element of its shape rule
            results.append(f"_out{i}")
            body.append(f"_out{i} = [_runtime.new_output({lit}, {py_string(o.name)}, "
                        f"{python_output_shape(o.shape, names=names, op=lit)}, {dtype}, {device}) "
                        f"{python_list_loop(o.shape, names=names)}]")
        elif o.made_by == "alias" and o.aliases in {a.name for a in d.out_arguments}:
            # An out= argument: checked against the result's dtype and device, and resized to
            # its shape rule as at::native::resize_output does (warning when it held elements).
            shape = (python_output_shape(o.shape, names=names, op=lit) if o.shape is not None
                     else f"{names[d.like]}.shape" if d.like else "None")
            body.append(f"_runtime.resize_out({lit}, {py_string(o.aliases)}, {names[o.aliases]}, {shape}, {dtype}, "
                        f"{device})")
            results.append(names[o.aliases])
        elif o.made_by == "alias":
            results.append(names[o.aliases])
        elif o.made_by == "kernel":
            results.append(f"_out{i}")
            body.append(f"_out{i} = _runtime.data_dependent_int({lit})")
        else:
            var = dict(d.dtype_owners).get(o.name)
            if var is not None:  # the return has dtypes of its own: its rule's value is among them
                body.append(f"_runtime.check_output_dtype({lit}, {py_string(o.name)}, {dtype}, "
                            f"{_allowed(d.variable(var))}, {py_string(o.dtype_rule.text if o.dtype_rule else '')})")
            shape = python_output_shape(o.shape, names=names, op=lit) if o.shape is not None else f"{names[d.like]}.shape"
            results.append(f"_out{i}")
            body.append(f"_out{i} = _runtime.new_output({lit}, {py_string(o.name)}, {shape}, {dtype}, {device})")
    body.append("return " + (", ".join(results) if results else "None"))
    return done
