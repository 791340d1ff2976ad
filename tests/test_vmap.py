"""torch.vmap over the ops, each compared with a loop over the samples: pointwise ops need
only `pointwise: true` (or their expression); row-wise ops get a rule generated from their
shape rule; the others have hand-written rules (`vmap:`, runtime/opwrap/batching.py), in
float64, for every combination of batched and unbatched tensor arguments, batched at dim 0
and at their last dim; ops without a rule raise a clear error."""

import itertools

import pytest
import torch

import opwrap

ops = opwrap.ops
f64 = torch.float64


def take(a, d, i):
    """Sample i of a (batched at d; None: not batched); a list of tensors takes a list of dims."""
    if isinstance(a, list):
        return [take(x, e, i) for x, e in zip(a, d)]
    return a if d is None else a.select(d, i)


def loop(fn, in_dims, *args):
    """What vmap means: fn on each sample, stacked along dim 0."""
    flat = [(a, d) for x, e in zip(args, in_dims) for a, d in (zip(x, e) if isinstance(x, list) else [(x, e)])]
    size = next(a.size(d) for a, d in flat if d is not None)
    outs = [fn(*[take(a, d, i) for a, d in zip(args, in_dims)]) for i in range(size)]
    if isinstance(outs[0], tuple):
        return tuple(torch.stack(o) for o in zip(*outs))
    return torch.stack(outs)


def batched(shape, d, B=4, make=None):
    make = make or (lambda: torch.randn(*shape))
    return make() if d is None else torch.stack([make() for _ in range(B)], d)


def dims_cases(n):
    """Every combination of n tensor arguments batched or not (one batched at least), the
    batched ones at dim 0, and again at their last dim."""
    cases = []
    for mask in itertools.product((False, True), repeat=n):
        if any(mask):
            cases += [tuple(0 if m else None for m in mask), tuple(-1 if m else None for m in mask)]
    return cases


def check(fn, in_dims, *args, **kw):
    got = torch.vmap(fn, in_dims=in_dims)(*args)
    torch.testing.assert_close(got, loop(fn, in_dims, *args), **kw)
    return got


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


@pytest.mark.parametrize("in_dims", [(0, None), (None, 1), (1, 0)])
def test_linear_rule_without_bias(in_dims):
    # The dispatcher leaves a trailing argument at its default out of the rule's arguments.
    args = [batched(shape, d, B=3) for shape, d in zip(((5, 4), (6, 4)), in_dims)]
    check(ops.linear, in_dims, *args)


def test_backward_through_a_vmapped_op():
    x = torch.randn(4, 5, requires_grad=True)
    torch.vmap(lambda t: ops.mul_constant(ops.myadd(t, t), 3.0))(x).sum().backward()
    torch.testing.assert_close(x.grad, torch.full_like(x, 6.0))


def test_functorch_grad_composes_with_the_autograd_kernels():
    # The Autograd kernels record plain autograd nodes (not C++ torch::autograd::Functions,
    # which functorch refuses): grad, and vmap of grad, work (tests/test_func.py: every op).
    x = torch.randn(4, 3)
    g = torch.func.grad(lambda t: ops.mul_constant(ops.myadd(t, t), 3.0).sum())
    torch.testing.assert_close(g(x[0]), torch.full_like(x[0], 6.0))
    torch.testing.assert_close(torch.vmap(g)(x), torch.full_like(x, 6.0))


def test_an_op_without_a_rule_is_a_clear_error():
    with pytest.raises(RuntimeError, match="opwrap::nonzero_flat: no batching rule for torch.vmap; declare 'pointwise: true'"):
        torch.vmap(ops.nonzero_flat)(torch.randn(2, 3))



# ------------------------------------------------------------------ row-wise ops: generated rules

ROW, COL, PER_ROW = (2, 5), (5,), (2,)  # one sample: rows ["*B", D] with *B = [2], a column [D], per-row ["*B"]


