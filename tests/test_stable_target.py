"""The stable-ABI target (docs/stable-abi.md): a `codegen init` library with `target =
"stable"`, one op with a hand-written C++ kernel against torch's stable API and one with a
Rust kernel behind the C ABI, both with derivative formulas; its generated tree, values,
argument errors, gradcheck, opcheck and torch.compile; the ABI check that fails a build
needing a torch symbol outside the stable C shim; the one build loaded into another torch
release of build/torch-matrix, as one abi3 wheel; and the declaration errors for what the target lacks.

A library of its own, not a shared one: it is built in the other target, and the ABI check
needs a build that fails (about 25 s of compiling in all: the failing build at -O0, the
library at -O1, where its loops' CPU builds are compiled).  Its abi3 wheel is
installed into another torch release's venv of build/torch-matrix, where there is one."""

from __future__ import annotations

import functools
import importlib
import json
import math
import os
import re
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest
import torch

from conftest import ROOT, import_library, made_once, run_codegen, run_python
from opwrap_codegen.core import torch_compat
from opwrap_codegen.pyruntime import torch_release

DECLARATIONS = """\
- func: scale(Tensor self, float factor) -> Tensor
  doc: Elementwise self * factor, C++ and CUDA C++ kernels against torch's stable API.
  dtypes: [float32, float64]
  kernels: {CPU: scale_cpu, CUDA: scale_cuda}
  like: self
  derivatives:
    self: grad * factor
    result: self_t * factor

- func: sqdist(Tensor a, Tensor b) -> Tensor
  doc: Per row, the squared distance between a and b, in Rust.
  dtypes: [float32, float64]
  kernels: {CPU: {abi: rust}}
  shape: {a: [N, D], b: [N, D], result: [N]}
  derivatives:
    a: 2 * grad.unsqueeze(-1) * (a - b)
    b: -2 * grad.unsqueeze(-1) * (a - b)
    result: 2 * ((a - b) * (a_t - b_t)).sum(-1)

- func: count_above(Tensor self, float threshold) -> SymInt
  doc: How many elements are above threshold, in C (a value the kernel returns through a pointer).
  dtypes: [float32, float64]
  kernels: {CPU: {abi: c, symbol: stablelib_count_above}}

- func: gather_rows(Tensor weight, Tensor indices) -> Tensor
  doc: weight[indices], in C; a dtype variable per tensor, and index bounds.
  dtypes: {weight: [float32], indices: [int64, int32]}
  kernels: {CPU: {abi: c, symbol: stablelib_gather_rows}}
  index: {indices: weight.size(0)}
  shape: {weight: [V, D], indices: [N], result: [N, D]}

- func: axpy(Tensor x, Tensor? y=None, float alpha=1.0) -> Tensor
  doc: alpha * x + y (y absent, alpha * x), in C; an optional tensor.
  dtypes: [float32]
  kernels: {CPU: {abi: c, symbol: stablelib_axpy}}
  like: x
  derivatives:
    x: grad * alpha
    y: grad

- func: convert(Tensor self, ScalarType dtype) -> Tensor
  doc: self converted to dtype, in C; the result's dtype variable comes from a ScalarType argument.
  dtypes: {self: [float32, int64], result: [float64, int32]}
  dtype: {result: dtype}
  like: self
  kernels: {CPU: {abi: c, symbol: stablelib_convert}}

- func: sumsq(Tensor x) -> (Tensor s, Tensor sq)
  doc: Per row, the sum and the sum of squares, in C; two returns, both differentiable.
  dtypes: [float32, float64]
  kernels: {CPU: {abi: c, symbol: stablelib_sumsq}}
  shape: {x: [N, D], s: [N], sq: [N]}
  derivatives:
    x: grad_s.unsqueeze(-1) + 2 * grad_sq.unsqueeze(-1) * x
    s: x_t.sum(-1)
    sq: 2 * (x * x_t).sum(-1)

- func: weighted_sum(Tensor w, Tensor[] xs) -> Tensor
  doc: The sum of w[k] * xs[k], in C; a tensor list.
  dtypes: [float32]
  kernels: {CPU: {abi: c, symbol: stablelib_weighted_sum}}
  shape: {w: [K]}
  like: w

- func: hist(Tensor w, Tensor[] idx) -> Tensor
  doc: result[v] = w[v] times how often v occurs in the tensors of idx, in C; index bounds on a tensor list.
  dtypes: {w: [float32], idx: [int64]}
  kernels: {CPU: {abi: c, symbol: stablelib_hist}}
  index: {idx: w.size(0)}
  like: w

- func: weighted_any(Tensor w, Tensor[] xs) -> Tensor
  doc: The sum of w[k] * xs[k], xs of one shape of any rank, in C; a tensor list's shape rule with a run.
  dtypes: [float32]
  kernels: {CPU: {abi: c, symbol: stablelib_weighted_any}}
  shape: {w: [K], xs: ["*S"], result: ["*S"]}

- func: clamp_(Tensor(a!) self, float lo, float hi) -> Tensor(a!)
  doc: self clamped to [lo, hi] in place, a C++ kernel against the stable API (tagged inplace).
  dtypes: [float32, float64]
  kernels: {CPU: clamp_cpu}
  header: scale.h

- func: accumulate(Tensor(a!) acc, Tensor x, Tensor(b!)? count=None) -> ()
  doc: acc += x, and count += 1 where x is not 0 (when given), in C; written arguments it does not return.
  dtypes: [float32]
  kernels: {CPU: {abi: c, symbol: stablelib_accumulate}}
  shape: {acc: ["*S"], x: ["*S"]}

- func: scale.out(Tensor self, float factor, *, Tensor(a!) out) -> Tensor(a!)
  doc: self * factor into out, with scale's C++ kernel (an out= overload, tagged out).

- func: sqdist.out(Tensor a, Tensor b, *, Tensor(a!) out) -> Tensor(a!)
  doc: sqdist into out, with sqdist's Rust kernel (out resized to [N]).

- func: tile_rows(Tensor self, SymInt n) -> Tensor
  doc: n copies of the row self, a C++ kernel; a SymInt argument in the shape rule; bfloat16 and float16 elements.
  dtypes: [float32, float64, bfloat16, float16]
  autocast: lower_precision
  kernels: {CPU: tile_rows_cpu}
  header: scale.h
  shape: {self: [D], result: [n, D]}
  derivatives:
    self: grad.sum(0)

- func: fill_size(Tensor value, SymInt[] size, SymInt? plus=None) -> Tensor
  doc: A tensor of shape size holding value + plus, a C++ kernel; SymInt[] and SymInt? arguments.
  dtypes: [float32, float64]
  kernels: {CPU: fill_size_cpu}
  header: scale.h
  shape: {value: [], result: size}
  derivatives:
    value: grad.sum()

- func: sgd_step(Tensor(a!)[] params, Tensor(b!)[] momenta, Tensor[] grads, *, float lr, float momentum) -> ()
  doc: "For each i, momenta[i] = momentum * momenta[i] + grads[i] and params[i] -= lr * momenta[i], a C++ kernel: written tensor lists, dispatched on the first tensor given."
  dtypes: [float32, float64]
  kernels: {CPU: sgd_step_cpu}
  header: scale.h
  shape:
    momenta: "[p.shape for p in params]"
    grads: "[p.shape for p in params]"

- func: add_to_all(Tensor x, Tensor(a!)[] ys) -> ()
  doc: ys[i] += x for each i, a C++ kernel; a written tensor list beside a required tensor (the C ABI passes none).
  dtypes: [float32]
  kernels: {CPU: add_to_all_cpu}
  header: scale.h
  shape: {x: ["*S"], ys: ["*S"]}

- func: gelu_fast(Tensor self) -> Tensor
  doc: GELU's tanh approximation as x * sigmoid(2u), a generated pointwise kernel (one exp, vectorized).
  dtypes: floating
  autocast: lower_precision
  pointwise: |
    s = sigmoid(1.5957691216057308 * self * (1 + 0.044715 * self * self))
    self * s
  derivatives:
    self: "grad * torch.sigmoid(1.5957691216057308 * self * (1 + 0.044715 * self * self)) * (1 + self
      * (1 - torch.sigmoid(1.5957691216057308 * self * (1 + 0.044715 * self * self))) * 1.5957691216057308
      * (1 + 0.134145 * self * self))"

- func: cube(Tensor self) -> Tensor
  doc: self ** 3, whose backward is declared once_differentiable (a second derivative raises).
  dtypes: [float64]
  pointwise: self * self * self
  derivatives:
    self: 3 * grad * self * self
    once_differentiable: true

- func: axpby(Tensor x, Tensor y, float alpha, float beta) -> Tensor
  doc: alpha * x + beta * y, x and y broadcast and promoted as torch.add's.
  dtypes: floating
  autocast: promote
  pointwise: alpha * x + beta * y
  derivatives:
    x: grad * alpha
    y: grad * beta

- func: axpby.out(Tensor x, Tensor y, float alpha, float beta, *, Tensor(a!) out) -> Tensor(a!)
  doc: axpby into out, running axpby's expression (tagged out; beta has no default, as Inductor, lowering
    axpby to it, passes a defaulted argument twice, by position and by name, in torch 2.14).

- func: blend(Tensor x, *, Tensor end, float weight=0.5) -> Tensor
  doc: x + weight * (end - x), in C; a keyword-only tensor (cast under autocast; torch.library.register_autograd takes none).
  dtypes: [float32]
  kernels: {CPU: {abi: c, symbol: stablelib_blend}}
  shape: {x: ["*S"], end: ["*S"], result: ["*S"]}
  autocast: promote

- func: clipped_add(Tensor self, Tensor other, int lo, int hi) -> Tensor
  doc: clamp(self + other, lo, hi) over integer and floating dtypes.
  dtypes: all
  pointwise: clamp(self + other, lo, hi)

- func: sincos(Tensor self) -> (Tensor sin, Tensor cos)
  doc: Both in one pass over memory.
  dtypes: [float32, float64]
  pointwise: sin(self), cos(self)

- func: tanh_log_powers(Tensor self) -> (Tensor t, Tensor l, Tensor p4, Tensor r2, Tensor one)
  doc: tanh and log (vectorized in float) and small integer powers, which are products.
  dtypes: floating
  pointwise: tanh(self), log(self), self ** 4, self ** -2, self ** 0

- func: exps(Tensor self) -> (Tensor e, Tensor f)
  doc: exp and fast_exp, each a polynomial on the bits in float (vectorized).
  dtypes: [float32]
  pointwise: exp(self), fast_exp(self)

- func: bincount(Tensor self, int bins, Tensor? weights=None) -> Tensor
  doc: torch.bincount(self, weights, minlength=bins), a C++ kernel; a dtype variable and the result's dtype rule from an optional tensor, and its shape rule.
  dtypes: {self: [int32, int64], weights: {dtypes: [float32, float64], absent: float32}}
  dtype: {result: weights or int64}
  index: {self: bins}
  shape: {self: [N], weights: [N], result: [bins]}
  kernels: {CPU: bincount_cpu}
  header: scale.h
  derivatives:
    weights: grad.index_select(0, self)
    self: non_differentiable

- func: row_softmax(Tensor self) -> Tensor
  doc: softmax over the last dimension, generated from a row-wise program (max, then the sum of exponentials stored once, then the map).
  dtypes: floating
  shape: {self: ["*B", D], result: self.shape}
  rowwise: |
    m = max(self)
    e = fast_exp(self - m)
    e / sum(e)
  derivatives:
    self: result * (grad - (grad * result).sum(-1, true))
    result: result * (self_t - (self_t * result).sum(-1, true))

- func: row_rms_norm(Tensor input, Tensor weight, float eps=1e-6) -> (Tensor out, Tensor rstd)
  doc: rms norm over the last dimension with a weight (a column), and the rstd per row, from a row-wise program.
  dtypes: floating
  shape: {input: ["*B", D], weight: [D], out: input.shape, rstd: ["*B"]}
  autocast: fp32
  rowwise: |
    rstd = rsqrt(mean(input * input) + eps)
    input * rstd * weight, rstd
  derivatives:
    input: weight * rstd.unsqueeze(-1) * grad - input * rstd.unsqueeze(-1).pow(3) * (grad * weight * input).mean(-1).unsqueeze(-1)
    weight: grad * input * rstd.unsqueeze(-1)
    output_differentiability: [true, false]

- func: row_extremes(Tensor self) -> (Tensor low, Tensor high)
  doc: each row's smallest and largest value, from a row-wise program of a min and a max (NaN for a row holding one, as torch.amin and torch.amax).
  dtypes: floating
  shape: {self: ["*B", D], low: ["*B"], high: ["*B"]}
  rowwise: |
    min(self), max(self)
"""

C_SOURCE = """\
#include "abi/count_above.h"

#define COUNT(NAME, T)                                                                                        \\
  int32_t NAME(opwrap_context* ctx, const opwrap_tensor* self, double threshold, int64_t* result) {           \\
    (void)ctx;                                                                                                \\
    const T* x = (const T*)self->data;                                                                        \\
    int64_t count = 0;                                                                                        \\
    for (int64_t i = 0, n = opwrap_numel(self); i < n; ++i) count += x[i] > threshold;                        \\
    *result = count;                                                                                          \\
    return OPWRAP_OK;                                                                                         \\
  }
COUNT(stablelib_count_above_float32, float)
COUNT(stablelib_count_above_float64, double)

#include "abi/gather_rows.h"

#define GATHER(NAME, I)                                                                                       \\
  int32_t NAME(opwrap_context* ctx, const opwrap_tensor* weight, const opwrap_tensor* indices,                \\
               opwrap_tensor* result) {                                                                       \\
    (void)ctx;                                                                                                \\
    const float* w = (const float*)weight->data;                                                              \\
    const I* idx = (const I*)indices->data;                                                                   \\
    float* out = (float*)result->data;                                                                        \\
    const int64_t d = weight->sizes[1];                                                                       \\
    for (int64_t i = 0; i < indices->sizes[0]; ++i)                                                           \\
      for (int64_t k = 0; k < d; ++k) out[i * d + k] = w[idx[i] * d + k];                                     \\
    return OPWRAP_OK;                                                                                         \\
  }
GATHER(stablelib_gather_rows_float32_int64, int64_t)
GATHER(stablelib_gather_rows_float32_int32, int32_t)

#include "abi/axpy.h"

int32_t stablelib_axpy_float32(opwrap_context* ctx, const opwrap_tensor* x, const opwrap_tensor* y, double alpha,
                               opwrap_tensor* result) {
  (void)ctx;
  const float* xs = (const float*)x->data;
  const float* ys = y ? (const float*)y->data : 0;
  float* out = (float*)result->data;
  for (int64_t i = 0, n = opwrap_numel(x); i < n; ++i) out[i] = (float)(alpha * xs[i] + (ys ? ys[i] : 0.0f));
  return OPWRAP_OK;
}

#include "abi/blend.h"

int32_t stablelib_blend_float32(opwrap_context* ctx, const opwrap_tensor* x, const opwrap_tensor* end, double weight,
                                opwrap_tensor* result) {
  (void)ctx;
  const float* xs = (const float*)x->data;
  const float* es = (const float*)end->data;
  float* out = (float*)result->data;
  for (int64_t i = 0, n = opwrap_numel(x); i < n; ++i) out[i] = (float)(xs[i] + weight * (es[i] - xs[i]));
  return OPWRAP_OK;
}

#include "abi/convert.h"

#define CONVERT(NAME, A, B)                                                                                   \\
  int32_t NAME(opwrap_context* ctx, const opwrap_tensor* self, int32_t dtype, opwrap_tensor* result) {        \\
    (void)ctx;                                                                                                \\
    (void)dtype;                                                                                              \\
    const A* x = (const A*)self->data;                                                                        \\
    B* out = (B*)result->data;                                                                                \\
    for (int64_t i = 0, n = opwrap_numel(self); i < n; ++i) out[i] = (B)x[i];                                 \\
    return OPWRAP_OK;                                                                                         \\
  }
CONVERT(stablelib_convert_float32_float64, float, double)
CONVERT(stablelib_convert_float32_int32, float, int32_t)
CONVERT(stablelib_convert_int64_float64, int64_t, double)
CONVERT(stablelib_convert_int64_int32, int64_t, int32_t)

#include "abi/sumsq.h"

#define SUMSQ(NAME, T)                                                                                        \\
  int32_t NAME(opwrap_context* ctx, const opwrap_tensor* x, opwrap_tensor* s, opwrap_tensor* sq) {           \\
    (void)ctx;                                                                                                \\
    const T* in = (const T*)x->data;                                                                          \\
    const int64_t n = x->sizes[0], d = x->sizes[1];                                                           \\
    for (int64_t i = 0; i < n; ++i) {                                                                         \\
      T a = 0, b = 0;                                                                                         \\
      for (int64_t k = 0; k < d; ++k) { a += in[i * d + k]; b += in[i * d + k] * in[i * d + k]; }            \\
      ((T*)s->data)[i] = a;                                                                                   \\
      ((T*)sq->data)[i] = b;                                                                                  \\
    }                                                                                                         \\
    return OPWRAP_OK;                                                                                         \\
  }
SUMSQ(stablelib_sumsq_float32, float)
SUMSQ(stablelib_sumsq_float64, double)

#include "abi/weighted_sum.h"

int32_t stablelib_weighted_sum_float32(opwrap_context* ctx, const opwrap_tensor* w, opwrap_tensor_list xs,
                                       opwrap_tensor* result) {
  const float* ws = (const float*)w->data;
  float* out = (float*)result->data;
  const int64_t n = w->sizes[0];
  if (xs.len != n) return opwrap_fail(ctx, "%lld tensors for %lld weights", (long long)xs.len, (long long)n);
  for (int64_t i = 0; i < n; ++i) out[i] = 0;
  for (int64_t k = 0; k < xs.len; ++k) {
    const float* x = (const float*)xs.data[k].data;
    for (int64_t i = 0; i < n; ++i) out[i] += ws[k] * x[i];
  }
  return OPWRAP_OK;
}

#include "abi/accumulate.h"

int32_t stablelib_accumulate_float32(opwrap_context* ctx, opwrap_tensor* acc, const opwrap_tensor* x,
                                     opwrap_tensor* count) {
  float* a = (float*)acc->data;
  const float* v = (const float*)x->data;
  const int64_t n = opwrap_numel(acc);
  if (count != NULL && opwrap_numel(count) != n) return opwrap_fail(ctx, "count must have %lld elements", (long long)n);
  for (int64_t i = 0; i < n; ++i) {
    a[i] += v[i];
    if (count != NULL) ((float*)count->data)[i] += v[i] != 0;
  }
  return OPWRAP_OK;
}

#include "abi/weighted_any.h"

int32_t stablelib_weighted_any_float32(opwrap_context* ctx, const opwrap_tensor* w, opwrap_tensor_list xs,
                                       opwrap_tensor* result) {
  const float* ws = (const float*)w->data;
  float* out = (float*)result->data;
  if (xs.len != w->sizes[0]) return opwrap_fail(ctx, "%lld tensors for %lld weights", (long long)xs.len,
                                                (long long)w->sizes[0]);
  for (int64_t i = 0, n = opwrap_numel(result); i < n; ++i) out[i] = 0;
  for (int64_t k = 0; k < xs.len; ++k) {
    const float* x = (const float*)xs.data[k].data;
    for (int64_t i = 0, n = opwrap_numel(result); i < n; ++i) out[i] += ws[k] * x[i];
  }
  return OPWRAP_OK;
}

#include "abi/hist.h"

int32_t stablelib_hist_float32_int64(opwrap_context* ctx, const opwrap_tensor* w, opwrap_tensor_list idx,
                                     opwrap_tensor* result) {
  (void)ctx;
  const float* ws = (const float*)w->data;
  float* out = (float*)result->data;
  for (int64_t i = 0; i < w->sizes[0]; ++i) out[i] = 0;
  for (int64_t k = 0; k < idx.len; ++k) {
    const int64_t* x = (const int64_t*)idx.data[k].data;
    for (int64_t i = 0, m = opwrap_numel(&idx.data[k]); i < m; ++i) out[x[i]] += ws[x[i]];
  }
  return OPWRAP_OK;
}
"""

