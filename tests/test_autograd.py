"""The autograd Functions generated from `derivatives:`: each ctx behaviour of
torch.autograd.Function, exercised through a bundled op.  (gradcheck and gradgradcheck of
every op run in test_declared_ops.py.)"""

import pytest
import torch

import opwrap  # noqa: F401

ops = torch.ops.opwrap


def f64(*shape, grad=False):
    return torch.randn(*shape, dtype=torch.float64, requires_grad=grad)


def test_saved_outputs_feed_the_backward_and_its_double_backward():
    x = f64(5, grad=True)
    s, c = ops.sincos(x)
    (g,) = torch.autograd.grad((s * c).sum(), x, create_graph=True)
    torch.testing.assert_close(g, torch.cos(2 * x))
    (gg,) = torch.autograd.grad(g.sum(), x)
    torch.testing.assert_close(gg, -2 * torch.sin(2 * x))


@pytest.mark.parametrize("use", ["sin", "cos"])
def test_unmaterialized_grads_reach_the_formula_undefined(use):
    # sincos declares materialize_grads: false; the unused output's gradient is undefined,
    # and the formula skips it (an undefined tensor in arithmetic would throw).
    x = f64(6, grad=True)
    s, c = ops.sincos(x)
    (s if use == "sin" else c).sum().backward()
    torch.testing.assert_close(x.grad, x.detach().cos() if use == "sin" else -x.detach().sin())


def test_in_place_op_marks_its_argument_dirty():
    mat, vec = f64(3, 4, grad=True), f64(4, grad=True)
    base = f64(3, grad=True)
    self = base * 1  # a non-leaf, so in place is allowed
    out = ops.addmv_(self, mat, vec, beta=0.5, alpha=2.0)
    assert out is self and self.grad_fn is not None and "addmv_" in self.grad_fn.name()
    self.sum().backward()
    torch.testing.assert_close(base.grad, torch.full((3,), 0.5, dtype=torch.float64))
    torch.testing.assert_close(vec.grad, 2.0 * mat.detach().t().mv(torch.ones(3, dtype=torch.float64)))


def test_in_place_on_a_leaf_that_requires_grad_is_an_error():
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
        ops.addmv_(f64(3, grad=True), f64(3, 4), f64(4))


def test_in_place_bumps_the_version_so_stale_saved_tensors_are_caught():
    t = f64(3)
    v = t._version
    ops.addmv_(t, f64(3, 4), f64(4))
    assert t._version == v + 1
    w = f64(3, grad=True)
    saved = t.clone()
    y = ops.mul_constant(w, 2.0) * saved  # mul saves `saved` for backward
    ops.addmv_(saved, f64(3, 4), f64(4))
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


def test_non_differentiable_outputs_never_require_grad():
    x, w = f64(2, 4, grad=True), f64(4, grad=True)
    out, rstd = ops.rms_norm(x, w)
    assert out.requires_grad and not rstd.requires_grad and rstd.grad_fn is None
    values = f64(10, grad=True)
    indices, counts = ops.bucketize_count(values, torch.tensor([-1.0, 0.0, 1.0], dtype=torch.float64))
    assert indices.dtype == counts.dtype == torch.int64
    assert not indices.requires_grad and not counts.requires_grad


def test_once_differentiable_op_refuses_double_backward_clearly():
    x, w = f64(2, 4, grad=True), f64(4, grad=True)
    out, _ = ops.rms_norm(x, w)
    gx, gw = torch.autograd.grad(out.sum(), (x, w), create_graph=True)
    with pytest.raises(RuntimeError, match="differentiate twice the backward of opwrap::rms_norm, which is declared "
                                           "once_differentiable"):
        (gx.sum() + gw.sum()).backward()
    # A single backward is unaffected.
    out, _ = ops.rms_norm(x, w)
    out.sum().backward()
    assert x.grad is not None and w.grad is not None


def test_only_the_needed_gradients_are_computed():
    x, W = f64(2, 3), f64(4, 3, grad=True)
    y = ops.linear(x, W, None)  # bias absent: no edge for it
    y.sum().backward()
    assert x.grad is None and W.grad is not None
    torch.testing.assert_close(W.grad, torch.ones(2, 4, dtype=torch.float64).t().mm(x))


def test_reduced_precision_backward_accumulates_in_float():
    x = torch.randn(4, 64, dtype=torch.float64)
    w = torch.randn(64, dtype=torch.float64)
    xb, wb = x.bfloat16().requires_grad_(), w.bfloat16().requires_grad_()
    ops.rms_norm(xb, wb)[0].sum().backward()
    xr, wr = x.requires_grad_(), w.requires_grad_()
    (xr * torch.rsqrt(xr.pow(2).mean(-1, keepdim=True) + 1e-6) * wr).sum().backward()
    assert xb.grad.dtype == torch.bfloat16
    torch.testing.assert_close(xb.grad.double(), xr.grad, atol=5e-2, rtol=2e-2)
    torch.testing.assert_close(wb.grad.double(), wr.grad, atol=5e-2, rtol=2e-2)