def _saved(x):
    return x.mean(-1), torch.rsqrt(x.var(-1, unbiased=False) + 1e-5)


ROWWISE = {
    "softmax": (lambda x: ops.softmax(x), [ROW]),
    "softmax_backward": (lambda g, y: ops.softmax_backward(g, y), [ROW, ROW]),
    "log_softmax": (lambda x: ops.log_softmax(x), [ROW]),
    "log_softmax_backward": (lambda g, y: ops.log_softmax_backward(g, y), [ROW, ROW]),
    "logsumexp": (lambda x: ops.logsumexp(x), [ROW]),
    "rms_norm": (lambda x, w: ops.rms_norm(x, w, 1e-3), [ROW, COL]),
    "rms_norm_default_eps": (lambda x, w: ops.rms_norm(x, w), [ROW, COL]),
    "layer_norm": (lambda x, w, b: ops.layer_norm(x, w, b, 1e-5), [ROW, COL, COL]),
    "layer_norm_backward": (lambda g, x, w, m, r: ops.layer_norm_backward(g, x, w, m, r), [ROW, ROW, COL, PER_ROW, PER_ROW]),
}


@pytest.mark.parametrize("name", ROWWISE)
def test_rowwise_ops_every_batched_combination(name):
    fn, shapes = ROWWISE[name]
    for in_dims in dims_cases(len(shapes)):
        args = [batched(s, d, B=3, make=lambda s=s: torch.randn(*s, dtype=f64)) for s, d in zip(shapes, in_dims)]
        check(fn, in_dims, *args)


def test_rowwise_ops_rows_of_no_leading_dims_and_nested_vmap():
    x, w = torch.randn(3, 5, dtype=f64), torch.randn(5, dtype=f64)
    check(ops.softmax, (0,), x)  # each sample one row: *B is empty
    check(lambda a, b: ops.rms_norm(a, b, 1e-3), (1, None), x.t().contiguous(), w)
    x4 = torch.randn(2, 3, 4, 5, dtype=f64)
    got = torch.vmap(torch.vmap(ops.log_softmax, in_dims=1), in_dims=0)(x4)
    torch.testing.assert_close(got, torch.log_softmax(x4, -1).transpose(1, 2))
    g, xs = torch.randn(3, 2, 5, dtype=f64), torch.randn(2, 5, dtype=f64)
    m, r = _saved(xs)
    check(lambda a, b, c, d, e: ops.layer_norm_backward(a, b, c, d, e), (0, None, None, None, None), g, xs, w, m, r)


# ------------------------------------------------------------------ elementwise ops

@pytest.mark.parametrize("in_dims", dims_cases(2))
def test_huber_is_pointwise(in_dims):
    args = [batched((3, 5), d, make=lambda: torch.randn(3, 5, dtype=f64)) for d in in_dims]
    check(lambda a, b: ops.huber(a, b, 0.7), in_dims, *args)
    check(ops.huber, in_dims, *args)


@pytest.mark.parametrize("in_dim", [0, 1, -1])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_to_dtype(in_dim, dtype):
    x = batched((3, 4), in_dim, make=lambda: torch.randn(3, 4, dtype=f64) * 10)
    got = check(lambda t: ops.to_dtype(t, dtype), (in_dim,), x)
    assert got.dtype == dtype


@pytest.mark.parametrize("in_dims", dims_cases(2))
def test_bincount_fixed(in_dims):
    """One call for the batch (each sample's bins shifted apart), with weights and without; a
    value outside the bins is the op's error, as a loop raises it."""
    idx = batched((6,), in_dims[0], make=lambda: torch.randint(0, 5, (6,)))
    w = batched((6,), in_dims[1], make=lambda: torch.rand(6, dtype=f64))
    check(lambda i, x: ops.bincount_fixed(i, 5, x), in_dims, idx, w)
    if in_dims[0] is not None:
        check(lambda i: ops.bincount_fixed(i, 5), in_dims[:1], idx)
        # one value out of range, always (the random indices need not hold a 4 to shift to 5)
        bad = torch.where(torch.arange(idx.numel()).view(idx.shape) == 0, 5, idx)
        with pytest.raises(RuntimeError, match=r"argument 'self' holds 5, out of range"):
            torch.vmap(lambda i: ops.bincount_fixed(i, 5), in_dims=in_dims[:1])(bad)


