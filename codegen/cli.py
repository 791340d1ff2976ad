"""The `codegen` command line.

Exit status: 0 success; 1 the drift check found differences, or a build failed;
2 bad input (a declaration or configuration error, reported as path:line:col).
"""

from __future__ import annotations

import shlex
import sys
import time
from pathlib import Path

import click

from .core.config import Config, load_config
from .core.diagnostics import CodegenError
from .core.targets import TARGETS

EXIT_OK, EXIT_DRIFT, EXIT_BAD_INPUT = 0, 1, 2


class BadInput(click.ClickException):
    exit_code = EXIT_BAD_INPUT

    def show(self, file=None) -> None:
        click.echo(self.message, err=True)


def _config(project: str | None) -> Config:
    try:
        return load_config(Path(project) if project else None)
    except CodegenError as e:
        raise BadInput(str(e)) from None


def _generate(config: Config, selection=None, notes=None):
    from .pipeline.passes import generate
    try:
        result = generate(config, selection, notes)
    except CodegenError as e:
        raise _bad_declarations(e) from None
    for w in result.warnings:
        click.echo(str(w), err=True)
    return result


def _bad_declarations(e: CodegenError) -> BadInput:
    n = len(e.diagnostics)
    return BadInput(f"{e}\n{n} error{'s' if n != 1 else ''}")


def _log(message: str) -> None:
    click.echo(message, err=True)


def _write(config: Config, files: dict[str, str]):
    """Write the generated tree, holding its lock."""
    from .pipeline.writer import write_tree_locked
    try:
        return write_tree_locked(config.path("generated"), files, _log)
    except ValueError as e:  # a link in generated/ leading out of it
        raise BadInput(f"{config.generated}: error: {e}") from None


project_option = click.option("--project", "-C", type=click.Path(exists=True, file_okay=False),
                              help="Project directory (default: the nearest pyproject.toml with [tool.codegen]).")


@click.group(help=__doc__, context_settings={"help_option_names": ["-h", "--help"]})
def main() -> None:
    pass


@main.command(help="Regenerate the generated directory from the declarations and templates. "
              "Only changed files are written; files no plugin produces any more are removed.")
@project_option
@click.option("--timings", is_flag=True, help="Print the seconds each pipeline step took.")
def generate(project, timings):
    config = _config(project)
    result = _generate(config)
    t0 = time.perf_counter()
    report = _write(config, result.files)
    result.timings.append(("write", time.perf_counter() - t0))
    for rel in report.written:
        click.echo(f"wrote {config.generated}/{rel}", err=True)
    for rel in report.removed:
        click.echo(f"removed {config.generated}/{rel}", err=True)
    click.echo(f"codegen: {len(result.library.declarations)} ops, {len(report.written)} written, "
               f"{len(report.removed)} removed, {report.unchanged} unchanged", err=True)
    if timings:
        for name, secs in result.timings:
            click.echo(f"  {name:<10} {secs * 1000:8.1f} ms", err=True)


@main.command(help="Check that the generated directory is exactly what the declarations and templates "
              "produce. Exit 0 if so; exit 1 with a unified diff on stdout otherwise.")
@project_option
def check(project):
    from .pipeline.writer import diff_tree_locked
    config = _config(project)
    result = _generate(config)
    diff = diff_tree_locked(config.path("generated"), result.files, config.generated, _log)
    if diff:
        sys.stdout.writelines(diff)
        click.echo(f"codegen check: {config.generated}/ has drifted from the declarations and templates; "
                   "run `codegen generate` (never edit generated files by hand)", err=True)
        sys.exit(EXIT_DRIFT)
    click.echo(f"codegen check: {config.generated}/ is up to date ({len(result.files)} files)", err=True)


@main.command(help="Generate, then compile the generated sources and the project's kernels with "
              "torch.utils.cpp_extension and ninja into the build directory.")
@project_option
@click.option("--generate/--no-generate", "regenerate", default=True, help="Run `generate` first (default: yes).")
@click.option("--ccache/--no-ccache", default=None, help="Compile through ccache (default: when installed).")
@click.option("--cuda/--no-cuda", default=None,
              help="Compile the CUDA sources (default: where they can run: torch is a CUDA build, nvcc is "
              "found and a GPU is visible).  --cuda compiles them without a GPU too.")
