"""Hand-written batching rules, named by declarations' `vmap:` field."""

import torch


def linear(info, in_dims, input, weight, bias=None):
    """vmap over opwrap::linear.  A batched input alone folds into the rows: [B, N, K] is
    [B*N, K] against the same weight.  A batched weight or bias has no single-call form, so
    those samples run one call each."""
    input_dim, weight_dim, bias_dim = in_dims
    op = torch.ops.opwrap.linear.default
    if weight_dim is None and bias_dim is None:
        x = input.movedim(input_dim, 0)
        B, N, K = x.shape
        return op(x.reshape(B * N, K), weight, bias).reshape(B, N, -1), 0
    take = lambda t, d, i: t if d is None else t.select(d, i)
    outs = [op(take(input, input_dim, i), take(weight, weight_dim, i), None if bias is None else take(bias, bias_dim, i))
            for i in range(info.batch_size)]
    return torch.stack(outs), 0
