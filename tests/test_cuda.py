"""CUDA kernels.  The registration tests run wherever the loaded library was built with CUDA
(CI's `make cuda-check` builds it, with no GPU, and runs this file on it); the kernel tests
are marked `cuda` and run only on a machine with a GPU, where they compare every op and
dtype with the CPU kernel.  `make gpu-test` runs them there."""

import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from opwrap_codegen.api.kernel import tensor_arguments
import torch

import opwrap
from opwrap_codegen import build, testing
from opwrap_codegen.build import cuda_env
from conftest import ROOT, run_codegen
from test_stable_target import stablelib  # noqa: F401  (the fixture: the stable target's test library)
from references import PREPARE

# The loaded build's ops: every declared one, or those a stable build holds ($OPWRAP_TARGET_BUILD
# makes `import opwrap` load one: runtime/opwrap/__init__.py; scripts/gpu-test's stable half);
# a test of an op it left out skips (needs_op).
BUILT_OPS = set(opwrap.OPS)
DECLS = [d for d in testing.declared_ops(ROOT)
         if "CUDA" in d.devices and d.op_name in BUILT_OPS]  # hand-written or generated
RANDOM = {d.op_name for d in DECLS if any("Generator" in str(a.type) for a in d.schema.arguments)}
ENV, WHY_NOT = cuda_env.detect()
MANIFEST = build.manifest(opwrap.library_path)
BUILT_WITH_CUDA = MANIFEST.get("cuda", False)
STABLE = MANIFEST.get("target") == "stable"
# Where the loaded build's CUDA wrappers were generated (their registrations name them): this
# checkout's generated/cuda, or a stable build's generated/stable/cuda, wherever it was built
# (make gpu-prep builds the one binary on another machine).
CUDA_WRAPPERS = "/generated/stable/cuda" if STABLE else f"{ROOT}/generated/cuda"
needs_cuda_build = pytest.mark.skipif(not BUILT_WITH_CUDA, reason=f"{opwrap.library_path} has no CUDA kernels "
                                      "(make cuda-check builds and tests them)")
needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")


def needs_op(name):
    return pytest.mark.skipif(name not in BUILT_OPS, reason=f"{opwrap.library_path} has no {name} (the stable "
                              "target leaves it out: docs/stable-abi.md)")


def op_of(decl):
    return getattr(getattr(torch.ops.opwrap, decl.name), decl.overload or "default")


def test_every_op_but_factories_declares_cuda():
    for d in testing.declared_ops(ROOT):
        if d.devices:  # class-method ops run the class's C++ method on any device
            assert ("CUDA" in d.devices) == bool(tensor_arguments(d.schema)), d.op_name


@needs_cuda_build
@pytest.mark.parametrize("decl", DECLS, ids=lambda d: d.op_name)
def test_cuda_kernel_is_registered(decl):
    name = f"opwrap::{decl.op_name}"
    assert torch._C._dispatch_has_kernel_for_dispatch_key(name, "CUDA"), name
    dump = torch._C._dispatch_dump(name)
    assert re.search(rf"CUDA: registered at \S*{re.escape(f'{CUDA_WRAPPERS}/{decl.ident}.cu')}:", dump), dump


@needs_cuda_build
def test_cpp_units_of_the_cuda_build_compile_as_in_make_build():
    """The C++ units of a CUDA build compile with a CPU build's options, so ccache serves
    `make cuda-check` the objects of `make build` (build.cpp_units_as_in_a_cpu_build); CUDA's
    include folders go to nvcc alone."""
    cuda_dir = Path(opwrap.library_path).parent
    cpu_ninja, cuda_ninja = ROOT / "build" / "build.ninja", cuda_dir / "build.ninja"
    if cuda_dir == ROOT / "build" or not cpu_ninja.is_file() or STABLE:
        pytest.skip("needs make build's build/ beside the CUDA build (make cuda-check)")

    def flags(path, name):
        return next(line for line in path.read_text().splitlines() if line.startswith(f"{name} = "))

    assert flags(cuda_ninja, "cflags") == flags(cpu_ninja, "cflags")
    assert flags(cuda_ninja, "post_cflags") == flags(cpu_ninja, "post_cflags")
    cflags, cuda_cflags = flags(cuda_ninja, "cflags"), flags(cuda_ninja, "cuda_cflags")
    cuda_include = cuda_env.find_toolkit_root() / "include"
    assert f"-isystem {cuda_include}" in cuda_cflags and str(cuda_include) not in cflags, cuda_cflags


