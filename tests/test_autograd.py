"""The autograd Functions generated from `derivatives:`: each ctx behaviour of
torch.autograd.Function, exercised through a bundled op.  (gradcheck and gradgradcheck of
every op run in test_declared_ops.py.)"""

import pytest
import torch

import opwrap  # noqa: F401
from conftest import run_script

ops = torch.ops.opwrap


def f64(*shape, grad=False):
    return torch.randn(*shape, dtype=torch.float64, requires_grad=grad)


def test_saved_outputs_feed_the_backward_and_its_double_backward():
    x = f64(5, grad=True)
    s, c = ops.sincos(x)
    (g,) = torch.autograd.grad((s * c).sum(), x, create_graph=True)
    torch.testing.assert_close(g, torch.cos(2 * x))
    (gg,) = torch.autograd.grad(g.sum(), x)
    torch.testing.assert_close(gg, -2 * torch.sin(2 * x))


@pytest.mark.parametrize("use", ["sin", "cos"])
def test_unmaterialized_grads_reach_the_formula_undefined(use):
    # sincos declares materialize_grads: false; the unused output's gradient is undefined,
    # and the formula skips it (an undefined tensor in arithmetic would throw).
    x = f64(6, grad=True)
    s, c = ops.sincos(x)
    (s if use == "sin" else c).sum().backward()
    torch.testing.assert_close(x.grad, x.detach().cos() if use == "sin" else -x.detach().sin())


def test_in_place_op_marks_its_argument_dirty():
    mat, vec = f64(3, 4, grad=True), f64(4, grad=True)
    base = f64(3, grad=True)
    self = base * 1  # a non-leaf, so in place is allowed
    out = ops.addmv_(self, mat, vec, beta=0.5, alpha=2.0)
    assert out is self and self.grad_fn is not None and "addmv_" in self.grad_fn.name()
    self.sum().backward()
    torch.testing.assert_close(base.grad, torch.full((3,), 0.5, dtype=torch.float64))
    torch.testing.assert_close(vec.grad, 2.0 * mat.detach().t().mv(torch.ones(3, dtype=torch.float64)))


def test_in_place_on_a_leaf_that_requires_grad_is_an_error():
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
        ops.addmv_(f64(3, grad=True), f64(3, 4), f64(4))


def test_in_place_bumps_the_version_so_stale_saved_tensors_are_caught():
    t = f64(3)
    v = t._version
    ops.addmv_(t, f64(3, 4), f64(4))
    assert t._version == v + 1
    w = f64(3, grad=True)
    saved = t.clone()
    y = ops.mul_constant(w, 2.0) * saved  # mul saves `saved` for backward
    ops.addmv_(saved, f64(3, 4), f64(4))
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


def test_non_differentiable_outputs_never_require_grad():
    x, w = f64(2, 4, grad=True), f64(4, grad=True)
    out, rstd = ops.rms_norm(x, w)
    assert out.requires_grad and not rstd.requires_grad and rstd.grad_fn is None
    values = f64(10, grad=True)
    indices, counts = ops.bucketize_count(values, torch.tensor([-1.0, 0.0, 1.0], dtype=torch.float64))
    assert indices.dtype == counts.dtype == torch.int64
    assert not indices.requires_grad and not counts.requires_grad


def test_once_differentiable_op_refuses_double_backward_clearly():
    x, w = f64(2, 4, grad=True), f64(4, grad=True)
    out, _ = ops.rms_norm(x, w)
    gx, gw = torch.autograd.grad(out.sum(), (x, w), create_graph=True)
    with pytest.raises(RuntimeError, match="differentiate twice the backward of opwrap::rms_norm, which is declared "
                                           "once_differentiable"):
        (gx.sum() + gw.sum()).backward()
    # A single backward is unaffected.
    out, _ = ops.rms_norm(x, w)
    out.sum().backward()
    assert x.grad is not None and w.grad is not None


def test_only_the_needed_gradients_are_computed():
    x, W = f64(2, 3), f64(4, 3, grad=True)
    y = ops.linear(x, W, None)  # bias absent: no edge for it
    y.sum().backward()
    assert x.grad is None and W.grad is not None
    torch.testing.assert_close(W.grad, torch.ones(2, 4, dtype=torch.float64).t().mm(x))


