"""The typed C++ layer (codegen/api/types.py, codegen/api/kernel.py): every schema type
reaches the kernel with its documented C++ type, every return type comes back from it, and
any schema name works.  One op per concern, in a library made with `codegen init`: generated
here on a library of its own, compiled (CPU only, -O0) in conftest's `sharedlib` with the ops
of other test files, and called in the test worker (conftest.run_script)."""

import json
import os
import subprocess
import textwrap

import pytest

from opwrap_codegen.api import types
from opwrap_codegen.core.names import Scope
from opwrap_codegen.core.literals import cpp_string
from opwrap_codegen.lang.schema import FunctionSchema
from conftest import ROOT, run_codegen, run_script

# Every argument type the issue lists, and every return type.
ARGUMENT_TYPES = ["int?", "float?", "bool?", "Scalar?", "str", "str?", "ScalarType?", "Device", "Layout", "MemoryFormat",
                  "int[]?", "SymInt", "SymInt[]", "float[]", "bool[]", "Tensor[]", "Tensor?[]", "Generator?"]
RETURN_TYPES = ["int", "float", "bool", "SymInt", "Scalar", "ScalarType", "Tensor[]", "str", "Device", "int[]", "SymInt[]"]


def test_every_listed_type_has_a_row():
    for t in ARGUMENT_TYPES:
        s = FunctionSchema.parse(f"f({t} x) -> ()")
        row = types.argument_row(s.arguments[0])
        assert row.dispatcher and row.kernel_type, t
    for t in RETURN_TYPES:
        s = FunctionSchema.parse(f"f() -> {t}")
        assert types.returned_type(s.returns[0]) and types.kernel_returned_type(s.returns[0]), t
    # The kernel sees SymInts as concrete integers; the wrapper converts.
    s = FunctionSchema.parse("f(SymInt a, SymInt[] b, SymInt? c, SymInt[]? d) -> SymInt")
    assert [types.kernel_type(a) for a in s.arguments] == ["int64_t", "at::IntArrayRef", "std::optional<int64_t>",
                                                           "at::OptionalIntArrayRef"]
    assert types.kernel_returned_type(s.returns[0]) == "int64_t"
    with pytest.raises(types.UnsupportedType) as e:
        types.argument_row(FunctionSchema.parse("f(Scalar[]? x) -> ()").arguments[0])
    assert "Scalar[]" in e.value.reason


def test_a_type_row_names_the_columns_it_is_missing():
    """Every column a schema type needs is a field of its one row: a new type that leaves
    some out is refused with their names, and every row of the table has them all (None is
    a value: the type has none, NONE_MEANS says what that means)."""
    assert all(types.missing_columns(r) == [] for r in types.TABLE.values())
    assert set(types.NONE_MEANS) == set(types.REQUIRED_COLUMNS)
    quux = types.TypeRow("Quux", "quux_t", returned="quux_t", python="Quux", fast=None, saveable="quux_t")
    assert types.missing_columns(quux) == ["fake", "abi", "abi_return", "sample"]
    assert types.missing_columns(types.TypeRow("Quux", "quux_t", python="Quux", fast=None, fake=None, abi=None,
                                               abi_return=None, saveable=None, sample="quux")) == [
        "sample (not one of tensor, tensors, int, ints, float, bool, str, dtype, generator: 'quux')"]
    with pytest.raises(TypeError, match="Quux: fake, abi, abi_return, sample"):
        types._rows(quux)


def test_cpp_types_are_values():
    """A C++ type is transformed, not cut or glued as text; every spelling of the table reads
    back as itself."""
    CType = types.CType
    for r in types.TABLE.values():
        for text in (r.dispatcher, r.kernel_type, r.returned, r.kernel_return_type, r.saveable):
            if text:
                assert str(CType.parse(text)) == text, text
    assert str(CType.parse("int64_t*").pointee()) == "int64_t"
    assert str(CType("int64_t").pointer()) == "int64_t*"
    assert str(types.TENSOR.const_ref()) == "const at::Tensor&" and str(types.TENSOR.ref()) == "at::Tensor&"
    assert str(CType.parse("const at::Tensor&").optional()) == "std::optional<at::Tensor>"
    assert str(types.TENSOR.optional().const()) == "const std::optional<at::Tensor>"
    assert str(CType.parse("const opwrap_tensor*")) == "const opwrap_tensor*"
    b = types.Binding("self_", CType.parse("const at::Tensor&"), "self")
    assert b.decl() == "const at::Tensor& self_"