def test_cuda_environment_is_found_without_hard_coded_paths():
    if torch.version.cuda is None:
        pytest.skip("CPU-only torch")
    root = cuda_env.find_toolkit_root()
    assert root is not None and cuda_env.is_toolkit_root(root)
    assert (root / "bin" / "nvcc").is_file() and not cuda_env._is_script(root / "bin" / "nvcc")
    assert any((d / "cusparse.h").is_file() for d in cuda_env.nvidia_include_dirs())


@pytest.mark.cuda
@needs_gpu
@pytest.mark.parametrize("decl, dtype", [pytest.param(d, dt, id=f"{d.op_name}-{dt.name}") for d in DECLS for dt in d.dtypes])
def test_cuda_matches_cpu(decl, dtype):
    if decl.op_name in RANDOM:
        pytest.skip("a random op: the CUDA generator draws other numbers than the CPU's "
                    "(test_cuda_random_op_follows_its_law checks it)")
    for sample in testing.sample_inputs(decl, testing.torch_dtype(dtype), prepare=PREPARE.get(decl.op_name)):
        testing.check_same_as_cpu(decl, op_of(decl), sample, "cuda")



@needs_op("dropout")
@pytest.mark.cuda
@needs_gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.float64])
def test_cuda_dropout_follows_its_law(dtype):
    """dropout on CUDA: no RNG promises the CPU's draws, so its law instead: the mask keeps
    1 - p of the elements (within 5 standard deviations), out = self * mask / (1 - p), the same
    seed (torch.manual_seed, or a given generator's) draws the same mask, and another seed
    another mask."""
    assert "dropout" in RANDOM  # the bundled library's random op; a new one needs a law here too
    n, p = 1 << 20, 0.25
    x = torch.randn(n, device="cuda", dtype=dtype)
    torch.manual_seed(7)
    out, mask = torch.ops.opwrap.dropout(x, p)
    assert mask.dtype == torch.bool and out.dtype == dtype and out.device == x.device
    kept = mask.double().mean().item()
    assert abs(kept - (1 - p)) < 5 * (p * (1 - p) / n) ** 0.5, kept
    torch.testing.assert_close(out, (x.double() * mask / (1 - p)).to(dtype))
    torch.manual_seed(7)
    assert torch.equal(torch.ops.opwrap.dropout(x, p)[1], mask)
    assert not torch.equal(torch.ops.opwrap.dropout(x, p)[1], mask)
    g = torch.Generator(device="cuda").manual_seed(3)
    first = torch.ops.opwrap.dropout(x, p, generator=g)[1]
    assert torch.equal(torch.ops.opwrap.dropout(x, p, generator=torch.Generator(device="cuda").manual_seed(3))[1],
                       first)
    assert torch.ops.opwrap.dropout(x, 0.0)[1].all()


@pytest.mark.cuda
@needs_gpu
@pytest.mark.parametrize("decl", DECLS, ids=lambda d: d.op_name)
def test_cuda_opcheck_and_gradients(decl):
    dtype = torch.float64 if any(dt.name == "float64" for dt in decl.dtypes) else testing.torch_dtype(decl.dtypes[0])
    for sample in testing.sample_inputs(decl, dtype, prepare=PREPARE.get(decl.op_name), device="cuda"):
        testing.check_opcheck(op_of(decl), sample)
    # gradcheck where every floating dtype variable is float64 (to_dtype's result too: a
    # rounding cast has no numerical Jacobian to compare)
    combo = next((c for c in testing.dtype_combinations(decl) if testing.for_gradients(decl, c)), None)
    if combo is not None and testing.differentiable_inputs(decl):
        primary = testing.torch_dtype(combo[decl.variables[0].name])  # float64, or indices beside float64 weights
        for sample in testing.sample_inputs(decl, primary, requires_grad=True, prepare=PREPARE.get(decl.op_name),
                                            device="cuda", dtypes=combo):
            testing.check_gradients(decl, op_of(decl), sample)


