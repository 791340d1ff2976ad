"""A third-party plugin, as a user would write one outside codegen/: a Markdown reference
page of every op, from each declaration's `doc:`, plus a field of its own (`since:`)."""

from codegen.plugins import Output, Plugin


class OpReference(Plugin):
    name = "docs"
    fields = {"since": "the version that added the op"}

    def validate(self, decl, lib, diag):
        since = decl.extra_field("since")
        if since is not None and not isinstance(since, str):
            diag.error(decl.field_loc("since"), "'since' must be a version string")

    def emit(self, lib, ctx):
        lines = [f"# {lib.namespace} ops", ""]
        for d in lib.declarations:
            lines += [f"## `{lib.namespace}::{d.op_name}`", "", f"    {d.schema}", "", d.doc or "(undocumented)"]
            if d.extra_field("since"):
                lines += ["", f"Since {d.extra_field('since')}."]
            lines.append("")
        yield Output("docs/ops.md", "\n".join(lines), lib.sources)
