"""The shape rule (codegen/lang/shapes.py): names bound through linear expressions, by optional
tensors and by tensor lists, `_`, sums over lists, Tensor[] return shapes.  Declaration
errors at their positions; the C++ and Python renderings; the Python checks run on real and
on symbolic (fake) tensors; and one library built with them, end to end."""

import os
import re
import subprocess
import sys

import pytest
import torch

from opwrap_codegen.lang import shapes as S
from opwrap_codegen.core.diagnostics import Diagnostics, Loc
from opwrap_codegen.lang.schema import FunctionSchema
from conftest import ROOT, import_library, run_codegen, run_script
from test_declaration_errors import check_error


def plan_of(schema: str, spec: dict):
    """(schema, plan, errors) of a `shape:` mapping, as the loader parses it."""
    s = FunctionSchema.parse(schema)
    diag = Diagnostics()
    loc = Loc("ops.yaml", 1, 1)
    parsed = {}
    for target, value in spec.items():
        locs = [loc.shifted(i) for i in range(len(value))] if isinstance(value, list) else []
        shape = S.parse_shape(s, target, value, loc, locs, target in s.return_names(), diag)
        if shape is not None:
            parsed[target] = shape
    plan = S.analyze(s, parsed, s.return_names(), diag)
    return s, plan, [e.message for e in diag.errors]


def checks_function(schema: str, spec: dict):
    """The fake kernel's input checks of `spec` as a Python function of the op's arguments
    that returns the dimension variables they bound, and the output shapes."""
    s, plan, errors = plan_of(schema, spec)
    assert not errors, errors
    lines = S.python_input_checks(plan, "ns::op", s)
    outs = []
    for o in plan.outputs:
        if o.each is not None:
            outs.append(f"[{S.python_output_shape(o)} {S.python_list_loop(o)}]")
        else:
            outs.append(S.python_output_shape(o))
    names = sorted(v for v in S.variables(plan) if s.argument(v) is None)
    src = (f"def f({', '.join(a.name for a in s.arguments)}):\n"
           + "".join(f"    {line}\n" for line in lines)
           + f"    return {{{', '.join(f'{n!r}: {n}' for n in names)}}}, [{', '.join(outs)}]\n")
    from opwrap_codegen import pyruntime  # the fake kernels' _runtime

    scope = {"torch": torch, "_runtime": pyruntime}
    exec(compile(src, "<checks>", "exec"), scope)
    return scope["f"]


def raises(f, *args, match: str):
    with pytest.raises(RuntimeError) as e:
        f(*args)
    assert match in str(e.value), str(e.value)


# ------------------------------------------------------------------------------ declaration errors

K = "  dtypes: [float32]\n"
LISTS = "- func: f(Tensor[] xs, Tensor[] ys, Tensor?[] ws, int[] sizes) -> Tensor\n" + K + "  shape: "


@pytest.mark.parametrize("yaml_text, expected", [
    # only a linear expression binds a name
    ("- func: f(Tensor x) -> Tensor\n" + K + "  shape: {x: [N, 'H // 2'], result: [N]}\n",
     "declarations/ops.yaml:3:19: error: 'H // 2' cannot bind dimension 'H': an input dimension binds a name through "
     "a linear expression such as 2 * H or H + 1"),
    ("- func: f(Tensor x) -> Tensor\n" + K + "  shape: {x: ['H * H'], result: [H]}\n",
     "declarations/ops.yaml:3:16: error: 'H * H' cannot bind dimension 'H'"),
    ("- func: f(Tensor x) -> Tensor\n" + K + "  shape: {x: ['H * W'], result: [H]}\n",
     "declarations/ops.yaml:3:16: error: 'H * W' has 2 unknown dimensions (H, W); an input dimension binds one"),
    ("- func: f(Tensor x) -> Tensor\n" + K + "  shape: {x: ['x.size(H)'], result: [H]}\n",
     "declarations/ops.yaml:3:16: error: 'x.size(H)' cannot bind dimension 'H'"),
    # a name only an optional tensor binds: not in an output
    ("- func: f(Tensor x, Tensor? b) -> Tensor\n" + K + "  shape: {x: [N], b: [M], result: [N, M]}\n",
     "declarations/ops.yaml:3:39: error: dimension 'M' is bound only by optional argument 'b', so it is unknown when "
     "that is None"),
    # nor an optional tensor's sizes outside its shape, nor a run it would bind
    ("- func: f(Tensor x, Tensor? b) -> Tensor\n" + K + "  shape: {x: [N], result: ['b.size(0)']}\n",
     "declarations/ops.yaml:3:29: error: 'b' is optional (it may be None), so its sizes cannot be used here"),
    ("- func: f(Tensor x, Tensor? b) -> Tensor\n" + K + "  shape: {x: [N], b: ['*S'], result: [N]}\n",
     "declarations/ops.yaml:3:24: error: the run '*S' is first bound by optional argument 'b'"),
    # '_' is for inputs
    ("- func: f(Tensor x) -> Tensor\n" + K + "  shape: {x: [_, N], result: [_]}\n",
     "declarations/ops.yaml:3:31: error: '_' (a dimension of any size) is for inputs"),
    ("- func: f(Tensor x) -> Tensor\n" + K + "  shape: {x: [N], result: ['N + _']}\n",
     "declarations/ops.yaml:3:33: error: '_' (a dimension of any size) stands alone"),
    # tensor lists
    ("- func: f(Tensor[] ts) -> Tensor\n" + K + "  shape: {ts: [N], result: ['ts.size(0)']}\n",
     "declarations/ops.yaml:3:30: error: 'ts' is a list of tensors; use len(ts) or sum(t.size(0) for t in ts)"),
    ("- func: f(Tensor[] ts) -> Tensor\n" + K + "  shape: {ts: [N], result: ['sum(t.size(0) for t in N)']}\n",
     "declarations/ops.yaml:3:53: error: 'N' is not range(n), an int[] argument or a tensor list"),
    ("- func: f(Tensor[] ts) -> Tensor\n" + K + "  shape: {ts: [N], result: ['sum(t for t in ts)']}\n",
     "declarations/ops.yaml:3:34: error: 't' is a tensor; use t.size(i) or t.dim()"),
    ("- func: f(Tensor[] ts, Tensor x) -> Tensor\n" + K + "  shape: {ts: [N], result: ['sum(x.size(0) for x in ts)']}\n",
     "declarations/ops.yaml:3:48: error: the loop variable 'x' must not be the name of an argument"),
    # an element's shape is named through the list's shape (a run for any rank), not by indexing
    ("- func: f(Tensor[] xs) -> Tensor\n" + K + "  shape: {result: 'xs[0].shape'}\n",
     "declarations/ops.yaml:3:20: error: 'xs[0]': the elements of a tensor list are named through its shape, which "
     "every element has: xs: [\"*S\"] (a run: any rank) or [N, D], then [\"*S\"] or N is an element's shape or size"),
    ("- func: f(Tensor[] xs) -> Tensor\n" + K + "  shape: {xs: ['*S'], result: ['xs[1].size(0)']}\n",
     "declarations/ops.yaml:3:33: error: 'xs[1]': the elements of a tensor list are named through its shape"),
    ("- func: f(Tensor[] xs) -> Tensor\n" + K + "  like: xs\n",
     "declarations/ops.yaml:3:9: error: 'like: xs' must name a Tensor argument of f\n"
     "declarations/ops.yaml:3:9: note: for results shaped like each element of the tensor list 'xs', give the "
     "elements a shape with a run and the results the same: shape: {xs: [\"*S\"], result: [\"*S\"]}"),
    ("- func: f(Tensor[] xs) -> Tensor\n" + K + "  shape: {xs: ['*S', '*T'], result: ['*S']}\n",
     "declarations/ops.yaml:3:23: error: a shape may have at most one '*' run of dimensions"),
    # Tensor[] returns
    ("- func: f(Tensor x) -> Tensor[]\n" + K + "  shape: {x: [N], result: [N]}\n",
     "declarations/ops.yaml:3:27: error: 'result' is a Tensor[] return: its shape is a list comprehension"),
    ("- func: f(Tensor x) -> Tensor\n" + K + "  shape: {x: [N], result: '[[N] for i in range(2)]'}\n",
     "declarations/ops.yaml:3:28: error: a list comprehension is the shape of a Tensor[] return or a tensor list "
     "argument; 'result' is neither"),
    ("- func: f(Tensor x, int n) -> Tensor[]\n" + K + "  shape: {x: [N], result: '[[N, M] for i in range(n)]'}\n",
     "declarations/ops.yaml:3:33: error: unknown dimension 'M'"),
    ("- func: f(Tensor x, Tensor?[] ts) -> Tensor[]\n" + K + "  shape: {x: [N], result: '[[N] for t in ts]'}\n",
     "declarations/ops.yaml:3:42: error: 'ts' may hold None; a Tensor[] return's shapes come from a Tensor[] argument"),
    # input lists shaped after another list
    (LISTS + "{xs: [N], ys: '[p.shape for p in ys]', result: [N]}\n",
     "declarations/ops.yaml:3:43: error: 'ys' cannot take its shapes from its own elements; name another list"),
    (LISTS + "{xs: [N], ys: '[[?n] for p in xs]', result: [N]}\n",
     "declarations/ops.yaml:3:27: error: 'ys' is an input: its sizes are known, and a '?' size (data-dependent) is an "
     "output's"),
    (LISTS + "{xs: [N], ys: '[p.size(0) for p in xs]', result: [N]}\n",
     "declarations/ops.yaml:3:25: error: a tensor list's shape per element is a list comprehension over another list, "
     "as in \"[p.shape for p in params]\" or \"[[s, D] for s in sizes]\""),
    (LISTS + "{xs: [N], ys: '[[M, p.size(0)] for p in xs]', result: [N]}\n",
     "declarations/ops.yaml:3:27: error: unknown dimension 'M'"),
    (LISTS + "{xs: [N], ys: '[s.shape for s in sizes]', result: [N]}\n",
     "declarations/ops.yaml:3:26: error: 's.shape': an element's whole shape is the shape of the loop's tensor, as in "
     "[p.shape for p in params]; else list its dimensions"),
    (LISTS + "{xs: [N], ys: '[p.shape for p in ws]', result: [N]}\n",
     "declarations/ops.yaml:3:43: error: 'ws' may hold None; an input list's shapes come from a Tensor[] argument"),
    (LISTS + "{xs: [N], ys: 'xs.shape', result: [N]}\n",
     "declarations/ops.yaml:3:25: error: 'ys' is a tensor list: its shape is a list of dimensions that every element "
     "has, as in [_, D], or one shape per element, as in \"[p.shape for p in params]\""),
])
def test_bad_shape_rule(project, yaml_text, expected):
    check_error(project, yaml_text, expected)


