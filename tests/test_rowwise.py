"""Row-wise programs (`rowwise:`) and pointwise expressions with several outputs, in a
`codegen init` library declared from the README (conftest's `sharedlib`, which holds the ops
of several test files): rows of one and of two dimensions, column and per-row tensors, every
reduction, reduced types, NaN and empty rows, derivatives, an out= overload, opcheck,
torch.compile and export.  The bundled row-wise ops (softmax, log_softmax, logsumexp,
layer_norm, rms_norm) are tested against aten at the end."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch.library import opcheck

import opwrap
from conftest import import_library

pytestmark = pytest.mark.xdist_group("sharedlib")  # one worker builds it; the others go on meanwhile

DECLARATIONS = """\
- func: pair(Tensor a, Tensor b) -> (Tensor total, Tensor product)
  doc: a + b and a * b, in one pass.
  dtypes: [float32, float64, bfloat16, int64]
  pointwise: a + b, a * b
  derivatives:
    a: grad_total + grad_product * b
    b: grad_total + grad_product * a

- func: plane_norm(Tensor x, Tensor scale, float eps=0.0) -> (Tensor y, Tensor sumsq)
  doc: each [H, D] plane of x divided by its root-sum-square, times scale.
  dtypes: [float32, float64, bfloat16]
  shape:
    x: ["*B", H, D]
    scale: [H, D]
    y: x.shape
    sumsq: ["*B"]
  rowwise: |
    sumsq = sum(x * x)
    x * scale * rsqrt(sumsq + eps), sumsq

- func: center(Tensor x, Tensor offset) -> Tensor
  doc: each row minus its mean, plus its own offset.
  dtypes: [float32, float64]
  shape:
    x: ["*B", D]
    offset: ["*B"]
    result: x.shape
  rowwise: x - mean(x) + offset
  derivatives:
    x: grad - grad.mean(-1, true)
    offset: grad.sum(-1)

- func: center.out(Tensor x, Tensor offset, *, Tensor(a!) out) -> Tensor(a!)
  doc: center, written into out.

- func: extremes(Tensor x) -> (Tensor hi, Tensor lo, Tensor span)
  doc: the largest and smallest value of each row and their difference.
  dtypes: [float32, float16]
  shape:
    x: ["*B", D]
    hi: ["*B"]
    lo: ["*B"]
    span: ["*B"]
  rowwise: |
    hi = max(x)
    lo = min(x)
    hi, lo, hi - lo

