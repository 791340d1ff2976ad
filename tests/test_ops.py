"""Every bundled op against an eager PyTorch reference, for every declared dtype, plus the
errors a bad tensor gets.  Needs the built library (`make build`)."""

import math

import pytest
import torch

import opwrap
from opwrap_codegen.core.config import load_config
from opwrap_codegen.pipeline.passes import generate
from conftest import ROOT

ops = torch.ops.opwrap
DECLS = {d.op_name: d for d in generate(load_config(ROOT)).library.declarations}


def dtypes_of(op):
    return [getattr(torch, d.name) for d in DECLS[op].dtypes]


def tol(dtype):
    return {torch.float16: 1e-2, torch.bfloat16: 2e-2, torch.float32: 1e-5, torch.float64: 1e-12}.get(dtype, 0)


def rand(*shape, dtype=torch.float32):
    if dtype.is_floating_point:
        return torch.randn(*shape, dtype=torch.float64).to(dtype)
    return torch.randint(-100, 100, shape, dtype=dtype)


def test_library_loads_every_declared_op():
    assert set(opwrap.OPS) == set(DECLS)
    for name in DECLS:
        assert hasattr(ops, name.split(".")[0])


@pytest.mark.parametrize("dtype", dtypes_of("myadd"))
@pytest.mark.parametrize("shape", [(7,), (3, 5), (0, 4), (2, 3, 4)])
def test_myadd(dtype, shape):
    a, b = rand(*shape, dtype=dtype), rand(*shape, dtype=dtype)
    torch.testing.assert_close(ops.myadd(a, b), a + b, atol=tol(dtype), rtol=tol(dtype))


def test_myadd_non_contiguous_and_expanded():
    a = torch.randn(4, 6).t()
    b = torch.randn(1, 4).expand(6, 4)
    torch.testing.assert_close(ops.myadd(a, b), a + b)


@pytest.mark.parametrize("dtype", dtypes_of("mul_constant"))
def test_mul_constant(dtype):
    a = rand(33, dtype=dtype)
    torch.testing.assert_close(ops.mul_constant(a, 2.5), a * 2.5, atol=tol(dtype), rtol=tol(dtype))


@pytest.mark.parametrize("dtype", dtypes_of("linear"))
@pytest.mark.parametrize("with_bias", [True, False])
def test_linear(dtype, with_bias):
    x, w = rand(5, 7, dtype=dtype), rand(3, 7, dtype=dtype)
    b = rand(3, dtype=dtype) if with_bias else None
    expected = torch.nn.functional.linear(x.double(), w.double(), b.double() if b is not None else None).to(dtype)
    torch.testing.assert_close(ops.linear(x, w, b), expected, atol=tol(dtype) * 10, rtol=tol(dtype) * 10)


@pytest.mark.parametrize("dtype", dtypes_of("addmv_"))
def test_addmv_in_place(dtype):
    s, m, v = rand(6, dtype=dtype), rand(6, 4, dtype=dtype), rand(4, dtype=dtype)
    expected = torch.addmv(s.double(), m.double(), v.double(), beta=0.5, alpha=2).to(dtype)
    out = ops.addmv_(s, m, v, beta=0.5, alpha=2)
    assert out.data_ptr() == s.data_ptr()
    torch.testing.assert_close(s, expected, atol=tol(dtype) * 10, rtol=tol(dtype) * 10)


def test_addmv_defaults_and_beta_zero_ignores_self():
    m, v = torch.randn(3, 2), torch.randn(2)
    s = torch.ones(3)
    ops.addmv_(s, m, v)
    torch.testing.assert_close(s, 1 + m @ v)
    s = torch.full((3,), math.nan)
    ops.addmv_(s, m, v, beta=0)
    torch.testing.assert_close(s, m @ v)


def test_addmv_non_contiguous_self_is_written_back():
    base = torch.zeros(3, 2)
    s = base[:, 0]
    assert not s.is_contiguous()
    m, v = torch.randn(3, 4), torch.randn(4)
    ops.addmv_(s, m, v, beta=1, alpha=1)
    torch.testing.assert_close(base[:, 0], m @ v)
    assert (base[:, 1] == 0).all()


