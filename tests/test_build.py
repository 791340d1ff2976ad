"""The build: lean translation units, no-op rebuilds, and a library made with `codegen init`
outside this repository (with cwrap-style split_types)."""

import os
import subprocess
import sys

import pytest

from conftest import ROOT, run_codegen


def test_generated_units_include_only_what_they_use():
    for tu in (ROOT / "generated").rglob("*.cpp"):
        text = tu.read_text()
        assert "torch/extension.h" not in text, tu
        includes = [line for line in text.splitlines() if line.startswith("#include <")]
        for inc in includes:
            assert inc in ("#include <ATen/core/Tensor.h>", "#include <torch/library.h>",
                           "#include <ATen/ops/empty.h>", "#include <opwrap/runtime/checks.h>"), (tu, inc)


def test_noop_build_rebuilds_nothing():
    build = ROOT / "build"
    if not (build / "_C.so").exists():
        pytest.fail("build/_C.so missing: run `make build` first")
    objects = {p: p.stat().st_mtime_ns for p in build.glob("*.o")}
    assert objects
    r = run_codegen("build", "--no-generate", "--verbose")
    assert r.returncode == 0, r.stderr
    assert "no work to do" in r.stdout + r.stderr
    assert objects == {p: p.stat().st_mtime_ns for p in build.glob("*.o")}


def test_init_makes_a_separate_library_that_builds_and_loads(tmp_path):
    lib = tmp_path / "mylib"
    r = run_codegen("init", str(lib))
    assert r.returncode == 0, r.stderr
    assert run_codegen("init", str(lib)).returncode == 2  # never overwrites
    decl = lib / "declarations" / "scale.yaml"
    decl.write_text(decl.read_text() + "  split_types: true\n")
    r = run_codegen("generate", cwd=lib)
    assert r.returncode == 0, r.stderr
    cpu = sorted(p.name for p in (lib / "generated" / "cpu").iterdir())
    assert cpu == ["scale.cpp", "scale_float32.cpp", "scale_float64.cpp"]
    r = run_codegen("list", cwd=lib)
    assert r.stdout.strip() == "mylib::scale\tfloat32,float64\tCPU"
    r = run_codegen("build", cwd=lib)
    assert r.returncode == 0, r.stderr
    script = ("import torch, mylib\n"
              "x = torch.arange(4.0)\n"
              "assert torch.equal(mylib.ops.scale(x, 3.0), x * 3)\n"
              "assert torch.equal(torch.ops.mylib.scale(x.double(), 0.5), x.double() * 0.5)\n"
              "try:\n    mylib.ops.scale(x.half(), 2.0)\nexcept RuntimeError as e:\n    print(e)\n")
    out = subprocess.run([sys.executable, "-c", script], cwd=lib, capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(lib)})
    assert out.returncode == 0, out.stderr
    assert "mylib::scale: argument 'self' has dtype Half, but expected one of: float32, float64" in out.stdout


def test_cli_help_and_exit_codes():
    r = run_codegen("--help")
    assert r.returncode == 0
    for cmd in ("generate", "check", "build", "list", "init"):
        assert cmd in r.stdout
        assert run_codegen(cmd, "--help").returncode == 0
    assert "Exit status" in r.stdout
    assert run_codegen("no-such-command").returncode == 2
    r = run_codegen("list")
    assert "opwrap::linear\tfloat32,float64,bfloat16\tCPU" in r.stdout.splitlines()


def test_wheel_builds_the_same_sources_with_build_extension(tmp_path):
    """`pip wheel .` compiles generated/ with setuptools' BuildExtension; the installed wheel
    loads its library from beside the package, with no source tree around."""
    wheels = tmp_path / "wheels"
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "-q",
                        "-w", str(wheels), str(ROOT)], capture_output=True, text=True,
                       env={k: v for k, v in os.environ.items() if k != "OPWRAP_NO_EXTENSION"})
    assert r.returncode == 0, r.stderr[-3000:]
    (wheel,) = wheels.glob("opwrap-*.whl")
    import zipfile
    names = zipfile.ZipFile(wheel).namelist()
    assert any(n.startswith("opwrap/_C") and n.endswith(".so") for n in names), names
    for expected in ("opwrap/_generated/__init__.py", "codegen/templates/cpu/op.cpp.j2",
                     "codegen/include/opwrap/runtime/checks.h"):
        assert expected in names
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    script = ("import torch, opwrap\n"
              "assert 'site' in opwrap.library_path, opwrap.library_path\n"
              "print(torch.ops.opwrap.fill_natural([3]).tolist())\n")
    out = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(site)})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[0, 1, 2]"
