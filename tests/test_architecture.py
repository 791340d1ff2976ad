"""The toolchain's structure (issue 35): its layers import only downwards, no import cycles
among its modules, counting imports inside functions, and no plugin importing another plugin
(a plugin is one file of codegen/plugins/ that the others do not know; what two plugins share
lives below them, in codegen/api/, codegen/core/targets.py, ...)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = "opwrap_codegen"
ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "codegen"


def _modules() -> dict[str, Path]:
    """Module name -> file, for every module of the toolchain package."""
    out = {}
    for path in sorted(SOURCE.rglob("*.py")):
        parts = list(path.relative_to(SOURCE).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join([PACKAGE, *parts])] = path
    return out


def import_graph() -> dict[str, set[str]]:
    """Module -> the toolchain modules it imports (anywhere in the file: a function's import
    closes a cycle at run time as surely as a module's)."""
    modules = _modules()
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for name, path in modules.items():
        package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package[:len(package) - (node.level - 1)]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                found = {f"{target}.{a.name}" for a in node.names} & set(modules)
                graph[name] |= found or ({target} & set(modules))
            elif isinstance(node, ast.Import):
                graph[name] |= {a.name for a in node.names} & set(modules)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1 or v in graph[v]:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_toolchain_has_no_import_cycle():
    assert cycles(import_graph()) == []


def test_the_cycle_finder_finds_a_cycle():
    """The check above cannot pass by finding nothing: a graph with a cycle is reported."""
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]
    assert import_graph()[f"{PACKAGE}.reference"] >= {f"{PACKAGE}.plugins", f"{PACKAGE}.front.loader"}


# ------------------------------------------------------------------ layers
# The subpackages of codegen/, lowest first (docs/architecture.md describes them).  A module
# imports only modules of its own layer or of a layer below it; every module belongs to one
# layer, so a new module or subpackage must be placed here.  `opwrap_codegen` itself holds only
# `__version__`; pyruntime is a generated library's run-time module (copied into it), which
# imports nothing of the toolchain.  The top layer is the entry points and what uses the whole
# toolchain; `shapes` there is a compatibility name for `lang.shapes`.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("", "pyruntime"),
    ("core",),
    ("lang",),
    ("front",),
    ("api",),
    ("plugins",),
    ("pipeline",),
    ("build",),
    ("cli", "backend", "scaffold", "survey", "testing", "reference", "shapes"),
)


def layer_of(module: str, layers=LAYERS) -> int | None:
    """The index in `layers` of the layer holding `module` (a full dotted name), or None."""
    rest = module.removeprefix(PACKAGE).removeprefix(".")
    for i, names in enumerate(layers):
        for name in names:
            if rest == name or (name and rest.startswith(f"{name}.")):
                return i
    return None


def layer_violations(graph: dict[str, set[str]], layers=LAYERS) -> list[str]:
    """`module -> target` for every import of a higher layer, and `module: no layer` for a
    module that no layer holds."""
    out = [f"{m}: no layer" for m in sorted(graph) if layer_of(m, layers) is None]
    for m in sorted(graph):
        here = layer_of(m, layers)
        out += [f"{m} -> {t}" for t in sorted(graph[m])
                if here is not None and (layer_of(t, layers) or 0) > here]
    return out


def test_layers_import_only_downwards():
    assert layer_violations(import_graph()) == []
    assert len({layer_of(m) for m in import_graph()}) == len(LAYERS)  # no layer is empty


def test_the_layer_check_finds_an_upward_import():
    """The check above cannot pass by finding nothing: a module importing a higher layer and a
    module of no layer are reported, and imports within a layer or downwards are not."""
    graph = import_graph()
    graph[f"{PACKAGE}.lang.shapes"] = graph[f"{PACKAGE}.lang.shapes"] | {f"{PACKAGE}.api.types"}
    graph[f"{PACKAGE}.front.model"] = graph[f"{PACKAGE}.front.model"] | {f"{PACKAGE}.front.loader"}
    graph[f"{PACKAGE}.misc"] = {f"{PACKAGE}.core.diagnostics"}
    assert layer_violations(graph) == [f"{PACKAGE}.misc: no layer",
                                       f"{PACKAGE}.lang.shapes -> {PACKAGE}.api.types"]


