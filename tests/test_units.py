"""Unity units (codegen/pipeline/units.py): every generated source is compiled exactly once, either
in the units of its group or alone, and `[tool.codegen] unity` sets how many share a unit."""

import re

from opwrap_codegen.pipeline import units
from opwrap_codegen.core.config import load_config
from opwrap_codegen.pipeline.passes import generate
from conftest import ROOT

INCLUDE = re.compile(r'^#include "(.+)"$', re.M)


def test_shards_are_few_sorted_and_balanced():
    paths = [f"cpu/op{i:02}.cpp" for i in range(13)]
    got = units.shards(list(reversed(paths)), 8)
    assert got == [paths[:6], paths[6:]]
    assert units.shards(paths, 1) == [[p] for p in paths]
    assert units.shards(paths[:3], 8) == [paths[:3]]
    assert sum(units.shards(paths, 5), []) == paths and [len(s) for s in units.shards(paths, 5)] == [4, 4, 5]


def test_large_groups_get_larger_units_not_more():
    # unity (8) or a plugin's cap (autograd's 4) while a group fits in MAX_UNITS (4) units
    assert units.unit_size(16, 8) == 8 and units.unit_size(12, 8, 4) == 4 and units.unit_size(3, 8) == 8
    # beyond that, MAX_UNITS units: 50 pointwise sources in 4 units of 12-13, not 7 of 7-8
    assert units.unit_size(50, 8) == 13 and units.unit_size(50, 8, 4) == 13
    assert [len(s) for s in units.shards([f"{i}.cpp" for i in range(50)], units.unit_size(50, 8))] == [12, 13, 12, 13]
    assert units.unit_size(500, 1) == 1  # unity = 1 compiles every source alone, always


def test_every_source_is_compiled_once():
    gen = ROOT / "generated"
    included = [m for u in (gen / "units").iterdir() for m in INCLUDE.findall(u.read_text())]
    assert len(included) == len(set(included))
    compiled = set(units.compiled_sources(gen, exclude=set()))
    for src in [*gen.rglob("*.cpp"), *gen.rglob("*.cu")]:
        rel = src.relative_to(gen).as_posix()
        assert (rel in included) != (src in compiled), rel  # in a unit, or compiled alone
    groups = {u.name.rsplit(".", 2)[0] for u in (gen / "units").iterdir()}
    assert groups == {"autograd", "cpu", "cuda", "pointwise", "pointwise.AVX2", "pointwise.AVX512"}
    assert "registration.cpp" in included and "autocast/autocast.cpp" in included  # in the CPU wrappers' units


def test_unity_setting():
    import dataclasses
    config = load_config(ROOT)
    one = generate(dataclasses.replace(config, unity=1)).files
    cpu_ops = [p for p in one if p.startswith("cpu/") and p.count(".") == 1]
    singles = [INCLUDE.findall(t) for p, t in one.items() if re.fullmatch(r"units/(cpu|pointwise)\.\d+\.cpp", p)]
    assert all(len(m) == 1 for m in singles)  # unity = 1: one source a unit
    # the CPU wrappers, the registration, the autocast kernels, the fallbacks of ops without
    # formulas and the DEFAULT builds of row-wise ops' loops
    assert set(cpu_ops) | {"registration.cpp", "autocast/autocast.cpp"} <= {m[0] for m in singles}
    assert all(m[0] in cpu_ops or m[0] in ("registration.cpp", "autocast/autocast.cpp") or m[0].startswith("autograd/")
               or m[0].endswith(".rowwise.cpp") for m in singles)
    eight = generate(config).files
    assert len([p for p in eight if re.fullmatch(r"units/(cpu|pointwise)\.\d+\.cpp", p)]) < len(cpu_ops)
    assert {p for p in one if not p.startswith("units/")} == {p for p in eight if not p.startswith("units/")}