# The signature the docs show (docs/stable-abi.md): the schema's arguments in the stable
# API's types, then one torch::stable::Tensor& per output the wrapper allocated.
SCALE_H = """\
#pragma once
#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>

namespace stablelib::kernels {

template <typename scalar_t>
void clamp_cpu(const torch::stable::Tensor& self, double lo, double hi) {
  scalar_t* x = self.mutable_data_ptr<scalar_t>();
  for (int64_t i = 0; i < self.numel(); ++i) x[i] = x[i] < lo ? static_cast<scalar_t>(lo) : x[i] > hi ? static_cast<scalar_t>(hi) : x[i];
}

template <typename scalar_t>
void scale_cpu(const torch::stable::Tensor& self, double factor, torch::stable::Tensor& result) {
  const scalar_t* in = self.const_data_ptr<scalar_t>();
  scalar_t* out = result.mutable_data_ptr<scalar_t>();
  torch::stable::parallel_for(0, result.numel(), 32768, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) out[i] = static_cast<scalar_t>(in[i] * factor);
  });
}

template <typename scalar_t>
void tile_rows_cpu(const torch::stable::Tensor& self, int64_t n, torch::stable::Tensor& result) {
  const scalar_t* in = self.const_data_ptr<scalar_t>();
  scalar_t* out = result.mutable_data_ptr<scalar_t>();
  const int64_t d = self.numel();
  for (int64_t i = 0; i < n; ++i)
    for (int64_t k = 0; k < d; ++k) out[i * d + k] = in[k];
}

template <typename scalar_t>
void fill_size_cpu(const torch::stable::Tensor& value, torch::headeronly::IntHeaderOnlyArrayRef size,
                   std::optional<int64_t> plus, torch::stable::Tensor& result) {
  const scalar_t v = static_cast<scalar_t>(*value.const_data_ptr<scalar_t>() + plus.value_or(0));
  scalar_t* out = result.mutable_data_ptr<scalar_t>();
  for (int64_t i = 0; i < result.numel(); ++i) out[i] = v;
}

template <typename scalar_t>
void sgd_step_cpu(const std::vector<torch::stable::Tensor>& params, const std::vector<torch::stable::Tensor>& momenta,
                  const std::vector<torch::stable::Tensor>& grads, double lr, double momentum) {
  for (size_t i = 0; i < params.size(); ++i) {
    scalar_t* p = params[i].mutable_data_ptr<scalar_t>();
    scalar_t* m = momenta[i].mutable_data_ptr<scalar_t>();
    const scalar_t* g = grads[i].const_data_ptr<scalar_t>();
    for (int64_t k = 0; k < params[i].numel(); ++k) {
      m[k] = static_cast<scalar_t>(momentum * m[k] + g[k]);
      p[k] = static_cast<scalar_t>(p[k] - lr * m[k]);
    }
  }
}

template <typename scalar_t>
void add_to_all_cpu(const torch::stable::Tensor& x, const std::vector<torch::stable::Tensor>& ys) {
  const scalar_t* v = x.const_data_ptr<scalar_t>();
  for (const torch::stable::Tensor& y : ys) {
    scalar_t* out = y.mutable_data_ptr<scalar_t>();
    for (int64_t i = 0; i < y.numel(); ++i) out[i] += v[i];
  }
}

template <typename index_t, typename weight_t>
void bincount_cpu(const torch::stable::Tensor& self, int64_t bins, const std::optional<torch::stable::Tensor>& weights,
                  torch::stable::Tensor& result) {
  const index_t* idx = self.const_data_ptr<index_t>();
  const weight_t* w = weights.has_value() ? weights->const_data_ptr<weight_t>() : nullptr;
  if (w != nullptr) {
    weight_t* out = result.mutable_data_ptr<weight_t>();
    for (int64_t b = 0; b < bins; ++b) out[b] = 0;
    for (int64_t i = 0; i < self.numel(); ++i) out[idx[i]] += w[i];
  } else {  // counts, int64
    int64_t* out = result.mutable_data_ptr<int64_t>();
    for (int64_t b = 0; b < bins; ++b) out[b] = 0;
    for (int64_t i = 0; i < self.numel(); ++i) out[idx[i]] += 1;
  }
}

}  // namespace stablelib::kernels
"""

# A CUDA C++ kernel against the stable API (docs/stable-abi.md): compiled by nvcc only where
# CUDA is built (make cuda-check: tests/test_cuda.py builds this library with --cuda); the
# current stream from the C shim, the launch checked with the stable API's macro.
SCALE_CUH = """\
#pragma once
#include <cuda_runtime.h>
#include <opwrap/stable/runtime.h>
#include <torch/csrc/stable/macros.h>
#include <torch/csrc/stable/tensor.h>

namespace stablelib::kernels {

template <typename scalar_t>
__global__ void scale_kernel(const scalar_t* in, scalar_t* out, double factor, int64_t n) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) out[i] = static_cast<scalar_t>(in[i] * factor);
}

template <typename scalar_t>
void scale_cuda(const torch::stable::Tensor& self, double factor, torch::stable::Tensor& result) {
  const int64_t n = result.numel();
  if (n == 0) return;
  const auto stream = static_cast<cudaStream_t>(opwrap::rt::current_cuda_stream(self.get_device_index()));
  const int threads = 256;
  scale_kernel<scalar_t><<<static_cast<unsigned>((n + threads - 1) / threads), threads, 0, stream>>>(
      self.const_data_ptr<scalar_t>(), result.mutable_data_ptr<scalar_t>(), factor, n);
  STD_CUDA_KERNEL_LAUNCH_CHECK();
}

}  // namespace stablelib::kernels
"""

# A kernel that calls a libc10 function outside the stable C shim (declared by hand, as a
# header of the full API would): the ABI check must fail the build naming it.
OUTSIDE = """\
namespace c10::detail {
[[noreturn]] void torchCheckFail(const char* func, const char* file, uint32_t line, const char* msg);
}
"""

CARGO = """\
[package]
name = "stablelib-kernels"
version = "0.1.0"
edition = "2021"

[lib]
crate-type = ["staticlib"]
"""

LIB_RS = """\
#[path = "../../generated/rust/kernels.rs"]
mod kernels;

use kernels::{Context, Float, Result, TensorMut, TensorRef};

fn sqdist<T: Float>(_ctx: &Context, a: TensorRef<'_, T>, b: TensorRef<'_, T>,
                    mut result: TensorMut<'_, T>) -> Result<()> {
    let d = a.sizes()[1] as usize;
    let (a, b) = (a.as_slice().unwrap(), b.as_slice().unwrap());
    for (i, o) in result.as_mut_slice().unwrap().iter_mut().enumerate() {
        let mut acc = T::from_f64(0.0);
        for k in 0..d {
            let diff = a[i * d + k] - b[i * d + k];
            acc = acc + diff * diff;
        }
        *o = acc;
    }
    Ok(())
}
"""


def _stable_project(lib: Path) -> None:
    """`codegen init` at `lib`, its library built in the stable target."""
    assert run_codegen("init", str(lib)).returncode == 0
    pyproject = lib / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace("[tool.codegen]\n", '[tool.codegen]\ntarget = "stable"\n'))


def _build(lib: Path, *options: str, optimize: int = 0) -> list:
    r = run_codegen("build", "--no-cuda", f"-O{optimize}", *options, cwd=lib)
    return [r.returncode, r.stdout + r.stderr]


def _make_stablelib(lib: Path) -> dict:
    record: dict = {}
    r = run_codegen("init", str(lib))
    record["init"] = [r.returncode, r.stdout + r.stderr]
    if r.returncode != 0:
        return record
    pyproject = lib / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace(
        "[tool.codegen]\n", '[tool.codegen]\ntarget = "stable"\ncrates = ["rust"]\nsources = ["csrc/*.c"]\n'))
    (lib / "declarations" / "scale.yaml").write_text(DECLARATIONS)
    header = lib / "kernels" / "scale.h"
    (lib / "kernels" / "scale.cuh").write_text(SCALE_CUH)
    (lib / "rust" / "src").mkdir(parents=True)
    (lib / "rust" / "Cargo.toml").write_text(CARGO)
    (lib / "rust" / "src" / "lib.rs").write_text(LIB_RS)
    (lib / "csrc").mkdir()
    (lib / "csrc" / "count.c").write_text(C_SOURCE)
    # First a kernel reaching outside the stable API: the build fails and leaves no library.
    # A selective build of that op: one unit to compile, not the four that include its header.
    header.write_text(SCALE_H.replace("namespace stablelib::kernels {", OUTSIDE + "namespace stablelib::kernels {")
                      .replace("const scalar_t* in", "if (factor == 12345.0) c10::detail::torchCheckFail("
                               "\"f\", \"f\", 0, \"m\");\n  const scalar_t* in", 1))  # in scale_cpu
    record["outside"] = _build(lib, "--ops", "scale")
    record["outside_left"] = (lib / "build" / "_C.so").exists()
    header.write_text(SCALE_H)
    # -O1: the generated loops' CPU builds (AVX-512, AVX2 and the default one, chosen at run
    # time) are compiled only where the compiler optimizes (-O0 compiles the default one
    # alone), and -O1 vectorizes their `omp simd` loops as -O3 does, so the tests run the code
    # a user's build runs.  13.6 s of compiler time at -O0, 21.8 s at -O1, 28.8 s at -O2.
    record["build"] = _build(lib, optimize=1)
    return record


@pytest.fixture(scope="module")
def stablelib(tmp_path_factory):
    root, made = made_once(tmp_path_factory, "stablelib", _make_stablelib)
    assert made["init"][0] == 0, made["init"][1]
    assert made["build"][0] == 0, made["build"][1]
    module = import_library(root / "stablelib")
    return module, made, root / "stablelib"


@pytest.mark.slow(40)
def test_the_tree_includes_only_the_stable_api(stablelib):
    _, made, lib = stablelib
    gen = lib / "generated"
    cpp = sorted(p.relative_to(gen).as_posix() for p in gen.rglob("*.cpp"))
    ops = ["accumulate", "add_to_all", "axpby", "axpby_out", "axpy", "bincount", "blend", "clamp_", "clipped_add", "convert",
           "count_above", "cube", "exps", "fill_size", "gather_rows", "gelu_fast", "hist", "row_extremes", "row_rms_norm", "row_softmax", "scale",
           "scale_out", "sgd_step", "sincos", "sqdist", "sqdist_out", "sumsq", "tanh_log_powers", "tile_rows",
           "weighted_any", "weighted_sum"]
    units = [p for p in cpp if p.startswith("units/")]  # as many as the unity build's sizes make
    assert cpp == [*(f"stable/cpu/{op}.cpp" for op in ops), "stable/registration.cpp", *units], cpp
    assert units == [f"units/stable.{k}.cpp" for k in range(len(units))], units
    for path in [*(gen / "stable").rglob("*.cpp"), *(gen / "stable").rglob("*.cu")]:
        text = path.read_text()
        assert "ATen/" not in text and "torch/library.h" not in text and "c10/" not in text, path
    registration = (gen / "stable" / "registration.cpp").read_text()
    assert 'm.def("scale(Tensor self, float factor) -> Tensor");' in registration
    assert 'TORCH_BOX(&stablelib::generated::sqdist_cpu)' in (gen / "stable" / "cpu" / "sqdist.cpp").read_text()
    cuda = (gen / "stable" / "cuda" / "scale.cu").read_text()  # compiled where CUDA is built (test_cuda.py)
    for text in ('#include "scale.cuh"', "::stablelib::kernels::scale_cuda<double>(self_c, factor, result);",
                 "torch::stable::accelerator::DeviceGuard device_guard(self.device().index());",
                 "STABLE_TORCH_LIBRARY_IMPL(stablelib, CUDA, m) {"):
        assert text in cuda, (text, cuda)
    assert not (gen / "python" / "_fast.cpp").exists()  # the fast bindings need torch's Python C++ API
    assert "_runtime.register_autograd('stablelib::sqdist'" in (gen / "python" / "autograd.py").read_text()
    autocast = (gen / "python" / "autocast.py").read_text()  # the Autocast kernels, from Python
    assert "_runtime.register_autocast('stablelib::blend', 'promote', cast=((0, 'x'), (1, 'end')), " \
        "promote=((0, 'x'), (1, 'end')))" in autocast and autocast.count("register_autocast(") == 5
    # Built for the oldest claimed release, without OpenMP or the precompiled header.
    ninja = (lib / "build" / "build.ninja").read_text()
    # no OpenMP runtime (its parallel_for is the stable API's); `omp simd` pragmas only
    assert "-DTORCH_TARGET_VERSION=0x020b000000000000" in ninja and "-fopenmp-simd" in ninja
    assert re.search(r"-fopenmp(?!-simd)", ninja) is None and "-lgomp" not in ninja
    manifest = json.loads((lib / "build" / "_C.json").read_text())
    assert (manifest["target"], manifest["torch_min"]) == ("stable", "2.11")
    assert "stable ABI check: _C.so needs no torch symbol outside the stable C shim" in made["build"][1]


@pytest.mark.slow(40)
def test_the_abi_check_fails_a_build_that_needs_more_of_torch(stablelib):
    _, made, _ = stablelib
    code, out = made["outside"]
    assert code != 0, out
    assert "outside torch's stable C shim" in out, out
    assert "c10::detail::torchCheckFail(char const*, char const*, unsigned int, char const*)" in out, out
    assert re.search(r"referenced by stable\.\d+\.o\)", out), out
    assert not made["outside_left"]  # nothing loadable is left behind


@pytest.mark.slow(40)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_values_and_argument_errors(stablelib, dtype):
    module, _, _ = stablelib
    a, b = torch.randn(5, 3, dtype=dtype), torch.randn(5, 3, dtype=dtype)
    torch.testing.assert_close(module.ops.sqdist(a, b), ((a - b) ** 2).sum(1))
    torch.testing.assert_close(module.ops.scale(a.t(), 2.5), a.t() * 2.5)  # made contiguous for the kernel
    with pytest.raises(RuntimeError, match=r"^stablelib::sqdist: argument 'b' has size 2 at dimension 1, but "
                                           r"expected D = 3 \(shape \[5, 2\]\)$"):
        module.ops.sqdist(a, b[:, :2])
    with pytest.raises(RuntimeError, match=r"^stablelib::sqdist: argument 'a' has dtype Int, but expected one of: "
                                           r"float32, float64$"):
        module.ops.sqdist(a.int(), b)
    with pytest.raises(RuntimeError, match=r"stablelib::sqdist: argument 'a' must have 2 dimensions \[N, D\], "
                                           r"but got 1 \(shape \[3\]\)"):
        module.ops.sqdist(a[0], b[0])