def test_reduced_precision_backward_accumulates_in_float():
    x = torch.randn(4, 64, dtype=torch.float64)
    w = torch.randn(64, dtype=torch.float64)
    xb, wb = x.bfloat16().requires_grad_(), w.bfloat16().requires_grad_()
    ops.rms_norm(xb, wb)[0].sum().backward()
    xr, wr = x.requires_grad_(), w.requires_grad_()
    (xr * torch.rsqrt(xr.pow(2).mean(-1, keepdim=True) + 1e-6) * wr).sum().backward()
    assert xb.grad.dtype == torch.bfloat16
    torch.testing.assert_close(xb.grad.double(), xr.grad, atol=5e-2, rtol=2e-2)
    torch.testing.assert_close(wb.grad.double(), wr.grad, atol=5e-2, rtol=2e-2)


# ------------------------------------------------------------------ a library made with `codegen init`
# Tensor[] inputs with formulas (a helper fed torchgen's to_args_sizes_symint, an inline
# vector, a multi-input key), a list op and a Tensor?[] op without formulas, an out=
# overload, a vLLM-style op writing a buffer it does not return, and an in-place op writing
# a second (non-differentiable) argument: declared as the README says, built at -O0 in
# conftest's `sharedlib` (namespace `sharedlib`) with the ops of other test files.

GRADLIB_DECLS = """\
- func: cat_rows(Tensor[] tensors) -> Tensor
  dtypes: [float32, float64]
  kernels: {CPU: cat_rows_cpu}
  derivatives:
    tensors: cat_rows_backward(grad, to_args_sizes_symint(tensors))

- func: weighted_stack(Tensor w, Tensor[] xs, float alpha) -> Tensor
  dtypes: [float32, float64]
  kernels: {CPU: weighted_stack_cpu}
  header: lists.h
  derivatives:
    w: (grad * at::stack(xs) * alpha).sum(0)
    xs: (grad * w * alpha).unbind(0)

- func: stack_scale(Tensor[] xs, Tensor s) -> Tensor
  dtypes: [float32, float64]
  kernels: {CPU: stack_scale_cpu}
  header: lists.h
  derivatives:
    xs, s: stack_scale_backward(grad, xs, s, grad_input_mask)

- func: list_sum(Tensor[] xs) -> Tensor
  dtypes: [float32, float64]
  kernels: {CPU: list_sum_cpu}
  header: lists.h

- func: first_plus(Tensor x, Tensor?[] ys) -> Tensor
  dtypes: [float32, float64]
  kernels: {CPU: first_plus_cpu}
  header: lists.h
  derivatives:
    x: grad
    ys: non_differentiable

- func: first_plus_nd(Tensor x, Tensor?[] ys) -> Tensor
  dtypes: [float32, float64]
  kernels: {CPU: first_plus_cpu}
  header: lists.h

- func: plus_present(Tensor x, Tensor?[] ys) -> Tensor
  dtypes: [float32, float64]
  kernels: {CPU: first_plus_cpu}
  header: lists.h
  derivatives:
    x: grad
    ys: present_grads(grad, ys)

- func: scale.out(Tensor self, float factor, *, Tensor(a!) out) -> Tensor(a!)
  dtypes: [float32, float64]
  kernels: {CPU: scale_out_cpu}
  header: lists.h

- func: silu_and_mul(Tensor(a!) result, Tensor input) -> ()
  dtypes: [float32, float64]
  kernels: {CPU: silu_and_mul_cpu}
  header: lists.h

- func: list_total(Tensor[] xs) -> Tensor
  dtypes: [float32, float64]
  kernels: {CPU: list_total_cpu}
  header: lists.h
  derivatives:
    xs: list_total_backward(grad, to_args_sizes(xs), to_args_scalartypes(xs))

- func: foreach_scale_(Tensor(a!)[] self, float f) -> ()
  dtypes: [float32, float64]
  kernels: {CPU: foreach_scale_cpu}
  header: lists.h

- func: copy_maybe(Tensor x, Tensor(a!)? buf) -> ()
  dtypes: [float32, float64]
  kernels: {CPU: copy_maybe_cpu}
  header: lists.h

- func: scale_named(Tensor x, int[1]? dims, float[]? fs, str? mode, str name, bool[2] flags, Device? device, Layout layout, MemoryFormat? fmt, SymInt[] sizes, SymInt[]? osizes, str[] tags, float factor) -> Tensor
  dtypes: [float32, float64]
  kernels: {CPU: scale_named_cpu}
  header: lists.h
  like: x
  derivatives:
    x: grad * named_factor(factor, dims, fs, mode, name, flags, device, layout, fmt, sizes, osizes, tags)

- func: acc_count_(Tensor(a!) self, Tensor(b!) count, Tensor x) -> Tensor(a!)
  dtypes: [float32, float64]
  kernels: {CPU: acc_count_cpu}
  header: lists.h
  derivatives:
    self: grad
    x: grad
    count: non_differentiable
"""

