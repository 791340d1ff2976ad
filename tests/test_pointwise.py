"""Ops generated from `pointwise: <expression>`: broadcasting, type promotion, strides,
errors and the per-CPU-capability builds, against the aten ops they mirror.  (Every op and
dtype also runs test_declared_ops' reference, opcheck and gradcheck suite.)"""

import os
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

import opwrap
from conftest import ROOT, import_library


def gelu(x):
    return F.gelu(x, approximate="tanh")


@pytest.mark.parametrize("a_shape, b_shape", [((3, 1), (4,)), ((1,), (2, 3)), ((), (5,)), ((2, 0, 3), (3,))])
def test_broadcasting(a_shape, b_shape):
    a, b = torch.randn(a_shape), torch.randn(b_shape)
    torch.testing.assert_close(opwrap.ops.myadd(a, b), a + b)
    torch.testing.assert_close(opwrap.ops.bias_gelu(a, b), gelu(a + b))


@pytest.mark.parametrize("a_dtype, b_dtype", [
    (torch.float32, torch.float64), (torch.int32, torch.int64), (torch.int32, torch.float32),
    (torch.bfloat16, torch.float32), (torch.int64, torch.float16), (torch.bfloat16, torch.bfloat16)])
def test_type_promotion_as_torch_add(a_dtype, b_dtype):
    a = torch.arange(-6, 6).reshape(3, 4).to(a_dtype)
    b = torch.arange(4).to(b_dtype)
    out, want = opwrap.ops.myadd(a, b), torch.add(a, b)
    assert out.dtype == want.dtype
    torch.testing.assert_close(out, want)


def test_zero_dim_tensors_promote_as_aten():
    # A 0-dim tensor does not raise the dtype of a dimensioned one of the same category.
    x = torch.randn(4, dtype=torch.float16)
    s = torch.tensor(2.0, dtype=torch.float64)
    out = opwrap.ops.myadd(x, s)
    assert out.dtype == torch.add(x, s).dtype == torch.float16
    torch.testing.assert_close(out, x + s)


def test_integer_inputs_promote_to_float_in_float_ops():
    x = torch.arange(-4, 4)
    out = opwrap.ops.gelu_tanh(x)
    assert out.dtype == torch.get_default_dtype()
    torch.testing.assert_close(out, gelu(x.float()))
    torch.testing.assert_close(opwrap.ops.mul_constant(x, 0.5), x * 0.5)


@pytest.mark.parametrize("layout", ["transposed", "channels_last", "sliced", "expanded"])
def test_strided_inputs_and_output_layout_as_aten(layout):
    base = torch.randn(2, 3, 4, 5)
    x = {"transposed": base.transpose(1, 3), "channels_last": base.contiguous(memory_format=torch.channels_last),
         "sliced": base[:, :, ::2, 1:], "expanded": torch.randn(1, 3, 1, 5).expand(2, 3, 4, 5)}[layout]
    y = torch.randn(x.shape[-1])
    out, want = opwrap.ops.myadd(x, y), x + y
    torch.testing.assert_close(out, want)
    assert out.stride() == want.stride(), "TensorIterator lays the output out as aten does"
    torch.testing.assert_close(opwrap.ops.gelu_tanh(x), gelu(x))
    # The fake kernel agrees with the real output, strides included.
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode() as mode:
        fx, fy = mode.from_tensor(x), mode.from_tensor(y)
        fake = opwrap.ops.myadd(fx, fy)
    assert fake.shape == out.shape and fake.stride() == out.stride() and fake.dtype == out.dtype


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.float64])
@pytest.mark.parametrize("threads", [1, 2])
def test_large_tensors_in_parallel_and_vectorized(dtype, threads):
    old = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        x = torch.randn(1 << 20, dtype=torch.float64).to(dtype)
        b = torch.randn(1 << 10, dtype=torch.float64).to(dtype)
        x2 = x.view(1 << 10, 1 << 10)
        torch.testing.assert_close(opwrap.ops.gelu_tanh(x), gelu(x))
        # Fused: x + b is not rounded to dtype before the GELU, as it is in the composition.
        torch.testing.assert_close(opwrap.ops.bias_gelu(x2, b), gelu(x2.double() + b.double()).to(dtype))
        torch.testing.assert_close(opwrap.ops.myadd(x2, b), x2 + b)
        torch.testing.assert_close(opwrap.ops.mul_constant(x, 3.0), x * 3.0)
    finally:
        torch.set_num_threads(old)


