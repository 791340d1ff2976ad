"""Unity builds: the generated sources of one group compiled as a few translation units.

Most of the compile time of a generated source is the headers it parses (ATen's Tensor,
torch/library.h, TensorIterator and at::vec, custom_function.h), not its own code (the
measurements: docs/architecture.md, "Unity units").  So every plugin emits its per-op
sources (``cpu/<op>.cpp``, readable and diffable one op at a time) and tags each with a group
(``Output.unit``); this step writes ``units/<group>.<k>.cpp`` (``.cu`` for CUDA) files that
``#include`` up to ``[tool.codegen] unity`` sources each, and the build compiles those
units instead of the sources they include.

The sources of a group are sorted by path and cut into the fewest units of at most
``unity`` sources, of nearly equal size, so a build on several cores runs them side by
side and an edit to one op recompiles only its unit.  ``unity = 1`` gives one unit per
source: the layout of a build without unity units.
"""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath

UNITS_DIR = "units"
_GROUP = re.compile(r"[A-Za-z0-9_]+(\.[A-Za-z0-9_]+)*")
_INCLUDE = re.compile(r'^#include "(.+)"$', re.M)


def bad_output(path: str, group: str | None) -> str:
    """Why a plugin's output `path` cannot be compiled in the units of `group` ("" when it can)."""
    if group is None:
        return ""
    if not _GROUP.fullmatch(group):
        return f"unit group '{group}' must be letters, digits and '_', in parts joined by '.'"
    if not path.endswith((".cpp", ".cu")):
        return "only .cpp and .cu sources can be compiled in a unit"
    if path.startswith(f"{UNITS_DIR}/"):
        return f"'{UNITS_DIR}/' holds the unity units"
    return ""


def shards(paths: list[str], size: int) -> list[list[str]]:
    """`paths` sorted, in the fewest runs of at most `size`, as equal in length as can be."""
    paths = sorted(paths)
    count = -(-len(paths) // size)
    return [paths[i * len(paths) // count:(i + 1) * len(paths) // count] for i in range(count)]


# A unit's fixed cost (its headers, and the template code every unit instantiates) is most
# of its compile time, so a group of more than MAX_UNITS units' worth of sources gets larger
# units, not more of them: fewer compiler seconds in all, at the price of a larger unit to
# recompile after an edit in such a library (the measurements: docs/architecture.md, "Unity
# units").  Four units a group, with five groups or more in a library of pointwise ops with
# formulas, keep the cores of a laptop busy.
MAX_UNITS = 4


def unit_size(count: int, size: int, cap: int | None = None) -> int:
    """Sources a unit for a group of `count`: at most `size` (or its `cap`), unless that
    makes more than MAX_UNITS units; `size` 1 (every source alone) is kept as it is."""
    size = min(size, cap or size)
    return size if size == 1 else max(size, -(-count // MAX_UNITS))


def layout(groups: dict[str, list[str]], size: int, caps: dict[str, int] | None = None) -> dict[str, tuple[str, list[str]]]:
    """Unit path -> (group, the sources it includes), for each group's sources: at most
    `size` sources a unit, or the group's cap in `caps` when that is smaller, unless that
    would make more than MAX_UNITS units (see unit_size)."""
    out = {}
    for group in sorted(groups):
        suffix = ".cu" if all(p.endswith(".cu") for p in groups[group]) else ".cpp"
        cap = (caps or {}).get(group)
        for k, members in enumerate(shards(groups[group], unit_size(len(groups[group]), size, cap))):
            out[f"{UNITS_DIR}/{group}.{k}{suffix}"] = (group, members)
    return out


# `[tool.codegen] unity_scope = "library"`: the groups whose units start with the precompiled
# header (cpu, autograd, pointwise: compiled with the same options) share units as this one
# group.  A unit's fixed cost is paid per unit whatever its group (about 1.5 s of compiler time
# at -O0 on this project's 2-core machine: the torch templates every unit instantiates again),
# so a test library of three groups compiled in one unit instead of three took 19.2 s of
# compiler time instead of 22.1 s.  Not the default: an edit then recompiles the one large unit,
# and a build on many cores runs fewer units side by side.  CPU-capability groups (other
# instruction sets), CUDA groups, the groups of a source that must not follow the header, and
# groups a plugin caps keep their own units.
MERGED_GROUP = "all"


def scoped(groups: dict[str, list[str]], scope: str, plain: set[str], caps: dict[str, int]) -> dict[str, list[str]]:
    """`groups` (group -> sources) as `scope` ("group" or "library") lets them share units."""
    mergeable = {g for g, members in groups.items()
                 if g not in plain and g not in caps and all(m.endswith(".cpp") for m in members)}
    if scope != "library" or len(mergeable) < 2 or (MERGED_GROUP in groups and MERGED_GROUP not in mergeable):
        return groups
    out = {g: members for g, members in groups.items() if g not in mergeable}
    out[MERGED_GROUP] = [m for g in sorted(mergeable) for m in groups[g]]
    return out


# The header a unit of sources that allow it (Output.precompiled) starts with: torch's common
# headers, which the build precompiles (opwrap_codegen.build.precompiled_header).
PRECOMPILED = "opwrap/runtime/precompiled.h"


def text(group: str, members: list[str], precompiled: bool = False) -> str:
    lines = [f"// A translation unit of group '{group}': {len(members)} generated "
             f"source{'s' if len(members) != 1 else ''}, compiled together so that their headers are parsed once.",
             "// Each is readable on its own; `[tool.codegen] unity` sets how many share a unit."]
    # Found through the generated directory on the include path (opwrap_codegen.build.include_dirs),
    # so __FILE__, the dispatcher's "registered at" and compiler messages name the source.
    if precompiled and not any(m.endswith(".cu") for m in members):
        lines += ["// First: torch's headers these sources share, precompiled where the compiler can (codegen build).",
                  f"#include <{PRECOMPILED}>"]
    lines += [f'#include "{m}"' for m in members]
    return "\n".join(lines) + "\n"


def compiled_sources(generated: Path, exclude: set[Path]) -> list[Path]:
    """The C++ and CUDA translation units under `generated`: every unit, and every source
    that no unit includes (a plugin's source with no group, e.g. a split_types dtype unit)."""
    found = [Path(p) for pattern in ("**/*.cpp", "**/*.cu") for p in generated.glob(pattern)]
    included = set()
    for unit in generated.glob(f"{UNITS_DIR}/*"):
        if unit.suffix in (".cpp", ".cu"):
            included.update(generated / PurePosixPath(m) for m in _INCLUDE.findall(unit.read_text(encoding="utf-8")))
    return sorted(p for p in found if p not in included and p not in exclude)