def test_docs_type_table_is_the_code():
    """docs/kernels.md's type table is opwrap_codegen.api.types.markdown_table(), written by the
    docs build's hook where the page has its marker."""
    from docs_pages import rendered, source
    assert "\n<!-- table: types -->\n" in source("kernels.md"), "docs/kernels.md lost its type table marker"
    assert types.markdown_table().rstrip("\n") in rendered("kernels.md")


def test_scope_and_string_literals():
    scope = Scope(("kOp",))
    assert [scope.name(n) for n in ("kOp", "default", "dtype", "int", "x")] == ["kOp_", "default_", "dtype", "int_", "x"]
    assert scope.fresh("dtype") == "dtype_" and scope.fresh("x_c") == "x_c"
    assert cpp_string('a "b" \\ Tensor? ??=') == '"a \\"b\\" \\\\ Tensor? ?\\?="'


# ------------------------------------------------------------------ the library

DECLARATIONS = """\
- func: every_arg(Tensor self, int? i, float? f, bool? b, Scalar? s, str name, str? tag, ScalarType? st, Device dev, Layout lay, MemoryFormat mf, int[]? dims, SymInt n, SymInt[] sizes, float[] fs, bool[] bs, bool[2] pair, SymInt? sn, SymInt[]? sl, float[]? fl, Scalar sc) -> (int, float, bool, SymInt, Scalar, ScalarType, str, Device, Layout, MemoryFormat, int[], SymInt[], float[])
  dtypes: [float32]
  kernels: {CPU: every_arg}
- func: noise(Tensor self, float scale, *, Generator? generator=None) -> Tensor
  dtypes: [float32, float64]
  kernels: {CPU: noise}
  like: self
- func: scaled_sum(Tensor[] xs, Tensor?[] ys, int k) -> (Tensor[] parts, Tensor total, int count)
  dtypes: [float32]
  kernels: {CPU: scaled_sum}
- func: first_of(Tensor? a, Tensor? b) -> Tensor
  dtypes: [float32, float64]
  kernels: {CPU: first_of}
- func: count_positive(Tensor self, bool wrong=False) -> Tensor
  dtypes: [float32]
  kernels: {CPU: count_positive}
  dtype: {result: int64}
- func: assert_positive(Tensor self) -> ()
  dtypes: [float32]
  kernels: {CPU: assert_positive}
- func: clamp_max_(Tensor(a!) self, float hi) -> ()
  dtypes: [float32]
  kernels: {CPU: clamp_max}
- func: delete(Tensor dtype, Tensor default, Tensor? options, int kOp, float m, int new, SymInt int, Tensor result) -> Tensor out
  dtypes: [float64]
  kernels: {CPU: delete_kernel}
  header: names.h
  shape: {dtype: [N], default: [N], result: [N], out: [N, int]}
  derivatives:
    dtype: grad.sum(1) * m
    default: grad.sum(1) + default * 0
    result: grad.sum(1) * (new - new + 1)
    options: non_differentiable
- func: scalars(Tensor self, Scalar[] values, SymBool flag) -> (float, SymBool)
  dtypes: [float32]
  kernels: {CPU: scalars}
- func: new.int(Tensor self, int int, str default="abc") -> Tensor
  dtypes: [float32]
  kernels: {CPU: new_kernel}
  like: self
"""

