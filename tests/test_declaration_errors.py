"""Bad declarations: `path:line:col: error: ...`, exit status 2, and no traceback."""

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
    ("- func: other::f(Tensor self) -> Tensor\n  dtypes: [float32]\n", "error: 'func' must not name a namespace"),
    # shape rule naming something that is not an argument or return
    ("- func: f(Tensor self) -> Tensor\n  dtypes: [float32]\n  shape: {slef: [N], result: [N]}\n",
     "declarations/ops.yaml:3:11: error: 'slef' is neither a Tensor argument nor a return of f"),
    # a dimension used before it is bound
    ("- func: f(Tensor self) -> Tensor\n  dtypes: [float32]\n  shape: {self: [N], result: [M]}\n",
     "declarations/ops.yaml:3:31: error: unknown dimension 'M'"),
    # an output without a shape rule
    ("- func: f(Tensor self) -> Tensor\n  dtypes: [float32]\n  kernels: {CPU: k}\n  header: f.h\n",
     "error: return 'result' needs a shape rule"),
    # in-place op that does not return self
    ("- func: f_(Tensor(a!) self) -> Tensor\n  dtypes: [float32]\n  kernels: {CPU: k}\n  header: f.h\n  like: self\n",
     "error: in-place op 'f_' must return 'self' as 'Tensor(a!)'"),
    # a kernel header that does not exist
    ("- func: g(Tensor self) -> Tensor\n  dtypes: [float32]\n  kernels: {CPU: nope}\n  like: self\n",
     "declarations/ops.yaml:3:12: error: kernel header 'kernels/g.h' not found"),
    # a header path escaping the kernels directory
    ("- func: f(Tensor self) -> Tensor\n  header: ../../etc/passwd.h\n", "error: 'header' must be a relative path"),
    # an unknown dispatch key, with a suggestion
    ("- func: f(Tensor self) -> Tensor\n  kernels: {CUPA: k}\n", "error: unknown dispatch key 'CUPA'"),
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
    check_error(project, "- func: f(Tensor self) -> Tensor\n  doc: a\n  doc: b\n", "declarations/ops.yaml:3:3: error: duplicate field 'doc'")


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