@pytest.mark.parametrize("schema, spec, expected", [
    ("f(Tensor self, float dim) -> Tensor", {"result": "reduce(self, dim)"},
     "'dim' is not an int, int?, int[] or int[]? argument of f (the dimensions reduce(...) reduces)"),
    ("f(Tensor self, int[] dim, int keepdim) -> Tensor", {"result": "reduce(self, dim, keepdim)"},
     "'keepdim' is neither a bool argument of f nor True or False"),
    ("f(Tensor self, int[] dim) -> Tensor", {"result": "reduce(self)"},
     "reduce(...) takes a tensor, the dims argument and keepdim (reduce(self, dim, keepdim)), not 1 argument"),
    ("f(Tensor self, int[] dim) -> Tensor", {"self": "reduce(self, dim)", "result": ["1"]},
     "reduce(...) is the shape of an output; 'self' is an input"),
    ("f(Tensor self, Tensor? b, int[] dim) -> Tensor", {"result": "reduce(b, dim)"},
     "'b' is optional (it may be None), so its sizes cannot be used here"),
    ("f(Tensor[] xs, int[] dim) -> Tensor", {"result": "reduce(xs, dim)"}, "'xs' is a list of tensors"),
])
def test_bad_reduction_rule(schema, spec, expected):
    assert any(e.startswith(expected) for e in plan_of(schema, spec)[2]), plan_of(schema, spec)[2]


@pytest.mark.parametrize("schema, rule, cpp, python", [
    ("f(Tensor self, int[1]? dim, bool keepdim=False) -> Tensor", "reduce(self, dim, keepdim)",
     'opwrap::rt::reduced_shape(kOp, "dim", "self", self, dim, keepdim)',
     "_runtime.reduced_shape('ns::f', 'dim', 'self', self, dim, keepdim)"),
    ("f(Tensor x, int d) -> Tensor", "reduce(x, d, True)", 'opwrap::rt::reduced_shape(kOp, "d", "x", x, d, true)',
     "_runtime.reduced_shape('ns::f', 'd', 'x', x, d, True)"),
    ("f(Tensor x, int? d) -> Tensor", "reduce(x, d)", 'opwrap::rt::reduced_shape(kOp, "d", "x", x, d, false)',
     "_runtime.reduced_shape('ns::f', 'd', 'x', x, d, False)"),
    ("f(Tensor x, int[2] d, bool k) -> Tensor", "reduce(x, d, keepdim=k)",
     'opwrap::rt::reduced_shape(kOp, "d", "x", x, d, k)', "_runtime.reduced_shape('ns::f', 'd', 'x', x, d, k)"),
])
def test_a_reduction_rule_is_one_helper_call_in_each_language(schema, rule, cpp, python):
    """`reduce(self, dim, keepdim)` (codegen/shapes.py's Reduction) allocates the real output
    through opwrap::rt::reduced_shape and the fake one through _runtime.reduced_shape, which
    wrap, check and reduce alike."""
    _, plan, errors = plan_of(schema, {"result": rule})
    assert not errors, errors
    (out,) = plan.outputs
    assert out.text == rule
    assert S.cpp_output_shape(out) == cpp
    assert S.python_output_shape(out, op="'ns::f'") == python


def test_binding_errors_are_reported_once():
    _, _, errors = plan_of("f(Tensor x, Tensor y) -> Tensor", {"x": ["H // 2"], "y": ["H"], "result": ["H"]})
    assert len(errors) == 1 and "cannot bind dimension 'H'" in errors[0], errors


@pytest.mark.parametrize("schema, spec", [
    ("f(Tensor x, int n) -> Tensor[]", {"x": ["N", "D"], "result": "[[N, D] for N in range(n)]"}),
    ("f(Tensor x, int[] sizes) -> Tensor", {"x": ["N", "D"], "result": ["sum(D for D in sizes)"]}),
])
def test_loop_variables_do_not_shadow_dimensions(schema, spec):
    assert plan_of(schema, spec)[2] == [f"the loop variable '{'N' if 'N in' in str(spec) else 'D'}' is also a "
                                        "dimension name; name it otherwise"]


@pytest.mark.parametrize("schema, spec", [
    ("f(Tensor x) -> Tensor", {"x": ["2 * H"], "result": ["H"]}),
    ("f(Tensor x, int heads) -> Tensor", {"x": ["N", "heads * head_size"], "result": ["head_size"]}),
    ("f(Tensor x, Tensor y) -> Tensor", {"x": ["H * 2 + 1"], "y": ["H - 3"], "result": ["H"]}),
    # an optional tensor binds for the others, and a required tensor listed after it binds first
    ("f(Tensor? b, Tensor x, Tensor? c) -> Tensor", {"b": ["M"], "x": ["N"], "c": ["2 * M"], "result": ["N"]}),
    ("f(Tensor? b, Tensor x) -> Tensor", {"b": ["M"], "x": ["M"], "result": ["M"]}),
    ("f(Tensor[] ts) -> Tensor", {"ts": ["_", "D"], "result": ["sum(t.size(0) for t in ts)", "D"]}),
    ("f(Tensor self, int[] sizes) -> Tensor[]", {"self": ["sum(s for s in sizes)", "D"],
                                                 "result": "[[s, D] for s in sizes]"}),
])
def test_good_shape_rule(schema, spec):
    assert plan_of(schema, spec)[2] == []


# --------------------------------------------------------------------------------- C++ rendering

def cpp(schema: str, spec: dict) -> str:
    s, plan, errors = plan_of(schema, spec)
    assert not errors, errors
    return "\n".join(S.cpp_input_checks(plan, "kOp", s))


