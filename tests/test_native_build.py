"""The native step of the build: `.c` files of `[tool.codegen] sources` compiled as C and
`[tool.codegen] crates` built with cargo, by one ninja run before cpp_extension's, and
linked into the op library (codegen/build/__init__.py, native_link_inputs)."""

import dataclasses
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import run_codegen
from opwrap_codegen import backend, build
from opwrap_codegen.core.config import load_config
from opwrap_codegen.core.diagnostics import CodegenError

needs_cargo = pytest.mark.skipif(shutil.which("cargo") is None, reason="cargo is not installed")

PYPROJECT = """\
[tool.codegen]
namespace = "nat"
kernels = "kernels"
sources = ["csrc/*.c"]
crates = ["rust/kern"]
"""

CARGO_TOML = """\
[package]
name = "nat-kern"
version = "0.1.0"
edition = "2021"

[lib]
crate-type = ["staticlib"]
"""

LIB_RS = """\
mod helper;

#[no_mangle]
pub extern "C" fn kern_add(a: f32, b: f32) -> f32 {
    helper::add(a, b)
}
"""

C_FILE = """\
#ifdef __cplusplus
#error compiled as C++
#endif
#include "mul.h"

int c_mul(int a, int b) { return a * b * MUL_FACTOR; }
"""


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def edit(path: Path, text: str) -> None:
    """Write `text` after the last build's outputs, by a clock tick or more (ninja and cargo
    both compare modification times)."""
    time.sleep(0.02)
    write(path, text)


@pytest.fixture
def native(tmp_path):
    """A project with one C file (including a header from the kernels directory) and one crate."""
    write(tmp_path / "pyproject.toml", PYPROJECT)
    write(tmp_path / "kernels" / "mul.h", "#define MUL_FACTOR 1\n")
    write(tmp_path / "csrc" / "mul.c", C_FILE)
    write(tmp_path / "rust" / "kern" / "Cargo.toml", CARGO_TOML)
    write(tmp_path / "rust" / "kern" / "src" / "lib.rs", LIB_RS)
    write(tmp_path / "rust" / "kern" / "src" / "helper.rs", "pub fn add(a: f32, b: f32) -> f32 { a + b }\n")
    return tmp_path


def step(project: Path, **options) -> tuple[list[str], list[str]]:
    """(what native_link_inputs returned, the lines it logged)."""
    logged: list[str] = []
    config = load_config(project)
    return build.native_link_inputs(config, config.path("build"), log=logged.append, optimize=0, **options), logged


def defined_symbols(path: Path, dynamic: bool = False) -> set[str]:
    out = subprocess.run(["nm", "--defined-only", *(["-D"] if dynamic else []), str(path)],
                         capture_output=True, text=True, check=True).stdout
    return {line.split()[-1] for line in out.splitlines() if len(line.split()) == 3}


# ------------------------------------------------------------------------------ config


def test_crates_key_is_a_list_of_directories_inside_the_project(tmp_path):
    def config(crates: str):
        write(tmp_path / "pyproject.toml", f'[tool.codegen]\nnamespace = "nat"\ncrates = {crates}\n')
        return load_config(tmp_path)

    assert config('["rust/kern", "more"]').crates == ("rust/kern", "more")
    assert config("[]").crates == ()
    for bad, message in (('"rust/kern"', "crates must be a list of strings"), ("[1]", "crates must be a list of strings"),
                         ('["../elsewhere"]', "crates must list directories inside the project"),
                         ('["/abs/kern"]', "not '/abs/kern'"), ('["."]', "not '.'")):
        with pytest.raises(CodegenError, match=message):
            config(bad)