def test_reduced_precision_computes_in_float():
    # 1 + 1e-3 is 1 in bfloat16; computed in float and rounded once it is not lost twice.
    x = torch.linspace(-4, 4, 1000, dtype=torch.bfloat16)
    want = gelu(x.float()).to(torch.bfloat16)
    assert torch.equal(opwrap.ops.gelu_tanh(x), want) or (opwrap.ops.gelu_tanh(x).float() - want.float()).abs().max() <= 2 ** -7


def test_special_values():
    x = torch.tensor([float("inf"), float("-inf"), float("nan"), 0.0, -0.0, 1e30, -1e30])
    torch.testing.assert_close(opwrap.ops.gelu_tanh(x), gelu(x), equal_nan=True)
    torch.testing.assert_close(opwrap.ops.myadd(x, x), x + x, equal_nan=True)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_gelu_family_over_the_whole_range(dtype):
    """gelu_tanh, bias_gelu and gelu_tanh_backward (written through sigmoid(2u), not tanh)
    agree with aten from tiny to huge magnitudes, inf and NaN included: where the derivative's
    s * (1 - s) is 0, it must not meet an overflowed x ** 3 (0 * inf = NaN; aten gives 0)."""
    big = torch.finfo(dtype).max
    m = torch.logspace(-8, torch.log10(torch.tensor(big)).item(), 600, dtype=torch.float64).clamp(max=big)
    x = torch.cat([-m, m, torch.tensor([0.0, float("inf"), -float("inf"), float("nan")], dtype=torch.float64)]).to(dtype)
    grad = torch.ones_like(x)
    torch.testing.assert_close(opwrap.ops.gelu_tanh(x), gelu(x), equal_nan=True)
    torch.testing.assert_close(opwrap.ops.bias_gelu(x, torch.zeros(1, dtype=dtype)), gelu(x), equal_nan=True)
    torch.testing.assert_close(opwrap.ops.gelu_tanh_backward(grad, x),
                               torch.ops.aten.gelu_backward(grad, x, approximate="tanh"), equal_nan=True)


def test_errors_name_the_op_and_argument():
    with pytest.raises(RuntimeError, match=r"opwrap::myadd: argument 'other' has shape \[4\], which does not broadcast"):
        opwrap.ops.myadd(torch.randn(3), torch.randn(4))
    with pytest.raises(RuntimeError, match=r"opwrap::myadd: the inputs \('self' Bool, 'other' Bool\) compute in dtype "
                       r"Bool, which is not supported; expected one of: float32"):
        opwrap.ops.myadd(torch.ones(2, dtype=torch.bool), torch.ones(2, dtype=torch.bool))
    with pytest.raises(RuntimeError, match=r"opwrap::gelu_tanh: .*compute in dtype ComplexFloat"):
        opwrap.ops.gelu_tanh(torch.randn(2, dtype=torch.complex64))


def test_gradients_reduce_over_broadcast_dimensions():
    x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    b = torch.randn(4, dtype=torch.float64, requires_grad=True)
    opwrap.ops.bias_gelu(x, b).sum().backward()
    x2, b2 = x.detach().requires_grad_(), b.detach().requires_grad_()
    gelu(x2 + b2).sum().backward()
    torch.testing.assert_close(x.grad, x2.grad)
    torch.testing.assert_close(b.grad, b2.grad)
    assert torch.autograd.gradgradcheck(opwrap.ops.bias_gelu, (x, b))


def test_mixed_dtype_gradients_arrive_in_each_inputs_dtype():
    a = torch.randn(3, dtype=torch.float32, requires_grad=True)
    b = torch.randn(3, dtype=torch.float64, requires_grad=True)
    opwrap.ops.myadd(a, b).sum().backward()
    assert a.grad.dtype == torch.float32 and b.grad.dtype == torch.float64


