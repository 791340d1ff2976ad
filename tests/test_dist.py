"""Shipping, as a user does it, with build isolation: the toolchain wheel (opwrap-codegen,
pure Python) with `pip wheel`, a `codegen init` library built into a platform wheel and this
repository built into an sdist and a wheel from that sdist with `python -m build`, a clone of
the repository installed into a fresh venv with `uv pip install`, and both wheels used there
from outside any source tree.

The toolchain is not published, so the installers get its wheel through find-links.  Every
environment takes the torch this venv has (a constraint, for the build environments too),
which lies on this machine's disk.  The environments that hold torch (three isolated builds
and the venv) are made by uv (`python -m build --installer uv`, `uv venv`): uv links torch
from its cache, which `make venv` filled, instead of unpacking 5 GB of wheels each time
(about a minute a time with pip).  The isolated builds run at once."""

import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from conftest import ROOT, one_unit_a_group, run_codegen

PIP = [sys.executable, "-m", "pip"]

AXPY = ("- func: axpy(Tensor x, Tensor y, Scalar a=2) -> Tensor\n"
        "  doc: a * x + y, elementwise.\n"
        "  dtypes: [float32, float64]\n"
        "  pointwise: a * x + y\n"
        "  derivatives: {x: grad * a, y: grad}\n")

USE = '''
import sys
import torch
import mylib
import opwrap

assert "site-packages" in mylib.library_path and "site-packages" in opwrap.library_path
x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
y = torch.randn(3, 4, dtype=torch.float64)
assert torch.equal(mylib.ops.scale(x, 2.0), x * 2)
assert torch.allclose(mylib.ops.axpy(x, y, 0.5), 0.5 * x + y)
assert torch.autograd.gradcheck(lambda t: mylib.ops.scale(t, 1.5), (x,))
assert torch.autograd.gradcheck(lambda t: mylib.ops.axpy(t, y), (x,))
compiled = torch.compile(lambda t, u: mylib.ops.axpy(mylib.ops.scale(t, 3.0), u), fullgraph=True, backend="eager")
assert torch.allclose(compiled(x.detach(), y), 3 * x.detach() * 2 + y)
with torch._subclasses.fake_tensor.FakeTensorMode():
    fake = mylib.ops.axpy(torch.empty(5, 2), torch.empty(5, 2))
    assert fake.shape == (5, 2) and fake.dtype == torch.float32
try:
    mylib.ops.scale(torch.ones(2, dtype=torch.int32), 2.0)
except RuntimeError as e:
    print(str(e).splitlines()[0])
print(opwrap.ops.myadd(torch.ones(2), torch.ones(2)).tolist())
print(opwrap.ops.fill_natural([3]).tolist(), hasattr(torch.ops.opwrap, "linear"))
'''

TYPED = '''
import torch
import mylib

y: torch.Tensor = mylib.ops.axpy(torch.ones(2), torch.ones(2))
mylib.ops.scale(y, "two")
'''


def _run(cmd, **kw):
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)


def _ok(r):
    assert r.returncode == 0, (r.stdout + r.stderr)[-4000:]
    return r


