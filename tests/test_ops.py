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


# ------------------------------------------------------------------ adam_step: mutated tensor lists
ADAM = dict(lr=0.01, beta1=0.9, beta2=0.999, eps=1e-8)


def _adam_state(dtype, shapes=((5, 3), (7,), (2, 2, 2)), seed=0):
    g = torch.Generator().manual_seed(seed)
    params = [torch.randn(s, generator=g).to(dtype) for s in shapes]
    return params, [torch.zeros_like(p) for p in params], [torch.zeros_like(p) for p in params]


@pytest.mark.parametrize("dtype", dtypes_of("adam_step"))
@pytest.mark.parametrize("weight_decay, maximize", [(0.0, False), (0.1, True)])
def test_adam_step_follows_torch_optim_adam(dtype, weight_decay, maximize):
    """Three steps of torch.optim.Adam(fused=True) (torch._fused_adam_, which it runs) and of
    adam_step on the same gradients; the steps counted by the caller, as torch.optim does."""
    params, exp_avgs, exp_avg_sqs = _adam_state(dtype)
    theirs = [torch.nn.Parameter(p.clone()) for p in params]
    opt = torch.optim.Adam(theirs, lr=ADAM["lr"], betas=(ADAM["beta1"], ADAM["beta2"]), eps=ADAM["eps"],
                           weight_decay=weight_decay, maximize=maximize, fused=True)
    steps = [torch.tensor(0.0) for _ in params]
    g = torch.Generator().manual_seed(1)
    for _ in range(3):
        grads = [torch.randn(p.shape, generator=g).to(dtype) for p in params]
        for t, grad in zip(theirs, grads):
            t.grad = grad.clone()
        opt.step()
        torch._foreach_add_(steps, 1)
        assert ops.adam_step(params, exp_avgs, exp_avg_sqs, grads, steps, weight_decay=weight_decay,
                             maximize=maximize, **ADAM) is None
    for mine, t in zip(params, theirs):
        torch.testing.assert_close(mine, t.detach(), atol=tol(dtype) * 10, rtol=tol(dtype) * 10)
    for name, mine in (("exp_avg", exp_avgs), ("exp_avg_sq", exp_avg_sqs)):
        for m, t in zip(mine, theirs):
            torch.testing.assert_close(m, opt.state[t][name], atol=tol(dtype) * 10, rtol=tol(dtype) * 10)


def test_adam_step_writes_back_non_contiguous_elements():
    """Transposed, gapped and sliced elements: the kernel works on contiguous copies, and the
    results land in the caller's tensors (the same values as for contiguous ones)."""
    params, exp_avgs, exp_avg_sqs = _adam_state(torch.float32, shapes=((4, 6), (8,)))
    grads = [torch.randn(p.shape) for p in params]
    steps = [torch.tensor(2.0), torch.tensor(3.0)]
    want = [[t.clone() for t in xs] for xs in (params, exp_avgs, exp_avg_sqs)]
    ops.adam_step(*want, grads, steps, weight_decay=0.0, **ADAM)
    strided = [torch.empty(6, 4).t().copy_(params[0]), torch.empty(16)[::2].copy_(params[1])]
    moments = [[torch.empty(4, 12)[:, :6].copy_(x[0]), x[1].clone()] for x in (exp_avgs, exp_avg_sqs)]
    bases = [t._base for t in strided]
    ops.adam_step(strided, *moments, grads, steps, weight_decay=0.0, **ADAM)
    assert [t._base for t in strided] == bases and not strided[0].is_contiguous()
    for got, expected in zip((strided, *moments), want):
        for g, w in zip(got, expected):
            torch.testing.assert_close(g, w)