def test_vmap_broadcasts_batched_and_unbatched_inputs():
    x = torch.randn(5, 3, 4)
    b = torch.randn(5, 4)
    torch.testing.assert_close(torch.vmap(opwrap.ops.bias_gelu)(x, b), gelu(x + b[:, None, :]))
    torch.testing.assert_close(torch.vmap(opwrap.ops.bias_gelu, in_dims=(None, 0))(x[0], b), gelu(x[0] + b[:, None, :]))
    torch.testing.assert_close(torch.vmap(opwrap.ops.myadd, in_dims=(1, None))(x, b[0]), (x + b[0]).transpose(0, 1))


def test_compile_fuses_nothing_away():
    # Under torch.compile the generated op stays one call (its fake kernel gives the output).
    f = torch.compile(lambda x, b: opwrap.ops.bias_gelu(x, b) * 2, fullgraph=True, dynamic=True)
    x, b = torch.randn(6, 8), torch.randn(8)
    torch.testing.assert_close(f(x, b), gelu(x + b) * 2)


_CAPABILITY_CHECK = """
import torch, torch.nn.functional as F, opwrap
print(torch.backends.cpu.get_cpu_capability())
for dtype in (torch.float32, torch.float64, torch.bfloat16, torch.float16):
    x = torch.randn(4099, dtype=torch.float64).to(dtype)  # not a multiple of any vector width
    b = torch.randn(4099, dtype=torch.float64).to(dtype)
    torch.testing.assert_close(opwrap.ops.gelu_tanh(x), F.gelu(x, approximate="tanh"))
    torch.testing.assert_close(opwrap.ops.bias_gelu(x, b), F.gelu(x.double() + b.double(), approximate="tanh").to(dtype))
    torch.testing.assert_close(opwrap.ops.myadd(x, b), x + b)
    torch.testing.assert_close(opwrap.ops.gelu_tanh_backward(b, x), torch.ops.aten.gelu_backward(b, x, approximate="tanh"))
    s, c = opwrap.ops.sincos(x)
    torch.testing.assert_close((s, c), (x.sin(), x.cos()))
    # Row-wise programs (their loops are built per capability too): rows not a multiple of
    # any vector width, reduced types compared with aten's float computation.
    rows = torch.randn(5, 1031, dtype=torch.float64).to(dtype)
    tol = {} if dtype in (torch.float32, torch.float64) else dict(atol=1e-2, rtol=1e-2)
    want = lambda f: f(rows.double()).to(dtype)
    torch.testing.assert_close(opwrap.ops.softmax(rows), want(lambda r: r.softmax(-1)), **tol)
    torch.testing.assert_close(opwrap.ops.log_softmax(rows), want(lambda r: r.log_softmax(-1)), **tol)
    torch.testing.assert_close(opwrap.ops.logsumexp(rows), want(lambda r: r.logsumexp(-1)), **tol)
    w, bias = b[:1031], x[:1031]
    torch.testing.assert_close(opwrap.ops.layer_norm(rows, w, bias).out,
                               want(lambda r: F.layer_norm(r, (1031,), w.double(), bias.double())), **tol)
for dtype in (torch.int32, torch.int64):
    x, y = torch.randint(-100, 100, (1027,), dtype=dtype), torch.randint(-100, 100, (1027,), dtype=dtype)
    assert torch.equal(opwrap.ops.myadd(x, y), x + y)
"""


def _capabilities():
    have = torch.backends.cpu.get_cpu_capability()
    caps = ["default"]
    if have in ("AVX2", "AVX512"):
        caps.append("avx2")
    if have == "AVX512":
        caps.append("avx512")
    return caps