@needs_op("myadd")
@pytest.mark.cuda
@needs_gpu
def test_wrong_and_mixed_devices_are_clear_errors():
    x = torch.randn(3, device="cuda")
    with pytest.raises(RuntimeError, match=r"opwrap::myadd: argument 'other' is on cpu, but this kernel expects"):
        torch.ops.opwrap.myadd(x, torch.randn(3))
    if torch.cuda.device_count() > 1:
        with pytest.raises(RuntimeError, match=r"argument 'other' is on cuda:1, but 'self' is on cuda:0"):
            torch.ops.opwrap.myadd(x, torch.randn(3, device="cuda:1"))


@needs_op("mul_constant")
@pytest.mark.cuda
@needs_gpu
def test_kernels_run_on_the_inputs_device_and_current_stream():
    x = torch.randn(1 << 16, device="cuda")
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        y = torch.ops.opwrap.mul_constant(x, 2.0)
    s.synchronize()
    torch.testing.assert_close(y, x * 2)


ROWWISE = [d for d in DECLS if d.rows is not None and d.rows.owner == d.ident]
# Rows x columns that take each path of the generated row-wise CUDA kernels
# (opwrap/runtime/rowwise.cuh, row_layout): the build for rows the threads' registers hold
# (groups of 1 to 32 lanes, with groups past the last row, spread over more lanes where few rows
# leave the GPU idle: 3x8, 37x128; a block: 300x1000); the build for any row: a block with the
# rest of the row in shared memory (257x4097), on sm_90 clusters: few long rows spread over
# several blocks (4x16384, 3x65536; 2x131072 with shared memory), a row one block cannot hold
# (300x65536 float32), and rows no cluster holds, read again from global memory (2x524288);
# 16-byte runs and single elements (an odd length; a misaligned start).
ROW_SHAPES = [(3, 8), (37, 128), (300, 1000), (5, 1001), (257, 4097), (4, 16384), (3, 65536), (2, 131072),
              (300, 65536), (2, 1 << 19)]


@pytest.mark.cuda
@needs_gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("decl", ROWWISE, ids=lambda d: d.op_name)
def test_cuda_rowwise_layouts_match_cpu(decl, dtype):
    op, rows = op_of(decl), decl.rows
    tol = dict(atol=1e-3, rtol=1e-3) if dtype == torch.float32 else dict(atol=2e-2, rtol=2e-2)
    g = torch.Generator().manual_seed(0)
    for (R, D), misaligned in [(s, False) for s in ROW_SHAPES] + [((64, 1024), True)]:
        def make(*shape):
            """The tensor on the CPU and on the GPU; `misaligned`: starting an element past the
            16-byte boundary there."""
            flat = torch.randn(math.prod(shape) + misaligned, generator=g).to(dtype)
            return flat[misaligned:].view(shape), flat.cuda()[misaligned:].view(shape)
        pairs = [make(R, D) if a.name in rows.row_tensors else make(D) if a.name in rows.column_tensors else make(R)
                 for a in decl.schema.arguments if a.name in rows.row_tensors + rows.column_tensors + rows.per_row_tensors]
        want, got = op(*(c for c, _ in pairs)), op(*(d for _, d in pairs))
        for i, (w, o) in enumerate(zip(testing._flat(want), testing._flat(got))):
            torch.testing.assert_close(o.cpu(), w, **tol, equal_nan=True,
                                       msg=lambda m: f"{decl.op_name} {dtype} {R}x{D} misaligned={misaligned} "
                                                     f"return {i}: {m}")


# The hand-written CUDA kernels (runtime/kernels/) on the paths the declared samples do not
# reach: several tiles and more than one launch's pieces (cat_rows), unaligned views and tails
# (the 16-byte paths' fallbacks), broadcast and transposed inputs, the multi-pass and
# unaligned embedding loops, the global-memory fallback of bucketize_count, NaN and signed
# zeros in dedup_consecutive; each against its CPU kernel.
OPS = torch.ops.opwrap


