"""Per-op CUDA architectures (`cuda_archs:`, codegen/core/cuda_archs.py): the field's errors, what the
CUDA wrappers generate, the build's architectures as read from torch's flags, and the runtime
header's rules (compiled alone with the host compiler, against their Python twin).  Whether a
restricted kernel is absent from the other architectures' machine code, and raises on a GPU it
was not built for, is checked on a GPU machine (docs/declarations.md, "Per-op CUDA
architectures", says how it was checked)."""

import itertools
import os
import shutil
import subprocess

import pytest

from conftest import ROOT, run_codegen

from codegen.core import cuda_archs
from codegen.core.cuda_archs import CudaArch

KERNEL_CUH = ("template <typename scalar_t> void fast_cuda(const at::Tensor& self, at::Tensor& result) "
              "{ result.copy_(self); }\n")
KERNEL_H = "template <typename scalar_t> void fast_cpu(const at::Tensor& self, at::Tensor& result) { result.copy_(self); }\n"
DECLS = """\
- func: fast(Tensor self) -> Tensor
  dtypes: [float32]
  kernels: {CPU: fast_cpu, CUDA: fast_cuda}
  like: self
  cuda_archs: [9.0a, 8.0]
- func: twice(Tensor self) -> Tensor
  dtypes: floating
  pointwise: self * 2
  cuda_archs: [9.0]
"""


def write(project, decls):
    (project / "declarations" / "ops.yaml").write_text(decls, encoding="utf-8")
    (project / "kernels" / "fast.h").write_text(KERNEL_H)
    (project / "kernels" / "fast.cuh").write_text(KERNEL_CUH)


def test_restricted_wrappers_check_the_device_and_instantiate_only_for_kept_architectures(project):
    write(project, DECLS)
    r = run_codegen("generate", cwd=project)
    assert r.returncode == 0, r.stderr
    fast = (project / "generated" / "cuda" / "fast.cu").read_text()
    assert "#include <opwrap/runtime/cuda_archs.cuh>" in fast
    assert "static constexpr int kArchs[] = {901, 800};" in fast
    assert "opwrap::rt::check_cuda_arch(kOp, kArchs);" in fast
    guard = ("#if !defined(__CUDA_ARCH__) || (__CUDA_ARCH__ >= 800 && __CUDA_ARCH__ < 900) || "
             "(__CUDA_ARCH__ == 900 && defined(__CUDA_ARCH_FEAT_SM90_ALL))")
    assert guard in fast
    # the instantiation sits between the guard and its #endif, after the check
    body = fast[fast.index(guard):]
    assert body.index("fast_cuda<float>") < body.index("#endif")
    assert fast.index("check_cuda_arch") < fast.index(guard)
    twice = (project / "generated" / "cuda" / "twice.cu").read_text()
    assert 'opwrap::rt::check_cuda_arch("testlib::twice", kArchs);' in twice
    assert "#if !defined(__CUDA_ARCH__) || (__CUDA_ARCH__ >= 900 && __CUDA_ARCH__ < 1000)" in twice
    # the CPU wrappers know nothing of it
    assert "cuda_archs" not in (project / "generated" / "cpu" / "fast.cpp").read_text()


@pytest.mark.parametrize("value, expected", [
    ("[7.1]", "declarations/ops.yaml:5:16: error: 'cuda_archs[0]': '7.1' is not a CUDA architecture nvcc knows"),
    ("[9]", "declarations/ops.yaml:5:16: error: 'cuda_archs[0]': '9' is not a CUDA architecture such as 8.0"),
    ("[8.0a]", "declarations/ops.yaml:5:16: error: 'cuda_archs[0]': '8.0a': arch-specific targets ('a') exist from 9.0a on"),
    ("[sm_90]", "declarations/ops.yaml:5:16: error: 'cuda_archs[0]': 'sm_90' is not a CUDA architecture"),
    ("[9.0, 9.0]", "declarations/ops.yaml:5:21: error: '9.0' is listed twice in 'cuda_archs'"),
    ("[]", "declarations/ops.yaml:5:15: error: 'cuda_archs' must not be empty"),
    ("9.0", "declarations/ops.yaml:5:15: error: 'cuda_archs' must be a non-empty list of CUDA architectures"),
])
def test_bad_values_are_positioned_errors(project, value, expected):
    write(project, DECLS.split("- func: twice")[0].replace("[9.0a, 8.0]", value))
    r = run_codegen("generate", cwd=project)
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr
    assert expected in r.stderr, r.stderr


def test_an_op_without_a_cuda_kernel_cannot_restrict_one(project):
    write(project, DECLS.split("- func: twice")[0].replace("CUDA: fast_cuda", "").replace("fast_cpu, ", "fast_cpu"))
    r = run_codegen("generate", cwd=project)
    assert r.returncode == 2
    assert "declarations/ops.yaml:5:15: error: fast has no CUDA kernel for 'cuda_archs' to restrict" in r.stderr, r.stderr


