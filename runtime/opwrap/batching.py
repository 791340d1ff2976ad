"""Hand-written batching rules, named by declarations' `vmap:` field.

Each has `torch.library.register_vmap`'s signature, `(info, in_dims, *args, **kwargs) ->
(outputs, out_dims)`: `args` are the op's positional arguments as the dispatcher hands them
(those left at their defaults at the end omitted, so a rule takes them with defaults), the
keyword-only ones come in `kwargs`, and `in_dims` has one entry per argument (a list of
dims for a `Tensor[]`).  A rule folds the batch into one call on the whole batch where the
op allows it, and runs one call per sample (`_runtime.per_sample`) where it does not.  A
folded call's error would name folded shapes and values, so on an error the rule runs the
samples one by one and raises the error a sample raises (`_folded`)."""

from __future__ import annotations

import torch

from ._generated._runtime import batch_first, per_sample, reduced_dims, sample

ops = torch.ops.opwrap


def _folded(fold, op, info, in_dims, args, kwargs=None):
    """`fold()`, the one call on the whole batch; where it fails (arguments the op refuses,
    which the folding keeps refused, or of a rank the folding did not expect), the error of
    the first sample whose own call fails."""
    try:
        return fold()
    except Exception:
        try:
            per_sample(op, info.batch_size, in_dims, args, kwargs or {})
        except Exception as e:
            raise e from None
        raise


def linear(info, in_dims, input, weight, bias=None):
    """vmap over opwrap::linear.  A batched input alone folds into the rows: [B, *N, K] is
    [B*prod(N), K] against the same weight.  A batched weight or bias has no single-call form, so
    those samples run one call each."""
    op = ops.linear.default
    args = (input, weight) if bias is None else (input, weight, bias)
    if all(d is None for d in in_dims[1:]):
        def fold():
            x = input.movedim(in_dims[0], 0)  # [B, *N, K]: rows of any number of dimensions
            return op(x.reshape(-1, x.shape[-1]), weight, bias).view(*x.shape[:-1], weight.shape[0])

        return _folded(fold, op, info, in_dims, args), 0
    return per_sample(op, info.batch_size, in_dims, args, {})


def to_dtype(info, in_dims, self, dtype):
    """vmap over opwrap::to_dtype: elementwise, so the batched tensor converts in one call and
    its batch dimension stays where it is."""
    return ops.to_dtype.default(self, dtype), in_dims[0]


def sum_dim(info, in_dims, self, dim, keepdim=False, *, dtype=None):
    """vmap over opwrap::sum_dim: the batch dimension moved to the front and each sample's
    dims shifted past it (None or [] is every sample dimension; a 0-d sample sums itself), so
    the whole batch is one call, batched at 0.  The dims are checked against a sample's rank
    first, with the op's own messages (_runtime.reduced_dims)."""
    x = self.movedim(in_dims[0], 0)
    dims = [d + 1 for d in reduced_dims("opwrap::sum_dim", "dim", "self", x.dim() - 1, dim)]
    if x.dim() == 1:  # 0-d samples: each is its own sum
        return ops.sum_dim.default(x.unsqueeze(1), [1], False, dtype=dtype), 0
    return ops.sum_dim.default(x, dims, keepdim, dtype=dtype), 0


def mymatmul(info, in_dims, self, other):
    """vmap over opwrap::mymatmul (self [N, K] @ other [K, M]).  A batched self alone folds
    into the rows ([B, N, K] is [B*N, K]); a batched other alone into the columns ([B, K, M]
    is [K, B*M], the result [N, B*M] batched at dim 1).  Both batched: one call per sample (a
    batch of products is no single product)."""
    op = ops.mymatmul.default
    self_dim, other_dim = in_dims
    B = info.batch_size
    if other_dim is None:
        def rows():
            x = self.movedim(self_dim, 0)
            _, N, K = x.shape
            return op(x.reshape(B * N, K), other).view(B, N, other.shape[1])

        return _folded(rows, op, info, in_dims, (self, other)), 0
    if self_dim is None:
        def columns():
            y = other.movedim(other_dim, 1)
            K, _, M = y.shape
            return op(self, y.reshape(K, B * M)).view(self.shape[0], B, M)

        return _folded(columns, op, info, in_dims, (self, other)), 1
    return per_sample(op, B, in_dims, (self, other), {})


def _inplace_unbatched(op: str):
    """torch's error for an in-place op whose self is not batched but another input is (the
    batched result would not fit in self), as aten's in-place ops raise it under vmap."""
    try:
        from torch._functorch.pyfunctorch import retrieve_current_functorch_interpreter
        where = f"at level {retrieve_current_functorch_interpreter().level()}"
    except Exception:  # a private API: the message without the level
        where = "in a vmap"
    return RuntimeError(
        f"vmap: {op}(self, *extra_args) is not possible because there exists a Tensor `other` in extra_args that has "
        "more elements than `self`. This happened due to `other` being vmapped over but `self` not being vmapped over "
        f"{where}. Please try to use out-of-place operators instead of {op}. If said operator is being called inside "
        "the PyTorch framework, please file a bug report instead.")


