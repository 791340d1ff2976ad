"""The reference tables of the documentation, generated from the code they describe: the
declaration fields (the core's and the built-in plugins'), the schema types, the dtypes, and the features
of each claimed torch release.  Apart from those modules, so that none of them imports the
plugins to document itself (fields.py once did, and closed an import cycle through every
plugin).  `python -m opwrap_codegen.reference fields|types|torch|dtypes` prints one."""

from __future__ import annotations

import sys

from .api import types
from .front.fields import Any, Field, as_field, reference
from .front.loader import CORE_FIELDS
from .plugins import builtin_plugins
from .core import dtypes, torch_compat


def builtin_fields() -> dict[str, Field]:
    """The core fields and the built-in plugins' fields, in pipeline order."""
    fields = dict(CORE_FIELDS)
    for p in builtin_plugins():
        for name, spec in p.fields.items():
            fields[name] = as_field(spec) or Field(Any(), str(spec))
    return fields


def field_table() -> str:
    """The declaration fields as a Markdown table: name, type, meaning."""
    return reference(builtin_fields())


def type_table() -> str:
    """The schema types as a Markdown table (api/types.py's rows)."""
    return types.markdown_table()


def torch_table() -> str:
    """Each feature against each claimed torch release (torch_compat.FEATURES)."""
    return torch_compat.feature_table()


def dtype_table() -> str:
    """The dtypes a declaration may name (dtypes.DTYPES, GROUPS)."""
    return dtypes.markdown_table()


TABLES = {"fields": field_table, "types": type_table, "torch": torch_table, "dtypes": dtype_table}


def main(argv: list[str]) -> int:
    if len(argv) != 1 or argv[0] not in TABLES:
        print(f"usage: python -m opwrap_codegen.reference {'|'.join(TABLES)}", file=sys.stderr)
        return 2
    print(TABLES[argv[0]](), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
