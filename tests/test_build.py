"""The build: lean translation units, no-op rebuilds, and a library made with `codegen init`
outside this repository (with cwrap-style split_types)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, bundled_build, one_unit_a_group, run_codegen, run_python


# ATen/TensorOperators.h comes before each kernel header, so kernels may use `a * b` (it costs
# about 2 s of compiler time per unit: it includes ATen/Functions.h).
LEAN = {"ATen/core/Tensor.h", "torch/library.h", "ATen/ops/empty.h", "opwrap/runtime/checks.h", "ATen/TensorOperators.h"}
AUTOGRAD = {"ATen/TensorOperators.h", "opwrap/runtime/once_differentiable.h", "opwrap/runtime/autograd_node.h",
            "opwrap/runtime/autograd_not_implemented.h",
            "torch/csrc/autograd/autograd_not_implemented_fallback.h", "opwrap/runtime/autograd.h", "algorithm", "array", "cstdint",
            "string", "tuple", "vector"}


# Pointwise expression kernels: the capability prelude and run-time dispatch (TensorIterator
# and at::vec come through generated/pointwise/<op>.h).
POINTWISE = {"opwrap/runtime/cpu_capability.h", "opwrap/runtime/cpu_dispatch.h"}

# The CPython bindings; ATen/autocast_mode.h is heavy, so all autocast kernels share one TU.
FAST = {"opwrap/runtime/precompiled.h", "opwrap/runtime/python_fast.h", "tuple"}


# Headers a kernel wrapper includes only when its declaration needs them: out= resizing,
# index bounds, the promotion of tensors (codegen/api/kernel.py), at::TensorIterator for a
# pointwise out= overload.
WRAPPER_EXTRAS = {"opwrap/runtime/out.h", "opwrap/runtime/index.h", "opwrap/runtime/dtype_rules.h",
                  "opwrap/runtime/cpu_dispatch.h", "opwrap/runtime/pointwise_iterator.h",
                  "opwrap/runtime/abi.h"}  # the C kernel ABI (kernels behind it: codegen/api/abi.py)


def test_generated_units_include_only_what_they_use():
    for tu in (ROOT / "generated").rglob("*.cpp"):
        text = tu.read_text()
        assert "torch/extension.h" not in text, tu
        # a unity unit of wrapper or autograd sources starts with torch's headers they share,
        # precompiled by the build (units.PRECOMPILED); its sources stay lean
        allowed = LEAN | {"generated": {"torch/custom_class.h", "tuple", "opwrap/runtime/torch_compat.h"}, "autograd": AUTOGRAD, "autocast": {"ATen/autocast_mode.h"},
                          "units": {"opwrap/runtime/precompiled.h"},
                          "python": FAST, "cpu": (POINTWISE if "cpu_capability.h" in text else set()) | WRAPPER_EXTRAS}.get(tu.parent.name, set())
        for line in text.splitlines():
            if line.startswith("#include <"):
                inc = line.removeprefix("#include <").removesuffix(">")
                assert inc in allowed or (tu.parent.name == "autograd" and inc.startswith("ATen/ops/")), (tu, inc)


def test_cpu_capability_units_are_built_at_every_level_but_O0_unless_asked():
    from opwrap_codegen.build import capability_units_built
    assert [capability_units_built(level, None) for level in (0, 1, 2, 3)] == [False, True, True, True]
    assert capability_units_built(0, True) and not capability_units_built(3, False)  # --[no-]cpu-capabilities
    assert capability_units_built(0, None, sanitize=True)  # the sanitizer build's level is its own


def test_fast_bindings_are_built_at_every_level_but_O0_unless_asked():
    from opwrap_codegen.build import fast_bindings_built
    assert [fast_bindings_built(level, None) for level in (0, 1, 2, 3)] == [False, True, True, True]
    assert fast_bindings_built(0, True) and not fast_bindings_built(3, False)  # --[no-]fast-bindings
    assert fast_bindings_built(0, None, sanitize=True)  # the sanitizer build's level is its own


def test_gccs_heap_setting_goes_to_gcc_only(monkeypatch, tmp_path):
    """GCC_HEAP_FLAGS for a GCC behind $CXX or our ccache link, nothing for another compiler."""
    from opwrap_codegen import build
    monkeypatch.delenv("CXX", raising=False)
    assert build.gcc_heap_flags() == build.GCC_HEAP_FLAGS  # this machine's c++ is GCC
    monkeypatch.setenv("CXX", str(tmp_path / ".ccache-bin" / "c++"))  # ccache's masquerade link: the c++ behind it
    assert build.gcc_heap_flags() == build.GCC_HEAP_FLAGS
    clang = tmp_path / "clang++"
    clang.write_text("#!/bin/sh\necho 'clang version 19.1.0' >&2\n")
    clang.chmod(0o755)
    monkeypatch.setenv("CXX", str(clang))
    assert build.gcc_heap_flags() == []
    monkeypatch.setenv("CXX", str(tmp_path / "missing-compiler"))
    assert build.gcc_heap_flags() == []


def test_ninja_runs_one_compile_per_core_unless_max_jobs_says(monkeypatch):
    """cpp_extension's ninja -j is MAX_JOBS; unset, a build sets it to the usable cores for its
    duration (ninja's own default, cores + 2, only made the compiles take turns), and a
    user's MAX_JOBS is left as it is."""
    from opwrap_codegen.build import import_cpp_extension, ninja_jobs, usable_cores
    cpp_extension = import_cpp_extension(cuda_built=False)
    monkeypatch.delenv("MAX_JOBS", raising=False)
    with ninja_jobs():
        assert cpp_extension._get_num_workers(False) == usable_cores() == len(os.sched_getaffinity(0))
    assert "MAX_JOBS" not in os.environ
    monkeypatch.setenv("MAX_JOBS", "7")
    with ninja_jobs():
        assert cpp_extension._get_num_workers(False) == 7
    assert os.environ["MAX_JOBS"] == "7"


def test_noop_build_rebuilds_nothing():
    build = ROOT / "build"
    built = bundled_build()  # the same -O level and CPU capabilities as build/ was built with
    objects = {p: p.stat().st_mtime_ns for p in build.glob("*.o")}
    assert objects
    r = run_codegen("build", "--no-generate", "--verbose", f"-O{built['optimize']}",
                    "--cpu-capabilities" if built["cpu_capabilities"] else "--no-cpu-capabilities",
                    "--fast-bindings" if built["fast_bindings"] else "--no-fast-bindings")
    assert r.returncode == 0, r.stderr
    assert "no work to do" in r.stdout + r.stderr
    assert objects == {p: p.stat().st_mtime_ns for p in build.glob("*.o")}


@pytest.mark.slow(60)
@pytest.mark.torch_matrix
@pytest.mark.xdist_group("mylib")
def test_init_library_passes_opcheck_and_compiles_with_no_graph_break(mylib):
    """The `codegen init` library under torch.library.opcheck and torch.compile(fullgraph=True)
    (make torch-matrix runs this on every claimed torch release)."""
    assert mylib.record["builds"][0] == [0, 0], mylib.record["builds"][1]
    script = ("import torch, mylib\n"
              "from torch._dynamo.utils import counters\n"
              "x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)\n"
              "y = torch.randn(4, dtype=torch.float64)\n"
              "for op, args in ((torch.ops.mylib.scale.default, (x, 1.5)), (torch.ops.mylib.axpy.default, (x, y, 0.5)),\n"
              "                 (torch.ops.mylib.row_sum.default, (x,)), (torch.ops.mylib.tile_last.default, (x.float().detach(), 2))):\n"
              "    failed = {k: v for k, v in torch.library.opcheck(op, args).items() if v != 'SUCCESS'}\n"
              "    assert not failed, (op, failed)\n"
              "f = lambda t, u: mylib.ops.row_sum(mylib.ops.axpy(mylib.ops.scale(t, 3.0), u))\n"
              "for dynamic in (False, True):\n"
              "    torch._dynamo.reset(); counters.clear()\n"
              "    compiled = torch.compile(f, fullgraph=True, dynamic=dynamic)\n"
              "    for rows in (3, 5):\n"
              "        t = torch.randn(rows, 4, dtype=torch.float64, requires_grad=True)\n"
              "        got, want = compiled(t, y), f(t, y)\n"
              "        torch.testing.assert_close(got, want)\n"
              "        torch.testing.assert_close(torch.autograd.grad(got.sum(), t)[0], torch.autograd.grad(want.sum(), t)[0])\n"
              "    assert sum(counters['graph_break'].values()) == 0, counters['graph_break']\n"
              "print('ok', torch.__version__)\n")
    out = run_python(["-c", script], cwd=mylib.path, env={**os.environ, "PYTHONPATH": str(mylib.path)})
    assert out.returncode == 0 and out.stdout.startswith("ok "), (out.stdout + out.stderr)[-4000:]


@pytest.mark.xdist_group("mylib")
def test_init_library_units_use_the_shared_precompiled_header(mylib):
    """A `codegen init` library's wrapper and autograd units, the DEFAULT unit of its pointwise
    loops, the dtype units of its split_types op and its fast Python bindings start with
    precompiled.h and compile against the one copy precompiled in the user's cache for that
    library (GCC's -H marks a precompiled header it uses with '!'); CPU-capability units,
    whose instruction set comes first, do not include it."""
    from opwrap_codegen import build
    from opwrap_codegen.pipeline import units
    if sys.platform != "linux" or os.environ.get(build.PCH_ENV) == "0":
        pytest.skip("precompiled headers are built with GCC on Linux, and not with OPWRAP_PCH=0")
    assert mylib.record["builds"][0] == [0, 0], mylib.record["builds"][1]
    lib = mylib.path
    gen = lib / "generated" / "units"
    precompiled = f"#include <{units.PRECOMPILED}>"
    for unit in gen.iterdir():
        has = precompiled in unit.read_text()
        assert has == unit.name.startswith(("cpu.", "autograd.", "pointwise.0")), (unit.name, has)
    # a wrapper unit, and the fast Python bindings (a module of their own, Python's headers
    # after torch's), each compiled with the options its build.ninja holds
    split = lib / "generated" / "cpu" / "scale_float32.cpp"  # a unit of its own (split_types)
    fast = lib / "generated" / "python" / "_fast.cpp"
    assert split.read_text().count(precompiled) == 1 and fast.read_text().count(precompiled) == 1
    used = set()
    for ninja, source in ((lib / "build" / "build.ninja", gen / "cpu.0.cpp"),
                          (lib / "build" / "build.ninja", gen / "pointwise.0.cpp"),
                          (lib / "build" / "build.ninja", split),
                          (lib / "build" / "python" / "build.ninja", fast)):
        cflags = next(line.split(" = ", 1)[1] for line in ninja.read_text().splitlines() if line.startswith("cflags = "))
        assert " ".join(build.GCC_HEAP_FLAGS) in cflags, cflags  # this machine's c++ is GCC
        pch_dir = next(f[2:] for f in cflags.split() if f.startswith("-I") and str(build.pch_cache_dir()) in f)
        assert (Path(pch_dir) / (units.PRECOMPILED + ".gch")).is_file()
        r = subprocess.run(f"c++ {cflags} -H -fsyntax-only {source}", shell=True, capture_output=True, text=True)
        assert r.returncode == 0, r.stderr[-3000:]
        assert f"! {pch_dir}/{units.PRECOMPILED}.gch" in r.stderr, r.stderr[:3000]
        used.add(pch_dir)
    assert len(used) == 1, used  # one copy for the library: its bindings make no second one
    # neither build made another: each says so the time it makes one
    made = [line for out in mylib.record["builds"][1] for line in out.splitlines() if "codegen build: precompiled" in line]
    assert all(units.PRECOMPILED in line for line in made), made


@pytest.mark.slow(60)
@pytest.mark.torch_matrix
@pytest.mark.xdist_group("mylib")
def test_init_makes_a_separate_library_that_builds_and_loads(mylib):
    # conftest.py's `mylib` fixture made the library (shared with test_tree.py's concurrent
    # builds): `codegen init`, three more ops (a shape rule with a run of dimensions and an
    # expression, a pointwise expression, a formula that saves only sizes), `split_types`,
    # `codegen build --no-cuda` (CPU only: keep the compile time down), `codegen generate`.
    lib, made = mylib.path, mylib.record
    assert made["init"][0] == 0, made["init"][1]
    assert made["init_again"][0] == 2, made["init_again"][1]  # never overwrites
    r_generate = made["generate"]
    assert r_generate[0] == 0, r_generate[1]
    cpu = sorted(p.name for p in (lib / "generated" / "cpu").iterdir())
    assert cpu == ["axpy.AVX2.cpp", "axpy.AVX512.cpp", "axpy.cpp", "row_sum.cpp", "scale.cpp", "scale_float32.cpp",
                   "scale_float64.cpp", "tile_last.cpp"]
    row_sum = (lib / "generated" / "autograd" / "row_sum.cpp").read_text()
    assert "grad_fn->self_sym_sizes = self.sym_sizes().vec();" in row_sum and "SavedVariable(self" not in row_sum
    r = run_codegen("list", cwd=lib)
    assert r.stdout.splitlines() == ["mylib::axpy\tfloat32,float64,int64\tCPU,CUDA", "mylib::row_sum\tfloat64\tCPU", "mylib::scale\tfloat32,float64\tCPU",
                                     "mylib::tile_last\tfloat32\tCPU"]
    assert made["builds"][0] == [0, 0], made["builds"][1]
    script = ("import torch, mylib\n"
              "x = torch.arange(4.0)\n"
              "assert torch.equal(mylib.ops.scale(x, 3.0), x * 3)\n"
              "i = torch.arange(6).view(2, 3)\n"
              "assert torch.equal(mylib.ops.axpy(i, i[0]), 2 * i + i[0]) and mylib.ops.axpy(i, i).dtype == torch.int64\n"
              "assert torch.equal(mylib.ops.axpy(x, x, a=0.5), 0.5 * x + x)\n"
              "assert torch.equal(torch.ops.mylib.scale(x.double(), 0.5), x.double() * 0.5)\n"
              "y = torch.randn(2, 3, 4)\n"
              "assert torch.equal(mylib.ops.tile_last(y, 3), y.repeat(1, 1, 3))\n"
              "assert mylib.ops.tile_last(torch.randn(5), 2).shape == (10,)\n"
              "for bad in (lambda: mylib.ops.scale(x.half(), 2.0), lambda: mylib.ops.tile_last(torch.tensor(1.0), 2),\n"
              "            lambda: mylib.ops.tile_last(y, -1), lambda: mylib.ops.tile_last(y, 2**62)):\n"
              "    try:\n        bad()\n    except RuntimeError as e:\n        print(str(e).splitlines()[0])\n"
              "x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)\n"
              "assert torch.autograd.gradcheck(lambda t: mylib.ops.scale(t, 1.5), (x,))\n"
              "assert torch.autograd.gradcheck(mylib.ops.row_sum, (x,))\n"
              "assert torch.autograd.gradcheck(lambda t: mylib.ops.axpy(t, t[0]), (x,))\n"
              "assert torch.autograd.gradgradcheck(mylib.ops.row_sum, (x,))\n"
              "t = mylib.ops.tile_last(torch.randn(2, 3, requires_grad=True), 2)\n"
              "try:\n    t.sum().backward()\nexcept RuntimeError as e:\n    print(str(e).splitlines()[0])\n")
    out = run_python(["-c", script], cwd=lib, env={**os.environ, "PYTHONPATH": str(lib)})
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        "mylib::scale: argument 'self' has dtype Half, but expected one of: float32, float64",
        "mylib::tile_last: argument 'self' must have at least 1 dimensions [*B, N], but got 0 (shape [])",
        "mylib::tile_last: output 'result' would have negative size -4 at dimension 2 (shape [2, 3, -4] from [*B, N * times])",
        "mylib::tile_last: a shape expression overflows int64: 4 * 4611686018427387904",
        "derivative for mylib::tile_last is not implemented",
    ]
    # The step `codegen init` prints works as printed (its build here as the fixture's, a no-op).
    step = next(line for line in made["init"][1].splitlines() if line.startswith("next: ")).removeprefix("next: ")
    assert step.count("codegen build") == 1
    env = {**os.environ, "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])}
    out = subprocess.run(step.replace("codegen build", "codegen build --no-cuda -O0 --fast-bindings"), shell=True, capture_output=True,
                         text=True, env=env)
    assert out.returncode == 0 and out.stdout.splitlines()[-1] == "tensor([2., 2., 2.])", out.stdout + out.stderr
    # and compiles nothing: `codegen` from the venv's bin (the ninja beside it first on PATH)
    # and `python -m opwrap_codegen.cli` (the tests') run the same ninja, which keeps one build log
    assert "compiled" not in out.stderr, out.stderr


@pytest.mark.slow(25)
@pytest.mark.xdist_group("mylib")
def test_init_library_selective_build_and_positioned_compile_errors(mylib):
    # Not in the torch-version matrix (no torch_matrix mark): a selective build and a formula
    # that fails to compile are the toolchain's own behaviour, the same on every release, and
    # two more compiles a release.
    lib = mylib.path
    # A selective build: only `scale`, only float32.  The other ops are not registered, float64
    # is refused naming the op and dtype, and the library is smaller.
    sel = lib / "build-select"
    (sel / "python").mkdir(parents=True)
    (sel / "python" / "_fast.so").write_bytes(b"")  # as an earlier build with the bindings left it
    r = run_codegen("build", "--no-generate", "--no-cuda", "-O0", "--ops", "mylib::scale", "--dtypes", "float32",
                    "--build-dir", str(sel), cwd=lib)
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in (sel / "generated" / "cpu").iterdir()) == ["scale.cpp", "scale_float32.cpp"]
    # -O0 leaves the fast Python bindings out (the ops take their wrappers, as the script below
    # does), and removes an earlier build's, which the loader would take instead
    assert "skipping the fast Python bindings (-O0; --fast-bindings compiles them)" in r.stderr, r.stderr
    assert not list((sel / "python").glob("_fast*.so")) and json.loads((sel / "_C.json").read_text())["fast_bindings"] is False
    script = ("import torch, mylib\n"
              "x = torch.arange(4.0)\n"
              "assert torch.equal(mylib.ops.scale(x, 3.0), x * 3)\n"
              "assert [n for n in ('axpy', 'row_sum', 'scale', 'tile_last') if hasattr(torch.ops.mylib, n)] == ['scale']\n"
              "try:\n    mylib.ops.scale(x.double(), 2.0)\nexcept RuntimeError as e:\n    print(str(e).splitlines()[0])\n")
    out = run_python(["-c", script], cwd=lib, env={**os.environ, "PYTHONPATH": str(lib), "MYLIB_LIBRARY": str(sel / "_C.so")})
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["mylib::scale: argument 'self' has dtype Double, but expected one of: float32"]
    assert (sel / "_C.so").stat().st_size < (lib / "build" / "_C.so").stat().st_size
    assert run_codegen("build", "--ops", "nope", cwd=lib).returncode == 2
    # A formula that does not compile is reported at its declaration's line.  (The library is
    # shared: the declaration is restored and regenerated afterwards, under its lock.)
    decl = lib / "declarations" / "row_sum.yaml"
    good = decl.read_text()
    with mylib.locked():
        try:
            decl.write_text(good.replace("grad.unsqueeze(1)", "grad.unsqueez(1)"))
            assert run_codegen("generate", cwd=lib).returncode == 0
            r = run_codegen("build", "--no-cuda", "-O0", "--fast-bindings", cwd=lib)  # the fixture's settings
            assert r.returncode != 0
            assert "declarations/row_sum.yaml:6:" in r.stdout + r.stderr and "unsqueez" in r.stdout + r.stderr, r.stderr[-3000:]
        finally:
            decl.write_text(good)
            run_codegen("generate", cwd=lib)