@pytest.mark.slow(4)
@pytest.mark.parametrize("capability", _capabilities())
def test_every_cpu_capability_build(capability):
    """Each build (DEFAULT, AVX2, AVX-512) runs where torch runs its own kernels at that
    capability (ATEN_CPU_CAPABILITY), and computes what aten computes."""
    env = dict(os.environ, ATEN_CPU_CAPABILITY=capability)
    r = subprocess.run([sys.executable, "-c", _CAPABILITY_CHECK], env=env, cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.split()[0] == capability.upper()


def test_capability_builds_are_in_the_library():
    """The AVX2 and AVX-512 loops were compiled (with Vectorized of those widths) into the library."""
    import shutil
    if shutil.which("nm") is None or torch.backends.cpu.get_cpu_capability() not in ("AVX2", "AVX512"):
        pytest.skip("needs nm and an x86-64 CPU with AVX2")
    so = ROOT / "build" / "_C.so"
    symbols = subprocess.run(["nm", "-C", str(so)], capture_output=True, text=True, check=True).stdout
    for cap in ("AVX2", "AVX512"):
        assert f"at::vec::{cap}::Vectorized<float>" in symbols, cap


@pytest.mark.parametrize("text, pairs", [
    ("sin(self), cos(self)", 1),  # sincos
    ("sin(2 * self) * cos(2 * self), self", 1),  # the same argument, written twice
    ("s = self + 1\nsin(s) + cos(s), cos(s)", 1),  # of a binding, used again after the pair
    ("sin(self), cos(self + 1)", 0),  # different arguments: nothing shared
    ("sin(self), sin(self)", 0),  # no cosine
])
def test_sine_and_cosine_of_one_value_share_one_sincos(text, pairs):
    """sin(x) and cos(x) of one value are computed by one opwrap::pw::sincos (one argument
    reduction), bound before the statement that first needs it."""
    from opwrap_codegen.lang import pointwise
    from opwrap_codegen.core.diagnostics import Diagnostics, Loc
    from opwrap_codegen.lang.schema import FunctionSchema

    diag = Diagnostics()
    expr = pointwise.parse(text, FunctionSchema.parse("f(Tensor self) -> (Tensor a, Tensor b)"),
                           lambda line, col: Loc("ops.yaml", line, col + 1), diag)
    assert not diag, diag.sorted()
    shared = [b for b in expr.bindings if b[2].startswith("opwrap::pw::sincos(")]
    assert len(shared) == pairs
    code = "\n".join(v for _, _, v in expr.bindings) + "\n" + "\n".join(expr.results)
    if pairs:
        name = shared[0][0]
        assert "opwrap::pw::sin(" not in code and "opwrap::pw::cos(" not in code
        assert f"{name}.v[0]" in code and f"{name}.v[1]" in code
        names = [b[0] for b in expr.bindings]
        uses = [i for i, (_, _, v) in enumerate(expr.bindings) if name in v and i != names.index(name)]
        assert all(i > names.index(name) for i in uses)


# Argument names as free as torch.library's (issue 36): C++ and Python keywords (`default`,
# `new`, `this`, `from`, `lambda`, and `int` for a binding), the names the generated kernels
# declare themselves (`Tv`, `opmath_t`, `scalar_t`, `iter`, `op`, `Vec`, `kOp`, `opwrap_out0`,
# `opwrap_sincos0` for a binding), and `x0` beside `x` (the float halves of `x` in the
# vectorized bfloat16 loop are `x0` and `x1`).  In conftest's `sharedlib`: nothing compiles
# for them alone.
NAMES = """\
- func: any_names(Tensor default, Tensor new, Tensor Tv, Tensor x, Tensor x0, Tensor from, float this=2.0, Scalar opmath_t=1, int iter=3, bool op=True, float lambda=0.5, float scalar_t=1.0, int kOp=0, float opwrap_out0=0.0, float Vec=1.0) -> Tensor
  doc: any argument names, written in the expression as the schema writes them.
  dtypes: [float32, float64, bfloat16]
  pointwise: |
    int = default * this + new * opmath_t
    opwrap_sincos0 = Tv * lambda
    int + sin(opwrap_sincos0) * cos(opwrap_sincos0) + x * iter - x0 * op + from * kOp + opwrap_out0 * Vec * scalar_t
  derivatives:
    default: grad * this
    new: grad * opmath_t
    Tv: grad * (2 * Tv * lambda).cos() * lambda
    x: grad * iter
    x0: "grad * (op ? -1.0 : 0.0)"
    from: grad * kOp

- func: any_names.out(Tensor default, Tensor new, Tensor Tv, Tensor x, Tensor x0, Tensor from, float this=2.0, Scalar opmath_t=1, int iter=3, bool op=True, float lambda=0.5, float scalar_t=1.0, int kOp=0, float opwrap_out0=0.0, float Vec=1.0, *, Tensor(a!) delete) -> Tensor(a!)
  doc: any_names, written into delete.
"""


def add_to_sharedlib(lib) -> None:
    """conftest's `sharedlib` holds the op above."""
    (lib / "declarations" / "pointwise_names.yaml").write_text(NAMES)


def any_names_reference(default, new, Tv, x, x0, from_, this=2.0, opmath_t=1, iter=3, op=True, lambda_=0.5,
                        scalar_t=1.0, kOp=0, opwrap_out0=0.0, Vec=1.0):
    a = Tv * lambda_
    return (default * this + new * opmath_t + torch.sin(a) * torch.cos(a) + x * iter - x0 * float(op) + from_ * kOp
            + opwrap_out0 * Vec * scalar_t)


@pytest.mark.slow(120)
@pytest.mark.xdist_group("sharedlib")
def test_any_argument_name_generates_compiles_and_computes(sharedlib):
    """An expression's arguments may have any name the schema allows: each is a C++
    identifier of its own in the generated kernels (`default_`, `Tv_`), the expression and
    every message keep the schema's name, and the op computes what the expression says, on
    every loop (scalar and vectorized, float, double, bfloat16 through float), with defaults,
    the out= overload, derivatives and a fake kernel."""
    made = sharedlib.record
    assert made["build"][0] == 0, made["build"][1][-5000:]
    gen = sharedlib.path / "generated"
    header = (gen / "pointwise" / "any_names.h").read_text()
    assert "Tv operator()(Tv default_, Tv new_, Tv Tv_, Tv x, Tv x0, Tv from) const" in header
    assert "opmath_t this_;" in header and "opmath_t opmath_t_;" in header and "const Tv int_ = " in header
    assert "convert_to_float<scalar_t>(x_)" in header  # the loop's `x`: the lambdas' own `x` is taken
    wrapper = (gen / "cpu" / "any_names.cpp").read_text()
    assert '{"default", default_}' in wrapper and "opwrap::rt::check_tensor(kOp, \"new\", new_," in wrapper
    ops = import_library(sharedlib.path).ops
    torch.manual_seed(0)
    scalars = dict(this=1.5, opmath_t=2, iter=4, op=False, scalar_t=0.25, kOp=3, opwrap_out0=0.5, Vec=2.0)
    for dtype in (torch.float32, torch.float64, torch.bfloat16):
        args = [torch.randn(5, 37, dtype=torch.float64).to(dtype) for _ in range(6)]
        args[1] = args[1][0]  # broadcast along the rows
        wide = [a.double() for a in args]
        tol = dict(rtol=2e-2, atol=8e-2) if dtype == torch.bfloat16 else {}  # bfloat16 rounds each input's sum

        def close(got, want):
            assert got.dtype == dtype
            torch.testing.assert_close(got, want.to(dtype), **tol)

        close(ops.any_names(*args, **scalars, lambda_=0.75), any_names_reference(*wide, **scalars, lambda_=0.75))
        close(ops.any_names(*args), any_names_reference(*wide))
        out = torch.empty(5, 37, dtype=dtype)
        assert torch.ops.sharedlib.any_names.out(*args, **scalars, delete=out) is out
        close(out, any_names_reference(*wide, **scalars))
    with pytest.raises(RuntimeError, match="sharedlib::any_names: .*'from'"):  # messages keep the schema's names
        ops.any_names(*args[:5], torch.ones(3, 3, dtype=torch.float64))
    args = [torch.randn(3, 4, dtype=torch.float64, requires_grad=True) for _ in range(6)]
    assert torch.autograd.gradcheck(lambda *a: ops.any_names(*a, **scalars), args)
    # torch itself checks no schema (opcheck's test_schema) and lowers nothing with inductor
    # for an argument named like a Python keyword (`from`), as for hand-written ops
    # (test_python_api.py); the rest of opcheck and aot_eager take it.
    opcheck = torch.library.opcheck(torch.ops.sharedlib.any_names.default, [a.detach() for a in args],
                                    test_utils=("test_autograd_registration", "test_faketensor",
                                                "test_aot_dispatch_dynamic"))
    assert all(v == "SUCCESS" for v in opcheck.values()), opcheck
    compiled = torch.compile(lambda *a: ops.any_names(*a, kOp=2), fullgraph=True, backend="aot_eager")
    torch.testing.assert_close(compiled(*args), ops.any_names(*args, kOp=2))