- func: any_names_rows(Tensor default, Tensor new, Tensor D, float rows=1.0, float opwrap_n=0.0, int i=1, float lambda=0.0) -> (Tensor start, Tensor prog)
  doc: any argument, binding and return names (keywords, the row-wise kernels' own names).
  dtypes: [float32, float64, bfloat16]
  shape:
    default: ["*B", K]
    new: [K]
    D: ["*B"]
    start: default.shape
    prog: ["*B"]
  rowwise: |
    this = mean(default * new)
    opwrap_r0 = default - this
    int = exp(opwrap_r0)
    s = sum(int)
    int / s * rows + D + opwrap_n * i + lambda, s + D
"""


def add_to_sharedlib(lib: Path) -> None:
    """conftest's `sharedlib` holds the row-wise ops above (its build compiles them once with
    the other test files' ops, then builds again to show the second build compiles nothing)."""
    (lib / "declarations" / "rowwise.yaml").write_text(DECLARATIONS)


@pytest.fixture(scope="module")
def rowlib(sharedlib):
    made = sharedlib.record
    assert made["init"][0] == 0, made["init"][1]
    assert made["build"][0] == 0, made["build"][1][-5000:]
    return import_library(sharedlib.path), made, sharedlib.path


@pytest.fixture(scope="module")
def ops(rowlib):
    return rowlib[0].ops


@pytest.mark.slow(120)
def test_generated_files_and_a_noop_rebuild(rowlib):
    _, made, lib = rowlib
    gen = lib / "generated"
    for name in ("plane_norm", "center", "extremes"):
        assert (gen / "rowwise" / f"{name}_program.h").is_file()
        for cap in ("", ".AVX2", ".AVX512"):
            assert (gen / "cpu" / f"{name}.rowwise{cap}.cpp").is_file()
        cuh = (gen / "rowwise" / f"{name}.cuh").read_text()  # the CUDA kernel: the row read once, reduced per group
        assert "RowSweep" in cuh and "sweep.template reduce<" in cuh, cuh
    assert not (gen / "rowwise" / "center_out_program.h").exists(), "an out= overload runs its functional op's loops"
    assert made["noop"][0] == 0 and "compiled" not in made["noop"][1], made["noop"][1]


@pytest.mark.slow(120)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.int64])
def test_two_outputs_of_one_expression(ops, dtype):
    a = (torch.randn(4, 1, 5) * 10).to(dtype)
    b = (torch.randn(3, 5) * 10).to(dtype)
    total, product = ops.pair(a, b)
    torch.testing.assert_close(total, a + b)
    torch.testing.assert_close(product, a * b)
    at = a.expand(4, 3, 5).transpose(0, 2)  # strided: the outputs are laid out as aten lays a + b
    total, product = ops.pair(at, b.t().unsqueeze(-1))
    want = at + b.t().unsqueeze(-1)
    assert total.stride() == want.stride() and product.stride() == want.stride()
    torch.testing.assert_close(total, want)
    opcheck(torch.ops.sharedlib.pair.default, (a, b))


@pytest.mark.slow(120)
def test_two_outputs_gradients_and_promotion(ops):
    a = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    b = torch.randn(4, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda a, b: ops.pair(a, b), (a, b))
    total, product = ops.pair(torch.ones(3, dtype=torch.int64), torch.ones(3, dtype=torch.float32))
    assert total.dtype == product.dtype == torch.float32


@pytest.mark.slow(120)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("shape", [(2, 3, 4, 5), (4, 5), (0, 4, 5), (7, 3, 67)])
def test_rows_of_two_dimensions(ops, dtype, shape):
    x = torch.randn(shape, dtype=torch.float64).to(dtype)
    scale = torch.randn(shape[-2:], dtype=torch.float64).to(dtype)
    y, sumsq = ops.plane_norm(x, scale, 1e-3)
    xd = x.double()
    want_sumsq = xd.pow(2).sum((-2, -1))
    tol = {} if dtype != torch.bfloat16 else dict(atol=2e-2, rtol=2e-2)
    torch.testing.assert_close(sumsq, want_sumsq.to(dtype), **tol)
    torch.testing.assert_close(y, (xd * scale.double() * torch.rsqrt(want_sumsq + 1e-3)[..., None, None]).to(dtype),
                               **tol)
    assert sumsq.shape == shape[:-2]
    if dtype == torch.float32:
        opcheck(torch.ops.sharedlib.plane_norm.default, (x, scale, 1e-3))


@pytest.mark.slow(120)
def test_shape_errors_name_the_op_and_argument(ops):
    with pytest.raises(RuntimeError, match=r"sharedlib::plane_norm.*'scale'"):
        ops.plane_norm(torch.randn(2, 3, 4), torch.randn(4, 3))
    with pytest.raises(RuntimeError, match=r"sharedlib::center.*'offset'"):
        ops.center(torch.randn(2, 3), torch.randn(3))
    with pytest.raises(RuntimeError, match=r"sharedlib::center.*'x'"):
        ops.center(torch.randn(2, 3).to(torch.bfloat16), torch.randn(2).to(torch.bfloat16))