def test_cli_help_and_exit_codes():
    r = run_codegen("--help")
    assert r.returncode == 0
    for cmd in ("generate", "check", "build", "list", "init"):
        assert cmd in r.stdout
        assert run_codegen(cmd, "--help").returncode == 0
    assert "Exit status" in r.stdout
    assert run_codegen("no-such-command").returncode == 2
    r = run_codegen("list")
    assert "opwrap::linear\tfloat32,float64,bfloat16\tCPU,CUDA" in r.stdout.splitlines()


@pytest.mark.slow(20)
def test_wheel_packages_what_codegen_build_compiles(tmp_path):
    """`pip wheel .` (opwrap_codegen.backend) runs the ninja build of `codegen build` and
    packages its two modules as a platform wheel; without build isolation, after `make
    build` (or another build there, asked for with its settings), it compiles nothing (the
    same build directory, sources, flags and torch).  The
    installed wheel loads its library from beside the package, with no source tree around.
    The toolchain is not in it: that is the opwrap-codegen distribution."""
    wheels = tmp_path / "wheels"
    built = bundled_build()  # build/'s settings: `make build`'s, or another build's
    settings = ["-C", f"optimize={built['optimize']}",
                "-C", f"cpu_capabilities={str(built['cpu_capabilities']).lower()}",
                "-C", f"fast_bindings={str(built['fast_bindings']).lower()}"]
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "-v", *settings,
                        "-w", str(wheels), str(ROOT)], capture_output=True, text=True,
                       # CUDA is built and tested by `codegen build`; the wheel's CPU part proves the packaging.
                       env={**os.environ, "OPWRAP_CUDA": "0"})
    assert r.returncode == 0, r.stderr[-3000:]
    assert "compiled" not in r.stdout + r.stderr, (r.stdout + r.stderr)[-3000:]
    (wheel,) = wheels.glob("opwrap-*.whl")
    assert not wheel.name.endswith("-none-any.whl"), wheel.name  # a platform wheel
    import zipfile

    import torch
    names = zipfile.ZipFile(wheel).namelist()
    assert any(n.startswith("opwrap/_C") and n.endswith(".so") for n in names), names
    assert any(n.startswith("opwrap/_C") and n.endswith(".json") for n in names), names  # the torch it needs
    assert any(n.startswith("opwrap/_generated/_fast") and n.endswith(".so") for n in names) == built["fast_bindings"], names
    assert "opwrap/_generated/__init__.py" in names and "opwrap/py.typed" in names
    assert not any(n.startswith(("codegen/", "opwrap_codegen/")) for n in names), names
    metadata = zipfile.ZipFile(wheel).read("opwrap-0.1.0.dist-info/METADATA").decode()
    release = ".".join(torch.__version__.split("+")[0].split(".")[:2])
    assert f"Requires-Dist: torch=={release}.*" in metadata.splitlines(), metadata
    # built in this checkout: the toolchain beside it (from an sdist: by name, see test_dist.py)
    assert f"Requires-Dist: opwrap-codegen @ {(ROOT / 'toolchain').as_uri()}" in metadata.splitlines(), metadata
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    script = ("import torch, opwrap\n"
              "assert 'site' in opwrap.library_path, opwrap.library_path\n"
              "assert type(opwrap.ops.myadd).__name__ == 'builtin_function_or_method'\n"
              "print(torch.ops.opwrap.fill_natural([3]).tolist())\n")
    out = run_python(["-c", script], cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(site)})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[0, 1, 2]"


