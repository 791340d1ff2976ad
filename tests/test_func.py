"""torch.func over the ops with `derivatives:`: their Autograd kernels record a backward Node
as aten's do (not a C++ torch::autograd::Function, which functorch refuses) and set forward
tangents as aten's do, so grad, vjp, jacrev, jvp, jacfwd, hessian, grad of grad, vmap of grad
and torch.compile of grad work, and give what torch.autograd gives on the same op, in
float64.  An op with no forward formula gives a clear error under forward mode."""


import pytest
import torch
from torch.func import grad, hessian, jacfwd, jacrev, jvp, vjp, vmap

import opwrap  # noqa: F401  (loads the library)
from opwrap_codegen import testing
from conftest import ROOT
from references import PREPARE

DECLS = [d for d in testing.declared_ops(ROOT) if d.devices and testing.differentiable_inputs(d)]
RANDOM = {d.op_name for d in DECLS if any("Generator" in str(a.type) for a in d.schema.arguments)}


def op_of(decl):
    return getattr(getattr(torch.ops.opwrap, decl.name), decl.overload or "default")


def float64_combo(decl):
    return next(c for c in testing.dtype_combinations(decl) if testing.for_gradients(decl, c))


class Case:
    """One sample of an op as a function of its differentiable tensors (each element of a
    Tensor[] one of them): `fn(*tensors)` gives the differentiable results (as
    testing.check_gradients takes the op), and `loss` a scalar of them with fixed random weights."""

    def __init__(self, decl, sample):
        self.decl, self.op, self.kwargs = decl, op_of(decl), sample.kwargs
        names = [a.name for a in decl.schema.arguments if not a.kwarg_only]
        diff = testing.differentiable_inputs(decl)
        self.inputs = [list(v) if isinstance(v, (list, tuple)) else v for v in sample.args]
        self.positions = []
        for i, v in enumerate(self.inputs):
            name = names[i] if i < len(names) else ""
            if name in diff and isinstance(v, torch.Tensor):
                self.positions.append((i, None))
            elif name in diff and isinstance(v, list):
                self.positions += [(i, j) for j, x in enumerate(v) if isinstance(x, torch.Tensor)]
        self.tensors = tuple((self.inputs[i] if j is None else self.inputs[i][j]).detach() for i, j in self.positions)
        self.fn = testing.differentiable_function(decl, self.op, self.inputs, self.kwargs, self.positions)
        g = torch.Generator().manual_seed(7)
        outs = self.fn(*self.tensors)
        self.weights = [torch.randn(o.shape, dtype=o.dtype, generator=g) for o in outs]

    @staticmethod
    def differentiable(decl, sample) -> bool:
        """Whether the sample gives a differentiable input (an optional one may be absent)."""
        given = {n for n, v in testing.bind(decl, sample).items() if v is not None}
        return bool(testing.differentiable_inputs(decl) & given)

    def loss(self, *tensors):
        return sum((o * w).sum() for o, w in zip(self.fn(*tensors), self.weights))

    def leaves(self):
        return tuple(t.detach().clone().requires_grad_(True) for t in self.tensors)

    @property
    def argnums(self):
        return tuple(range(len(self.tensors)))


def cases_of(decl):
    combo = float64_combo(decl)
    primary = testing.torch_dtype(next(iter(combo.values())))  # float64, or an index dtype beside float64 weights
    samples = testing.sample_inputs(decl, primary, prepare=PREPARE.get(decl.op_name), dtypes=combo)
    return [Case(decl, s) for s in samples if Case.differentiable(decl, s)]


def close(got, want):
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, torch.zeros_like(g) if w is None else w)


def eager_grads(case, outputs_fn, leaves, grad_outputs=None, create_graph=False):
    outs = outputs_fn(*leaves)
    return torch.autograd.grad(outs, leaves, grad_outputs, allow_unused=True, materialize_grads=True,
                               create_graph=create_graph)


PARAMS = [pytest.param(d, id=d.op_name) for d in DECLS]


@pytest.mark.parametrize("decl", PARAMS)
def test_grad_and_vjp_match_autograd(decl):
    for case in cases_of(decl):
        want = eager_grads(case, case.loss, case.leaves())
        close(grad(case.loss, argnums=case.argnums)(*case.tensors), want)
        outs, vjp_fn = vjp(case.fn, *case.tensors)
        close(vjp_fn(tuple(case.weights)), want)
        close(outs, case.fn(*case.tensors))