KERNELS = {
    "every_arg.h": """
        template <typename scalar_t>
        std::tuple<int64_t, double, bool, int64_t, at::Scalar, at::ScalarType, std::string, at::Device, at::Layout,
                   at::MemoryFormat, std::vector<int64_t>, std::vector<int64_t>, std::vector<double>>
        every_arg(const at::Tensor& self, std::optional<int64_t> i, std::optional<double> f, std::optional<bool> b,
                  const std::optional<at::Scalar>& s, c10::string_view name, std::optional<c10::string_view> tag,
                  std::optional<at::ScalarType> st, at::Device dev, at::Layout lay, at::MemoryFormat mf,
                  at::OptionalIntArrayRef dims, int64_t n, at::IntArrayRef sizes, at::ArrayRef<double> fs,
                  const c10::List<bool>& bs, std::array<bool, 2> pair, std::optional<int64_t> sn,
                  at::OptionalIntArrayRef sl, std::optional<at::ArrayRef<double>> fl, const at::Scalar& sc) {
          int64_t total = i.value_or(-1) + n + (dims.has_value() ? static_cast<int64_t>(dims->size()) : 0);
          for (int64_t v : sizes) total += v;
          double fsum = f.value_or(0.5);
          for (double v : fs) fsum += v;
          const bool all = b.value_or(true) && bs.get(0) && pair[1];
          const std::string text = std::string(name) + "/" + (tag.has_value() ? std::string(*tag) : std::string("none"));
          return {total, fsum, all, sn.value_or(7) + self.numel(), s.has_value() ? *s : sc,
                  st.value_or(self.scalar_type()), text, dev, lay, mf, sizes.vec(),
                  sl.has_value() ? sl->vec() : std::vector<int64_t>{}, fl.has_value() ? fl->vec() : fs.vec()};
        }
    """,
    "noise.h": """
        #include <ATen/CPUGeneratorImpl.h>
        #include <ATen/core/DistributionsHelper.h>
        #include <mutex>
        template <typename scalar_t>
        void noise(const at::Tensor& self, double scale, std::optional<at::Generator> generator, at::Tensor& result) {
          auto* gen = at::get_generator_or_default<at::CPUGeneratorImpl>(generator, at::detail::getDefaultCPUGenerator());
          std::lock_guard<std::mutex> lock(gen->mutex_);
          at::uniform_real_distribution<double> uniform(0.0, 1.0);
          const scalar_t* in = self.const_data_ptr<scalar_t>();
          scalar_t* out = result.mutable_data_ptr<scalar_t>();
          for (int64_t k = 0; k < self.numel(); ++k) out[k] = in[k] + static_cast<scalar_t>(scale * uniform(gen));
        }
    """,
    "scaled_sum.h": """
        template <typename scalar_t>
        std::tuple<std::vector<at::Tensor>, at::Tensor, int64_t> scaled_sum(
            at::TensorList xs, const c10::List<std::optional<at::Tensor>>& ys, int64_t k) {
          std::vector<at::Tensor> parts;
          at::Tensor total;
          for (size_t j = 0; j < xs.size(); ++j) {
            at::Tensor p = xs[j] * k;  // tensor operators: the generated unit includes ATen/TensorOperators.h
            const std::optional<at::Tensor> y = j < ys.size() ? ys.get(j) : std::nullopt;
            if (y.has_value() && y->defined()) p = p + *y;
            total = total.defined() ? total + p : p;
            parts.push_back(p);
          }
          return {parts, total, static_cast<int64_t>(parts.size())};
        }
    """,
    "scalars.h": """
        template <typename scalar_t>
        std::tuple<double, bool> scalars(const at::Tensor& self, at::ArrayRef<at::Scalar> values, bool flag) {
          double total = 0;
          for (const at::Scalar& v : values) total += v.toDouble();
          return {total, !flag};
        }
    """,
    "first_of.h": """
        template <typename scalar_t>
        at::Tensor first_of(const std::optional<at::Tensor>& a, const std::optional<at::Tensor>& b) {
          const at::Tensor& t = a.has_value() && a->defined() ? *a : *b;
          return t * 2;
        }
    """,
    "count_positive.h": """
        template <typename scalar_t>
        at::Tensor count_positive(const at::Tensor& self, bool wrong) {
          int64_t count = 0;
          const scalar_t* in = self.const_data_ptr<scalar_t>();
          for (int64_t k = 0; k < self.numel(); ++k) count += in[k] > 0;
          at::Tensor out = at::empty({}, self.options().dtype(wrong ? at::kFloat : at::kLong));
          out.fill_(count);
          return out;
        }
    """,
    "assert_positive.h": """
        template <typename scalar_t>
        void assert_positive(const at::Tensor& self) {
          const scalar_t* in = self.const_data_ptr<scalar_t>();
          for (int64_t k = 0; k < self.numel(); ++k) TORCH_CHECK(in[k] > 0, "not positive at ", k);
        }
    """,
    "clamp_max.h": """
        template <typename scalar_t>
        void clamp_max(at::Tensor& self, double hi) {
          scalar_t* p = self.mutable_data_ptr<scalar_t>();
          for (int64_t k = 0; k < self.numel(); ++k) p[k] = p[k] > hi ? static_cast<scalar_t>(hi) : p[k];
        }
    """,
    "names.h": """
        template <typename scalar_t>
        void delete_kernel(const at::Tensor& dtype, const at::Tensor& default_, const std::optional<at::Tensor>& options,
                           int64_t kOp, double m, int64_t new_, int64_t int_, const at::Tensor& result, at::Tensor& out) {
          const int64_t n = dtype.size(0);
          const scalar_t* a = dtype.const_data_ptr<scalar_t>();
          const scalar_t* d = default_.const_data_ptr<scalar_t>();
          const scalar_t* r = result.const_data_ptr<scalar_t>();
          const scalar_t* o = options.has_value() ? options->const_data_ptr<scalar_t>() : nullptr;
          scalar_t* y = out.mutable_data_ptr<scalar_t>();
          for (int64_t k = 0; k < n; ++k)
            for (int64_t j = 0; j < int_; ++j)
              y[k * int_ + j] = a[k] * m + d[k] + r[k] + kOp + new_ + (o ? o[k] : 0);
        }
    """,
    "new.h": """
        template <typename scalar_t>
        void new_kernel(const at::Tensor& self, int64_t int_, c10::string_view default_, at::Tensor& result) {
          const scalar_t* in = self.const_data_ptr<scalar_t>();
          scalar_t* out = result.mutable_data_ptr<scalar_t>();
          for (int64_t k = 0; k < self.numel(); ++k) out[k] = in[k] + int_ + static_cast<scalar_t>(default_.size());
        }
    """,
}

