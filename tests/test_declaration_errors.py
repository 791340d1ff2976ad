"""Bad declarations: `path:line:col: error: ...`, exit status 2, and no traceback.  The cases
run the CLI in process (conftest.codegen_in_process); a few run it as a program."""

import re

import pytest

from conftest import codegen_in_process, run_codegen

GOOD_KERNEL = "template <typename scalar_t> void k(const at::Tensor&, at::Tensor&) {}\n"


def check_error(project, yaml_text, expected, *, file="ops.yaml", raw=None):
    path = project / "declarations" / file
    if raw is not None:
        path.write_bytes(raw)
    else:
        path.write_text(yaml_text, encoding="utf-8")
    (project / "kernels" / "f.h").write_text(GOOD_KERNEL)
    r = codegen_in_process("generate", cwd=project)
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr
    # every case names its exact position: path:line:col of the first line of the message
    assert re.match(r"declarations/\S+\.yaml:\d+:\d+: error: ", expected), expected
    assert expected in r.stderr, r.stderr
    assert not (project / "generated").exists()
    return r.stderr


@pytest.mark.parametrize("yaml_text, expected", [
    # unknown field, with a near-miss suggestion
    ("- func: f(Tensor self) -> Tensor\n  dtypse: [float32]\n",
     "declarations/ops.yaml:2:3: error: unknown field 'dtypse'\ndeclarations/ops.yaml:2:3: note: did you mean 'dtype"),
    # a dtype that does not exist, with the valid list
    ("- func: f(Tensor self) -> Tensor\n  dtypes: [float32, flaot64]\n  like: self\n",
     "declarations/ops.yaml:2:21: error: unknown dtype 'flaot64'"),
    # a schema error at its column inside the YAML scalar
    ("- func: f(Tensor self, Tensr other) -> Tensor\n",
     "declarations/ops.yaml:1:24: error: invalid schema: unknown type 'Tensr'"),
    ("- func: 'f(Tensor self) -> '\n", "declarations/ops.yaml:1:28: error: invalid schema: expected a type"),
    # a name that is not an identifier
    ("- func: my-op(Tensor self) -> Tensor\n", "declarations/ops.yaml:1:11: error: invalid schema: expected '(' to open the argument list"),
    ("- func: 1op(Tensor self) -> Tensor\n", "declarations/ops.yaml:1:9: error: invalid schema: malformed number '1o'"),
    # missing func
    ("- doc: nothing\n", "declarations/ops.yaml:1:3: error: missing required field 'func'"),
    # YAML syntax errors
    ("- func: f(Tensor self) -> Tensor\n  dtypes: [float32\n", "declarations/ops.yaml:3:1: error: invalid YAML"),
    # namespace in func
    ("- func: other::f(Tensor self) -> Tensor\n  dtypes: [float32]\n", "declarations/ops.yaml:1:9: error: 'func' must not name a namespace"),
    # shape rule naming something that is not an argument or return
    ("- func: f(Tensor self) -> Tensor\n  dtypes: [float32]\n  shape: {slef: [N], result: [N]}\n",
     "declarations/ops.yaml:3:11: error: 'slef' is neither a Tensor argument nor a return of f"),
    # a dimension used before it is bound
    ("- func: f(Tensor self) -> Tensor\n  dtypes: [float32]\n  shape: {self: [N], result: [M]}\n",
     "declarations/ops.yaml:3:31: error: unknown dimension 'M'"),
    # a kernel header that does not exist
    ("- func: g(Tensor self) -> Tensor\n  dtypes: [float32]\n  kernels: {CPU: nope}\n  like: self\n",
     "declarations/ops.yaml:3:12: error: kernel header 'kernels/g.h' not found"),
    # a header path escaping the kernels directory
    ("- func: f(Tensor self) -> Tensor\n  header: ../../etc/passwd.h\n", "declarations/ops.yaml:2:11: error: 'header' must be a "
     "relative path inside the kernels directory ending in .h, .hpp or .cuh, not '../../etc/passwd.h'"),
    # an unknown dispatch key, with a suggestion
    ("- func: f(Tensor self) -> Tensor\n  kernels: {CUPA: k}\n", "declarations/ops.yaml:2:13: error: unknown dispatch key 'CUPA'\n"
     "declarations/ops.yaml:2:13: note: did you mean 'CUDA'?"),
    # a file that is not a list
    ("func: f(Tensor self) -> Tensor\n", "declarations/ops.yaml:1:1: error: a declaration file must be a list"),
])
def test_bad_declaration(project, yaml_text, expected):
    check_error(project, yaml_text, expected)


def test_duplicate_op_across_files(project):
    (project / "declarations" / "a.yaml").write_text("- func: f(Tensor self) -> Tensor\n")
    err = check_error(project, "\n- func: f(Tensor self) -> Tensor\n", "declarations/b.yaml:2:9: error: duplicate op 'f'", file="b.yaml")
    assert "first declared at" in err and "declarations/a.yaml:1:9" in err


def test_duplicate_field(project):
    check_error(project, "- func: f(Tensor self) -> Tensor\n  doc: a\n  doc: b\n", "declarations/ops.yaml:3:3: error: duplicate key 'doc'")


def test_empty_file(project):
    check_error(project, "", "declarations/ops.yaml:1:1: error: empty declaration file")


def test_non_utf8_file(project):
    check_error(project, None, "declarations/ops.yaml:2:2: error: file is not valid UTF-8 (byte 0xff)", raw=b"- func: f(Te\n \xff\xfe")


def test_every_error_is_reported_not_just_the_first(project):
    err = check_error(project, "- func: f(Tensor self) -> Tensor\n  bogus: 1\n- func: g(Tensr x) -> Tensor\n",
                      "declarations/ops.yaml:2:3: error: unknown field 'bogus'")
    assert "declarations/ops.yaml:3:11: error: invalid schema" in err
    assert "2 errors" in err


def test_yaml_is_loaded_safely(project):
    # A Python tag would run code under yaml.load; the safe loader rejects it as bad YAML.
    check_error(project, "- func: !!python/object/apply:os.system ['touch pwned']\n", "declarations/ops.yaml:1:9: error: YAML tag '!!python/object/apply:os.system' is not allowed")
    assert not (project / "pwned").exists()


def test_bad_config_is_exit_2(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.codegen]\nnamespace = "has space"\nbogus = 1\n')
    r = run_codegen("generate", cwd=tmp_path)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "pyproject.toml:1:1: error: unknown [tool.codegen] key 'bogus'" in r.stderr
    assert "namespace must be a C++ identifier" in r.stderr


D = "- func: f(Tensor self, Tensor other, float alpha) -> Tensor\n  dtypes: [float32]\n  like: self\n  derivatives:\n"
D2 = "- func: g(Tensor self) -> (Tensor a, Tensor b)\n  dtypes: [float32]\n  like: self\n  derivatives:\n"