@pytest.mark.slow(40)
def test_a_value_the_c_kernel_returns(stablelib):
    module, _, _ = stablelib
    x = torch.tensor([1.0, 5.0, 7.0, -2.0])
    assert module.ops.count_above(x, 2.0) == 2
    result = torch.library.opcheck(torch.ops.stablelib.count_above.default, (x, 2.0))
    assert all(v == "SUCCESS" for v in result.values()), result
    torch._dynamo.reset()
    f = torch.compile(lambda t: t.new_zeros(module.ops.count_above(t, 2.0)), fullgraph=True)  # data-dependent
    assert f(x).shape == (2,)


@pytest.mark.slow(40)
def test_dtype_variables_and_index_bounds(stablelib):
    module, _, _ = stablelib
    w, i = torch.randn(5, 3), torch.tensor([4, 0, 2])
    torch.testing.assert_close(module.ops.gather_rows(w, i), w[i])
    torch.testing.assert_close(module.ops.gather_rows(w, i.int()), w[i])
    with pytest.raises(RuntimeError, match=r"^stablelib::gather_rows: argument 'indices' holds 5, out of range: its "
                                           r"values must lie in \[0, 5\) \(index: weight.size\(0\)\)$"):
        module.ops.gather_rows(w, torch.tensor([1, 5]))
    with pytest.raises(RuntimeError, match=r"^stablelib::gather_rows: argument 'indices' holds -1, out of range"):
        module.ops.gather_rows(w, torch.tensor([-1, 2]))
    with pytest.raises(RuntimeError, match=r"^stablelib::gather_rows: argument 'indices' has dtype Float, but "
                                           r"expected one of: int64, int32$"):
        module.ops.gather_rows(w, torch.tensor([1.0]))
    result = torch.library.opcheck(torch.ops.stablelib.gather_rows.default, (w, i))
    assert all(v == "SUCCESS" for v in result.values()), result
    # A return's dtype variable, from a ScalarType argument.
    x = torch.tensor([1.5, -2.0, 3.25])
    for source, dtype in ((x, torch.float64), (x, torch.int32), (x.long(), torch.float64)):
        torch.testing.assert_close(module.ops.convert(source, dtype), source.to(dtype))
    with pytest.raises(RuntimeError, match=r"^stablelib::convert: output 'result' would have dtype Half "
                                           r"\(dtype: dtype\), but expected one of: float64, int32$"):
        module.ops.convert(x, torch.float16)
    result = torch.library.opcheck(torch.ops.stablelib.convert.default, (x, torch.int32))
    assert all(v == "SUCCESS" for v in result.values()), result


@pytest.mark.slow(40)
def test_an_optional_tensor(stablelib):
    module, _, _ = stablelib
    x = torch.randn(3, 2, requires_grad=True)
    y = torch.randn(3, 2, requires_grad=True)
    torch.testing.assert_close(module.ops.axpy(x, y, 2.0), 2 * x + y)
    torch.testing.assert_close(module.ops.axpy(x, alpha=3.0), 3 * x)
    torch.testing.assert_close(module.ops.axpy(x, None), x)
    with pytest.raises(RuntimeError, match=r"^stablelib::axpy: argument 'y' has dtype Double, but expected Float "
                                           r"\(the dtype of 'x'\)$"):
        module.ops.axpy(x, y.double())
    module.ops.axpy(x, y, 2.0).sum().backward()
    torch.testing.assert_close(x.grad, torch.full_like(x, 2.0))
    torch.testing.assert_close(y.grad, torch.ones_like(y))
    for args in ((x, y, 2.0), (x, None, 2.0)):
        result = torch.library.opcheck(torch.ops.stablelib.axpy.default, args)
        assert all(v == "SUCCESS" for v in result.values()), result


@pytest.mark.slow(40)
def test_a_tensor_list(stablelib):
    module, _, _ = stablelib
    w, xs = torch.tensor([1.0, 2.0, 3.0]), [torch.ones(3), torch.arange(3.0), torch.full((3,), 2.0)]
    torch.testing.assert_close(module.ops.weighted_sum(w, xs), sum(w[k] * xs[k] for k in range(3)))
    with pytest.raises(RuntimeError, match=r"^stablelib::weighted_sum: argument 'xs\[1\]' has dtype Double, but "
                                           r"expected one of: float32$"):
        module.ops.weighted_sum(w, [xs[0], xs[1].double(), xs[2]])
    with pytest.raises(RuntimeError, match=r"^stablelib::weighted_sum: 1 tensors for 3 weights$"):  # the kernel's
        module.ops.weighted_sum(w, xs[:1])
    result = torch.library.opcheck(torch.ops.stablelib.weighted_sum.default, (w, xs))
    assert all(v == "SUCCESS" for v in result.values()), result


def test_a_tensor_list_of_any_rank(stablelib):
    """A tensor list's shape rule with a run (`xs: ["*S"], result: ["*S"]`): checked per element
    with the full target's messages, the result allocated from it; opcheck and compile."""
    module, _, _ = stablelib
    w, xs = torch.tensor([1.0, 2.0]), [torch.ones(2, 3), torch.full((2, 3), 3.0)]
    torch.testing.assert_close(module.ops.weighted_any(w, xs), torch.full((2, 3), 7.0))
    torch.testing.assert_close(module.ops.weighted_any(w[:1], [torch.tensor(2.0)]), torch.tensor(2.0))
    with pytest.raises(RuntimeError, match=r"^stablelib::weighted_any: argument 'xs\[1\]' has dimensions \[3, 2\] "
                                           r"where \*S = \[2, 3\] was expected \(shape \[3, 2\]\)$"):
        module.ops.weighted_any(w, [xs[0], torch.ones(3, 2)])
    with pytest.raises(RuntimeError, match=r"^stablelib::weighted_any: argument 'xs' holds no tensor, but its shape "
                                           r"\[\*S\] must give \*S$"):
        module.ops.weighted_any(w, [])
    result = torch.library.opcheck(torch.ops.stablelib.weighted_any.default, (w, xs))
    assert all(v == "SUCCESS" for v in result.values()), result
    f = torch.compile(module.ops.weighted_any, fullgraph=True, dynamic=True, backend="aot_eager")
    torch.testing.assert_close(f(w, xs), torch.full((2, 3), 7.0))
    torch._dynamo.reset()


def test_index_bounds_in_a_tensor_list(stablelib):
    """`index:` on a Tensor[]: every element checked, as the full target checks it."""
    module, _, _ = stablelib
    w = torch.tensor([1.0, 2.0, 3.0])
    torch.testing.assert_close(module.ops.hist(w, [torch.tensor([0, 2]), torch.tensor([2])]), torch.tensor([1., 0., 6.]))
    with pytest.raises(RuntimeError, match=r"^stablelib::hist: argument 'idx\[1\]' holds 3, out of range: its values "
                                           r"must lie in \[0, 3\) \(index: w.size\(0\)\)$"):
        module.ops.hist(w, [torch.tensor([0, 2]), torch.tensor([3])])
    with pytest.raises(RuntimeError, match=r"^stablelib::hist: argument 'idx\[0\]' holds -1, out of range"):
        module.ops.hist(w, [torch.tensor([-1])])
    result = torch.library.opcheck(torch.ops.stablelib.hist.default, (w, [torch.tensor([1, 1]), torch.tensor([0])]))
    assert all(v == "SUCCESS" for v in result.values()), result


@pytest.mark.slow(40)
def test_two_differentiable_returns(stablelib):
    module, _, _ = stablelib
    x = torch.randn(4, 3, dtype=torch.float64, requires_grad=True)
    s, sq = module.ops.sumsq(x)
    torch.testing.assert_close(s, x.sum(1))
    torch.testing.assert_close(sq, (x * x).sum(1))
    assert torch.autograd.gradcheck(lambda t: module.ops.sumsq(t), (x,))
    assert torch.autograd.gradcheck(lambda t: module.ops.sumsq(t)[1], (x,))  # one return's gradient only
    assert torch.autograd.gradgradcheck(lambda t: module.ops.sumsq(t), (x,))
    result = torch.library.opcheck(torch.ops.stablelib.sumsq.default, (x,))
    assert all(v == "SUCCESS" for v in result.values()), result
    torch._dynamo.reset()
    f = torch.compile(lambda t: module.ops.sumsq(t)[1].sum(), fullgraph=True)
    torch.testing.assert_close(torch.autograd.grad(f(x), x)[0], 2 * x)


def _passes_opcheck(op, args, kwargs=None):
    result = torch.library.opcheck(op, args, kwargs)
    assert all(v == "SUCCESS" for v in result.values()), result


@pytest.mark.slow(40)
def test_an_in_place_op(stablelib):
    """clamp_, a C++ kernel writing self: tagged `inplace` (defined from Python: the stable C++
    API has no such tag), the full target's checks and messages, a non-contiguous self computed
    in a contiguous copy and written back."""
    module, _, lib = stablelib
    assert "clamp_" not in (lib / "generated" / "stable" / "registration.cpp").read_text()
    assert "'clamp_(Tensor(a!) self, float lo, float hi) -> Tensor(a!)'" in \
        (lib / "generated" / "python" / "schemas.py").read_text()
    op = torch.ops.stablelib.clamp_.default
    assert (torch.Tag.inplace in op.tags) == hasattr(torch.Tag, "inplace")
    x = torch.linspace(-2, 2, 12, dtype=torch.float64).reshape(3, 4)
    expected = x.clamp(-1, 1)
    assert module.ops.clamp_(x, -1.0, 1.0) is x
    torch.testing.assert_close(x, expected)
    y = torch.linspace(-2, 2, 12).reshape(3, 4)
    t = y.t()  # non-contiguous: computed in a copy, written back
    op(t, -1.0, 1.0)
    torch.testing.assert_close(y, torch.linspace(-2, 2, 12).reshape(3, 4).clamp(-1, 1))
    with pytest.raises(RuntimeError, match=r"^stablelib::clamp_: argument 'self' has dtype Int, but expected one of: "
                       r"float32, float64"):
        op(torch.zeros(3, dtype=torch.int32), 0.0, 1.0)
    with pytest.raises(RuntimeError, match=r"^stablelib::clamp_: argument 'self' is written in place, but some of its "
                       r"elements share memory \(an expanded or stride-0 tensor\); clone\(\) it first"):
        op(torch.zeros(1).expand(3), 0.0, 1.0)
    _passes_opcheck(op, (torch.randn(4, 3), -0.5, 0.5))
    torch._dynamo.reset()
    f = torch.compile(lambda a: module.ops.clamp_(a * 2, -1.0, 1.0) + 1, fullgraph=True)
    a = torch.randn(5)
    torch.testing.assert_close(f(a), (a * 2).clamp(-1, 1) + 1)
    g = torch.compile(lambda a: module.ops.clamp_(a, -1.0, 1.0), fullgraph=True)  # a graph input mutated
    b = torch.randn(5) * 3
    expected = b.clamp(-1, 1)
    g(b)
    torch.testing.assert_close(b, expected)


@pytest.mark.slow(40)
def test_written_arguments_it_does_not_return(stablelib):
    """accumulate(Tensor(a!) acc, Tensor x, Tensor(b!)? count) -> (), in C: the overlap checks
    between a written argument and every other, and non-contiguous write-back."""
    module, _, _ = stablelib
    op = torch.ops.stablelib.accumulate.default
    acc, x, count = torch.ones(2, 3), torch.tensor([[1.0, 0.0, 2.0], [0.0, 3.0, 0.0]]), torch.zeros(2, 3)
    assert module.ops.accumulate(acc, x, count) is None
    torch.testing.assert_close(acc, 1 + x)
    torch.testing.assert_close(count, (x != 0).float())
    base = torch.zeros(3, 2)
    op(base.t(), x)  # a non-contiguous acc, written back
    torch.testing.assert_close(base.t(), x)
    with pytest.raises(RuntimeError, match=r"^stablelib::accumulate: argument 'acc' is written in place, but shares "
                       r"memory with input 'x'; pass a copy \(clone\(\)\) of one of them"):
        op(acc, acc)
    with pytest.raises(RuntimeError, match=r"^stablelib::accumulate: argument 'acc' is written in place, but shares "
                       r"memory with argument 'count', also written; pass a copy"):
        op(acc, x, acc)
    whole = torch.zeros(4, 3)
    with pytest.raises(RuntimeError, match=r"shares memory with input 'x'"):
        op(whole[:2], whole[1:3])  # a partial overlap
    op(whole[:2], whole[2:])  # views of one tensor that do not overlap
    with pytest.raises(RuntimeError, match=r"^stablelib::accumulate: argument 'x' has dtype Double, but expected Float "
                       r"\(the dtype of 'acc'\)"):
        op(acc, x.double())
    with pytest.raises(RuntimeError, match=r"^stablelib::accumulate: argument 'x' has dimensions \[3\] where "):
        op(acc, torch.ones(3))
    _passes_opcheck(op, (torch.randn(2, 3), torch.randn(2, 3), torch.zeros(2, 3)))
    torch._dynamo.reset()

    def f(a, b):
        a2 = a.clone()
        module.ops.accumulate(a2, b)
        return a2 * 2
    a, b = torch.randn(4), torch.randn(4)
    torch.testing.assert_close(torch.compile(f, fullgraph=True)(a, b), (a + b) * 2)


@pytest.mark.slow(40)
def test_out_overloads(stablelib, capfd):
    """scale.out (scale's C++ kernel) and sqdist.out (sqdist's Rust kernel): tagged `out`,
    the out= argument's dtype checked and its size following torch's out= rules."""
    module, _, _ = stablelib
    scale_out, sqdist_out = torch.ops.stablelib.scale.out, torch.ops.stablelib.sqdist.out
    assert (torch.Tag.out in scale_out.tags) == hasattr(torch.Tag, "out")
    x = torch.randn(2, 3)
    out = torch.empty(2, 3)
    assert scale_out(x, 2.0, out=out) is out
    torch.testing.assert_close(out, x * 2)
    empty = torch.empty(0)
    scale_out(x, 3.0, out=empty)  # an empty out is resized without a word
    torch.testing.assert_close(empty, x * 3)
    # and the tensor aten::resize_ returned is released: this Python object is its one owner
    # (the handle it returned was once dropped, so every resized out= stayed allocated for ever)
    assert empty._use_count() == 1, empty._use_count()
    a, b = torch.randn(4, 3, dtype=torch.float64), torch.randn(4, 3, dtype=torch.float64)
    d = torch.empty(0, dtype=torch.float64)
    sqdist_out(a, b, out=d)
    torch.testing.assert_close(d, ((a - b) ** 2).sum(1))
    capfd.readouterr()
    wrong = torch.zeros(7, dtype=torch.float64)
    with __import__("warnings").catch_warnings(record=True) as caught:
        __import__("warnings").simplefilter("always")
        sqdist_out(a, b, out=wrong)  # a non-empty out of another shape: aten's warning, then resized
    said = capfd.readouterr().err + "".join(str(w.message) for w in caught)
    assert "An output with one or more elements was resized" in said, said
    torch.testing.assert_close(wrong, ((a - b) ** 2).sum(1))
    assert wrong._use_count() == 1, wrong._use_count()  # so is the one aten::expand_copy.out returned
    strided = torch.zeros(3, 2).t()  # a non-contiguous out of the right shape: written back
    scale_out(x, 2.0, out=strided)
    torch.testing.assert_close(strided, x * 2)
    with pytest.raises(RuntimeError, match=r"^stablelib::scale.out: out= argument 'out' has dtype Double, but the "
                       r"result has dtype Float"):
        scale_out(x, 2.0, out=torch.empty(2, 3, dtype=torch.float64))
    with pytest.raises(RuntimeError, match=r"^stablelib::scale.out: argument 'out' is written in place, but shares "
                       r"memory with input 'self'"):
        scale_out(x, 2.0, out=x)
    _passes_opcheck(scale_out, (torch.randn(2, 3), 2.0), {"out": torch.empty(2, 3)})
    _passes_opcheck(sqdist_out, (a, b), {"out": torch.empty(4, dtype=torch.float64)})
    torch._dynamo.reset()

    def f(t):
        o = torch.empty_like(t)
        module.ops.scale(t, 1.0)
        torch.ops.stablelib.scale.out(t, 4.0, out=o)
        return o + 1
    torch.testing.assert_close(torch.compile(f, fullgraph=True)(x), x * 4 + 1)