@click.option("--ops", multiple=True, metavar="OP[,OP...]",
              help="Selective build: only these ops ('name' for every overload, 'name.overload', with or "
              "without 'namespace::'), and the ops their derivative formulas call.  The selected library "
              "is generated into <build>/generated and compiled from there; generated/ is not touched.")
@click.option("--dtypes", multiple=True, metavar="DTYPE[,DTYPE...]",
              help="Selective build: only these dtypes (names or groups such as 'floating'); ops left with "
              "none of their dtypes are left out.")
@click.option("--build-dir", type=click.Path(file_okay=False), help="Build here instead of [tool.codegen] build.")
@click.option("--sanitize", is_flag=True,
              help="Build the CPU kernels with AddressSanitizer and UndefinedBehaviorSanitizer, into "
              "<build>/sanitize unless --build-dir is given, and print how to load that build.")
@click.option("--optimize", "-O", "optimize", type=click.IntRange(0, 3), default=3, show_default=True, metavar="N",
              help="The compilers' -O level. -O0 compiles in about two thirds of the time: for kernels being written.")
@click.option("--cpu-capabilities/--no-cpu-capabilities", default=None,
              help="Compile the AVX2 and AVX-512 builds of the generated CPU loops as well as the default one "
              "(default: at every -O level but 0): an -O0 build to debug those loops in.")
@click.option("--fast-bindings/--no-fast-bindings", default=None,
              help="Compile the fast Python bindings, a CPython module that calls each op with less overhead "
              "than its Python wrapper (default: at every -O level but 0).")
@click.option("--target", "target_name", type=click.Choice([t.name for t in TARGETS]), default=None,
              help="The API the generated C++ is written against (default: [tool.codegen] target): 'aten', the "
              "full ATen API, or 'stable', torch's stable ABI (one build for every torch release from the oldest "
              "claimed). Another target than the project's is generated and built into <build>/<target>.")
@click.option("--leave-out-unsupported", is_flag=True,
              help="Build the ops the target can express and leave out, each with a note saying why, those it "
              "cannot (and those whose derivative formulas call them), instead of failing: for the stable "
              "target's build of a library written for the full one.  Generated into <build>/generated.")
@click.option("--verbose", "-v", is_flag=True, help="Show the compiler commands.")
def build(project, regenerate, ccache, cuda, build_dir, sanitize, optimize, cpu_capabilities, fast_bindings, verbose,
          ops, dtypes, target_name, leave_out_unsupported):
    import dataclasses

    from . import build as build_mod
    from .front import selection as selection_mod
    if sanitize:
        _run_with_sanitizer_runtime()
    config = _config(project)
    selection = selection_mod.parse(ops, dtypes)
    if regenerate:  # with the project's own build directory: the loader in generated/ names it
        report = _write(config, _generate(config).files)
        if report.written or report.removed:
            click.echo(f"codegen: {len(report.written)} written, {len(report.removed)} removed", err=True)
    if build_dir or sanitize:
        target = Path(build_dir).resolve() if build_dir else config.path("build") / "sanitize"
        config = dataclasses.replace(config, build=str(target))
    try:
        out = build_mod.build_project(config, selection=selection, verbose=verbose, use_ccache=ccache, cuda=cuda,
                                      log=_log, sanitize=sanitize, optimize=optimize, cpu_capabilities=cpu_capabilities,
                                      fast_bindings=fast_bindings, target=target_name,
                                      leave_out_unsupported=leave_out_unsupported)
    except CodegenError as e:
        raise _bad_declarations(e) from None
    except (RuntimeError, ValueError, OSError) as e:
        click.echo(f"codegen build: failed: {e}", err=True)
        sys.exit(EXIT_DRIFT)
    if sanitize:
        runtime = build_mod.sanitizer_runtime() or "<libasan.so of your compiler>"
        click.echo(f"codegen build: load the sanitized library with\n  LD_PRELOAD='{runtime}' "
                   f"ASAN_OPTIONS=detect_leaks=0 {config.python_package.upper()}_LIBRARY={out} python ...", err=True)