@pytest.mark.parametrize("yaml_text, expected", [
    # an unknown name in a formula, at its column, with a suggestion
    (D + "    self: grad * alpah\n    other: grad\n",
     "declarations/ops.yaml:5:18: error: unknown name 'alpah' in the derivative formula for 'self'\n"
     "declarations/ops.yaml:5:18: note: did you mean 'alpha'?"),
    # a key that is not an argument
    (D + "    slef: grad\n    other: grad\n",
     "declarations/ops.yaml:5:5: error: 'slef' is neither an argument nor a return of f"),
    # forward-derivative formulas (keys naming a return): their names, their returns
    (D + "    self: grad\n    other: grad\n    result: self_t * alpah\n",
     "declarations/ops.yaml:7:22: error: unknown name 'alpah' in the forward-derivative formula for 'result'"),
    (D2 + "    self: grad_a + grad_b\n    result: self_t\n",
     "declarations/ops.yaml:6:5: error: 'result' names the only differentiable return, but g has 2: name the return "
     "(a, b)"),
    (D2 + "    self: grad_a\n    output_differentiability: [true, false]\n    b: self_t\n",
     "declarations/ops.yaml:7:5: error: 'b' is not a differentiable return, so it has no forward derivative"),
    ("- func: h_(Tensor(a!) self, Tensor other) -> Tensor(a!)\n  dtypes: [float32]\n  derivatives:\n"
     "    self: grad\n    other: grad\n    result: self_t + self * other_t\n",
     "declarations/ops.yaml:6:22: error: 'self' is modified in place by h_; its value before the call is not "
     "available to a forward-derivative formula"),
    # a non-Tensor argument has no gradient
    (D + "    self: grad\n    other: grad\n    alpha: grad.sum()\n",
     "declarations/ops.yaml:7:5: error: 'alpha' is not a Tensor argument; only Tensor inputs have gradients"),
    # every Tensor input needs a formula (or non_differentiable): no silent detaching
    (D + "    self: grad\n", "declarations/ops.yaml:5:5: error: no derivative formula for Tensor argument 'other'"),
    # two formulas for one input
    (D + "    self: grad\n    self, other: f(grad)\n", "declarations/ops.yaml:6:5: error: 'self' has a second formula"),
    # `grad` is ambiguous with two differentiable outputs
    (D2 + "    self: grad * 2\n", "declarations/ops.yaml:5:11: error: unknown name 'grad' in the derivative formula for 'self'\n"
     "declarations/ops.yaml:5:11: note: g has 2 differentiable outputs: use grads[i] or grad_a, grad_b"),
    # grad_input_mask exists only for multi-input keys
    (D + "    self: 'grad_input_mask[0] ? grad : grad'\n    other: grad\n",
     "declarations/ops.yaml:5:12: error: unknown name 'grad_input_mask'"),
    # output_differentiability must have one entry per return
    (D2 + "    self: grad_a\n    output_differentiability: [true]\n",
     "declarations/ops.yaml:6:31: error: 'output_differentiability' must be a list of 2 true/false values"),
    # the gradient of an output declared non-differentiable
    (D2 + "    self: grad_a + grad_b\n    output_differentiability: [true, false]\n",
     "declarations/ops.yaml:5:20: error: 'grad_b' is the gradient of a non-differentiable output"),
    (D + "    self: grad\n    other: grad\n    once_differentiable: maybe\n",
     "declarations/ops.yaml:7:26: error: 'derivatives.once_differentiable' must be true or false, not 'maybe'"),
    # the value of an argument written in place is gone by the time backward runs
    ("- func: h_(Tensor(a!) self, Tensor other) -> Tensor(a!)\n  dtypes: [float32]\n  derivatives:\n"
     "    self: grad * self\n    other: grad\n",
     "declarations/ops.yaml:4:18: error: 'self' is modified in place by h_"),
    (D + "    self: [grad]\n    other: grad\n",
     "declarations/ops.yaml:5:11: error: 'derivatives.self' must be a C++ expression, not a list"),
    (D + "    self: grad.sum(0)) * alpha\n    other: grad\n",
     "declarations/ops.yaml:5:22: error: 'derivatives.self' is not a C++ expression: unmatched ')'"),
    (D + "    self: grad; system()\n    other: grad\n",
     "declarations/ops.yaml:5:15: error: 'derivatives.self' is not a C++ expression: ';' ends a statement"),
    # a return that views an argument (aten records those with as_view; generated nodes do not)
    ("- func: v(Tensor(a) self) -> Tensor(a)\n  dtypes: [float32]\n  like: self\n  derivatives:\n    self: grad\n",
     "declarations/ops.yaml:1:9: error: return 'result' is a view of an argument (Tensor(a)): an op with "
     "derivatives must return a new tensor or an argument it writes"),
    # a data-dependent size is for outputs only
    ("- func: q(Tensor self) -> Tensor\n  dtypes: [float32]\n  shape: {self: ['?n'], result: ['?n']}\n",
     "declarations/ops.yaml:3:19: error: '?n' (a data-dependent size) is for outputs"),
    # a factory has nothing to differentiate
    ("- func: k(int n) -> Tensor\n  dtypes: [int64]\n  kernels: {CPU: f}\n  header: f.h\n  dtype: {result: int64}\n"
     "  shape: {result: [n]}\n  derivatives: {}\n",
     "declarations/ops.yaml:7:16: error: k has no Tensor input, so nothing to differentiate"),
])
def test_bad_derivatives(project, yaml_text, expected):
    check_error(project, yaml_text, expected)


@pytest.mark.parametrize("yaml_text, expected", [
    ("- func: f(Tensor self) -> Tensor\n  dtypes: [float32]\n  like: self\n  autocast: lower_precison\n",
     "declarations/ops.yaml:4:13: error: unknown autocast policy 'lower_precison'\n"
     "declarations/ops.yaml:4:13: note: did you mean 'lower_precision'?"),
    ("- func: f_(Tensor(a!) self) -> Tensor(a!)\n  dtypes: [float32]\n  autocast: fp32\n",
     "declarations/ops.yaml:3:13: error: f_ writes its arguments in place"),
])
def test_bad_autocast(project, yaml_text, expected):
    check_error(project, yaml_text, expected)


@pytest.mark.parametrize("yaml_text, expected", [
    ("- func: f(Tensor self) -> Tensor\n  dtypes: [float32]\n  like: self\n  pointwise: 3\n",
     "declarations/ops.yaml:4:14: error: 'pointwise' must be true or false, or an elementwise expression such as "
     "'self + other', not the number 3"),
    ("- func: f(Tensor self) -> Tensor\n  dtypes: [float32]\n  like: self\n  vmap: rules.linear\n",
     "declarations/ops.yaml:4:9: error: 'vmap' must be a Python name as 'module:attr', not 'rules.linear'"),
    ("- func: f_(Tensor(a!) self) -> Tensor(a!)\n  dtypes: [float32]\n  pointwise: true\n",
     "declarations/ops.yaml:3:14: error: the pointwise batching rule is for ops that do not write their arguments"),
])
def test_bad_vmap_fields(project, yaml_text, expected):
    check_error(project, yaml_text, expected)


@pytest.mark.parametrize("yaml_text, expected", [
    ("- func: f(Tensor self) -> Tensor\n  dtypes: [float32]\n  like: self\n  fake: fakes.f\n",
     "declarations/ops.yaml:4:9: error: 'fake' must be a Python name as 'module:attr', not 'fakes.f'"),
    # the function computes every return: a shape rule beside it would be a second one
    ("- func: f(Tensor self) -> (Tensor a, Tensor b)\n  dtypes: [float32]\n  kernels: {CPU: k}\n  header: f.h\n"
     "  shape: {self: [N], a: [N]}\n  fake: fakes:f\n",
     "declarations/ops.yaml:6:9: error: 'fake' computes every return, but 'a' has a shape rule too (the real output "
     "would follow the rule, the fake one the function)\ndeclarations/ops.yaml:6:9: note: leave the return out of "
     "'shape:' (and 'like:'): the kernel makes it and returns it"),
    ("- func: f(Tensor self) -> Tensor\n  dtypes: [float32]\n  pointwise: self\n  fake: fakes:f\n",
     "declarations/ops.yaml:4:9: error: a pointwise or row-wise op's fake kernel is generated from its expression or "
     "program"),
])
def test_bad_fake_fields(project, yaml_text, expected):
    check_error(project, yaml_text, expected)


PW = "- func: f(Tensor self, Tensor other, float alpha) -> Tensor\n  dtypes: [float32]\n"


