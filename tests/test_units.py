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


def test_library_scope_puts_the_groups_sharing_the_precompiled_header_in_one_group():
    groups = {"autograd": ["autograd/a.cpp"], "cpu": ["cpu/a.cpp", "registration.cpp"], "pointwise": ["cpu/b.cpp"],
              "pointwise.AVX2": ["cpu/b.AVX2.cpp"], "cuda": ["cuda/a.cu"], "capped": ["x/c.cpp"]}
    plain = {"pointwise.AVX2"}  # a CPU-capability build: its instruction set comes before any header
    assert units.scoped(groups, "group", plain, {}) is groups
    merged = units.scoped(groups, "library", plain, {"capped": 1})
    assert merged == {units.MERGED_GROUP: ["autograd/a.cpp", "cpu/a.cpp", "registration.cpp", "cpu/b.cpp"],
                      "pointwise.AVX2": ["cpu/b.AVX2.cpp"], "cuda": ["cuda/a.cu"], "capped": ["x/c.cpp"]}
    # a plugin's own group of that name that cannot join: nothing merges
    assert units.scoped({**groups, "all": ["cuda/b.cu"]}, "library", plain, {}) == {**groups, "all": ["cuda/b.cu"]}


def test_unity_scope_setting():
    """`unity_scope = "library"`, with `unity` as large as it goes: the bundled library's
    sources that start with the precompiled header in one unit, its other units unchanged; every
    source still compiled once."""
    import dataclasses
    config = load_config(ROOT)
    group = generate(dataclasses.replace(config, unity=1000)).files
    library = generate(dataclasses.replace(config, unity=1000, unity_scope="library")).files
    assert {p for p in group if not p.startswith("units/")} == {p for p in library if not p.startswith("units/")}
    shared = sorted(m for p in ("units/autograd.0.cpp", "units/cpu.0.cpp", "units/pointwise.0.cpp")
                    for m in INCLUDE.findall(group[p]))
    assert sorted(INCLUDE.findall(library["units/all.0.cpp"])) == shared
    assert library["units/all.0.cpp"].count("#include <opwrap/runtime/precompiled.h>") == 1
    others = {p: t for p, t in group.items() if p.startswith("units/") and p.split("/")[1].split(".")[0]
              not in ("autograd", "cpu") and not re.fullmatch(r"units/pointwise\.\d+\.cpp", p)}
    assert others and all(library[p] == t for p, t in others.items())
    assert not [p for p in library if re.fullmatch(r"units/(autograd|cpu|pointwise)\.\d+\.cpp", p)]


def test_unity_scope_is_checked(tmp_path):
    import pytest
    from opwrap_codegen.core.diagnostics import CodegenError
    (tmp_path / "pyproject.toml").write_text('[tool.codegen]\nnamespace = "x"\nunity_scope = "everything"\n')
    with pytest.raises(CodegenError, match="unity_scope must be one of 'group', 'library', not 'everything'"):
        load_config(tmp_path)