_REEXEC = "CODEGEN_SANITIZER_REEXEC"


def _run_with_sanitizer_runtime() -> None:
    """cpp_extension.load loads the library it built into this process, and an ASan-built
    library loads only into a process that started with the ASan runtime: so the sanitized
    build runs in a child python started with LD_PRELOAD, which then takes LD_PRELOAD back
    out of its environment so that the compilers it starts run without it."""
    import os
    import subprocess

    from .build import sanitizer_runtime
    if os.environ.get(_REEXEC):
        os.environ.pop(_REEXEC)
        os.environ.pop("LD_PRELOAD", None)
        return
    runtime = sanitizer_runtime()
    if runtime is None:
        click.echo("codegen build: failed: --sanitize needs the compiler's AddressSanitizer runtime (libasan.so)", err=True)
        sys.exit(EXIT_DRIFT)
    env = dict(os.environ, LD_PRELOAD=runtime, ASAN_OPTIONS="detect_leaks=0", **{_REEXEC: "1"})
    sys.exit(subprocess.run([sys.executable, "-m", "opwrap_codegen.cli", *sys.argv[1:]], env=env).returncode)


@main.command(name="list", help="List the declared ops, one line each: name, dtypes, devices.")
@project_option
def list_ops(project):
    config = _config(project)
    result = _generate(config)
    for d in result.library.declarations:
        devices = ",".join(d.devices) or "-"
        dtypes = ",".join(t.name for t in d.dtypes) or "-"
        click.echo(f"{config.namespace}::{d.op_name}\t{dtypes}\t{devices}")


@main.command(help="Write a kernel header skeleton for every op whose CPU kernel header is missing: "
              "the exact template and signature the generated wrapper calls, and a body that raises "
              "'<op>: kernel not written' when called.  Existing files are never overwritten.  With "
              "--target naming another target than the project's, the skeletons are written against that "
              "target's API into <kernels>/<target>/ (kernels for both targets: docs/stable-abi.md).")
@project_option
@click.option("--target", "target_name", type=click.Choice([t.name for t in TARGETS]), default=None,
              help="The API the skeletons are written against (default: [tool.codegen] target).")
def stubs(project, target_name):
    import dataclasses

    from .scaffold import load_declarations, write_stubs
    config = _config(project)
    folder = None
    if target_name is not None and target_name != config.target:
        config = dataclasses.replace(config, target=target_name)
        folder = config.target_kernels()
    try:
        lib = load_declarations(config)
    except CodegenError as e:
        raise _bad_declarations(e) from None
    written, existing, failed = write_stubs(lib, folder)
    for path in written:
        click.echo(f"wrote {path.relative_to(config.root)}", err=True)
    for decl, why in failed:
        click.echo(f"{decl.func_loc}: warning: no skeleton for {config.namespace}::{decl.op_name}: {why}", err=True)
    def n(count, noun):
        return f"{count} {noun}{'' if count == 1 else 's'}"
    click.echo(f"codegen stubs: {n(len(written), 'header')} written, {n(len(existing), 'header')} already there "
               f"(left alone)" + (f", {n(len(failed), 'op')} without a skeleton" if failed else ""), err=True)


@main.command(help="Create a new op library in DIR: pyproject config, one example declaration and kernel.")
@click.argument("directory", type=click.Path(file_okay=False))
@click.option("--namespace", help="The torch namespace (default: DIR's name).")
def init(directory, namespace):
    from .scaffold import scaffold
    target = Path(directory)
    ns = namespace or target.resolve().name.replace("-", "_")
    if not ns.isidentifier():
        raise BadInput(f"{target}: error: '{ns}' is not a valid namespace; pass --namespace NAME")
    try:
        written = scaffold(target, ns)
    except FileExistsError as e:
        raise BadInput(f"{e}: error: already exists; codegen init does not overwrite files") from None
    for p in written:
        click.echo(f"created {p}", err=True)
    click.echo(f"next: cd {shlex.quote(str(target))} && codegen build && python -c 'import torch, {ns}; "
               f"print({ns}.ops.scale(torch.ones(3), 2.0))'", err=True)


if __name__ == "__main__":
    main()