@pytest.mark.parametrize("yaml_text, expected", [
    # positions inside a one-line expression
    (PW + "  pointwise: self + alpah * other\n",
     "declarations/ops.yaml:3:21: error: unknown name 'alpah' in pointwise expression\n"
     "declarations/ops.yaml:3:21: note: did you mean 'alpha'?"),
    (PW + "  pointwise: self + tanhh(other)\n",
     "declarations/ops.yaml:3:21: error: unknown function 'tanhh' in pointwise expression"),
    (PW + "  pointwise: self + (other\n", "declarations/ops.yaml:3:21: error: invalid pointwise expression: '(' was never closed"),
    (PW + "  pointwise: self % other\n", "declarations/ops.yaml:3:14: error: operator '%' is not supported"),
    (PW + "  pointwise: self + other > 0\n", "declarations/ops.yaml:3:14: error: a comparison is a condition: use it as the "
     "first argument of where"),
    (PW + "  pointwise: where(self, other, alpha)\n", "declarations/ops.yaml:3:20: error: the condition of where() must be one comparison"),
    (PW + "  pointwise: tanh(self, other)\n", "declarations/ops.yaml:3:14: error: tanh() takes 1 positional argument"),
    (PW + "  pointwise: self * alpha\n", "declarations/ops.yaml:3:14: error: Tensor argument 'other' is not used"),
    (PW + "  pointwise: self + 'one'\n", "declarations/ops.yaml:3:21: error: only numbers may appear as literals"),
    # positions inside a literal block, on its second line
    (PW + "  pointwise: |\n    x = self + other\n    x * alpah\n",
     "declarations/ops.yaml:5:9: error: unknown name 'alpah'"),
    (PW + "  pointwise: |\n    self = other\n    self\n", "declarations/ops.yaml:4:5: error: 'self' is already defined"),
    (PW + "  pointwise: |\n    x + 1\n    self\n", "declarations/ops.yaml:4:5: error: each line before the last must bind one name"),
    # what the expression decides cannot also be declared
    (PW + "  pointwise: self + other\n  like: self\n", "declarations/ops.yaml:4:9: error: 'like' does not apply to an op "
     "with a pointwise expression"),
    (PW + "  pointwise: self + other\n  kernels: {CPU: f}\n", "declarations/ops.yaml:4:12: error: 'kernels' does not apply to "
     "an op with a pointwise expression"),
    # schema and dtype limits
    ("- func: f(Tensor self) -> (Tensor, Tensor)\n  dtypes: [float32]\n  pointwise: self\n",
     "declarations/ops.yaml:3:14: error: the expression computes 1 value, but the op returns 2"),
    ("- func: f(Tensor self) -> Tensor\n  dtypes: [float32]\n  pointwise: self, self\n",
     "declarations/ops.yaml:3:14: error: the expression computes 2 values, but the op returns 1"),
    ("- func: f(Tensor self) -> (Tensor, int)\n  dtypes: [float32]\n  pointwise: self, self\n",
     "declarations/ops.yaml:3:14: error: a pointwise expression computes new Tensors"),
    ("- func: f(Tensor self, int[] dims) -> Tensor\n  dtypes: [float32]\n  pointwise: self\n",
     "declarations/ops.yaml:3:14: error: argument 'dims' of type int[] cannot be used by a pointwise op"),
    ("- func: f(Tensor self) -> Tensor\n  dtypes: [float32, int64]\n  pointwise: tanh(self)\n",
     "declarations/ops.yaml:3:14: error: the expression uses '/' or a floating-point function, but the op declares "
     "integer dtypes (int64)"),
    ("- func: f(Tensor self) -> Tensor\n  dtypes: [float32, bool]\n  pointwise: self\n",
     "declarations/ops.yaml:2:11: error: pointwise expressions support real floating and integer dtypes that aten's "
     "vectorized loops take, not bool"),
    ("- func: f(Tensor self) -> Tensor\n  dtypes: [float32, float8_e4m3fn, uint16]\n  pointwise: self\n",
     "declarations/ops.yaml:2:11: error: pointwise expressions support real floating and integer dtypes that aten's "
     "vectorized loops take, not float8_e4m3fn, uint16\ndeclarations/ops.yaml:2:11: note: a kernel of your own "
     "(`kernels:`) takes any dtype"),
])
def test_bad_pointwise_expressions(project, yaml_text, expected):
    check_error(project, yaml_text, expected)


RW = ("- func: f(Tensor x, Tensor w, float eps) -> (Tensor y, Tensor r)\n  dtypes: [float32]\n"
      "  shape: {x: ['*B', D], w: [D], y: x.shape, r: ['*B']}\n")


@pytest.mark.parametrize("yaml_text, expected", [
    (RW + "  rowwise: |\n    s = sum(x)\n    x * w / s, x\n",
     "declarations/ops.yaml:6:16: error: the return 'r' has one value per row, but this value varies along the row"),
    (RW + "  rowwise: |\n    s = sum(eps)\n    x * w, s\n",
     "declarations/ops.yaml:5:13: error: sum() reduces over the row, but its argument is the same for every element"),
    (RW + "  rowwise: x * w, eps\n", "declarations/ops.yaml:4:12: error: the program reduces nothing"),
    (RW + "  rowwise: x * w / total(x), eps\n", "declarations/ops.yaml:4:20: error: unknown function 'total'"),
    (RW + "  rowwise: x * w / sum(x)\n", "declarations/ops.yaml:4:12: error: the program computes 1 value, but the op "
     "returns 2"),
    (RW + "  rowwise: |\n    x = sum(x)\n    x, x\n", "declarations/ops.yaml:5:5: error: 'x' is already defined"),
    (RW + "  kernels: {CPU: f}\n  rowwise: x * w / sum(x), sum(x)\n",
     "declarations/ops.yaml:4:12: error: 'kernels' does not apply to an op with a row-wise program"),
    ("- func: f(Tensor x, Tensor w) -> Tensor\n  dtypes: [float32]\n  shape: {x: ['*B', D], w: [E], result: x.shape}\n"
     "  rowwise: x * w / sum(x)\n", "declarations/ops.yaml:4:12: error: the shape of 'w' is ['E']: a row-wise op's "
     "tensors are rows"),
    ("- func: f(Tensor x) -> Tensor\n  dtypes: [float32]\n  rowwise: x / sum(x)\n",
     "declarations/ops.yaml:3:12: error: 'x' has no shape rule"),
    ("- func: f(Tensor x) -> Tensor\n  dtypes: [int64]\n  shape: {x: ['*B', D], result: x.shape}\n  rowwise: x - max(x)\n",
     "declarations/ops.yaml:2:11: error: row-wise programs compute in real floating dtypes that aten's vectorized "
     "loops take, not int64"),
    ("- func: f(Tensor x) -> Tensor\n  dtypes: float8\n  shape: {x: ['*B', D], result: x.shape}\n  rowwise: x - max(x)\n",
     "declarations/ops.yaml:2:11: error: row-wise programs compute in real floating dtypes that aten's vectorized "
     "loops take, not float8_e4m3fn, float8_e5m2, float8_e4m3fnuz, float8_e5m2fnuz, float8_e8m0fnu\n"
     "declarations/ops.yaml:2:11: note: a kernel of your own (`kernels:`) takes any dtype"),
])
def test_bad_rowwise_programs(project, yaml_text, expected):
    check_error(project, yaml_text, expected)


# Names no rule refuses (issue 36): keywords of C++ and Python, and the names the generated
# pointwise and row-wise kernels declare themselves.
FREE_NAMES = ("default", "new", "delete", "template", "this", "operator", "int", "lambda", "from", "yield", "Tv",
              "opmath_t", "scalar_t", "iter", "op", "x", "Vec", "kOp", "kArchs", "opwrap_out0", "opwrap_sincos0",
              "D", "rows", "row", "d", "prog", "start", "V", "opwrap_n", "opwrap_r0", "opwrap_stage0")