def test_c_files_go_to_the_native_step_not_to_cpp_extension(native):
    write(native / "csrc" / "kernel.cu", "// CUDA\n")
    write(native / "csrc" / "glue.cpp", "// C++\n")
    config = load_config(native)
    config = dataclasses.replace(config, sources=("csrc/*",))
    names = {p.name for p in build.sources(config, cuda=True)}
    assert {"kernel.cu", "glue.cpp"} <= names and "mul.c" not in names
    assert "kernel.cu" not in {p.name for p in build.sources(config)}  # without CUDA, as before
    assert [p.name for p in build.c_sources(config)] == ["mul.c"]


# -------------------------------------------------------------------- the native step


@needs_cargo
def test_builds_c_as_c_and_the_crate_as_a_static_library(native):
    inputs, logged = step(native)
    obj, lib = map(Path, inputs)
    assert obj == native / "build" / "native" / "c" / "csrc" / "mul.c.o" and obj.is_file()
    assert lib == native / "build" / "cargo" / "release" / "libnat_kern.a"  # [package] name, '-' -> '_'
    assert "c_mul" in defined_symbols(obj)
    assert "kern_add" in defined_symbols(lib)
    assert any(line.startswith("codegen build: compiled csrc/mul.c as C, ") for line in logged), logged
    assert any(line.startswith("codegen build: cargo built rust/kern into libnat_kern.a, ") for line in logged), logged
    assert build.native_ldflags(load_config(native), inputs) == [
        *inputs, *build.RUST_STD_LIBS, *build.HIDE_ARCHIVE_SYMBOLS]


@needs_cargo
def test_nothing_runs_again_until_a_source_changes(native, tmp_path_factory, monkeypatch):
    shim = tmp_path_factory.mktemp("bin")  # a `cargo` first on PATH that counts its runs
    calls = shim / "calls"
    write(shim / "cargo", f'#!/bin/sh\necho run >> {calls}\nexec {shutil.which("cargo")} "$@"\n')
    (shim / "cargo").chmod(0o755)
    monkeypatch.setenv("PATH", f"{shim}{os.pathsep}{os.environ['PATH']}")

    def cargo_runs() -> int:
        return calls.read_text().count("run") if calls.exists() else 0

    ninja_log = native / "build" / "native" / ".ninja_log"
    first, _ = step(native)
    assert cargo_runs() == 1
    runs = ninja_log.read_text().count("\n")
    mtimes = {p: Path(p).stat().st_mtime_ns for p in first}

    again, logged = step(native)  # nothing changed: neither cc nor cargo runs
    assert again == first and logged == []
    assert cargo_runs() == 1 and ninja_log.read_text().count("\n") == runs
    assert mtimes == {p: Path(p).stat().st_mtime_ns for p in again}

    edit(native / "rust" / "kern" / "src" / "helper.rs", "pub fn add(a: f32, b: f32) -> f32 { a + b + 1.0 }\n")
    _, logged = step(native)  # a module lib.rs pulls in (cargo's depfile lists it): cargo only
    assert [line.split(",")[0] for line in logged] == ["codegen build: cargo built rust/kern into libnat_kern.a"]
    assert Path(first[1]).stat().st_mtime_ns > mtimes[first[1]] and cargo_runs() == 2

    edit(native / "kernels" / "mul.h", "#define MUL_FACTOR 2\n")
    _, logged = step(native)  # a header the C file includes: that file only
    assert [line.split(",")[0] for line in logged] == ["codegen build: compiled csrc/mul.c as C"]
    assert cargo_runs() == 2

    edit(native / "rust" / "kern" / "Cargo.toml", CARGO_TOML + "\n")
    _, logged = step(native)  # cargo runs, finds nothing to rebuild; restat: the library is left alone
    assert [line.split(",")[0] for line in logged] == ["codegen build: cargo rust/kern: libnat_kern.a was up to date"]
    assert step(native)[1] == [] and cargo_runs() == 3


@needs_cargo
def test_sanitize_compiles_c_with_the_sanitizer_flags(native):
    inputs, _ = step(native, sanitize=True)
    command = (native / "build" / "native" / "build.ninja").read_text()
    assert "-fsanitize=address,undefined" in command and "-fvisibility-inlines-hidden" not in command
    assert any(s.startswith("__asan") or s.startswith("__ubsan") for s in _undefined(Path(inputs[0])))