def test_cpp_linear_binding():
    text = cpp("f(Tensor x, int heads) -> Tensor", {"x": ["2 * H + 1", "heads * S"], "result": ["H"]})
    assert 'const int64_t H = opwrap::rt::bind_linear(kOp, "x", x, 0, 2, 1, "2 * H + 1", "H");' in text
    assert 'const int64_t S = opwrap::rt::bind_linear(kOp, "x", x, 1, heads, 0, "heads * S", "S");' in text
    # a later use checks the value it bound
    text = cpp("f(Tensor x, Tensor y) -> Tensor", {"x": ["H - 1"], "y": ["2 * H"], "result": ["H"]})
    assert "bind_linear(kOp, \"x\", x, 0, 1, (-1), \"H - 1\", \"H\")" in text
    assert 'opwrap::rt::check_size(kOp, "y", y, 0, opwrap::rt::shape_mul(kOp, 2, H), "2 * H");' in text


def test_cpp_names_optional_tensors_bind():
    text = cpp("f(Tensor x, Tensor? b=None, Tensor? c=None) -> Tensor", {"x": ["N"], "b": ["M"], "c": ["M + 1"],
                                                                          "result": ["N"]})
    lines = text.splitlines()
    # declared unbound before the first optional tensor, set by it, checked or set by the next
    assert lines.index("int64_t M = -1;  // bound by 'b' when given") < lines.index(
        "if (b.has_value() && b->defined()) {")
    assert "  M = b_.size(0);" in lines
    assert '  opwrap::rt::bind_or_check_linear(kOp, "c", c_, 0, 1, 1, "M + 1", "M", M);' in lines


def test_cpp_tensor_list_contract():
    text = cpp("f(Tensor?[] ts, Tensor w) -> Tensor", {"ts": ["_", "D", "K"], "w": ["K"], "result": ["D"]})
    assert "const int64_t K = w.size(0);" in text  # the required tensor binds first
    assert "opwrap::rt::element(ts, opwrap_i);" in text and "if (!opwrap_e.defined()) continue;" in text
    assert 'opwrap::rt::bind_or_check(kOp, opwrap_name.c_str(), opwrap_e, 1, D, "D");' in text
    assert 'opwrap::rt::check_size(kOp, opwrap_name.c_str(), opwrap_e, 2, K, "K");' in text
    assert text.endswith('opwrap::rt::require_bound(kOp, "ts", D, "D", "[_, D, K]");')
    # nothing after the list uses D: an empty list is fine
    assert "require_bound" not in cpp("f(Tensor[] ts) -> Tensor", {"ts": ["D"], "result": ["len(ts)"]})


def test_cpp_outputs():
    s, plan, _ = plan_of("f(Tensor[] ts) -> Tensor", {"ts": ["_", "D"], "result": ["sum(t.size(0) for t in ts)", "D"]})
    assert S.cpp_output_shape(plan.outputs[0]) == (
        "std::vector<int64_t>{opwrap::rt::list_sum(kOp, ts, [&](const auto& t) -> int64_t "
        "{ return t.size(0); }), D}")
    s, plan, _ = plan_of("f(Tensor x, int chunks) -> Tensor[]",
                         {"x": ["chunks * R", "D"], "result": "[[R, D + i] for i in range(chunks)]"})
    out = plan.outputs[0]
    assert S.is_list_output(out)
    lines = S.cpp_list_output(out, "result", "x.options()")
    assert lines[0] == "std::vector<at::Tensor> result;"
    assert "  const int64_t opwrap_n = chunks;" in lines
    assert "  for (int64_t i = 0; i < opwrap_n; ++i) {" in lines
    assert "    const std::vector<int64_t> opwrap_shape = std::vector<int64_t>{R, opwrap::rt::shape_add(kOp, D, i)};" \
        in lines
    assert "    result.push_back(opwrap::rt::empty(kOp, opwrap_name.c_str(), opwrap_shape, x.options()));" in lines
    with pytest.raises(ValueError):
        S.cpp_output_shape(out)
    _, plan, _ = plan_of("f(Tensor x) -> Tensor[]", {"x": ["N"], "result": "[[?m, N] for i in range(?k)]"})
    assert not S.is_list_output(plan.outputs[0]) and plan.outputs[0].each.dynamic


def test_cpp_list_output_checks():
    _, plan, _ = plan_of("f(Tensor self, int[] sizes) -> Tensor[]", {"self": ["N", "D"],
                                                                    "result": "[[s, D] for s in sizes]"})
    lines = S.cpp_list_output_checks(plan.outputs[0], "out")
    assert lines == [
        'opwrap::rt::check_list_output_length(kOp, "result", out.size(), static_cast<int64_t>(sizes.size()), '
        '"[[s, D] for s in sizes]");',
        "for (size_t opwrap_k = 0; opwrap_k < out.size(); ++opwrap_k) {",
        "  const int64_t s = sizes[opwrap_k];",
        '  opwrap::rt::check_list_output_shape(kOp, "result", opwrap_k, out[opwrap_k], std::vector<int64_t>{s, D}, '
        '"[[s, D] for s in sizes]");',
        "}"]


# Each rule, its C++ parameters: the renderings must compile against the runtime headers.
CPP_CASES = [
    ("chunk(Tensor x, int chunks) -> Tensor[]", {"x": ["chunks * R", "D"], "result": "[[R, D + i] for i in range(chunks)]"},
     "const at::Tensor& x, int64_t chunks"),
    ("split(Tensor x, int[] sizes) -> Tensor[]", {"x": ["N", "D"], "result": "[[s, D] for s in sizes]"},
     "const at::Tensor& x, c10::IntArrayRef sizes"),
    ("each(Tensor[] tensors) -> Tensor[]", {"tensors": ["_", "D"], "result": "[[t.size(0), D] for t in tensors]"},
     "at::TensorList tensors"),
    ("cat(Tensor?[] ts, Tensor w, Tensor? b, int heads) -> Tensor",
     {"ts": ["2 * H", "_"], "w": ["H"], "b": ["heads * M + 1"], "result": ["sum(t.size(0) for t in ts)", "len(ts)"]},
     "const c10::List<std::optional<at::Tensor>>& ts, const at::Tensor& w, const std::optional<at::Tensor>& b, "
     "int64_t heads"),
    ("runs(Tensor[] xs, Tensor?[] ys, Tensor? b) -> Tensor",
     {"xs": ["*S", "D"], "ys": ["N", "*S", "D"], "b": ["*S"], "result": ["len(xs)", "*S", "D"]},
     "at::TensorList xs, const c10::List<std::optional<at::Tensor>>& ys, const std::optional<at::Tensor>& b"),
    ("after(Tensor[] xs, Tensor[] ys, Tensor?[] ws, int[] sizes, Tensor[] zs, int n, Tensor[] rs) -> Tensor",
     {"xs": ["_", "*S"], "ys": "[p.shape for p in xs]", "ws": "[[] for p in xs]", "zs": "[[s, _] for s in sizes]",
      "rs": "[[i + 1, _, *S] for i in range(n)]", "result": ["len(xs)"]},
     "at::TensorList xs, at::TensorList ys, const c10::List<std::optional<at::Tensor>>& ws, c10::IntArrayRef sizes, "
     "at::TensorList zs, int64_t n, at::TensorList rs"),
]