@pytest.mark.slow(120)
@pytest.mark.parametrize("threads", [1, 2])
def test_per_row_inputs_many_rows_in_parallel(ops, threads):
    old = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        x, offset = torch.randn(3000, 257), torch.randn(3000)
        torch.testing.assert_close(ops.center(x, offset), x - x.mean(-1, keepdim=True) + offset[:, None])
        xt = torch.randn(257, 40).t()  # not contiguous: the wrapper makes it so
        torch.testing.assert_close(ops.center(xt, offset[:40]), xt - xt.mean(-1, keepdim=True) + offset[:40, None])
    finally:
        torch.set_num_threads(old)


@pytest.mark.slow(120)
def test_derivatives_out_overload_opcheck_compile_export(ops):
    x = torch.randn(5, 7, dtype=torch.float64, requires_grad=True)
    off = torch.randn(5, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(ops.center, (x, off))
    out = torch.empty(0)
    x32, off32 = torch.randn(5, 7), torch.randn(5)
    result = torch.ops.sharedlib.center.out(x32, off32, out=out)
    assert result is out and out.shape == (5, 7)
    torch.testing.assert_close(out, ops.center(x32, off32))
    opcheck(torch.ops.sharedlib.center.default, (x32, off32))
    opcheck(torch.ops.sharedlib.center.out, (x32, off32), {"out": torch.empty(5, 7)})

    from torch._dynamo.testing import CompileCounterWithBackend
    counter = CompileCounterWithBackend("inductor")
    f = lambda x, o: ops.center(x, o).relu() + ops.extremes(x)[2][:, None]  # noqa: E731
    torch.testing.assert_close(torch.compile(f, backend=counter, fullgraph=True, dynamic=True)(x32, off32), f(x32, off32))
    assert counter.frame_count == 1

    class M(torch.nn.Module):
        def forward(self, x, o):
            return f(x, o)

    ep = torch.export.export(M(), (x32, off32))
    torch.testing.assert_close(ep.module()(x32, off32), f(x32, off32))


def _per_sample(fn, in_dims, *args):
    size = next(a.size(d) for a, d in zip(args, in_dims) if d is not None)
    outs = [fn(*[a if d is None else a.select(d, i) for a, d in zip(args, in_dims)]) for i in range(size)]
    return tuple(torch.stack(o) for o in zip(*outs)) if isinstance(outs[0], tuple) else torch.stack(outs)


@pytest.mark.slow(120)
def test_vmap_rules_generated_from_the_shape_rule(ops, rowlib):
    """A `codegen init` library's row-wise ops get batching rules from their declarations:
    the batch is one more leading row dimension of row and per-row tensors (one call); a
    batched column runs one call per sample.  Each is compared with a loop over the samples."""
    vmap_py = (rowlib[2] / "generated" / "python" / "vmap.py").read_text()
    assert "# sharedlib::plane_norm: row-wise, one call with the batch in the rows of x; one call per sample " \
           "where scale is batched" in vmap_py, vmap_py
    assert "_runtime.rowwise_rule(torch.ops.sharedlib.center.default, ('rows', 'rows'), 1)" in vmap_py, vmap_py
    f64 = torch.float64
    x, scale = torch.randn(3, 2, 4, 5, dtype=f64), torch.randn(3, 4, 5, dtype=f64)
    plane = lambda a, s: ops.plane_norm(a, s, 1e-3)  # noqa: E731
    for in_dims in [(0, None), (1, None), (None, 0), (2, 0)]:
        args = (x if in_dims[0] is not None else x[0], scale if in_dims[1] is not None else scale[0])
        if in_dims[0] == 1:
            args = (x.transpose(0, 1).contiguous(), args[1])
        if in_dims[0] == 2:
            args = (x.permute(1, 2, 0, 3).contiguous(), args[1])
        torch.testing.assert_close(torch.vmap(plane, in_dims=in_dims)(*args), _per_sample(plane, in_dims, *args))
    xs, off = torch.randn(4, 3, 6, dtype=f64), torch.randn(3, 4, dtype=f64)
    for in_dims in [(0, None), (None, 1), (0, 1)]:
        args = (xs if in_dims[0] is not None else xs[0], off if in_dims[1] is not None else off[:, 0])
        torch.testing.assert_close(torch.vmap(ops.center, in_dims=in_dims)(*args), _per_sample(ops.center, in_dims, *args))
    out = torch.empty(4, 3, 6, dtype=f64)  # the out= overload, through center's rule
    torch.vmap(lambda a, o, buf: torch.ops.sharedlib.center.out(a, o, out=buf), in_dims=(0, 1, 0))(xs, off, out)
    torch.testing.assert_close(out, _per_sample(ops.center, (0, 1), xs, off))
    e = torch.randn(2, 3, 7)
    torch.testing.assert_close(torch.vmap(ops.extremes, in_dims=1)(e), _per_sample(ops.extremes, (1,), e))


@pytest.mark.slow(120)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_max_min_propagate_nan_and_empty_rows(ops, dtype):
    x = torch.tensor([[1.0, 5.0, -2.0], [float("nan"), 1.0, 2.0], [3.0, float("inf"), -float("inf")]], dtype=dtype)
    hi, lo, span = ops.extremes(x)
    torch.testing.assert_close(hi, x.amax(-1), equal_nan=True)
    torch.testing.assert_close(lo, x.amin(-1), equal_nan=True)
    torch.testing.assert_close(span, x.amax(-1) - x.amin(-1), equal_nan=True)
    wide = torch.randn(6, 1000, dtype=dtype)
    wide[2, 517] = float("nan")  # in the vectorized part of the row
    hi, lo, _ = ops.extremes(wide)
    torch.testing.assert_close(hi, wide.amax(-1), equal_nan=True)
    torch.testing.assert_close(lo, wide.amin(-1), equal_nan=True)
    hi, lo, _ = ops.extremes(torch.empty(2, 0, dtype=dtype))  # the identities, as a fold over nothing
    assert torch.isneginf(hi).all() and torch.isposinf(lo).all()


# ------------------------------------------------------------------ the bundled row-wise ops

@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("shape", [(4, 4099), (2, 3, 64), (9,), (3, 1)])
def test_bundled_rowwise_ops_match_aten(dtype, shape):
    x = torch.randn(shape, dtype=torch.float64).to(dtype)
    w = torch.randn(shape[-1], dtype=torch.float64).to(dtype)
    b = torch.randn(shape[-1], dtype=torch.float64).to(dtype)
    tol = {} if dtype in (torch.float32, torch.float64) else dict(atol=1e-2, rtol=1e-2)
    xd, wd, bd = x.double(), w.double(), b.double()
    ops = opwrap.ops
    torch.testing.assert_close(ops.softmax(x), xd.softmax(-1).to(dtype), **tol)
    torch.testing.assert_close(ops.log_softmax(x), xd.log_softmax(-1).to(dtype), **tol)
    torch.testing.assert_close(ops.logsumexp(x), xd.logsumexp(-1).to(dtype), **tol)
    out, mean, rstd = ops.layer_norm(x, w, b, 1e-5)
    torch.testing.assert_close(out, F.layer_norm(xd, shape[-1:], wd, bd, 1e-5).to(dtype), **tol)
    torch.testing.assert_close(mean, xd.mean(-1).to(dtype), **tol)
    torch.testing.assert_close(rstd, torch.rsqrt(xd.var(-1, unbiased=False) + 1e-5).to(dtype), **tol)
    out, rstd = ops.rms_norm(x, w, 1e-6)
    torch.testing.assert_close(out, F.rms_norm(xd, shape[-1:], wd, 1e-6).to(dtype), **tol)


def test_softmax_family_special_values_as_aten():
    x = torch.tensor([[-float("inf")] * 3, [float("inf"), 1.0, 2.0], [float("nan"), 1.0, 2.0], [1e30, -1e30, 0.0]])
    torch.testing.assert_close(opwrap.ops.logsumexp(x), torch.logsumexp(x, -1), equal_nan=True)
    torch.testing.assert_close(opwrap.ops.softmax(x), torch.softmax(x, -1), equal_nan=True)
    torch.testing.assert_close(opwrap.ops.log_softmax(x[3:]), torch.log_softmax(x[3:], -1))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_softmax_family_special_values_in_the_vectorized_loops(dtype):
    """inf, -inf and NaN inside the rows' vectors, not only their scalar rest: exp(inf - inf)
    is NaN there too (at::vec's exp_u20 gives inf for NaN, and softmax of a row holding inf was
    0 with one NaN where torch's is NaN throughout)."""
    for d in (40, 1100):
        x = torch.randn(6, d, dtype=dtype)
        x[0, 5] = x[3, d - 20] = float("inf")
        x[1, 7] = x[4, 1] = float("nan")
        x[2, :] = -float("inf")
        x[5, 9] = -float("inf")
        for op, ref in ((opwrap.ops.softmax, torch.softmax), (opwrap.ops.log_softmax, torch.log_softmax)):
            torch.testing.assert_close(op(x), ref(x.float(), -1).to(dtype), equal_nan=True, atol=1e-2, rtol=1e-2)
        torch.testing.assert_close(opwrap.ops.logsumexp(x), torch.logsumexp(x.float(), -1).to(dtype), equal_nan=True,
                                   atol=1e-2, rtol=1e-2)


def test_softmax_is_twice_differentiable():
    x = torch.randn(4, 9, dtype=torch.float64, requires_grad=True)
    for op in (opwrap.ops.softmax, opwrap.ops.log_softmax):
        assert torch.autograd.gradcheck(op, (x,))
        assert torch.autograd.gradgradcheck(op, (x,))
    assert torch.autograd.gradcheck(opwrap.ops.logsumexp, (x,))


@pytest.mark.slow(120)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_any_argument_binding_and_return_names(ops, rowlib, dtype):
    """A row-wise op's arguments, bindings and returns may have any name the schema allows:
    `default`, `new`, `this` and `int` (C++ keywords), `lambda` (Python's), `D`, `rows`, `i`,
    `start` and `prog` (the loops' locals), `opwrap_n` and `opwrap_r0` (the struct's members).
    Each is a C++ identifier of its own; the program keeps the schema's names."""
    program = (rowlib[2] / "generated" / "rowwise" / "any_names_rows_program.h").read_text()
    assert "opmath_t opwrap_n_;  // the row's length" in program and "opmath_t this_;" in program
    assert "Tv opwrap_bind_int(Tv default_) const" in program  # `int`, kept in a row buffer: a function of its own
    assert "const Tv opwrap_r0 = (default_ - Tv(this_));" in program  # the first reduction's member is opwrap_r0_
    x = torch.randn(4, 3, 37, dtype=torch.float64)
    n, d = torch.randn(37, dtype=torch.float64), torch.randn(4, 3, dtype=torch.float64)
    start, prog = ops.any_names_rows(x.to(dtype), n.to(dtype), d.to(dtype), rows=2.0, opwrap_n=0.5, i=3, lambda_=0.25)
    x, n, d = x.to(dtype).double(), n.to(dtype).double(), d.to(dtype).double()
    e = torch.exp(x - (x * n).mean(-1, keepdim=True))
    s = e.sum(-1, keepdim=True)
    tol = dict(rtol=2e-2, atol=2e-2) if dtype == torch.bfloat16 else {}
    torch.testing.assert_close(start, (e / s * 2.0 + d[..., None] + 1.5 + 0.25).to(dtype), **tol)
    torch.testing.assert_close(prog, (s[..., 0] + d).to(dtype), **tol)
    start, prog = ops.any_names_rows(x, n, d)  # the defaults
    torch.testing.assert_close(start, e / s + d[..., None])
