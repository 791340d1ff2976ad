"""Generated pointwise CPU loops over short rows of an operand broadcast over them (a bias
[C] against x [R, C]): opwrap::pw::BroadcastRows runs several rows at once with the
broadcast row tiled (runtime/include/opwrap/runtime/pointwise.h).  Every row length around
the vector widths, every floating dtype, the layouts that take that path and those that
must not, 1 and 2 threads (a thread's range starts and ends inside a row)."""

import os
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

import opwrap
from conftest import ROOT

COLUMNS = (1, 3, 8, 15, 16, 17, 24, 33, 64, 100, 300, 1023, 1100)


def gelu_ref(x, b, dtype):
    """bias_gelu's reference: computed in double, rounded once (the op does not round x + b)."""
    return F.gelu(x.double() + b.double(), approximate="tanh").to(dtype)


def tol(dtype):
    return dict(atol=1e-2, rtol=1e-2) if dtype in (torch.bfloat16, torch.float16) else {}


@pytest.fixture(params=[1, 2])
def threads(request):
    old = torch.get_num_threads()
    torch.set_num_threads(request.param)
    yield request.param
    torch.set_num_threads(old)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
def test_bias_over_short_rows(dtype, threads):
    g = torch.Generator().manual_seed(0)
    for c in COLUMNS:
        rows = max(3, 40000 // c) + 7  # more rows than one tile holds, and a rest
        x = torch.randn(rows, c, generator=g, dtype=torch.float64).to(dtype)
        b = torch.randn(c, generator=g, dtype=torch.float64).to(dtype)
        torch.testing.assert_close(opwrap.ops.bias_gelu(x, b), gelu_ref(x, b, dtype), **tol(dtype), msg=f"C={c}")
        torch.testing.assert_close(opwrap.ops.myadd(x, b), x + b, msg=f"C={c}")
        torch.testing.assert_close(opwrap.ops.myadd(b, x), b + x, msg=f"C={c}")


@pytest.mark.parametrize("case", ["strided_bias", "batched", "bias_2d", "column_bias", "expanded_input",
                                  "sliced_input", "transposed_input", "scalar_tensor"])
def test_layouts(case, threads):
    g = torch.Generator().manual_seed(1)
    r = lambda *s: torch.randn(*s, generator=g)
    x, b = {
        "strided_bias": (r(5000, 16), r(32)[::2]),           # the broadcast row is strided: copied into the tile
        "batched": (r(50, 100, 8), r(8)),                    # [B, T, C] + [C]: B and T coalesce into rows
        "bias_2d": (r(5000, 16), r(1, 16)),
        "column_bias": (r(5000, 16), r(5000, 1)),            # broadcast along the inner dimension: aten's loop
        "expanded_input": (r(16).expand(5000, 16), r(5000, 16)),
        "sliced_input": (r(5000, 32)[:, 3:19], r(16)),       # rows not back to back: aten's loop
        "transposed_input": (r(16, 5000).t(), r(16)),
        "scalar_tensor": (r(5000, 16), torch.tensor(0.5)),
    }[case]
    torch.testing.assert_close(opwrap.ops.bias_gelu(x, b), gelu_ref(x, b, torch.float32))
    torch.testing.assert_close(opwrap.ops.myadd(x, b), x + b)


def test_out_overload_and_several_outputs(threads):
    g = torch.Generator().manual_seed(2)
    x, b = torch.randn(4099, 24, generator=g), torch.randn(24, generator=g)
    out = torch.empty(4099, 24, dtype=torch.float64)  # cast from the float computation by the iterator
    torch.ops.opwrap.myadd.out(x, b, out=out)
    torch.testing.assert_close(out, (x + b).double())
    e = b.expand(4099, 24)  # one input, broadcast over the rows: sincos's loop of two outputs
    s, c = opwrap.ops.sincos(e)
    torch.testing.assert_close((s, c), (e.sin(), e.cos()))
    torch.testing.assert_close(opwrap.ops.gelu_tanh_backward(x, b), torch.ops.aten.gelu_backward(
        x, b.expand_as(x), approximate="tanh"))


_CAPABILITY_CHECK = """
import torch, torch.nn.functional as F, opwrap
for dtype in (torch.float32, torch.float64, torch.bfloat16):
    for c in (3, 8, 16, 24, 100):
        x = torch.randn(20000 // c + 5, c, dtype=torch.float64).to(dtype)
        b = torch.randn(c, dtype=torch.float64).to(dtype)
        tol = {} if dtype != torch.bfloat16 else dict(atol=1e-2, rtol=1e-2)
        want = F.gelu(x.double() + b.double(), approximate="tanh").to(dtype)
        torch.testing.assert_close(opwrap.ops.bias_gelu(x, b), want, **tol)
        s, co = opwrap.ops.sincos(b.expand_as(x))
        torch.testing.assert_close((s, co), (b.expand_as(x).sin(), b.expand_as(x).cos()), **tol)
"""


@pytest.mark.slow(3)
@pytest.mark.parametrize("capability", ["default", "avx2"])
def test_other_cpu_capabilities(capability):
    """The tile and run lengths depend on the vector width: the DEFAULT and AVX2 builds too
    (the machine's own, AVX-512 here, runs in the tests above)."""
    if capability == "avx2" and torch.backends.cpu.get_cpu_capability() not in ("AVX2", "AVX512"):
        pytest.skip("needs an x86-64 CPU with AVX2")
    env = dict(os.environ, ATEN_CPU_CAPABILITY=capability)
    r = subprocess.run([sys.executable, "-c", _CAPABILITY_CHECK], env=env, cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]


# ------------------------------------------------------------------------------ CUDA
# The generated CUDA kernels run this layout with their own loop (16-byte vectors, the
# broadcast inputs by column: runtime/include/opwrap/runtime/pointwise_cuda.cuh) and every
# other with aten's gpu_kernel.  On a machine with a GPU: each against the CPU kernel.
needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")


@pytest.mark.cuda
@needs_gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
def test_cuda_bias_over_rows_matches_cpu(dtype):
    g = torch.Generator().manual_seed(3)
    for c in COLUMNS + (4096,):
        for rows in (1, 7, 4099):
            x = torch.randn(rows, c, generator=g, dtype=torch.float64).to(dtype)
            for b in (torch.randn(c, generator=g, dtype=torch.float64).to(dtype),
                      torch.randn(2 * c, generator=g, dtype=torch.float64).to(dtype)[::2],  # strided bias
                      torch.randn(c + 1, generator=g, dtype=torch.float64).to(dtype)[1:]):  # misaligned bias
                for args in ((x, b), (b, x)):
                    dev = [t.cuda() for t in args]
                    torch.testing.assert_close(opwrap.ops.myadd(*dev).cpu(), opwrap.ops.myadd(*args), msg=f"C={c}")
                torch.testing.assert_close(opwrap.ops.bias_gelu(x.cuda(), b.cuda()).cpu(), opwrap.ops.bias_gelu(x, b),
                                           **tol(dtype), msg=f"C={c}")
            s, co = opwrap.ops.sincos(b.cuda().expand(rows, c))
            torch.testing.assert_close((s.cpu(), co.cpu()), opwrap.ops.sincos(b.expand(rows, c)), **tol(dtype))
    x, b = torch.randn(64, 3, 16, dtype=torch.float64).to(dtype), torch.randn(16, dtype=torch.float64).to(dtype)
    out = torch.empty(64, 3, 16, dtype=torch.float64, device="cuda")  # another dtype: aten's loop casts
    torch.ops.opwrap.myadd.out(x.cuda(), b.cuda(), out=out)
    torch.testing.assert_close(out.cpu(), opwrap.ops.myadd(x, b).double())
    sliced = torch.randn(100, 33, dtype=torch.float64).to(dtype)[:, 1:17]  # not flat: aten's loop
    torch.testing.assert_close(opwrap.ops.bias_gelu(sliced.cuda(), b.cuda()).cpu(), opwrap.ops.bias_gelu(sliced, b),
                               **tol(dtype))