def test_the_build_header_holds_what_torch_compiles_for(monkeypatch, tmp_path):
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "8.0;8.6;9.0a;9.0+PTX")
    built = cuda_archs.build_archs()
    assert set(built) == {(CudaArch(8, 0), False), (CudaArch(8, 6), False), (CudaArch(9, 0, True), False),
                          (CudaArch(9, 0), False), (CudaArch(9, 0), True)}
    built = tuple(sorted(built))
    text = cuda_archs.build_header_text(built, "8.0;8.6;9.0a;9.0+PTX")
    assert ("#define OPWRAP_CUDA_BUILD_ARCHS OPWRAP_CUDA_BUILT(800, 0) OPWRAP_CUDA_BUILT(860, 0) "
            "OPWRAP_CUDA_BUILT(900, 0) OPWRAP_CUDA_BUILT(900, 1) OPWRAP_CUDA_BUILT(901, 0)") in text
    # the loose intersection, as vLLM's cuda_archs_loose_intersection: 8.0 keeps 8.6, 9.0a only itself
    assert cuda_archs.loose_intersection((CudaArch(8, 0),), built) == [(CudaArch(8, 0), False), (CudaArch(8, 6), False)]
    assert cuda_archs.loose_intersection((CudaArch(9, 0, True),), built) == [(CudaArch(9, 0, True), False)]
    assert cuda_archs.loose_intersection((CudaArch(9, 0),), built) == [(CudaArch(9, 0), False), (CudaArch(9, 0), True),
                                                                       (CudaArch(9, 0, True), False)]


DEVICES = [(7, 5), (8, 0), (8, 6), (8, 9), (9, 0), (10, 0), (12, 0)]
DECLARED = [(800,), (860,), (900,), (901,), (800, 901), (1000,)]
BUILT = [((800, 0), (900, 0)), ((800, 0), (860, 0), (901, 0), (900, 1)), ((900, 1),), ((1000, 0), (1200, 1))]


def test_runtime_rules_agree_with_python(tmp_path):
    """The header's `supported` over every (declared, built, device) case of the tables above,
    compiled alone (it needs no torch), against codegen/core/cuda_archs.py's rules."""
    cxx = shutil.which(os.environ.get("CXX", "c++"))
    if cxx is None:
        pytest.skip("no C++ compiler")
    decode = lambda code: CudaArch(code // 100, code // 10 % 10, code % 10 == 1)  # noqa: E731
    lines, expected = [], []
    for di, (declared, built, (major, minor)) in enumerate(itertools.product(DECLARED, BUILT, DEVICES)):
        d = ", ".join(map(str, declared))
        b = ", ".join(f"Built{{{a}, {bool(p)}}}".lower().replace("built", "Built") for a, p in built)
        lines.append(f"  {{ static constexpr int d[] = {{{d}}}; static constexpr Built b[] = {{{b}}}; "
                     f"std::printf(\"%d\", int(supported(d, b, {major}, {minor}))); }}")
        want = any(any(decode(x).keeps(decode(a)) for x in declared) and cuda_archs.runs_on(decode(a), bool(p), major, minor)
                   for a, p in built)
        expected.append(str(int(want)))
    src = tmp_path / "t.cpp"
    src.write_text("#include <cstdio>\n#include <opwrap/runtime/cuda_archs.h>\nusing namespace opwrap::rt::cuda_archs;\n"
                   "int main() {\n" + "\n".join(lines) + "\n}\n")
    exe = tmp_path / "t"
    subprocess.run([cxx, "-std=c++17", f"-I{ROOT / 'runtime' / 'include'}", str(src), "-o", str(exe)], check=True)
    got = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout
    assert got == "".join(expected)
    assert "1" in got and "0" in got


def test_the_build_gives_nvcc_torchs_arch_flags_itself(monkeypatch, tmp_path):
    """cpp_extension leaves out its -gencode flags when any flag of extra_cuda_cflags contains
    'arch' (this header's include path does; so does any path under a folder named research):
    the build passes torch's flags itself, and the header says what they are."""
    from codegen.build import cuda_archs_flags
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "8.0;9.0+PTX")
    flags = cuda_archs_flags(tmp_path / "research" / "build", env=object())
    assert "-gencode=arch=compute_80,code=sm_80" in flags and "-gencode=arch=compute_90,code=compute_90" in flags
    include = [f for f in flags if f.startswith("-I")]
    assert include == [f"-I{tmp_path / 'research' / 'build' / 'cuda-archs'}"]
    header = (tmp_path / "research" / "build" / "cuda-archs" / cuda_archs.BUILD_HEADER).read_text()
    assert all(f"OPWRAP_CUDA_BUILT({c})" in header for c in ("800, 0", "900, 1", "900, 0")), header
    assert cuda_archs_flags(tmp_path, env=None) == []
