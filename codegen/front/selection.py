"""Selective builds: a library built with some of its ops and dtypes.

In the vocabulary of torchgen's selective build (``SelectiveBuilder``): the *selected
operators* are named as ``op`` (every overload) or ``op.overload``, with or without the
``<namespace>::`` prefix, and the *selected dtypes* (torchgen's per-kernel dtype lists,
here one list for the build) as dtype names or groups (``floating``).  An op whose
derivative formulas call another op of the library keeps that op too, as torchgen keeps
the ops a root operator calls.  An op left with none of its dtypes is left out.

``codegen build --ops ... --dtypes ...`` generates the selected library into
``<build>/generated`` and compiles that: the ops left out are not registered at all, and
a call with a dtype left out fails in the op's dtype check, which names the op, the
argument and the dtypes this build has.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

from ..core.diagnostics import Diagnostics, Loc, did_you_mean
from ..core.dtypes import DTYPES, GROUPS
from .model import Library

_CALL = re.compile(r"(?<![\w.:>])([A-Za-z_]\w*)\s*\(")


@dataclass(frozen=True)
class Selection:
    ops: tuple[str, ...] = ()  # () selects every op
    dtypes: tuple[str, ...] = ()  # () selects every dtype

    def __bool__(self) -> bool:
        return bool(self.ops or self.dtypes)

    def as_dict(self) -> dict:
        return {"ops": list(self.ops) or None, "dtypes": list(self.dtypes) or None}


def _words(values) -> tuple[str, ...]:
    """`--ops a,b --ops c` and `["a", "b"]` alike: the names, in order, without repeats."""
    out: list[str] = []
    for v in values or ():
        for w in str(v).split(","):
            w = w.strip()
            if w and w not in out:
                out.append(w)
    return tuple(out)


def parse(ops=(), dtypes=()) -> Selection:
    return Selection(_words(ops), _words(dtypes))


def formula_callees(lib: Library, decl) -> list:
    """The library's declarations that `decl`'s derivative formulas call, in the order the
    formulas name them (a name with overloads: its last declaration)."""
    if decl.derivatives is None:
        return []
    by_name = {d.name: d for d in lib.declarations}
    out = []
    for f in (*decl.derivatives.formulas, *decl.derivatives.forward):
        for callee in _CALL.findall(f.text):
            dep = by_name.get(callee)
            if dep is not None and dep not in out:
                out.append(dep)
    return out


def apply(lib: Library, sel: Selection, diag: Diagnostics, loc: Loc) -> tuple[Library, list[str]]:
    """The library with only the selected ops and dtypes, and one note per op it keeps or
    leaves out for a reason the user did not name (a formula's call, no dtype left)."""
    notes: list[str] = []
    if not sel:
        return lib, notes
    ns = lib.namespace
    decls = lib.declarations
    by_name = {d.name: d for d in decls}
    by_op = {d.op_name: d for d in decls}

    dtypes = None
    if sel.dtypes:
        dtypes = set()
        for name in sel.dtypes:
            if name in GROUPS:
                dtypes.update(GROUPS[name])
            elif name in DTYPES:
                dtypes.add(name)
            else:
                diag.error(loc, f"--dtypes: unknown dtype '{name}'",
                           did_you_mean(name, [*DTYPES, *GROUPS]) or "dtypes: " + ", ".join([*DTYPES, *GROUPS]))

    chosen: set[str] = set()
    for name in sel.ops or [d.op_name for d in decls]:
        op = name
        if "::" in op:
            prefix, _, op = op.partition("::")
            if prefix != ns:
                diag.error(loc, f"--ops: '{name}' is not in this library's namespace '{ns}'")
                continue
        if op in by_op:
            chosen.add(op)
        elif op in by_name:
            chosen.update(d.op_name for d in decls if d.name == op)
        else:
            diag.error(loc, f"--ops: no op '{name}' in the declarations", did_you_mean(op, by_op))
    if diag:
        return lib, notes

    # The ops that selected ops' derivative formulas call, transitively.
    todo = sorted(chosen)
    while todo:
        d = by_op[todo.pop()]
        for dep in formula_callees(lib, d):
            if dep.op_name not in chosen:
                chosen.add(dep.op_name)
                todo.append(dep.op_name)
                notes.append(f"keeping {ns}::{dep.op_name}: the derivative of {ns}::{d.op_name} calls it")

    kept = []
    for d in decls:
        if d.op_name not in chosen:
            continue
        if dtypes is not None and d.dtypes:
            left = tuple(dt for dt in d.dtypes if dt.name in dtypes)
            if not left:
                notes.append(f"leaving out {ns}::{d.op_name}: none of its dtypes "
                             f"({', '.join(dt.name for dt in d.dtypes)}) is selected")
                continue
            d = dataclasses.replace(d, dtypes=left)
        kept.append(d)
    return dataclasses.replace(lib, declarations=tuple(kept)), notes
