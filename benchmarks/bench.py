"""`make bench`: opwrap measured side by side with what it replaces, in one run, as ratios.

Sections (each compares in the same process, on the same inputs):

- call overhead: a generated op on an 8-element tensor against the aten op, the same op
  through torch.ops, and the same op written with torch.library.custom_op;
- throughput: generated pointwise kernels against aten, and fused ops against the eager
  composition they replace, on 16M-element float32 and bfloat16 tensors, 1 and 2 threads;
  each call allocates its output, as in real use;
- BLAS ops: linear, mymatmul and addmv_ (whose kernels call the BLAS aten uses) against
  F.linear, torch.mm and Tensor.addmv_, float32 and bfloat16, 1 and 2 threads;
- every op (`--only ops`): each bundled op against its aten counterpart (target >= 0.95x) or
  the eager composition it replaces (>= 1.2x; bias_gelu 1.4x, rms_norm 2x), float32 and
  bfloat16, 1 and 2 threads, from one table (OPS) that benchmarks/cuda_bench.py times on a
  GPU; gelu_tanh and bias_gelu also on rows of 16 and of 8 (a bias broadcast over short rows); row-wise reductions report their GB/s beside x.clone()'s on the same tensor;
- build: compile seconds of a generated CPU translation unit against the same source
  behind `#include <torch/extension.h>`, every generated C++ unit compiled alone (median),
  the full C++ build and a no-op rebuild;
- foreign kernels: one op as a C++ kernel template, a Rust function and a C function behind
  the C kernel ABI, in a `codegen init` library: each kernel unit's compile seconds, the call
  overhead (target: at most 5% above the C++ kernel's) and the loops' throughput;
- stable: the stable target's generated pointwise kernels (a `codegen init` library with
  `target = "stable"`) against the same expressions in the full target and eager torch,
  1M and 16M elements, float32, bfloat16 and float16, 1 and 2 threads (target >= 0.9x of the full target),
  and its generated row-wise kernels (softmax, rms_norm) against the bundled library's, 4096x1024
  and 256x65536, float32 and bfloat16, 1 and 2 threads (the same target);
- targets: the bundled library in both targets (`make build-stable` builds the ops the
  stable target expresses), each build in a worker process (benchmarks/target_worker.py),
  requests alternated: every OPS entry of an op in both (target >= 0.9x of the full
  target), call overhead with and without grad, and each op's CPU unit compiled alone;
- library: a `codegen init` library of 50 synthetic pointwise ops built from scratch, and
  the compiler seconds each op adds (against a library of 10);
- codegen: generating 1,000 synthetic declarations, and the files a no-op regenerate writes;
- wheels (where CUDA can be built): the bundled library's wheel with CUDA kernels for one
  architecture and for four, its size and its `_C.so`'s.

Prints a table of ratios and writes it as JSON (--json).  Targets are printed beside the
figures they apply to; --check exits 1 when one is missed.

The run keeps freed memory for reuse (glibc's MALLOC_MMAP_MAX_=0 and a large trim threshold,
set by re-running itself): otherwise every allocation of 32 MB or more is a fresh mmap whose
pages fault in on first touch, so an op's time is mostly the kernel's page faults, and
whether glibc happened to reuse a freed block (it does for some sizes and orders of
allocation and not others) swung a ratio between 0.3x and 1.0x from one run to the next.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
import timeit
import zipfile
from pathlib import Path
from typing import Callable, NamedTuple

# Allocations reuse freed memory instead of mapping fresh pages (see the docstring).
STEADY_MALLOC = {"MALLOC_MMAP_MAX_": "0", "MALLOC_TRIM_THRESHOLD_": str(1 << 40), "MALLOC_TOP_PAD_": str(1 << 28)}
if __name__ == "__main__" and any(os.environ.get(k) != v for k, v in STEADY_MALLOC.items()):
    os.execve(sys.executable, [sys.executable, *sys.argv], {**os.environ, **STEADY_MALLOC})

import torch
import torch.nn.functional as F

import opwrap

ROOT = Path(__file__).resolve().parent.parent


@torch.library.custom_op("opwrap_bench::myadd", mutates_args=())
def custom_myadd(self: torch.Tensor, other: torch.Tensor) -> torch.Tensor:
    return torch.add(self, other)


@custom_myadd.register_fake
def _(self, other):
    return torch.empty_like(self)


custom_myadd.register_autograd(lambda ctx, grad: (grad, grad))


class Report:
    def __init__(self):
        self.rows: list[dict] = []

    def section(self, title: str, columns: str):
        print(f"\n{title}\n  {columns}")

    def add(self, section: str, name: str, ratio: float | None, target: float | None = None, **values):
        row = dict(section=section, name=name, ratio=ratio, target=target, **values)
        self.rows.append(row)
        return row

    def missed(self) -> list[dict]:
        return [r for r in self.rows if r["target"] is not None and r["ratio"] is not None and r["ratio"] < r["target"]]


def _mark(ratio, target) -> str:
    if target is None:
        return ""
    return f"  (target >= {target}x{'' if ratio >= target else ', MISSED'})"


# ---------------------------------------------------------------------------- call overhead
def per_call_us(fn, number: int, repeat: int) -> float:
    return min(timeit.repeat(fn, number=number, repeat=repeat)) / number * 1e6


def call_overhead(report: Report, number: int, repeat: int):
    report.section("call overhead, 8-element float32 tensor (best of runs); ratio = time / torch.add's",
                   f"{'call':<44}{'us/call':>9}{'ratio':>9}")
    for requires_grad in (False, True):
        x = torch.randn(8, requires_grad=requires_grad)
        tag = " (requires_grad)" if requires_grad else ""
        aten = per_call_us(lambda: torch.add(x, x), number, repeat)
        for name, fn in (("opwrap.ops.myadd", lambda: opwrap.ops.myadd(x, x)),
                         ("torch.ops.opwrap.myadd", lambda: torch.ops.opwrap.myadd(x, x)),
                         ("torch.library.custom_op", lambda: custom_myadd(x, x)),
                         ("torch.add", lambda: torch.add(x, x))):
            us = aten if name == "torch.add" else per_call_us(fn, number, repeat)
            report.add("call_overhead", name + tag, us / aten, us_per_call=us)
            print(f"  {name + tag:<44}{us:>9.2f}{us / aten:>8.2f}x")
    # The torch.func path (issue 21): a transform over a generated op against the same
    # transform over aten's op; the ratio is against the aten transform's time.
    from torch.func import grad, jvp, vmap

    x, xs, t = torch.randn(8), torch.randn(4, 8), torch.ones(8)
    ours_loss, aten_loss = (lambda v: opwrap.ops.myadd(v, v).sum()), (lambda v: torch.add(v, v).sum())
    transforms = (("grad", lambda f: (lambda: grad(f)(x))),
                  ("vmap(grad)", lambda f: (lambda: vmap(grad(f))(xs))),
                  ("jvp", lambda f: (lambda: jvp(f, (x,), (t,)))))
    for name, make in transforms:
        aten = per_call_us(make(aten_loss), max(number // 50, 20), repeat)
        us = per_call_us(make(ours_loss), max(number // 50, 20), repeat)
        report.add("call_overhead", f"torch.func {name} over myadd", us / aten, us_per_call=us)
        print(f"  {'torch.func ' + name + ' over myadd':<44}{us:>9.2f}{us / aten:>8.2f}x  (over torch.add: {aten:.2f} us)")


# ---------------------------------------------------------------------------- throughput
def median_ms(fns, runs: int) -> list[float]:
    """Median milliseconds of each function, calls interleaved (a, b, a, b, ...) so that drift
    in the machine's state (frequency, page cache, allocator) falls on both alike."""
    for fn in fns:
        fn()  # warm up
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(runs):
        for fn, ts in zip(fns, times):
            t = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t)
    return [statistics.median(ts) * 1e3 for ts in times]