GRADLIB_CAT_ROWS = """\
#pragma once
#include <ATen/ATen.h>
#include <vector>
namespace sharedlib::kernels {
template <typename scalar_t> at::Tensor cat_rows_cpu(at::TensorList tensors) { return at::cat(tensors, 0); }

// The formula's helper, as torchgen's cat_tensors_backward: the rows of grad each tensor gave.
inline std::vector<at::Tensor> cat_rows_backward(const at::Tensor& grad,
                                                 const std::vector<std::vector<c10::SymInt>>& sizes) {
  std::vector<at::Tensor> out;
  c10::SymInt start = 0;
  for (const auto& s : sizes) {
    out.push_back(grad.narrow_symint(0, start, s[0]));
    start = start + s[0];
  }
  return out;
}
}  // namespace sharedlib::kernels
"""

GRADLIB_LISTS = """\
#pragma once
#include <ATen/ATen.h>
#include <array>
#include <string>
#include <tuple>
#include <vector>
namespace sharedlib::kernels {
template <typename scalar_t>
void scale_named_cpu(const at::Tensor& x, at::OptionalIntArrayRef, std::optional<at::ArrayRef<double>>,
                     std::optional<c10::string_view>, c10::string_view, std::array<bool, 2>, std::optional<at::Device>,
                     at::Layout, std::optional<at::MemoryFormat>, at::IntArrayRef, at::OptionalIntArrayRef,
                     at::ArrayRef<std::string>, double factor, at::Tensor& result) {
  result.copy_(x * factor);
}

// Every kind of value a formula may name, as the node saved it: a number made of them all.
inline double named_factor(double factor, at::OptionalIntArrayRef dims, std::optional<at::ArrayRef<double>> fs,
                           const std::optional<std::string>& mode, const std::string& name, std::array<bool, 2> flags,
                           std::optional<at::Device> device, at::Layout layout, std::optional<at::MemoryFormat> fmt,
                           c10::SymIntArrayRef sizes, at::OptionalSymIntArrayRef osizes,
                           const std::vector<std::string>& tags) {
  double f = factor + (mode ? static_cast<double>(mode->size()) : 0) + static_cast<double>(name.size())
      + flags[0] + 2 * flags[1] + (device ? 10 : 0) + (layout == at::kStrided ? 20 : 0) + (fmt ? 40 : 0);
  if (dims) for (int64_t d : *dims) f += 100 * d;
  if (fs) for (double v : *fs) f += v;
  for (const c10::SymInt& s : sizes) f += 1000 * s.guard_int(__FILE__, __LINE__);
  if (osizes) for (const c10::SymInt& s : *osizes) f += 10000 * s.guard_int(__FILE__, __LINE__);
  for (const std::string& t : tags) f += 100000 * static_cast<double>(t.size());
  return f;
}

template <typename scalar_t> at::Tensor weighted_stack_cpu(const at::Tensor& w, at::TensorList xs, double alpha) {
  return at::stack(xs, 0) * w * alpha;
}
template <typename scalar_t> at::Tensor stack_scale_cpu(at::TensorList xs, const at::Tensor& s) {
  return at::stack(xs, 0) * s;
}
inline std::tuple<std::vector<at::Tensor>, at::Tensor> stack_scale_backward(
    const at::Tensor& grad, at::TensorList xs, const at::Tensor& s, std::array<bool, 2> mask) {
  std::vector<at::Tensor> gx;
  if (mask[0]) gx = (grad * s).unbind(0);
  at::Tensor gs;
  if (mask[1]) gs = (grad * at::stack(xs, 0)).sum();
  return {gx, gs};
}
template <typename scalar_t> at::Tensor list_sum_cpu(at::TensorList xs) {
  at::Tensor out = xs[0].clone();
  for (size_t i = 1; i < xs.size(); ++i) out.add_(xs[i]);
  return out;
}
template <typename scalar_t>
at::Tensor first_plus_cpu(const at::Tensor& x, const c10::List<std::optional<at::Tensor>>& ys) {
  at::Tensor out = x.clone();
  for (size_t i = 0; i < ys.size(); ++i) {
    const std::optional<at::Tensor> y = ys.get(i);
    if (y.has_value()) out.add_(*y);
  }
  return out;
}
// plus_present's formula for its Tensor?[]: grad for each given element, undefined for None.
inline std::vector<at::Tensor> present_grads(const at::Tensor& grad, const std::vector<at::Tensor>& ys) {
  std::vector<at::Tensor> out;
  for (const at::Tensor& y : ys) out.push_back(y.defined() ? grad : at::Tensor());
  return out;
}
template <typename scalar_t> void scale_out_cpu(const at::Tensor& self, double factor, at::Tensor& out) {
  out.copy_(self * factor);
}
template <typename scalar_t> void silu_and_mul_cpu(at::Tensor& result, const at::Tensor& input) {
  const int64_t d = input.size(-1) / 2;
  result.copy_(at::silu(input.narrow(-1, 0, d)) * input.narrow(-1, d, d));
}
template <typename scalar_t> at::Tensor list_total_cpu(at::TensorList xs) {
  at::Tensor out = at::zeros({}, xs[0].options());
  for (const at::Tensor& x : xs) out.add_(x.sum());
  return out;
}
inline std::vector<at::Tensor> list_total_backward(const at::Tensor& grad, const std::vector<std::vector<int64_t>>& sizes,
                                                   const std::vector<at::ScalarType>& types) {
  std::vector<at::Tensor> out;
  for (size_t i = 0; i < sizes.size(); ++i) out.push_back(grad.expand(sizes[i]).to(types[i]));
  return out;
}
template <typename scalar_t> void foreach_scale_cpu(at::TensorList self, double f) {
  for (const at::Tensor& t : self) t.mul_(f);
}
template <typename scalar_t> void copy_maybe_cpu(const at::Tensor& x, const std::optional<at::Tensor>& buf) {
  if (buf.has_value()) buf->copy_(x);
}
template <typename scalar_t> void acc_count_cpu(at::Tensor& self, at::Tensor& count, const at::Tensor& x) {
  self.add_(x);
  count.add_(1);
}
}  // namespace sharedlib::kernels
"""