@pytest.mark.parametrize("decl", [p for p in PARAMS if p.values[0].op_name not in RANDOM])
def test_jacrev_matches_autograd_jacobian(decl):
    # jacrev is vmap over vjp: the op and the ops its formulas call need batching rules (every
    # bundled op with derivatives has one).
    for case in cases_of(decl)[:2]:
        got = jacrev(case.fn, argnums=case.argnums)(*case.tensors)
        want = torch.autograd.functional.jacobian(case.fn, case.tensors)
        for g_out, w_out in zip(got, want, strict=True):
            close(g_out, w_out)


@pytest.mark.parametrize("decl", PARAMS)
def test_grad_of_grad_matches_double_backward(decl):
    for case in cases_of(decl)[:2]:
        g = torch.Generator().manual_seed(3)
        v = [torch.randn(t.shape, dtype=t.dtype, generator=g) for t in case.tensors]

        def gv(*tensors):
            gs = grad(case.loss, argnums=case.argnums)(*tensors)
            return sum((x * y).sum() for x, y in zip(gs, v))

        if decl.derivatives.once_differentiable:
            with pytest.raises(RuntimeError, match="once_differentiable"):
                grad(gv, argnums=case.argnums)(*case.tensors)
            continue
        got = grad(gv, argnums=case.argnums)(*case.tensors)
        leaves = case.leaves()
        first = eager_grads(case, case.loss, leaves, create_graph=True)
        total = sum((x * y).sum() for x, y in zip(first, v))
        want = (torch.autograd.grad(total, leaves, allow_unused=True, materialize_grads=True) if total.requires_grad
                else [None] * len(leaves))  # a gradient that does not depend on the inputs
        close(got, want)


def reference_jvp(case, tangents):
    """J @ t from the reverse-mode Jacobian (torch.autograd.functional.jacobian), so the
    reference uses none of the forward formulas under test."""
    jac = torch.autograd.functional.jacobian(case.fn, case.tensors)
    outs = case.fn(*case.tensors)
    return tuple(sum((j.reshape(o.numel(), -1) @ t.reshape(-1)).reshape(o.shape) for j, t in zip(row, tangents))
                 for o, row in zip(outs, jac, strict=True))


def tangents_of(case, seed=11):
    g = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(t.shape, dtype=t.dtype, generator=g) for t in case.tensors)


@pytest.mark.parametrize("decl", PARAMS)
def test_jvp_and_forward_ad_match_the_jacobian(decl):
    import torch.autograd.forward_ad as fwAD

    for case in cases_of(decl)[:2]:
        t = tangents_of(case)
        want = reference_jvp(case, t)
        outs, got = jvp(case.fn, case.tensors, t)
        close(got, want)
        close(outs, case.fn(*case.tensors))
        with fwAD.dual_level():
            duals = [fwAD.make_dual(x, dx) for x, dx in zip(case.tensors, t)]
            close([fwAD.unpack_dual(o).tangent for o in case.fn(*duals)], want)


@pytest.mark.parametrize("decl", [p for p in PARAMS if p.values[0].op_name not in RANDOM])
def test_jacfwd_matches_autograd_jacobian(decl):
    # jacfwd is vmap over jvp: the ops the forward formulas call need batching rules too.
    for case in cases_of(decl)[:2]:
        got = jacfwd(case.fn, argnums=case.argnums)(*case.tensors)
        want = torch.autograd.functional.jacobian(case.fn, case.tensors)
        for g_out, w_out in zip(got, want, strict=True):
            close(g_out, w_out)


@pytest.mark.parametrize("decl", [p for p in PARAMS if p.values[0].op_name not in RANDOM])
def test_hessian_matches_autograd(decl):
    # torch.func.hessian is jacfwd of jacrev: forward mode over the backward formulas.
    case = cases_of(decl)[0]
    f = hessian(case.loss, argnums=case.argnums)
    if decl.derivatives.once_differentiable:
        with pytest.raises(RuntimeError, match="once_differentiable"):
            f(*case.tensors)
        return
    got = f(*case.tensors)
    want = torch.autograd.functional.hessian(case.loss, case.tensors)
    for g_row, w_row in zip(got, want, strict=True):
        close(g_row, w_row)


