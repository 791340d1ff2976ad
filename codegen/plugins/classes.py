"""Custom classes (TorchBind): the `m.class_<T>` binding with its constructor, methods,
`__obj_flatten__` and pickling, in the one TORCH_LIBRARY block (before the ops whose
schemas name the class); a Python fake class registered with
`torch._library.register_fake_class` for torch.compile and torch.export; and kernels (in the same block)
for ops that are a method call on a class argument (`method: foo.for_each_add_`); their fake
kernels, in the fake plugin's module, call the fake class's method.  See codegen/front/classes.py for the declaration."""

from __future__ import annotations

import textwrap

from ..api import cpp
from ..api import python as py
from ..core.literals import py_string
from ..api.python import method_call
from ..lang.schema import ClassType, is_tensor, unwrap_optional
from ..front.fields import Field, Pattern
from .base import Output, Plugin


def cpp_class(ns: str, c) -> str:
    return f"::{ns}::kernels::{c.name}"


class Classes(Plugin):
    name = "classes"
    fields = {"method": Field(Pattern(r"[A-Za-z_]\w*\.[A-Za-z_]\w*", "a method call as '<argument>.<method>'"),
                              "the op calls this method of a custom class argument, `<argument>.<method>` (below); "
                              "it has no `kernels`.")}

    def validate(self, decl, lib, diag):
        if decl.extra_field("method") is None:
            return
        loc = decl.field_loc("method")
        arg, method = method_call(decl)
        a = decl.schema.argument(arg)
        if a is None or not isinstance(a.type, ClassType):
            diag.error(loc, f"'method: {decl.extra_field('method')}' must name a class argument of {decl.name}, as "
                       "'<argument>.<method>'")
            return
        c = next((c for c in lib.classes if c.name == a.type.class_name), None)
        if c is None:
            diag.error(loc, f"class '{a.type.class_name}' is not declared (a '- class:' entry)")
        elif method not in {m.name for m in c.methods}:
            diag.error(loc, f"class {c.name} has no method '{method}'")
        if decl.devices:
            diag.error(loc, "an op that calls a class method has no 'kernels'")

    def transform(self, lib, diag):
        """Checks the classes (the library's, not a declaration's: `validate` sees ops): each
        constructor argument is a type the registration's `torch::init<...>` takes.  Returns
        the library as it is."""
        for c in lib.classes:
            for a in c.init.arguments:
                try:
                    cpp.value_type(unwrap_optional(a.type))
                except cpp.UnsupportedType as e:
                    diag.error(c.init_loc, f"class {c.name}: constructor argument '{a.name}' of type {a.type} is not "
                               f"supported" + (f": {e.reason}" if e.reason else ""))
        return lib

    def library_includes(self, lib):
        if lib.classes:
            yield "<torch/custom_class.h>"
            yield "<tuple>"
        for c in lib.classes:
            yield f'"{c.header}"'
        if any(d.extra_field("method") for d in lib.declarations):
            yield "<opwrap/runtime/checks.h>"  # with_context: errors from a method name the op

    def library_block(self, lib):
        ns = lib.namespace
        for c in lib.classes:
            t = cpp_class(ns, c)
            init = ", ".join(cpp.value_type(unwrap_optional(a.type)) for a in c.init.arguments)
            yield f'm.class_<{t}>("{c.name}")'
            yield f"    .def(torch::init<{init}>())"
            for m in c.methods:
                yield f'    .def("{m.name}", &{t}::{m.name})'
            state = ", ".join(f'std::make_tuple(std::string("{n}"), {expr})' for n, expr in c.flatten)
            yield f'    .def("__obj_flatten__", [](const c10::intrusive_ptr<{t}>& self) {{ return std::make_tuple({state}); }})'
            if c.pickle:
                yield f"    .def_pickle([](const c10::intrusive_ptr<{t}>& self) {{ return self->{c.pickle}(); }},"
                yield (f"                [](decltype(std::declval<{t}&>().{c.pickle}()) state) "
                       f"{{ return c10::make_intrusive<{t}>(std::move(state)); }})")
            yield "    ;"
        # Kernels of the ops that call a method: registered here, after the class, because
        # inferring their signature needs the class type (another translation unit's static
        # initializer could run first).
        for d in lib.declarations:
            if not d.extra_field("method"):
                continue
            arg, method = method_call(d)
            others = ", ".join(a.name for a in d.schema.arguments if a.name != arg)
            params = ", ".join(f"{_qualify(cpp.argument_type(a), ns, lib)} {a.name}" for a in d.schema.arguments)
            call = f"{arg}->{method}({others})"
            what = f"calling the {method} method of '{arg}'"
            yield (f'm.impl("{d.op_name}", torch::dispatch(c10::DispatchKey::CompositeExplicitAutograd, '
                   f"[]({params}) -> {cpp.returns_type(d.schema)} {{\n"
                   f'    return opwrap::rt::with_context("{ns}::{d.op_name}", "{what}", [&] {{ return {call}; }});\n'
                   f"  }}));")

    def emit(self, lib, ctx):
        ns = lib.namespace
        fakes = []
        for c in lib.classes:
            methods = [dict(name=m.name, params=py.method_parameters(m.schema), schema=str(m.schema),
                            body=textwrap.indent(m.fake.strip(), " " * 8)) for m in c.methods]
            state = [py_string(n) for n, _ in c.flatten]
            doc = (c.doc or c.name).replace("\\", "\\\\").replace('"""', '\\"\\"\\"')
            fakes.append(dict(name=c.name, qualified=py_string(c.qualified(ns)), doc=doc,
                              state="".join(f"{n}, " for n in state).rstrip(" "), methods=methods))
        if fakes:
            template = "python/classes.py.j2"
            yield Output("python/classes.py", ctx.render(template, namespace=ns, classes=fakes),
                         lib.sources + (ctx.template_source(template),))


def _qualify(cpp_type: str, ns: str, lib) -> str:
    for c in lib.classes:
        cpp_type = cpp_type.replace(f"c10::intrusive_ptr<{c.name}>", f"c10::intrusive_ptr<{cpp_class(ns, c)}>")
    return cpp_type
