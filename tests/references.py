"""Eager PyTorch references for the bundled ops, used by test_declared_ops.py.  Each takes
the op's arguments (floating tensors arrive as float64) and returns its results."""

import math

import torch
import torch.nn.functional as F


def _rms_norm(input, weight, eps=1e-6):
    rstd = torch.rsqrt(input.pow(2).mean(-1) + eps)
    return input * rstd.unsqueeze(-1) * weight, rstd


def _layer_norm(input, weight, bias, eps=1e-5):
    mean = input.mean(-1)
    rstd = torch.rsqrt(input.var(-1, unbiased=False) + eps)
    return F.layer_norm(input, input.shape[-1:], weight, bias, eps), mean, rstd


def _layer_norm_backward(grad_out, input, weight, saved_mean, saved_rstd):
    xhat = (input - saved_mean.unsqueeze(-1)) * saved_rstd.unsqueeze(-1)
    gw = grad_out * weight
    return saved_rstd.unsqueeze(-1) * (gw - gw.mean(-1, keepdim=True) - xhat * (gw * xhat).mean(-1, keepdim=True))


def _bucketize_count(values, boundaries):
    indices = torch.bucketize(values, boundaries)
    return indices, torch.bincount(indices.flatten(), minlength=boundaries.numel() + 1)


def _gelu_tanh_double_backward(grad, grad_output, self):
    shape = torch.broadcast_shapes(grad.shape, grad_output.shape, self.shape)
    x = self.detach().expand(shape).clone().requires_grad_()
    with torch.enable_grad():
        g = torch.ops.aten.gelu_backward(grad_output.expand(shape), x, approximate="tanh")
        return torch.autograd.grad(g, x, grad.expand(shape))[0]


def _bag_ranges(offsets, n):
    starts = offsets.tolist()
    return zip(starts, starts[1:] + [n])


def _embedding_bag_sum(weight, indices, offsets):
    out = weight.new_zeros(offsets.numel(), weight.size(1))
    for b, (start, stop) in enumerate(_bag_ranges(offsets, indices.numel())):
        out[b] = weight[indices[start:stop].long()].sum(0)
    return out


def _embedding_bag_sum_backward(grad, indices, offsets, num_weights):
    out = grad.new_zeros(num_weights, grad.size(1))
    for b, (start, stop) in enumerate(_bag_ranges(offsets, indices.numel())):
        out.index_add_(0, indices[start:stop].long(), grad[b].expand(stop - start, -1))
    return out


