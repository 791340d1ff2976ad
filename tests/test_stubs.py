"""`codegen stubs`: a kernel header skeleton, with the exact template and signature, for every
op whose kernel header is missing; it builds, and calling the op raises naming it."""

import pytest

from conftest import run_codegen, run_script

# Two ops without a kernel header: one with arguments of many types, in a header of its own,
# and one sharing a header with it (`header:`).
OPS = ('- func: blend(Tensor self, Tensor other, float alpha, int? n=None, str mode="x", Scalar s=1, '
       'int[] dims=[], Tensor? w=None, Generator? generator=None) -> Tensor\n'
       '  dtypes: [float32]\n'
       '  kernels: {CPU: blend_cpu}\n'
       '  like: self\n'
       '- func: blend_.mutate(Tensor(a!) self, Tensor other) -> Tensor(a!)\n'
       '  dtypes: [float32, float64]\n'
       '  kernels: {CPU: blend_inplace_cpu}\n'
       '  header: blend.h\n'
       # returns the kernel makes: its skeleton returns a value of that type
       '- func: count_big(Tensor self, float threshold) -> (Tensor big, int count)\n'
       '  dtypes: [float32]\n'
       '  kernels: {CPU: count_big_cpu}\n')


@pytest.fixture
def stubbed(tmp_path):
    """A `codegen init` library with the ops above, of its own for each test."""
    lib = tmp_path / "stublib"
    r = run_codegen("init", str(lib))
    if r.returncode != 0:
        pytest.fail(r.stderr)
    (lib / "declarations" / "blend.yaml").write_text(OPS)
    return lib


def test_generate_reports_the_missing_header_and_stubs_writes_it_once(stubbed):
    r = run_codegen("generate", cwd=stubbed)
    assert r.returncode == 2 and "kernel header 'kernels/blend.h' not found" in r.stderr, r.stderr
    scale = (stubbed / "kernels" / "scale.h").read_text()
    r = run_codegen("stubs", cwd=stubbed)
    assert r.returncode == 0, r.stderr
    assert "wrote kernels/blend.h" in r.stderr and "2 headers written, 1 header already there" in r.stderr, r.stderr
    assert (stubbed / "kernels" / "scale.h").read_text() == scale  # an existing header is never touched
    text = (stubbed / "kernels" / "blend.h").read_text()
    assert "namespace stublib::kernels {" in text
    assert ("template <typename scalar_t> void blend_cpu(const at::Tensor& self, const at::Tensor& other, double alpha, "
            "std::optional<int64_t> n, c10::string_view mode, const at::Scalar& s, at::IntArrayRef dims, "
            "const std::optional<at::Tensor>& w, std::optional<at::Generator> generator, at::Tensor& result)") \
        in " ".join(text.split())
    assert 'TORCH_CHECK(false, "stublib::blend: kernel not written");' in text
    assert 'TORCH_CHECK(false, "stublib::blend_.mutate: kernel not written");' in text
    count = (stubbed / "kernels" / "count_big.h").read_text()
    assert ("template <typename scalar_t>\nstd::tuple<at::Tensor, int64_t> count_big_cpu(const at::Tensor& self, "
            "double threshold) {") in count and "return {};" in count
    # A second run leaves the header it wrote alone too, even after an edit.
    (stubbed / "kernels" / "blend.h").write_text(text + "// edited\n")
    r = run_codegen("stubs", cwd=stubbed)
    assert r.returncode == 0 and "0 headers written, 3 headers already there" in r.stderr, r.stderr
    assert (stubbed / "kernels" / "blend.h").read_text().endswith("// edited\n")


def test_stubs_reports_declaration_errors_without_a_traceback(tmp_path):
    (tmp_path / "declarations").mkdir()
    (tmp_path / "pyproject.toml").write_text('[tool.codegen]\nnamespace = "bad"\nkernels = "kernels"\n')
    (tmp_path / "declarations" / "x.yaml").write_text("- func: f(Tensor self) -> Tensor\n  dtypse: [float32]\n")
    r = run_codegen("stubs", cwd=tmp_path)
    assert r.returncode == 2 and "declarations/x.yaml:2:3: error: unknown field 'dtypse'" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr and not (tmp_path / "kernels").exists()


@pytest.mark.slow(90)
@pytest.mark.xdist_group("pynames")
def test_stub_kernels_build_and_raise_naming_the_op(pynames):
    # conftest.py's `pynames` fixture made a `codegen init` library with the ops above (and
    # test_python_api.py's), ran `codegen stubs`, then `codegen build`: one compile for both.
    made, stubbed = pynames.record, pynames.path
    assert made["stubs"][0] == 0, made["stubs"][1]
    assert sorted(p.name for p in (stubbed / "kernels").iterdir()) == ["blend.h", "count_big.h", "names.h", "scale.h"]
    assert made["build"][0] == 0, made["build"][1][-6000:]
    script = ("import torch, pynames\n"
              "x = torch.ones(3)\n"
              "assert torch.equal(pynames.ops.scale(x, 2.0), 2 * x)\n"
              "for call in (lambda: pynames.ops.blend(x, x, 0.5), lambda: torch.ops.pynames.blend_.mutate(x.double(), x.double()),\n"
              "             lambda: pynames.ops.count_big(x, 0.5)):\n"
              "    try:\n        call()\n    except RuntimeError as e:\n        print(str(e).splitlines()[0])\n")
    assert run_script(stubbed, script).splitlines() == ["pynames::blend: kernel not written", "pynames::blend_.mutate: kernel not written",
                                     "pynames::count_big: kernel not written"]
