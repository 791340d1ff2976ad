"""Wheels PyPI accepts (docs/shipping.md, "Wheels PyPI accepts"): a `codegen init` library's wheel
built with `-C manylinux=manylinux_2_28` is repaired by auditwheel into a manylinux_2_28 wheel
that grafts none of torch's or CUDA's libraries and still loads beside torch; the wheel size
budget warns; bad values of the two settings are positioned errors."""

import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from conftest import made_once, one_unit_a_group, run_codegen, run_python

pytestmark = pytest.mark.xdist_group("wheels")
TORCH_LIB = Path(__import__("torch").__file__).parent / "lib"


def _make(lib: Path) -> dict:
    """`codegen init`, then its wheel, repaired to manylinux_2_28, with a budget it passes."""
    r = run_codegen("init", str(lib))
    if r.returncode != 0:
        return {"init": [r.returncode, r.stderr]}
    one_unit_a_group(lib)
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", ".", "--no-build-isolation", "--no-deps", "-w", "dist",
                        "-C", "cuda=false", "-C", "optimize=0", "-C", "manylinux=manylinux_2_28",
                        "-C", "wheel-size-budget=0.1MiB"], cwd=lib, capture_output=True, text=True,
                       env=dict(os.environ, PIP_VERBOSE="1"))
    return {"init": [0, ""], "wheel": [r.returncode, r.stdout + r.stderr]}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    root, record = made_once(tmp_path_factory, "wheellib", _make)
    assert record["init"][0] == 0, record["init"][1]
    assert record["wheel"][0] == 0, record["wheel"][1][-5000:]
    wheels = sorted((root / "wheellib" / "dist").glob("*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0], record["wheel"][1]


def auditwheel_show(wheel: Path, **env) -> str:
    r = subprocess.run([sys.executable, "-m", "auditwheel", "show", str(wheel)], capture_output=True, text=True,
                       env=dict(os.environ, **env))
    assert r.returncode == 0, r.stderr
    return " ".join(r.stdout.split())


@pytest.mark.slow(40)
def test_the_repaired_wheel_is_manylinux_2_28_and_grafts_nothing(wheel):
    path, output = wheel
    assert re.fullmatch(r"wheellib-0\.1\.0-cp3\d+-cp3\d+-(manylinux_2_\d+_x86_64\.)*manylinux_2_28_x86_64\.whl", path.name), path.name
    assert "repaired into " + path.name in output
    with zipfile.ZipFile(path) as z:
        names = z.namelist()
        tags = [line for line in z.read("wheellib-0.1.0.dist-info/WHEEL").decode().splitlines() if line.startswith("Tag:")]
    assert any(t.endswith("manylinux_2_28_x86_64") for t in tags), tags
    assert not [n for n in names if ".libs/" in n], names  # torch's, CUDA's and OpenMP's libraries stay out
    # The wheel's own modules need glibc 2.14 at most (no __libc_single_threaded: build.GLIBC_COMPAT) ...
    alone = auditwheel_show(path)
    m = re.search(r'constrains the platform tag to "manylinux_2_(\d+)_x86_64"', alone)
    assert m and int(m.group(1)) <= 28, alone
    assert "GLIBC_2.32" not in alone
    # ... and with torch's libraries found, as they are beside torch, the wheel is manylinux_2_28: torch's own tag
    beside = auditwheel_show(path, LD_LIBRARY_PATH=str(TORCH_LIB))
    assert 'constrains the platform tag to "manylinux_2_28_x86_64"' in beside, beside


@pytest.mark.slow(40)
def test_the_repaired_wheel_loads_beside_torch(wheel, tmp_path):
    path, _ = wheel
    r = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "--target", str(tmp_path), str(path)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    code = "import torch, wheellib; print(wheellib.ops.scale(torch.ones(3, dtype=torch.float64), 2.0).tolist())"
    r = run_python(["-c", code], cwd=tmp_path, env=dict(os.environ, PYTHONPATH=str(tmp_path)))
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[2.0, 2.0, 2.0]"


@pytest.mark.slow(40)
def test_the_size_budget_warns(wheel):
    path, output = wheel
    assert re.search(rf"warning: {re.escape(path.name)} is 0\.\d MiB, over the wheel size budget of 0\.1 MiB", output), output


@pytest.mark.parametrize("line, expected", [
    ('manylinux = "manylinux2014"', "pyproject.toml:5:1: error: [tool.codegen] manylinux must be a manylinux tag such as 'manylinux_2_28'"),
    ('wheel_size_budget = "big"', "pyproject.toml:5:1: error: [tool.codegen] wheel_size_budget must be a size"),
    ("wheel_size_budget = -3", "pyproject.toml:5:1: error: [tool.codegen] wheel_size_budget must be a size"),
])
def test_bad_settings_are_positioned_errors(project, line, expected):
    pyproject = project / "pyproject.toml"
    pyproject.write_text(pyproject.read_text() + "\n" + line + "\n")
    r = run_codegen("generate", cwd=project)
    assert r.returncode == 2, r.stderr
    assert expected in r.stderr, r.stderr
    assert "Traceback" not in r.stderr
