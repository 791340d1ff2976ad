"""Bad declarations: `path:line:col: error: ...`, exit status 2, and no traceback."""

import re

import pytest

from conftest import run_codegen

GOOD_KERNEL = "template <typename scalar_t> void k(const at::Tensor&, at::Tensor&) {}\n"


def check_error(project, yaml_text, expected, *, file="ops.yaml", raw=None):
    path = project / "declarations" / file
    if raw is not None:
        path.write_bytes(raw)
    else:
        path.write_text(yaml_text, encoding="utf-8")
    (project / "kernels" / "f.h").write_text(GOOD_KERNEL)
    r = run_codegen("generate", cwd=project)
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
    # an output without a shape rule
    ("- func: f(Tensor self) -> Tensor\n  dtypes: [float32]\n  kernels: {CPU: k}\n  header: f.h\n",
     "declarations/ops.yaml:1:3: error: return 'result' needs a shape rule"),
    # in-place op that does not return self
    ("- func: f_(Tensor(a!) self) -> Tensor\n  dtypes: [float32]\n  kernels: {CPU: k}\n  header: f.h\n  like: self\n",
     "declarations/ops.yaml:1:9: error: in-place op 'f_' must return 'self' as 'Tensor(a!)'"),
    # a kernel header that does not exist
    ("- func: g(Tensor self) -> Tensor\n  dtypes: [float32]\n  kernels: {CPU: nope}\n  like: self\n",
     "declarations/ops.yaml:3:12: error: kernel header 'kernels/g.h' not found"),
    # a header path escaping the kernels directory
    ("- func: f(Tensor self) -> Tensor\n  header: ../../etc/passwd.h\n", "declarations/ops.yaml:2:11: error: 'header' must be a relative path"),
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
    (D + "    slef: grad\n    other: grad\n", "declarations/ops.yaml:5:5: error: 'slef' is not an argument of f"),
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
     "declarations/ops.yaml:7:26: error: 'once_differentiable' must be true or false"),
    # the value of an argument written in place is gone by the time backward runs
    ("- func: h_(Tensor(a!) self, Tensor other) -> Tensor(a!)\n  dtypes: [float32]\n  derivatives:\n"
     "    self: grad * self\n    other: grad\n",
     "declarations/ops.yaml:4:18: error: 'self' is modified in place by h_"),
    (D + "    self: [grad]\n    other: grad\n",
     "declarations/ops.yaml:5:11: error: the formula for 'self' must be a C++ expression string"),
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
     "declarations/ops.yaml:4:14: error: 'pointwise' must be an expression such as 'self + other', or true"),
    ("- func: f(Tensor self) -> Tensor\n  dtypes: [float32]\n  like: self\n  vmap: rules.linear\n",
     "declarations/ops.yaml:4:9: error: 'vmap' must name a Python function as 'module:function'"),
    ("- func: f_(Tensor(a!) self) -> Tensor(a!)\n  dtypes: [float32]\n  pointwise: true\n",
     "declarations/ops.yaml:3:14: error: the pointwise batching rule is for ops that do not write their arguments"),
])
def test_bad_vmap_fields(project, yaml_text, expected):
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
     "declarations/ops.yaml:3:14: error: a pointwise expression computes one new Tensor"),
    ("- func: f(Tensor self, int[] dims) -> Tensor\n  dtypes: [float32]\n  pointwise: self\n",
     "declarations/ops.yaml:3:14: error: argument 'dims' of type int[] cannot be used by a pointwise op"),
    ("- func: f(Tensor self) -> Tensor\n  dtypes: [float32, int64]\n  pointwise: tanh(self)\n",
     "declarations/ops.yaml:3:14: error: the expression uses '/' or a floating-point function, but the op declares "
     "integer dtypes (int64)"),
    ("- func: f(Tensor self) -> Tensor\n  dtypes: [float32, bool]\n  pointwise: self\n",
     "declarations/ops.yaml:2:11: error: pointwise expressions support real floating and integer dtypes, not bool"),
])
def test_bad_pointwise_expressions(project, yaml_text, expected):
    check_error(project, yaml_text, expected)


CLS = "- class: Q\n  header: f.h\n  init: (Tensor t)\n  flatten: {t: self->t()}\n"


@pytest.mark.parametrize("yaml_text, expected", [
    (CLS + "  methods:\n    push: {schema: '(Tensor x) -> ()'}\n",
     "declarations/ops.yaml:6:5: error: method 'push' of Q has no 'fake' body"),
    (CLS + "  methods:\n    push: {schema: '(Tensor x) -> ()', fake: 'return ('}\n",
     "declarations/ops.yaml:6:46: error: the fake body of 'push' is not valid Python"),
    (CLS + "  method: {}\n", "declarations/ops.yaml:5:3: error: unknown field 'method' of a class"),
    (CLS + "  methods: {}\n- func: g(__torch__.torch.classes.testlib.Q q, Tensor x) -> ()\n  method: q.pop\n",
     "declarations/ops.yaml:7:11: error: class Q has no method 'pop'"),
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
    ("- func: f(Tensor a) -> (Tensor a, Tensor b)\n", "declarations/ops.yaml:1:32: error: return name is also an argument name: 'a'"),
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
     "declarations/ops.yaml:2:11: error: 'header' must be a relative path to a .h file inside the kernels directory"),
    ("- func: f(Tensor self) -> Tensor\n  kernels: {CPU: 'a;system()'}\n",
     "declarations/ops.yaml:2:18: error: kernel name for CPU must be a C++ identifier"),
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
     "declarations/ops.yaml:6:19: error: dtype of 'result' must be a dtype name or a Tensor argument, not 'float99'"),
    ("- func: f(Tensor self) -> (Tensor a, Tensor b)\n" + K + "  shape: {self: [N], a: [N]}\n",
     "declarations/ops.yaml:5:10: error: return 'b' needs a shape rule"),
    ("- func: f(Tensor self) -> (Tensor a, Tensor b)\n" + K + "  shape: {self: [N], a: [N], b: [N], c: [N]}\n",
     "declarations/ops.yaml:5:38: error: 'c' is neither a Tensor argument nor a return of f"),
    ("- func: f(Tensor self) -> Tensor\n" + K + "  shape: {self: [N], result: [N], result: [N]}\n",
     "declarations/ops.yaml:5:35: error: duplicate key 'result'"),
    ("- func: f(Tensor self) -> Tensor\n" + K + "  shape: {self: ['*A', '*B'], result: [1]}\n",
     "declarations/ops.yaml:5:25: error: a shape may have at most one '*' run of dimensions"),
    ("- func: f(Tensor self) -> Tensor\n" + K + "  shape: {self: [N], result: [N +]}\n",
     "declarations/ops.yaml:5:31: error: malformed shape expression"),
    ("- func: f(Tensor self) -> Tensor\n" + K + "  shape: [self]\n",
     "declarations/ops.yaml:5:10: error: 'shape' must map argument and return names to shapes"),
    # derivatives for names that are not inputs
    ("- func: f(Tensor self) -> Tensor\n" + OK + "  derivatives: {self: grad, result: grad}\n",
     "declarations/ops.yaml:4:29: error: 'result' is not an argument of f"),
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