def test_hessian_of_gelu_against_aten():
    x = torch.randn(5, dtype=torch.float64)
    h = hessian(lambda t: torch.ops.opwrap.gelu_tanh(t).sum())(x)
    want = torch.autograd.functional.hessian(lambda t: torch.nn.functional.gelu(t, approximate="tanh").sum(), x)
    torch.testing.assert_close(h, want)
    torch.testing.assert_close(jacrev(jacrev(lambda t: torch.ops.opwrap.gelu_tanh(t).sum()))(x), want)


@pytest.mark.parametrize("decl", [p for p in PARAMS if p.values[0].op_name not in RANDOM])
def test_vmap_of_grad_matches_a_loop(decl):
    case = cases_of(decl)[0]
    g = torch.Generator().manual_seed(5)
    jitter = lambda t: torch.stack([t + 0.1 * torch.randn(t.shape, dtype=t.dtype, generator=g)  # noqa: E731
                                    for _ in range(3)])
    batch = [jitter(t) for t in case.tensors]
    # An argument the op writes (addmv_'s self) is batched too: in place into an unbatched
    # tensor with batched operands is torch's "vmap: ... is not possible" error, as for aten's.
    positional = [a for a in decl.schema.arguments if not a.kwarg_only]
    written = [i for i, a in enumerate(positional[: len(case.inputs)])
               if a.is_write and isinstance(case.inputs[i], torch.Tensor)]
    written_batch = [jitter(case.inputs[i]) for i in written]

    def loss(*args):
        originals = [case.inputs[i] for i in written]
        for i, w in zip(written, args[len(case.tensors):]):
            case.inputs[i] = w
        try:
            return case.loss(*args[: len(case.tensors)])
        finally:
            for i, w in zip(written, originals):
                case.inputs[i] = w

    got = vmap(grad(loss, argnums=case.argnums))(*batch, *written_batch)
    for b in range(3):
        leaves = tuple(x[b].clone().requires_grad_(True) for x in batch)
        want = eager_grads(case, lambda *t: loss(*t, *(w[b] for w in written_batch)), leaves)
        close([x[b] for x in got], want)


@pytest.mark.parametrize("name", ["gelu_tanh", "sincos", "linear", "mul_constant"])
def test_compiled_grad_has_no_graph_break(name):
    from torch._dynamo.utils import counters

    decl = next(d for d in DECLS if d.op_name == name)
    case = cases_of(decl)[0]
    torch._dynamo.reset()
    counters.clear()
    f = torch.compile(grad(case.loss, argnums=case.argnums), fullgraph=True, backend="aot_eager")
    close(f(*case.tensors), eager_grads(case, case.loss, case.leaves()))
    assert sum(counters["graph_break"].values()) == 0


@pytest.mark.parametrize("transform", ["jvp", "vmap_grad", "hessian", "jacfwd"])
def test_compiled_transforms_have_no_graph_break(transform):
    from torch._dynamo.utils import counters

    x, b = torch.randn(3, 4, dtype=torch.float64), torch.randn(4, dtype=torch.float64)
    loss = lambda x, b: torch.ops.opwrap.bias_gelu(x, b).sum()  # noqa: E731
    f = {"jvp": lambda x, b: jvp(lambda x: torch.ops.opwrap.bias_gelu(x, b), (x,), (torch.ones_like(x),))[1],
         "vmap_grad": vmap(grad(loss), in_dims=(0, None)),
         "hessian": lambda x, b: hessian(loss)(x[0], b),
         "jacfwd": lambda x, b: jacfwd(lambda t: torch.ops.opwrap.gelu_tanh(t))(x[0])}[transform]
    torch._dynamo.reset()
    counters.clear()
    compiled = torch.compile(f, fullgraph=True, backend="aot_eager")
    torch.testing.assert_close(compiled(x, b), f(x, b))
    assert sum(counters["graph_break"].values()) == 0


def test_per_sample_gradients_as_the_readme_computes_them():
    # README, torch.func: a linear layer's cross-entropy, one gradient per sample.
    g = torch.Generator().manual_seed(4)
    weight, bias = torch.randn(10, 64, generator=g), torch.randn(10, generator=g)
    x = torch.randn(32, 64, generator=g)
    y = torch.nn.functional.one_hot(torch.randint(0, 10, (32,), generator=g), 10).float()

    def loss(params, x, y):
        logits = torch.ops.opwrap.linear(x.unsqueeze(0), params["weight"], params["bias"])
        return -(torch.ops.opwrap.log_softmax(logits)[0] * y).sum()

    got = vmap(grad(loss), in_dims=(None, 0, 0))({"weight": weight, "bias": bias}, x, y)
    for i in range(32):
        w, b = weight.clone().requires_grad_(), bias.clone().requires_grad_()
        (-(torch.log_softmax(torch.nn.functional.linear(x[i], w, b), -1) * y[i]).sum()).backward()
        torch.testing.assert_close(got["weight"][i], w.grad)
        torch.testing.assert_close(got["bias"][i], b.grad)