def _same(got, want, **tol):
    torch.testing.assert_close(got.cpu(), want, equal_nan=True, **tol)


@needs_op("cat_rows")
@pytest.mark.cuda
@needs_gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64], ids=str)
def test_cuda_cat_and_chunk_rows_edges(dtype):
    g = torch.Generator().manual_seed(0)
    for D in (4096, 3, 1000):
        ts = [torch.randn(r, D, generator=g).to(dtype) for r in [512, 1, 0, 7, 33] * 9]  # 45 pieces: two launches
        ts[3] = torch.randn(D, 7, generator=g).to(dtype).t()  # not contiguous
        _same(OPS.cat_rows([t.cuda() for t in ts]), torch.cat(ts, 0))
    x = torch.randn(1024, 1000, generator=g).to(dtype)
    for a, b in zip(OPS.chunk_rows(x.cuda(), 8), torch.chunk(x, 8)):
        _same(a, b)


@needs_op("to_dtype")
@pytest.mark.cuda
@needs_gpu
def test_cuda_to_dtype_edges():
    dtypes = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int32, torch.int64]
    base = torch.randn((1 << 20) + 5, generator=torch.Generator().manual_seed(0)) * 1000
    for a in dtypes:
        for b in dtypes:
            x = base.to(a)
            for v in (x, x[1:]):  # a tail; an unaligned start
                _same(OPS.to_dtype(v.cuda(), b), OPS.to_dtype(v, b), rtol=0, atol=0)


@needs_op("huber")
@pytest.mark.cuda
@needs_gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_cuda_huber_edges(dtype):
    g = torch.Generator().manual_seed(0)
    x, y = (torch.randn((1 << 20) + 5, generator=g, dtype=dtype) for _ in range(2))
    _same(OPS.huber(x.cuda(), y.cuda(), 0.75), OPS.huber(x, y, 0.75))
    _same(OPS.huber(x.cuda()[1:], y.cuda()[1:], 0.75), OPS.huber(x[1:], y[1:], 0.75))  # unaligned
    m, r = torch.randn(300, 200, generator=g, dtype=dtype), torch.randn(200, generator=g, dtype=dtype)
    _same(OPS.huber(m.cuda(), r.cuda().expand(300, 200), 1.0), OPS.huber(m, r.expand(300, 200), 1.0))
    _same(OPS.huber(m.cuda().t(), m.cuda().t() * 0.5, 1.0), OPS.huber(m.t(), m.t() * 0.5, 1.0))


@needs_op("dedup_consecutive")
@pytest.mark.cuda
@needs_gpu
def test_cuda_dedup_consecutive_edges():
    g = torch.Generator().manual_seed(0)
    for dtype in (torch.float32, torch.float64, torch.int32, torch.int64):
        x = torch.randint(0, 4, (1 << 24,), generator=g).to(dtype)
        _same(OPS.dedup_consecutive(x.cuda()), OPS.dedup_consecutive(x))
    x = torch.tensor([float("nan"), float("nan"), 0.0, -0.0, 1.0, 1.0, float("nan")])
    got, want = OPS.dedup_consecutive(x.cuda()), OPS.dedup_consecutive(x)
    _same(got, want)
    _same(torch.signbit(got), torch.signbit(want))


@needs_op("bucketize_count")
@pytest.mark.cuda
@needs_gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int32, torch.int64], ids=str)
def test_cuda_bucketize_count_edges(dtype):
    g = torch.Generator().manual_seed(0)
    v = (torch.randn((1 << 22) + 3, generator=g) * 100).to(dtype)
    for k in (1023, 0, 1, 20000):  # 20000 boundaries: past the shared-memory kernel
        b = (torch.randn(k, generator=g) * 100).to(dtype).sort().values
        for vv in (v, v[1:]):
            for got, want in zip(OPS.bucketize_count(vv.cuda(), b.cuda()), OPS.bucketize_count(vv, b)):
                _same(got, want, rtol=0, atol=0)
    if dtype.is_floating_point:
        v = torch.tensor([float("nan"), 0.0, 1.0, -1.0, 5.0], dtype=dtype)
        b = torch.tensor([-1.0, 0.0, 1.0], dtype=dtype)
        for got, want in zip(OPS.bucketize_count(v.cuda(), b.cuda()), OPS.bucketize_count(v, b)):
            _same(got, want, rtol=0, atol=0)


