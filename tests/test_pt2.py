"""Fake kernels from the shape rule: torch.compile(fullgraph=True) with no graph break,
dynamic shapes, torch.export, and torch.library.opcheck.  (Autograd is issue #3.)"""

import pytest
import torch
from torch._dynamo.utils import counters
from torch._subclasses.fake_tensor import FakeTensorMode

import opwrap  # noqa: F401  (loads the library and its fake kernels)

ops = torch.ops.opwrap


def chain(x, w, b):
    y = ops.linear(x, w, b)
    y = ops.myadd(y.relu(), y)
    y = ops.mul_constant(y, 0.5)
    return y.sum(1) + ops.fill_natural([5]).float().sum()


ARGS = (torch.randn(4, 3), torch.randn(5, 3), torch.randn(5))


@pytest.mark.parametrize("dynamic", [False, True])
def test_compile_fullgraph_has_no_graph_break(dynamic):
    torch._dynamo.reset()
    counters.clear()
    compiled = torch.compile(chain, fullgraph=True, dynamic=dynamic)
    torch.testing.assert_close(compiled(*ARGS), chain(*ARGS))
    other = (torch.randn(9, 3),) + ARGS[1:]
    torch.testing.assert_close(compiled(*other), chain(*other))
    assert sum(counters["graph_break"].values()) == 0


def test_export_with_a_dynamic_dimension():
    class M(torch.nn.Module):
        def forward(self, x, w, b):
            return chain(x, w, b)

    n = torch.export.Dim("n", min=2)
    ep = torch.export.export(M(), ARGS, dynamic_shapes={"x": {0: n}, "w": None, "b": None})
    targets = {str(node.target) for node in ep.graph.nodes if node.op == "call_function"}
    assert {"opwrap.linear.default", "opwrap.myadd.default", "opwrap.mul_constant.default"} <= targets
    for rows in (4, 11):
        args = (torch.randn(rows, 3),) + ARGS[1:]
        torch.testing.assert_close(ep.module()(*args), chain(*args))


@pytest.mark.parametrize("op, args", [
    (ops.myadd.default, (torch.randn(3, 4), torch.randn(3, 4))),
    (ops.myadd.default, (torch.randint(0, 9, (5,)), torch.randint(0, 9, (5,)))),
    (ops.mul_constant.default, (torch.randn(6), 3.0)),
    (ops.linear.default, (torch.randn(4, 3), torch.randn(5, 3), torch.randn(5))),
    (ops.linear.default, (torch.randn(4, 3), torch.randn(5, 3), None)),
    (ops.fill_natural.default, ([2, 3],)),
])
def test_opcheck(op, args):
    torch.library.opcheck(op, args)


def test_opcheck_in_place_addmv():
    # PyTorch cannot functionalize a custom op that returns an alias of its input
    # (`-> Tensor(a!)`), so aot_dispatch is left out here; issue #3 adds the functional variant.
    torch.library.opcheck(ops.addmv_.default, (torch.randn(5), torch.randn(5, 3), torch.randn(3)),
                          test_utils=("test_schema", "test_faketensor"))


def test_fake_kernel_checks_like_the_real_one():
    with FakeTensorMode():
        out = ops.linear(torch.empty(4, 3), torch.empty(5, 3), None)
        assert out.shape == (4, 5) and out.dtype == torch.float32
        with pytest.raises(RuntimeError, match="opwrap::linear: argument 'weight' has size 2 at dimension 1, but expected K = 3"):
            ops.linear(torch.empty(4, 3), torch.empty(5, 2), None)
        with pytest.raises(RuntimeError, match="opwrap::myadd: argument 'other' has dtype torch.float64"):
            ops.myadd(torch.empty(3), torch.empty(3, dtype=torch.float64))
        assert ops.fill_natural([2, 3]).dtype == torch.int64


def test_fake_kernels_are_named_by_the_library_itself():
    module, _ = torch._C._dispatch_pystub("opwrap::linear", "")
    assert module == "opwrap._generated.fake"
