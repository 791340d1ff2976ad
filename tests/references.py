"""Eager PyTorch references for the bundled ops, used by test_declared_ops.py.  Each takes
the op's arguments (floating tensors arrive as float64) and returns its results."""

import math

import torch
import torch.nn.functional as F


def _rms_norm(input, weight, eps=1e-6):
    rstd = torch.rsqrt(input.pow(2).mean(-1) + eps)
    return input * rstd.unsqueeze(-1) * weight, rstd


def _bucketize_count(values, boundaries):
    indices = torch.bucketize(values, boundaries)
    return indices, torch.bincount(indices.flatten(), minlength=boundaries.numel() + 1)


def _gelu_tanh_double_backward(grad, grad_output, self):
    shape = torch.broadcast_shapes(grad.shape, grad_output.shape, self.shape)
    x = self.detach().expand(shape).clone().requires_grad_()
    with torch.enable_grad():
        g = torch.ops.aten.gelu_backward(grad_output.expand(shape), x, approximate="tanh")
        return torch.autograd.grad(g, x, grad.expand(shape))[0]


REFERENCES = {
    "myadd": lambda self, other: self + other,
    "mul_constant": lambda self, constant: self * constant,
    "linear": lambda input, weight, bias=None: F.linear(input, weight, bias),
    "addmv_": lambda self, mat, vec, *, beta=1, alpha=1: torch.addmv(self, mat, vec, beta=beta, alpha=alpha),
    "fill_natural": lambda size: torch.arange(math.prod(size)).reshape(size),
    "rms_norm": _rms_norm,
    "sincos": lambda self: (self.sin(), self.cos()),
    "bucketize_count": _bucketize_count,
    "nonzero_flat": lambda self: torch.nonzero(self.flatten()).flatten(),
    "mymatmul": lambda self, other: self @ other,
    "gelu_tanh": lambda self: F.gelu(self, approximate="tanh"),
    "bias_gelu": lambda self, bias: F.gelu(self + bias, approximate="tanh"),
    "gelu_tanh_backward": lambda grad_output, self: torch.ops.aten.gelu_backward(grad_output, self, approximate="tanh"),
    "gelu_tanh_double_backward": _gelu_tanh_double_backward,
}


def _sorted_boundaries(values):
    values["boundaries"] = values["boundaries"].sort().values
    return values


# Inputs a kernel needs beyond its shape rule.
PREPARE = {"bucketize_count": _sorted_boundaries}