# ------------------------------------------------------------------ matrix products

@pytest.mark.parametrize("in_dims", dims_cases(2))
def test_mymatmul(in_dims):
    args = [batched(s, d, make=lambda s=s: torch.randn(*s, dtype=f64)) for s, d in zip(((3, 4), (4, 5)), in_dims)]
    check(ops.mymatmul, in_dims, *args)


@pytest.mark.parametrize("in_dims", dims_cases(3))
def test_addmv_in_place(in_dims):
    shapes = ((3,), (3, 4), (4,))
    args = [batched(s, d, make=lambda s=s: torch.randn(*s, dtype=f64)) for s, d in zip(shapes, in_dims)]
    fn = lambda s, m, v: ops.addmv_(s, m, v, beta=0.5, alpha=2.0)  # noqa: E731
    if in_dims[0] is None:  # the batched result cannot be written into an unbatched self: aten's addmv_'s error
        with pytest.raises(RuntimeError) as aten, pytest.warns(UserWarning, match="performance drop"):
            torch.vmap(lambda s, m, v: s.addmv_(m, v, beta=0.5, alpha=2.0), in_dims=in_dims)(*args)
        assert "aten::addmv_(self, *extra_args) is not possible" in str(aten.value)
        with pytest.raises(RuntimeError) as ours:
            torch.vmap(fn, in_dims=in_dims)(*args)
        assert str(ours.value) == str(aten.value).replace("aten::addmv_", "opwrap::addmv_")
        return
    self, want_self = args[0], args[0].clone()
    want = loop(fn, in_dims, want_self, *args[1:])  # writes want_self's samples
    got = torch.vmap(fn, in_dims=in_dims)(*args)
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(self, want_self)  # self's batched storage was written
    assert got.data_ptr() == self.data_ptr() or in_dims[0] != 0


def test_an_empty_batch():
    # No sample to call the op on: the rules' one-call-per-sample fallback takes the results'
    # shapes from the fake kernels.
    got = torch.vmap(lambda x, w: ops.rms_norm(x, w, 1e-3), in_dims=(None, 0))(torch.randn(2, 5), torch.randn(0, 5))
    assert [t.shape for t in got] == [(0, 2, 5), (0, 2)]
    assert torch.vmap(ops.softmax)(torch.randn(0, 3)).shape == (0, 3)
    assert torch.vmap(ops.mymatmul)(torch.randn(0, 2, 3), torch.randn(0, 3, 4)).shape == (0, 2, 4)


def test_addmv_default_scalars():
    s, m, v = torch.randn(3, 2, dtype=f64), torch.randn(3, 2, 4, dtype=f64), torch.randn(4, dtype=f64)
    want = s + torch.einsum("bnm,m->bn", m, v)
    torch.vmap(ops.addmv_, in_dims=(0, 0, None))(s, m, v)
    torch.testing.assert_close(s, want)


# ------------------------------------------------------------------ indexed ops and lists

V, D, N, BAGS = 6, 3, 7, 3


def _indices(dtype=torch.int64):
    return torch.randint(0, V, (N,), dtype=dtype)


def _offsets(dtype=torch.int64):
    # Sorted in [0, N]: a first offset above 0 (indices in no bag) and empty bags come up.
    return torch.randint(0, N + 1, (BAGS,)).sort().values.to(dtype)


@pytest.mark.parametrize("index_dtype", [torch.int64, torch.int32])
@pytest.mark.parametrize("in_dims", dims_cases(3))
def test_embedding_bag_sum(in_dims, index_dtype):
    torch.manual_seed(0)
    makes = (lambda: torch.randn(V, D, dtype=f64), lambda: _indices(index_dtype), lambda: _offsets(index_dtype))
    args = [batched(None, d, make=m) for m, d in zip(makes, in_dims)]
    check(ops.embedding_bag_sum, in_dims, *args)


