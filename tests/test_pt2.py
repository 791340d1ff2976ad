"""Fake kernels from the shape rule and autograd from the formulas, under PT2:
torch.compile(fullgraph=True) of a model that chains every op with aten ops, forward and
backward, with no graph break (counted), static and dynamic; torch.export of it with a
dynamic dimension."""

import pytest
import torch
from torch._dynamo.utils import counters
from torch._subclasses.fake_tensor import FakeTensorMode

import opwrap  # noqa: F401  (loads the library and its fake kernels)
from conftest import run_python, torch_feature

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


def test_fake_kernel_checks_like_the_real_one():
    with FakeTensorMode():
        out = ops.linear(torch.empty(4, 3), torch.empty(5, 3), None)
        assert out.shape == (4, 5) and out.dtype == torch.float32
        with pytest.raises(RuntimeError, match="opwrap::linear: argument 'weight' has size 2 at dimension 1, but expected K = 3"):
            ops.linear(torch.empty(4, 3), torch.empty(5, 2), None)
        with pytest.raises(RuntimeError, match=r"opwrap::myadd: the shapes of 'self' \[3\], 'other' \[4\] do not broadcast"):
            ops.myadd(torch.empty(3), torch.empty(4))
        with pytest.raises(RuntimeError, match="opwrap::myadd: the inputs compute in dtype torch.bool, which is not supported"):
            ops.myadd(torch.empty(3, dtype=torch.bool), torch.empty(3, dtype=torch.bool))
        assert ops.myadd(torch.empty(3, 1), torch.empty(4, dtype=torch.float64)).shape == (3, 4)
        assert ops.fill_natural([2, 3]).dtype == torch.int64


class Model(torch.nn.Module):
    """Every op of the library between aten ops, as a training step would run them."""

    def __init__(self):
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.w = torch.nn.Parameter(torch.randn(8, 6, generator=g))
        self.b = torch.nn.Parameter(torch.randn(8, generator=g))
        self.gain = torch.nn.Parameter(torch.rand(8, generator=g) + 0.5)
        self.mat = torch.nn.Parameter(torch.randn(8, 8, generator=g))
        self.register_buffer("edges", torch.tensor([-0.5, 0.0, 0.5]))

    def forward(self, x):
        h = ops.linear(x, self.w, self.b)
        h, _rstd = ops.rms_norm(torch.relu(h), self.gain)
        s, c = ops.sincos(h)
        h = ops.mul_constant(ops.myadd(s, c * 0.5), 2.0)
        acc = h.mean(0)
        ops.addmv_(acc, self.mat, h.mean(0).tanh(), beta=0.5)
        _, counts = ops.bucketize_count(h.detach(), self.edges)
        bias = counts.float().sum() / h.numel() + ops.fill_natural([2]).float().sum()
        return ops.sum_dim(h, [-1]) + ops.sum_dim(acc, None, keepdim=True) + bias


def _step(model, x):
    model.zero_grad()
    out = model(x)
    out.square().sum().backward()
    return out.detach(), [p.grad.clone() for p in model.parameters()]


@pytest.mark.parametrize("dynamic", [False, True])
def test_compiled_training_step_has_no_graph_break(dynamic):
    torch._dynamo.reset()
    counters.clear()
    model = Model()
    compiled = torch.compile(model, fullgraph=True, dynamic=dynamic)
    with torch_feature("mutable_returns"):  # the model calls addmv_, which returns what it writes
        for rows in (4, 9):
            # fixed inputs: bucketize_count's counts jump where a value of h crosses an edge,
            # and compiled and eager h may differ in the last bits
            x = torch.randn(rows, 6, generator=torch.Generator().manual_seed(rows))
            want_out, want_grads = _step(model, x)
            got_out, got_grads = _step(compiled, x)
            torch.testing.assert_close(got_out, want_out, rtol=1e-4, atol=1e-4)
            for got, want in zip(got_grads, want_grads):
                torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
        assert sum(counters["graph_break"].values()) == 0
        assert counters["stats"]["unique_graphs"] >= 1


