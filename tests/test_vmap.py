"""torch.vmap over the ops: pointwise ops need only `pointwise: true`; linear has a
hand-written rule (`vmap:`); others raise a clear error.  Each is compared with a loop."""

import pytest
import torch

import opwrap

ops = opwrap.ops


def loop(fn, in_dims, *args):
    """What vmap means: fn on each sample, stacked along dim 0."""
    size = next(a.size(d) for a, d in zip(args, in_dims) if d is not None)
    outs = [fn(*[a if d is None else a.select(d, i) for a, d in zip(args, in_dims)]) for i in range(size)]
    if isinstance(outs[0], tuple):
        return tuple(torch.stack(o) for o in zip(*outs))
    return torch.stack(outs)


def batched(shape, d, B=4):
    return torch.randn(*shape) if d is None else torch.stack([torch.randn(*shape) for _ in range(B)], d)


@pytest.mark.parametrize("in_dims", [(0, 0), (1, 0), (0, None), (None, 2)])
def test_pointwise_binary_op(in_dims):
    x, y = (batched((3, 5), d) for d in in_dims)
    got = torch.vmap(ops.myadd, in_dims=in_dims)(x, y)
    torch.testing.assert_close(got, loop(ops.myadd, in_dims, x, y))


def test_pointwise_with_a_scalar_argument_and_two_outputs():
    x = torch.randn(3, 6)
    torch.testing.assert_close(torch.vmap(lambda t: ops.mul_constant(t, 2.5), in_dims=1)(x),
                               loop(lambda t: ops.mul_constant(t, 2.5), (1,), x))
    s, c = torch.vmap(ops.sincos)(x)
    ws, wc = loop(ops.sincos, (0,), x)
    torch.testing.assert_close(s, ws)
    torch.testing.assert_close(c, wc)


def test_nested_vmap():
    x, y = torch.randn(2, 3, 4), torch.randn(3, 2, 4)
    got = torch.vmap(torch.vmap(ops.myadd, in_dims=(0, 0)), in_dims=(0, 1))(x, y)
    want = torch.stack([torch.stack([x[i, j] + y[j, i] for j in range(3)]) for i in range(2)])
    torch.testing.assert_close(got, want)


@pytest.mark.parametrize("in_dims", [(0, None, None), (2, None, None), (None, 0, None), (0, 0, 0), (None, None, 0)])
def test_linear_rule(in_dims):
    args = [batched(shape, d, B=3) for shape, d in zip(((5, 4), (6, 4), (6,)), in_dims)]
    got = torch.vmap(ops.linear, in_dims=in_dims)(*args)
    torch.testing.assert_close(got, loop(ops.linear, in_dims, *args))


def test_backward_through_a_vmapped_op():
    x = torch.randn(4, 5, requires_grad=True)
    torch.vmap(lambda t: ops.mul_constant(ops.myadd(t, t), 3.0))(x).sum().backward()
    torch.testing.assert_close(x.grad, torch.full_like(x, 6.0))


def test_functorch_grad_is_refused_by_cpp_autograd_functions():
    # The Autograd kernels are C++ torch::autograd::Functions (issue #3), which torch.func's
    # grad/vjp transforms do not support; torch says so clearly.
    with pytest.raises(RuntimeError, match="cannot use C\\+\\+ torch::autograd::Function with functorch"):
        torch.func.grad(lambda t: ops.mul_constant(t, 3.0).sum())(torch.randn(3))


def test_an_op_without_a_rule_is_a_clear_error():
    with pytest.raises(RuntimeError, match="opwrap::nonzero_flat: no batching rule for torch.vmap; declare 'pointwise: true'"):
        torch.vmap(ops.nonzero_flat)(torch.randn(2, 3))