def addmv_(info, in_dims, self, mat, vec, **kwargs):
    """vmap over opwrap::addmv_ (self [N] = beta * self + alpha * mat [N, M] @ vec [M], in
    place): the op writes self's batched storage, and the rule returns self itself, which
    register_vmap hands back as the batched input it came from.  An unbatched self with
    another input batched cannot hold the batched result: torch's in-place error.  A batched
    mat with vec unbatched folds into the rows (self [B*N], mat [B*N, M]; written back when
    self's batch is not outermost in memory).  Otherwise one call per sample, each writing its
    own slice of self: a batched vec is a matrix product, no matrix-vector one, and an
    unbatched mat would be copied once per sample to fold."""
    op = ops.addmv_.default
    self_dim, mat_dim, vec_dim = in_dims
    if self_dim is None:
        raise _inplace_unbatched("opwrap::addmv_")
    B = info.batch_size
    s = self.movedim(self_dim, 0)
    if mat_dim is not None and vec_dim is None:
        def fold():
            N = s.shape[1]
            contiguous = s.is_contiguous()  # the batch outermost in memory: write self through a view
            flat = (s if contiguous else s.contiguous()).view(B * N)
            op(flat, mat.movedim(mat_dim, 0).reshape(B * N, mat.shape[-1]), vec, **kwargs)
            if not contiguous:
                s.copy_(flat.view(B, N))

        _folded(fold, op, info, (0, mat_dim, vec_dim), (s, mat, vec), kwargs)
        return self, self_dim
    for i in range(B):
        op(s[i], sample(mat, mat_dim, i), sample(vec, vec_dim, i), **kwargs)
    return self, self_dim


def _bags(B, indices, i_dim, offsets, o_dim, rows):
    """The bags of every sample as the bags of one call, and how many bags a sample has:
    sample b's indices shifted by b * rows (`rows`: the rows of a table per sample; None: one
    table for all) and its offsets by b * N, after a first bag of its own that holds the
    indices before its first offset (no bag's; its row of the result is dropped), so each
    sample's last bag ends where its own indices do.  An index or offset out of its sample's
    range becomes -1, out of range in the folded call too.  int32 indices that the shifts
    would overflow become int64 (indices and offsets have one dtype)."""
    idx = batch_first(indices, i_dim, B)
    off = batch_first(offsets, o_dim, B)
    N, bags = idx.shape[1], off.shape[1]
    if idx.dtype == torch.int32 and B * max(rows or 0, N + 1) > torch.iinfo(torch.int32).max:
        idx, off = idx.long(), off.long()
    b = torch.arange(B, device=idx.device, dtype=idx.dtype).unsqueeze(1)
    if rows is not None:
        idx = torch.where((idx >= 0) & (idx < rows), idx + b * rows, -1)
    start = b * N
    off = torch.where((off >= 0) & (off <= N), off + start, -1)
    return idx.reshape(-1), torch.cat([start, off], 1).reshape(-1), bags


def embedding_bag_sum(info, in_dims, weight, indices, offsets):
    """vmap over opwrap::embedding_bag_sum (weight [V, D], indices [N], offsets [Bags]), one
    call for any batched arguments.  A batched weight with the bags unbatched folds into the
    features: [B, V, D] is [V, B*D], the result [Bags, B*D] batched at dim 1.  Batched indices
    or offsets: every sample's bags are bags of one call (`_bags`), over the samples' tables
    stacked ([B*V, D]) where the weight is batched, the result [B*(Bags+1), D], each sample's
    first row dropped."""
    op = ops.embedding_bag_sum.default
    w_dim, i_dim, o_dim = in_dims
    B = info.batch_size
    args = (weight, indices, offsets)
    if i_dim is None and o_dim is None:
        def features():
            w = weight.movedim(w_dim, 1)
            V, _, D = w.shape
            return op(w.reshape(V, B * D), indices, offsets).view(offsets.shape[0], B, D)

        return _folded(features, op, info, in_dims, args), 1

    def fold():
        table, rows = weight, None
        if w_dim is not None:
            w = weight.movedim(w_dim, 0)
            rows = w.shape[1]
            table = w.reshape(B * rows, w.shape[2])
        idx, off, bags = _bags(B, indices, i_dim, offsets, o_dim, rows)
        out = op(table, idx, off)
        return out.view(B, bags + 1, out.shape[1])[:, 1:]

    return _folded(fold, op, info, in_dims, args), 0