def _undefined(obj: Path) -> set[str]:
    out = subprocess.run(["nm", "--undefined-only", str(obj)], capture_output=True, text=True, check=True).stdout
    return {line.split()[-1] for line in out.splitlines() if line.split()}


def test_without_native_sources_nothing_is_written(tmp_path):
    write(tmp_path / "pyproject.toml", '[tool.codegen]\nnamespace = "nat"\n')
    assert step(tmp_path) == ([], [])
    assert not (tmp_path / "build").exists()
    assert build.native_ldflags(load_config(tmp_path), []) == []


# ------------------------------------------------------------------------------ errors


def _path_without_cargo() -> str:
    return os.pathsep.join(d for d in os.environ["PATH"].split(os.pathsep)
                           if d and not (Path(d) / "cargo").exists())


def test_missing_cargo_says_what_to_install(native, monkeypatch):
    monkeypatch.setenv("PATH", _path_without_cargo())
    with pytest.raises(FileNotFoundError, match=r"cargo, which is not on PATH: install Rust: https://rustup.rs"):
        step(native)


@needs_cargo
def test_prebuilt_crate_libraries_are_linked_without_cargo(native, tmp_path_factory, monkeypatch):
    """$OPWRAP_PREBUILT_CRATES (a machine without Rust: scripts/gpu-test): the crate's static
    library from that folder, linked as it is, with no cargo on PATH; a missing one is named."""
    inputs, _ = step(native)  # here, with cargo: what `make gpu-prep` copies
    prebuilt = tmp_path_factory.mktemp("crate-libs")
    shutil.copy(inputs[1], prebuilt / "libnat_kern.a")
    shutil.rmtree(native / "build")
    monkeypatch.setenv("PATH", _path_without_cargo())
    monkeypatch.setenv(build.PREBUILT_CRATES, str(prebuilt))
    inputs, logged = step(native)
    assert inputs == [str(native / "build" / "native" / "c" / "csrc" / "mul.c.o"), str(prebuilt / "libnat_kern.a")]
    assert f"codegen build: linking {prebuilt / 'libnat_kern.a'} ($OPWRAP_PREBUILT_CRATES) for crate rust/kern" in logged
    assert not (native / "build" / "cargo").exists()
    (prebuilt / "libnat_kern.a").unlink()
    with pytest.raises(FileNotFoundError, match=r"has no libnat_kern.a \(crate rust/kern\): copy it there"):
        step(native)


def test_a_crate_must_be_a_static_library(native):
    manifest = native / "rust" / "kern" / "Cargo.toml"
    write(manifest, CARGO_TOML.replace('["staticlib"]', '["rlib"]'))
    with pytest.raises(CodegenError) as e:
        step(native)
    assert f"{manifest}:6:1: error: crate 'nat-kern' is not built as a static library" in str(e.value)
    assert 'add [lib] crate-type = ["staticlib"]' in str(e.value)

    manifest.unlink()
    with pytest.raises(CodegenError, match=f"crates names 'rust/kern', but {manifest} is not there"):
        step(native)


@needs_cargo
def test_a_failing_compile_fails_the_build_with_its_output(native):
    edit(native / "rust" / "kern" / "src" / "helper.rs", "pub fn add(a: f32, b: f32) -> f32 { a + }\n")
    with pytest.raises(RuntimeError, match=r"(?s)compiling the native kernels failed.*helper\.rs"):
        step(native)
    shutil.rmtree(native / "rust")
    write(native / "pyproject.toml", PYPROJECT.replace('crates = ["rust/kern"]\n', ""))
    edit(native / "csrc" / "mul.c", C_FILE.replace("return", "retrun"))
    with pytest.raises(RuntimeError, match=r"(?s)compiling the native kernels failed.*mul\.c.*retrun"):
        step(native)