def add_to_sharedlib(lib):
    """The declarations and kernels above, into conftest's `sharedlib` (made with `codegen init`)."""
    (lib / "declarations" / "lists.yaml").write_text(GRADLIB_DECLS)
    (lib / "kernels" / "cat_rows.h").write_text(GRADLIB_CAT_ROWS)
    (lib / "kernels" / "lists.h").write_text(GRADLIB_LISTS)


@pytest.fixture(scope="module")
def gradlib(sharedlib):
    """The library holding the ops above (conftest's `sharedlib`, built once per run, at -O0);
    returns its directory, or fails with what the build printed."""
    made = sharedlib.record
    assert made["init"][0] == 0, made["init"][1]
    assert made["build"][0] == 0, made["build"][1]
    return sharedlib.path


def run_in(lib, code: str) -> str:
    """Run `code` (after `import torch, sharedlib` and a few helpers) in this process
    (conftest.run_script), and return what it printed.  The library is the one
    test_pointwise.py and test_rowwise.py import here too."""
    prelude = ("import torch, sharedlib\n"
               "from torch.autograd import gradcheck, gradgradcheck\n"
               "ops = torch.ops.sharedlib\n"
               "def f64(*shape, grad=True):\n"
               "    return torch.randn(*shape, dtype=torch.float64, requires_grad=grad)\n"
               "def raises(f, text):\n"
               "    try:\n"
               "        f()\n"
               "    except RuntimeError as e:\n"
               "        assert text in str(e), str(e)\n"
               "        return\n"
               "    raise AssertionError('no RuntimeError: ' + text)\n")
    return run_script(lib, prelude + code)