SCRIPT = r"""
import json, torch, sharedlib
ops, out = torch.ops.sharedlib, {}
x = torch.arange(1.0, 5.0)
r = ops.every_arg(x, 3, None, False, 2.5, "nm", None, torch.float64, torch.device("cpu"), torch.strided,
                  torch.channels_last, [1, 2], 4, [5, 6], [0.25], [True, False], [False, True], None, [9], None, 7)
out["every_arg"] = [r[0], r[1], r[2], r[3], r[4], str(r[5]), r[6], str(r[7]), str(r[8]), str(r[9]), r[10], r[11], r[12]]
r = ops.every_arg(x, None, 1.0, None, None, "a", "t", None, torch.device("cpu"), torch.strided,
                  torch.contiguous_format, None, 0, [], [], [True], [True, True], 1, None, [2.0], 1.5)
out["every_arg_defaults"] = [r[0], r[1], r[2], r[3], r[4], str(r[5]), r[6], r[10], r[11], r[12]]
torch.manual_seed(0); a = ops.noise(x, 1.0)
torch.manual_seed(0); b = ops.noise(x, 1.0)
g = torch.Generator().manual_seed(5); c = ops.noise(x, 1.0, generator=g)
g = torch.Generator().manual_seed(5); d = ops.noise(x, 1.0, generator=g)
out["noise"] = [torch.equal(a, b), torch.equal(c, d), torch.equal(a, c), bool(((a - x) >= 0).all() and ((a - x) < 1).all())]
parts, total, count = ops.scaled_sum([x, 2 * x], [None, torch.ones(4)], 3)
out["scaled_sum"] = [[p.tolist() for p in parts], total.tolist(), count]
out["first_of"] = [ops.first_of(None, x).tolist(), ops.first_of(x.double(), None).dtype == torch.float64]
out["count_positive"] = [ops.count_positive(x - 2).item(), ops.count_positive(x).dtype == torch.int64]
errors = []
for bad in (lambda: ops.count_positive(x, True), lambda: ops.assert_positive(x - 2),
            lambda: ops.first_of(torch.ones(2, dtype=torch.int32), None)):
    try:
        bad()
        errors.append(None)
    except RuntimeError as e:
        errors.append(str(e).splitlines()[0])
out["errors"] = errors
out["assert_positive"] = ops.assert_positive(x) is None
y = torch.arange(6.0); y2 = y[::2]
out["clamp_max_"] = [ops.clamp_max_(y, 2.5) is None, y.tolist(), ops.clamp_max_(y2, 1.0) is None, y.tolist()]
t = [torch.arange(3.0, dtype=torch.float64, requires_grad=True) for _ in range(3)]
o = ops.delete(t[0], t[1], None, 10, 2.0, 100, 2, t[2])
out["delete"] = [list(o.shape), o[:, 0].tolist()]
o2 = ops.delete(t[0], t[1], torch.ones(3, dtype=torch.float64), 10, 2.0, 100, 2, t[2])
out["delete_options"] = o2[:, 1].tolist()
out["delete_grad"] = torch.autograd.gradcheck(lambda a, b, c: ops.delete(a, b, None, 1, 3.0, 2, 3, c), tuple(t))
try:
    ops.delete(t[0], t[1][:2], None, 0, 1.0, 0, 1, t[2])
except RuntimeError as e:
    out["delete_contract"] = str(e).splitlines()[0]
out["new"] = ops.new.int(x, 2).tolist() + ops.new.int(x, 0, "z").tolist()
out["scalars"] = list(ops.scalars(x, [1, 2.5, True], False))
print(json.dumps(out))
"""