@pytest.mark.slow(15)
def test_cpp_renderings_compile(tmp_path):
    from torch.utils.cpp_extension import include_paths

    body = ["#include <opwrap/runtime/checks.h>"]
    for schema, spec, params in CPP_CASES:
        s, plan, errors = plan_of(schema, spec)
        assert not errors, errors
        body += [f"void f_{s.name}({params}) {{", '  const char* kOp = "op";']
        body += ["  " + line for line in S.cpp_input_checks(plan, "kOp", s)]
        out = plan.outputs[0]
        if out.each is not None:
            body += ["  " + line for line in S.cpp_list_output(out, "result", "at::TensorOptions()")]
            body += ["  " + line for line in S.cpp_list_output_checks(out, "result")]
        else:
            body.append(f"  const std::vector<int64_t> shape = {S.cpp_output_shape(out)};")
        body.append("}")
    src = tmp_path / "renderings.cpp"
    src.write_text("\n".join(body) + "\n")
    r = subprocess.run([os.environ.get("CXX", "c++"), "-std=c++20", "-fsyntax-only", f"-I{ROOT / 'runtime' / 'include'}",
                        *(f"-I{p}" for p in include_paths()), str(src)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-4000:]


@pytest.mark.slow(10)
def test_stable_renderings_of_lists_shaped_after_another_compile(tmp_path):
    """The same checks' C++ against the stable-ABI runtime (<opwrap/stable/runtime.h>), whose
    Tensor[] is a std::vector of torch::stable::Tensor and int[] a header-only array."""
    from torch.utils.cpp_extension import include_paths

    s, plan, errors = plan_of("after(Tensor[] xs, Tensor[] ys, Tensor[] ws, int[] sizes, Tensor[] zs, int n, "
                              "Tensor[] rs) -> Tensor",
                              {"xs": ["_", "*S"], "ys": "[p.shape for p in xs]", "ws": "[[] for p in xs]",
                               "zs": "[[s, _] for s in sizes]", "rs": "[[i + 1, _, *S] for i in range(n)]",
                               "result": ["len(xs)"]})
    assert not errors, errors
    v = "const std::vector<opwrap::rt::Tensor>&"
    body = ["#include <opwrap/stable/runtime.h>",
            f"void f({v} xs, {v} ys, {v} ws, torch::headeronly::IntHeaderOnlyArrayRef sizes, {v} zs, int64_t n, "
            f"{v} rs) {{", '  const char* kOp = "op";',
            *("  " + line for line in S.cpp_input_checks(plan, "kOp", s)), "}"]
    src = tmp_path / "stable.cpp"
    src.write_text("\n".join(body) + "\n")
    r = subprocess.run([os.environ.get("CXX", "c++"), "-std=c++20", "-fsyntax-only", f"-I{ROOT / 'runtime' / 'include'}",
                        *(f"-I{p}" for p in include_paths()), str(src)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-4000:]


def test_variables_leave_out_loop_variables():
    _, plan, _ = plan_of("f(Tensor x, int chunks, Tensor[] ts) -> Tensor[]",
                         {"x": ["N", "_"], "ts": ["M"], "result": "[[N + i, M] for i in range(chunks)]"})
    assert S.variables(plan) == {"N", "M", "chunks"}


def test_one_walker_for_the_expression_ir():
    """Every consumer of the shape IR walks it through `walk` and `ExprVisitor`: the walk knows
    that a sum's variable is local to its body, and a visitor that misses a node class is an
    error where it is defined, naming the classes it lacks."""
    _, plan, errors = plan_of("f(Tensor x, Tensor[] ts, int n) -> Tensor",
                              {"x": ["N"], "ts": ["_"], "result": ["N + sum(t.size(0) * n for t in ts) - x.dim()"]})
    assert not errors, errors
    e = plan.outputs[0].dims[0].expr
    assert list(S.names_in(e)) == ["N", "n"]
    assert list(S.tensors_in(e)) == ["x"]
    assert list(S.loop_variables(e)) == ["t"]
    assert [type(n).__name__ for n, _ in S.walk(e)][:3] == ["BinOp", "BinOp", "Var"]
    assert {n.tensor: bound for n, bound in S.walk(e) if isinstance(n, S.TensorSize)} == {"t": {"t"}}

    with pytest.raises(TypeError, match="Partial has no method for Var, .*ListSum: define visit_Var"):
        class Partial(S.ExprVisitor[int]):
            def visit_Num(self, e):
                return e.value

    class Depth(S.ExprVisitor[int], partial=True):
        def generic_visit(self, e):
            return 1 + max((self.visit(c) for c in S.children(e)), default=0)

    assert Depth().visit(e) == 6


# ---------------------------------------------------------------------- Python checks, run

def test_python_linear_binding_runs():
    f = checks_function("f(Tensor x, int heads) -> Tensor",
                        {"x": ["2 * H + 1", "heads * S"], "result": ["H", "heads", "S"]})
    env, outs = f(torch.empty(7, 12), 3)
    assert env == {"H": 3, "S": 4} and outs == [[3, 3, 4]]
    raises(f, torch.empty(6, 12), 3, match="ns::op: argument 'x' has size 6 at dimension 0, but expected 2 * H + 1 "
           "(6 - 1 = 5 is not divisible by 2)")
    raises(f, torch.empty(7, 10), 3, match="has size 10 at dimension 1, but expected heads * S (10 is not divisible by 3)")
    raises(f, torch.empty(7, 10), 0, match="its factor heads is 0")
    g = checks_function("f(Tensor x) -> Tensor", {"x": ["H + 3"], "result": ["H"]})
    raises(g, torch.empty(2), match="but expected H + 3 (H = -1 would be negative)")


def test_python_optional_binding_runs():
    f = checks_function("f(Tensor x, Tensor? b, Tensor? c) -> Tensor", {"x": ["N"], "b": ["M"], "c": ["2 * M"],
                                                                      "result": ["N"]})
    e = torch.empty
    assert f(e(3), None, None)[0] == {"N": 3, "M": None}
    assert f(e(3), e(4), None)[0]["M"] == 4
    assert f(e(3), None, e(8))[0]["M"] == 4  # c binds M when b is not given
    assert f(e(3), e(4), e(8))[0]["M"] == 4
    raises(f, e(3), e(4), e(6), match="argument 'c' has size 6 at dimension 0, but expected 2 * M = 8")
    raises(f, e(3), None, e(7), match="argument 'c' has size 7 at dimension 0, but expected 2 * M (7 is not divisible")


def test_python_list_contract_runs():
    f = checks_function("f(Tensor?[] ts, Tensor w) -> Tensor",
                        {"ts": ["_", "2 * D"], "w": ["K"], "result": ["sum(t.size(0) for t in ts)", "D", "K"]})
    e = torch.empty
    env, outs = f([e(2, 6), None, e(5, 6)], e(4))
    assert env == {"D": 3, "K": 4} and outs == [[7, 3, 4]]
    raises(f, [None, e(2, 6), e(1, 4)], e(4), match="argument 'ts[2]' has size 4 at dimension 1, but expected 2 * D = 6")
    raises(f, [e(2, 5)], e(4), match="argument 'ts[0]' has size 5 at dimension 1, but expected 2 * D (5 is not divisible")
    raises(f, [e(2)], e(4), match="argument 'ts[0]' must have 2 dimensions [_, 2 * D], but got 1")
    raises(f, [None], e(4), match="argument 'ts' holds no tensor, but its shape [_, 2 * D] must give D")


def test_runs_of_tensor_lists():
    """`*S` in a list's shape: bound by its first given element, checked against the others;
    a later list binds it too where the earlier held no tensor, and something after the lists
    that uses it needs one of them to hold a tensor (checked after the last)."""
    schema, spec = "f(Tensor[] xs, Tensor?[] ys) -> Tensor", {"xs": ["*S", "D"], "ys": ["*S", "D"],
                                                               "result": ["len(xs) + len(ys)", "*S", "D"]}
    s, plan, errors = plan_of(schema, spec)
    assert not errors and plan.required == (("ys", ("S", "D")),)
    lines = S.cpp_input_checks(plan, "kOp", s)
    assert lines[:2] == ["opwrap::rt::Run S;  // bound by 'xs' when given", "int64_t D = -1;  // bound by 'xs' when given"]
    assert lines.count('  opwrap::rt::bind_or_check_run(kOp, opwrap_name.c_str(), opwrap_e, 0, 1, S, "S");') == 2
    assert lines[-2:] == ['opwrap::rt::require_bound(kOp, "ys", S, "S", "[*S, D]");',
                          'opwrap::rt::require_bound(kOp, "ys", D, "D", "[*S, D]");']
    assert S.cpp_output_shape(plan.outputs[0]) == ("opwrap::rt::concat({{opwrap::rt::shape_add(kOp, static_cast<int64_t>"
                                                   "(xs.size()), static_cast<int64_t>(ys.size()))}, S, {D}})")
    f = checks_function(schema, spec)
    e = torch.empty
    assert f([e(2, 3), e(2, 3)], [None]) == ({"D": 3, "S": [2]}, [[3, 2, 3]])
    assert f([], [None, e(3)]) == ({"D": 3, "S": []}, [[2, 3]])  # 1-d elements: an empty run
    raises(f, [e(2, 3)], [e(4, 3)], match="argument 'ys[0]' has dimensions [4] where *S = [2] was expected")
    raises(f, [e(2, 3)], [e(2, 4)], match="argument 'ys[0]' has size 4 at dimension 1, but expected D = 3")
    raises(f, [e(2, 3), e(3)], [], match="argument 'xs[1]' has dimensions [] where *S = [2] was expected")
    raises(f, [], [None], match="argument 'ys' holds no tensor, but its shape [*S, D] must give *S")
    # a name used after the lists in an expression with another unknown: the first list binds it
    _, plan, errors = plan_of("f(Tensor[] xs, Tensor[] ys) -> Tensor", {"xs": ["D"], "ys": ["D + K"], "result": ["K"]})
    assert not errors and plan.required == (("xs", ("D",)), ("ys", ("K",)))
    # a later list that binds the name too uses it, once bound, in its other dimensions
    f = checks_function("f(Tensor[] xs, Tensor[] ys) -> Tensor", {"xs": ["D"], "ys": ["D", "D + K"], "result": ["K"]})
    assert f([], [e(2, 5)]) == ({"D": 2, "K": 3}, [[3]])
    raises(f, [e(2)], [e(2, 5), e(2, 6)], match="argument 'ys[1]' has size 6 at dimension 1, but expected D + K = 5")


def test_lists_shaped_after_another_list():
    """`ys: "[p.shape for p in xs]"`: as many elements as xs, the i-th of xs[i]'s shape; the
    dimensions form binds nothing and reads the loop's item (a tensor, an int[] item, an index)."""
    f = checks_function("f(Tensor x, Tensor[] xs, Tensor[] ys, Tensor?[] ws, int[] sizes, Tensor[] zs, int n, "
                        "Tensor[] rs) -> Tensor",
                        {"x": ["D"], "xs": ["_", "*S"], "ys": "[p.shape for p in xs]", "ws": "[[] for p in xs]",
                         "zs": "[[s, D] for s in sizes]", "rs": "[[i + 1, _, *S] for i in range(n)]",
                         "result": ["len(xs)"]})
    e = torch.empty
    good = dict(x=e(5), xs=[e(2, 3), e(4, 3)], ys=[e(2, 3), e(4, 3)], ws=[None, e(())], sizes=[1, 2],
                zs=[e(1, 5), e(2, 5)], n=2, rs=[e(1, 7, 3), e(2, 1, 3)])
    assert f(**good) == ({"D": 5, "S": [3]}, [[2]])
    for changed, match in [
        (dict(ys=[e(2, 3)]), "argument 'ys' holds 1 tensor, but expected len(xs) = 2 (its shape is [p.shape for p in xs])"),
        (dict(ys=[e(2, 3), e(3, 4)]), "argument 'ys[1]' has shape [3, 4], but expected xs[1].shape = [4, 3]"),
        (dict(ws=[None, e(1)]), "argument 'ws[1]' must have 0 dimensions [], but got 1"),
        (dict(zs=[e(1, 5), e(3, 5)]), "argument 'zs[1]' has size 3 at dimension 0, but expected s = 2"),
        (dict(zs=[e(1, 5), e(2, 4)]), "argument 'zs[1]' has size 4 at dimension 1, but expected D = 5"),
        (dict(rs=[e(1, 7, 3)]), "argument 'rs' holds 1 tensor, but expected n = 2"),
        (dict(rs=[e(1, 7, 3), e(1, 1, 3)]), "argument 'rs[1]' has size 1 at dimension 0, but expected i + 1 = 2"),
        (dict(rs=[e(1, 7, 3), e(2, 1, 4)]), "argument 'rs[1]' has dimensions [4] where *S = [3] was expected"),
    ]:
        raises(f, *{**good, **changed}.values(), match=match)


def test_python_list_outputs_run():
    f = checks_function("f(Tensor self, int chunks, int[] sizes, Tensor[] ts) -> (Tensor[] a, Tensor[] b, Tensor[] c)",
                        {"self": ["chunks * R", "D"], "a": "[[R, D] for i in range(chunks)]",
                         "b": "[[s, D] for s in sizes]",
                         "c": "[[t.size(0), t.dim()] for t in ts]"})
    e = torch.empty
    env, outs = f(e(6, 2), 3, [1, 4], [e(5), e(2, 2)])
    assert outs == [[[2, 2]] * 3, [[1, 2], [4, 2]], [[5, 1], [2, 2]]]


def test_python_checks_are_symint_safe():
    """The fake kernel's checks on tensors of symbolic sizes: they bind and check without
    guessing a value (the sizes stay symbols)."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv, StatelessSymbolicContext

    f = checks_function("f(Tensor x, Tensor[] ts) -> Tensor",
                        {"x": ["2 * H + 1"], "ts": ["_", "H"], "result": ["sum(t.size(0) for t in ts)", "H"]})
    from torch._dynamo.source import ConstantSource

    mode = FakeTensorMode(shape_env=ShapeEnv())

    def symbolic(name, *shape):
        ctx = StatelessSymbolicContext(dynamic_sizes=[DimDynamic.DYNAMIC] * len(shape))
        return mode.from_tensor(torch.empty(*shape), symbolic_context=ctx, source=ConstantSource(name))

    x, ts = symbolic("x", 9), [symbolic("a", 3, 4), symbolic("b", 2, 4)]
    assert all(isinstance(n, torch.SymInt) for n in (*x.shape, *ts[0].shape))
    with mode:
        env, outs = f(x, ts)
    assert isinstance(env["H"], torch.SymInt) and isinstance(outs[0][0], torch.SymInt)
    assert [int(v) for v in outs[0]] == [5, 4]


# --------------------------------------------------------------------------------- end to end

LIB_FILES = {
    "declarations/shapes.yaml": """\
- func: pair_sum(Tensor x) -> Tensor
  dtypes: [float32, float64]
  kernels: {CPU: pair_sum_cpu}
  shape: {x: ["2 * H + 1", D], result: [H, D]}
- func: heads_first(Tensor x, int heads) -> Tensor
  dtypes: [float32]
  kernels: {CPU: heads_first_cpu}
  shape: {x: [N, "heads * head_size"], result: [heads, N, head_size]}
- func: group_affine(Tensor x, Tensor? scale=None, Tensor? shift=None) -> Tensor
  dtypes: [float32]
  kernels: {CPU: group_affine_cpu}
  shape: {x: [N], scale: [G], shift: [G], result: [N]}
- func: concat_rows(Tensor[] tensors) -> Tensor
  dtypes: [float32, float64]
  kernels: {CPU: concat_rows_cpu}
  shape: {tensors: [_, D], result: ["sum(t.size(0) for t in tensors)", D]}
- func: sum_given(Tensor x, Tensor?[] ts) -> Tensor
  dtypes: [float32]
  kernels: {CPU: sum_given_cpu}
  shape: {x: [N], ts: [N], result: [N]}
- func: chunk_rows(Tensor self, int chunks) -> Tensor[]
  dtypes: [float32]
  kernels: {CPU: chunk_rows_cpu}
  shape: {self: ["chunks * R", D], result: "[[R, D] for i in range(chunks)]"}
- func: split_rows(Tensor self, int[] sizes) -> Tensor[]
  dtypes: [float32]
  kernels: {CPU: split_rows_cpu}
  shape: {self: ["sum(s for s in sizes)", D], result: "[[s, D] for s in sizes]"}
""",
    # Tensor lists of any rank: a run that the elements share, a result shaped like an element,
    # and index bounds checked in every element
    "declarations/elements.yaml": """\
- func: sum_list(Tensor[] xs) -> Tensor
  doc: The elements' sum, as torch.stack(xs).sum(0), for elements of one shape of any rank.
  dtypes: [float32, float64]
  kernels: {CPU: sum_list_cpu}
  shape: {xs: ["*S"], result: ["*S"]}
  derivatives:
    xs: std::vector<at::Tensor>(xs.size(), grad)
    result: at::stack(xs_t).sum(0)
- func: stack_list(Tensor[] xs, Tensor[] ys) -> Tensor
  doc: torch.stack(xs + ys) of elements of one shape of any rank.
  dtypes: [float32, float64]
  kernels: {CPU: stack_list_cpu}
  shape: {xs: ["*S"], ys: ["*S"], result: ["len(xs) + len(ys)", "*S"]}
- func: count_in_lists(Tensor?[] indices, int bins) -> Tensor
  doc: How often each of 0 .. bins - 1 occurs in the index tensors given.
  dtypes: [int32, int64]
  kernels: {CPU: count_in_lists_cpu}
  index: {indices: bins}
  shape: {indices: [_, W], result: [bins, W]}
""",
    # aten's sum.dim_IntList: no rule says its shape, so the fake kernel is declared in Python
    "declarations/fake.yaml": """\
- func: mysum(Tensor self, int[1]? dim=None, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor
  dtypes: {self: [float32, float64, int64], result: [float32, float64, int64]}
  dtype: {result: dtype or self}
  kernels: {CPU: mysum_cpu}
  fake: sharedlib.fakes:mysum
""",
    "sharedlib/fakes.py": """\
def mysum(self, dim=None, keepdim=False, *, dtype=None):
    dims = range(self.dim()) if not dim else [d % max(self.dim(), 1) for d in dim]
    shape = [1 if i in dims else n for i, n in enumerate(self.shape)] if keepdim else \\
        [n for i, n in enumerate(self.shape) if i not in dims]
    return self.new_empty(shape, dtype=dtype or self.dtype)
""",
    "kernels/shapes.h": """\
#pragma once
#include <ATen/core/List.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/sum.h>
#include <vector>
namespace sharedlib::kernels {
template <typename T> void sum_list_cpu(at::TensorList xs, at::Tensor& out) {
  T* o = out.mutable_data_ptr<T>();
  for (int64_t i = 0; i < out.numel(); ++i) o[i] = T(0);
  for (const at::Tensor& x : xs) {
    const at::Tensor c = x.contiguous(); const T* in = c.const_data_ptr<T>();
    for (int64_t i = 0; i < c.numel(); ++i) o[i] += in[i];
  }
}
template <typename T> void stack_list_cpu(at::TensorList xs, at::TensorList ys, at::Tensor& out) {
  T* o = out.mutable_data_ptr<T>();
  for (at::TensorList l : {xs, ys}) for (const at::Tensor& x : l) {
    const at::Tensor c = x.contiguous(); const T* in = c.const_data_ptr<T>();
    for (int64_t i = 0; i < c.numel(); ++i) *o++ = in[i];
  }
}
// out[b][w]: how often b occurs in column w of the index tensors given
template <typename T> void count_in_lists_cpu(const c10::List<std::optional<at::Tensor>>& indices, int64_t bins,
                                              at::Tensor& out) {
  T* o = out.mutable_data_ptr<T>(); const int64_t W = out.size(1);
  for (int64_t i = 0; i < out.numel(); ++i) o[i] = T(0);
  for (size_t k = 0; k < indices.size(); ++k) {
    const std::optional<at::Tensor> t = indices.get(k);
    if (!t.has_value() || !t->defined()) continue;
    const at::Tensor c = t->contiguous(); const T* in = c.const_data_ptr<T>();
    for (int64_t i = 0; i < c.numel(); ++i) o[in[i] * W + i % W] += T(1);
  }
}
template <typename T, typename R> at::Tensor mysum_cpu(const at::Tensor& self, at::OptionalIntArrayRef dim,
                                                       bool keepdim, std::optional<at::ScalarType> dtype) {
  return at::sum(self, dim, keepdim, dtype.value_or(self.scalar_type()));
}
// result[h] = x[2h] + x[2h + 1] (x's last row left out)
template <typename T> void pair_sum_cpu(const at::Tensor& x, at::Tensor& out) {
  const int64_t H = out.size(0), D = out.size(1); const T* in = x.const_data_ptr<T>(); T* o = out.mutable_data_ptr<T>();
  for (int64_t h = 0; h < H; ++h) for (int64_t d = 0; d < D; ++d) o[h * D + d] = in[2 * h * D + d] + in[(2 * h + 1) * D + d];
}
template <typename T> void heads_first_cpu(const at::Tensor& x, int64_t heads, at::Tensor& out) {
  const int64_t N = x.size(0), S = out.size(2); const T* in = x.const_data_ptr<T>(); T* o = out.mutable_data_ptr<T>();
  for (int64_t h = 0; h < heads; ++h) for (int64_t n = 0; n < N; ++n) for (int64_t s = 0; s < S; ++s)
    o[(h * N + n) * S + s] = in[n * heads * S + h * S + s];
}
template <typename T> void group_affine_cpu(const at::Tensor& x, const std::optional<at::Tensor>& scale,
                                            const std::optional<at::Tensor>& shift, at::Tensor& out) {
  const int64_t N = x.size(0); const T* in = x.const_data_ptr<T>(); T* o = out.mutable_data_ptr<T>();
  const bool has_scale = scale.has_value() && scale->defined(), has_shift = shift.has_value() && shift->defined();
  for (int64_t i = 0; i < N; ++i) {
    T v = in[i];
    if (has_scale) v *= scale->const_data_ptr<T>()[i % scale->size(0)];
    if (has_shift) v += shift->const_data_ptr<T>()[i % shift->size(0)];
    o[i] = v;
  }
}
template <typename T> void concat_rows_cpu(at::TensorList tensors, at::Tensor& out) {
  T* o = out.mutable_data_ptr<T>();
  for (const at::Tensor& t : tensors) {
    const at::Tensor c = t.contiguous(); const T* in = c.const_data_ptr<T>();
    for (int64_t i = 0; i < c.numel(); ++i) *o++ = in[i];
  }
}
template <typename T> void sum_given_cpu(const at::Tensor& x, const c10::List<std::optional<at::Tensor>>& ts,
                                         at::Tensor& out) {
  const int64_t N = x.size(0); T* o = out.mutable_data_ptr<T>(); const T* in = x.const_data_ptr<T>();
  for (int64_t i = 0; i < N; ++i) o[i] = in[i];
  for (size_t k = 0; k < ts.size(); ++k) {
    const std::optional<at::Tensor> t = ts.get(k);
    if (!t.has_value() || !t->defined()) continue;
    const at::Tensor c = t->contiguous(); const T* p = c.const_data_ptr<T>();
    for (int64_t i = 0; i < N; ++i) o[i] += p[i];
  }
}
template <typename T> std::vector<at::Tensor> chunk_rows_cpu(const at::Tensor& self, int64_t chunks) {
  const int64_t R = self.size(0) / chunks, D = self.size(1); const T* in = self.const_data_ptr<T>();
  std::vector<at::Tensor> out;
  for (int64_t c = 0; c < chunks; ++c) {
    at::Tensor t = at::empty({R, D}, self.options()); T* o = t.mutable_data_ptr<T>();
    for (int64_t i = 0; i < R * D; ++i) o[i] = in[c * R * D + i];
    out.push_back(t);
  }
  return out;
}
template <typename T> std::vector<at::Tensor> split_rows_cpu(const at::Tensor& self, at::IntArrayRef sizes) {
  const int64_t D = self.size(1); const T* in = self.const_data_ptr<T>();
  std::vector<at::Tensor> out;
  for (int64_t s : sizes) {
    at::Tensor t = at::empty({s, D}, self.options()); T* o = t.mutable_data_ptr<T>();
    for (int64_t i = 0; i < s * D; ++i) o[i] = *in++;
    out.push_back(t);
  }
  return out;
}
}  // namespace sharedlib::kernels
""",
}

# Run in the built library's environment: the real and the fake kernel give the same errors,
# the outputs match aten's, and opcheck and torch.compile(fullgraph=True, dynamic=True) pass.
LIB_CHECK = r'''
import torch, sharedlib
from torch.library import opcheck
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.symbolic_shapes import ShapeEnv
ops = torch.ops.sharedlib
e = torch.randn

def error(f, *a):
    try:
        f(*a)
    except RuntimeError as x:
        return str(x).splitlines()[0]
    raise AssertionError(f"no error from {f}{a}")

def same_error(expected, f, *a):
    real = error(f, *a)
    assert real.startswith(expected), real
    with FakeTensorMode(shape_env=ShapeEnv()):
        fake = error(f, *[torch.empty(t.shape) if isinstance(t, torch.Tensor) else
                          [torch.empty(u.shape) if u is not None else None for u in t] if isinstance(t, list)
                          and t and not isinstance(t[0], int) else t for t in a])
    assert fake.startswith(expected), fake

x = e(7, 3)
assert torch.equal(ops.pair_sum(x), x[0:6:2] + x[1:6:2])
same_error("sharedlib::pair_sum: argument 'x' has size 6 at dimension 0, but expected 2 * H + 1 (6 - 1 = 5 is not "
           "divisible by 2)", ops.pair_sum, e(6, 3))
x = e(5, 12)
assert torch.equal(ops.heads_first(x, 3), x.view(5, 3, 4).permute(1, 0, 2))
same_error("sharedlib::heads_first: argument 'x' has size 10 at dimension 1, but expected heads * head_size (10 is not "
           "divisible by 3)", ops.heads_first, e(5, 10), 3)
x, s, b = e(6), e(2), e(2)
assert torch.equal(ops.group_affine(x), x)
assert torch.allclose(ops.group_affine(x, s, b), x * s.repeat(3) + b.repeat(3))
c = e(3)
assert torch.allclose(ops.group_affine(x, None, c), x + c.repeat(2))  # shift alone binds G
same_error("sharedlib::group_affine: argument 'shift' has size 3 at dimension 0, but expected G = 2",
           ops.group_affine, x, s, e(3))
ts = [e(2, 4), e(3, 4), e(0, 4)]
assert torch.equal(ops.concat_rows(ts), torch.cat(ts))
same_error("sharedlib::concat_rows: argument 'tensors[1]' has size 5 at dimension 1, but expected D = 4",
           ops.concat_rows, [e(2, 4), e(3, 5)])
same_error("sharedlib::concat_rows: argument 'tensors[1]' must have 2 dimensions [_, D], but got 1",
           ops.concat_rows, [e(2, 4), e(3)])
x = e(4)
assert torch.equal(ops.sum_given(x, [None, torch.ones(4), None]), x + 1)
assert torch.equal(ops.sum_given(x, []), x)
same_error("sharedlib::sum_given: argument 'ts[1]' has size 3 at dimension 0, but expected N = 4",
           ops.sum_given, x, [None, e(3)])
x = e(6, 2)
assert all(torch.equal(a, b) for a, b in zip(ops.chunk_rows(x, 3), x.chunk(3), strict=True))
same_error("sharedlib::chunk_rows: argument 'self' has size 7 at dimension 0, but expected chunks * R (7 is not "
           "divisible by 3)", ops.chunk_rows, e(7, 2), 3)
assert all(torch.equal(a, b) for a, b in zip(ops.split_rows(x, [1, 5]), x.split([1, 5]), strict=True))
same_error("sharedlib::split_rows: argument 'self' has size 6 at dimension 0, but expected sum(s for s in sizes) = 5",
           ops.split_rows, x, [1, 4])
with FakeTensorMode(shape_env=ShapeEnv()):
    assert [t.shape for t in ops.chunk_rows(torch.empty(6, 2), 3)] == [(2, 2)] * 3
    assert [t.shape for t in ops.split_rows(torch.empty(6, 2), [1, 5])] == [(1, 2), (5, 2)]
    assert error(ops.concat_rows, []).startswith("sharedlib::concat_rows: argument 'tensors' holds no tensor, but its shape "
                                              "[_, D] must give D")

samples = {
    "pair_sum": [(e(7, 3),), (e(1, 2, dtype=torch.float64),)],
    "heads_first": [(e(5, 12), 3)],
    "group_affine": [(e(6),), (e(6), e(2), e(2)), (e(6), None, e(3))],
    "concat_rows": [([e(2, 4), e(3, 4)],)],
    "sum_given": [(e(4), [None, e(4)])],
    "chunk_rows": [(e(6, 2), 3)],
    "split_rows": [(e(6, 2), [1, 5])],
}
# tensor lists of any rank: elements share the run *S, the result is shaped like one
for shape in [(), (3,), (2, 3, 4)]:
    xs = [e(shape), e(shape), e(shape)]
    torch.testing.assert_close(ops.sum_list(xs), torch.stack(xs).sum(0))
    assert torch.equal(ops.stack_list(xs[:1], xs[1:]), torch.stack(xs))
same_error("sharedlib::sum_list: argument 'xs[2]' has dimensions [2, 4] where *S = [2, 3] was expected",
           ops.sum_list, [e(2, 3), e(2, 3), e(2, 4)])
same_error("sharedlib::stack_list: argument 'ys[0]' has dimensions [3] where *S = [2] was expected",
           ops.stack_list, [e(2)], [e(3)])
with FakeTensorMode(shape_env=ShapeEnv()):  # (the real op cannot dispatch on no tensor)
    assert error(ops.sum_list, []) == "sharedlib::sum_list: argument 'xs' holds no tensor, but its shape [*S] must give *S"
    assert ops.sum_list([torch.empty(2, 3, 1)] * 2).shape == (2, 3, 1)
assert ops.stack_list([], [e(2, 2)]).shape == (1, 2, 2)  # ys binds *S when xs is empty
xs = [e(2, 3, dtype=torch.float64, requires_grad=True) for _ in range(3)]
assert torch.autograd.gradcheck(lambda *xs: ops.sum_list(list(xs)), xs)
assert torch.autograd.gradcheck(lambda *xs: ops.sum_list(list(xs)), xs, check_forward_ad=True, check_backward_ad=False,
                                check_undefined_grad=False, check_batched_grad=False)
# index bounds in every element given; the first tensor given named by its list and index
idx = [torch.tensor([[0, 4], [2, 4]]), None, torch.tensor([[1, 1]])]
ref = torch.stack([torch.cat([idx[0], idx[2]])[:, w].bincount(minlength=5) for w in range(2)], 1)
assert torch.equal(ops.count_in_lists(idx, 5), ref)
assert torch.equal(ops.count_in_lists([None, idx[2].int()], 2), torch.tensor([[0, 0], [1, 1]], dtype=torch.int32))
assert error(ops.count_in_lists, idx, 4) == ("sharedlib::count_in_lists: argument 'indices[0]' holds 4, out of range: "
                                             "its values must lie in [0, 4) (index: bins)")
assert error(ops.count_in_lists, [None, torch.tensor([[0, -1]])], 4).startswith(
    "sharedlib::count_in_lists: argument 'indices[1]' holds -1, out of range")
assert error(ops.count_in_lists, [None, torch.ones(1, 2)], 4) == (
    "sharedlib::count_in_lists: argument 'indices[1]' has dtype Float, but expected one of: int32, int64")
assert error(ops.count_in_lists, [None, torch.ones(1, 2, dtype=torch.long), torch.ones(1, 2, dtype=torch.int)], 4) == (
    "sharedlib::count_in_lists: argument 'indices[2]' has dtype Int, but expected Long (the dtype of 'indices[1]')")
samples.update({
    "sum_list": [([e(2, 3), e(2, 3)],), ([e(()), e(())],), ([e(4, 1, 2)],)],
    "stack_list": [([e(2, 3)], [e(2, 3), e(2, 3)]), ([], [e(5)])],
    "count_in_lists": [(idx, 5), ([None, torch.tensor([[3]])], 4)],
})
for name, calls in samples.items():
    for args in calls:
        opcheck(getattr(ops, name), args)
for name, calls in samples.items():
    op = getattr(ops, name)
    f = torch.compile(lambda *a: op(*a), fullgraph=True, dynamic=True, backend="aot_eager")
    for args in calls:
        out, ref = f(*args), op(*args)
        if isinstance(ref, (list, tuple)):
            assert len(out) == len(ref) and all(torch.equal(a, b) for a, b in zip(out, ref)), name
        else:
            assert torch.equal(out, ref), name
    torch._dynamo.reset()
print("ok")
'''


SHAPE_OPS = ("pair_sum", "heads_first", "group_affine", "concat_rows", "sum_given", "chunk_rows", "split_rows", "mysum")
LIST_OPS = ("sum_list", "stack_list", "count_in_lists")


def add_to_sharedlib(lib):
    """The files above, into conftest's `sharedlib` (made with `codegen init`, namespace
    `sharedlib`), built once per run with the ops of other test files.  test_autograd.py
    declares a `cat_rows` of its own there, so this file's is `concat_rows`."""
    for rel, text in LIB_FILES.items():
        (lib / rel).write_text(text)
    for name in SHAPE_OPS + LIST_OPS:
        (lib / "kernels" / f"{name}.h").write_text('#pragma once\n#include "shapes.h"\n')


@pytest.mark.slow(150)
@pytest.mark.xdist_group("sharedlib")
def test_library_with_the_new_shape_rules(sharedlib):
    made = sharedlib.record
    assert made["init"][0] == 0, made["init"][1]
    assert made["build"][0] == 0, made["build"][1]
    out = run_script(sharedlib.path, LIB_CHECK)  # in this worker, which has sharedlib
    assert out.strip().endswith("ok"), out


@pytest.mark.xdist_group("sharedlib")
def test_the_testing_library_on_tensor_lists(sharedlib):
    """opwrap_codegen.testing, as a library's tests use it, on the list ops: samples whose
    elements share a run and hold indices inside their bound, checked against references, and
    misuse cases with an index one past each end in an element."""
    from opwrap_codegen import testing

    assert sharedlib.record["build"][0] == 0, sharedlib.record["build"][1]
    import_library(sharedlib.path)

    def counts(indices, bins):
        given = [t for t in indices if t is not None]
        return torch.stack([torch.cat(given)[:, w].bincount(minlength=bins) for w in range(given[0].shape[1])],
                           1).to(given[0].dtype)

    refs = {"sum_list": lambda xs: torch.stack(xs).sum(0), "stack_list": lambda xs, ys: torch.stack(xs + ys),
            "count_in_lists": counts}
    misused = []
    for decl in testing.declared_ops(sharedlib.path):
        if decl.name not in LIST_OPS:
            continue
        op = getattr(torch.ops.sharedlib, decl.name).default
        for combo in testing.dtype_combinations(decl):
            dtype = testing.torch_dtype(combo["scalar_t"])
            for sample in testing.sample_inputs(decl, dtype):
                testing.check_reference(decl, op, sample, refs[decl.name])
            for misuse in testing.misuse_cases(decl, dtype):
                testing.check_misuse(decl, op, misuse, refs[decl.name], "sharedlib")
                misused.append(misuse.case)
    assert sum(bool(re.fullmatch(r"indices\[\d\] holding (-1|\d+)", c)) for c in misused) == 4, misused  # 2 dtypes


@pytest.mark.xdist_group("sharedlib")
def test_a_declared_fake_kernel_fakes_what_no_rule_expresses(sharedlib):
    """`fake: sharedlib.fakes:mysum` (aten's sum.dim_IntList, whose shape no rule says): the
    generated fake kernel checks the dtypes, then calls the function; the op is
    pt2_compliant_tag, and opcheck and torch.compile(fullgraph=True, dynamic=True) pass."""
    from torch.library import opcheck
    from torch._subclasses.fake_tensor import FakeTensorMode

    assert sharedlib.record["build"][0] == 0, sharedlib.record["build"][1]
    sys.path.insert(0, str(sharedlib.path))
    try:
        import sharedlib as _  # noqa: F401  (loads the library)
    finally:
        sys.path.remove(str(sharedlib.path))
    op = torch.ops.sharedlib.mysum
    assert torch.Tag.pt2_compliant_tag in op.default.tags
    x = torch.randn(3, 4, 5)
    cases = [((x,), {}), ((x, [1]), {}), ((x, [-1, 0], True), {}), ((x, None, True), {"dtype": torch.float64}),
             ((x.long(), [2]), {})]
    for args, kwargs in cases:
        torch.testing.assert_close(op(*args, **kwargs), torch.sum(*args, **kwargs))
        opcheck(op, args, kwargs)
    f = torch.compile(lambda *a, **k: op(*a, **k), fullgraph=True, dynamic=True, backend="aot_eager")
    for args, kwargs in cases[2:4]:
        torch.testing.assert_close(f(*args, **kwargs), torch.sum(*args, **kwargs))
    with FakeTensorMode(), pytest.raises(RuntimeError, match=r"sharedlib::mysum: output 'result' would have dtype "
                                                             r"torch.int32 \(dtype: dtype or self\), but expected"):
        op(torch.empty(3), dtype=torch.int32)  # the generated checks run before the function
    torch._dynamo.reset()


def test_fake_kernels_of_tensor_list_returns(project):
    """A Tensor[] return with a shape rule is faked from it; one whose length only the kernel
    knows, or with no rule, raises what to declare (and is not pt2_compliant_tag)."""
    (project / "declarations" / "ops.yaml").write_text(
        "- func: chunk2(Tensor self, int chunks) -> Tensor[]\n" + K + "  kernels: {CPU: k}\n"
        "  shape: {self: ['chunks * R', D], result: '[[R, D] for i in range(chunks)]'}\n"
        "- func: uniq(Tensor self) -> Tensor[]\n" + K + "  kernels: {CPU: k}\n"
        "  shape: {self: [N], result: '[[?m] for i in range(?k)]'}\n"
        "- func: nolist(Tensor self) -> Tensor[]\n" + K + "  kernels: {CPU: k}\n")
    for name in ("chunk2", "uniq", "nolist"):
        (project / "kernels" / f"{name}.h").write_text("#pragma once\n")
    r = run_codegen("generate", cwd=project)
    assert r.returncode == 0, r.stderr
    fake = (project / "generated" / "python" / "fake.py").read_text()
    assert ("_out0 = [_runtime.new_output('testlib::chunk2', 'result', [R, D], self.dtype, self.device) "
            "for i in range(chunks)]") in fake
    assert ("_runtime.no_fake('testlib::uniq', 'result', 'a list whose length only the kernel knows "
            "([[?m] for i in range(?k)]), which torch.compile and torch.export cannot trace')") in fake
    assert "no rule gives its shapes: add a \\'shape:\\' rule for \\'result\\' that lists them" in fake
    registration = (project / "generated" / "registration.cpp").read_text()
    assert 'm.def("chunk2(Tensor self, int chunks) -> Tensor[]", {at::Tag::pt2_compliant_tag});' in registration
    assert 'm.def("uniq(Tensor self) -> Tensor[]");' in registration


def test_other_uses_are_held_to_an_outputs_rules():
    """`analyze(uses=...)`: expressions evaluated after the input checks (the `index:` bounds)
    may not use `_` or a name only an optional tensor binds, and make a list that binds a
    name they use required to hold a tensor."""
    s = FunctionSchema.parse("f(Tensor w, Tensor idx, Tensor? b, Tensor[] ts) -> Tensor")
    diag, loc = Diagnostics(), Loc("ops.yaml", 1, 1)
    parsed = {k: S.parse_shape(s, k, v, loc, [loc] * len(v), False, diag)
              for k, v in {"w": ["N"], "idx": ["M"], "b": ["G"], "ts": ["K"]}.items()}
    plan = S.analyze(s, parsed, s.return_names(), diag,
                     uses=((S.Free(), loc), (S.Var("G"), loc), (S.Var("K"), loc), (S.Var("N"), loc)))
    assert [e.message.split(";")[0] for e in diag.errors] == [
        "'_' (a dimension of any size) is for input shapes",
        "dimension 'G' is bound only by optional argument 'b', so it is unknown when that is None"]
    assert plan.required_after("ts") == ("K",)
    assert 'opwrap::rt::require_bound(kOp, "ts", K, "K", "[K]");' in S.cpp_input_checks(plan, "kOp", s)


def test_a_literal_size_is_named_once():
    """A rule's literal dimension is the expected size itself: `expected 3`, not `expected 3 = 3`
    (the fake kernel's check here; the C++ wrapper's check_size prints it the same way)."""
    f = checks_function("f(Tensor x) -> Tensor", {"x": ["N", "3"], "result": ["N"]})
    with pytest.raises(RuntimeError) as e:
        f(torch.empty(2, 4))
    assert str(e.value).endswith("ns::op: argument 'x' has size 4 at dimension 1, but expected 3"), str(e.value)
    g = checks_function("f(Tensor x, Tensor y) -> Tensor", {"x": ["N"], "y": ["N"], "result": ["N"]})
    with pytest.raises(RuntimeError) as e:
        g(torch.empty(2), torch.empty(3))
    assert str(e.value).endswith("argument 'y' has size 3 at dimension 0, but expected N = 2"), str(e.value)