def test_export_of_the_model_runs_like_eager():
    model = Model()
    n = torch.export.Dim("n", min=2)
    x = torch.randn(5, 6)
    ep = torch.export.export(model, (x,), dynamic_shapes={"x": {0: n}})
    targets = {str(node.target) for node in ep.graph.nodes if node.op == "call_function"}
    for op in ("linear", "rms_norm", "sincos", "myadd", "mul_constant", "bucketize_count", "fill_natural", "sum_dim"):  # addmv_ is functionalized
        assert f"opwrap.{op}.default" in targets, targets
    with torch.no_grad():
        for rows in (5, 12):
            x = torch.randn(rows, 6)
            torch.testing.assert_close(ep.module()(x), model(x), rtol=1e-5, atol=1e-5)


def test_fake_kernels_are_named_by_the_library_itself():
    module, _ = torch._C._dispatch_pystub("opwrap::linear", "")
    assert module == "opwrap._generated.fake"


def _positive_mean(x):
    idx = ops.nonzero_flat(torch.relu(x))
    return x.flatten()[idx].sum() / x.numel()


def test_data_dependent_output_size_compiles_and_exports():
    # nonzero_flat's length is '?nnz': the fake kernel takes a size from new_dynamic_size().
    torch._dynamo.reset()
    counters.clear()
    with torch._dynamo.config.patch(capture_dynamic_output_shape_ops=True):
        compiled = torch.compile(_positive_mean, fullgraph=True)
        for x in (torch.randn(4, 5), torch.randn(7, 3)):
            torch.testing.assert_close(compiled(x), _positive_mean(x))
    assert sum(counters["graph_break"].values()) == 0

    class M(torch.nn.Module):
        def forward(self, x):
            return _positive_mean(x)

    ep = torch.export.export(M(), (torch.randn(4, 5),))
    x = torch.randn(4, 5)
    torch.testing.assert_close(ep.module()(x), _positive_mean(x))


@pytest.mark.slow(6)
def test_loading_the_shared_library_alone_names_the_fake_kernel_module():
    # m.set_python_module records opwrap._generated.fake with every op.  Torch (2.14) does not
    # import it by itself: tracing an op whose fake kernel is not imported fails with torch's
    # own hint naming that module; importing it (as `import opwrap` does) is enough.  A process
    # of its own (forked from the test zygote, which has imported torch and not opwrap).
    script = ("import importlib, torch\n"
              f"torch.ops.load_library({str(opwrap.library_path)!r})\n"
              "f = lambda x: torch.ops.opwrap.mul_constant(torch.ops.opwrap.myadd(x, x), 0.5)\n"
              "try:\n"
              "    torch.compile(f, fullgraph=True, backend='eager')(torch.randn(5))\n"
              "except Exception as e:\n"
              "    assert \"import the 'opwrap._generated.fake' Python module\" in str(e) or \\\n"
              "        '`import opwrap._generated.fake`' in str(e), str(e)[-2000:]\n"
              "else:\n"
              "    raise AssertionError('traced without fake kernels?')\n"
              "importlib.import_module('opwrap._generated.fake')\n"
              "torch._dynamo.reset()\n"
              "x = torch.randn(5)\n"
              "torch.testing.assert_close(torch.compile(f, fullgraph=True)(x), x)\n")
    r = run_python(["-c", script])
    assert r.returncode == 0, r.stderr[-3000:]


class IndexModel(torch.nn.Module):
    """The ops of index tensors, dtype arguments, tensor lists, out= overloads, written caches
    and a generator, between aten ops, as a training step would run them."""

    def __init__(self):
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.table = torch.nn.Parameter(torch.randn(10, 4, generator=g))
        self.register_buffer("indices", torch.tensor([1, 2, 4, 5, 4, 3, 2, 9], dtype=torch.int32))
        self.register_buffer("offsets", torch.tensor([0, 3, 3, 6], dtype=torch.int32))
        self.register_buffer("key_cache", torch.zeros(3, 2, 1, 4))
        self.register_buffer("value_cache", torch.zeros(3, 2, 1, 4))
        self.register_buffer("slots", torch.tensor([4, -1, 0, 5]))

    def forward(self, x):
        bags = ops.embedding_bag_sum(self.table, self.indices, self.offsets)  # [4, 4]
        h = ops.cat_rows([bags, x])  # [4 + n, 4]
        h = ops.to_dtype(h, torch.float64).tanh()
        out, _mask = ops.dropout(h, 0.25)
        first, second = ops.chunk_rows(out.detach(), 2)
        total = ops.myadd.out(first, second, out=torch.empty_like(first))
        kv = bags.detach().unsqueeze(1)
        ops.reshape_and_cache(kv, kv * 2, self.key_cache, self.value_cache, self.slots, "auto")
        return out.sum(1).float()[:4] + total.sum() + self.key_cache.sum() + self.value_cache.sum()