@pytest.mark.slow(90)
@pytest.mark.xdist_group("sharedlib")
def test_tensor_list_derivatives_pass_gradcheck_and_gradgradcheck(gradlib):
    run_in(gradlib, """
a, b, c = f64(2, 3), f64(1, 3), f64(4, 3)
# Only the sizes and dtypes are saved (torchgen's to_args_sizes, to_args_scalartypes).
total = lambda *t: ops.list_total(list(t))
assert gradcheck(total, (a, b, c)) and gradgradcheck(total, (a, b, c))
cat = lambda *t: ops.cat_rows(list(t))
assert gradcheck(cat, (a, b, c)) and gradgradcheck(cat, (a, b, c))
# An element before, a float after the list: the flattened gradients map back to each.
w, xs = f64(3), [f64(3) for _ in range(4)]
ws = lambda w, *x: ops.weighted_stack(w, list(x), 0.5)
assert gradcheck(ws, (w, *xs)) and gradgradcheck(ws, (w, *xs))
# One key for the list and a tensor (grad_input_mask, a tuple of a vector and a tensor).
s = f64(())
ss = lambda s, *x: ops.stack_scale(list(x), s)
assert gradcheck(ss, (s, *xs)) and gradgradcheck(ss, (s, *xs))
""")


@pytest.mark.slow(90)
@pytest.mark.xdist_group("sharedlib")
def test_tensor_list_gradients_only_for_elements_that_need_them(gradlib):
    run_in(gradlib, """
a, b = f64(2, 3, grad=False), f64(1, 3)
ops.cat_rows([a, b]).sum().backward()
assert a.grad is None and torch.equal(b.grad, torch.ones(1, 3, dtype=torch.float64))
# The list only: the Function saved nothing of w's but the sizes it needs.
w, xs = f64(3, grad=False), [f64(3, grad=False), f64(3)]
ops.weighted_stack(w, xs, 2.0).sum().backward()
assert xs[0].grad is None and torch.allclose(xs[1].grad, 2 * w)
# No tensor requires grad: no graph at all.
assert ops.cat_rows([a, a]).grad_fn is None
""")


@pytest.mark.slow(90)
@pytest.mark.xdist_group("sharedlib")
def test_list_ops_without_formulas_raise_when_backward_reaches_them(gradlib):
    run_in(gradlib, """
xs = [f64(3, grad=False), f64(3)]
out = ops.list_sum(xs)
assert out.requires_grad
raises(lambda: out.sum().backward(), "derivative for sharedlib::list_sum is not implemented")
# Tensor?[]: the elements are seen (torch's fallback would detach them silently).
x, y = f64(3, grad=False), f64(3)
out = ops.first_plus_nd(x, [None, y])
assert out.requires_grad
raises(lambda: out.sum().backward(), "derivative for sharedlib::first_plus_nd is not implemented")
# A Tensor?[] with a formula: each given element gets its gradient, absent ones none.
x, a, b = f64(3), f64(3), f64(3)
torch.autograd.gradcheck(lambda x, a, b: ops.plus_present(x, [a, None, b]), (x, a, b))
torch.autograd.gradgradcheck(lambda x, a, b: ops.plus_present(x, [a, None, b]), (x, a, b))
c = f64(3, grad=False)
ops.plus_present(x, [None, c, a]).sum().backward()
assert torch.equal(a.grad, torch.ones(3, dtype=torch.float64)) and c.grad is None
# Declared non_differentiable, the Tensor?[] has no gradient; x has its formula's.
x = f64(3)
ops.first_plus(x, [y, None]).sum().backward()
assert torch.equal(x.grad, torch.ones(3, dtype=torch.float64)) and y.grad is None
""")