# A library of its own: a sanitizer build (its own flags) of kernels with deliberate bugs, which
# no shared library may hold.
@pytest.mark.slow(120)
def test_sanitizer_build_reports_memory_errors_and_undefined_behaviour(tmp_path):
    """`codegen build --sanitize` must catch what it is there for: a kernel reading one element
    past its input (ASan) and a signed overflow (UBSan), each ending the process."""
    lib = tmp_path / "sanlib"
    assert run_codegen("init", str(lib)).returncode == 0
    one_unit_a_group(lib)  # two groups, one unit: each parses torch's headers (no precompiled copy)
    (lib / "declarations" / "scale.yaml").write_text(
        "- func: past_end(Tensor self) -> Tensor\n  dtypes: [float32]\n  kernels: {CPU: past_end_cpu}\n  header: bugs.h\n  like: self\n"
        "- func: overflow(Tensor self) -> Tensor\n  dtypes: [int32]\n  kernels: {CPU: overflow_cpu}\n  header: bugs.h\n  like: self\n")
    (lib / "kernels" / "scale.h").unlink()
    (lib / "kernels" / "bugs.h").write_text(
        "#pragma once\n#include <ATen/core/Tensor.h>\nnamespace sanlib::kernels {\n"
        "template <typename T> void past_end_cpu(const at::Tensor& self, at::Tensor& out) {\n"
        "  const T* in = self.const_data_ptr<T>(); T* o = out.mutable_data_ptr<T>();\n"
        "  for (int64_t i = 0; i < out.numel(); ++i) o[i] = in[i + 1];\n}\n"
        "template <typename T> void overflow_cpu(const at::Tensor& self, at::Tensor& out) {\n"
        "  const T* in = self.const_data_ptr<T>(); T* o = out.mutable_data_ptr<T>();\n"
        "  for (int64_t i = 0; i < out.numel(); ++i) o[i] = in[i] + T(2147483647);\n}\n}\n")
    # No precompiled headers: this is the run's only library with the sanitizer's options, so
    # theirs would serve its few units alone (measured: 68 s of CPU with them, 47 s without);
    # `make test-asan` builds the bundled library's sanitizer units with them.  No fast Python
    # bindings either: the bugs are in the kernels, which the ops' wrappers reach as well, and
    # the bindings' unit, parsing torch's Python headers without a precompiled copy, was 15 of
    # those 47 s; `make test-asan` sanitizes the bundled library's.
    r = run_codegen("build", "--sanitize", "--no-fast-bindings", cwd=lib, env={"OPWRAP_PCH": "0"})
    assert r.returncode == 0, r.stderr
    from opwrap_codegen.build import sanitizer_runtime
    env = {**os.environ, "PYTHONPATH": str(lib), "LD_PRELOAD": sanitizer_runtime(), "ASAN_OPTIONS": "detect_leaks=0",
           "SANLIB_LIBRARY": str(lib / "build" / "sanitize" / "_C.so")}
    # Two processes (each starts torch under the sanitizer runtime, about 2 s); the second
    # runs the kernel where it is correct first, then where it overflows.
    scripts = (("sanlib.ops.past_end(torch.ones(5))", "AddressSanitizer: heap-buffer-overflow"),
               ("print(sanlib.ops.overflow(torch.zeros(2, dtype=torch.int32)).tolist(), flush=True)\n"
                "sanlib.ops.overflow(torch.ones(5, dtype=torch.int32))", "runtime error: signed integer overflow"))
    for script, report in scripts:
        out = subprocess.run([sys.executable, "-c", f"import torch, sanlib\n{script}"], cwd=lib, env=env,
                             capture_output=True, text=True)
        assert out.returncode != 0 and report in out.stderr, out.stderr[-3000:]
    assert out.stdout.splitlines() == ["[2147483647, 2147483647]"], out.stdout  # the right result before the overflow