def test_expression_ops_take_any_argument_name_the_schema_takes(project):
    """A pointwise expression's and a row-wise program's arguments may have any name that
    torch.library takes (each is renamed in C++ alone), written in the expression as the
    schema writes it; a Python keyword among them keeps every position in the text (an error
    after it points where it is)."""
    import torch
    ops = []
    for i, name in enumerate(FREE_NAMES):
        schema = f"pw{i}(Tensor {name}, Tensor other, float alpha) -> Tensor"
        torch._C.parse_schema(schema)
        ops.append(f"- func: {schema}\n  dtypes: [float32]\n  pointwise: |\n    b = {name} * alpha\n"
                   f"    b + other\n  derivatives: {{{name}: grad * alpha, other: grad}}\n"
                   f"- func: rw{i}(Tensor {name}, Tensor w, float eps) -> (Tensor y, Tensor r)\n  dtypes: [float32]\n"
                   f"  shape: {{{name}: ['*B', K], w: [K], y: {name}.shape, r: ['*B']}}\n"
                   f"  rowwise: |\n    s = sum({name} * {name})\n    {name} * w / (s + eps), s\n")
    (project / "declarations" / "ops.yaml").write_text("".join(ops))
    r = codegen_in_process("generate", cwd=project)
    assert r.returncode == 0, r.stderr
    for module in ("fake", "ops", "vmap"):  # Python: `lambda` and `from` are `lambda_` and `from_` there
        path = project / "generated" / "python" / f"{module}.py"
        compile(path.read_text(), str(path), "exec")
    import shutil
    shutil.rmtree(project / "generated")
    check_error(project, PW.replace("Tensor self", "Tensor from") + "  pointwise: from + alpah * other\n",
                "declarations/ops.yaml:3:21: error: unknown name 'alpah' in pointwise expression")


def test_a_hand_written_op_may_name_an_argument_like_the_wrapper_locals(project):
    # The CUDA wrapper declares its device guard as `device_guard` (api/kernel.py): an argument
    # of that name is renamed in C++, as `kOp` and `m` are, and the guard still takes the
    # first tensor's device.
    (project / "declarations" / "ops.yaml").write_text(
        "- func: f(Tensor device_guard, Tensor kOp, Tensor m) -> Tensor\n  dtypes: [float32]\n"
        "  kernels: {CPU: f_cpu, CUDA: f_cuda}\n  header: f.h\n  like: device_guard\n")
    for header in ("f.h", "f.cuh"):
        (project / "kernels" / header).write_text("#pragma once\n")
    r = codegen_in_process("generate", cwd=project)
    assert r.returncode == 0, r.stderr
    cu = (project / "generated" / "cuda" / "f.cu").read_text()
    assert "device_guard(device_guard_.device())" in cu, cu
    assert "f_cuda<float>(device_guard__c, kOp__c, m__c, result)" in cu, cu


CLS = "- class: Q\n  header: f.h\n  init: (Tensor t)\n  flatten: {t: self->t()}\n"


@pytest.mark.parametrize("yaml_text, expected", [
    (CLS + "  methods:\n    push: {schema: '(Tensor x) -> ()'}\n",
     "declarations/ops.yaml:6:5: error: method 'push' of Q has no 'fake' body"),
    (CLS + "  methods:\n    push: {schema: '(Tensor x) -> ()', fake: 'return ('}\n",
     "declarations/ops.yaml:6:46: error: the fake body of 'push' is not valid Python"),
    (CLS + "  method: {}\n", "declarations/ops.yaml:5:3: error: unknown field 'method' of a class"),
    (CLS + "  methods: {}\n- func: g(__torch__.torch.classes.testlib.Q q, Tensor x) -> ()\n  method: q.pop\n",
     "declarations/ops.yaml:7:11: error: class Q has no method 'pop'"),
    # a lower-case unknown name is a type variable to the schema parser (torch's `t[] self`)
    (CLS.replace("(Tensor t)", "(ensor t)"),
     "declarations/ops.yaml:3:9: error: class Q: constructor argument 't' of type ensor is not supported"),
])
def test_bad_classes(project, yaml_text, expected):
    check_error(project, yaml_text, expected)


OK = "  dtypes: [float32]\n  pointwise: self\n"
K = "  dtypes: [float32]\n  kernels: {CPU: k}\n  header: f.h\n"