@pytest.mark.slow(90)
@pytest.mark.xdist_group("sharedlib")
def test_out_overload_refuses_inputs_that_require_grad(gradlib):
    run_in(gradlib, """
out = torch.empty(3, dtype=torch.float64)
msg = "sharedlib::scale(): functions with out=... arguments don't support automatic differentiation, but one of the arguments requires grad."
raises(lambda: ops.scale.out(f64(3), 2.0, out=out), msg)
assert not out.requires_grad and out.grad_fn is None
# An out tensor that requires grad is refused too, as aten's.
raises(lambda: ops.scale.out(f64(3, grad=False), 2.0, out=f64(3)), "functions with out=... arguments")
# Without grad: below autograd, and the out tensor's version moves.
x, v = f64(3, grad=False), out._version
assert ops.scale.out(x, 2.0, out=out) is out and out._version == v + 1
assert torch.equal(out, 2 * x)
with torch.no_grad():
    ops.scale.out(f64(3), 2.0, out=out)
assert not out.requires_grad
""")


@pytest.mark.slow(90)
@pytest.mark.xdist_group("sharedlib")
def test_op_writing_a_buffer_it_does_not_return(gradlib):
    run_in(gradlib, """
inp = f64(2, 6)
result = torch.empty(2, 3, dtype=torch.float64)
v = result._version
assert ops.silu_and_mul(result, inp) is None
assert result._version == v + 1
torch.testing.assert_close(result, torch.nn.functional.silu(inp[:, :3]) * inp[:, 3:])
# The buffer now depends on an input that requires grad: backward through it raises.
assert result.requires_grad and result.grad_fn is not None
raises(lambda: result.sum().backward(), "derivative for sharedlib::silu_and_mul is not implemented")
# A leaf that requires grad cannot be written, as for any in-place op.
raises(lambda: ops.silu_and_mul(f64(2, 3), inp), "a leaf Variable that requires grad")
# Nothing requires grad, or no grad mode: no graph, but the version still moves.
buf = torch.empty(2, 3, dtype=torch.float64)
ops.silu_and_mul(buf, inp.detach())
with torch.no_grad():
    ops.silu_and_mul(buf, inp)
assert buf._version == 2 and not buf.requires_grad
# A tensor saved for backward, then overwritten by the op, is caught.
w, saved = f64(2, 3), torch.zeros(2, 3, dtype=torch.float64)
y = w * saved
ops.silu_and_mul(saved, inp.detach())
raises(lambda: y.sum().backward(), "modified by an inplace operation")
""")


@pytest.mark.slow(90)
@pytest.mark.xdist_group("sharedlib")
def test_ops_writing_a_list_or_an_optional_tensor(gradlib):
    run_in(gradlib, """
# Tensor(a!)[]: every element's version moves; as for any op without formulas, every written
# tensor (as every result) may depend on every input, so backward through any raises.
x = f64(3)
ts = [torch.ones(3, dtype=torch.float64), x * 1]
versions = [t._version for t in ts]
assert ops.foreach_scale_(ts, 2.0) is None
assert [t._version for t in ts] == [v + 1 for v in versions]
assert torch.equal(ts[0], torch.full((3,), 2.0, dtype=torch.float64))
assert ts[0].grad_fn is not None and ts[1].grad_fn is not None
raises(lambda: ts[1].sum().backward(), "derivative for sharedlib::foreach_scale_ is not implemented")
raises(lambda: ts[0].sum().backward(), "derivative for sharedlib::foreach_scale_ is not implemented")
ts = [torch.ones(3, dtype=torch.float64)]
ops.foreach_scale_(ts, 2.0)
assert ts[0].grad_fn is None and ts[0]._version == 1
# Tensor(a!)?: written when given, nothing when absent.
buf = torch.zeros(3, dtype=torch.float64)
ops.copy_maybe(x, buf)
assert buf._version == 1 and torch.equal(buf, x.detach())
raises(lambda: buf.sum().backward(), "derivative for sharedlib::copy_maybe is not implemented")
assert ops.copy_maybe(x, None) is None
""")