@pytest.mark.slow(420)
def test_toolchain_library_and_repository_ship_as_wheels(tmp_path):
    import torch
    links, wheels = tmp_path / "links", tmp_path / "wheels"
    constraint = tmp_path / "build-constraints.txt"
    constraint.write_text(f"torch=={torch.__version__.split('+')[0]}\n")
    # None of this checkout's settings (OPWRAP_LIBRARY, ...) reach the user's environments,
    # except where precompiled headers are kept: this run's, which the test libraries' -O0
    # builds share (the same compiler, torch and options), not the developer's cache.
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPWRAP_") or k == "OPWRAP_PCH_DIR"}
    env.update(PIP_BUILD_CONSTRAINT=str(constraint), PIP_DISABLE_PIP_VERSION_CHECK="1")

    # The toolchain: a pure Python wheel, built with isolation, compiling nothing.
    _ok(_run([*PIP, "wheel", "-q", "--no-deps", "-w", links, ROOT / "toolchain"], env=env))
    (toolchain,) = links.glob("opwrap_codegen-*.whl")
    assert toolchain.name.endswith("-py3-none-any.whl"), toolchain.name
    names = zipfile.ZipFile(toolchain).namelist()
    assert "opwrap_codegen/backend.py" in names and "opwrap_codegen/templates/kernels/op.j2" in names
    assert "opwrap_codegen/include/opwrap/runtime/checks.h" in names
    assert "opwrap_codegen/include/opwrap/kernel_abi.rs" in names  # what `generate` copies to generated/rust/
    assert not any(n.endswith(".so") for n in names) and not any(n.startswith("codegen/") for n in names)

    # A library made by `codegen init`: the example op (derivatives) and a pointwise op.
    lib = tmp_path / "mylib"
    _ok(run_codegen("init", str(lib)))
    one_unit_a_group(lib)  # the packaging is tested here, not how a library splits into units
    (lib / "declarations" / "axpy.yaml").write_text(AXPY)
    assert not (lib / "setup.py").exists() and not (lib / "setup.cfg").exists()
    _ok(run_codegen("generate", cwd=lib))  # committed, as a library keeps it

    # Drift fails the build (no isolation here: the check is what is tested, not pip).
    decl = lib / "declarations" / "axpy.yaml"
    decl.write_text(AXPY.replace("elementwise", "element by element"))
    no_constraint = {k: v for k, v in env.items() if k != "PIP_BUILD_CONSTRAINT"}  # pip refuses it without isolation
    r = _run([*PIP, "wheel", "--no-build-isolation", "--no-deps", "-w", tmp_path / "stale", lib], env=no_constraint)
    assert r.returncode != 0 and "has drifted from the declarations and templates" in r.stdout + r.stderr, r.stderr
    assert "Traceback" not in r.stdout + r.stderr, r.stderr[-3000:]
    decl.write_text(AXPY)

    # Three isolated builds at once: the library and the repository (sdist, then a wheel from
    # it) with `python -m build`, and the repository installed into a fresh venv with a plain
    # `uv pip install <clone>` (its toolchain requirement is met from the clone's toolchain/:
    # no find-links).  The repository holds two ops in the clone's install (a selective
    # build, -C ops=), which the script below runs; compiling all of them is `make build`'s
    # test, the packaging is this one's.  The wheel built from the sdist holds one,
    # fill_natural, whose Rust kernel needs the crate the sdist carries: that wheel's test is
    # how it builds and its metadata, and a second pointwise op's units would add only
    # compile time.
    settings = ["-C", "cuda=false", "-C", "optimize=0"]
    repo_settings = [*settings, "-C", "ops=myadd,fill_natural"]
    sdist_settings = [*settings, "-C", "ops=fill_natural"]
    uv_env = {**env, **_uv_config(constraint, links)}
    # The toolchain's wheel is 0.1.0 at every commit, and uv takes a version's wheel from
    # find-links as immutable: a cached one of another commit (other templates) would be used
    # instead of the one just built, and the library's generated tree would not match it.
    _ok(_run([UV, "cache", "clean", "opwrap-codegen"], env=uv_env))
    build = [sys.executable, "-m", "build", "--installer", "uv"]
    # the library's wheel with its fast Python bindings, as a wheel built at the default -O3 has them
    lib_build = subprocess.Popen([*build, "--wheel", "-o", wheels, *settings, "-C", "fast_bindings=true", lib], env=uv_env,
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    repo_copy, clone = tmp_path / "repo", tmp_path / "clone"  # as a fresh clone has it: no build/ to reuse
    _export(ROOT, repo_copy)
    _export(ROOT, clone)
    venv = tmp_path / "venv"
    _ok(_run([UV, "venv", "-q", "--seed", "--python", sys.executable, venv], env=uv_env))  # --seed: pip, for the resolver check below
    python = venv / "bin" / "python"
    repo_install = subprocess.Popen([UV, "pip", "install", "-q", "--python", python, *repo_settings, "."], cwd=clone,
                                    env=uv_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    repo_build = _run([*build, "-o", wheels, *sdist_settings, repo_copy], env=uv_env)
    for process in (lib_build, repo_install):
        output = process.communicate()[0]
        assert process.returncode == 0, output[-4000:]
    _ok(repo_build)
    assert "Successfully built opwrap-0.1.0.tar.gz and opwrap-0.1.0-" in repo_build.stdout, repo_build.stdout[-2000:]

    (lib_wheel,) = wheels.glob("mylib-*.whl")
    (repo_wheel,) = wheels.glob("opwrap-*.whl")
    release = ".".join(torch.__version__.split("+")[0].split(".")[:2])
    for wheel in (lib_wheel, repo_wheel):
        assert not wheel.name.endswith("-none-any.whl") and "linux" in wheel.name, wheel.name  # a platform wheel
        z = zipfile.ZipFile(wheel)
        metadata = next(z.read(n).decode() for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        assert f"Requires-Dist: torch=={release}.*" in metadata.splitlines(), metadata
    names = zipfile.ZipFile(lib_wheel).namelist()
    for expected in ("mylib/py.typed", "mylib/_generated/ops.pyi", "mylib/_generated/fake.py"):
        assert expected in names, names
    assert any(re.fullmatch(r"mylib/_C\..*\.so", n) for n in names) and any(n.startswith("mylib/_generated/_fast") for n in names)

    # The wheel built from the sdist requires the toolchain by name (for an index); the one
    # `pip install .` made in the clone, from the clone's folder.
    metadata = zipfile.ZipFile(repo_wheel).read("opwrap-0.1.0.dist-info/METADATA").decode().splitlines()
    assert "Requires-Dist: opwrap-codegen==0.1.0" in metadata, metadata
    # The library's wheel into the same venv (by file: PyPI has a project named mylib).
    _ok(_run([UV, "pip", "install", "-q", "--python", python, lib_wheel], env=uv_env))
    user = tmp_path / "user"  # outside every source tree
    user.mkdir()
    out = _ok(_run([python, "-c", USE], cwd=user, env=env))
    assert out.stdout.splitlines() == [
        "mylib::scale: argument 'self' has dtype Int, but expected one of: float32, float64", "[2.0, 2.0]",
        "[0, 1, 2] False"], out.stdout
    # The toolchain came along (opwrap requires it): its command works on the installed library's project.
    r = _ok(_run([venv / "bin" / "codegen", "list"], cwd=lib, env=env))
    assert r.stdout.splitlines() == ["mylib::axpy\tfloat32,float64\tCPU,CUDA", "mylib::scale\tfloat32,float64\tCPU"], r.stdout
    # The stubs, as mypy --strict sees the installed package.
    (user / "typed.py").write_text(TYPED)
    r = _run([sys.executable, "-m", "mypy", "--strict", "--python-executable", python, "--no-incremental", "typed.py"],
             cwd=user, env=env)
    assert 'Argument 2 to "scale" has incompatible type "str"; expected "float"' in r.stdout, r.stdout + r.stderr
    assert r.stdout.count("error:") == 1, r.stdout

    # Beside another torch release (any but the one it was built with): pip's resolver refuses,
    # nothing is installed.
    r = _run([python, "-m", "pip", "install", "--dry-run", "--find-links", links, lib_wheel, f"torch!={release}.*"],
             env=env)
    assert r.returncode != 0 and "ResolutionImpossible" in r.stdout + r.stderr, (r.stdout + r.stderr)[-3000:]
    assert f"mylib 0.1.0 depends on torch=={release}.*" in r.stdout + r.stderr, (r.stdout + r.stderr)[-3000:]


UV = Path(sys.executable).parent / "uv"  # installed with the dev tools (scripts/venv-install)


def _uv_config(constraint: Path, links: Path) -> dict[str, str]:
    """uv's environment variables for the indexes pip is configured with (scripts/venv-install
    reads them), the toolchain's wheel folder, and pip's constraints with `constraint` for every
    environment, build environments included."""
    import importlib.util
    from importlib.machinery import SourceFileLoader
    loader = SourceFileLoader("venv_install", str(ROOT / "scripts" / "venv-install"))
    venv_install = importlib.util.module_from_spec(importlib.util.spec_from_loader("venv_install", loader))
    loader.exec_module(venv_install)
    pip_constraints = venv_install.pip_index_config()[0].get("constraint", [])
    return venv_install.uv_environment(find_links=[str(links)], constraints=[*pip_constraints, str(constraint)])


def _export(root: Path, target: Path) -> None:
    """The committed-or-not source files of this checkout (what a fresh clone would hold, plus
    uncommitted edits), without build outputs: `git ls-files` of tracked and untracked files."""
    files = subprocess.run(["git", "-C", str(root), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                           capture_output=True, text=True, check=True).stdout.split("\0")
    for rel in filter(None, files):
        src = root / rel
        if src.is_file():
            dst = target / rel
            dst.parent.mkdir(parents=True, exist_ok=True)
            dst.write_bytes(src.read_bytes())


# ------------------------------------------------------------- the backend's own checks (fast)


def test_backend_settings_are_checked_and_the_rest_go_to_setuptools():
    from opwrap_codegen import backend
    ours, rest = backend._settings({"cuda": "false", "--optimize": "0", "ops": ["a", "b"], "editable_mode": "strict"})
    assert ours == {"cuda": "false", "optimize": "0", "ops": "a,b"} and rest == {"editable_mode": "strict"}
    assert backend._cuda_choice({"cuda": "true"}) is True and backend._cuda_choice({"cuda": "off"}) is False
    with pytest.raises(backend.BuildError, match="-C cuda=maybe: expected true, false or auto"):
        backend._cuda_choice({"cuda": "maybe"})
    with pytest.raises(backend.BuildError, match="-C optimize=4: expected one of 0, 1, 2, 3"):
        backend._optimize({"optimize": "4"})
    assert [backend._cpu_capabilities(s) for s in ({}, {"cpu_capabilities": "true"}, {"cpu_capabilities": "off"})] == \
        [None, True, False]
    with pytest.raises(backend.BuildError, match="-C cpu_capabilities=avx2: expected true or false"):
        backend._cpu_capabilities({"cpu_capabilities": "avx2"})
    assert [backend._fast_bindings(s) for s in ({}, {"fast_bindings": "true"}, {"fast_bindings": "off"})] == \
        [None, True, False]
    with pytest.raises(backend.BuildError, match="-C fast_bindings=some: expected true or false"):
        backend._fast_bindings({"fast_bindings": "some"})


def test_a_wheels_metadata_pins_the_torch_release_without_importing_torch(tmp_path):
    """The metadata step of a wheel build (pip's and uv's first hook) reads the torch release
    from torch's distribution metadata: importing torch there cost 1.6 s of CPU per build.  The
    release is the loader's rule (pyruntime.torch_release) of the version torch reports."""
    import torch

    from opwrap_codegen.core import torch_compat
    from opwrap_codegen.pyruntime import torch_release
    assert torch_compat.installed_version() == torch.__version__
    for version in ("2.11.0+cu130", "2.14.1", "2.15.0.dev20260101+cpu", torch.__version__):
        assert torch_compat.release_name(torch_compat.release_of(version)) == torch_release(version)
    lib = tmp_path / "mdlib"
    _ok(run_codegen("init", str(lib)))
    _ok(run_codegen("generate", cwd=lib))
    script = ("import sys\nfrom opwrap_codegen import backend\n"
              f"name = backend.prepare_metadata_for_build_wheel({str(tmp_path / 'md')!r})\n"
              "print(name, 'torch' in sys.modules)\n")
    (tmp_path / "md").mkdir()
    out = _ok(_run([sys.executable, "-c", script], cwd=lib)).stdout.splitlines()[-1].split()  # after setuptools' log
    assert out == ["mdlib-0.1.0.dist-info", "False"], out
    metadata = (tmp_path / "md" / out[0] / "METADATA").read_text().splitlines()
    assert f"Requires-Dist: torch=={torch_release(torch.__version__)}.*" in metadata, metadata


def test_static_dependencies_are_refused_at_their_line(tmp_path):
    """The backend pins torch, so [project] dependencies must be dynamic; a project that lists
    them statically gets path:line:col and exit status 2 from the build, not a traceback."""
    lib = tmp_path / "statlib"
    _ok(run_codegen("init", str(lib)))
    pyproject = lib / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace('dynamic = ["dependencies"]', 'dependencies = ["numpy"]'))
    line = pyproject.read_text().splitlines().index("[project]") + 1
    r = _run([*PIP, "wheel", "--no-build-isolation", "--no-deps", "-w", tmp_path / "w", lib])
    out = r.stdout + r.stderr
    assert r.returncode != 0 and f"{pyproject}:{line}:1: error: [project] must list dependencies in `dynamic`" in out, out
    assert "Traceback" not in out, out[-3000:]


def test_sdist_holds_what_the_wheel_is_built_from(tmp_path):
    """An sdist of a `codegen init` library: declarations, kernels, the generated tree and the
    package, and no build outputs."""
    import tarfile
    lib = tmp_path / "sdlib"
    _ok(run_codegen("init", str(lib)))
    _ok(run_codegen("generate", cwd=lib))
    (lib / "build").mkdir()
    (lib / "build" / "junk.o").write_text("")
    _ok(_run([sys.executable, "-m", "build", "--sdist", "--no-isolation", "-o", tmp_path / "dist", lib]))
    (sdist,) = (tmp_path / "dist").glob("sdlib-0.1.0.tar.gz")
    names = {n.split("/", 1)[1] for n in tarfile.open(sdist).getnames() if "/" in n}
    for expected in ("pyproject.toml", "declarations/scale.yaml", "kernels/scale.h", "generated/registration.cpp",
                     "generated/python/ops.pyi", "sdlib/__init__.py", "sdlib/py.typed", "PKG-INFO"):
        assert expected in names, sorted(names)
    assert not any(n.startswith("build/") for n in names), sorted(names)


@pytest.mark.slow(40)
def test_a_kernel_that_does_not_compile_fails_the_wheel_with_the_compiler_output(tmp_path):
    lib = tmp_path / "badlib"
    _ok(run_codegen("init", str(lib)))
    kernel = lib / "kernels" / "scale.h"
    kernel.write_text(kernel.read_text().replace("in[i] * factor", "in[i] * factr"))
    r = _run([*PIP, "wheel", "--no-build-isolation", "--no-deps", "-v", "-w", tmp_path / "w", "-C", "cuda=false",
              "-C", "optimize=0", lib])
    out = r.stdout + r.stderr
    assert r.returncode != 0 and "opwrap_codegen.backend: the build failed" in out, out[-3000:]
    assert "factr" in out and "was not declared" in out, out[-3000:]
    assert "Traceback" not in out, out[-3000:]


def test_one_toolchain_version():
    """opwrap requires the toolchain of its own commit, and `codegen init` pins the running one."""
    import tomllib

    from opwrap_codegen import __version__
    from opwrap_codegen.scaffold import _PYPROJECT
    table = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert table["tool"]["codegen"]["dependencies"] == [f"opwrap-codegen=={__version__}"]
    assert f'requires = ["opwrap-codegen=={__version__}"]' in _PYPROJECT.format(ns="x", version=__version__, torch="t")


def test_one_claimed_torch_range():
    """The torch releases opwrap claims (torch_compat.RELEASES) are what the toolchain requires,
    what an sdist of a library asks for, what `codegen init` scaffolds, what the README says and
    the docs' table of releases (docs/torch-releases.md)."""
    import tomllib

    from opwrap_codegen import backend
    from opwrap_codegen.core import torch_compat
    from opwrap_codegen.scaffold import _PYPROJECT
    want = torch_compat.requirement()
    assert want == "torch>=2.11,<2.16"
    deps = tomllib.loads((ROOT / "toolchain" / "pyproject.toml").read_text())["project"]["dependencies"]
    assert want in deps, deps
    assert backend.TORCH_REQUIREMENT == want
    assert f"asks for {want}:" in _PYPROJECT.format(ns="x", version="0", torch=want).replace("\n# ", " ")
    from docs_pages import rendered, source
    assert "\n<!-- table: torch -->\n" in source("torch-releases.md"), "docs/torch-releases.md lost its table marker"
    assert torch_compat.feature_table().rstrip("\n") in rendered("torch-releases.md")
    assert "torch 2.11, 2.12, 2.13, 2.14 and 2.15" in (ROOT / "README.md").read_text()
    assert "torch 2.11, 2.12, 2.13, 2.14 and 2.15" in source("torch-releases.md")