def test_adam_step_refuses_shared_memory_naming_the_arguments_and_elements():
    params, exp_avgs, exp_avg_sqs = _adam_state(torch.float32, shapes=((3,), (4,)))
    grads, steps = [torch.randn(3), torch.randn(4)], [torch.tensor(1.0), torch.tensor(1.0)]

    def call(**changed):
        args = dict(params=params, exp_avgs=exp_avgs, exp_avg_sqs=exp_avg_sqs, grads=grads, state_steps=steps)
        args.update(changed)
        before = [t.clone() for t in params]
        with pytest.raises(RuntimeError) as e:
            ops.adam_step(*args.values(), weight_decay=0.0, **ADAM)
        assert all(torch.equal(a, b) for a, b in zip(params, before))  # refused before anything is written
        return str(e.value).splitlines()[0]

    # one tensor in two written lists
    assert call(exp_avgs=[exp_avgs[0], params[1]]) == (
        "opwrap::adam_step: argument 'params[1]' is written in place, but shares memory with argument "
        "'exp_avgs[1]', also written; pass a copy (clone()) of one of them")
    # a written element overlapping a read one (a gradient that is a view of its parameter)
    buf = torch.zeros(6)
    assert call(params=[buf[:3], params[1]], grads=[buf[2:5], grads[1]]) == (
        "opwrap::adam_step: argument 'params[0]' is written in place, but shares memory with input 'grads[0]'; "
        "pass a copy (clone()) of one of them")
    # two elements of one written list, and a written element overlapping a step
    assert call(exp_avg_sqs=[exp_avg_sqs[1][:3], exp_avg_sqs[1]]) == (
        "opwrap::adam_step: argument 'exp_avg_sqs[0]' is written in place, but shares memory with argument "
        "'exp_avg_sqs[1]', also written; pass a copy (clone()) of one of them")
    assert call(state_steps=[steps[0], exp_avgs[1][2]]) == (
        "opwrap::adam_step: argument 'exp_avgs[1]' is written in place, but shares memory with input "
        "'state_steps[1]'; pass a copy (clone()) of one of them")
    assert call(params=[params[0], torch.zeros(1).expand(4)]) == (
        "opwrap::adam_step: argument 'params[1]' is written in place, but some of its elements share memory "
        "(an expanded or stride-0 tensor); clone() it first")
    # the shape rule: every list as long as params, its i-th elements of params[i]'s shape, 0-d steps
    assert call(grads=grads[:1]) == ("opwrap::adam_step: argument 'grads' holds 1 tensor, but expected len(params) = 2 "
                                     "(its shape is [p.shape for p in params])")
    assert call(exp_avgs=[exp_avgs[0], torch.zeros(5)]) == (
        "opwrap::adam_step: argument 'exp_avgs[1]' has shape [5], but expected params[1].shape = [4]")
    assert call(state_steps=[steps[0], torch.ones(1)]).startswith(
        "opwrap::adam_step: argument 'state_steps[1]' must have 0 dimensions [], but got 1")
    assert "argument 'exp_avgs[1]' has dtype Double" in call(exp_avgs=[exp_avgs[0], exp_avgs[1].double()])
    # two reads of one tensor are fine
    ops.adam_step(params, exp_avgs, exp_avg_sqs, [grads[0], grads[1]], [steps[0], steps[0]], weight_decay=0.0, **ADAM)


def test_adam_step_fake_kernel_refuses_what_the_real_one_does():
    """The shape rule's checks (lengths, element shapes, 0-d steps) are one rule in both kernels:
    the fake kernel (FakeTensorMode, as torch.compile and opcheck run it) raises the real
    kernel's message."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    params, exp_avgs, exp_avg_sqs = _adam_state(torch.float32, shapes=((3,), (4, 2)))
    grads, steps = [torch.randn(3), torch.randn(4, 2)], [torch.tensor(1.0), torch.tensor(1.0)]
    good = dict(params=params, exp_avgs=exp_avgs, exp_avg_sqs=exp_avg_sqs, grads=grads, state_steps=steps)
    cases = {
        "opwrap::adam_step: argument 'exp_avg_sqs' holds 3 tensors, but expected len(params) = 2 (its shape is "
        "[p.shape for p in params])": dict(exp_avg_sqs=[*exp_avg_sqs, torch.zeros(3)]),
        "opwrap::adam_step: argument 'grads[1]' has shape [2, 4], but expected params[1].shape = [4, 2]":
            dict(grads=[grads[0], torch.randn(2, 4)]),
        "opwrap::adam_step: argument 'state_steps' holds 1 tensor, but expected len(params) = 2 (its shape is "
        "[[] for p in params])": dict(state_steps=steps[:1]),
        "opwrap::adam_step: argument 'state_steps[0]' must have 0 dimensions [], but got 1":
            dict(state_steps=[torch.ones(1), steps[1]]),
    }
    for expected, changed in cases.items():
        args = {**good, **changed}
        with pytest.raises(RuntimeError) as real:
            ops.adam_step(*args.values(), weight_decay=0.0, **ADAM)
        with FakeTensorMode() as mode, pytest.raises(RuntimeError) as fake:
            fakes = {k: [mode.from_tensor(t) for t in v] for k, v in args.items()}
            torch.ops.opwrap.adam_step(*fakes.values(), weight_decay=0.0, **ADAM)
        assert str(real.value).splitlines()[0].startswith(expected), str(real.value)
        assert str(fake.value).splitlines()[0].startswith(expected), str(fake.value)
    with FakeTensorMode() as mode:  # a valid call passes
        torch.ops.opwrap.adam_step(*({k: [mode.from_tensor(t) for t in v] for k, v in good.items()}).values(),
                                   weight_decay=0.0, **ADAM)


def test_adam_step_under_autograd_is_an_in_place_op():
    """Without formulas (as torch._fused_adam_), the written lists follow the in-place rules:
    under no_grad (as torch.optim steps) parameters that require grad are written and their
    versions move; with grad mode on, writing a leaf that requires grad is an error at the
    call, as for p.add_(1) (torch._fused_adam_ itself skips autograd and allows it)."""
    params = [torch.nn.Parameter(torch.randn(3)), torch.nn.Parameter(torch.randn(2))]
    state = [[torch.zeros_like(p) for p in params] for _ in range(2)]
    grads, steps = [torch.randn(3), torch.randn(2)], [torch.tensor(1.0)] * 2
    versions = [p._version for p in params]
    with torch.no_grad():
        ops.adam_step(params, *state, grads, steps, weight_decay=0.0, **ADAM)
    assert [p._version for p in params] == [v + 1 for v in versions] and all(p.grad_fn is None for p in params)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad (is being|has been) used in an in-place operation"):
        ops.adam_step(params, *state, grads, steps, weight_decay=0.0, **ADAM)