@pytest.mark.slow(90)
@pytest.mark.xdist_group("sharedlib")
def test_in_place_op_writing_a_second_non_differentiable_argument(gradlib):
    run_in(gradlib, """
base, x = f64(3), f64(3)
self = base * 1
count = torch.zeros(3, dtype=torch.float64)
out = ops.acc_count_(self, count, x)
assert out is self and "acc_count_" in self.grad_fn.name()
assert torch.equal(count, torch.ones(3, dtype=torch.float64)) and count._version == 1 and not count.requires_grad
self.sum().backward()
assert torch.equal(base.grad, torch.ones(3, dtype=torch.float64)) and torch.equal(x.grad, torch.ones(3, dtype=torch.float64))
""")


@pytest.mark.parametrize("decl, expected", [
    ("- func: f(Tensor x, Tensor[] ys) -> Tensor\n  dtypes: [float32]\n  like: x\n"
     "  derivatives:\n    x: grad\n",
     "declarations/ops.yaml:5:5: error: no derivative formula for Tensor argument 'ys'"),
    ("- func: f(Tensor x, Tensor[] ys) -> Tensor\n  dtypes: [float32]\n  like: x\n"
     "  derivatives:\n    x: grad.expand_symint(to_args_sizes_symint(x)[0])\n    ys: grad.unbind(0)\n",
     "declarations/ops.yaml:5:27: error: to_args_sizes_symint() takes a Tensor[] argument; 'x' is not one"),
    ("- func: f(Tensor x, Tensor[] ys) -> Tensor\n  dtypes: [float32]\n  like: x\n"
     "  derivatives:\n    x: grad\n    ys: grad.expand(ys.sizes())\n",
     "declarations/ops.yaml:6:21: error: 'ys' is a Tensor[]: its elements' sizes are to_args_sizes(ys)"),
    ("- func: f_(Tensor(a!) self, Tensor(b!) count) -> Tensor(a!)\n  dtypes: [float32]\n"
     "  derivatives:\n    self: grad\n    count: grad\n",
     "declarations/ops.yaml:5:12: error: 'count' is written by f_ but not returned"),
    ("- func: f.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)\n  dtypes: [float32]\n"
     "  derivatives:\n    self: grad\n",
     "declarations/ops.yaml:4:5: error: f.out is an out= overload (out); as aten's, it is not differentiable"),
    ("- func: f_(Tensor(a!)[] self, Tensor[] other) -> ()\n  dtypes: [float32]\n"
     "  derivatives:\n    self: grad\n    other: grad\n",
     "declarations/ops.yaml:4:5: error: 'Tensor(a!)[] self' is written by f_: derivatives of ops that write an "
     "optional tensor or a list are not supported (as torch.library's register_autograd, which takes functional "
     "ops only)"),
])
def test_list_and_written_argument_declaration_errors(project, decl, expected):
    from conftest import run_codegen
    (project / "declarations" / "ops.yaml").write_text(decl)
    for name in ("f", "f_"):
        (project / "kernels" / f"{name}.h").write_text("#pragma once\n")
    r = run_codegen("generate", cwd=project)
    assert r.returncode == 2, r.stderr
    assert expected in r.stderr
    assert "Traceback" not in r.stderr


@pytest.mark.xdist_group("sharedlib")
def test_formulas_name_every_kind_of_argument(gradlib):
    """A formula may name an argument of any type; the node saves it as torchgen does
    (int[]? and SymInt[]? as c10::OptionalArray, str as std::string, lists as vectors), so the
    values outlive the call that passed them."""
    run_in(gradlib, """
import gc
for given in (True, False):
    x = f64(3)
    args = ([1, 2] if given else None, [0.5, 0.25] if given else None, "ab" if given else None, "name",
            [True, given], "cpu" if given else None, torch.strided, torch.contiguous_format if given else None,
            [3, 4], [5] if given else None, ["xyz", "q"], 2.0)
    y = ops.scale_named(x, *args)
    del args
    gc.collect()
    y.sum().backward()
    want = (2.0 + 2 + 4 + 1 + 2 + 10 + 20 + 40 + 300 + 0.75 + 7000 + 50000 + 400000 if given
            else 2.0 + 4 + 1 + 20 + 7000 + 400000)
    assert torch.allclose(x.grad, torch.full((3,), want, dtype=torch.float64)), (given, x.grad, want)
""")
