"""`make bench`: opwrap measured side by side with what it replaces, in one run, as ratios.

Sections (each compares in the same process, on the same inputs):

- call overhead: a generated op on an 8-element tensor against the aten op, the same op
  through torch.ops, and the same op written with torch.library.custom_op;
- throughput: generated pointwise kernels against aten, and fused ops against the eager
  composition they replace, on 16M-element float32 and bfloat16 tensors, 1 and 2 threads;
  each call allocates its output, as in real use;
- BLAS ops: linear, mymatmul and addmv_ (whose kernels call the BLAS aten uses) against
  F.linear, torch.mm and Tensor.addmv_, float32 and bfloat16, 1 and 2 threads;
- build: compile seconds of a generated CPU translation unit against the same source
  behind `#include <torch/extension.h>`, every generated C++ unit compiled alone (median),
  the full C++ build and a no-op rebuild;
- foreign kernels: one op as a C++ kernel template, a Rust function and a C function behind
  the C kernel ABI, in a `codegen init` library: each kernel unit's compile seconds, the call
  overhead (target: at most 5% above the C++ kernel's) and the loops' throughput;
- library: a `codegen init` library of 50 synthetic pointwise ops built from scratch, and
  the compiler seconds each op adds (against a library of 10);
- codegen: generating 1,000 synthetic declarations, and the files a no-op regenerate writes.

Prints a table of ratios and writes it as JSON (--json).  Targets are printed beside the
figures they apply to; --check exits 1 when one is missed.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
import timeit
from pathlib import Path

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
    from opwrap_codegen.config import load_config

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


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run: fewer repetitions, smaller tensors, "
                        "no per-unit or full builds")
    parser.add_argument("--json", default=str(ROOT / "build" / "bench.json"), help="where to write the results")
    parser.add_argument("--only", choices=("calls", "throughput", "blas", "build", "foreign", "library", "codegen"),
                        action="append")
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    args = parser.parse_args(argv)
    only = set(args.only or ("calls", "throughput", "blas", "build", "foreign", "library", "codegen"))
    report = Report()
    fast = type(opwrap.ops.myadd).__name__ == "builtin_function_or_method"
    print(f"torch {torch.__version__}, CPU capability {torch.backends.cpu.get_cpu_capability()}, "
          f"{os.cpu_count()} CPUs; fast bindings: {'yes' if fast else 'no'}")
    if "calls" in only:
        call_overhead(report, *((2000, 3) if args.quick else (100000, 7)))
    if "throughput" in only:
        throughput(report, 1 << 20 if args.quick else 16 << 20, 3 if args.quick else 15)
    if "blas" in only:
        blas_ops(report, *((3, 4) if args.quick else (15, 1)))
    if "build" in only:
        build_times(report, full=not args.quick)
    if "foreign" in only and shutil.which("cargo"):
        foreign_kernels(report, *((2000, 3, 1 << 20, 3) if args.quick else (50000, 7, 16 << 20, 15)))
    if "library" in only and not args.quick:
        library_build(report, 50, 10)
    if "codegen" in only:
        codegen_times(report, 1000)
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(dict(torch=torch.__version__, cpu_capability=torch.backends.cpu.get_cpu_capability(),
                                               rows=report.rows), indent=1) + "\n")
    missed = report.missed()
    print(f"\nwrote {args.json}; targets missed: {len(missed)}" + "".join(f"\n  {r['name']}" for r in missed))
    return 1 if args.check and missed else 0


if __name__ == "__main__":
    sys.exit(main())