# The schema string, broken at each of its parts; then the other fields of an entry.
@pytest.mark.parametrize("yaml_text, expected", [
    ("- func: f.(Tensor self) -> Tensor\n", "declarations/ops.yaml:1:11: error: invalid schema: expected an overload name after '.'"),
    ("- func: f.a.b(Tensor self) -> Tensor\n", "declarations/ops.yaml:1:12: error: invalid schema: expected '(' to open the argument list"),
    ("- func: f.default(Tensor self) -> Tensor\n", "declarations/ops.yaml:1:11: error: invalid schema: 'default' is not a legal overload name"),
    ("- func: f(Tensor) -> Tensor\n", "declarations/ops.yaml:1:17: error: invalid schema: expected an argument name but found ')'"),
    ("- func: f(Tensor(a! self) -> Tensor\n",
     "declarations/ops.yaml:1:21: error: invalid schema: expected ')' to close the alias annotation but found 'self'"),
    ("- func: f(int[x] n) -> Tensor\n", "declarations/ops.yaml:1:15: error: invalid schema: expected a list size but found 'x'"),
    ("- func: f(Tensor self=) -> Tensor\n", "declarations/ops.yaml:1:23: error: invalid schema: expected None but found ')'"),
    ("- func: f(Tensor self, int n=[1, ) -> Tensor\n", "declarations/ops.yaml:1:30: error: invalid schema: expected a default value"),
    ("- func: f(Tensor self -> Tensor\n", "declarations/ops.yaml:1:23: error: invalid schema: expected ',' or ')' but found '->'"),
    ("- func: f(Tensor self) Tensor\n", "declarations/ops.yaml:1:24: error: invalid schema: expected '->' before the returns"),
    ("- func: f(Tensor self) -> Tensr\n", "declarations/ops.yaml:1:27: error: invalid schema: unknown type 'Tensr'"),
    ("- func: f(Tensor self, Tensor self) -> Tensor\n", "declarations/ops.yaml:1:31: error: duplicate argument name 'self'"),
    ("- func: f(Tensor self) -> (Tensor a, Tensor a)\n", "declarations/ops.yaml:1:45: error: duplicate return name 'a'"),
    ("- func: ''\n", "declarations/ops.yaml:1:9: error: 'func' must be a schema string"),
    ("- func: [f]\n", "declarations/ops.yaml:1:9: error: 'func' must be a schema string"),
    # names with path characters never reach a file name
    ("- func: ../f(Tensor self) -> Tensor\n", "declarations/ops.yaml:1:11: error: invalid schema: unexpected character '/'"),
    ("- func: f.a/b(Tensor self) -> Tensor\n", "declarations/ops.yaml:1:12: error: invalid schema: unexpected character '/'"),
    ("- class: ../Q\n  header: f.h\n  init: (Tensor t)\n  flatten: {t: self->t()}\n",
     "declarations/ops.yaml:1:3: error: 'class' must name the class with an identifier"),
    ("- class: Q\n  header: f.h\n  init: (Tensor t)\n  flatten: {'a/b': self->t()}\n",
     "declarations/ops.yaml:4:13: error: state name 'a/b' is not an identifier"),
    ("- func: f(Tensor self) -> Tensor\n  header: f.h/../../x.h\n",
     "declarations/ops.yaml:2:11: error: 'header' must be a relative path inside the kernels directory ending in "
     ".h, .hpp or .cuh, not 'f.h/../../x.h'"),
    ("- func: f(Tensor self) -> Tensor\n  kernels: {CPU: 'a;system()'}\n",
     "declarations/ops.yaml:2:18: error: 'kernels.CPU' must be a C++ function template name, not 'a;system()'"),
    # dtypes, tags, flags
    ("- func: f(Tensor self) -> Tensor\n  dtypes: float33\n  pointwise: self\n",
     "declarations/ops.yaml:2:11: error: unknown dtype 'float33'\ndeclarations/ops.yaml:2:11: note: did you mean 'float32'?"),
    ("- func: f(Tensor self) -> Tensor\n  dtypes: []\n  pointwise: self\n", "declarations/ops.yaml:2:11: error: 'dtypes' must not be empty"),
    ("- func: f(Tensor self) -> Tensor\n  dtypes: [float32, float32]\n  pointwise: self\n",
     "declarations/ops.yaml:2:21: error: dtype 'float32' is listed twice"),
    ("- func: f(Tensor self) -> Tensor\n  tags: [pt2_compliant]\n" + OK,
     "declarations/ops.yaml:2:10: error: unknown tag 'pt2_compliant'\ndeclarations/ops.yaml:2:10: note: did you mean 'pt2_compliant_tag'?"),
    ("- func: f(Tensor self) -> Tensor\n  contiguous: yes please\n" + K + "  like: self\n",
     "declarations/ops.yaml:2:15: error: 'contiguous' must be true or false"),
    ("- func: f(Tensor self) -> Tensor\n  doc: [a]\n" + OK, "declarations/ops.yaml:2:8: error: 'doc' must be a string"),
    # output shapes and dtypes
    ("- func: f(Tensor self) -> Tensor\n" + K + "  like: other\n", "declarations/ops.yaml:5:9: error: 'like: other' must name a Tensor argument of f"),
    ("- func: f(Tensor self) -> Tensor\n" + K + "  like: self\n  dtype: {result: float99}\n",
     "declarations/ops.yaml:6:19: error: dtype of 'result' must be a dtype name, a Tensor argument or a ScalarType argument, not 'float99'"),
    ("- func: f(Tensor self) -> (Tensor a, Tensor b)\n" + K + "  shape: {self: [N], a: [N], b: [N], c: [N]}\n",
     "declarations/ops.yaml:5:38: error: 'c' is neither a Tensor argument nor a return of f"),
    ("- func: f(Tensor self) -> Tensor\n" + K + "  shape: {self: [N], result: [N], result: [N]}\n",
     "declarations/ops.yaml:5:35: error: duplicate key 'result'"),
    ("- func: f(Tensor self) -> Tensor\n" + K + "  shape: {self: ['*A', '*B'], result: [1]}\n",
     "declarations/ops.yaml:5:25: error: a shape may have at most one '*' run of dimensions"),
    ("- func: f(Tensor self) -> Tensor\n" + K + "  shape: {self: [N], result: [N +]}\n",
     "declarations/ops.yaml:5:31: error: malformed shape expression"),
    ("- func: f(Tensor self) -> Tensor\n" + K + "  shape: [self]\n",
     "declarations/ops.yaml:5:10: error: 'shape' must be a mapping of argument and return names to lists of dimensions "
     "(integers, names or expressions), or shape expressions, not a list"),
    ("- func: f(Tensor self) -> Tensor\n" + K + "  shape: {self: [N, ~], result: [N]}\n",
     "declarations/ops.yaml:5:21: error: 'shape.self[1]' must be a dimension (an integer, a name or an expression), "
     "not '~' (null)"),
    # a forward formula (a key naming a return) with a backward name
    ("- func: f(Tensor self) -> Tensor\n" + OK + "  derivatives: {self: grad, result: grad}\n",
     "declarations/ops.yaml:4:37: error: 'grad' is a backward name; a forward-derivative formula gives the "
     "tangent of 'result' from the inputs' tangents (<input>_t)"),
    # entries and files
    ("- func: f(Tensor self) -> Tensor\n  func: g(Tensor self) -> Tensor\n", "declarations/ops.yaml:2:3: error: duplicate key 'func'"),
    ("- 3\n", "declarations/ops.yaml:1:3: error: each entry must be a mapping with a 'func:' field"),
    ("- ? [a]\n  : 1\n", "declarations/ops.yaml:1:5: error: a mapping key must be a name, not a list or mapping"),
    ("- func: f(Tensor self) -> Tensor\n\t dtypes: [float32]\n",
     "declarations/ops.yaml:2:1: error: invalid YAML: found a tab character that violates indentation"),
    ("- func: f(Tensor self) -> Tensor\n  dtypes: &a [float32]\n  pointwise: *b\n",
     "declarations/ops.yaml:3:14: error: invalid YAML: found undefined alias"),
    ("- func: f(Tensor self) -> Tensor\n" + OK + "- func: f(Tensor self) -> Tensor\n  dtypes: [float64]\n  pointwise: self\n",
     "declarations/ops.yaml:4:9: error: duplicate op 'f'\ndeclarations/ops.yaml:4:9: note: first declared at declarations/ops.yaml:1:9"),
    ("- func: f.out(Tensor self) -> Tensor\n" + OK + "- func: f.out(Tensor self) -> Tensor\n" + OK,
     "declarations/ops.yaml:4:9: error: duplicate op 'f.out'"),
    ("- func: f(Tensor self) -> Tensor\n" + OK + "- func: F(Tensor self) -> Tensor\n" + OK,
     "declarations/ops.yaml:4:9: error: op 'F' and 'f' differ only in case"),
    ("\ufeff- func: f(Tensor self) -> Tensr\n", "declarations/ops.yaml:1:27: error: invalid schema: unknown type 'Tensr'"),
])
def test_catalogue(project, yaml_text, expected):
    check_error(project, yaml_text, expected)


def test_huge_file_reports_the_exact_position(project):
    """4,000 declarations and a 1 MB doc string: the one bad entry is found at its line."""
    body = "".join(f"- func: op{i}(Tensor self) -> Tensor\n  dtypes: [float32]\n  pointwise: self * {i}\n" for i in range(4000))
    body += "- func: last(Tensor self) -> Tensor\n  doc: '" + "x" * 1_000_000 + "'\n  dtypes: [float32]\n  pointwise: self +\n"
    check_error(project, body, "declarations/ops.yaml:12004:20: error: invalid pointwise expression: invalid syntax")


# ------------------------------------------------------------------ typed fields (codegen/front/fields.py)
@pytest.mark.parametrize("yaml_text, expected", [
    # plugin fields are checked against their types before any plugin reads them
    ("- func: f(Tensor self) -> Tensor\n  dtypes: [float32]\n  like: self\n  autocast: [fp32]\n",
     "declarations/ops.yaml:4:13: error: 'autocast' must be one of lower_precision, fp32, promote, not a list"),
    ("- func: f(Tensor self) -> Tensor\n  dtypes: [float32]\n  pointwise: self\n  method: [x]\n",
     "declarations/ops.yaml:4:11: error: 'method' must be a method call as '<argument>.<method>', not a list"),
    ("- func: f(Tensor self) -> Tensor\n  dtypes: [float32]\n  pointwise: self\n  method: {a: b}\n",
     "declarations/ops.yaml:4:11: error: 'method' must be a method call as '<argument>.<method>', not a mapping"),
    ("- func: f(Tensor self) -> Tensor\n  dtypes: [float32]\n  like: self\n  vmap: [a]\n",
     "declarations/ops.yaml:4:9: error: 'vmap' must be a Python name as 'module:attr', not a list"),
    ("- func: f(Tensor self) -> Tensor\n" + "  dtypes: [float32]\n  kernels: {CPU: k, CUDA: k}\n  header: f.h\n"
     "  like: self\n  cuda_header: /etc/x.cuh\n",
     "declarations/ops.yaml:6:16: error: 'cuda_header' must be a relative path inside the kernels directory"),
    # core fields too, with what was expected and what was given
    ("- func: f(Tensor self) -> Tensor\n  doc: 3\n  dtypes: [float32]\n  pointwise: self\n",
     "declarations/ops.yaml:2:8: error: 'doc' must be a string, not the number 3\n"
     "declarations/ops.yaml:2:8: note: YAML reads 3 as a number; quote it: '3'"),
    ("- func: f(Tensor self) -> Tensor\n  dtypes: [float32]\n  pointwise: self\n  split_types: 1\n",
     "declarations/ops.yaml:4:16: error: 'split_types' must be true or false, not the number 1"),
    ("- func: f(Tensor self) -> Tensor\n  dtypes: [[float32]]\n  pointwise: self\n",
     "declarations/ops.yaml:2:12: error: 'dtypes[0]' must be a dtype name, not a list"),
    ("- func: f(Tensor self) -> Tensor\n  dtypes: [float32]\n  kernels: {CPU: [k]}\n  like: self\n",
     "declarations/ops.yaml:3:18: error: 'kernels.CPU' must be a C++ function template name or {abi: c|rust, ...}, not a list"),
    ("- func: f(Tensor self) -> Tensor\n  dtypes: [float32]\n  pointwise: self\n  tags: [core, core]\n",
     "declarations/ops.yaml:4:16: error: 'core' is listed twice in 'tags'"),
])
def test_field_types(project, yaml_text, expected):
    check_error(project, yaml_text, expected)


