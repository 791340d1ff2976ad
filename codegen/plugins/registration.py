"""The one `TORCH_LIBRARY(<namespace>, m)` block: every schema, with tags, plus the
statements other plugins contribute through the `library_block` hook."""

from __future__ import annotations

from .base import Output, Plugin


def cpp_string(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


class SchemaRegistration(Plugin):
    name = "schema"

    def __init__(self, plugins=()):
        self.plugins = plugins  # the active plugin list, to collect library_block statements

    def emit(self, lib, ctx):
        defs = []
        for d in lib.declarations:
            tags = "{" + ", ".join(f"at::Tag::{t}" for t in d.tags) + "}"
            defs.append(f"m.def({cpp_string(str(d.schema))}, {tags});" if d.tags else f"m.def({cpp_string(str(d.schema))});")
        extra = [line for p in self.plugins for line in p.library_block(lib)]  # emitted before the defs
        template = "registration.cpp.j2"
        text = ctx.render(template, namespace=lib.namespace, defs=defs, extra=extra)
        yield Output("registration.cpp", text, lib.sources + (ctx.template_source(template),))