@pytest.mark.parametrize("size", [[], [0], [5], [2, 3], [2, 3, 4]])
def test_fill_natural(size):
    out = ops.fill_natural(size)
    assert out.dtype == torch.int64 and list(out.shape) == size
    torch.testing.assert_close(out, torch.arange(math.prod(size)).reshape(size))


@pytest.mark.parametrize("call, message", [
    (lambda: ops.myadd(torch.ones(3), torch.ones(4)), "opwrap::myadd: argument 'other' has shape [4], which does not broadcast with 'self'"),
    (lambda: ops.myadd(torch.ones(3, dtype=torch.bool), torch.ones(3, dtype=torch.bool)), "opwrap::myadd: the inputs ('self' Bool, 'other' Bool) compute in dtype Bool, which is not supported; expected one of: float32, float64, float16, bfloat16, int32, int64"),
    (lambda: ops.mul_constant(torch.ones(3, dtype=torch.complex64), 2.0), "opwrap::mul_constant: the inputs ('self' ComplexFloat) compute in dtype ComplexFloat"),
    (lambda: ops.linear(torch.ones(2, 3, 4), torch.ones(5, 4)), "opwrap::linear: argument 'input' must have 2 dimensions [N, K], but got 3"),
    (lambda: ops.linear(torch.ones(2, 3), torch.ones(5, 4)), "opwrap::linear: argument 'weight' has size 4 at dimension 1, but expected K = 3"),
    (lambda: ops.linear(torch.ones(2, 3), torch.ones(5, 3), torch.ones(4)), "opwrap::linear: argument 'bias' has size 4 at dimension 0, but expected M = 5"),
    (lambda: ops.addmv_(torch.ones(3), torch.ones(4, 2), torch.ones(2)), "opwrap::addmv_: argument 'mat' has size 4 at dimension 0, but expected N = 3"),
    (lambda: ops.fill_natural([2, -1]), "opwrap::fill_natural: output 'result' would have negative size -1 at dimension 1"),
    (lambda: ops.fill_natural([2**40, 2**40]), "opwrap::fill_natural: output 'result' of shape [1099511627776, 1099511627776] (from size) has more elements than int64 can count"),
])
def test_bad_tensors_raise_runtime_error_naming_op_and_argument(call, message):
    with pytest.raises(RuntimeError) as e:
        call()
    assert message in str(e.value)


def test_device_mismatch_is_an_error_naming_the_op_and_argument():
    # No GPU here; a meta tensor beside a CPU tensor dispatches to the Meta key, where the
    # generated fake kernel checks devices as the CPU kernel does.
    with pytest.raises(RuntimeError, match="opwrap::myadd: argument 'other' is on meta, but 'self' is on cpu"):
        ops.myadd(torch.ones(3), torch.ones(3, device="meta"))
    out = ops.linear(torch.ones(2, 3, device="meta"), torch.ones(4, 3, device="meta"))
    assert out.device.type == "meta" and out.shape == (2, 4)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int32, torch.int64])
@pytest.mark.parametrize("K", [0, 1, 2, 3, 8, 100, 1023])
def test_bucketize_count_as_torch_on_ties_nan_and_infinities(dtype, K):
    """Values equal to a boundary, repeated boundaries, NaN (past the last boundary, as in
    torch.bucketize) and infinities, in the interleaved and the one-at-a-time searches."""
    g = torch.Generator().manual_seed(K)
    b = (torch.randn(K, generator=g) * 10).sort().values.to(dtype)
    if K > 3:
        b[2] = b[3]
    v = (torch.randn(4099, generator=g) * 12).to(dtype)
    if dtype.is_floating_point:
        v[::97] = math.nan
        v[5], v[6] = math.inf, -math.inf
    v[: min(K, v.numel())] = b[: v.numel()]
    indices, counts = ops.bucketize_count(v, b)
    expected = torch.bucketize(v, b)
    assert torch.equal(indices, expected)
    assert torch.equal(counts, torch.bincount(expected, minlength=K + 1))