def write_files(lib, namespace):
    """The declarations and kernel headers above into `lib` (made with `codegen init`)."""
    (lib / "declarations" / "types.yaml").write_text(DECLARATIONS)
    for name, body in KERNELS.items():
        (lib / "kernels" / name).write_text("#pragma once\n#include <ATen/core/Tensor.h>\n" + textwrap.dedent(body).replace(
            "template <typename scalar_t>", f"namespace {namespace}::kernels {{\ntemplate <typename scalar_t>", 1) + "}\n")


def add_to_sharedlib(lib):
    """Into conftest's `sharedlib`, which compiles them (test_every_type_and_name_compiles_and_runs)."""
    write_files(lib, "sharedlib")


@pytest.fixture(scope="module")
def tylib(tmp_path_factory):
    """A library of its own, generated but never compiled: the test using it deletes a kernel
    header and regenerates, which a library shared with other tests cannot have done to it."""
    lib = tmp_path_factory.mktemp("kernel-types") / "tylib"
    r = run_codegen("init", str(lib))
    assert r.returncode == 0, r.stderr
    write_files(lib, "tylib")
    return lib


def test_wrapper_names_and_the_missing_header_note(tylib):
    r = run_codegen("generate", cwd=tylib)
    assert r.returncode == 0, r.stderr
    wrapper = (tylib / "generated" / "cpu" / "delete.cpp").read_text()
    # No parameter or local is a keyword or shadows another: the argument `kOp` is `kOp_`, the
    # local dtype is `dtype_` (`dtype` is an argument), the output `out` and its shape get their
    # own names, and the SymInt named `int` is guarded where the shape rule uses it.
    assert ("at::Tensor delete_cpu(const at::Tensor& dtype, const at::Tensor& default_, "
            "const std::optional<at::Tensor>& options, int64_t kOp_, double m_, int64_t new_, c10::SymInt int_, "
            "const at::Tensor& result) {") in wrapper
    assert "const at::ScalarType dtype_ = dtype.scalar_type();" in wrapper
    assert "const std::vector<int64_t> out_shape = std::vector<int64_t>{N, int_.guard_int(__FILE__, __LINE__)};" in wrapper
    autograd = (tylib / "generated" / "autograd" / "delete.cpp").read_text()
    assert "grad.sum(1) + default_ * 0" in autograd and "(new_ - new_ + 1)" in autograd
    # A missing header is reported at `header:`, with the exact signature to write.
    header = tylib / "kernels" / "names.h"
    text = header.read_text()
    header.unlink()
    try:
        r = run_codegen("generate", cwd=tylib)
    finally:
        header.write_text(text)
    assert r.returncode == 2
    lines = [line for line in r.stderr.splitlines() if "names.h" in line]
    assert lines[0].startswith("declarations/types.yaml:27:11: error: kernel header 'kernels/names.h' not found"), r.stderr
    assert ("template <typename scalar_t> void delete_kernel(const at::Tensor& dtype, const at::Tensor& default_, "
            "const std::optional<at::Tensor>& options, int64_t kOp, double m, int64_t new_, int64_t int_, "
            "const at::Tensor& result, at::Tensor& out)") in r.stderr
    first_of = FunctionSchema.parse("first_of(Tensor? a, Tensor? b) -> Tensor")
    assert types.tuple_of([types.kernel_returned_type(r) for r in first_of.returns]) == "at::Tensor"


