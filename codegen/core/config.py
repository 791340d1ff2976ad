"""`[tool.codegen]` in a project's pyproject.toml."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field, fields
from pathlib import Path

from .diagnostics import Diagnostic, CodegenError, Loc, did_you_mean


@dataclass(frozen=True)
class Config:
    root: Path
    namespace: str
    package: str = ""  # the Python package of the op library; defaults to the namespace
    package_dir: str = ""  # its folder; defaults to the package's name (dots as slashes) at the root
    declarations: str = "declarations"
    generated: str = "generated"
    kernels: str = "runtime/kernels"  # hand-written kernel headers
    include: tuple[str, ...] = ()  # further include directories for the build
    sources: tuple[str, ...] = ()  # further hand-written sources (globs) for the build: C++, CUDA (.cu), C (.c)
    # Cargo crates (directories) whose `[lib] crate-type` includes "staticlib": built with
    # cargo and linked into the library (kernels behind a C ABI; see build.native_link_inputs)
    crates: tuple[str, ...] = ()
    build: str = "build"
    library: str = "_C"  # name of the shared library built from generated/ and sources
    split_types: bool = False  # one translation unit per op and dtype, for every op
    # Unity builds: at most this many ops' kernels share one translation unit (per dispatch
    # key and CPU capability), so the heavy headers are parsed once per unit, not per op.
    # 1 compiles every op alone.  See codegen/pipeline/units.py.
    unity: int = 8
    # Which sources may share a unit: "group" (those of one group: an edit recompiles only its
    # group's unit) or "library" (the groups that start with the precompiled header, `cpu`,
    # `autograd` and `pointwise`, as one: the fewest units, for a library compiled once, such as
    # a test library or a CI wheel on a few cores).  See codegen/pipeline/units.py.
    unity_scope: str = "group"
    plugins: tuple[str, ...] = ()  # "module:attribute" of third-party plugins
    templates: str = ""  # a directory of templates overriding the built-in ones
    # Requirements of the built wheel besides torch, which the build backend pins to the
    # release it compiled against ([project] dependencies is dynamic: see backend.py).
    dependencies: tuple[str, ...] = ()
    # The API the generated C++ is written against (codegen/core/targets.py): "aten" (the full
    # ATen API) or "stable" (torch's stable ABI: one build for every claimed torch release).
    target: str = "aten"
    # Wheels (opwrap_codegen.backend; docs/shipping.md): a manylinux tag the wheel is repaired to
    # with auditwheel ("" leaves it linux_<arch>), and a size past which the build warns ("" none).
    manylinux: str = ""
    wheel_size_budget: str | int = ""
    # The compiler cache builds compile through (codegen/build/compiler_cache.py): "auto" (ccache
    # when installed), "ccache", "sccache" or "none"; OPWRAP_COMPILER_CACHE overrides it.
    compiler_cache: str = "auto"

    @property
    def python_package(self) -> str:
        return self.package or self.namespace

    @property
    def python_dir(self) -> str:
        """The Python package's folder, relative to the root."""
        return self.package_dir or self.python_package.replace(".", "/")

    def path(self, name: str) -> Path:
        return self.root / getattr(self, name)

    def target_kernels(self) -> Path:
        """`<kernels>/<target>`: the hand-written C++ kernels written against this target's API
        by a library that ships both targets (docs/stable-abi.md, "Kernels for both targets").
        A header there comes before one of the same name in `<kernels>` (the include path
        says so too: codegen/build include_dirs)."""
        return self.path("kernels") / self.target

    def kernel_header(self, header: str) -> Path | None:
        """Where hand-written kernel header `header` (relative to the kernels directory) is for
        this target: `<kernels>/<target>/<header>`, else `<kernels>/<header>`; None where
        neither file is."""
        for folder in (self.target_kernels(), self.path("kernels")):
            if (folder / header).is_file():
                return folder / header
        return None