def embedding_bag_sum_backward(info, in_dims, grad_output, indices, offsets, num_weights):
    """vmap over opwrap::embedding_bag_sum_backward (grad_output [Bags, D] scattered into
    [num_weights, D]), one call for any batched arguments.  A batched grad_output with the
    bags unbatched folds into the features ([B, Bags, D] is [Bags, B*D]; the result
    [num_weights, B*D] batched at dim 1).  Batched indices or offsets: every sample's bags are
    bags of one call (`_bags`) scattering into its own rows of [B*num_weights, D], each
    sample's first bag a row of zeros."""
    op = ops.embedding_bag_sum_backward.default
    g_dim, i_dim, o_dim = in_dims[:3]
    B = info.batch_size
    args = (grad_output, indices, offsets, num_weights)
    if i_dim is None and o_dim is None:
        def features():
            g = grad_output.movedim(g_dim, 1)
            bags, _, D = g.shape
            return op(g.reshape(bags, B * D), indices, offsets, num_weights).view(num_weights, B, D)

        return _folded(features, op, info, in_dims, args), 1

    def fold():
        g = batch_first(grad_output, g_dim, B)
        D = g.shape[2]
        g = torch.cat([g.new_zeros(B, 1, D), g], 1).reshape(-1, D)
        idx, off, _ = _bags(B, indices, i_dim, offsets, o_dim, num_weights)
        return op(g, idx, off, B * num_weights).view(B, num_weights, D)

    return _folded(fold, op, info, in_dims, args), 0


def cat_rows(info, in_dims, tensors):
    """vmap over opwrap::cat_rows (tensors [R_i, D] -> [sum R_i, D]), one call for any batched
    tensors: the list's in_dims are a list, one per element.  The batch folds into the
    columns: each [B, R_i, D] is [R_i, B*D] (an unbatched one expanded to the batch), the
    result [sum R_i, B*D] batched at dim 1."""
    op = ops.cat_rows.default
    B = info.batch_size

    def fold():
        cols = []
        for t, d in zip(tensors, in_dims[0]):
            t = t.movedim(d, 1) if d is not None else t.unsqueeze(1).expand(t.shape[0], B, t.shape[1])
            cols.append(t.reshape(t.shape[0], B * t.shape[2]))
        out = op(cols)
        return out.view(out.shape[0], B, out.shape[1] // B)

    return _folded(fold, op, info, in_dims, (tensors,)), 1


# torch's error for a random op under vmap(randomness="error") (functorch's check_randomness).
_RANDOMNESS_ERROR = ("vmap: called random operation while in randomness error mode. Please either use the 'same' or "
                     "'different' randomness flags on vmap or perform the randomness operation out of vmap")


def dropout(info, in_dims, self, p, generator=None):
    """vmap over opwrap::dropout, by `torch.vmap(randomness=...)`, as aten's dropout batches:
    "error" is torch's error; "different" draws every sample's mask independently, which one
    call on the whole batch does; "same" draws one sample's mask (one call on one sample) and
    applies it to every sample, `self * mask / (1 - p)`.  (Like every register_vmap rule, it
    only runs when self is batched: an unbatched self under vmap is one draw, broadcast.)"""
    op = ops.dropout.default
    if info.randomness == "error":
        raise RuntimeError(_RANDOMNESS_ERROR)
    d = in_dims[0]
    if info.randomness == "different":
        return op(self, p, generator), (d, d)
    _, mask = op(self.select(d, 0), p, generator)
    return (self.movedim(d, 0) * mask * (1.0 / (1.0 - p)), mask), (0, None)


def bincount_fixed(info, in_dims, self, bins, weights=None):
    """vmap over opwrap::bincount_fixed, one call: sample b counts into bins [b * bins,
    (b + 1) * bins) of one count of B * bins bins, its values shifted by b * bins.  A value
    outside [0, bins) would land in another sample's bins, so such a batch runs sample by
    sample, where the op refuses it."""
    op = ops.bincount_fixed.default
    B = info.batch_size
    s_dim, w_dim = in_dims[0], in_dims[2] if len(in_dims) > 2 else None
    args = (self, bins) if weights is None else (self, bins, weights)

    def fold():
        x = batch_first(self, s_dim, B)  # [B, N]
        if x.numel() and (bool(x.min() < 0) or bool(x.max() >= bins)):
            raise ValueError("a value outside [0, bins)")
        shift = torch.arange(B, device=x.device, dtype=x.dtype).mul_(bins).unsqueeze(1)
        w = None if weights is None else batch_first(weights, w_dim, B).reshape(-1)
        return op((x + shift).reshape(-1), B * bins, w).view(B, bins)

    return _folded(fold, op, info, in_dims, args), 0