def _seeded_step(model, x):
    torch.manual_seed(1)  # dropout draws from the default generator
    model.key_cache.zero_()
    model.value_cache.zero_()
    return _step(model, x)


@pytest.mark.parametrize("dynamic", [False, True])
def test_index_list_and_out_ops_compile_with_no_graph_break(dynamic):
    torch._dynamo.reset()
    counters.clear()
    model = IndexModel()
    compiled = torch.compile(model, fullgraph=True, dynamic=dynamic)
    with torch_feature("mutable_returns"):  # the model calls myadd.out
        for rows in (4, 6):
            x = torch.randn(rows, 4)
            want_out, want_grads = _seeded_step(model, x)
            want_cache = model.key_cache.clone()
            got_out, got_grads = _seeded_step(compiled, x)
            torch.testing.assert_close(got_out, want_out)
            for got, want in zip(got_grads, want_grads):
                torch.testing.assert_close(got, want)
            torch.testing.assert_close(model.key_cache, want_cache)  # the mutated buffer, as eager wrote it
        assert sum(counters["graph_break"].values()) == 0


def test_index_list_and_out_ops_export():
    model = IndexModel()
    x = torch.randn(4, 4)
    ep = torch.export.export(model, (x,))
    targets = {str(node.target) for node in ep.graph.nodes if node.op == "call_function"}
    for op in ("embedding_bag_sum.default", "cat_rows.default", "to_dtype.default", "dropout.default",
               "chunk_rows.default", "myadd.out"):
        assert f"opwrap.{op}" in targets, targets
    with torch.no_grad():
        torch.manual_seed(1)
        want = model(x)
        torch.manual_seed(1)
        torch.testing.assert_close(ep.module()(x), want)


def _adam_update(params, exp_avgs, exp_avg_sqs, steps):
    """An optimizer step over graph-input lists, as a compiled torch.optim step: the steps
    counted, then every parameter and moment written in place by one op."""
    grads = [p.grad for p in params]
    torch._foreach_add_(steps, 1)
    ops.adam_step(params, exp_avgs, exp_avg_sqs, grads, steps, lr=0.01, beta1=0.9, beta2=0.999,
                  weight_decay=0.01, eps=1e-8)


@pytest.mark.parametrize("dynamic", [False, True])
def test_adam_step_compiles_with_written_graph_input_lists(dynamic):
    """torch.compile(fullgraph=True) of an optimizer step that writes lists of parameters (leaves
    that require grad, under no_grad as torch.optim steps) and of state tensors, all graph
    inputs: the compiled step leaves them as the eager one does, step after step."""
    torch._dynamo.reset()
    counters.clear()
    g = torch.Generator().manual_seed(0)
    shapes = [(4, 3), (5,)]

    def state():
        params = [torch.nn.Parameter(torch.randn(s, generator=torch.Generator().manual_seed(i)))
                  for i, s in enumerate(shapes)]
        return params, [torch.zeros(s) for s in shapes], [torch.zeros(s) for s in shapes], [torch.tensor(0.0) for _ in shapes]

    eager, compiled_state = state(), state()
    step = torch.compile(torch.no_grad()(_adam_update), fullgraph=True, dynamic=dynamic)
    for _ in range(3):
        grads = [torch.randn(s, generator=g) for s in shapes]
        for params in (eager[0], compiled_state[0]):
            for p, grad in zip(params, grads):
                p.grad = grad.clone()
        torch.no_grad()(_adam_update)(*eager)
        step(*compiled_state)
        for want, got in zip(eager, compiled_state):
            for w, c in zip(want, got):
                torch.testing.assert_close(c.detach(), w.detach())
    assert sum(counters["graph_break"].values()) == 0
    assert counters["stats"]["unique_graphs"] == 1