_KEYS = {f.name for f in fields(Config)} - {"root"}
UNITY_SCOPES = ("group", "library")  # Config.unity_scope


def find_pyproject(start: Path) -> Path | None:
    for d in [start, *start.parents]:
        p = d / "pyproject.toml"
        if p.is_file() and "[tool.codegen]" in p.read_text(encoding="utf-8", errors="replace"):
            return p
    return None


def load_config(project: Path | None = None) -> Config:
    """Read `[tool.codegen]` from `project`/pyproject.toml (or the nearest one above the cwd)."""
    pyproject = find_pyproject(Path(project or Path.cwd()).resolve())
    if pyproject is None:
        where = project or Path.cwd()
        raise CodegenError([Diagnostic(Loc(str(Path(where) / "pyproject.toml"), 1, 1),
                                       "no pyproject.toml with a [tool.codegen] table found",
                                       "run `codegen init DIR` to create a project")])
    path = str(pyproject)
    try:
        data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise CodegenError([Diagnostic(Loc(path, 1, 1), f"cannot read pyproject.toml: {e}")])
    table = data.get("tool", {}).get("codegen", {})
    errors = []
    line = line_of(pyproject, "[tool.codegen]")
    for key in sorted(set(table) - _KEYS):
        errors.append(Diagnostic(Loc(path, line, 1), f"unknown [tool.codegen] key '{key}'", did_you_mean(key, _KEYS)))
    ns = table.get("namespace")
    if not isinstance(ns, str) or not ns.isidentifier():
        errors.append(Diagnostic(Loc(path, line, 1), "[tool.codegen] namespace must be a C++ identifier, e.g. 'mylib'"))
    errors.extend(Diagnostic(Loc(path, line, 1), m) for m in _check_values(table))
    errors.extend(Diagnostic(Loc(path, key_line(pyproject, key, line), 1), m) for key, m in _check_shipping(table))
    if errors:
        raise CodegenError(errors)
    values = {}
    for k in _KEYS & set(table):
        v = table[k]
        values[k] = tuple(v) if isinstance(v, list) else v
    return Config(root=pyproject.parent, **values)


def key_line(path: Path, key: str, default: int = 1) -> int:
    """The 1-based line of `path` that sets `key` (`key = ...`), or `default`."""
    import re
    for i, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
        if re.match(rf"\s*{re.escape(key)}\s*=", line):
            return i
    return default


MANYLINUX = r"manylinux_2_(\d+)"
_SIZE_UNITS = {"B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "KIB": 2**10, "MIB": 2**20, "GIB": 2**30}


def size_in_bytes(value: str | int) -> int | None:
    """A size as `wheel_size_budget` takes it: a whole number of MiB, or a string with its unit
    ("400MiB", "1.5 GB"); None if it is neither."""
    import re
    if type(value) is int:
        return value * 2**20 if value > 0 else None
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMG]i?B|B)\s*", value if isinstance(value, str) else "", flags=re.I)
    if m is None or float(m.group(1)) <= 0:
        return None
    return int(float(m.group(1)) * _SIZE_UNITS[m.group(2).upper()])


def _check_shipping(table: dict) -> list[tuple[str, str]]:
    """(key, message) for the wheel and compiler-cache keys, each reported at its own line."""
    import re
    errors = []
    v = table.get("manylinux", "")
    if not (isinstance(v, str) and (v == "" or re.fullmatch(MANYLINUX, v))):
        errors.append(("manylinux", f"[tool.codegen] manylinux must be a manylinux tag such as 'manylinux_2_28' "
                                    f"(PEP 600: manylinux_2_<glibc minor>), not {v!r}"))
    v = table.get("wheel_size_budget", "")
    if v != "" and size_in_bytes(v) is None:
        errors.append(("wheel_size_budget", "[tool.codegen] wheel_size_budget must be a size: a whole number of MiB "
                                            f"(400) or a string with its unit ('400MiB', '1.5GB'), not {v!r}"))
    v = table.get("compiler_cache", "auto")
    if v not in ("auto", "ccache", "sccache", "none"):
        errors.append(("compiler_cache", "[tool.codegen] compiler_cache must be one of 'auto', 'ccache', 'sccache', "
                                         f"'none', not {v!r}"))
    return errors