def test_third_party_fields_are_typed_and_plain_descriptions_mean_any_value(project):
    """The docs plugin's `since` is a typed String; its `see_also` has only a description,
    so any plain YAML value is accepted and given to the plugin frozen."""
    import shutil
    from pathlib import Path
    shutil.copy(Path(__file__).parent / "plugins" / "docs_plugin.py", project / "docs_plugin.py")
    py = project / "pyproject.toml"
    py.write_text(py.read_text() + 'plugins = ["docs_plugin:OpReference"]\n')
    op = "- func: f(Tensor self) -> Tensor\n  dtypes: [float32]\n  pointwise: self\n"
    check_error(project, op + "  since: 1.2\n",
                "declarations/ops.yaml:4:10: error: 'since' must be a version string such as '1.2', not the number 1.2\n"
                "declarations/ops.yaml:4:10: note: YAML reads 1.2 as a number; quote it: '1.2'")
    (project / "declarations" / "ops.yaml").write_text(op + "  since: '1.2'\n  see_also: [g, {h: [1, 2]}]\n")
    r = run_codegen("generate", cwd=project)
    assert r.returncode == 0, r.stderr
    page = (project / "generated" / "docs" / "ops.md").read_text()
    assert "Since 1.2." in page and "See also: `g`, `(('h', (1, 2)),)`." in page


# ------------------------------------------------------------------ tags of the installed torch
def test_tags_are_those_of_the_installed_torch():
    import torch
    from opwrap_codegen.front.fields import torch_tags
    assert set(torch_tags()) == set(torch.Tag.__members__)


def test_any_torch_tag_is_accepted_and_an_unknown_one_lists_them(project):
    from opwrap_codegen.front.fields import torch_tags
    ok = "- func: f(Tensor self) -> Tensor\n  dtypes: [float32]\n  pointwise: self\n  tags: [needs_exact_strides, core]\n"
    err = check_error(project, ok.replace("needs_exact_strides", "needs_exact_stride"),
                      "declarations/ops.yaml:4:10: error: unknown tag 'needs_exact_stride'\n"
                      "declarations/ops.yaml:4:10: note: did you mean 'needs_exact_strides'? valid tags: ")
    assert ", ".join(torch_tags()) in err
    (project / "declarations" / "ops.yaml").write_text(ok)
    r = run_codegen("generate", cwd=project)
    assert r.returncode == 0, r.stderr
    assert "at::Tag::needs_exact_strides" in (project / "generated" / "registration.cpp").read_text()


# ------------------------------------------------------------------ return names
def test_a_return_may_be_named_like_an_argument_as_torch_allows(project):
    """As in 37 schemas of native_functions.yaml (`cummax.out(..., Tensor(a!) values, ...) ->
    (Tensor(a!) values, ...)`); torch._C.parse_schema accepts them."""
    import torch
    # two returns of one name are still refused: the named result type could not hold both
    check_error(project, "- func: f(Tensor self) -> (Tensor a, Tensor a)\n",
                "declarations/ops.yaml:1:45: error: duplicate return name 'a'")
    schema = "f.out(Tensor self, *, Tensor(a!) values, Tensor(b!) indices) -> (Tensor(a!) values, Tensor(b!) indices)"
    torch._C.parse_schema(schema)
    (project / "declarations" / "ops.yaml").write_text(
        f"- func: '{schema}'\n  dtypes: [float32]\n  kernels: {{CPU: k}}\n  header: f.h\n")
    r = run_codegen("generate", cwd=project)
    assert r.returncode == 0, r.stderr


# ------------------------------------------------------------------ linear loading
def _alias_bomb(levels, use):
    lines = ["- func: f(Tensor self) -> Tensor", "  dtypes: [float32]", "  pointwise: self", "  bogus:",
             "  - &l0 [x, x, x, x, x, x, x, x, x]"]
    lines += [f"  - &l{i} [" + ", ".join([f"*l{i - 1}"] * 9) + "]" for i in range(1, levels)]
    lines.append(f"  {use}: *l{levels - 1}")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("use, expected", [
    ("tags", "declarations/ops.yaml:17:3: error: 'tags' expands to more than 10,000 YAML nodes (through aliases)"),
    ("derivatives", "declarations/ops.yaml:17:3: error: 'derivatives' expands to more than 10,000 YAML nodes"),
])
def test_an_alias_bomb_is_refused_quickly(project, use, expected):
    """12 levels of lists, each naming the one before 9 times: 9**12 nodes once expanded.
    Every walk visits each node once; the unknown field is reported as usual, and the field
    that would expand is refused at its key, all in well under a second."""
    import time
    text = _alias_bomb(12, use)
    assert len(text) < 2000
    t0 = time.perf_counter()
    err = check_error(project, text, expected)
    assert "declarations/ops.yaml:4:3: error: unknown field 'bogus'" in err
    assert time.perf_counter() - t0 < 5  # a process start and the CLI's imports; the load itself is milliseconds


def test_an_alias_bomb_costs_milliseconds_in_process(project):
    import time
    from opwrap_codegen.core.config import load_config
    from opwrap_codegen.core.diagnostics import CodegenError
    from opwrap_codegen.pipeline.passes import generate
    (project / "declarations" / "ops.yaml").write_text(_alias_bomb(12, "doc"))
    t0 = time.perf_counter()
    with pytest.raises(CodegenError) as e:
        generate(load_config(project))
    assert time.perf_counter() - t0 < 0.5
    assert [d.message for d in e.value.diagnostics] == [
        "unknown field 'bogus'", "'doc' expands to more than 10,000 YAML nodes (through aliases)"]


@pytest.mark.parametrize("yaml_text, expected", [
    # an alias inside the collection it names: every walk would go round forever
    ("- func: f(Tensor self) -> Tensor\n  doc: &a [*a]\n",
     "declarations/ops.yaml:2:8: error: this collection contains itself through a YAML alias"),
    # merge keys are refused (flattening chains of them costs quadratic time)
    ("- &e {func: 'f(Tensor self) -> Tensor', dtypes: [float32], pointwise: self}\n- <<: *e\n  doc: x\n",
     "declarations/ops.yaml:2:3: error: YAML merge keys ('<<') are not supported in declarations"),
    # deep nesting: libyaml's composer recurses (and crashes) and its scanner is quadratic in flow depth
    ("- func: f(Tensor self) -> Tensor\n  doc: " + "[" * 50_000 + "]" * 50_000 + "\n",
     "declarations/ops.yaml:2:106: error: collections are nested more than 100 levels deep"),
    # deep through aliases, in a value that is small
    ("- func: f(Tensor self) -> Tensor\n  bogus:\n  - &l0 [x]\n"
     + "".join(f"  - &l{i} [*l{i - 1}]\n" for i in range(1, 80)) + "  doc: *l79\n",
     "declarations/ops.yaml:83:3: error: 'doc' is nested more than 64 levels deep (through aliases)"),
])
def test_yaml_structures_that_would_not_end(project, yaml_text, expected):
    check_error(project, yaml_text, expected)