@pytest.mark.slow(8)
def test_cli_without_cargo_is_one_line_and_exit_1(native):
    write(native / "generated" / "unit.cpp", "int unit() { return 0; }\n")
    r = run_codegen("build", "--no-generate", "--no-cuda", "-C", str(native), env={"PATH": _path_without_cargo()})
    assert r.returncode == 1, r.stderr
    assert r.stderr.strip().splitlines()[-1] == (
        "codegen build: failed: [tool.codegen] crates needs cargo, which is not on PATH: "
        "install Rust: https://rustup.rs or your distribution's cargo package")
    assert "Traceback" not in r.stderr


# ------------------------------------------------------------------------------- sdist


def test_sdist_holds_the_crate_less_target_and_the_c_sources(native):
    write(native / "rust" / "kern" / "target" / "release" / "libnat_kern.a", "built by hand\n")
    write(native / "csrc" / "kernel.cu", "// CUDA\n")
    config = load_config(native)
    config = dataclasses.replace(config, sources=("csrc/*.c", "csrc/*.cu"))
    files = set(backend.sdist_sources(config))
    assert {"rust/kern/Cargo.toml", "rust/kern/src/lib.rs", "rust/kern/src/helper.rs", "csrc/mul.c",
            "csrc/kernel.cu", "kernels/mul.h"} <= files
    assert not any("target" in f for f in files)


# ------------------------------------------------------------- linked into the op library

UNIT = """\
extern "C" float kern_add(float, float);
extern "C" int c_mul(int, int);
extern "C" const char *kern_marker();
extern "C" float nat_probe(float x) { return kern_add(x, 1.0f) + c_mul(2, 3) + (kern_marker()[0] == 'm'); }
"""

MARKER_RS = """
#[no_mangle]
pub extern "C" fn kern_marker() -> *const u8 {
    b"marker-VERSION\\0".as_ptr()
}
"""


@needs_cargo
@pytest.mark.slow(15)
def test_build_links_the_native_kernels_and_relinks_when_they_change(native):
    """build() itself, over a C++ unit that calls both (no torch headers: it compiles in a
    second): the library holds them, exports none of the archive's symbols, and is linked
    again, in the same process, when only the crate changed."""
    write(native / "generated" / "unit.cpp", UNIT)
    write(native / "rust" / "kern" / "src" / "lib.rs", LIB_RS + MARKER_RS.replace("VERSION", "one"))
    config = load_config(native)
    logged: list[str] = []
    library = build.build(config, use_ccache=False, cuda=False, optimize=0, log=logged.append)
    data = library.read_bytes()
    assert b"marker-one" in data
    exported = defined_symbols(library, dynamic=True)
    assert "nat_probe" in exported and "c_mul" in exported  # objects keep their symbols
    assert "kern_add" not in exported and not any(s.startswith("_R") or s.startswith("_ZN3std") for s in exported)
    link = next(line for line in (native / "build" / "build.ninja").read_text().splitlines()
                if line.startswith("ldflags ="))
    assert f"{native}/build/native/c/csrc/mul.c.o {native}/build/cargo/release/libnat_kern.a -lgcc_s" in link
    import ctypes
    probe = ctypes.CDLL(str(library)).nat_probe
    probe.restype, probe.argtypes = ctypes.c_float, [ctypes.c_float]
    assert probe(1.0) == 1.0 + 1.0 + 6 + 1

    linked = library.stat().st_mtime_ns
    assert build.build(config, use_ccache=False, cuda=False, optimize=0, log=logged.append) == library
    assert library.stat().st_mtime_ns == linked  # nothing changed: not linked again

    edit(native / "rust" / "kern" / "src" / "lib.rs", LIB_RS + MARKER_RS.replace("VERSION", "two"))
    build.build(config, use_ccache=False, cuda=False, optimize=0, log=logged.append)
    assert b"marker-two" in library.read_bytes() and library.stat().st_mtime_ns > linked