def line_of(path: Path, needle: str) -> int:
    """The 1-based line of `path` that is `needle` (stripped), or 1."""
    for i, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
        if line.strip() == needle:
            return i
    return 1


_STRINGS = ("package", "package_dir", "declarations", "generated", "kernels", "build", "library", "templates",
            "target", "unity_scope")
_LISTS = ("include", "sources", "plugins", "dependencies", "crates")
_INSIDE = ("declarations", "generated", "kernels", "build", "package_dir")  # directories codegen reads or writes
_INSIDE_LISTS = ("crates",)  # lists of such directories


def _check_values(table: dict) -> list[str]:
    """Type and place of each value.  `generated` is special: `codegen generate` deletes the
    files in it that no plugin produces, so it must be a directory of its own inside the
    project, holding neither the declarations nor the kernels."""
    errors = []
    for key in _STRINGS:
        if key in table and not isinstance(table[key], str):
            errors.append(f"[tool.codegen] {key} must be a string")
    for key in _LISTS:
        if key in table and not (isinstance(table[key], list) and all(isinstance(v, str) for v in table[key])):
            errors.append(f"[tool.codegen] {key} must be a list of strings")
    if "split_types" in table and not isinstance(table["split_types"], bool):
        errors.append("[tool.codegen] split_types must be true or false")
    if isinstance(table.get("target"), str):
        from .targets import TARGETS
        names = [t.name for t in TARGETS]
        if table["target"] not in names:
            errors.append(f"[tool.codegen] target must be one of {', '.join(repr(n) for n in names)}, "
                          f"not '{table['target']}'")
    if "unity" in table and not (type(table["unity"]) is int and 1 <= table["unity"] <= 1000):
        errors.append("[tool.codegen] unity must be a whole number of ops per translation unit, from 1 to 1000")
    if isinstance(table.get("unity_scope"), str) and table["unity_scope"] not in UNITY_SCOPES:
        errors.append(f"[tool.codegen] unity_scope must be one of {', '.join(repr(s) for s in UNITY_SCOPES)}, "
                      f"not '{table['unity_scope']}'")
    for key in ("library", "package"):
        v = table.get(key)
        if isinstance(v, str) and v and not all(part.isidentifier() for part in v.split(".")):
            errors.append(f"[tool.codegen] {key} must be a Python identifier (dotted for a package), not '{v}'")
    for key in _INSIDE:
        v = table.get(key)
        if isinstance(v, str) and not _inside_project(v):
            errors.append(f"[tool.codegen] {key} must be a directory inside the project (relative, without '..'), "
                          f"not '{v}'")
    for key in _INSIDE_LISTS:
        v = table.get(key)
        for item in v if isinstance(v, list) else ():
            if isinstance(item, str) and not _inside_project(item):
                errors.append(f"[tool.codegen] {key} must list directories inside the project (relative, without "
                              f"'..'), not '{item}'")
    gen = table.get("generated", "generated")
    if isinstance(gen, str) and _inside_project(gen):
        for key, default in (("declarations", "declarations"), ("kernels", "runtime/kernels")):
            other = table.get(key, default)
            if isinstance(other, str) and _contains(gen, other):
                errors.append(f"[tool.codegen] generated ('{gen}') must not hold {key} ('{other}'): "
                              "codegen generate removes files there that no plugin produces")
    return errors


def _inside_project(p: str) -> bool:
    parts = Path(p).parts
    return bool(p.strip()) and not Path(p).is_absolute() and ".." not in parts and parts not in ((), (".",))


def _contains(outer: str, inner: str) -> bool:
    o, i = Path(outer).parts, Path(inner).parts
    return i[: len(o)] == o