@pytest.mark.slow(40)
def test_gradients_opcheck_and_compile(stablelib):
    module, _, _ = stablelib
    a = torch.randn(4, 3, dtype=torch.float64, requires_grad=True)
    b = torch.randn(4, 3, dtype=torch.float64, requires_grad=True)
    f = lambda x, y: module.ops.sqdist(module.ops.scale(x, 3.0), y)  # noqa: E731
    assert torch.autograd.gradcheck(f, (a, b))
    assert torch.autograd.gradgradcheck(f, (a, b))
    for op, args in ((torch.ops.stablelib.scale.default, (a, 2.0)), (torch.ops.stablelib.sqdist.default, (a, b))):
        result = torch.library.opcheck(op, args)
        assert all(v == "SUCCESS" for v in result.values()), result
    torch._dynamo.reset()
    compiled = torch.compile(f, fullgraph=True)
    torch.testing.assert_close(compiled(a, b), f(a, b))


class _KernelDtypes(torch.utils._python_dispatch.TorchDispatchMode):
    """The dtypes of the tensor arguments (a list's elements too) of each stablelib op as it
    reaches its kernel, below the autocast key."""

    def __init__(self):
        super().__init__()
        self.seen = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func.namespace == "stablelib":
            given = [*args, *(kwargs or {}).values()]
            self.seen[func.__name__.split(".")[0]] = [a.dtype for a in given if isinstance(a, torch.Tensor)]
        return func(*args, **(kwargs or {}))


def _gelu(t):  # gelu_fast's expression in eager torch, in float
    t = t.float()
    return t * torch.sigmoid(1.5957691216057308 * t * (1 + 0.044715 * t * t))


def _rms_norm(x, w, eps=1e-6):
    rstd = torch.rsqrt((x * x).mean(-1) + eps)
    return x * rstd.unsqueeze(-1) * w, rstd


@pytest.mark.parametrize("low", [torch.bfloat16, torch.float16])
def test_autocast_policies(stablelib, low):
    """`autocast:` in the stable target: Python kernels at AutocastCPU and AutocastCUDA
    (python/autocast.py) with the full target's C++ kernels' semantics (at::autocast, the
    same rules as tests/test_autocast.py checks there): the dtypes that reach each kernel,
    the results against eager torch on the cast inputs, float64 and integer tensors passed
    as they are, a keyword-only tensor cast, promote's refusal of a third floating dtype."""
    ops = torch.ops.stablelib
    x, y, i = torch.randn(4, 8), torch.randn(8).to(low), torch.arange(8)
    other = torch.float16 if low == torch.bfloat16 else torch.bfloat16
    cases = [  # (call, the dtypes reaching the kernel, the result's dtype)
        (lambda: ops.gelu_fast(x), [low], low),  # lower_precision: to the autocast dtype
        (lambda: ops.gelu_fast(x.double()), [torch.float64], torch.float64),  # float64 is never cast
        (lambda: ops.tile_rows(x[0], 3), [low], low),  # a C++ kernel
        (lambda: ops.row_rms_norm(y.view(1, 8), y), [torch.float32] * 2, torch.float32),  # fp32
        (lambda: ops.row_rms_norm(x.double(), y.double()), [torch.float64] * 2, torch.float64),
        (lambda: ops.axpby(x, y, 1.0, 2.0), [torch.float32] * 2, torch.float32),  # promote: float32 wins
        (lambda: ops.axpby(y, y, 1.0, 2.0), [low] * 2, low),
        (lambda: ops.axpby(x.double(), y, 1.0, 2.0), [torch.float64, low], torch.float64),  # float64 ignored
        (lambda: ops.axpby(i, y, 1.0, 2.0), [torch.int64, low], low),  # integers pass unchanged
        (lambda: ops.axpby(i, x, 1.0, 2.0), [torch.int64, torch.float32], torch.float32),
        (lambda: ops.blend(y, end=x[0], weight=0.25), [torch.float32] * 2, torch.float32),  # a keyword-only tensor
        (lambda: ops.blend(x[0], end=y), [torch.float32] * 2, torch.float32),
    ]
    for call, seen, dtype in cases:
        with torch.autocast("cpu", dtype=low), _KernelDtypes() as mode:
            out = call()
        out = out[0] if isinstance(out, tuple) else out
        assert list(mode.seen.values()) == [seen] and out.dtype == dtype, (mode.seen, out.dtype, seen, dtype)
    with torch.autocast("cpu", dtype=low):
        torch.testing.assert_close(ops.gelu_fast(x), _gelu(x.to(low)).to(low))
        torch.testing.assert_close(ops.tile_rows(x[0], 3), x[0].to(low).expand(3, 8))
        out, rstd = ops.row_rms_norm(x.to(low), y)
        torch.testing.assert_close((out, rstd), _rms_norm(x.to(low).float(), y.float()))
        torch.testing.assert_close(ops.axpby(x, y, 1.0, 2.0), x + 2 * y.float())
        torch.testing.assert_close(ops.blend(x[0], end=y), x[0] + 0.5 * (y.float() - x[0]))
        with pytest.raises(RuntimeError, match=rf"^stablelib::axpby: argument 'y' has dtype {other}, but under "
                           rf"autocast \(promote\) the op takes float32 or the autocast dtype {low}"):
            ops.axpby(y, y.to(other), 1.0, 1.0)  # as the full target's at::autocast::prioritize refuses it
    with _KernelDtypes() as mode:  # outside autocast nothing is cast
        assert ops.gelu_fast(x).dtype == torch.float32 and ops.axpby(y, y, 1.0, 1.0).dtype == low
    assert mode.seen == {"gelu_fast": [torch.float32], "axpby": [low, low]}
    for op in ("gelu_fast", "tile_rows", "row_rms_norm", "axpby", "blend"):  # CUDA's too (no GPU runs it here)
        assert all(torch._C._dispatch_has_kernel_for_dispatch_key(f"stablelib::{op}", k) for k in
                   ("AutocastCPU", "AutocastCUDA")), op
    assert not torch._C._dispatch_has_kernel_for_dispatch_key("stablelib::scale", "AutocastCPU")


@pytest.mark.slow(30)
def test_autocast_with_autograd_opcheck_and_compile(stablelib):
    """Under autocast the casts are recorded by autograd (their gradients come back in the
    inputs' dtypes), the Python autograd of the stable target runs below them, opcheck passes
    with the autocast kernels in the way, and torch.compile(fullgraph=True) traces through
    them (the Python dispatcher's `py_impl` kernels) with no graph break."""
    ops = torch.ops.stablelib
    x = torch.randn(4, 8, requires_grad=True)
    w = torch.randn(8, dtype=torch.bfloat16, requires_grad=True)

    def f(a, b):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            h = ops.axpby(ops.gelu_fast(a), b, 1.0, 2.0)  # bfloat16 + bfloat16: bfloat16
            return ops.row_rms_norm(h, b)[0]  # fp32

    def reference(a, b):
        h = _gelu(a.bfloat16()).bfloat16() + 2 * b
        return _rms_norm(h.float(), b.float())[0]

    out = f(x, w)
    assert out.dtype == torch.float32
    torch.testing.assert_close(out, reference(x, w), atol=2e-2, rtol=2e-2)
    grads = torch.autograd.grad(out.sum(), (x, w))
    expected = torch.autograd.grad(reference(x, w).sum(), (x, w))
    assert [g.dtype for g in grads] == [torch.float32, torch.bfloat16]
    torch.testing.assert_close(grads, expected, atol=5e-2, rtol=5e-2)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        for op, args, kwargs in ((ops.gelu_fast.default, (x,), {}), (ops.axpby.default, (x, w, 1.0, 2.0), {}),
                                 (ops.blend.default, (w.detach(),), {"end": x[0].detach()}),
                                 (ops.row_rms_norm.default, (x, w), {})):
            result = torch.library.opcheck(op, args, kwargs)
            assert all(v == "SUCCESS" for v in result.values()), (op, result)
    torch._dynamo.reset()
    compiled = torch.compile(f, fullgraph=True)
    out = compiled(x, w)
    assert out.dtype == torch.float32
    torch.testing.assert_close(out, f(x, w), atol=2e-2, rtol=2e-2)
    torch.testing.assert_close(torch.autograd.grad(out.sum(), (x, w)), grads, atol=5e-2, rtol=5e-2)


@pytest.mark.slow(40)
def test_symint_arguments(stablelib):
    """SymInt, SymInt[] and SymInt? arguments: TORCH_BOX unboxes them as int64_t and
    IntHeaderOnlyArrayRef (torch's IValue conversion treats a SymInt as an int, 2.11 on); the
    shape rule reads them; traced with symbolic sizes through the fake kernel."""
    module, _, _ = stablelib
    row = torch.randn(3, dtype=torch.float64, requires_grad=True)
    torch.testing.assert_close(module.ops.tile_rows(row, 4), row.expand(4, 3))
    assert module.ops.tile_rows(row, 0).shape == (0, 3)
    for dtype in (torch.bfloat16, torch.float16):  # torch::headeronly::BFloat16 and Half in the kernel
        half = torch.randn(5).to(dtype)
        torch.testing.assert_close(module.ops.tile_rows(half, 2), half.expand(2, 5), rtol=0, atol=0)
    value = torch.tensor(1.5, dtype=torch.float64, requires_grad=True)
    torch.testing.assert_close(module.ops.fill_size(value, [2, 3]), torch.full((2, 3), 1.5, dtype=torch.float64))
    torch.testing.assert_close(module.ops.fill_size(value, [4], plus=2), torch.full((4,), 3.5, dtype=torch.float64))
    assert module.ops.fill_size(value, []).shape == ()
    with pytest.raises(RuntimeError, match=r"^stablelib::tile_rows: output 'result' would have negative size -1 at "
                                           r"dimension 0 \(shape \[-1, 3\] from \[n, D\]\)$"):
        module.ops.tile_rows(row, -1)
    with pytest.raises(RuntimeError, match=r"^stablelib::fill_size: output 'result' would have negative size -2 at "
                                           r"dimension 1 \(shape \[2, -2\] from size\)$"):
        module.ops.fill_size(value, [2, -2])
    with pytest.raises(RuntimeError, match=r"^stablelib::fill_size: argument 'value' must have 0 dimensions \[\], "
                                           r"but got 1 \(shape \[1\]\)"):
        module.ops.fill_size(value.reshape(1), [2])
    assert torch.autograd.gradcheck(lambda r: module.ops.tile_rows(r, 3), (row,))
    assert torch.autograd.gradcheck(lambda v: module.ops.fill_size(v, [2, 2], 1), (value,))
    for op, args in ((torch.ops.stablelib.tile_rows.default, (row, 5)),
                     (torch.ops.stablelib.fill_size.default, (value, [3, 2], 1)),
                     (torch.ops.stablelib.fill_size.default, (value, [2]))):
        result = torch.library.opcheck(op, args)
        assert all(v == "SUCCESS" for v in result.values()), result
    torch._dynamo.reset()
    f = torch.compile(lambda x: module.ops.tile_rows(x, x.shape[0]) + module.ops.fill_size(x.sum(), [x.shape[0], 1]),
                      fullgraph=True, dynamic=True)
    for n in (3, 5):
        x = torch.randn(n, dtype=torch.float64)
        torch.testing.assert_close(f(x), x.expand(n, n) + x.sum())


@pytest.mark.slow(40)
def test_written_tensor_lists(stablelib):
    """Tensor(a!)[] arguments (an optimizer step's): dispatched on the first tensor given when
    no tensor is required; every element checked (device, dtype, the shape rule), no written
    element sharing memory with another element or argument, non-contiguous elements computed
    in contiguous copies written back; the messages are the full target's (adam_step's)."""
    module, _, _ = stablelib
    ops = module.ops
    params = [torch.randn(3, 4, dtype=torch.float64), torch.randn(4, 5, dtype=torch.float64).t()]  # one transposed
    momenta = [torch.randn(3, 4, dtype=torch.float64), torch.randn(4, 5, dtype=torch.float64).t()]
    grads = [torch.randn(3, 4, dtype=torch.float64), torch.randn(8, 5, dtype=torch.float64)[::2].t()]
    want_m = [0.9 * m + g for m, g in zip(momenta, grads)]
    want_p = [p - 0.1 * m for p, m in zip(params, want_m)]
    originals = list(params)
    ops.sgd_step(params, momenta, grads, lr=0.1, momentum=0.9)
    for got, want in zip([*params, *momenta], [*want_p, *want_m]):
        torch.testing.assert_close(got, want)
    assert params[1] is originals[1] and not params[1].is_contiguous()  # written back into the caller's tensor
    x, ys = torch.randn(3), [torch.zeros(3), torch.zeros(6)[::2]]
    ops.add_to_all(x, ys)
    torch.testing.assert_close(ys, [x, x])
    p, m, g = torch.randn(3, 4), torch.randn(3, 4), torch.randn(3, 4)

    def fails(message, *args):
        with pytest.raises(RuntimeError, match="^" + re.escape(message) + "$"):
            ops.sgd_step(*args, lr=0.1, momentum=0.9)

    fails("stablelib::sgd_step: argument 'params[0]' is written in place, but shares memory with argument "
          "'momenta[0]', also written; pass a copy (clone()) of one of them", [p], [p], [g])
    fails("stablelib::sgd_step: argument 'params[1]' is written in place, but shares memory with input 'grads[0]'; "
          "pass a copy (clone()) of one of them", [m, p], [torch.zeros(3, 4), torch.zeros(3, 4)], [p[:, :4], g])
    fails("stablelib::sgd_step: argument 'momenta[0]' is written in place, but some of its elements share memory "
          "(an expanded or stride-0 tensor); clone() it first", [torch.zeros(2, 3)], [torch.zeros(3).expand(2, 3)],
          [torch.zeros(2, 3)])
    fails("stablelib::sgd_step: argument 'momenta' holds 1 tensor, but expected len(params) = 2 (its shape is "
          "[p.shape for p in params])", [p, p.clone()], [m], [g, g])
    fails("stablelib::sgd_step: argument 'grads[0]' has shape [4], but expected params[0].shape = [3, 4]",
          [p], [m], [torch.zeros(4)])
    fails("stablelib::sgd_step: argument 'params[0]' has dtype Int, but expected one of: float32, float64",
          [p.int()], [m], [g])
    fails("stablelib::sgd_step: argument 'momenta[0]' has dtype Double, but expected Float (the dtype of "
          "'params[0]')", [p], [m.double()], [g])
    with pytest.raises(RuntimeError, match=r"^stablelib::add_to_all: argument 'ys\[1\]' is written in place, but "
                                           r"shares memory with input 'x'; pass a copy \(clone\(\)\) of one of them$"):
        ops.add_to_all(x, [torch.zeros(3), x])
    with pytest.raises(RuntimeError, match=r"^stablelib::add_to_all: argument 'ys\[0\]' has dimensions \[4\] where "
                                           r"\*S = \[3\] was expected \(shape \[4\]\)$"):
        ops.add_to_all(x, [torch.zeros(4)])
    # a read Tensor[]'s non-contiguous elements reach the kernel as contiguous copies too
    a, b = torch.randn(3, 4), torch.randn(3, 4)
    torch.testing.assert_close(ops.weighted_any(torch.tensor([1.0, 2.0]), [a.t(), b.t()]), a.t() + 2 * b.t())
    lists = ([torch.randn(3), torch.randn(2, 2)], [torch.randn(3), torch.randn(2, 2)], [torch.randn(3), torch.randn(2, 2)])
    for op, args, kwargs in ((torch.ops.stablelib.sgd_step.default, lists, {"lr": 0.1, "momentum": 0.9}),
                             (torch.ops.stablelib.add_to_all.default, (torch.randn(3), [torch.randn(3), torch.randn(3)]), {})):
        result = torch.library.opcheck(op, args, kwargs)
        assert all(v == "SUCCESS" for v in result.values()), result


def _gelu(x):
    return torch.nn.functional.gelu(x.double(), approximate="tanh").to(x.dtype)


@pytest.mark.slow(20)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
def test_pointwise_values_against_eager(stablelib, dtype):
    """Generated pointwise kernels (templates/stable/pointwise.cpp.j2): torch eager as the
    reference, contiguous, transposed, channels-last, broadcast and large (parallel, vectorized)."""
    module, _, _ = stablelib
    ops = module.ops
    x = torch.randn(37, 129, dtype=dtype) * 4
    for t in (x, x.t(), x[:, ::3], torch.randn(4, 3, 5, 6, dtype=dtype).to(memory_format=torch.channels_last),
              torch.randn(3000, 700, dtype=dtype), torch.tensor(1.5, dtype=dtype)):
        out = ops.gelu_fast(t)
        torch.testing.assert_close(out, _gelu(t))
        want = torch.empty_like(t)  # aten's elementwise output layout, as the fake kernel's
        assert out.dtype == dtype and out.shape == t.shape and (out.dim() < 2 or out.stride() == want.stride()), \
            (out.stride(), want.stride())
    b = torch.randn(129, dtype=dtype)
    torch.testing.assert_close(ops.axpby(x, b, 2.0, -0.5), (2.0 * x.double() - 0.5 * b.double()).to(dtype),
                               **({"atol": 0.05, "rtol": 0.02} if dtype in (torch.float16, torch.bfloat16) else {}))
    torch.testing.assert_close(ops.axpby(x[:, :1], b[:, None][:5].t(), 1.0, 1.0),  # [37, 1] with [1, 5]
                               (x[:, :1].double() + b[:5].double()).to(dtype))
    if dtype in (torch.float32, torch.float64):
        s, c = ops.sincos(x.t())
        torch.testing.assert_close(s, x.t().sin())
        torch.testing.assert_close(c, x.t().cos())
    lo, hi = (-3, 3)
    y = torch.randn(129, 37, dtype=dtype).t()
    torch.testing.assert_close(ops.clipped_add(x, y, lo, hi), torch.clamp(x + y, lo, hi))