@needs_op("embedding_bag_sum")
@pytest.mark.cuda
@needs_gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.float64], ids=str)
@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64], ids=str)
def test_cuda_embedding_bag_edges(dtype, index_dtype):
    g = torch.Generator().manual_seed(0)
    tol = dict(rtol=2e-2, atol=2e-2) if dtype in (torch.bfloat16, torch.float16) else {}
    for D in (128, 3, 520, 8):
        V, N, B = 5000, 20000, 300
        w = torch.randn(V, D, generator=g).to(dtype)
        idx = torch.randint(0, V, (N,), generator=g).to(index_dtype)
        off = torch.randint(0, N, (B,), generator=g).sort().values.to(index_dtype)
        off[0] = 0
        off[5] = off[4]  # an empty bag
        _same(OPS.embedding_bag_sum(w.cuda(), idx.cuda(), off.cuda()), OPS.embedding_bag_sum(w, idx, off), **tol)
        gr = torch.randn(B, D, generator=g).to(dtype)
        _same(OPS.embedding_bag_sum_backward(gr.cuda(), idx.cuda(), off.cuda(), V),
              OPS.embedding_bag_sum_backward(gr, idx, off, V), **tol)


# The stable target's CUDA C++ kernel (docs/stable-abi.md): stablelib's `scale` (tests/
# test_stable_target.py) built with --cuda beside its CPU build, loaded into a fresh python.
STABLE_PROBE = """\
import sys, torch
torch.ops.load_library(sys.argv[1])
name = "stablelib::scale"
assert torch._C._dispatch_has_kernel_for_dispatch_key(name, "CUDA"), torch._C._dispatch_dump(name)
assert "CUDA: registered at " + sys.argv[2] in torch._C._dispatch_dump(name), torch._C._dispatch_dump(name)
for generated in ("gelu_fast", "axpby", "row_softmax", "row_rms_norm"):  # generated pointwise and row-wise kernels
    assert torch._C._dispatch_has_kernel_for_dispatch_key(f"stablelib::{generated}", "CUDA"), generated
if torch.cuda.is_available():  # where a GPU is: values against torch, on a side stream too
    for dtype in (torch.float32, torch.float64):
        x = torch.randn(1000, 3, dtype=dtype, device="cuda")
        torch.testing.assert_close(torch.ops.stablelib.scale(x.t(), 2.5), x.t() * 2.5)
        with torch.cuda.stream(torch.cuda.Stream()):
            torch.testing.assert_close(torch.ops.stablelib.scale(x, -1.0), -x)
        torch.testing.assert_close(torch.ops.stablelib.row_softmax(x.t()), torch.softmax(x.t(), -1))
        w = torch.randn(1000, dtype=dtype, device="cuda")
        torch.testing.assert_close(torch.ops.stablelib.row_rms_norm(x.t(), w, 1e-6)[0],
                                   torch.rms_norm(x.t(), (1000,), w, 1e-6))
        torch.testing.assert_close(torch.ops.stablelib.gelu_fast(x),
                                   torch.nn.functional.gelu(x, approximate="tanh"))
print("ok")
"""


@needs_cuda_build
@pytest.mark.slow(30)
def test_stable_cuda_cpp_kernel_compiles_links_and_registers(stablelib):
    _, _, lib = stablelib
    env = {"TORCH_CUDA_ARCH_LIST": os.environ.get("TORCH_CUDA_ARCH_LIST", "9.0")}
    r = run_codegen("build", "--cuda", "-O0", "--build-dir", "build-cuda", cwd=lib, env=env)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    assert "stable ABI check: _C.so needs no torch symbol outside the stable C shim" in out, out
    so, wrapper = lib / "build-cuda" / "_C.so", lib / "generated" / "stable" / "cuda" / "scale.cu"
    r = subprocess.run([sys.executable, "-c", STABLE_PROBE, str(so), str(wrapper)], capture_output=True, text=True)
    assert r.returncode == 0 and "ok" in r.stdout, r.stdout + r.stderr