def test_an_in_place_op_carries_its_tangent():
    # addmv_ writes self: its new tangent replaces the old one, in place, as aten's addmv_'s.
    import torch.autograd.forward_ad as fwAD

    g = torch.Generator().manual_seed(2)
    self, mat, vec = (torch.randn(*s, dtype=torch.float64, generator=g) for s in ((4,), (4, 3), (3,)))
    ds, dm, dv = (torch.randn_like(t) for t in (self, mat, vec))
    with fwAD.dual_level():
        out = torch.ops.opwrap.addmv_(fwAD.make_dual(self.clone(), ds.clone()), fwAD.make_dual(mat, dm),
                                      fwAD.make_dual(vec, dv), beta=0.5, alpha=2.0)
        tangent = fwAD.unpack_dual(out).tangent
    torch.testing.assert_close(tangent, 0.5 * ds + 2.0 * (dm @ vec + mat @ dv))


def test_eager_graph_is_unchanged_in_shape():
    # The node's name, the one slot per return (a non-differentiable return's undefined), and
    # nothing recorded when nothing requires grad.
    x, w = torch.randn(2, 4, dtype=torch.float64, requires_grad=True), torch.randn(4, dtype=torch.float64)
    out, rstd = torch.ops.opwrap.rms_norm(x, w)
    assert out.grad_fn.name() == "opwrap::rms_normBackward" and rstd.grad_fn is None
    assert torch.ops.opwrap.rms_norm(x.detach(), w)[0].grad_fn is None


# ---------------------------------------------------------- a library made with `codegen init`
from test_rowwise import rowlib  # noqa: E402,F401  (its fixture: conftest's sharedlib, built once per run)


@pytest.mark.slow(120)
@pytest.mark.xdist_group("sharedlib")  # on the worker that builds it, not waiting for it on another
def test_func_on_a_user_library(rowlib):
    ops = rowlib[0].ops
    a, b = torch.randn(4, 5, dtype=torch.float64), torch.randn(4, 5, dtype=torch.float64)

    def loss(a, b):
        total, product = ops.pair(a, b)
        return (total * 2 + product).sum()

    ga, gb = grad(loss, argnums=(0, 1))(a, b)
    torch.testing.assert_close(ga, 2 + b)
    torch.testing.assert_close(gb, 2 + a)
    va, vb = vmap(grad(loss, argnums=(0, 1)))(a, b)  # each row its own loss
    torch.testing.assert_close(va, 2 + b)
    torch.testing.assert_close(vb, 2 + a)
    x, off = torch.randn(3, 6, dtype=torch.float64), torch.randn(3, dtype=torch.float64)
    gx, goff = grad(lambda x, o: (ops.center(x, o) ** 2).sum(), argnums=(0, 1))(x, off)
    xs, os_ = x.clone().requires_grad_(), off.clone().requires_grad_()
    ((xs - xs.mean(-1, keepdim=True) + os_.unsqueeze(-1)) ** 2).sum().backward()
    torch.testing.assert_close(gx, xs.grad)
    torch.testing.assert_close(goff, os_.grad)
    # pair is pointwise: its forward derivatives come from its backward formulas.
    da, db = torch.randn_like(a), torch.randn_like(b)
    _, (dt, dp) = jvp(ops.pair, (a, b), (da, db))
    torch.testing.assert_close(dt, da + db)
    torch.testing.assert_close(dp, da * b + a * db)
    h = hessian(loss, argnums=(0, 1))(a[0], b[0])  # the second derivative of sum(a * b): the identity across
    torch.testing.assert_close(h[0][1], torch.eye(5, dtype=torch.float64))
    # center is row-wise with no forward formula ('result:'): forward mode names the op.
    with pytest.raises(NotImplementedError, match=r"sharedlib::center: forward-mode AD .* needs a forward-derivative"):
        jvp(lambda x: ops.center(x, off), (x,), (torch.ones_like(x),))