@pytest.mark.slow(300)
@pytest.mark.xdist_group("sharedlib")
def test_every_type_and_name_compiles_and_runs(sharedlib):
    # The ops above are compiled (--no-cuda -O0) in conftest's `sharedlib`, namespace `sharedlib`.
    made = sharedlib.record
    assert made["init"][0] == 0, made["init"][1]
    assert made["build"][0] == 0, made["build"][1][-6000:]
    out = json.loads(run_script(sharedlib.path, SCRIPT).splitlines()[-1])  # in this worker, which has sharedlib
    # torch.ops gives ScalarType, Layout and MemoryFormat returns as their enum values (float64 is 7,
    # float32 6, strided 0, channels_last 2), Device as a torch.device.
    assert out["every_arg"] == [3 + 4 + 2 + 11, 0.5 + 0.25, False, 7 + 4, 2.5, "7", "nm/none", "cpu", "0", "2",
                                [5, 6], [9], [0.25]]
    assert out["every_arg_defaults"] == [-1, 1.0, True, 1 + 4, 1.5, "6", "a/t", [], [], [2.0]]
    assert out["noise"] == [True, True, False, True]  # reproducible under manual_seed and with a generator
    assert out["scaled_sum"] == [[[3, 6, 9, 12], [7, 13, 19, 25]], [10, 19, 28, 37], 2]
    assert out["first_of"] == [[2, 4, 6, 8], True]
    assert out["count_positive"] == [2, True]
    assert out["errors"] == [
        "sharedlib::count_positive: the kernel returned 'result' of dtype Float, but the declaration says Long",
        "not positive at 0",
        "sharedlib::first_of: argument 'a' has dtype Int, but expected one of: float32, float64",
    ]
    assert out["assert_positive"] is True
    assert out["clamp_max_"] == [True, [0, 1, 2, 2.5, 2.5, 2.5], True, [0, 1, 1, 2.5, 1, 2.5]]
    assert out["delete"] == [[3, 2], [110, 114, 118]]
    assert out["delete_options"] == [111, 115, 119]
    assert out["delete_grad"] is True
    assert out["delete_contract"].startswith("sharedlib::delete: argument 'default' has size 2 at dimension 0, but expected N = 3")
    assert out["new"] == [6, 7, 8, 9, 2, 3, 4, 5]
    assert out["scalars"] == [4.5, True]