def _reshape_and_cache(key, value, key_cache, value_cache, slot_mapping, kv_cache_dtype):
    block_size = key_cache.size(1)
    for t, s in enumerate(slot_mapping.tolist()):
        if s >= 0:
            key_cache[s // block_size, s % block_size] = key[t]
            value_cache[s // block_size, s % block_size] = value[t]


def _dropout(self, p, generator=None):
    """The kernel's draws: one uniform double per element, in order, kept when below 1 - p
    (at::bernoulli_distribution<double>), as torch.rand draws them on the CPU."""
    keep = torch.rand(self.shape, dtype=torch.float64, generator=generator) < 1 - p
    return self * keep / (1 - p), keep


def _adam_step(params, exp_avgs, exp_avg_sqs, grads, state_steps, *, lr, beta1, beta2, weight_decay, eps,
               maximize=False):
    torch._fused_adam_(params, grads, exp_avgs, exp_avg_sqs, [], state_steps, lr=lr, beta1=beta1, beta2=beta2,
                       weight_decay=weight_decay, eps=eps, amsgrad=False, maximize=maximize)


REFERENCES = {
    "myadd": lambda self, other: self + other,
    "myadd.out": lambda self, other, *, out: self + other,  # the result; check_reference checks it is `out`
    "mul_constant": lambda self, constant: self * constant,
    "linear": lambda input, weight, bias=None: F.linear(input, weight, bias),
    "addmv_": lambda self, mat, vec, *, beta=1, alpha=1: torch.addmv(self, mat, vec, beta=beta, alpha=alpha),
    "fill_natural": lambda size: torch.arange(math.prod(size)).reshape(size),
    "rms_norm": _rms_norm,
    "sincos": lambda self: (self.sin(), self.cos()),
    "softmax": lambda self: torch.softmax(self, -1),
    "softmax_backward": lambda grad_output, output: torch._softmax_backward_data(grad_output, output, -1,
                                                                                  output.dtype),
    "log_softmax": lambda self: torch.log_softmax(self, -1),
    "log_softmax_backward": lambda grad_output, output: torch._log_softmax_backward_data(grad_output, output, -1,
                                                                                         output.dtype),
    "logsumexp": lambda self: torch.logsumexp(self, -1),
    "layer_norm": _layer_norm,
    "layer_norm_backward": _layer_norm_backward,
    "bucketize_count": _bucketize_count,
    "nonzero_flat": lambda self: torch.nonzero(self.flatten()).flatten(),
    "mymatmul": lambda self, other: self @ other,
    "gelu_tanh": lambda self: F.gelu(self, approximate="tanh"),
    "bias_gelu": lambda self, bias: F.gelu(self + bias, approximate="tanh"),
    "gelu_tanh_backward": lambda grad_output, self: torch.ops.aten.gelu_backward(grad_output, self, approximate="tanh"),
    "gelu_tanh_double_backward": _gelu_tanh_double_backward,
    "embedding_bag_sum": _embedding_bag_sum,
    "embedding_bag_sum_backward": _embedding_bag_sum_backward,
    "to_dtype": lambda self, dtype: self.to(dtype),
    "reshape_and_cache": _reshape_and_cache,
    "dropout": _dropout,
    "cat_rows": lambda tensors: torch.cat(tensors, 0),
    "chunk_rows": lambda self, chunks: list(torch.chunk(self, chunks)),
    "huber": lambda input, target, delta=1.0: F.huber_loss(input, target, reduction="none", delta=delta),
    "dedup_consecutive": lambda self: torch.unique_consecutive(self.flatten()),
    "bincount_fixed": lambda self, bins, weights=None: torch.bincount(self.long(), weights, minlength=bins),
    "sum_dim": lambda self, dim, keepdim=False, *, dtype=None: torch.sum(self, dim, keepdim, dtype=dtype),
    "adam_step": _adam_step,
    "quantize_fp8": lambda input, scale, dtype: (input.float() / scale.float()).clamp(  # in float, as the kernel
        -torch.finfo(dtype).max, torch.finfo(dtype).max).to(dtype),
}


def _sorted_boundaries(values):
    values["boundaries"] = values["boundaries"].sort().values
    return values


def _sorted_offsets(values):
    values["offsets"] = values["offsets"].sort().values
    return values


def _distinct_slots(values):
    """vLLM's slots of one batch are distinct (-1: a padding token); the kernel's 'auto'."""
    slots, cache = values["slot_mapping"], values["key_cache"]
    g = torch.Generator().manual_seed(slots.numel())
    free = torch.randperm(cache.size(0) * cache.size(1), generator=g)[: slots.numel()]
    picked = torch.full_like(slots, -1)
    picked[: free.numel()] = free.to(slots.dtype)
    if picked.numel() > 1:
        picked[-1] = -1  # a padding token
    values["slot_mapping"] = picked
    values["kv_cache_dtype"] = "auto"
    return values


def _positive_delta(values):
    values["delta"] = 0.75  # the kernel refuses delta <= 0
    return values


def _positive_scale(values):
    values["scale"] = values["scale"].abs() + 0.25  # a scale is positive (amax / float8 max)
    return values


def _dropout_p(values):
    values["p"] = 0.25
    return values


def _adam_state(values):
    """An optimizer's state: every list as long as params (two elements at least), the i-th
    elements of params' shape, second moments not negative, steps 1 to 4 (float32 scalars, as
    torch.optim keeps them), and hyperparameters of an optimizer (weight decay when maximizing)."""
    params = list(values["params"])
    g = torch.Generator().manual_seed(len(params))
    while len(params) < 2:
        params.append(torch.randn(params[0].shape, generator=g).to(params[0].dtype))
    like = lambda scale: [(torch.randn(p.shape, generator=g) * scale).to(p.dtype) for p in params]  # noqa: E731
    values.update(params=params, exp_avgs=like(0.1), grads=like(1.0),
                  exp_avg_sqs=[x.abs() for x in like(0.01)],
                  state_steps=[torch.tensor(float(i % 4 + 1)) for i in range(len(params))],
                  lr=0.01, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.1 if values.get("maximize") else 0.0)
    return values


# Inputs a kernel needs beyond its shape rule.
PREPARE = {"bucketize_count": _sorted_boundaries, "embedding_bag_sum": _sorted_offsets,
           "embedding_bag_sum_backward": _sorted_offsets, "reshape_and_cache": _distinct_slots, "dropout": _dropout_p,
           "huber": _positive_delta, "quantize_fp8": _positive_scale,
           "adam_step": _adam_state}
