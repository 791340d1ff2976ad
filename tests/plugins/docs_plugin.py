"""A third-party plugin, as a user would write one outside codegen/: a Markdown reference
page of every op, from each declaration's `doc:`, plus fields of its own: `since:`, typed
as plugins type their fields (codegen/front/fields.py: checked by the loader before the plugin
sees it), and `see_also:`, declared the older way with only a description (any plain YAML
value, given to the plugin frozen: lists as tuples)."""

from opwrap_codegen.plugins import Field, Output, Plugin, String


class OpReference(Plugin):
    name = "docs"
    fields = {
        "since": Field(String(nonempty=True, noun="a version string such as '1.2'", nouns="version strings"),
                       "the version that added the op"),
        "see_also": "related ops, listed on the op's page",
    }

    def emit(self, lib, ctx):
        lines = [f"# {lib.namespace} ops", ""]
        for d in lib.declarations:
            lines += [f"## `{lib.namespace}::{d.op_name}`", "", f"    {d.schema}", "", d.doc or "(undocumented)"]
            if d.extra_field("since"):
                lines += ["", f"Since {d.extra_field('since')}."]
            see = d.extra_field("see_also")
            if see is not None:
                names = see if isinstance(see, tuple) else (see,)
                lines += ["", "See also: " + ", ".join(f"`{n}`" for n in names) + "."]
            lines.append("")
        yield Output("docs/ops.md", "\n".join(lines), lib.sources)