# ------------------------------------------------------------------ every error in one run
def test_all_errors_of_all_ops_in_one_run(project):
    """A wrong field of one op hides neither the other ops' errors (a missing kernel header,
    a shape rule, a plugin's check) nor its own other errors, and causes no second error
    (op f's wrong dtype list is not also reported as missing 'dtypes')."""
    text = ("- func: f(Tensor self) -> Tensor\n  dtypes: [float32, flaot64]\n  kernels: {CPU: k}\n  header: f.h\n"
            "  like: self\n  autocast: [fp32]\n"
            "- func: g(Tensor self) -> Tensor\n  dtypes: [float32]\n  kernels: {CPU: k}\n  like: self\n"
            "- func: h_(Tensor(a!) self) -> Tensor(a!)\n  dtypes: [float32]\n  kernels: {CPU: k}\n  header: f.h\n"
            "  autocast: fp32\n"
            "- func: q(Tensor self) -> Tensor\n  dtypes: [float32]\n  kernels: {CPU: k}\n  header: f.h\n"
            "  shape: {self: [N], result: [M]}\n")
    err = check_error(project, text, "declarations/ops.yaml:2:21: error: unknown dtype 'flaot64'")
    expected = [
        "declarations/ops.yaml:2:21: error: unknown dtype 'flaot64'",
        "declarations/ops.yaml:6:13: error: 'autocast' must be one of lower_precision, fp32, promote, not a list",
        "declarations/ops.yaml:9:12: error: kernel header 'kernels/g.h' not found",
        "declarations/ops.yaml:15:13: error: h_ writes its arguments in place",
        "declarations/ops.yaml:20:31: error: unknown dimension 'M'",
    ]
    errors = [line for line in err.splitlines() if ": error: " in line]
    assert len(errors) == len(expected), err
    for line, want in zip(errors, expected):
        assert line.startswith(want), (line, want)


def test_the_docs_field_table_is_generated_from_the_field_records():
    """Core and built-in plugin fields are one table of typed records; the docs' table
    (docs/declarations.md) is `python -m opwrap_codegen.reference fields`, written by the docs
    build's hook where the page has its marker."""
    from docs_pages import rendered, source
    from opwrap_codegen.reference import builtin_fields
    from opwrap_codegen.front.fields import reference
    from opwrap_codegen.front.loader import CORE_FIELDS
    fields = builtin_fields()
    assert set(CORE_FIELDS) < set(fields) and {"autocast", "vmap", "method", "cuda_header"} <= set(fields)
    assert "\n<!-- table: fields -->\n" in source("declarations.md"), "docs/declarations.md lost its field table marker"
    assert reference(fields) in rendered("declarations.md") + "\n"


def test_one_wrong_field_value_gives_one_error(project):
    """Each field of valid ops, given a value of the wrong type: exactly one error, at that
    value (no check that depends on the field reports it again, e.g. as a missing field)."""
    import yaml
    from opwrap_codegen.core.config import load_config
    from opwrap_codegen.core.diagnostics import CodegenError
    from opwrap_codegen.pipeline.passes import generate
    for name in ("lin.h", "lin.cuh"):
        (project / "kernels" / name).write_text("")
    ops = [
        {"func": "lin(Tensor input, Tensor weight, Tensor? bias=None) -> Tensor", "doc": "d", "dtypes": ["float32"],
         "kernels": {"CPU": "lin_cpu", "CUDA": "lin_cuda"}, "header": "lin.h", "cuda_header": "lin.cuh",
         "shape": {"input": ["N", "K"], "weight": ["M", "K"], "result": ["N", "M"]}, "contiguous": True,
         "split_types": False, "tags": ["core"], "autocast": "fp32", "vmap": "m:f",
         "derivatives": {"input": "grad.mm(weight)", "weight": "grad.t().mm(input)", "bias": "grad.sum(0)"}},
        {"func": "k(int n) -> Tensor", "dtypes": ["int64"], "kernels": {"CPU": "lin_cpu"}, "header": "lin.h",
         "dtype": {"result": "int64"}, "shape": {"result": ["n"]}},
        {"func": "p(Tensor self, Tensor other) -> Tensor", "dtypes": "floating", "pointwise": "self + other",
         "derivatives": {"self": "grad", "other": "grad"}},
        {"func": "q(Tensor self) -> Tensor", "dtypes": ["float32"], "kernels": {"CPU": "lin_cpu"}, "header": "lin.h",
         "like": "self", "pointwise": True},
    ]

    def errors(entries):
        (project / "declarations" / "ops.yaml").write_text(yaml.safe_dump(entries))
        try:
            generate(load_config(project))
        except CodegenError as e:
            return e.diagnostics
        return []

    assert errors(ops) == []
    tried = 0
    for i, op in enumerate(ops):
        for field in sorted(set(op) - {"func"}):
            for wrong in ([[1]], 3.5):
                entries = [dict(o) for o in ops]
                entries[i][field] = wrong
                found = errors(entries)
                assert len(found) == 1, (field, wrong, [str(d) for d in found])
                assert f"'{field}" in found[0].message or "dtype" in found[0].message, str(found[0])
                tried += 1
    assert tried > 40


# ------------------------------------------------------------------ per-argument dtypes, dtype rules, index bounds
KH = "  kernels: {CPU: k}\n  header: f.h\n"