@pytest.mark.parametrize("in_dims", dims_cases(3))
def test_embedding_bag_sum_backward(in_dims):
    makes = (lambda: torch.randn(BAGS, D, dtype=f64), _indices, _offsets)
    args = [batched(None, d, make=m) for m, d in zip(makes, in_dims)]
    check(lambda g, i, o: ops.embedding_bag_sum_backward(g, i, o, V), in_dims, *args)


def test_embedding_bag_errors_are_the_samples():
    w = torch.randn(V, D, dtype=f64)
    idx, off = torch.stack([_indices(), _indices()]), torch.stack([_offsets(), _offsets()])
    idx[1, 2] = V  # out of range in the second sample only: in range once shifted to the folded call's rows
    with pytest.raises(RuntimeError, match=rf"argument 'indices' holds {V}, out of range: its values must lie in \[0, {V}\)"):
        torch.vmap(ops.embedding_bag_sum, in_dims=(0, 0, 0))(torch.stack([w, w]), idx, off)
    with pytest.raises(RuntimeError, match=rf"argument 'indices' holds {V}, out of range: its values must lie in \[0, {V}\)"):
        torch.vmap(lambda g, i, o: ops.embedding_bag_sum_backward(g, i, o, V), in_dims=(None, 0, None))(
            torch.randn(BAGS, D, dtype=f64), idx, off[0])
    idx[1, 2] = 0
    off[1] = torch.tensor([0, 5, 2])
    with pytest.raises(RuntimeError, match=r"argument 'offsets' must not decrease, but offsets\[1\] = 5 > offsets\[2\] = 2"):
        torch.vmap(ops.embedding_bag_sum, in_dims=(None, 0, 0))(w, idx, off)


@pytest.mark.parametrize("in_dims", dims_cases(3))
def test_cat_rows_of_a_list(in_dims):
    parts = [batched((r, 4), d, make=lambda r=r: torch.randn(r, 4, dtype=f64)) for r, d in zip((2, 0, 3), in_dims)]
    check(ops.cat_rows, (list(in_dims),), parts)


# ------------------------------------------------------------------ randomness

@pytest.mark.parametrize("in_dim", [0, 1])
def test_dropout_randomness(in_dim):
    x = batched((5, 6), in_dim, B=4, make=lambda: torch.randn(5, 6, dtype=f64))
    p = 0.5
    samples = lambda t: t.movedim(in_dim, 0)  # noqa: E731
    with pytest.raises(RuntimeError, match="vmap: called random operation while in randomness error mode"):
        torch.vmap(lambda t: ops.dropout(t, p), in_dims=in_dim)(x)

    # "different": every sample its own mask, drawn by one call on the whole batch.
    torch.manual_seed(0)
    out, mask = torch.vmap(lambda t: ops.dropout(t, p), in_dims=in_dim, randomness="different")(x)
    torch.manual_seed(0)
    want_out, want_mask = ops.dropout(x, p)
    torch.testing.assert_close(out, samples(want_out))
    assert torch.equal(mask, samples(want_mask))
    assert not all(torch.equal(mask[0], m) for m in mask[1:])
    torch.testing.assert_close(out, samples(x) * mask / (1 - p))

    # "same": one mask for every sample, drawn as one sample's, from the given generator.
    g = torch.Generator().manual_seed(1)
    out, mask = torch.vmap(lambda t: ops.dropout(t, p, g), in_dims=in_dim, randomness="same")(x)
    _, want_mask = ops.dropout(samples(x)[0], p, torch.Generator().manual_seed(1))
    assert mask.shape == (4, 5, 6) and all(torch.equal(m, want_mask) for m in mask)
    torch.testing.assert_close(out, samples(x) * mask / (1 - p))