@pytest.mark.slow(5)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_pointwise_short_broadcast_rows(stablelib, dtype):
    """Short rows (a bias over the last dimension, [N, 1] with [1, M]) go in tiles of whole rows
    (<opwrap/stable/pointwise.h>): a broadcast row repeated in a buffer, a strided operand gathered,
    an out= argument of another layout scattered; ranges of the thread pool that start mid-row."""
    module, _, _ = stablelib
    ops, out_op = module.ops, torch.ops.stablelib.axpby.out
    tol = {"atol": 0.05, "rtol": 0.02} if dtype == torch.bfloat16 else {}

    def check(x, y):
        want = (2.0 * x.double() - 0.5 * y.double()).to(dtype)
        torch.testing.assert_close(ops.axpby(x, y, 2.0, -0.5), want, **tol)
        out = torch.empty(want.shape[::-1], dtype=dtype).t() if want.dim() == 2 else torch.empty_like(want)
        out_op(x, y, 2.0, -0.5, out=out)
        torch.testing.assert_close(out, want, **tol)

    r = functools.partial(torch.randn, dtype=dtype)
    threads = torch.get_num_threads()
    try:
        for n in (1, 2):
            torch.set_num_threads(n)
            for shape, other in (([5000, 8], [8]), ([3001, 13], [13]), ([2000, 16], [2000, 1]), ([4000, 1], [1, 16]),
                                 ([6, 700, 8], [6, 1, 8]), ([3, 1, 5], [3, 9000, 1]), ([70, 600], [600]),
                                 ([9], [3, 1])):
                check(r(shape), r(other))
                check(r(other), r(shape))
            check(r(4000, 32)[:, ::2], r(16))  # a strided input
            check(r(4000, 16), r(32)[::2])  # a strided broadcast row
            check(r(16, 3000).t(), r(16))  # a transposed input with a row along its memory
    finally:
        torch.set_num_threads(threads)


@pytest.mark.slow(3)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
def test_pointwise_tanh_log_and_integer_powers(stablelib, dtype):
    """tanh and log in float are math.h's tanh_f32 and log_f32 (vectorized; within 2 and 1 ulp of
    libm's); `x ** 4`, `x ** -2` and `x ** 0` are products: torch's values over a wide range
    (subnormals, large |x|, negative, zero), NaN and infinities."""
    module, _, _ = stablelib
    big = torch.finfo(dtype).max
    wide = torch.logspace(-40, 38, 2001, dtype=torch.float64)
    x = torch.cat([torch.linspace(-12, 12, 200001, dtype=torch.float64), wide, -wide,
                   torch.tensor([0.0, -0.0, 0.625, -0.625, 9.0, 44.5, float("nan"), float("inf"), float("-inf")],
                                dtype=torch.float64)]).clamp(-big, big).to(dtype)
    t, lg, p4, r2, one = module.ops.tanh_log_powers(x)
    if dtype == torch.float32:  # within 2 ulp of the exact value (tanh_f32's measured bound; log_f32's is 1)
        for got, exact in ((t, torch.tanh(x.double())), (lg, torch.log(x.double()))):
            finite = exact.isfinite()
            e, g = exact[finite], got[finite]
            ulp = torch.nextafter(e.abs().float(), torch.tensor(float("inf"))).double() - e.abs().float().double()
            err = (g.double() - e).abs()
            assert bool((err <= 2 * ulp).all()), x[finite][err > 2 * ulp][:5]
        assert torch.equal(torch.signbit(t), torch.signbit(x))  # -0.0 stays -0.0
    torch.testing.assert_close(t, torch.tanh(x), equal_nan=True)
    torch.testing.assert_close(lg, torch.log(x), equal_nan=True)
    torch.testing.assert_close(p4, torch.pow(x, 4), equal_nan=True)
    torch.testing.assert_close(r2, torch.pow(x, -2), equal_nan=True)
    assert torch.equal(one, torch.ones_like(x))  # NaN ** 0 is 1, as torch.pow



@pytest.mark.slow(3)
def test_pointwise_exp_and_fast_exp_in_float(stablelib):
    """exp and fast_exp of a float are math.h's exp_f32 and fast_exp_f32 (vectorized): exp within
    1 ulp of the exact value over float's range, subnormal results included, fast_exp within 3
    ulp where its result is a normal float (x in [ln 2^-126, ln 2^127.5]), 0 below and inf
    above; inf for inf, 0 for -inf and NaN for NaN (of either sign), as torch.exp."""
    module, _, _ = stablelib
    x = torch.cat([torch.arange(-110.0, 95.0, 0.0007, dtype=torch.float64).float(),
                   torch.tensor([0.0, -0.0, 88.72, 88.73, 89.0, -87.3, -103.9, -104.0, -104.01, 1e30, -1e30, 5e6,
                                 -5e6, float("inf"), float("-inf"), float("nan"), -float("nan")])])
    e, f = module.ops.exps(x)
    exact = torch.exp(x.double())
    finite = exact.float().isfinite() & (exact.float() != 0)
    ulp = torch.nextafter(exact.float().abs(), torch.tensor(float("inf"))).double() - exact.float().abs().double()
    err = (e.double() - exact).abs() / ulp
    assert bool((err[finite] <= 1).all()), x[finite][err[finite] > 1][:5]
    assert torch.equal(e[~finite].nan_to_num(nan=7.0), torch.exp(x)[~finite].nan_to_num(nan=7.0))
    normal = (x >= math.log(2.0 ** -126)) & (x <= math.log(2.0 ** 127.5))
    ferr = (f.double() - exact).abs() / ulp
    assert bool((ferr[normal] <= 3).all()), x[normal][ferr[normal] > 3][:5]
    below, above = x < math.log(2.0 ** -126), (x > math.log(2.0 ** 127.5)) & ~x.isnan()
    assert bool((f[below] == 0).all()) and bool((f[above] == float("inf")).all())
    assert bool(f[x.isnan()].isnan().all()) and bool(e[x.isnan()].isnan().all())

# Every float16 value through the generated kernels, whose loops compute float16 in float over
# buffers: converted by F16C where the CPU has it, in integer arithmetic under
# ATEN_CPU_CAPABILITY=default (<opwrap/stable/math.h>, to_float and from_float).
FLOAT16_PROBE = """
import sys, torch, stablelib
ops = stablelib.ops
x = torch.arange(-32768, 32768, dtype=torch.int32).to(torch.int16).view(torch.float16)  # every bit pattern
finite = x[x.isfinite()]
out, rstd = ops.row_rms_norm(finite.view(-1, 62), torch.ones(62, dtype=torch.float16))
torch.save({"copy": ops.axpby(x, torch.zeros_like(x), 1.0, 0.0),  # exact in float: the conversions alone
            "rounded": ops.axpby(x, x, 1.5, 0.25),  # 1.75 x, exact in float: rounding, subnormals, overflow
            "gelu": ops.gelu_fast(x), "strided": ops.gelu_fast(x.view(256, 256).t()),
            "rms_norm": out, "rstd": rstd}, sys.argv[1])
"""


def _same_bits(a, b):
    """Equal bit for bit, a NaN's payload aside (F16C keeps it; the integer conversion makes it 0x7E00)."""
    assert a.dtype == b.dtype == torch.float16 and a.shape == b.shape
    nan = a.isnan()
    assert torch.equal(nan, b.isnan())
    assert torch.equal(a[~nan].view(torch.int16), b[~nan].view(torch.int16))