@pytest.mark.parametrize("yaml_text, expected", [
    ("- func: f(Tensor data, Tensor idx) -> Tensor\n  dtypes: {idx: [int64]}\n" + KH + "  like: data\n",
     "declarations/ops.yaml:2:11: error: 'dtypes' must list the dtypes of 'data' (the first Tensor argument), which "
     "every tensor it does not name shares"),
    ("- func: f(Tensor data, Tensor idx) -> Tensor\n  dtypes: {data: floating, idx: [int64], ofs: idx}\n" + KH
     + "  like: data\n",
     "declarations/ops.yaml:2:42: error: 'ofs' is neither a Tensor argument nor a new Tensor return of f"),
    ("- func: f(Tensor data, Tensor idx) -> Tensor\n  dtypes: {data: floating, idx: indx}\n" + KH + "  like: data\n",
     "declarations/ops.yaml:2:33: error: unknown dtype 'indx': a value in 'dtypes' is a dtype, a dtype group or a "
     "Tensor argument of f\ndeclarations/ops.yaml:2:33: note: did you mean 'idx'?"),
    # a misspelt dtype as the first tensor's single value: that error, not "must list the dtypes of 'out'"
    ("- func: f(Tensor(a!) out, Tensor x) -> ()\n  dtypes: {out: float8_e4m3fm, x: [bfloat16]}\n" + KH,
     "declarations/ops.yaml:2:17: error: unknown dtype 'float8_e4m3fm': a value in 'dtypes' is a dtype, a dtype "
     "group or a Tensor argument of f\ndeclarations/ops.yaml:2:17: note: did you mean 'float8_e4m3fn'?"),
    # an optional tensor owns a variable with the dtype it has when not given
    ("- func: f(Tensor data, Tensor? w) -> Tensor\n  dtypes: {data: floating, w: [float32]}\n" + KH + "  like: data\n",
     "declarations/ops.yaml:2:28: error: 'w' is optional: say which dtype the kernel is instantiated for when it is "
     "not given\ndeclarations/ops.yaml:2:28: note: 'w: {dtypes: [float32, float64], absent: float32}', or share a "
     "required tensor's dtypes: 'w: <argument>'"),
    ("- func: f(Tensor data, Tensor? w) -> Tensor\n  dtypes: {data: floating, w: {dtypes: [float32]}}\n" + KH
     + "  like: data\n",
     "declarations/ops.yaml:2:31: error: 'w' is optional: say which dtype the kernel is instantiated for when it is "
     "not given"),
    ("- func: f(Tensor data, Tensor? w) -> Tensor\n  dtypes: {data: floating, w: {dtypes: [float32], absent: int64}}\n"
     + KH + "  like: data\n",
     "declarations/ops.yaml:2:59: error: 'absent: int64' is not one of the dtypes of 'w' (float32)"),
    ("- func: f(Tensor data, Tensor? w) -> Tensor\n  dtypes: {data: floating, w: {dtypes: floating, absent: floating}}\n"
     + KH + "  like: data\n",
     "declarations/ops.yaml:2:58: error: 'absent' is one dtype, not the group 'floating'"),
    ("- func: f(Tensor data, Tensor w) -> Tensor\n  dtypes: {data: floating, w: {dtypes: [float32], absent: float32}}\n"
     + KH + "  like: data\n",
     "declarations/ops.yaml:2:31: error: 'w' is not an optional Tensor argument: it has dtypes, not {dtypes: ..., "
     "absent: ...}"),
    # a return's dtypes written as an optional tensor's, in an op without tensor arguments (found by test_fuzz)
    ("- func: f() -> Tensor\n  dtypes: {result: {}}\n",
     "declarations/ops.yaml:2:20: error: 'result' is not an optional Tensor argument: it has dtypes, not {dtypes: ..., "
     "absent: ...}"),
    ("- func: f(Tensor data, Tensor? w, Tensor v) -> Tensor\n  dtypes: {data: floating, w: {dtypes: [float32], "
     "absent: float32}, v: w}\n" + KH + "  like: data\n",
     "declarations/ops.yaml:2:72: error: 'w' is optional: a tensor shares the dtypes of a required one"),
    ("- func: f(Tensor? w, Tensor? v) -> Tensor\n  dtypes: {w: {dtypes: [float32], absent: float32}}\n" + KH
     + "  shape: {result: [1]}\n",
     "declarations/ops.yaml:2:12: error: 'w' is the first tensor, which the op dispatches on: it cannot be absent"),
    ("- func: f(Tensor a, Tensor? w) -> Tensor\n" + K + "  like: a\n  dtype: {result: w}\n",
     "declarations/ops.yaml:6:19: error: 'w' is an optional Tensor argument: say what the dtype is when it is not "
     "given\ndeclarations/ops.yaml:6:19: note: write 'w or <dtype | Tensor argument | default>'"),
    ("- func: f(Tensor a, Tensor? w) -> Tensor\n" + K + "  like: a\n  dtype: {result: w or flaot32}\n",
     "declarations/ops.yaml:6:24: error: the fallback 'flaot32' is neither a dtype, 'default' nor a required Tensor "
     "argument"),
    ("- func: f(Tensor data, ScalarType dtype) -> Tensor\n  dtypes: {data: floating, result: [int64]}\n" + KH
     + "  like: data\n",
     "declarations/ops.yaml:2:28: error: return 'result' has dtypes of its own, so 'dtype:' must say where its dtype "
     "comes from"),
    ("- func: f(Tensor data, ScalarType? dtype) -> Tensor\n" + K + "  like: data\n  dtype: {result: dtype}\n",
     "declarations/ops.yaml:6:19: error: 'dtype' is optional: say what the dtype is when it is None\n"
     "declarations/ops.yaml:6:19: note: write 'dtype or <Tensor argument>' or 'dtype or default'"),
    ("- func: f(Tensor a, Tensor b) -> Tensor\n" + K + "  like: a\n  dtype: {result: 'promote(a, c)'}\n",
     "declarations/ops.yaml:6:31: error: 'c' is not a required Tensor argument of f"),
    ("- func: f(Tensor a, ScalarType? dtype) -> Tensor\n" + K + "  like: a\n  dtype: {result: dtype or b}\n",
     "declarations/ops.yaml:6:28: error: the fallback 'b' is neither 'default' nor a required Tensor argument"),
    ("- func: f(Tensor a, ScalarType? dtype) -> Tensor\n" + K + "  like: a\n"
     "  dtype: {result: dtype or promote_integers(b)}\n",
     "declarations/ops.yaml:6:45: error: 'b' is not a required Tensor argument of f"),
    ("- func: f(Tensor a, float d) -> Tensor\n" + K + "  shape: {result: 'reduce(a, d)'}\n",
     "declarations/ops.yaml:5:30: error: 'd' is not an int, int?, int[] or int[]? argument of f (the dimensions "
     "reduce(...) reduces)"),
    ("- func: f(Tensor a, Tensor idx) -> Tensor\n" + K + "  like: a\n  index: {idy: a.size(0)}\n",
     "declarations/ops.yaml:6:11: error: 'idy' is neither a Tensor argument nor a tensor list of f\n"
     "declarations/ops.yaml:6:11: note: did you mean 'idx'?"),
    ("- func: f(Tensor a, Tensor idx) -> Tensor\n" + K + "  like: a\n  index: {idx: [0, 1, 2]}\n",
     "declarations/ops.yaml:6:16: error: an index range is 'high' or '[low, high]'"),
    ("- func: f(Tensor a, Tensor[] idx) -> Tensor\n" + K + "  like: a\n  index: {idx: '*S'}\n  shape: {a: ['*S']}\n",
     "declarations/ops.yaml:6:16: error: an index bound is a number or an expression, not a run"),
    ("- func: f(Tensor a, Tensor?[] idx) -> Tensor\n" + K + "  like: a\n  index: {idx: 'idx.size(0)'}\n",
     "declarations/ops.yaml:6:17: error: 'idx' is a list of tensors; use len(idx) or sum(t.size(0) for t in idx)"),
])
def test_dtype_errors(project, yaml_text, expected):
    check_error(project, yaml_text, expected)


def test_a_trailing_underscore_without_writing_self_is_a_warning_not_an_error(project):
    """torch.library registers `relu_(Tensor self) -> Tensor`; torchgen's convention (a name
    ending in `_` writes `self` in place) is a warning at the schema, and the op generates."""
    (project / "declarations" / "ops.yaml").write_text(
        "- func: relu_(Tensor self) -> Tensor\n  dtypes: [float32]\n  kernels: {CPU: relu_cpu}\n  like: self\n")
    (project / "kernels" / "relu.h").write_text("#pragma once\n")
    r = run_codegen("generate", cwd=project)
    assert r.returncode == 0, r.stderr
    assert ("declarations/ops.yaml:1:9: warning: 'relu_' ends in '_', torchgen's mark of an op that writes "
            "'self' in place, but it does not write 'self'") in r.stderr, r.stderr
    assert "note: torch.library accepts the name; if the op writes 'self', declare 'Tensor(a!) self'" in r.stderr
    assert (project / "generated" / "cpu" / "relu_.cpp").is_file()


def test_a_return_with_dtypes_of_its_own_and_no_shape_rule_generates(project):
    """aten's `sum.dim_IntList` pattern without a shape rule: the kernel makes the result, whose
    dtype variable comes from its rule (`dtype or self`); the wrapper instantiates the kernel
    for it and checks the kernel's result against it (this raised KeyError: 'result_t')."""
    (project / "declarations" / "ops.yaml").write_text(
        "- func: mysum(Tensor self, int[1]? dim=None, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor\n"
        "  dtypes: {self: [float32, float64, int64], result: [float32, float64, int64]}\n"
        "  dtype: {result: dtype or self}\n"
        "  kernels: {CPU: mysum_cpu}\n")
    (project / "kernels" / "mysum.h").write_text("#pragma once\n")
    r = run_codegen("generate", cwd=project)
    assert r.returncode == 0, r.stderr
    wrapper = (project / "generated" / "cpu" / "mysum.cpp").read_text()
    assert "const at::ScalarType result_dtype = dtype.value_or(self.scalar_type());" in wrapper
    assert "switch (result_dtype)" in wrapper
    assert 'check_result_dtype(kOp, "result", *kernel_result, dtype.value_or(self.scalar_type()));' in wrapper