def test_the_public_module_names_import():
    """Names users' projects and plugins spell: the build backend in every pyproject.toml, the
    console script, the plugin base class, the test helpers, the shape language, the run-time
    module; `shapes` is the very module `lang.shapes`."""
    import importlib

    for name in ("backend", "cli", "plugins.base", "testing", "shapes", "pyruntime", "build"):
        importlib.import_module(f"{PACKAGE}.{name}")
    assert importlib.import_module(f"{PACKAGE}.shapes") is importlib.import_module(f"{PACKAGE}.lang.shapes")
    assert callable(importlib.import_module(f"{PACKAGE}.cli").main)
    assert callable(importlib.import_module(f"{PACKAGE}.build").sanitizer_runtime)


def test_the_build_backend_imports_no_requirement():
    """A wheel's build backend (opwrap_codegen.backend) imports the build package before
    pip or uv has installed any requirement, so neither imports YAML, Jinja2, click or torch
    when imported: a package's __init__ that imports heavy modules would make every one of its
    modules heavy (pipeline/__init__.py holds nothing for that reason)."""
    import subprocess
    import sys

    code = ("import sys\nfor m in ('yaml', 'jinja2', 'click', 'torch'): sys.modules[m] = None\n"
            "import opwrap_codegen.backend, opwrap_codegen.build, opwrap_codegen.pipeline.writer\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]


def test_no_plugin_imports_another():
    plugins = f"{PACKAGE}.plugins"
    # the package (the built-in list), the Plugin base class and what plugins render with
    shared = {plugins, f"{plugins}.base", f"{plugins}.render"}
    graph = import_graph()
    wrong = {m: sorted(t for t in targets if t.startswith(f"{plugins}.") and t not in shared)
             for m, targets in graph.items() if m.startswith(f"{plugins}.") and m not in shared}
    assert {m: t for m, t in wrong.items() if t} == {}


def test_a_third_party_plugin_adds_a_device_as_one_row(project):
    """tests/plugins/device_plugin.py adds XPU: a `kernels: {XPU: ...}` op gets its wrapper
    from the same plugin and template as CPU and CUDA, with the row's guard, device checks,
    header and dispatch key; the wrapper compiles against torch's headers."""
    import shutil
    import subprocess
    import sysconfig

    import torch.utils.cpp_extension as cpp_extension
    from conftest import run_codegen

    shutil.copy(Path(__file__).parent / "plugins" / "device_plugin.py", project / "device_plugin.py")
    py = project / "pyproject.toml"
    (project / "declarations" / "ops.yaml").write_text(
        "- func: scale(Tensor self, Tensor other, float alpha) -> Tensor\n  dtypes: [float32]\n"
        "  kernels: {CPU: scale_cpu, XPU: scale_xpu}\n  shape: {result: self.shape}\n")
    (project / "kernels" / "scale.h").write_text("#pragma once\n")
    r = run_codegen("generate", cwd=project)  # without the plugin, XPU is no dispatch key
    assert r.returncode == 2 and "'XPU'" in r.stderr and "dispatch key" in r.stderr, r.stderr
    py.write_text(py.read_text() + 'plugins = ["device_plugin:XPU_KERNELS"]\n')
    r = run_codegen("generate", cwd=project)  # its header is missing: the row's field names another
    assert r.returncode == 2 and "XPU kernel header 'kernels/scale.xpu.h' not found" in r.stderr, r.stderr
    assert "xpu_header:" in r.stderr, r.stderr
    (project / "kernels" / "scale.xpu.h").write_text(
        "#pragma once\n#include <ATen/core/Tensor.h>\nnamespace testlib::kernels {\n"
        "template <typename scalar_t> void scale_xpu(const at::Tensor& self, const at::Tensor& other, double alpha, "
        "at::Tensor& result) {}\n}\n")
    r = run_codegen("generate", cwd=project)
    assert r.returncode == 0, r.stderr
    gen = project / "generated"
    xpu = (gen / "xpu" / "scale.cpp").read_text()
    cpu = (gen / "cpu" / "scale.cpp").read_text()
    assert "TORCH_LIBRARY_IMPL(testlib, XPU, m)" in xpu and "TORCH_LIBRARY_IMPL(testlib, CPU, m)" in cpu
    assert "#include <c10/core/DeviceGuard.h>" in xpu and "const c10::DeviceGuard device_guard(self.device());" in xpu
    assert "c10::DeviceType::XPU" in xpu and "check_same_device(kOp, \"other\", other, self, \"self\")" in xpu
    assert '#include "scale.xpu.h"' in xpu and "::testlib::kernels::scale_xpu<float>" in xpu
    assert "DeviceGuard" not in cpu and "check_same_device" not in cpu
    # The wrapper is C++ that compiles: parsed against the installed torch's headers.
    from opwrap_codegen.build import _cpp_extension_std
    flags = [f"-I{p}" for p in cpp_extension.include_paths()] + [f"-I{sysconfig.get_paths()['include']}"]
    r = subprocess.run(["c++", _cpp_extension_std(cpp_extension) or "-std=c++17", "-fsyntax-only", *flags, f"-I{gen}", f"-I{project / 'kernels'}",
                        f"-I{ROOT / 'runtime' / 'include'}", str(gen / "xpu" / "scale.cpp")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]


# ------------------------------------------------------------------ function length
# The layers a new engineer extends (codegen/api: what the generated code says; codegen/plugins:
# which files say it) are read one function at a time: a phase of a plan is a function of its
# own, returning a small record, not a section of a long one.
MAX_FUNCTION_LINES = 80


def long_functions(paths, limit: int = MAX_FUNCTION_LINES) -> list[str]:
    """`file:line name (N lines)` for every function or method (nested ones too) longer than
    `limit` lines, decorators and docstring included."""
    out = []
    for path in paths:
        tree = ast.parse(Path(path).read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                lines = node.end_lineno - start + 1
                if lines > limit:
                    out.append(f"{Path(path).relative_to(ROOT) if Path(path).is_relative_to(ROOT) else path}:"
                               f"{node.lineno} {node.name} ({lines} lines)")
    return sorted(out)


def test_no_long_function_in_api_and_plugins():
    paths = sorted([*(SOURCE / "api").glob("*.py"), *(SOURCE / "plugins").glob("*.py")])
    assert len(paths) > 10
    assert long_functions(paths) == []


def test_the_length_check_finds_a_long_function(tmp_path):
    """The check above cannot pass by finding nothing: a long function, a long method and a
    long nested function are reported, a function of exactly the limit is not."""
    body = "".join(f"    x{i} = {i}\n" for i in range(MAX_FUNCTION_LINES))
    source = tmp_path / "long.py"
    source.write_text(f"def long():\n{body}\n\ndef short():\n{body[:body.rindex('    x')]}\n\n"
                      f"class C:\n    @staticmethod\n    def method():\n{body.replace('    ', '        ')}\n\n"
                      f"def outer():\n    def inner():\n{body.replace('    ', '        ')}    return inner\n",
                      encoding="utf-8")
    found = {f.split(" ", 1)[1] for f in long_functions([source])}
    assert found == {f"long ({MAX_FUNCTION_LINES + 1} lines)", f"method ({MAX_FUNCTION_LINES + 2} lines)",
                     f"outer ({MAX_FUNCTION_LINES + 3} lines)", f"inner ({MAX_FUNCTION_LINES + 1} lines)"}