@pytest.mark.slow(8)
def test_float16_converts_every_value_as_aten_with_and_without_f16c(stablelib, tmp_path):
    module, _, lib = stablelib
    results = {}
    for capability in ("avx2", "default"):  # F16C, then the integer conversions
        path = tmp_path / f"{capability}.pt"
        env = {**os.environ, "ATEN_CPU_CAPABILITY": capability, "PYTHONPATH": str(lib)}
        r = subprocess.run([sys.executable, "-c", FLOAT16_PROBE, str(path)], cwd=tmp_path, env=env,
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stderr[-3000:]
        results[capability] = torch.load(path)
    x = torch.arange(-32768, 32768, dtype=torch.int32).to(torch.int16).view(torch.float16)
    for got in results.values():  # aten computes float16 in float too, and rounds to nearest even
        _same_bits(got["copy"], (x.float() + 0.0).half())
        _same_bits(got["rounded"], (1.5 * x.float() + 0.25 * x.float()).half())
        _same_bits(got["strided"], got["gelu"].view(256, 256).t())
    for key in ("copy", "rounded", "gelu", "strided"):  # one loop, two conversions: the same bits
        _same_bits(results["avx2"][key], results["default"][key])
    finite = x[x.isfinite()].view(-1, 62)
    expect = _rms_norm(finite, torch.ones(62, dtype=torch.float16))
    for got in results.values():  # the row-wise loops of each capability, each its conversions
        torch.testing.assert_close(got["rms_norm"], expect[0], atol=2e-3, rtol=2e-3)
        torch.testing.assert_close(got["rstd"], expect[1], atol=2e-3, rtol=2e-3)


@pytest.mark.slow(10)
def test_pointwise_promotion_integers_and_errors(stablelib):
    module, _, _ = stablelib
    ops = module.ops
    a, b = torch.randn(4, 5), torch.randn(5, dtype=torch.float64)
    assert ops.axpby(a, b, 1.0, 1.0).dtype == torch.float64  # as torch.add
    assert ops.axpby(a, torch.tensor(2.0, dtype=torch.float64), 1.0, 1.0).dtype == torch.float32  # a 0-d tensor ranks lower
    i = torch.arange(6).reshape(2, 3)
    torch.testing.assert_close(ops.axpby(i, i, 0.5, 1.0), 0.5 * i + i.float())  # integers to the default float dtype
    torch.testing.assert_close(ops.gelu_fast(i), _gelu(i.float()))
    for dtype in (torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8):
        lo_v = 0 if dtype == torch.uint8 else -60
        p = torch.randint(lo_v, 60, (7, 33), dtype=dtype)
        q = torch.randint(lo_v, 60, (33,), dtype=dtype)
        r = ops.clipped_add(p, q, 10, 50)
        assert r.dtype == dtype and torch.equal(r, torch.clamp(p + q, 10, 50)), dtype
    assert torch.equal(ops.clipped_add(p.int(), q.long(), 10, 50), torch.clamp(p.int() + q.long(), 10, 50))
    with pytest.raises(RuntimeError, match=r"^stablelib::axpby: argument 'y' has shape \[4\], which does not broadcast "
                       r"with 'x' \(broadcast so far: \[3\]\)"):
        ops.axpby(torch.randn(3), torch.randn(4), 1.0, 1.0)
    with pytest.raises(RuntimeError, match=r"^stablelib::clipped_add: the inputs \('self' Bool, 'other' Bool\) compute "
                       r"in dtype Bool, which is not supported; expected one of: float32, float64"):
        ops.clipped_add(torch.ones(2, dtype=torch.bool), torch.ones(2, dtype=torch.bool), 0, 1)
    special = torch.tensor([float("nan"), float("inf"), -200.0, 200.0, 0.0, -0.0])
    torch.testing.assert_close(ops.gelu_fast(special), torch.tensor([float("nan"), float("inf"), -0.0, 200.0, 0.0, -0.0]),
                               equal_nan=True)


@pytest.mark.slow(10)
def test_a_pointwise_out_overload(stablelib, capfd):
    """axpby.out runs axpby's expression into its out= argument, as aten's out= elementwise ops:
    resized, of a dtype the result casts to, written directly or through a temporary where it has
    another dtype, overlaps itself or an input."""
    module, _, _ = stablelib
    op = torch.ops.stablelib.axpby.out
    x, y = torch.randn(4, 5), torch.randn(5)
    want = 2.0 * x + y
    out = torch.empty(4, 5)
    assert op(x, y, 2.0, 1.0, out=out) is out
    torch.testing.assert_close(out, want)
    for target in (torch.empty(0), torch.empty(5, 4).t(), torch.empty(4, 5, dtype=torch.float64)):
        op(x, y, 2.0, 1.0, out=target)  # resized from empty; transposed; cast to float64
        torch.testing.assert_close(target, want.to(target.dtype))
    assert torch.empty(5, 4).t().stride() == (1, 4)
    same = x.clone()
    op(same, y, 2.0, 1.0, out=same)  # out is an input: computed in a temporary
    torch.testing.assert_close(same, want)
    capfd.readouterr()
    wrong = torch.zeros(7)
    op(x, y, 2.0, 1.0, out=wrong)  # elements of another shape: aten's warning, then resized
    assert "An output with one or more elements was resized" in capfd.readouterr().err
    torch.testing.assert_close(wrong, want)
    with pytest.raises(RuntimeError, match=r"^stablelib::axpby.out: result type Float can't be cast to the desired "
                                           r"output type Long \(out= argument 'out'\)"):
        op(x, y, 2.0, 1.0, out=torch.empty(4, 5, dtype=torch.int64))
    _passes_opcheck(op, (torch.randn(3, 4), torch.randn(4), 2.0, 1.0), {"out": torch.empty(3, 4)})
    torch._dynamo.reset()
    f = torch.compile(lambda a, b: op(a, b, 2.0, 1.0, out=torch.empty_like(a)) + 1, fullgraph=True)
    torch.testing.assert_close(f(x, y), want + 1)


@pytest.mark.slow(20)
def test_forward_formulas_run_as_the_ops_jvp(stablelib):
    """Forward formulas (`result:`, or a return's name) of a C++, a Rust, a two-return C and a
    row-wise op: forward mode (gradcheck's check_forward_ad), forward over reverse, opcheck and
    torch.compile over the op with its jvp (the generated autograd.Function)."""
    module, _, _ = stablelib
    ops = module.ops
    x = torch.randn(4, 3, dtype=torch.float64, requires_grad=True)
    y = torch.randn(4, 3, dtype=torch.float64, requires_grad=True)
    cases = ((lambda t: ops.scale(t, 1.5), (x,)), (ops.sqdist, (x, y)), (ops.sumsq, (x,)), (ops.row_softmax, (x,)))
    for f, args in cases:
        assert torch.autograd.gradcheck(f, args, check_forward_ad=True)
        assert torch.autograd.gradgradcheck(f, args, check_fwd_over_rev=True)
    import torch.autograd.forward_ad as fwAD
    with fwAD.dual_level():  # a tangent on one input; the other's is zeros; the tangent keeps the dtype
        t = torch.randn(4, 3, dtype=torch.float64)
        out = ops.sqdist(fwAD.make_dual(x.detach(), t), y.detach())
        torch.testing.assert_close(fwAD.unpack_dual(out).tangent, 2 * ((x - y) * t).sum(-1).detach())
    from torch.library import opcheck
    for op, args in ((torch.ops.stablelib.scale.default, (torch.randn(3, 2), 2.0)),
                     (torch.ops.stablelib.sqdist.default, (torch.randn(3, 2), torch.randn(3, 2))),
                     (torch.ops.stablelib.sumsq.default, (torch.randn(3, 2),))):
        opcheck(op, args)
    torch._dynamo.reset()
    f = torch.compile(lambda a, b: ops.sqdist(ops.scale(a, 2.0), b).sum(), fullgraph=True)
    a, b = torch.randn(5, 3, requires_grad=True), torch.randn(5, 3)
    f(a, b).backward()
    torch.testing.assert_close(a.grad, 2 * 2 * (2 * a.detach() - b))
    # A formula's value that does not broadcast to its return is an error naming the op and the return.
    runtime = importlib.import_module(f"{module.__name__}._generated._runtime")
    with pytest.raises(RuntimeError, match=r"^stablelib::sqdist: the forward-derivative formula of 'result' gives a "
                                           r"tangent of shape \[2\], but the return has shape \[4\]"):
        runtime.forward_tangent("stablelib::sqdist", "result", torch.ones(2), torch.ones(4))
    assert runtime.forward_tangent("x::y", "r", torch.ones(1), torch.ones(3, dtype=torch.float64)).dtype == torch.float64


def test_an_output_too_large_to_allocate_names_the_op_and_the_output(stablelib):
    """Outputs are allocated through the stable C shim (aoti_torch_empty_strided): torch's
    out-of-memory error, then the op and the output it was allocating."""
    module, _, _ = stablelib
    with pytest.raises(RuntimeError, match=r"(?s)can't allocate memory.*stablelib::tile_rows: while allocating output 'result'"):
        module.ops.tile_rows(torch.randn(1 << 20), 1 << 30)


def test_a_call_that_needs_no_autograd_goes_below_the_autograd_key(stablelib, monkeypatch):
    """A typed wrapper calls its op below the Autograd key when nothing needs autograd
    (_runtime.autograd_not_needed), skipping the Python autograd kernel's round trip, and through
    it otherwise: an argument requiring grad, forward-mode AD, vmap, a TorchDispatchMode,
    torch.compile.  Each decision with the values and gradients it must give."""
    module, _, _ = stablelib
    ops = module.ops
    runtime = sys.modules[ops.scale.__module__.rsplit(".", 1)[0] + "._runtime"]
    decisions: list[bool] = []
    real = runtime.autograd_not_needed

    def spy(*args, **kwargs):
        decisions.append(real(*args, **kwargs))
        return decisions[-1]

    monkeypatch.setattr(runtime, "autograd_not_needed", spy)
    x = torch.randn(4, 3, dtype=torch.float64)
    torch.testing.assert_close(ops.scale(x, 2.0), x * 2)
    assert decisions == [True]
    xg = x.clone().requires_grad_()
    with torch.no_grad():
        out = ops.scale(xg, 2.0)
    assert decisions[-1] is True and out.grad_fn is None and not out.requires_grad
    out = ops.scale(xg, 2.0)  # requires grad: the autograd kernel records the graph
    assert decisions[-1] is False and out.grad_fn is not None
    out.sum().backward()
    torch.testing.assert_close(xg.grad, torch.full_like(x, 2.0))
    expected = torch.autograd.grad(ops.gelu_fast(xg).sum(), xg)[0]
    # vmap over an input that requires grad: the batching rule's calls are differentiated
    got = torch.autograd.grad(torch.vmap(ops.gelu_fast)(xg).sum(), xg)[0]
    assert decisions[-1] is False
    torch.testing.assert_close(got, expected)
    import torch.autograd.forward_ad as fwAD
    with fwAD.dual_level():  # a dual tensor requires no grad, and still has its jvp
        t = torch.randn_like(x)
        tangent = fwAD.unpack_dual(ops.scale(fwAD.make_dual(x, t), 1.5)).tangent
    assert decisions[-1] is False
    torch.testing.assert_close(tangent, 1.5 * t)

    class Seen(torch.utils._python_dispatch.TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            seen.append(str(func))
            return func(*args, **(kwargs or {}))

    seen: list[str] = []
    with Seen():
        torch.testing.assert_close(ops.scale(x, 2.0), x * 2)
    assert decisions[-1] is False and "stablelib.scale.default" in seen
    torch._dynamo.reset()
    compiled = torch.compile(lambda a: ops.gelu_fast(ops.scale(a, 2.0)), fullgraph=True, backend="aot_eager")
    torch.testing.assert_close(compiled(xg), ops.gelu_fast(ops.scale(xg, 2.0)))
    torch.testing.assert_close(compiled(x), ops.gelu_fast(ops.scale(x, 2.0)))


def test_torch_func_differentiates_the_ops_through_their_typed_wrappers(stablelib):
    """torch.func's transforms over a C++, a Rust, a two-return C, a row-wise and a pointwise
    op, called through their typed wrappers (`<package>.ops`), which apply the formulas as an
    autograd.Function before the op is dispatched (pyruntime.func_call: torch.func cannot
    differentiate the one at the Autograd key, pytorch#170834): jacrev and jvp against the
    eager Jacobian and Jacobian-vector product, jacfwd, vmap of grad, a hessian, vjp with a defaulted argument left out, and a
    second derivative through a once_differentiable backward, which raises as under
    torch.autograd rather than return zeros."""
    from torch.func import grad, hessian, jacfwd, jacrev, jvp, vjp, vmap
    module, _, _ = stablelib
    ops = module.ops
    g = torch.Generator().manual_seed(0)
    x, y, t = (torch.randn(3, 4, dtype=torch.float64, generator=g) for _ in range(3))
    for f in (lambda u: ops.scale(u, 1.5), lambda u: ops.sqdist(u, y), lambda u: ops.sumsq(u).sq, ops.row_softmax,
              ops.gelu_fast):
        torch.testing.assert_close(jacrev(f)(x), torch.autograd.functional.jacobian(f, x))
        torch.testing.assert_close(jvp(f, (x,), (t,))[1], torch.autograd.functional.jvp(f, x, t)[1])
    # jacfwd vmaps the op itself: the ops with a batching rule (pointwise; the others raise naming the op)
    torch.testing.assert_close(jacfwd(ops.gelu_fast)(x[0]), torch.autograd.functional.jacobian(ops.gelu_fast, x[0]))
    per_row = vmap(grad(lambda r: (ops.gelu_fast(r) * r).sum()))(x)  # gelu_fast has a batching rule (pointwise)
    xr = x.clone().requires_grad_()
    torch.testing.assert_close(per_row, torch.autograd.grad((ops.gelu_fast(xr) * xr).sum(), xr)[0])
    torch.testing.assert_close(hessian(lambda t: ops.scale(t, 2.0).pow(2).sum())(x[0]),
                               8 * torch.eye(4, dtype=torch.float64))
    xf = x.float()
    out, pullback = vjp(lambda t: ops.axpy(t, alpha=3.0), xf)  # y=None left out
    torch.testing.assert_close(out, 3 * xf)
    torch.testing.assert_close(pullback(torch.ones_like(xf))[0], torch.full_like(xf, 3.0))
    torch.testing.assert_close(grad(lambda t: ops.cube(t).sum())(x), 3 * x * x)
    with pytest.raises(RuntimeError, match="the backward of stablelib::cube, which is declared once_differentiable"):
        grad(lambda t: grad(lambda u: ops.cube(u).sum())(t).pow(2).sum())(x)
    with pytest.raises(RuntimeError, match="the backward of stablelib::cube, which is declared once_differentiable"):
        c = x.clone().requires_grad_()
        (first,) = torch.autograd.grad(ops.cube(c).sum(), c, create_graph=True)
        first.pow(2).sum().backward()


def _generated_autograd(lib: Path, declarations: str) -> str:
    """The stable target's generated python/autograd.py of a `codegen init` library `lib`
    whose scale.yaml holds `declarations` (generated only: nothing compiles)."""
    _stable_project(lib)
    (lib / "declarations" / "scale.yaml").write_text(textwrap.dedent(declarations))
    r = run_codegen("generate", cwd=lib)
    assert r.returncode == 0, r.stderr
    return (lib / "generated" / "python" / "autograd.py").read_text()


def test_formulas_read_cpp_booleans_as_python_unless_the_op_names_them(tmp_path):
    """derivatives.yaml's formulas are C++ (`x.sum(-1, true)`); the stable target runs them as
    Python with `True` and `False`, except where an argument takes the name (`true` is then
    that argument, as in the full target)."""
    text = _generated_autograd(tmp_path / "boollib", """\
        - func: scale(Tensor self, float factor) -> Tensor
          dtypes: [float32]
          kernels: {CPU: {abi: c}}
          like: self
          derivatives:
            self: grad * factor - (grad * self).sum(-1, true) * false
            result: self_t * factor
        - func: pick(Tensor self, float true) -> Tensor
          dtypes: [float32]
          kernels: {CPU: {abi: c}}
          like: self
          derivatives:
            self: grad * true
            result: self_t * true
        """)
    assert "(grad * factor - (grad * self).sum(-1, True) * False) if ctx.needs_input_grad[0]" in text, text
    assert "(grad * true) if ctx.needs_input_grad[0]" in text and "self_t * true, " in text, text


def test_formulas_call_torch_tensor_methods_where_at_tensor_spells_them_otherwise(tmp_path):
    """Formulas written for the full target call at::Tensor's methods: `scalar_type()`,
    `sym_sizes()`, `expand_symint(...)` (derivatives.yaml's spelling); the stable target's
    Python calls torch.Tensor's, `.dtype`, `.shape`, `.expand(...)`, and the rest stays as
    written (a method of another name is not touched)."""
    text = _generated_autograd(tmp_path / "methodlib", """\
        - func: scale(Tensor self, float factor) -> Tensor
          dtypes: [float32]
          kernels: {CPU: {abi: c}}
          like: self
          derivatives:
            self: grad.to(self.scalar_type()) * factor
            result: self_t.sum().expand_symint(self.sym_sizes()) * 0 + self_t.sym_size(0) * 0 + self_t * factor
        - func: row_sum(Tensor self) -> Tensor
          dtypes: [float32]
          kernels: {CPU: {abi: c}}
          shape: {self: [N, M], result: [N]}
          derivatives:
            self: grad.unsqueeze(1).expand_symint(self.sym_sizes ( ))
        """)
    backward = "grad.to(self.dtype) * factor"
    jvp = "self_t.sum().expand(self.shape) * 0 + self_t.size(0) * 0 + self_t * factor"
    rows = "grad.unsqueeze(1).expand(self.shape)"
    for expected in (backward, jvp, rows):
        assert expected in text, text
    assert "scalar_type" not in text and "sym_size" not in text and "expand_symint" not in text, text
    # the Python they became computes what the C++ did
    x, g = torch.randn(3, 4, dtype=torch.float64), torch.randn(3, dtype=torch.float32)
    names = {"self": x, "self_t": torch.ones_like(x), "factor": 2.0}
    assert eval(backward, {"grad": g.to(torch.float64).unsqueeze(1).expand(3, 4), **names}).dtype == torch.float64
    torch.testing.assert_close(eval(jvp, names), torch.full((3, 4), 2.0 + 3 * 0, dtype=torch.float64))
    torch.testing.assert_close(eval(rows, {"grad": g, **names}), g.unsqueeze(1).expand(3, 4))


@pytest.mark.slow(30)
def test_pointwise_gradients_opcheck_and_compile(stablelib):
    module, _, _ = stablelib
    ops = module.ops
    x = torch.randn(5, 3, dtype=torch.float64, requires_grad=True)
    b = torch.randn(3, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(ops.gelu_fast, (x,))
    assert torch.autograd.gradgradcheck(ops.gelu_fast, (x,))
    assert torch.autograd.gradcheck(lambda p, q: ops.axpby(p, q, 1.5, -2.0), (x, b))  # b's gradient summed to [3]
    # Forward mode of a pointwise op, derived from its backward formulas (the sum over inputs of
    # the formula with the input's tangent as grad), and over reverse.
    assert torch.autograd.gradcheck(ops.gelu_fast, (x,), check_forward_ad=True)
    assert torch.autograd.gradcheck(lambda p, q: ops.axpby(p, q, 1.5, -2.0), (x, b), check_forward_ad=True)
    assert torch.autograd.gradgradcheck(lambda p, q: ops.axpby(p, q, 1.5, -2.0), (x, b), check_fwd_over_rev=True)
    # An op with neither a forward formula nor a derived one (row_rms_norm: row-wise, two returns):
    # a dual tensor raises naming the op, with or without requires_grad, rather than giving a
    # result without a tangent.
    import torch.autograd.forward_ad as fwAD
    w = torch.randn(3, dtype=torch.float64)
    with fwAD.dual_level():
        for primal in (x.detach(), x):
            dual = fwAD.make_dual(primal, torch.ones_like(primal))
            with pytest.raises(NotImplementedError, match=r"^stablelib::row_rms_norm: forward-mode AD is not "
                                                          r"implemented in the stable-ABI target"):
                ops.row_rms_norm(dual, w)
        plain = ops.gelu_fast(x.detach())  # no tangent given: none expected
        assert fwAD.unpack_dual(plain).tangent is None
    for op, args in ((torch.ops.stablelib.gelu_fast.default, (torch.randn(4, 6).t(),)),
                     (torch.ops.stablelib.axpby.default, (torch.randn(2, 3), torch.randn(3), 2.0, 0.5)),
                     (torch.ops.stablelib.clipped_add.default, (torch.randint(-9, 9, (4,)), torch.randint(-9, 9, (4,)), -3, 3)),
                     (torch.ops.stablelib.sincos.default, (torch.randn(3, 2),))):
        _passes_opcheck(op, args)
    torch._dynamo.reset()
    f = torch.compile(lambda p, q: ops.gelu_fast(ops.axpby(p, q, 2.0, 1.0)) * 2, fullgraph=True)
    p, q = torch.randn(6, 3), torch.randn(3)
    torch.testing.assert_close(f(p, q), _gelu(2 * p + q) * 2)


@pytest.mark.slow(40)
def test_a_dtype_rule_and_a_shape_rule_of_an_optional_tensor(stablelib):
    """`dtype: {result: weights or int64}` and a dtype variable of the optional `weights`
    (float32 when absent), its shape rule checked where given (bundled bincount_fixed's)."""
    module, _, _ = stablelib
    idx = torch.tensor([0, 3, 3, 1, 0, 3])
    for index in (idx, idx.int()):
        got = module.ops.bincount(index, 5)
        assert got.dtype == torch.int64
        torch.testing.assert_close(got, torch.bincount(index, minlength=5))
        for dtype in (torch.float32, torch.float64):
            w = torch.rand(6, dtype=dtype)
            got = module.ops.bincount(index, 5, w[::1])
            assert got.dtype == dtype
            torch.testing.assert_close(got, torch.bincount(index, w, minlength=5))
    w = torch.rand(12, dtype=torch.float64)[::2]  # non-contiguous: a contiguous copy for the kernel
    torch.testing.assert_close(module.ops.bincount(idx, 4, w), torch.bincount(idx, w, minlength=4))
    with pytest.raises(RuntimeError, match=r"^stablelib::bincount: argument 'weights' has size 5 at dimension 0, "
                                           r"but expected N = 6 \(shape \[5\]\)$"):
        module.ops.bincount(idx, 5, torch.rand(5))
    with pytest.raises(RuntimeError, match=r"^stablelib::bincount: argument 'weights' has dtype Half, but expected "
                                           r"one of: float32, float64$"):
        module.ops.bincount(idx, 5, torch.rand(6).half())
    with pytest.raises(RuntimeError, match=r"^stablelib::bincount: argument 'self' holds 3, out of range: its values "
                                           r"must lie in \[0, 3\) \(index: bins\)$"):
        module.ops.bincount(idx, 3)
    w = torch.rand(6, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda w: module.ops.bincount(idx, 5, w), (w,))
    for args in ((idx, 5, w), (idx, 5), (idx.int(), 4, None)):
        result = torch.library.opcheck(torch.ops.stablelib.bincount.default, args)
        assert all(v == "SUCCESS" for v in result.values()), result


def _rms_norm(x, w, eps=1e-6):
    """torch's rms norm as the row-wise op computes it: in float for reduced types."""
    xf = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
    rstd = torch.rsqrt((xf * xf).mean(-1) + eps)
    return (xf * rstd.unsqueeze(-1) * w.to(xf.dtype)).to(x.dtype), rstd.to(x.dtype)


@pytest.mark.slow(40)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
def test_generated_rowwise_kernels(stablelib, dtype):
    """row_softmax and row_rms_norm, generated from row-wise programs as plain loops (no at::vec):
    torch's values for rows that are not a whole number of vectors (1 and 7: shorter than one;
    40, 47, 513 and 4097: whole vectors, then a rest; 1000 and 4097 long enough for the loops
    without exponentials to read a float16 or bfloat16 row as it is; 1, 7 and 16 short enough
    for row_rms_norm's sum to run 4 lanes at a time; 32 to 512 one chunk, whose sum runs a
    vector's lanes at a time; 513 two chunks), a non-contiguous
    input, NaN and infinities as torch.softmax gives them, the checks."""
    module, _, _ = stablelib
    tol = {torch.float32: 2e-6, torch.float64: 1e-12, torch.bfloat16: 1e-2, torch.float16: 2e-3}[dtype]
    wide = torch.float64 if dtype == torch.float64 else torch.float32
    for d in (1, 7, 16, 32, 40, 47, 512, 513, 1000, 4097):
        x = torch.randn(3, 2, d, dtype=dtype) * 4
        torch.testing.assert_close(module.ops.row_softmax(x), torch.softmax(x.to(wide), -1).to(dtype),
                                   atol=tol, rtol=tol)
        w = torch.randn(d, dtype=dtype)
        out, rstd = module.ops.row_rms_norm(x, w)
        expect = _rms_norm(x, w)
        torch.testing.assert_close(out, expect[0], atol=tol, rtol=tol)
        torch.testing.assert_close(rstd, expect[1], atol=tol, rtol=tol)
    x = torch.randn(33, 5, dtype=dtype).t()  # rows of 33 a stride apart: made contiguous by the wrapper
    torch.testing.assert_close(module.ops.row_softmax(x), torch.softmax(x.to(wide), -1).to(dtype), atol=tol, rtol=tol)
    w = torch.randn(66, dtype=dtype)[::2]
    torch.testing.assert_close(module.ops.row_rms_norm(x, w)[0], _rms_norm(x, w)[0], atol=tol, rtol=tol)
    special = torch.tensor([[0.0, float("inf"), 1.0], [float("nan"), 0.0, 1.0], [-float("inf"), 0.0, 1.0],
                            [-1e4, 0.0, 80.0]], dtype=dtype)
    torch.testing.assert_close(module.ops.row_softmax(special), torch.softmax(special.to(wide), -1).to(dtype),
                               atol=tol, rtol=tol, equal_nan=True)
    with pytest.raises(RuntimeError, match=r"^stablelib::row_rms_norm: argument 'weight' has size 4 at dimension 0, "
                                           r"but expected D = 3"):
        module.ops.row_rms_norm(torch.randn(2, 3, dtype=dtype), torch.randn(4, dtype=dtype))
    with pytest.raises(RuntimeError, match=r"^stablelib::row_softmax: argument 'self' has dtype Int, but expected "
                                           r"one of: float32, float64, float16, bfloat16"):
        module.ops.row_softmax(torch.ones(2, 3, dtype=torch.int32))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_generated_rowwise_reductions_over_the_lanes(stablelib, dtype):
    """A pass is one loop over the row under `#pragma omp simd`, its reductions the lanes'
    partial results combined at the end; max and min, whose clause drops NaN, also or-reduce a
    NaN flag (<opwrap/stable/rowwise.h>): max and min of every row length around the vector
    widths against torch.amin and torch.amax, and a NaN or an infinity in each position of the
    row (in each lane, in the loop's rest, in a later chunk of 512) propagates as there."""
    module, _, _ = stablelib
    for d in (1, 2, 3, 5, 8, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129, 200, 511, 512, 513, 1100):
        x = torch.randn(5, d, dtype=dtype)
        torch.testing.assert_close(module.ops.row_extremes(x), (x.amin(-1), x.amax(-1)), rtol=0, atol=0)
    for d in (3, 16, 64, 70, 130, 1030):
        rows = torch.randn(d, d, dtype=dtype)
        for value in (float("nan"), float("inf"), -float("inf")):
            x = rows.clone()
            x[torch.arange(d), torch.arange(d)] = value  # row i holds it at element i
            torch.testing.assert_close(module.ops.row_extremes(x), (x.amin(-1), x.amax(-1)), rtol=0, atol=0,
                                       equal_nan=True)


# Run with ATEN_CPU_CAPABILITY set, which the loops read once (rowwise.h's `capability`): the
# generated row-wise loops of one CPU build against torch, over rows around that build's
# vector width (W: 16 floats for AVX-512, 8 for AVX2, 4 for the default build), kShortRow (32)
# and the chunk (512), in each dtype.
CAPABILITY_SCRIPT = """\
import sys
import torch
sys.path.insert(0, sys.argv[1])
import stablelib
ops = stablelib.ops
for dtype, tol in ((torch.float32, 2e-6), (torch.float64, 1e-12), (torch.bfloat16, 1e-2), (torch.float16, 2e-3)):
    wide = torch.float64 if dtype == torch.float64 else torch.float32
    for d in (1, 3, 4, 5, 8, 9, 15, 16, 17, 24, 31, 32, 33, 47, 64, 100, 511, 512, 513, 1100):
        x = torch.randn(3, d, dtype=dtype) * 4
        w = torch.randn(d, dtype=dtype)
        torch.testing.assert_close(ops.row_softmax(x), torch.softmax(x.to(wide), -1).to(dtype), atol=tol, rtol=tol)
        xw = x.to(wide)
        rstd = torch.rsqrt((xw * xw).mean(-1) + 1e-6)
        out, got_rstd = ops.row_rms_norm(x, w)
        torch.testing.assert_close(out, (xw * rstd.unsqueeze(-1) * w.to(wide)).to(dtype), atol=tol, rtol=tol)
        torch.testing.assert_close(got_rstd, rstd.to(dtype), atol=tol, rtol=tol)
        torch.testing.assert_close(ops.row_extremes(x), (x.amin(-1), x.amax(-1)), rtol=0, atol=0)
print(torch.backends.cpu.get_cpu_capability())
"""


@pytest.mark.slow(10)
@pytest.mark.parametrize("capability", ["default", "avx2"])
def test_generated_rowwise_loops_of_each_cpu_build(stablelib, capability):
    """The CPU build of the loops that ATEN_CPU_CAPABILITY caps to (the default build, AVX2),
    as a CPU without AVX-512 runs them; the in-process tests run this CPU's best."""
    _, _, lib = stablelib
    best = torch.backends.cpu.get_cpu_capability()
    if capability == "avx2" and best == "DEFAULT":
        pytest.skip("this CPU has no AVX2")
    r = run_python(["-c", CAPABILITY_SCRIPT, str(lib)], env={**os.environ, "ATEN_CPU_CAPABILITY": capability})
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.split() == [capability.upper()], r.stdout


@pytest.mark.slow(40)
def test_generated_rowwise_kernels_differentiate_check_and_compile(stablelib):
    module, _, _ = stablelib
    x = torch.randn(4, 9, dtype=torch.float64, requires_grad=True)
    w = torch.randn(9, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(module.ops.row_softmax, (x,))
    assert torch.autograd.gradgradcheck(module.ops.row_softmax, (x,))
    assert torch.autograd.gradcheck(lambda a, b: module.ops.row_rms_norm(a, b)[0], (x, w))
    _passes_opcheck(torch.ops.stablelib.row_softmax.default, (torch.randn(4, 9, requires_grad=True),))
    _passes_opcheck(torch.ops.stablelib.row_rms_norm.default,
                    (torch.randn(2, 3, 9, requires_grad=True), torch.randn(9, requires_grad=True), 1e-5))
    torch._dynamo.reset()
    f = lambda a, b: module.ops.row_rms_norm(module.ops.row_softmax(a), b)[0].sum()  # noqa: E731
    compiled = torch.compile(f, fullgraph=True)
    torch.testing.assert_close(compiled(x, w), f(x, w))
    torch.testing.assert_close(torch.autograd.grad(compiled(x, w), (x, w)), torch.autograd.grad(f(x, w), (x, w)))
    include = ROOT / "runtime" / "include" / "opwrap"
    for header in ("stable/rowwise.h", "stable/rowwise_cuda.cuh", "shared/rowwise_cuda.cuh", "shared/pointwise_flat.cuh"):
        code = "\n".join(line.split("//")[0] for line in (include / header).read_text().splitlines())  # comments aside
        assert "ATen" not in code and "c10/" not in code and "at::" not in code, header
    _, _, lib = stablelib
    generated = (lib / "generated" / "stable" / "rowwise" / "row_softmax.h").read_text()
    # Long bfloat16 rows are read as they are by the loops that call no floating-point function an
    # element (the max pass, in each CPU build), from a converted buffer by the exponentials'
    # pass (codegen's stable_rowwise._direct) and, for float16 (rowwise.h's kReadDirectly), by
    # the max pass too; the output reads only the cached exponentials, and converts no chunk of
    # `self`.  A shorter row is converted once, at the row's start (`self` is read by a loop
    # that converts: codegen's _once), and every loop reads that buffer: the max pass's copy for
    # such rows converts nothing, the others convert a chunk only where the row's start did not.
    assert generated.count("} else if (len >= opwrap::stable::rowwise::kDirectRow) {") == 3
    assert generated.count("if constexpr (!kConvert) {") == 3  # float and double: a one-chunk copy and a chunked one
    assert generated.count("if (len <= opwrap::stable::rowwise::kChunk) {") == 3  # the max pass (the output reads no row input)
    assert generated.count("const bool opwrap_once = kConvert && len < opwrap::stable::rowwise::kDirectRow;") == 3
    assert generated.count("= opwrap_b_self;  // converted at the row's start") == 3
    assert generated.count("opwrap_once ? opwrap_b_self : opwrap::stable::rowwise::load_row<scalar_t>(") == 2 * 3
    # the max pass; the output's loop, which stores float16 through a float buffer (F16C)
    assert generated.count("if constexpr (opwrap::stable::rowwise::kReadDirectly<scalar_t>) {") == 2 * 3
    assert generated.count("opwrap::pw::from_float(opwrap::stable::rowwise::capability(), opwrap_ob, ") == 3
    # the row's start, the exponentials, float16's max pass
    assert generated.count("opwrap::stable::rowwise::load_row<scalar_t>(") == 3 * 3
    assert "short_row" not in generated  # `self` is converted at the row's start
    assert "simdlen(4)" not in generated  # a max pass keeps its vector's lanes on short rows
    assert "sum_lanes" not in generated  # neither the max pass nor the exponentials' sum reads a row directly
    # row_rms_norm's pass only sums: rows shorter than kShortRow run it 4 lanes at a time (the
    # reduction clause), a row of one chunk a vector's lanes at a time (float's copy, and the
    # reduced types' from the buffers), longer rows four vectors' lanes a chunk (float's copy,
    # and the reduced types' read directly).
    rms = (lib / "generated" / "stable" / "rowwise" / "row_rms_norm.h").read_text()
    assert rms.count("if (len < opwrap::stable::rowwise::kShortRow) {") == rms.count("simdlen(4)") == 3
    assert rms.count("reduction(+:opwrap_a0)") == 3
    assert rms.count("opwrap_a0 += opwrap::stable::rowwise::sum_lanes<W>(opwrap_l0);") == 2 * 3
    # float's copy, the reduced types' read directly and float16's converted a chunk at a time
    assert rms.count("opwrap_a0 += opwrap::stable::rowwise::sum_lanes<4 * W>(opwrap_l0);") == 3 * 3
    # Its input is read by two loops that read directly (the sum and the output): a short
    # bfloat16 row reads it as it is, a float16 row from the buffer the row's start converted.
    assert rms.count("short_row<scalar_t>(opwrap_r_input, opwrap_b_input)") == 2 * 3
    assert rms.count("if constexpr (!opwrap::stable::rowwise::kReadDirectly<scalar_t>) {  // float16: every row input") == 3
    for bytes in (64, 32, 16):  # AVX-512, AVX2 and the default build's vectors
        assert rms.count(f"constexpr int64_t kVectorBytes = {bytes};") == 1
    # The CUDA kernel is the full target's (templates/rowwise/cuda.j2) in the stable target's names.
    for text in ("#pragma GCC target(\"avx,avx2,fma,f16c,bmi,bmi2,lzcnt,popcnt\")", "torch::stable::parallel_for",
                 "#include <opwrap/stable/rowwise_cuda.cuh>",
                 "__launch_bounds__(opwrap::rt::cuda::kRowMaxThreads, opwrap::rt::cuda::kRowMinBlocks) row_softmax_rows_cuda_kernel(",
                 "opwrap::rt::cuda::launch_rows(", "opwrap::stable::rowwise::opmath_t<scalar_t>"):
        assert text in generated, text
    assert "ATen" not in generated and "at::vec" not in generated
    # The CUDA wrapper (compiled by nvcc where CUDA is built: linked, ABI-checked and loaded with
    # its CUDA kernel registered by hand, docs/stable-abi.md) calls the generated CUDA kernel.
    cuda = (lib / "generated" / "stable" / "cuda" / "row_rms_norm.cu").read_text()
    for text in ("const torch::stable::accelerator::DeviceGuard device_guard(input.device().index());",
                 "::stablelib::kernels::row_rms_norm_rowwise_cuda<at::BFloat16>(input_c, weight_c, eps, out, rstd);",
                 "STABLE_TORCH_LIBRARY_IMPL(stablelib, CUDA, m) {"):
        assert text in cuda, text


MATRIX_PROBE = """\
import torch, stablelib
assert stablelib.library_path.endswith("_C.abi3.so"), stablelib.library_path  # the wheel's, not the build's
a = torch.randn(4, 3, dtype=torch.float64, requires_grad=True)
b = torch.randn(4, 3, dtype=torch.float64, requires_grad=True)
f = lambda x, y: stablelib.ops.sqdist(stablelib.ops.scale(x, 3.0), y)
torch.testing.assert_close(f(a, b), ((3 * a - b) ** 2).sum(1))
assert torch.autograd.gradcheck(f, (a, b), check_forward_ad=True)  # forward formulas: the ops' jvp
assert torch.autograd.gradgradcheck(f, (a, b), check_fwd_over_rev=True)
assert torch.autograd.gradcheck(stablelib.ops.gelu_fast, (a,), check_forward_ad=True)  # derived from backward
for op, args in ((torch.ops.stablelib.scale.default, (a, 2.0)), (torch.ops.stablelib.sqdist.default, (a, b))):
    r = torch.library.opcheck(op, args)
    assert all(v == "SUCCESS" for v in r.values()), r
torch.testing.assert_close(torch.compile(f, fullgraph=True)(a, b), f(a, b))
row = torch.randn(3)  # SymInt and SymInt[] arguments, unboxed as int64_t and IntHeaderOnlyArrayRef
torch.testing.assert_close(stablelib.ops.tile_rows(row, 2), row.expand(2, 3))
torch.testing.assert_close(stablelib.ops.fill_size(row[0], [2, 1], 1), torch.full((2, 1), float(row[0]) + 1))
ps, ms = [torch.ones(2), torch.ones(4)[::2]], [torch.zeros(2), torch.zeros(2)]  # written tensor lists
stablelib.ops.sgd_step(ps, ms, [torch.ones(2), torch.ones(2)], lr=0.5, momentum=0.9)
torch.testing.assert_close(ps, [torch.full((2,), 0.5)] * 2)
# Written arguments: the checks and write-back in every release; the `inplace` and `out` tags
# from torch 2.13 on (torch.Tag has them), before which torch.compile refuses an op returning
# what it writes, as in the full target (codegen/core/torch_compat.py, FEATURES).
x = torch.linspace(-2, 2, 12).reshape(3, 4)
torch.ops.stablelib.clamp_(x.t(), -1.0, 1.0)
torch.testing.assert_close(x, torch.linspace(-2, 2, 12).reshape(3, 4).clamp(-1, 1))
acc, v = torch.ones(3), torch.tensor([1.0, 0.0, 2.0])
stablelib.ops.accumulate(acc, v)
torch.testing.assert_close(acc, torch.tensor([2.0, 1.0, 3.0]))
out = torch.zeros(0)
torch.ops.stablelib.scale.out(v, 2.0, out=out)
torch.testing.assert_close(out, v * 2)
try:
    torch.ops.stablelib.accumulate(acc, acc)
    raise AssertionError("no overlap error")
except RuntimeError as e:
    assert "argument 'acc' is written in place, but shares memory with input 'x'" in str(e), e
r = torch.library.opcheck(torch.ops.stablelib.accumulate.default, (torch.randn(3), torch.randn(3)))
assert all(v == "SUCCESS" for v in r.values()), r
tagged = hasattr(torch.Tag, "inplace")
tags = {str(t) for t in (*torch.ops.stablelib.clamp_.default.tags, *torch.ops.stablelib.scale.out.tags)}
assert {"Tag.inplace", "Tag.out"} <= tags if tagged else not tags & {"Tag.inplace", "Tag.out"}, tags
g = torch.compile(lambda a: torch.ops.stablelib.clamp_(a * 2, -1.0, 1.0) + 1, fullgraph=True)
try:
    torch.testing.assert_close(g(v), (v * 2).clamp(-1, 1) + 1)
    assert tagged, "compiled without the inplace tag"
except Exception as e:
    assert not tagged and "alias annotations" in str(e), e
# Generated row-wise kernels (plain loops, torch::stable::parallel_for)
x = torch.randn(3, 1000)
torch.testing.assert_close(stablelib.ops.row_softmax(x), torch.softmax(x, -1))
w = torch.randn(1000)
torch.testing.assert_close(stablelib.ops.row_rms_norm(x, w)[0], torch.rms_norm(x, (1000,), w, 1e-6))
# One model of the four kinds of kernel, each with derivatives: a generated pointwise kernel
# (gelu_fast), a generated row-wise kernel (row_rms_norm), a C++ kernel (scale) and a Rust
# kernel (sqdist): values, gradcheck, opcheck, torch.compile(fullgraph=True), torch.export.
class Model(torch.nn.Module):
    def forward(self, x, w, y):
        h = stablelib.ops.row_rms_norm(stablelib.ops.gelu_fast(x), w)[0]
        return stablelib.ops.sqdist(stablelib.ops.scale(h, 2.0), y)
def reference(x, w, y):
    h = torch.rms_norm(torch.nn.functional.gelu(x, approximate="tanh"), (x.shape[-1],), w, 1e-6)
    return ((2 * h - y) ** 2).sum(1)
model = Model()
x, w, y = (torch.randn(*s, dtype=torch.float64, requires_grad=True) for s in ((4, 8), (8,), (4, 8)))
torch.testing.assert_close(model(x, w, y), reference(x, w, y))
assert torch.autograd.gradcheck(model, (x, w, y))
for op, args in ((torch.ops.stablelib.gelu_fast.default, (x,)), (torch.ops.stablelib.row_rms_norm.default, (x, w)),
                 (torch.ops.stablelib.row_softmax.default, (x,))):
    r = torch.library.opcheck(op, args)
    assert all(v == "SUCCESS" for v in r.values()), (op, r)
torch.testing.assert_close(torch.compile(model, fullgraph=True)(x, w, y), model(x, w, y))
plain = (x.detach(), w.detach(), y.detach())
exported = torch.export.export(model, plain)
assert {str(n.target) for n in exported.graph.nodes if n.op == "call_function"} >= {
    "stablelib.gelu_fast.default", "stablelib.row_rms_norm.default", "stablelib.scale.default",
    "stablelib.sqdist.default"}, exported.graph
torch.testing.assert_close(exported.module()(*plain), model(*plain))
# torch.func through the typed wrappers (_runtime.func_call): per-sample gradients of the model,
# a Jacobian, and a second derivative through a once_differentiable backward, which raises.
per_sample = torch.func.vmap(torch.func.grad(lambda r: stablelib.ops.gelu_fast(r).pow(2).sum()))(plain[0])
xs = plain[0].clone().requires_grad_()
torch.testing.assert_close(per_sample, torch.autograd.grad(stablelib.ops.gelu_fast(xs).pow(2).sum(), xs)[0])
jac = torch.func.jacrev(lambda h: model(h, *plain[1:]))(plain[0])
torch.testing.assert_close(jac, torch.autograd.functional.jacobian(lambda h: model(h, *plain[1:]), plain[0]))
try:
    torch.func.grad(lambda t: torch.func.grad(lambda u: stablelib.ops.cube(u).sum())(t).pow(2).sum())(plain[0])
    raise AssertionError("no once_differentiable error")
except RuntimeError as e:
    assert "which is declared once_differentiable" in str(e), e
# Autocast kernels registered from Python (python/autocast.py): each policy, a keyword-only
# tensor, gradients through the casts, torch.compile.
x, yb = torch.randn(4, 8, requires_grad=True), torch.randn(8, dtype=torch.bfloat16)
def amp(a, b):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        h = stablelib.ops.gelu_fast(a)
        return (h, stablelib.ops.axpby(a, b, 1.0, 1.0), stablelib.ops.blend(b, end=a[0]), stablelib.ops.row_rms_norm(h, b)[0])
assert [t.dtype for t in amp(x, yb)] == [torch.bfloat16, torch.float32, torch.float32, torch.float32]
torch.autograd.grad(amp(x, yb)[3].sum(), x)
assert [t.dtype for t in torch.compile(amp, fullgraph=True)(x, yb)] == [t.dtype for t in amp(x, yb)]
assert all(torch._C._dispatch_has_kernel_for_dispatch_key("stablelib::axpby", k) for k in ("AutocastCPU", "AutocastCUDA"))
print("ok", torch.__version__)
"""


# The claimed releases other than the venv's: `make torch-matrix` makes a venv for each under
# build/torch-matrix, then runs the test below in the project's venv with
# OPWRAP_TORCH_MATRIX_VENVS=1, where a missing venv fails instead of skipping (issue 37: the
# one wheel passes in every claimed release, in CI).
OTHER_RELEASES = [torch_compat.release_name(r) for r in torch_compat.RELEASES
                  if torch_compat.release_name(r) != torch_release(torch.__version__)]


@pytest.fixture(scope="module")
def stable_wheel(stablelib, tmp_path_factory) -> Path:
    """The abi3 wheel of the build the `stablelib` fixture made (-O1, no CUDA: `pip wheel`
    compiles nothing again)."""
    _, _, lib = stablelib
    out = tmp_path_factory.mktemp("stable-wheel")
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-build-isolation", "--no-deps",
                        "-C", "optimize=1", "-C", "cuda=false", "-w", str(out), str(lib)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    (wheel,) = out.glob("*.whl")
    return wheel


@pytest.mark.slow(50)
@pytest.mark.xdist_group("stable_wheel")
def test_one_abi3_wheel_requires_the_oldest_claimed_release(stable_wheel):
    assert stable_wheel.name == "stablelib-0.1.0-cp311-abi3-linux_x86_64.whl", stable_wheel.name
    with zipfile.ZipFile(stable_wheel) as z:
        metadata = z.read("stablelib-0.1.0.dist-info/METADATA").decode().splitlines()
    assert f"Requires-Dist: torch>={torch_compat.release_name(torch_compat.OLDEST)}" in metadata, metadata


# No xdist_group: `make torch-matrix` runs one release's check on each core.  The wheel is asked
# for only where the venv is there: elsewhere (the full suite) the test skips before a worker
# builds one.
@pytest.mark.slow(15)
@pytest.mark.parametrize("release", OTHER_RELEASES)
def test_the_abi3_wheel_installs_and_passes_in_every_claimed_release(request, release, tmp_path):
    python = ROOT / "build" / "torch-matrix" / release / "venv" / "bin" / "python"
    if not python.is_file():
        assert not os.environ.get("OPWRAP_TORCH_MATRIX_VENVS"), f"make torch-matrix made no venv of torch {release}"
        pytest.skip(f"no venv of torch {release} under build/torch-matrix (make torch-matrix makes them)")
    stable_wheel = request.getfixturevalue("stable_wheel")
    site = tmp_path / "site"
    r = subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", "--target", str(site), str(stable_wheel)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    env = {**{k: v for k, v in os.environ.items() if k != "PYTHONPATH"}, "PYTHONPATH": str(site)}
    r = subprocess.run([str(python), "-c", MATRIX_PROBE], cwd=tmp_path, capture_output=True, text=True, env=env,
                       timeout=600)
    assert r.returncode == 0 and f"ok {release}" in r.stdout, r.stdout + r.stderr


def test_what_the_stable_target_lacks_is_a_positioned_error(tmp_path):
    lib = tmp_path / "badstable"
    _stable_project(lib)
    (lib / "declarations" / "scale.yaml").write_text(textwrap.dedent("""\
        - func: a(Tensor self) -> Tensor
          dtypes: floating
          pointwise: self * 2
        - func: a.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)
        - func: b(Tensor self) -> Tensor
          dtypes: [float32]
          like: self
          kernels: {CPU: {abi: c}, CUDA: b_cuda}
        - func: c(Tensor self, float f) -> Tensor
          dtypes: [float32]
          like: self
          kernels: {CPU: {abi: c}}
          derivatives:
            self: at::mul(grad, f)
        - func: d(Tensor self, float f) -> Tensor
          dtypes: [float32]
          like: self
          kernels: {CPU: {abi: c}}
          derivatives:
            self: grad * f
            result: at::mul(self_t, f)
        - func: e(Tensor x, Tensor(a!)[] self) -> ()
          dtypes: [float32]
          kernels: {CPU: e_cpu}
        - func: f_(Tensor(a!) self) -> Tensor(a!)
          dtypes: [float32]
          doc: autocast has kernels in the stable target, and the full target's checks
          kernels: {CPU: {abi: c}}
          autocast: lower_precision
        - func: g(Tensor self, float f) -> Tensor
          dtypes: [float32]
          like: self
          kernels: {CPU: g_cpu}
        - func: h(Tensor w, Tensor[] xs) -> Tensor
          dtypes: [float32]
          like: w
          kernels: {CPU: {abi: c}}
          derivatives:
            w: non_differentiable
            xs: grad
        - func: i(Tensor self, Scalar s, Generator? gen=None) -> Tensor
          dtypes: [float32]
          like: self
          kernels: {CPU: i_cpu}
        - func: j_(Tensor(a!) self, float f) -> Tensor(a!)
          dtypes: [float32]
          kernels: {CPU: {abi: c}}
          derivatives: {self: grad * f}
        - func: k(Tensor x, *, Tensor? y) -> Tensor
          dtypes: [float32]
          like: x
          kernels: {CPU: {abi: c}}
          derivatives: {x: grad, y: grad}
        """))
    r = run_codegen("check", cwd=lib)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    errors = [line for line in r.stderr.splitlines() if ": error: " in line]
    expect = [
        ("scale.yaml:8:", "CUDA kernel header 'kernels/b.cuh' not found"),
        ("scale.yaml:14:", "runs derivative formulas in Python (torch.library.register_autograd): "
                           "'at::mul(grad, f)' is C++"),
        ("scale.yaml:21:", "runs forward formulas in Python (an autograd.Function's jvp): 'at::mul(self_t, f)' is C++"),
        ("scale.yaml:24:", "kernel header 'kernels/e.h' not found"),  # a written tensor list is taken
        ("scale.yaml:29:", "f_ writes its arguments in place; casting them under autocast would write to a copy"),
        ("scale.yaml:33:", "kernel header 'kernels/g.h' not found"),
        ("scale.yaml:40:", "does not differentiate through or save a Tensor[] argument ('xs') yet"),
        ("scale.yaml:41:", "argument 's' of type Scalar: torch's stable ABI cannot pass a Scalar: in every "
                           "claimed release a call fails converting it"),
        ("scale.yaml:41:", "argument 'gen' of type Generator?: torch::stable::Generator exists from torch 2.13, and "
                           "the stable target compiles for torch 2.11"),
        ("scale.yaml:48:", "register_autograd, which takes functional ops only, and this op writes its arguments"),
        ("scale.yaml:49:", "register_autograd, which takes no keyword-only tensor ('y')"),
    ]
    for where, message in expect:
        assert any(where in e and message in e for e in errors), (where, message, errors)
    assert "void g_cpu(const torch::stable::Tensor& self, double f, torch::stable::Tensor& result)" in r.stderr
    assert "void b_cuda(const torch::stable::Tensor& self, torch::stable::Tensor& result)" in r.stderr
    assert "void e_cpu(const torch::stable::Tensor& x, const std::vector<torch::stable::Tensor>& self)" in r.stderr
    assert len(errors) == len(expect), errors


def test_cuda_kernels_behind_the_c_abi(tmp_path):
    """A CUDA C kernel's wrapper: a .cu of its own (compiled by nvcc where CUDA is built), the
    stable API's DeviceGuard, the current CUDA stream from the C shim.  Compiled, linked and
    loaded into torch 2.11 and 2.14 by hand (no GPU here; see docs/stable-abi.md)."""
    lib = tmp_path / "cudastable"
    _stable_project(lib)
    (lib / "declarations" / "scale.yaml").write_text(textwrap.dedent("""\
        - func: scale(Tensor self, float factor) -> Tensor
          dtypes: [float32, float64]
          kernels: {CPU: {abi: c, symbol: cs_scale}, CUDA: {abi: c, symbol: cs_scale_cuda}}
          like: self
          pointwise: true  # beside a kernel: elementwise, for vmap (no generated kernel), as bundled huber
        """))
    r = run_codegen("generate", cwd=lib)
    assert r.returncode == 0, r.stderr
    gen = lib / "generated"
    assert (gen / "units" / "stable.cuda.0.cu").read_text().count('#include "stable/cuda/scale.cu"') == 1
    wrapper = (gen / "stable" / "cuda" / "scale.cu").read_text()
    for text in ("#define USE_CUDA", "opwrap::rt::check_tensor(kOp, \"self\", self, torch::headeronly::DeviceType::CUDA);",
                 "const torch::stable::accelerator::DeviceGuard device_guard(self.device().index());",
                 "opwrap::rt::current_cuda_stream(self.device().index())",
                 "abi.check(cs_scale_cuda_float64(abi.context(), &self_abi, opwrap::rt::abi::arg(factor), &result_abi));",
                 "STABLE_TORCH_LIBRARY_IMPL(cudastable, CUDA, m) {"):
        assert text in wrapper, text


def test_a_pointwise_expression_has_a_cuda_kernel(tmp_path):
    """A pointwise expression's CUDA kernel: the same functor in a grid-stride kernel over the
    prepared operands, in `stable/cuda/<op>.cu` (group stable.cuda, compiled by nvcc where CUDA
    is built).  Compiled, linked, ABI-checked and loaded with its CUDA kernel registered into
    torch 2.14 by hand (no GPU here; see docs/stable-abi.md)."""
    lib = tmp_path / "cudapw"
    _stable_project(lib)
    (lib / "kernels" / "scale.h").unlink()
    (lib / "declarations" / "scale.yaml").write_text(textwrap.dedent("""\
        - func: axpby(Tensor x, Tensor y, float alpha) -> Tensor
          dtypes: floating
          pointwise: alpha * x + y
        """))
    r = run_codegen("generate", cwd=lib)
    assert r.returncode == 0, r.stderr
    gen = lib / "generated"
    assert (gen / "units" / "stable.cuda.0.cu").read_text().count('#include "stable/cuda/axpby.cu"') == 1
    kernel = (gen / "stable" / "cuda" / "axpby.cu").read_text()
    for text in ("#define USE_CUDA", "__global__ void axpby_kernel(const AxpbyOp<opwrap::pw::opmath_t<scalar_t>> op, "
                 "const opwrap::rt::pw::Loop<1, 2> loop)",
                 "for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < loop.numel; i += step)",
                 "const torch::stable::accelerator::DeviceGuard device_guard(x.device().index());",
                 "opwrap::rt::check_tensor(kOp, \"y\", y, torch::headeronly::DeviceType::CUDA);",
                 "STABLE_TORCH_LIBRARY_IMPL(cudapw, CUDA, m) {"):
        assert text in kernel, text
    assert "ATen/" not in kernel and "c10/cuda" not in kernel
    cpu = (gen / "stable" / "cpu" / "axpby.cpp").read_text()
    assert "OPWRAP_PW_CLONES void axpby_contiguous(" in cpu and "STABLE_TORCH_LIBRARY_IMPL(cudapw, CPU, m) {" in cpu


def test_stubs_are_written_against_the_stable_api(tmp_path):
    lib = tmp_path / "stubstable"
    _stable_project(lib)
    (lib / "kernels" / "scale.h").unlink()
    (lib / "declarations" / "scale.yaml").write_text(textwrap.dedent("""\
        - func: scale(Tensor self, float factor, Tensor? w=None, str mode="a") -> Tensor
          dtypes: [float32, float64]
          kernels: {CPU: scale_cpu}
          like: self
        """))
    r = run_codegen("stubs", cwd=lib)
    assert r.returncode == 0, r.stderr
    header = (lib / "kernels" / "scale.h").read_text()
    assert "#include <torch/csrc/stable/tensor.h>" in header and "ATen" not in header, header
    assert ("void scale_cpu(const torch::stable::Tensor& self, double factor, const "
            "std::optional<torch::stable::Tensor>& w, std::string_view mode, torch::stable::Tensor& result) {\n"
            "  STD_TORCH_CHECK(false, \"stubstable::scale: kernel not written\");") in header, header


def test_the_loader_takes_a_stable_build_on_newer_torch_only_with_its_own_modules(tmp_path):
    from opwrap_codegen.pyruntime import Library
    library = tmp_path / "_C.so"
    library.write_bytes(b"")
    manifest = tmp_path / "_C.json"

    def check(made: dict, target: str) -> None:
        manifest.write_text(json.dumps({"torch_version": "2.11.0", **made}))
        Library("pkg", "ns", "_C", tmp_path, ".", "NS_LIBRARY", (), target).check_torch(str(library))

    check({"target": "stable", "torch_min": "2.11"}, "stable")  # built against 2.11, loaded into this torch
    with pytest.raises(ImportError, match=r"built for torch 99.0 and later \(the stable ABI\)"):
        check({"target": "stable", "torch_min": "99.0"}, "stable")
    with pytest.raises(ImportError, match=r"was built for the 'stable' target, but the package's generated modules "
                                          r"are the 'aten' target's"):
        check({"target": "stable", "torch_min": "2.11"}, "aten")
    with pytest.raises(ImportError, match=r"was built for the 'aten' target"):
        check({"torch_version": torch.__version__}, "stable")


def test_an_unknown_target_is_a_configuration_error(tmp_path):
    lib = tmp_path / "badtarget"
    assert run_codegen("init", str(lib)).returncode == 0
    pyproject = lib / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace("[tool.codegen]\n", '[tool.codegen]\ntarget = "abi3"\n'))
    r = run_codegen("check", cwd=lib)
    assert r.returncode == 2 and "[tool.codegen] target must be one of 'aten', 'stable', not 'abi3'" in r.stderr, \
        r.stderr


# ------------------------------------------------------------------ the bundled library (make build-stable)
# Its C++ kernels written against the stable API too, in runtime/kernels/stable/ (docs/stable-abi.md,
# "Kernels for both targets"); `make build-stable` compiles these, by hand and in `make bench`'s targets.
STABLE_KERNELS = {"adam_step", "bincount_fixed", "bucketize_count", "embedding_bag", "mymatmul", "nonzero_flat",
                  "quantize_fp8", "reshape_and_cache", "to_dtype"}


def test_the_bundled_library_builds_in_the_stable_target_what_it_expresses():
    """`make build-stable`'s op list, generated (no compile): the ops whose C++ kernels have a
    stable-API copy in runtime/kernels/stable/ are built; every other op left out says why,
    either what the target lacks or the kernel file to write."""
    from opwrap_codegen.build import retargeted
    from opwrap_codegen.core.config import load_config
    from opwrap_codegen.pipeline.passes import generate
    config = load_config(ROOT)
    notes: list[str] = []
    result = generate(retargeted(config, "stable"), None, notes, leave_out_unsupported=True, own_target="aten")
    kept = {d.op_name for d in result.library.declarations}
    ported = (STABLE_KERNELS - {"embedding_bag"}) | {"embedding_bag_sum", "embedding_bag_sum_backward"}  # its header's two ops
    assert ported <= kept, ported - kept
    assert {p.stem for p in (ROOT / "runtime" / "kernels" / "stable").glob("*.h")} - {"common"} == STABLE_KERNELS
    left = {re.match(r"leaving out opwrap::(\S+):", n).group(1): n for n in notes}
    assert not kept & set(left) and len(kept) + len(left) == len(result.library.declarations) + len(left)
    for op, note in left.items():  # each needs what the target lacks (every C++ kernel has its stable copy now)
        assert "stable target" in note or "stable ABI" in note or "torch::stable" in note, note
    assert len(kept) == 26 and len(left) == 10, (sorted(kept), sorted(left))
    # the kernels written for it are what its wrappers include: first on the include path
    from opwrap_codegen.build import include_dirs
    dirs = include_dirs(retargeted(config, "stable"))
    assert dirs.index(ROOT / "runtime" / "kernels" / "stable") < dirs.index(ROOT / "runtime" / "kernels"), dirs
    assert ROOT / "runtime" / "kernels" / "stable" not in include_dirs(config)  # the full target's: its own