def rms_norm_eager(x, w, eps=1e-6):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def throughput(report: Report, numel: int, runs: int):
    report.section(f"throughput, {numel / 2**20:.0f}M elements, median of {runs} calls; ratio = reference time / opwrap "
                   "time (>1: opwrap faster)", f"{'opwrap op vs reference':<58}{'dtype':>9}{'thr':>4}"
                   f"{'opwrap ms':>11}{'ref ms':>9}{'ratio':>8}")
    old = torch.get_num_threads()
    rows = 4096
    try:
        for threads in (1, 2):
            torch.set_num_threads(threads)
            for dtype in (torch.float32, torch.bfloat16):
                g = torch.Generator().manual_seed(0)
                x = torch.randn(rows, numel // rows, generator=g).to(dtype)
                y = torch.randn(rows, numel // rows, generator=g).to(dtype)
                b = torch.randn(numel // rows, generator=g).to(dtype)
                w = torch.randn(numel // rows, generator=g).to(dtype)
                cases = [
                    ("myadd vs torch.add", lambda: opwrap.ops.myadd(x, y), lambda: torch.add(x, y), 0.95),
                    ("gelu_tanh vs F.gelu(tanh)", lambda: opwrap.ops.gelu_tanh(x), lambda: F.gelu(x, approximate="tanh"), 0.95),
                    ("bias_gelu vs F.gelu(x + bias, tanh)", lambda: opwrap.ops.bias_gelu(x, b),
                     lambda: F.gelu(x + b, approximate="tanh"), 1.4),
                    ("rms_norm vs x * rsqrt(mean(x^2) + eps) * w", lambda: opwrap.ops.rms_norm(x, w)[0],
                     lambda: rms_norm_eager(x, w), 2.0),
                ]
                for name, ours, ref, target in cases:
                    torch.testing.assert_close(ours().float(), ref().float(), atol=3e-2, rtol=3e-2)
                    ours_ms, ref_ms = median_ms((ours, ref), runs)
                    ratio = ref_ms / ours_ms
                    report.add("throughput", name, ratio, target, dtype=str(dtype).replace("torch.", ""), threads=threads,
                               opwrap_ms=ours_ms, reference_ms=ref_ms)
                    print(f"  {name:<58}{str(dtype)[6:]:>9}{threads:>4}{ours_ms:>11.1f}{ref_ms:>9.1f}{ratio:>7.2f}x"
                          f"{_mark(ratio, target)}")
    finally:
        torch.set_num_threads(old)


def blas_ops(report: Report, runs: int, scale: int = 1):
    """The ops whose work is a matmul or gemv (they call the BLAS aten uses) against aten's
    own op: the same inputs, float32 and bfloat16, 1 and 2 threads."""
    report.section(f"BLAS ops, median of {runs} calls; ratio = aten time / opwrap time (target >= 0.95)",
                   f"{'opwrap op vs aten':<46}{'dtype':>9}{'thr':>4}{'opwrap ms':>11}{'aten ms':>9}{'ratio':>8}")
    old = torch.get_num_threads()
    n, k, m = 512 // scale, 1024 // scale, 1024 // scale
    try:
        for threads in (1, 2):
            torch.set_num_threads(threads)
            for dtype in (torch.float32, torch.bfloat16):
                g = torch.Generator().manual_seed(0)
                x = torch.randn(n, k, generator=g).to(dtype)
                w = torch.randn(m, k, generator=g).to(dtype)
                b = torch.randn(m, generator=g).to(dtype)
                other = torch.randn(k, m, generator=g).to(dtype)
                mat = torch.randn(2 * k, 2 * k, generator=g).to(dtype)
                vec = torch.randn(2 * k, generator=g).to(dtype)
                acc = torch.randn(2 * k, generator=g).to(dtype)
                cases = [
                    (f"linear vs F.linear ({n}x{k} @ {k}x{m})", lambda: opwrap.ops.linear(x, w, b),
                     lambda: F.linear(x, w, b)),
                    (f"mymatmul vs torch.mm ({n}x{k} @ {k}x{m})", lambda: opwrap.ops.mymatmul(x, other),
                     lambda: torch.mm(x, other)),
                    (f"addmv_ vs Tensor.addmv_ ({2 * k}x{2 * k})", lambda: opwrap.ops.addmv_(acc, mat, vec, beta=0.5),
                     lambda: acc.addmv_(mat, vec, beta=0.5)),
                ]
                for name, ours, ref in cases:
                    if not name.startswith("addmv_"):
                        torch.testing.assert_close(ours().float(), ref().float(), atol=0.5, rtol=2e-2)
                    # addmv_ is a tenth of a millisecond or so: more calls for the same confidence
                    ours_ms, ref_ms = median_ms((ours, ref), runs * (8 if name.startswith("addmv_") else 1))
                    ratio = ref_ms / ours_ms
                    report.add("blas", name, ratio, 0.95, dtype=str(dtype)[6:], threads=threads, opwrap_ms=ours_ms,
                               aten_ms=ref_ms)
                    print(f"  {name:<46}{str(dtype)[6:]:>9}{threads:>4}{ours_ms:>11.2f}{ref_ms:>9.2f}{ratio:>7.2f}x"
                          f"{_mark(ratio, 0.95)}")
    finally:
        torch.set_num_threads(old)


# ---------------------------------------------------------------------------- every op
# Every bundled op against its aten counterpart (target: at least 0.95x its speed) or the
# eager composition it replaces (at least 1.2x; the fused bias_gelu 1.4x, rms_norm 2x), from
# one table shared with benchmarks/cuda_bench.py.  An entry whose op is not (yet) registered,
# or that refuses a dtype, is a skip with the reason, not an error.
ATEN, EAGER = 0.95, 1.2
FLOAT_TYPES = (torch.float32, torch.bfloat16)


class Case(NamedTuple):
    op: str                           # name in torch.ops.opwrap ("myadd.out": an overload)
    reference: str                    # what it is timed against, for the table
    ref: Callable                     # the reference, called with the op's arguments
    make: Callable                    # Inputs -> the op's arguments
    target: float                     # ATEN, EAGER or a fused op's own
    dtypes: tuple = FLOAT_TYPES
    kw: tuple = ()                    # trailing arguments the op takes by keyword
    bandwidth: bool = False           # a row-wise reduction: report GB/s beside x.clone()'s
    check: bool = True                # compare results with the reference's (not for random ops)
    prep: Callable | None = None      # the reference's arguments from the op's (untimed)


class Inputs:
    """One entry's inputs: `dtype` on `device`, seeded; R x C = 4096 x 4096 (16M elements) for
    the memory-bound ops, R smaller by `scale` (a quick run)."""

    def __init__(self, dtype, device, scale: int = 1):
        self.dtype, self.device, self.R, self.C = dtype, device, 4096 // scale, 4096
        self.g = torch.Generator(device).manual_seed(0)

    def randn(self, *shape):
        return torch.randn(*shape, generator=self.g, device=self.device, dtype=self.dtype)

    def randint(self, high, shape):
        return torch.randint(0, high, shape, generator=self.g, device=self.device)

    def x(self):
        return self.randn(self.R, self.C)


def _gelu_tanh_double_backward(grad, grad_output, x):
    """The op's formula, in eager ops (aten has no op for it)."""
    t = torch.tanh(0.7978845608028654 * (x + 0.044715 * x ** 3))
    du = 0.7978845608028654 * (1 + 0.134145 * x ** 2)
    return grad * grad_output * (1 - t * t) * (du + 0.5 * x * (0.21406444881780075 * x - 2 * t * du * du))


def _bucketize_count(values, boundaries):
    indices = torch.bucketize(values, boundaries)
    return indices, torch.bincount(indices.flatten(), minlength=boundaries.numel() + 1)


def _bags(m: Inputs, backward: bool = False):
    """An embedding table of 16R rows of 128, 32R indices in R bags of random sizes."""
    v, n = 16 * m.R, 32 * m.R
    offsets = m.randint(n, (m.R,)).sort().values
    offsets[0] = 0
    return (m.randn(m.R if backward else v, 128), m.randint(v, (n,)), offsets) + ((v,) if backward else ())


def _bag_state(grad, indices, offsets, num_weights):
    """What autograd saved from F.embedding_bag's forward (offset2bag, bag_size, ...)."""
    _, offset2bag, bag_size, max_indices = torch.ops.aten._embedding_bag(
        grad.new_zeros(num_weights, grad.size(1)), indices, offsets, False, 0)
    return grad, indices, offsets, offset2bag, bag_size, max_indices, num_weights


def _kv(m: Inputs):
    """R tokens of 8 heads x 128 into paged caches of R / 4 blocks of 16 (16M elements each),
    at distinct slots, the last token padding (-1), as vLLM's batches have."""
    key, value = m.randn(m.R, 8, 128), m.randn(m.R, 8, 128)
    caches = [m.randn(m.R // 4, 16, 8, 128) for _ in range(2)]
    slots = torch.randperm(4 * m.R, generator=m.g, device=m.device)[: m.R]
    slots[-1] = -1
    return key, value, *caches, slots, "auto"


def _ln_saved(m: Inputs):
    """layer_norm_backward's arguments: a gradient, the input, the weight, and the mean and
    rstd layer_norm saved (aten's, in the input's dtype)."""
    x, w = m.x(), m.randn(m.C)
    _, mean, rstd = torch.native_layer_norm(x, x.shape[-1:], w, None, 1e-5)
    return m.x(), x, w, mean.squeeze(-1).to(m.dtype), rstd.squeeze(-1).to(m.dtype)


def _layer_norm_backward(grad, x, w, mean, rstd):
    # aten's CUDA kernels keep a reduced-precision input's mean and rstd in float32 and require
    # them so (its CPU kernels, in the input's dtype): a cast of R values each.
    stat = torch.float32 if x.is_cuda and x.dtype in (torch.bfloat16, torch.float16) else x.dtype
    return torch.ops.aten.native_layer_norm_backward(grad, x, x.shape[-1:], mean.unsqueeze(-1).to(stat),
                                                     rstd.unsqueeze(-1).to(stat), w, None, [True, False, False])[0]


def _reshape_and_cache(key, value, key_cache, value_cache, slots, kv_cache_dtype):
    keep = slots >= 0
    key_cache.flatten(0, 1).index_copy_(0, slots[keep], key[keep])
    value_cache.flatten(0, 1).index_copy_(0, slots[keep], value[keep])


def _adam_state(m: Inputs):
    """An optimizer step over 16 parameters of R / 16 x C (16M elements in all), as an LLM's
    layers give: their moments (second ones not negative), gradients, float32 steps, and Adam's
    hyperparameters (weight decay on)."""
    n = 16
    tensors = lambda: [m.randn(m.R // n, m.C) for _ in range(n)]  # noqa: E731
    params, exp_avgs, exp_avg_sqs, grads = tensors(), tensors(), [t.abs() for t in tensors()], tensors()
    steps = [torch.full((), 3.0, device=m.device) for _ in range(n)]
    return params, exp_avgs, exp_avg_sqs, grads, steps, 1e-3, 0.9, 0.999, 0.01, 1e-8


def _fused_adam(params, exp_avgs, exp_avg_sqs, grads, steps, lr, beta1, beta2, weight_decay, eps):
    torch._fused_adam_(params, grads, exp_avgs, exp_avg_sqs, [], steps, lr=lr, beta1=beta1, beta2=beta2,
                       weight_decay=weight_decay, eps=eps, amsgrad=False, maximize=False)


def _gemm(m: Inputs) -> tuple[int, int]:
    """The GEMMs' rows and inner size: 512 x 1024 on the CPU; 4096 x 4096 on a GPU, where
    smaller products time the launch rather than cuBLAS (25-40 us calls)."""
    return (4096, 4096) if str(m.device).startswith("cuda") else (m.R // 8, 1024)


_x1 = lambda m: (m.x(),)
_x2 = lambda m: (m.x(), m.x())
_xw = lambda m: (m.x(), m.randn(m.C))


def _short(c: int, bias: bool = True):
    """x of R * C / c rows of `c` (as many elements as m.x()), and a bias of `c` when asked."""
    return lambda m: (m.randn(m.R * m.C // c, c),) + ((m.randn(c),) if bias else ())


OPS = [
    Case("myadd", "torch.add", torch.add, _x2, ATEN),
    Case("myadd.out", "torch.add(out=)", lambda a, b, out: torch.add(a, b, out=out), lambda m: (m.x(), m.x(), m.x()),
         ATEN, kw=("out",)),
    Case("mul_constant", "torch.mul", torch.mul, lambda m: (m.x(), 0.5), ATEN),
    Case("gelu_tanh", "F.gelu(tanh)", lambda x: F.gelu(x, approximate="tanh"), _x1, ATEN),
    Case("gelu_tanh_backward", "aten.gelu_backward(tanh)",
         lambda g, x: torch.ops.aten.gelu_backward(g, x, approximate="tanh"), _x2, ATEN),
    Case("gelu_tanh_double_backward", "its formula in eager ops", _gelu_tanh_double_backward,
         lambda m: (m.x(), m.x(), m.x()), EAGER),
    Case("bias_gelu", "F.gelu(x + bias, tanh)", lambda x, b: F.gelu(x + b, approximate="tanh"), _xw, 1.4),
    # Short rows (the same 16M elements as 1M x 16 and 2M x 8): a bias broadcast over rows
    # cannot be coalesced into one run, so the loops see 16 or 8 elements at a time.
    *(Case(op, f"{ref}, {c} columns", fn, make, target) for c in (16, 8) for op, ref, fn, make, target in (
        ("gelu_tanh", "F.gelu(tanh)", lambda x: F.gelu(x, approximate="tanh"), _short(c, bias=False), ATEN),
        ("bias_gelu", "F.gelu(x + bias, tanh)", lambda x, b: F.gelu(x + b, approximate="tanh"), _short(c), 1.4))),
    Case("sincos", "torch.sin, torch.cos", lambda x: (torch.sin(x), torch.cos(x)), _x1, EAGER),
    Case("huber", "F.huber_loss(reduction=none)", lambda a, b, d: F.huber_loss(a, b, reduction="none", delta=d),
         lambda m: (m.x(), m.x(), 0.75), ATEN),
    Case("dropout", "torch.native_dropout", lambda x, p: torch.native_dropout(x, p, True), lambda m: (m.x(), 0.25),
         ATEN, check=False),
    Case("to_dtype", "Tensor.to (to the other dtype)", lambda x, d: x.to(d),
         lambda m: (m.x(), torch.bfloat16 if m.dtype == torch.float32 else torch.float32), ATEN),
    Case("rms_norm", "x * rsqrt(mean(x^2) + eps) * w", rms_norm_eager, _xw, 2.0, bandwidth=True),
    Case("rms_norm", "F.rms_norm", lambda x, w: F.rms_norm(x, x.shape[-1:], w, 1e-6), _xw, ATEN, bandwidth=True),
    Case("softmax", "torch.softmax(x, -1)", lambda x: torch.softmax(x, -1), _x1, ATEN, bandwidth=True),
    Case("log_softmax", "torch.log_softmax(x, -1)", lambda x: torch.log_softmax(x, -1), _x1, ATEN, bandwidth=True),
    Case("logsumexp", "torch.logsumexp(x, -1)", lambda x: torch.logsumexp(x, -1), _x1, ATEN, bandwidth=True),
    Case("layer_norm", "F.layer_norm", lambda x, w, b: F.layer_norm(x, x.shape[-1:], w, b, 1e-5),
         lambda m: (m.x(), m.randn(m.C), m.randn(m.C)), ATEN, bandwidth=True),
    Case("softmax_backward", "aten._softmax_backward_data",
         lambda g, out: torch.ops.aten._softmax_backward_data(g, out, -1, out.dtype),
         lambda m: (m.x(), torch.softmax(m.x(), -1)), ATEN, bandwidth=True),
    Case("log_softmax_backward", "aten._log_softmax_backward_data",
         lambda g, out: torch.ops.aten._log_softmax_backward_data(g, out, -1, out.dtype),
         lambda m: (m.x(), torch.log_softmax(m.x(), -1)), ATEN, bandwidth=True),
    Case("layer_norm_backward", "aten.native_layer_norm_backward", _layer_norm_backward, _ln_saved,
         ATEN, bandwidth=True),
    Case("linear", "F.linear", F.linear, lambda m: (m.randn(_gemm(m)[0], _gemm(m)[1]), m.randn(_gemm(m)[1], _gemm(m)[1]),
                                                     m.randn(_gemm(m)[1])), ATEN),
    Case("mymatmul", "torch.mm", torch.mm, lambda m: (m.randn(*_gemm(m)), m.randn(_gemm(m)[1], _gemm(m)[1])), ATEN),
    Case("addmv_", "Tensor.addmv_", lambda acc, mat, vec, beta: acc.addmv_(mat, vec, beta=beta),
         lambda m: (m.randn(2048), m.randn(2048, 2048), m.randn(2048), 0.5), ATEN, kw=("beta",)),
    Case("cat_rows", "torch.cat(dim=0)", lambda ts: torch.cat(ts, 0),
         lambda m: ([m.randn(m.R // 8, m.C) for _ in range(8)],), ATEN),
    Case("chunk_rows", "torch.split_copy", lambda x, k: torch.split_copy(x, x.size(0) // k), lambda m: (m.x(), 8),
         ATEN),
    Case("nonzero_flat", "torch.nonzero(x.flatten())", lambda x: torch.nonzero(x.flatten()).flatten(),
         lambda m: (torch.relu(m.x()),), ATEN),
    Case("dedup_consecutive", "torch.unique_consecutive", lambda x: torch.unique_consecutive(x.flatten()),
         lambda m: (m.randint(4, (m.R, m.C)).to(m.dtype),), ATEN),
    Case("bucketize_count", "torch.bucketize + torch.bincount", _bucketize_count,
         lambda m: (m.randn(m.R * m.C // 4), m.randn(1023).sort().values), EAGER),
    Case("embedding_bag_sum", "F.embedding_bag(mode=sum)", lambda w, i, o: F.embedding_bag(i, w, o, mode="sum"),
         _bags, ATEN),
    Case("embedding_bag_sum_backward", "aten._embedding_bag_backward",
         lambda g, i, o, o2b, size, mx, v: torch.ops.aten._embedding_bag_backward(g, i, o, o2b, size, mx, v, False, 0,
                                                                                 False, None),
         lambda m: _bags(m, backward=True), ATEN, prep=_bag_state),
    Case("reshape_and_cache", "index_copy_ of the unpadded tokens", _reshape_and_cache, _kv, EAGER),
    Case("adam_step", "torch._fused_adam_ (Adam(fused=True))", _fused_adam, _adam_state, ATEN,
         kw=("lr", "beta1", "beta2", "weight_decay", "eps")),
    Case("fill_natural", "torch.arange(n).reshape", lambda size: torch.arange(math.prod(size)).reshape(size),
         lambda m: ([m.R, m.C],), ATEN, dtypes=(torch.int64,)),
]
NOT_TIMED = {
    "TensorQueue": "a stateful TorchBind class (a FIFO of tensors): nothing in aten to time it against",
    "for_each_add_": "a TensorQueue method, in place on the queue's state: nothing in aten to time it against",
}


def _resolve(name: str):
    """The op to call: its Python wrapper (opwrap.ops) when there is one, else the
    dispatcher's; None when it is not registered (yet)."""
    base, _, overload = name.partition(".")
    packet = getattr(torch.ops.opwrap, base, None)
    if packet is None:
        return None
    return getattr(packet, overload) if overload else getattr(opwrap.ops, base, packet)


def _known_ops() -> list[str]:
    """The declared ops and classes (declarations/*.yaml) and the registered ones."""
    names = [n for f in sorted((ROOT / "declarations").glob("*.yaml"))
             for n in re.findall(r"^- (?:func|class): ([\w.]+)", f.read_text(), re.M)]
    names += [n.split("::", 1)[1] for n in torch._C._dispatch_get_all_op_names() if n.startswith("opwrap::")]
    return list(dict.fromkeys(names))


def _tensors(v) -> list[torch.Tensor]:
    if isinstance(v, torch.Tensor):
        return [v]
    return [t for x in v for t in _tensors(x)] if isinstance(v, (tuple, list)) else []


def _map(fn, args):
    """args with fn applied to each tensor (inside lists too)."""
    return tuple(fn(a) if isinstance(a, torch.Tensor) else [fn(t) for t in a]
                 if isinstance(a, list) and a and isinstance(a[0], torch.Tensor) else a for a in args)


def _call(case: Case, op, args):
    n = len(args) - len(case.kw)
    return op(*args[:n], **dict(zip(case.kw, args[n:])))


def _check(case: Case, op, args) -> str | None:
    """Why the op's results (and the arguments it writes) differ from the reference's, run on
    copies (in float32 for bfloat16 inputs); None when they agree."""
    ours_args = _map(torch.clone, args)
    ref_args = _map(lambda t: t.float() if t.dtype == torch.bfloat16 else t.clone(), args)
    ours = _tensors(_call(case, op, ours_args))
    ref = _tensors(case.ref(*(case.prep(*ref_args) if case.prep else ref_args)))
    pairs = list(zip(ours, ref)) + list(zip(_tensors(ours_args), _tensors(ref_args)))  # results, then written arguments
    low = any(t.dtype == torch.bfloat16 for t in _tensors(args))
    try:
        for a, b in pairs:
            torch.testing.assert_close(a.double(), b.double(), atol=5e-2 if low else 1e-3, rtol=2e-2 if low else 1e-3)
    except AssertionError as e:
        return str(e).strip().splitlines()[0]
    return None


def op_table(report: Report, runs: int, scale: int = 1, device: str = "cpu", timer=None, threads=(1, 2),
             ops: set[str] | None = None):
    """Every entry of OPS (or those of the ops named), float32 and bfloat16 (as the entry says),
    at each thread count (CPU), the op and its reference interleaved, medians; ratio =
    reference time / opwrap time."""
    timer = timer or median_ms
    thr_note = f", {' and '.join(map(str, threads))} threads" if threads[0] else ""
    report.section(f"every op on {device}{thr_note}; ratio = reference time / opwrap time (>1: opwrap faster); "
                   f"targets: >= {ATEN}x an aten op, >= {EAGER}x an eager composition, bias_gelu 1.4x, rms_norm 2x "
                   "its eager chain; reductions: GB/s moved beside x.clone()'s",
                   f"{'opwrap op vs reference':<62}{'dtype':>9}{'thr':>4}{'opwrap ms':>11}{'ref ms':>9}{'ratio':>8}")

    def skip(label, dtype, why):
        report.add("ops", label, None, skipped=why, dtype=dtype, device=device)
        print(f"  {label:<62}{dtype:>9}      skipped: {why}")

    old = torch.get_num_threads()
    try:
        for case in OPS:
            if ops and case.op not in ops:
                continue
            label, op = f"{case.op} vs {case.reference}", _resolve(case.op)
            if op is None:
                skip(label, "-", "not in torch.ops.opwrap (yet)")
                continue
            for dtype in case.dtypes:
                dt = str(dtype).replace("torch.", "")
                m = Inputs(dtype, device, scale)
                args = case.make(m)
                ref_args = case.prep(*args) if case.prep else args
                try:
                    out = _call(case, op, args)
                except Exception as e:  # noqa: BLE001  (a dtype it does not declare, a build under way)
                    skip(label, dt, str(e).strip().splitlines()[0][:120])
                    continue
                if any(t.device.type != torch.device(device).type for t in _tensors(out)):
                    skip(label, dt, f"runs on the CPU only (no tensor argument to dispatch on {device})")
                    continue
                bad = _check(case, op, args) if case.check else None
                if bad:
                    report.add("ops", f"{label} ({dt}) matches its reference", 0.0, 1.0, mismatch=bad)
                    print(f"  {label:<62}{dt:>9}      MISMATCH with the reference: {bad[:100]}")
                fns = [lambda: _call(case, op, args), lambda: case.ref(*ref_args)]
                if case.bandwidth:
                    x = args[0]
                    fns.append(x.clone)
                    moved = sum(t.nbytes for t in _tensors(args) + _tensors(out))
                for thr in threads:
                    if thr:
                        torch.set_num_threads(thr)
                    once = sum(timer([fn], 1)[0] for fn in fns)
                    times = timer(fns, max(runs, min(8 * runs, int(500 / max(once, 1e-3)))))
                    ratio = times[1] / times[0]
                    extra = {}
                    if case.bandwidth:
                        extra = dict(opwrap_gbs=moved / times[0] / 1e6, clone_gbs=2 * x.nbytes / times[2] / 1e6)
                    report.add("ops", label, ratio, case.target, op=case.op, reference=case.reference,
                               kind="aten" if case.target == ATEN else "eager", dtype=dt, threads=thr, device=device,
                               opwrap_ms=times[0], reference_ms=times[1], **extra)
                    gbs = (f"  {extra['opwrap_gbs']:.1f} GB/s, x.clone() {extra['clone_gbs']:.1f} GB/s "
                           f"({extra['opwrap_gbs'] / extra['clone_gbs']:.0%})" if extra else "")
                    print(f"  {label:<62}{dt:>9}{thr or '-':>4}{times[0]:>11.3f}{times[1]:>9.3f}{ratio:>7.2f}x"
                          f"{_mark(ratio, case.target)}{gbs}", flush=True)
                del args, ref_args, out, fns
        timed = {c.op for c in OPS}
        for name in [] if ops else _known_ops():
            if name in NOT_TIMED:
                skip(name, "-", NOT_TIMED[name])
            elif name not in timed:
                skip(name, "-", "no entry in bench.py's OPS table")
    finally:
        torch.set_num_threads(old)


# ---------------------------------------------------------------------------- build
def _ninja_vars(build_dir: Path) -> dict[str, str]:
    out = {}
    for line in (build_dir / "build.ninja").read_text().splitlines():
        if " = " in line and not line.startswith(" "):
            k, _, v = line.partition(" = ")
            out[k.strip()] = v
    return out


def compile_seconds(cxx: str, cflags: str, source: Path, workdir: Path) -> float:
    """Wall seconds of one compile, alone on the machine, without a compiler cache."""
    cmd = f"{cxx} {cflags} -c {shlex.quote(str(source))} -o {shlex.quote(str(workdir / 'tu.o'))}"
    env = dict(os.environ, CCACHE_DISABLE="1")
    t = time.perf_counter()
    r = subprocess.run(cmd, shell=True, env=env, cwd=workdir, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"compiling {source} failed:\n{r.stderr[-3000:]}")
    return time.perf_counter() - t


def build_times(report: Report, full: bool):
    from opwrap_codegen import build as cbuild
    from opwrap_codegen.core.config import load_config

    config = load_config(ROOT)
    build_dir = config.path("build")
    if not (build_dir / "build.ninja").is_file():
        print("\nbuild: skipped (run `make build` first)")
        return
    v = _ninja_vars(build_dir)
    cxx = "c++"  # the compiler itself: no ccache
    cflags = v["cflags"] + " " + v.get("post_cflags", "")
    report.section("build: compile seconds, each unit alone, no compiler cache; ratio = extension.h TU / generated TU",
                   f"{'translation unit':<58}{'seconds':>9}{'ratio':>8}")
    gen = config.path("generated")
    sample = gen / "cpu" / "gelu_tanh.cpp"
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        # The same kernel source with torch/extension.h first, as a hand-written extension has it.
        heavy = work / "gelu_tanh_extension_h.cpp"
        heavy.write_text(f'#include <torch/extension.h>\n#include "{sample}"\n')
        heavy_s = compile_seconds(cxx, cflags, heavy, work)
        light_s = compile_seconds(cxx, cflags, sample, work)
        ratio = heavy_s / light_s
        report.add("build", "generated cpu/gelu_tanh.cpp vs the same + torch/extension.h", ratio, 3.0,
                   generated_s=light_s, extension_h_s=heavy_s)
        print(f"  {'cpu/gelu_tanh.cpp (generated)':<58}{light_s:>9.1f}")
        print(f"  {'the same with #include <torch/extension.h>':<58}{heavy_s:>9.1f}{ratio:>7.2f}x{_mark(ratio, 3.0)}")
        if full:
            units = [s for s in cbuild.sources(config) if s.suffix == ".cpp"]
            per_unit = {}
            for src in units:
                per_unit[str(src.relative_to(gen))] = compile_seconds(cxx, cflags, src, work)
            median = statistics.median(per_unit.values())
            ratio = heavy_s / median
            slowest = sorted(per_unit.items(), key=lambda kv: -kv[1])[:3]
            report.add("build", f"median of {len(units)} generated C++ units vs extension.h TU", ratio, 3.0,
                       median_s=median, per_unit_s=per_unit)
            print(f"  {f'median of the {len(units)} generated C++ units':<58}{median:>9.1f}{ratio:>7.2f}x"
                  f"{_mark(ratio, 3.0)}")
            for name, secs in slowest:
                print(f"    slowest: {name:<47}{secs:>9.1f}")

    # Full C++ build (fresh directory, 2 jobs, no cache) and a no-op rebuild of the real one.
    if full:
        with tempfile.TemporaryDirectory() as tmp:
            t = time.perf_counter()
            r = subprocess.run([sys.executable, "-m", "opwrap_codegen.cli", "build", "--no-cuda", "--no-ccache",
                                "--build-dir", tmp], cwd=ROOT, capture_output=True, text=True,
                               env=dict(os.environ, MAX_JOBS=str(os.cpu_count() or 2)))
            full_s = time.perf_counter() - t
            if r.returncode != 0:
                print(r.stdout[-2000:], r.stderr[-2000:])
            report.add("build", "full C++ library build (fresh, no cache, no CUDA)", None, seconds=full_s)
            print(f"  {'full C++ build (fresh dir, no cache, no CUDA)':<58}{full_s:>9.1f}")
    log = build_dir / ".ninja_log"
    before = log.stat().st_size if log.exists() else 0
    t = time.perf_counter()
    subprocess.run([sys.executable, "-m", "opwrap_codegen.cli", "build"], cwd=ROOT, capture_output=True, check=True)
    noop_s = time.perf_counter() - t
    rebuilt = sum(n for n, _ in cbuild.compile_times(log, before).values())
    report.add("build", "no-op `codegen build`", None, seconds=noop_s, objects_rebuilt=rebuilt)
    print(f"  {'no-op `codegen build` (objects rebuilt: %d)' % rebuilt:<58}{noop_s:>9.1f}")
    if rebuilt:
        report.add("build", "no-op build rebuilt objects", 0.0, 1.0)


# ---------------------------------------------------------------------------- library
POINTWISE_OP = textwrap.dedent("""\
    - func: pw{i}(Tensor self, Tensor other, float alpha=1.0) -> Tensor
      doc: Synthetic pointwise op {i}.
      dtypes: floating
      pointwise: self * sigmoid(other) + alpha * {i}
      derivatives:
        self: grad * other.sigmoid()
        other: grad * self * other.sigmoid() * (1 - other.sigmoid())
    """)


def _empty_library(root: Path) -> dict[str, str]:
    """A `codegen init` library at `root` without its example op (declaration and kernel),
    and the environment its builds run in (this toolchain, every core)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
               MAX_JOBS=str(os.cpu_count() or 2))
    subprocess.run([sys.executable, "-m", "opwrap_codegen.cli", "init", str(root)], env=env, check=True,
                   capture_output=True)
    for p in [*(root / "declarations").iterdir(), *(root / "kernels").iterdir()]:
        p.unlink()
    return env


def _build_pointwise_library(n: int, root: Path) -> tuple[float, float, int]:
    """A `codegen init` library of `n` pointwise ops (every CPU capability, autograd, the
    bindings), built fresh without CUDA or a compiler cache: (wall seconds, compiler
    seconds summed over the objects, objects)."""
    from opwrap_codegen import build as cbuild
    env = _empty_library(root)
    (root / "declarations" / "ops.yaml").write_text("".join(POINTWISE_OP.format(i=i) for i in range(n)))
    t = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "opwrap_codegen.cli", "build", "--no-cuda", "--no-ccache"], cwd=root, env=env,
                       capture_output=True, text=True)
    wall = time.perf_counter() - t
    if r.returncode != 0:
        raise RuntimeError(r.stderr[-3000:])
    compiled = [cbuild.compile_times(root / "build" / d / ".ninja_log", 0) for d in ("", "python")]
    return wall, sum(s for c in compiled for _, s in c.values()), sum(n for c in compiled for n, _ in c.values())


def library_build(report: Report, n: int, base: int):
    """A library of `n` pointwise ops built from scratch, and the compiler time each op adds
    (measured against a library of `base` ops, so the headers every unit parses cancel out)."""
    report.section(f"library: {n} synthetic pointwise ops built fresh (no CUDA, no cache, {os.cpu_count()} jobs)",
                   f"{'build':<58}{'seconds':>9}{'target':>8}")
    with tempfile.TemporaryDirectory() as tmp:
        big_wall, big_cc, big_objs = _build_pointwise_library(n, Path(tmp) / "big")
        small_wall, small_cc, _ = _build_pointwise_library(base, Path(tmp) / "small")
    marginal = (big_cc - small_cc) / (n - base)
    report.add("library", f"{n} pointwise ops, fresh build wall", 150.0 / big_wall, 1.0, seconds=big_wall,
               compiler_seconds=big_cc, objects=big_objs, target_seconds=150.0)
    report.add("library", "marginal compiler seconds per pointwise op", 5.0 / marginal, 1.0, seconds=marginal,
               target_seconds=5.0, base_ops=base, base_wall=small_wall, base_compiler_seconds=small_cc)
    print(f"  {f'{n} ops: wall ({big_objs} objects, {big_cc:.0f} s of compiler time)':<58}{big_wall:>9.1f}"
          f"{'<= 150':>8}{_mark(150.0 / big_wall, 1.0)}")
    print(f"  {f'{base} ops: wall ({small_cc:.0f} s of compiler time)':<58}{small_wall:>9.1f}")
    print(f"  {'marginal compiler seconds per op, all CPU capabilities':<58}{marginal:>9.2f}{'<= 5':>8}"
          f"{_mark(5.0 / marginal, 1.0)}")


# ---------------------------------------------------------------------------- foreign kernels
# One op, `self * alpha` over float32 and float64, three times: a C++ kernel template, a Rust
# function and a C function behind the C kernel ABI, each a loop over torch's thread pool
# (at::parallel_for; par_chunks_mut and opwrap_parallel_for call it), in one `codegen init` library.
ABI_OPS = textwrap.dedent("""\
    - func: scale_cpp(Tensor self, float alpha) -> Tensor
      dtypes: [float32, float64]
      kernels: {CPU: scale_cpp_kernel}
      like: self
    - func: scale_rust(Tensor self, float alpha) -> Tensor
      dtypes: [float32, float64]
      kernels: {CPU: {abi: rust, function: scale}}
      like: self
    - func: scale_c(Tensor self, float alpha) -> Tensor
      dtypes: [float32, float64]
      kernels: {CPU: {abi: c, symbol: abibench_scale}}
      like: self
    """)
ABI_CPP = textwrap.dedent("""\
    #pragma once
    #include <ATen/Parallel.h>
    #include <ATen/core/Tensor.h>

    namespace abibench::kernels {
    template <typename scalar_t>
    void scale_cpp_kernel(const at::Tensor& self, double alpha, at::Tensor& result) {
      const scalar_t* x = self.const_data_ptr<scalar_t>();
      scalar_t* out = result.mutable_data_ptr<scalar_t>();
      const scalar_t a = static_cast<scalar_t>(alpha);
      at::parallel_for(0, self.numel(), 32768, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) out[i] = x[i] * a;
      });
    }
    }  // namespace abibench::kernels
    """)
ABI_RUST = textwrap.dedent("""\
    #[path = "../../generated/rust/kernels.rs"]
    mod kernels;
    use kernels::{Context, Float, Result, TensorMut, TensorRef};

    fn scale<T: Float>(ctx: &Context, x: TensorRef<'_, T>, alpha: f64, mut result: TensorMut<'_, T>) -> Result<()> {
        let (a, x) = (T::from_f64(alpha), x.as_slice().unwrap());
        result.par_chunks_mut(ctx, 32768, |start, out| {
            let n = out.len();
            for (o, &v) in out.iter_mut().zip(&x[start..start + n]) {
                *o = v * a;
            }
        })
    }
    """)
ABI_C = textwrap.dedent("""\
    #include "abi/scale_c.h"

    #define SCALE(NAME, T)                                                                                    \\
      typedef struct { const T* x; T* out; T a; } NAME##_job;                                                \\
      static void NAME##_range(void* data, int64_t b, int64_t e) {                                           \\
        const NAME##_job* j = (const NAME##_job*)data;                                                       \\
        for (int64_t i = b; i < e; ++i) j->out[i] = j->x[i] * j->a;                                          \\
      }                                                                                                      \\
      int32_t NAME(opwrap_context* ctx, const opwrap_tensor* self, double alpha, opwrap_tensor* result) {    \\
        NAME##_job job = {(const T*)self->data, (T*)result->data, (T)alpha};                                 \\
        opwrap_parallel_for(ctx, 0, opwrap_numel(self), 32768, NAME##_range, &job);                          \\
        return OPWRAP_OK;                                                                                    \\
      }

    SCALE(abibench_scale_float32, float)
    SCALE(abibench_scale_float64, double)
    """)


def _build_abi_library(root: Path) -> None:
    env = _empty_library(root)
    pyproject = root / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace(
        "[tool.codegen]\n", '[tool.codegen]\ncrates = ["rust"]\nsources = ["csrc/*.c"]\n'))
    (root / "declarations" / "ops.yaml").write_text(ABI_OPS)
    (root / "kernels" / "scale_cpp.h").write_text(ABI_CPP)
    (root / "rust" / "src").mkdir(parents=True)
    (root / "rust" / "Cargo.toml").write_text('[package]\nname = "abibench"\nversion = "0.1.0"\nedition = "2021"\n\n'
                                              '[lib]\ncrate-type = ["staticlib"]\n\n[profile.release]\ncodegen-units = 1\n')
    (root / "rust" / "src" / "lib.rs").write_text(ABI_RUST)
    (root / "csrc").mkdir()
    (root / "csrc" / "scale.c").write_text(ABI_C)
    r = subprocess.run([sys.executable, "-m", "opwrap_codegen.cli", "build", "--no-cuda", "--no-ccache"], cwd=root,
                       env=env, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(r.stdout[-2000:] + r.stderr[-3000:])


def foreign_kernels(report: Report, number: int, repeat: int, numel: int, runs: int):
    """Kernels behind the C ABI against the same op as a C++ kernel template: compile
    seconds of each kernel's unit, call overhead, and the loops' throughput."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "abibench"
        t = time.perf_counter()
        _build_abi_library(root)
        print(f"\nforeign kernels: built a `codegen init` library with the op three ways in "
              f"{time.perf_counter() - t:.0f} s")

        # Compile seconds, each unit alone, no compiler cache.
        v = _ninja_vars(root / "build")
        cflags = v["cflags"] + " " + v.get("post_cflags", "")
        gen = root / "generated"
        report.section("foreign kernels: compile seconds, each unit alone, no compiler cache; ratio = C++ kernel "
                       "unit / this unit", f"{'unit':<58}{'seconds':>9}{'ratio':>8}")
        work = Path(tmp) / "work"
        work.mkdir()
        cpp_s = compile_seconds("c++", cflags, gen / "cpu" / "scale_cpp.cpp", work)
        units = [("the C++ kernel's unit: wrapper + kernel template (cpu/scale_cpp.cpp)", cpp_s)]
        units.append(("the C kernel (csrc/scale.c, cc -O3)",
                      compile_seconds("cc", f"-O3 -fPIC -std=c11 -I{build_support_include()} -I{gen}",
                                      root / "csrc" / "scale.c", work)))
        units.append(("a foreign kernel's wrapper (cpu/scale_c.cpp)",
                      compile_seconds("c++", cflags, gen / "cpu" / "scale_c.cpp", work)))
        t = time.perf_counter()
        r = subprocess.run(["cargo", "build", "--release", "--offline", "--quiet", "--manifest-path",
                            str(root / "rust" / "Cargo.toml"), "--target-dir", str(work / "cargo")],
                           capture_output=True, text=True)
        if r.returncode == 0:
            units.append(("the Rust crate (cargo build --release, fresh)", time.perf_counter() - t))
        for name, secs in units:
            ratio = cpp_s / secs
            target = 3.0 if name.startswith(("the C kernel", "the Rust")) else None
            report.add("foreign", f"compile: {name}", None if secs is cpp_s else ratio, target, seconds=secs)
            print(f"  {name:<58}{secs:>9.2f}{'' if secs is cpp_s else f'{ratio:>7.1f}x'}"
                  f"{'' if secs is cpp_s else _mark(ratio, target)}")

        sys.path.insert(0, str(root))
        try:
            import abibench  # noqa: F401  (loads the library: torch.ops.abibench)
        finally:
            sys.path.remove(str(root))
        ops = sys.modules["abibench"].ops
        kinds = (("C++ kernel", "scale_cpp"), ("Rust kernel", "scale_rust"), ("C kernel", "scale_c"))

        # Call overhead: 8 elements, best of repeats, the three interleaved.
        report.section("foreign kernels: call overhead, 8-element float32 tensor (best of runs); ratio = C++ "
                       "kernel's time / this op's (target >= 0.95: at most 5% slower)",
                       f"{'call':<58}{'us/call':>9}{'ratio':>8}")
        x = torch.randn(8)
        for surface, get in (("abibench.ops", lambda n: getattr(ops, n)),
                             ("torch.ops.abibench", lambda n: getattr(torch.ops.abibench, n))):
            best = {}
            for _ in range(repeat):
                for _, name in kinds:
                    fn = get(name)
                    us = per_call_us(lambda: fn(x, 2.0), number, 1)
                    best[name] = min(best.get(name, us), us)
            for kind, name in kinds:
                us = best[name]
                ratio = best["scale_cpp"] / us
                label = f"{surface}.{name} ({kind})"
                report.add("foreign", f"call: {label}", None if name == "scale_cpp" else ratio,
                           None if name == "scale_cpp" else 0.95, us_per_call=us)
                print(f"  {label:<58}{us:>9.2f}{'' if name == 'scale_cpp' else f'{ratio:>7.2f}x'}"
                      f"{'' if name == 'scale_cpp' else _mark(ratio, 0.95)}")

        # Throughput of the loops.
        report.section(f"foreign kernels: throughput, {numel / 2**20:.0f}M elements, median of {runs} calls; "
                       "ratio = C++ loop's time / this loop's", f"{'loop':<46}{'dtype':>9}{'thr':>4}"
                       f"{'ms':>9}{'C++ ms':>9}{'ratio':>8}")
        old = torch.get_num_threads()
        try:
            for threads in (1, 2):
                torch.set_num_threads(threads)
                for dtype in (torch.float32, torch.float64):
                    y = torch.randn(numel, dtype=dtype)
                    fns = [lambda n=name: getattr(ops, n)(y, 2.0) for _, name in kinds]
                    for fn in fns:
                        torch.testing.assert_close(fn(), y * 2.0)
                    times = median_ms(fns, runs)
                    for (kind, name), ms in zip(kinds[1:], times[1:]):
                        ratio = times[0] / ms
                        report.add("foreign", f"throughput: {kind} loop vs C++ loop", ratio, 0.9,
                                   dtype=str(dtype)[6:], threads=threads, ms=ms, cpp_ms=times[0])
                        print(f"  {kind + ' loop vs the C++ loop':<46}{str(dtype)[6:]:>9}{threads:>4}{ms:>9.2f}"
                              f"{times[0]:>9.2f}{ratio:>7.2f}x{_mark(ratio, 0.9)}")
        finally:
            torch.set_num_threads(old)


# ---------------------------------------------------------------------------- the two targets
class _Worker:
    """benchmarks/target_worker.py for one target, answering one JSON request at a time."""

    def __init__(self, target: str):
        self.target = target
        self.proc = subprocess.Popen([sys.executable, str(ROOT / "benchmarks" / "target_worker.py"), target],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=ROOT)

    def ask(self, **request) -> dict:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the {self.target} worker stopped (its error is above)")
        return json.loads(line)

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait()


def two_targets(report: Report, runs: int, scale: int, number: int, repeat: int, ops: set[str] = frozenset()):
    """The bundled library in both targets (docs/stable-abi.md): `make build`'s and the stable
    target's build of the ops it can express (`codegen build --target stable
    --leave-out-unsupported`, build/stable), each in a worker process of its own, requests
    alternated between them (three rounds, the median of each side's round medians):
    every OPS entry of an op in both builds, the call overhead of mul_constant with and
    without grad and of myadd under autocast (a C++ kernel against a Python one), and each
    op's CPU translation unit compiled alone in each target.  `ops` (bench --op): only those
    OPS entries, nothing else."""
    r = subprocess.run([sys.executable, "-m", "opwrap_codegen.cli", "build", "--target", "stable",
                        "--leave-out-unsupported", "--no-generate"], cwd=ROOT, capture_output=True, text=True)
    if r.returncode != 0:
        print(r.stdout[-2000:], r.stderr[-4000:])
        raise RuntimeError("the stable target's build of the bundled library failed (above)")
    left_out = r.stderr.count("leaving out ")
    workers = {t: _Worker(t) for t in ("aten", "stable")}
    try:
        common = set(workers["stable"].ask(kind="ops")["ops"]) & set(workers["aten"].ask(kind="ops")["ops"])
        print(f"\ntargets: the stable build holds {len(common)} of the bundled ops ({', '.join(sorted(common))}); "
              f"{left_out} left out, each with why: `make build-stable`")
        report.section("the two targets: the bundled ops the stable target expresses, each target's build in a "
                       "process of its own; ratio = full target's time / stable target's (target >= 0.9x)",
                       f"{'op':<28}{'dtype':>9}{'thr':>4}{'stable ms':>11}{'full ms':>9}{'ratio':>8}")

        def alternated(**request) -> dict[str, float] | str:
            """Each side's median of three rounds, or why the op refused the inputs."""
            rounds: dict[str, list[float]] = {t: [] for t in workers}
            sums = {}
            for _ in range(3):
                for t, w in workers.items():
                    reply = w.ask(**request)
                    if "skip" in reply:
                        return reply["skip"]
                    rounds[t].append(reply.get("ms", reply.get("us")))
                    sums[t] = reply.get("sums")
            if sums["aten"] is not None:
                # a sum of millions of elements: a check against garbage, not of rounding
                torch.testing.assert_close(torch.tensor(sums["stable"]), torch.tensor(sums["aten"]), rtol=1e-2, atol=1.0)
            return {t: statistics.median(v) for t, v in rounds.items()}

        for i, case in enumerate(OPS):
            if case.op.split(".")[0] not in common or (ops and case.op not in ops):
                continue
            for dtype in case.dtypes:
                for threads in (1, 2):
                    ms = alternated(kind="time", case=i, dtype=str(dtype)[6:], threads=threads, runs=max(runs // 3, 3),
                                    scale=scale)
                    if isinstance(ms, str):
                        print(f"  {case.op:<28}{str(dtype)[6:]:>9}{threads:>4}  skipped: {ms}")
                        break
                    ratio = ms["aten"] / ms["stable"]
                    report.add("targets", f"{case.op} stable vs full target", ratio, 0.9, dtype=str(dtype)[6:],
                               threads=threads, stable_ms=ms["stable"], full_ms=ms["aten"])
                    print(f"  {case.op:<28}{str(dtype)[6:]:>9}{threads:>4}{ms['stable']:>11.2f}{ms['aten']:>9.2f}"
                          f"{ratio:>7.2f}x{_mark(ratio, 0.9)}")
        def calls(name: str, **request) -> None:  # one call's microseconds in each build, as a ratio
            us = alternated(number=number, repeat=repeat, **request)
            assert isinstance(us, dict), us
            report.add("targets", name + ": full target's time / stable's", us["aten"] / us["stable"],
                       stable_us=us["stable"], full_us=us["aten"])
            print(f"  {name:<44}stable {us['stable']:.2f} us, full {us['aten']:.2f} us: {us['aten'] / us['stable']:.2f}x")

        if ops:
            return
        for grad in (False, True):
            calls(f"mul_constant call, 8 elements{' (requires_grad)' if grad else ''}", kind="calls", grad=grad)
        # The autocast kernels: C++ in the full target, Python in the stable one (docs/stable-abi.md).
        for dtype in ("float32", "bfloat16"):
            calls(f"myadd under autocast, 16 elements{', one cast' if dtype == 'bfloat16' else ''}",
                  kind="autocast_calls", dtype=dtype)
    finally:
        for w in workers.values():
            w.close()

    # Each op's CPU translation unit (wrapper and kernel), alone, without a compiler cache,
    # with its own target's flags; the full target also compiles an autograd unit per op
    # with derivatives (the stable one registers them from Python).
    print(f"  {'CPU unit compiled alone (seconds)':<44}{'stable':>8}{'full':>8}{'ratio':>8}")
    trees = {"aten": (ROOT / "build", ROOT / "generated" / "cpu"),
             "stable": (ROOT / "build" / "stable", ROOT / "build" / "stable" / "generated" / "stable" / "cpu")}
    with tempfile.TemporaryDirectory() as tmp:
        for op in sorted({name.split(".")[0] for name in common}):  # an overload is in its op's unit
            if not all((cpu / f"{op}.cpp").is_file() for _, cpu in trees.values()):
                continue  # generated into a unit of several ops in the full target (row-wise programs)
            secs = {}
            for t, (build_dir, cpu) in trees.items():
                v = _ninja_vars(build_dir)
                secs[t] = compile_seconds("c++", v["cflags"] + " " + v.get("post_cflags", ""), cpu / f"{op}.cpp",
                                          Path(tmp))
            ratio = secs["aten"] / secs["stable"]
            report.add("targets", f"{op} CPU unit compile seconds: full / stable", ratio, stable_s=secs["stable"],
                       full_s=secs["aten"])
            print(f"  {op:<44}{secs['stable']:>8.1f}{secs['aten']:>8.1f}{ratio:>7.2f}x")


# ---------------------------------------------------------------------------- stable-target pointwise
# The bundled library's pointwise expressions (declarations/gelu.yaml, myadd.yaml), as a
# stable-target library builds them (their formulas call C++ ops: left out, as timing needs none).
STABLE_POINTWISE = """\
- func: gelu_tanh(Tensor self) -> Tensor
  dtypes: floating
  pointwise: self / (1 + exp(-1.5957691216057308 * self * (1 + 0.044715 * self * self)))

- func: bias_gelu(Tensor self, Tensor bias) -> Tensor
  dtypes: floating
  pointwise: |
    x = self + bias
    x / (1 + exp(-1.5957691216057308 * x * (1 + 0.044715 * x * x)))

- func: myadd(Tensor self, Tensor other) -> Tensor
  dtypes: [float32, float64, float16, bfloat16, int32, int64]
  pointwise: self + other
"""


def _build_stable_library(root: Path, declarations: str) -> float:
    """A `codegen init` library at `root` with `target = "stable"` and these declarations, built
    at -O3 without CUDA; returns the build's seconds."""
    env = _empty_library(root)
    pyproject = root / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace("[tool.codegen]\n", '[tool.codegen]\ntarget = "stable"\n'))
    (root / "declarations" / "ops.yaml").write_text(declarations)
    t = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "opwrap_codegen.cli", "build", "--no-cuda"], cwd=root, env=env,
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(r.stdout[-2000:] + r.stderr[-3000:])
    return time.perf_counter() - t


def stable_pointwise(report: Report, sizes: tuple[int, ...], runs: int):
    """Generated pointwise kernels of the stable target (docs/stable-abi.md) against the same
    expressions in the full target (the bundled library's, at::vec and TensorIterator) and
    eager torch: a `codegen init` library with `target = "stable"` built at -O3."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "pwstable"
        seconds = _build_stable_library(root, STABLE_POINTWISE)
        print(f"\nstable pointwise: built a stable-target library of 3 pointwise ops in {seconds:.0f} s")
        sys.path.insert(0, str(root))
        try:
            import pwstable  # noqa: F401  (loads the library)
        finally:
            sys.path.remove(str(root))
        ops = sys.modules["pwstable"].ops
        report.section(f"stable pointwise: median of {runs} calls; ratio = full target's time / stable target's "
                       "(target >= 0.9x); eager = eager torch's time / stable's",
                       f"{'op':<12}{'dtype':>9}{'numel':>6}{'thr':>4}{'stable ms':>11}{'full ms':>9}{'eager ms':>10}"
                       f"{'ratio':>8}{'eager':>8}")
        old = torch.get_num_threads()
        try:
            for threads in (1, 2):
                torch.set_num_threads(threads)
                for numel in sizes:
                    for dtype in (torch.float32, torch.bfloat16, torch.float16):
                        g = torch.Generator().manual_seed(0)
                        x = torch.randn(numel // 1024, 1024, generator=g).to(dtype)
                        b = torch.randn(1024, generator=g).to(dtype)
                        cases = (("gelu_tanh", lambda: ops.gelu_tanh(x), lambda: opwrap.ops.gelu_tanh(x),
                                  lambda: F.gelu(x, approximate="tanh")),
                                 ("bias_gelu", lambda: ops.bias_gelu(x, b), lambda: opwrap.ops.bias_gelu(x, b),
                                  lambda: F.gelu(x + b, approximate="tanh")),
                                 ("myadd", lambda: ops.myadd(x, x), lambda: opwrap.ops.myadd(x, x),
                                  lambda: torch.add(x, x)))
                        for name, stable, full, eager in cases:
                            torch.testing.assert_close(stable().float(), full().float(), atol=3e-2, rtol=3e-2)
                            s_ms, f_ms, e_ms = median_ms((stable, full, eager), runs)
                            ratio = f_ms / s_ms
                            report.add("stable", f"{name} stable vs full target", ratio, 0.9, dtype=str(dtype)[6:],
                                       numel=numel, threads=threads, stable_ms=s_ms, full_ms=f_ms, eager_ms=e_ms,
                                       eager_ratio=e_ms / s_ms)
                            print(f"  {name:<12}{str(dtype)[6:]:>9}{numel >> 20:>5}M{threads:>4}{s_ms:>11.2f}{f_ms:>9.2f}"
                                  f"{e_ms:>10.2f}{ratio:>7.2f}x{e_ms / s_ms:>7.2f}x{_mark(ratio, 0.9)}")
        finally:
            torch.set_num_threads(old)


# ---------------------------------------------------------------------------- stable-target row-wise
# The bundled library's row-wise programs (declarations/softmax.yaml, rms_norm.yaml), as a
# stable-target library builds them (their formulas call C++ ops, and autocast: left out).
STABLE_ROWWISE = """\
- func: softmax(Tensor self) -> Tensor
  dtypes: floating
  shape: {self: ["*B", D], result: self.shape}
  rowwise: |
    m = max(self)
    e = fast_exp(self - m)
    e / sum(e)

- func: rms_norm(Tensor input, Tensor weight, float eps=1e-6) -> (Tensor out, Tensor rstd)
  dtypes: floating
  shape: {input: ["*B", D], weight: [D], out: input.shape, rstd: ["*B"]}
  rowwise: |
    rstd = rsqrt(mean(input * input) + eps)
    input * rstd * weight, rstd
"""


def stable_rowwise(report: Report, shapes, runs: int):
    """Generated row-wise kernels of the stable target (plain loops GCC vectorizes) against the
    same programs in the full target (the bundled library's, at::vec) and eager torch."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "rwstable"
        seconds = _build_stable_library(root, STABLE_ROWWISE)
        print(f"\nstable row-wise: built a stable-target library of 2 row-wise ops in {seconds:.0f} s")
        torch.ops.load_library(str(root / "build" / "_C.so"))  # the ops only: timing needs no Python module
        report.section(f"stable row-wise: median of {runs} calls; ratio = full target's time / stable target's "
                       "(target >= 0.9x); eager = eager torch's time / stable's",
                       f"{'op':<10}{'shape':>11}{'dtype':>10}{'thr':>4}{'stable ms':>11}{'full ms':>9}{'eager ms':>10}"
                       f"{'ratio':>8}{'eager':>8}")
        eager = {"softmax": lambda x, w: torch.softmax(x, -1),
                 "rms_norm": lambda x, w: torch.rms_norm(x, (x.shape[-1],), w, 1e-6)}
        old = torch.get_num_threads()
        try:
            for threads in (1, 2):
                torch.set_num_threads(threads)
                for op in ("softmax", "rms_norm"):
                    for rows, cols in shapes:
                        for dtype in (torch.float32, torch.bfloat16):
                            x, w = torch.randn(rows, cols, dtype=dtype), torch.randn(cols, dtype=dtype)
                            args = (x,) if op == "softmax" else (x, w, 1e-6)
                            stable_op, full_op = getattr(torch.ops.rwstable, op), getattr(torch.ops.opwrap, op)
                            first = (lambda v: v[0] if isinstance(v, tuple) else v)  # noqa: E731
                            torch.testing.assert_close(first(stable_op(*args)), first(full_op(*args)),
                                                       atol=2e-2, rtol=2e-2)
                            with torch.inference_mode():  # eager apart: its float temporaries evict
                                # the caches, which favoured whichever op ran after it
                                ms = median_ms([lambda: stable_op(*args), lambda: full_op(*args)], runs)
                                ms += median_ms([lambda: eager[op](x, w)], runs)
                            ratio = ms[1] / ms[0]
                            report.add("stable", f"row-wise {op} {rows}x{cols}", ratio, 0.9, dtype=str(dtype)[6:],
                                       threads=threads, ms=ms[0], full_ms=ms[1], eager_ms=ms[2])
                            print(f"  {op:<10}{f'{rows}x{cols}':>11}{str(dtype)[6:]:>10}{threads:>4}{ms[0]:>11.2f}"
                                  f"{ms[1]:>9.2f}{ms[2]:>10.2f}{ratio:>7.2f}x{ms[2] / ms[0]:>7.2f}x{_mark(ratio, 0.9)}")
        finally:
            torch.set_num_threads(old)


def build_support_include() -> Path:
    from opwrap_codegen.build import support_include_dir
    return support_include_dir()


# ---------------------------------------------------------------------------- codegen
SYNTHETIC = textwrap.dedent("""\
    - func: op{i}(Tensor self, Tensor other, float alpha=1.0) -> Tensor
      doc: Synthetic pointwise op {i}.
      dtypes: floating
      pointwise: self + alpha * tanh(other) * {i}
      derivatives:
        self: grad
        other: grad * alpha * {i}
    - func: red{i}(Tensor input, Tensor weight) -> (Tensor out, Tensor stat)
      dtypes: [float32, float64]
      kernels: {{CPU: red_cpu}}
      header: red.h
      shape:
        input: ["*B", D]
        weight: [D]
        out: input.shape
        stat: ["*B"]
      derivatives:
        input, weight: red_backward(grad_out, input, weight, grad_input_mask)
        output_differentiability: [true, false]
    """)


def codegen_times(report: Report, n: int):
    report.section(f"codegen: {n} synthetic declarations (half pointwise expressions, half shape-ruled ops)",
                   f"{'step':<58}{'seconds':>9}{'written':>9}")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "declarations").mkdir()
        (root / "kernels").mkdir()
        (root / "kernels" / "red.h").write_text("// kernels and helpers\n")
        (root / "pyproject.toml").write_text('[tool.codegen]\nnamespace = "synthetic"\nkernels = "kernels"\n')
        for f in range(n // 2 // 50):
            text = "".join(SYNTHETIC.format(i=f * 50 + i) for i in range(50))
            (root / "declarations" / f"ops{f:03}.yaml").write_text(text)
        env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
        results = {}
        for step in ("generate", "no-op regenerate"):
            t = time.perf_counter()
            r = subprocess.run([sys.executable, "-m", "opwrap_codegen.cli", "generate", "--timings"], cwd=root, env=env,
                               capture_output=True, text=True)
            secs = time.perf_counter() - t
            if r.returncode != 0:
                raise RuntimeError(r.stderr[-3000:])
            out = (r.stdout + r.stderr).splitlines()
            summary = [ln for ln in out if " written, " in ln][-1]
            written = int(summary.split(" written")[0].rsplit(" ", 1)[-1])
            phases = {ln.split()[0]: float(ln.split()[1]) / 1e3 for ln in out
                      if ln.startswith("  ") and ln.strip().endswith(" ms")}
            results[step] = (secs, written, phases)
            pipeline = sum(v for k, v in phases.items() if k != "write")
            print(f"  {step + ' (wall, process included)':<58}{secs:>9.2f}{written:>9}")
            print(f"    {'load, validate, transform, emit':<56}{pipeline:>9.2f}")
            print(f"    {'write':<56}{phases.get('write', 0.0):>9.2f}")
        # What creating that many files costs on this disk, without codegen.
        files = results["generate"][1]
        scratch = root / "scratch"
        scratch.mkdir()
        t = time.perf_counter()
        for i in range(files):
            (scratch / f"f{i}.cpp").write_bytes(b"//\n" * 100)
        create_s = time.perf_counter() - t
        print(f"    {f'baseline: creating {files} small files in Python':<56}{create_s:>9.2f}")
        gen_s, _, phases = results["generate"]
        pipeline = sum(v for k, v in phases.items() if k != "write")
        noop_s, noop_written, _ = results["no-op regenerate"]
        report.add("codegen", f"generate {n} declarations, load to emit", 2.0 / pipeline, 1.0, seconds=pipeline,
                   target_seconds=2.0)
        report.add("codegen", f"generate {n} declarations, wall", 2.0 / gen_s, None, seconds=gen_s,
                   write_seconds=phases.get("write"), files=files, file_creation_baseline_seconds=create_s)
        report.add("codegen", "no-op regenerate", 2.0 / noop_s, None, seconds=noop_s, files_written=noop_written)
        if noop_written:
            report.add("codegen", "no-op regenerate wrote files", 0.0, 1.0)
        print(f"  targets: {n} declarations under 2 s{'' if pipeline < 2.0 else ' (MISSED)'} "
              f"(wall {gen_s:.2f} s, of which {phases.get('write', 0.0):.2f} s writing {files} files); "
              f"no-op writes 0 files{'' if noop_written == 0 else ' (MISSED)'}")

def _where(row: dict) -> str:
    """A row's name with the dtype and threads it was measured at, where it has them."""
    at = ", ".join(filter(None, (row.get("dtype"), row.get("threads") and
                                 f"{row['threads']} thread{'s' if row['threads'] > 1 else ''}")))
    return f"{row['name']} ({at})" if at else row["name"]


# The CUDA architectures of the wheel-size comparison: one (what `make cuda-check` compiles)
# against four (the data-centre GPUs from Ampere to Hopper a wheel commonly covers).
WHEEL_ARCHS = ("9.0", "8.0;8.6;8.9;9.0")


def wheel_sizes(report: Report):
    """The bundled library's wheel with CUDA kernels for one architecture and for four: each
    architecture adds its device code (cubin) for every CUDA kernel to `_C.so`; PyPI caps a
    file at 400 MiB unless a project asks for more.  The wheels are built as a user builds
    them (`pip wheel . --no-build-isolation -C cuda=true`, TORCH_CUDA_ARCH_LIST), into
    build/wheel: the C++ units compile once, and nvcc's go through the compiler cache, so a
    second run compiles nothing."""
    from opwrap_codegen.build import cuda_env

    env, reason = cuda_env.detect()
    if env is None:
        print(f"\nwheels: skipped ({reason})")
        return
    report.section("wheels: the bundled library's wheel by CUDA architectures; ratio = its size / one architecture's",
                   f"{'TORCH_CUDA_ARCH_LIST':<24}{'wheel MiB':>11}{'_C.so MiB':>11}{'build s':>9}{'ratio':>8}")
    first = None
    for archs in WHEEL_ARCHS:
        with tempfile.TemporaryDirectory() as out:
            start = time.perf_counter()
            r = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-build-isolation", "--no-deps",
                                "-C", "cuda=true", "-w", out, str(ROOT)], capture_output=True, text=True,
                               env={**os.environ, "TORCH_CUDA_ARCH_LIST": archs})
            seconds = time.perf_counter() - start
            if r.returncode != 0:
                print(f"  {archs:<22}  the build failed:\n{textwrap.indent((r.stdout + r.stderr)[-3000:], '    ')}")
                return
            (wheel,) = Path(out).glob("opwrap-*.whl")
            with zipfile.ZipFile(wheel) as z:
                so = sum(i.file_size for i in z.infolist() if re.fullmatch(r"opwrap/_C\..*\.so", i.filename))
            size = wheel.stat().st_size
        first = first or size
        report.add("wheels", archs, size / first, wheel_mib=size / 2**20, so_mib=so / 2**20, seconds=seconds)
        print(f"  {archs:<22}{size / 2**20:>11.1f}{so / 2**20:>11.1f}{seconds:>9.1f}{size / first:>7.2f}x")


SECTIONS = ("calls", "throughput", "blas", "ops", "build", "foreign", "stable", "targets", "library", "codegen",
            "wheels")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run: fewer repetitions, smaller tensors, "
                        "no per-unit or full builds")
    parser.add_argument("--json", default=str(ROOT / "build" / "bench.json"), help="where to write the results")
    parser.add_argument("--only", choices=SECTIONS, action="append")
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    parser.add_argument("--op", action="append", metavar="NAME",
                        help="with the ops and targets sections: time only this op (as OPS names it: sincos, myadd.out); "
                        "repeatable")
    args = parser.parse_args(argv)
    only = set(args.only or SECTIONS)
    report = Report()
    fast = type(opwrap.ops.myadd).__name__ == "builtin_function_or_method"
    print(f"torch {torch.__version__}, CPU capability {torch.backends.cpu.get_cpu_capability()}, "
          f"{os.cpu_count()} CPUs; fast bindings: {'yes' if fast else 'no'}; freed memory reused "
          f"({'yes' if all(os.environ.get(k) == v for k, v in STEADY_MALLOC.items()) else 'no'})")
    if "calls" in only:
        call_overhead(report, *((2000, 3) if args.quick else (100000, 7)))
    if "throughput" in only:
        throughput(report, 1 << 20 if args.quick else 16 << 20, 3 if args.quick else 15)
    if "blas" in only:
        blas_ops(report, *((3, 4) if args.quick else (15, 1)))
    if "ops" in only:
        op_table(report, *((3, 16) if args.quick else (15, 1)), ops=set(args.op or ()))
    if "build" in only:
        build_times(report, full=not args.quick)
    if "foreign" in only and shutil.which("cargo"):
        foreign_kernels(report, *((2000, 3, 1 << 20, 3) if args.quick else (50000, 7, 16 << 20, 15)))
    if "stable" in only:
        stable_pointwise(report, (1 << 20,) if args.quick else (1 << 20, 16 << 20), 3 if args.quick else 15)
        stable_rowwise(report, ((256, 1024),) if args.quick else ((4096, 1024), (256, 65536)), 3 if args.quick else 15)
    if "targets" in only:
        two_targets(report, *((3, 16, 2000, 3) if args.quick else (15, 1, 100000, 7)), ops=set(args.op or ()))
    if "library" in only and not args.quick:
        library_build(report, 50, 10)
    if "codegen" in only:
        codegen_times(report, 1000)
    if "wheels" in only and not args.quick:
        wheel_sizes(report)
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(dict(torch=torch.__version__, cpu_capability=torch.backends.cpu.get_cpu_capability(),
                                               rows=report.rows), indent=1) + "\n")
    missed = report.missed()
    print(f"\nwrote {args.json}; targets missed: {len(missed)}" + "".join(f"\n  {_where(r)}" for r in missed))
    return 1 if args.check and missed else 0


if __name__ == "__main__":
    sys.exit(main())
