"""The run-time helpers of a generated op library's Python modules.

`codegen generate` copies this file verbatim, once per library, to
`generated/python/_runtime.py` (`<package>._generated._runtime`), and the generated modules
import it: the loader (`__init__.py`), the typed wrappers (`ops.py`), the fake kernels
(`fake.py`), the batching rules (`vmap.py`) and the fake classes (`classes.py`).  Those
modules then hold only per-op data and calls; the logic they share is here, in one real
module that is type-checked (`mypy --strict`) and unit-tested once (tests/test_pyruntime.py
imports it as `opwrap_codegen.pyruntime`).

Why a copy and not an import of the toolchain: a library built with opwrap (a wheel, or a
checkout with its committed `generated/`) then has no run-time dependency on the code
generator or its dependencies (jinja2, pyyaml, click); and the helpers always match the
generated modules that call them, since both come from one `codegen generate`, whatever
toolchain version is installed beside them later.  The drift check sees an edit here as it
sees an edited template.

So this file imports only the standard library and torch, and nothing from `codegen`.
"""

from __future__ import annotations

import functools
import glob
import hashlib
import importlib
import importlib.util
import inspect
import json
import os
import sys
import typing
import warnings
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Iterable, NoReturn, Sequence, TypeVar

import torch

F = TypeVar("F", bound=Callable[..., Any])

# torch._check, typed: torch 2.13 declares it without annotations, and `mypy --strict` refuses
# to call an untyped function (no-untyped-call); 2.14 annotates it.  The same function object,
# so torch.compile still recognizes it where it traces a caller.
_check: Callable[[Any, Callable[[], str]], None] = torch._check


# ----------------------------------------------------------------------------- loading


def registered(op: str) -> bool:
    """Whether the loaded library has `op` ("ns::name" or "ns::name.overload"): a selective
    build (`codegen build --ops`) leaves ops out."""
    name, _, overload = op.partition(".")
    try:
        torch._C._dispatch_find_schema_or_throw(name, overload)
    except RuntimeError:
        return False
    return True


_IMPL_LIBRARIES: dict[str, Any] = {}  # namespace -> the torch.library.Library holding the Python kernels below


def impl(op: str, kernel: Callable[..., Any], key: str, with_keyset: bool = False) -> None:
    """Registers the Python `kernel` of `op` ("ns::name" or "ns::name.overload") at dispatch
    `key`, in one torch.library.Library per namespace, kept as long as the process."""
    namespace, _, name = op.partition("::")
    if namespace not in _IMPL_LIBRARIES:
        _IMPL_LIBRARIES[namespace] = torch.library.Library(namespace, "IMPL")  # type: ignore[no-untyped-call]
    _IMPL_LIBRARIES[namespace].impl(name, kernel, key, with_keyset=with_keyset)


def overload(op: str) -> Any:
    """The OpOverload of `op` ("ns::name" or "ns::name.overload")."""
    namespace, _, name = op.partition("::")
    base, _, overload_name = name.partition(".")
    return getattr(getattr(getattr(torch.ops, namespace), base), overload_name or "default")


def torch_release(version: str) -> str:
    """'2.14.1+cu130' -> '2.14': torch's C++ ABI holds within a release.  (The build backend
    pins a wheel's torch with the same rule.)"""
    return ".".join(version.split("+")[0].split(".")[:2])


def torch_before(release: tuple[int, int]) -> bool:
    """Whether the running torch is older than `release` (major, minor); a nightly or a
    source build counts as its release."""
    major, minor = (int(part) for part in torch_release(torch.__version__).split(".")[:2])
    return (major, minor) < release


# The namespaces whose out= overloads inductor is kept from (this module's copy: each library
# carries its own, and each copy wraps torch's lookup once for its own namespaces).
_NO_OUT_VARIANT: set[str] = set()


def _inductor_mislowers(op: Any) -> bool:
    """Whether inductor would mishandle `op` (a functional OpOverload) lowered to its out=
    overload: with dynamic shapes it builds the outputs' layouts from the fake result's raw
    SymInt sizes and fails an assertion.  torch 2.14 fixed that for ops with one result
    (pytorch#185503, pytorch#185601); the path of ops with several results still has it
    (measured on 2.14.1)."""
    return len(op._schema.returns) != 1 or torch_before((2, 14))


def keep_inductor_from_out_variants(namespace: str) -> None:
    """Keep inductor from lowering the functional ops of `namespace` to their out= overloads
    where it would mishandle them (`_inductor_mislowers`): from torch 2.13 on, inductor looks
    up a custom op's out= overload (`torch._library._out_variant.to_out_variant`: the overload
    tagged `out` with the functional op's arguments, which the generator tags) and calls it
    with buffers it allocates itself.  With the lookup answering None the op runs as any other
    custom op does (a fallback kernel that allocates its own results); everything else, other
    namespaces and aten's ops included, gets torch's answer.  The lookup is wrapped once per
    copy of this module, and does nothing on a torch that has none (inductor imports it where
    it calls it, so a wrapped module attribute is what it calls)."""
    try:
        from torch._library import _out_variant
    except ImportError:
        return
    lookup = getattr(_out_variant, "to_out_variant", None)
    if not callable(lookup):
        return
    wrapped = bool(_NO_OUT_VARIANT)
    _NO_OUT_VARIANT.add(namespace)
    if wrapped:
        return

    def to_out_variant(op: Any) -> Any:
        if getattr(op, "namespace", None) in _NO_OUT_VARIANT and _inductor_mislowers(op):
            return None
        return lookup(op)

    setattr(to_out_variant, "__wrapped__", lookup)
    setattr(_out_variant, "to_out_variant", to_out_variant)


def built_manifest(path: str) -> dict[str, Any] | None:
    """What `codegen build` wrote beside the library at `path` (`<library>.json`, which a
    wheel carries too); None when there is none to read (a library built otherwise)."""
    try:
        with open(Path(path).with_suffix(".json"), encoding="utf-8") as f:
            made = json.load(f)
    except (OSError, ValueError):
        return None
    return made if isinstance(made, dict) else None


class Library:
    """The compiled library of one op namespace and the Python modules that come with it.

    `here` is the generated package's folder; `build_rel` the build directory relative to
    it in a source checkout; `env_var` names an environment variable that may point at the
    library file; `companions` are the generated modules imported once it is loaded; `target`
    the build target (codegen/core/targets.py) they were generated for, which the library's build
    must be."""

    def __init__(self, package: str, namespace: str, library: str, here: Path, build_rel: str, env_var: str,
                 companions: Sequence[str], target: str = "aten") -> None:
        self.package = package
        self.namespace = namespace
        self.library = library
        self.here = here
        self.build_rel = build_rel
        self.env_var = env_var
        self.companions = tuple(companions)
        self.target = target
        self.path: str | None = None

    def candidates(self) -> list[Path]:
        """Where the library may be: the file $<env_var> names, beside the installed
        package (a wheel), or the build directory of a source checkout."""
        found = []
        env = os.environ.get(self.env_var)
        if env:
            found.append(Path(env))
        for directory in (self.here.parent, self.here / self.build_rel):
            found.extend(Path(p) for p in sorted(glob.glob(str(directory / f"{self.library}*.so"))))
        return found

    def load_fast(self) -> ModuleType | None:
        """The compiled fast Python bindings (`_fast`): from the build $<env_var> names, beside
        the package, or in the build directory; None when they were not built (the ops then
        take their Python wrappers).  A library that $<env_var> names takes only its own build's:
        another build's bindings could name ops it does not hold (a selective build) or differ
        from it (an -O0 build compiles none; build.fast_bindings_built)."""
        env = os.environ.get(self.env_var)
        directories = ((Path(env).parent / "python",) if env
                       else (self.here, self.here / self.build_rel / "python"))
        for directory in directories:
            for path in sorted(glob.glob(str(directory / "_fast*.so"))):
                spec = importlib.util.spec_from_file_location(f"{self.package}._fast", path)
                if spec is None or spec.loader is None:
                    continue
                module = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(module)
                return module
        return None

    def digest(self, path: str) -> str:
        """What torch.compile's graphs of these ops depend on, as a digest: the generated tree
        the library at `path` was built from (its `<library>.json`, written by `codegen
        build`: schemas, autograd and autocast in C++), and the generated Python modules
        imported beside it (fake kernels, batching rules), read here: a regenerate without a
        rebuild changes them alone."""
        h = hashlib.sha256()
        h.update(str((built_manifest(path) or {}).get("generated") or "").encode())
        for companion in ("_runtime", *self.companions):
            spec = importlib.util.find_spec(f"{self.package}.{companion}")
            if spec is not None and spec.origin and os.path.isfile(spec.origin):
                with open(spec.origin, "rb") as f:
                    h.update(companion.encode() + b"\0" + f.read() + b"\0")
        return h.hexdigest()[:16]

    def check_torch(self, path: str) -> None:
        """A library compiled against another torch release than the running one would fail
        with an undefined symbol, or worse: refuse it by the `<library>.json` its build wrote
        beside it (a wheel carries it too), naming both releases."""
        made = built_manifest(path)
        if made is None:
            return
        built = str(made.get("torch_version") or "")
        oldest = str(made.get("torch_min") or "")  # the stable-ABI target: every release from it on
        target = str(made.get("target") or "aten")
        if target != self.target:  # e.g. `codegen build --target stable` of an aten project
            raise ImportError(f"{self.namespace}: {path} was built for the '{target}' target, but the package's "
                              f"generated modules are the '{self.target}' target's (its autograd differs); build the "
                              f"project's own target, or set [tool.codegen] target = \"{target}\" and regenerate")
        if oldest:
            if torch_before(tuple(int(x) for x in oldest.split(".")[:2])):  # type: ignore[arg-type]
                raise ImportError(f"{self.namespace}: {path} was built for torch {oldest} and later (the stable ABI), "
                                  f"but this is torch {torch.__version__}")
            return
        if built and torch_release(built) != torch_release(torch.__version__):
            raise ImportError(f"{self.namespace}: {path} was compiled against torch {built}, but this is torch "
                              f"{torch.__version__}; rebuild it (`codegen build`), or install the {self.package} "
                              f"built for this torch")

    def load(self) -> str:
        """Load the library once, then import the companion modules that exist (fake
        kernels, batching rules, typed wrappers); return the library's path."""
        if self.path is not None:
            return self.path
        candidates = self.candidates()
        if not candidates:
            raise ImportError(
                f"{self.namespace}: the compiled library '{self.library}' was not found beside the package or in "
                f"{(self.here / self.build_rel).resolve()}; run `codegen build` (or `make build`) first")
        path = str(candidates[0].resolve())
        self.check_torch(path)
        try:
            torch.ops.load_library(path)  # type: ignore[no-untyped-call]
        except OSError as e:
            raise ImportError(f"{self.namespace}: cannot load {path}: {e}\n(a library compiled against another torch "
                              f"than this one, {torch.__version__}, fails so: rebuild it with this torch)") from e
        self.path = path
        keep_inductor_from_out_variants(self.namespace)
        key_compile_caches(self.namespace, self.digest(path))
        for companion in self.companions:
            if importlib.util.find_spec(f"{self.package}.{companion}") is not None:
                importlib.import_module(f"{self.package}.{companion}")
        return path


# ----------------------------------------------------------------------------- typed wrappers


def key_compile_caches(namespace: str, digest: str) -> None:
    """Put `<namespace>:<digest>` into torch.compile's cache keys
    (`torch.compiler.config.cache_key_tag`, which inductor's FX graph cache, AOTAutograd's
    cache and the autotuning cache hash).  Their keys cover a graph's code and inputs, not
    what a custom op's fake kernel or autograd formula computes: without this, a graph
    compiled before a library changed an op's dtype or shape rule is served from the on-disk
    cache after it, with the old output dtype.  The tag keeps what the user set (or
    $TORCH_COMPILE_CACHE_KEY_TAG) and other libraries' entries; an entry of this namespace is
    replaced.  A process that loads the library compiles its graphs once more after each
    change of the library, and never against a stale fake kernel."""
    config = getattr(getattr(torch, "compiler", None), "config", None)
    if config is None or not hasattr(config, "cache_key_tag"):
        return
    kept = [t for t in str(config.cache_key_tag).split(";") if t and not t.startswith(f"{namespace}:")]
    config.cache_key_tag = ";".join([*kept, f"{namespace}:{digest}"])


def install_fast_path(fast: ModuleType | None, wrappers: dict[str, Callable[..., Any]],
                      namespace: dict[str, Any]) -> None:
    """Bind each public name of the wrappers' module (`namespace`, its globals) to its
    compiled fast function where one was built.  The fast function hands every call it
    cannot take exactly to the wrapper (`install`), and torch.compile traces the wrapper
    in its place (`substitute_in_graph`).  A wrapper that returns a result class (a tuple
    subclass with named fields) gives the fast function that class to build."""
    if fast is None:
        return
    for index, name in enumerate(fast.OPS):
        wrapper = wrappers[name]
        result = typing.get_type_hints(wrapper).get("return")
        result_type = result if isinstance(result, type) and issubclass(result, tuple) else None
        fast.install(index, wrapper, result_type)
        binding = getattr(fast, name)
        when_dynamo_is_imported(functools.partial(_trace_wrapper_for, binding, wrapper))
        namespace[name] = binding


def _trace_wrapper_for(binding: Callable[..., Any], wrapper: Callable[..., Any]) -> None:
    """torch.compile traces `wrapper` where the code calls the compiled `binding`."""
    torch.compiler.substitute_in_graph(binding, skip_signature_check=True)(wrapper)


# What runs once torch.compile's tracer (torch._dynamo) is imported: importing it takes about
# 1 s of CPU, which `import <library>` used to pay for registering its fast bindings'
# substitutes (substitute_in_graph lives in it) in every process, compiling or not.
_AFTER_DYNAMO: list[Callable[[], Any]] = []


def when_dynamo_is_imported(action: Callable[[], Any]) -> None:
    """Run `action` now if torch._dynamo is imported, else right after its import (before
    torch.compile, which imports it, traces anything)."""
    module = sys.modules.get("torch._dynamo")
    if module is not None and not getattr(getattr(module, "__spec__", None), "_initializing", False):
        action()
        return
    _AFTER_DYNAMO.append(action)
    if not any(isinstance(f, _DynamoImported) for f in sys.meta_path):
        sys.meta_path.insert(0, _DynamoImported())


class _DynamoImported:
    """A meta path finder that finds nothing itself: for `torch._dynamo`, it asks the finders
    after it for the module's spec and runs _AFTER_DYNAMO once the module has executed (a
    post-import hook, as wrapt's).  The loader keeps its other methods (get_source, ...)."""

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name != "torch._dynamo":
            return None
        sys.meta_path.remove(self)  # once: the finders after it find the module
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            _run_after_dynamo()  # an import this hook cannot follow: register now, at worst too early
            return spec
        execute = spec.loader.exec_module

        def exec_module(module: ModuleType) -> None:
            execute(module)
            _run_after_dynamo()
        spec.loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def _run_after_dynamo() -> None:
    while _AFTER_DYNAMO:
        _AFTER_DYNAMO.pop(0)()


R = TypeVar("R", bound=tuple)  # type: ignore[type-arg]


def result_class(cls: type[R]) -> type[R]:
    """Register a result class (a tuple subclass built from one iterable, as torch.return_types
    are) as a pytree node, so vmap and other transforms see its tensors."""
    import torch.utils._pytree as pytree

    def flatten(r: R) -> tuple[list[Any], None]:
        return list(r), None

    def unflatten(values: Iterable[Any], _context: None) -> R:
        return cls(values)

    pytree.register_pytree_node(cls, flatten, unflatten)
    return cls


# ----------------------------------------------------------------------------- fake kernels


def register_fake(op: str) -> Callable[[F], F]:
    """`torch.library.register_fake(op)` for an op the loaded library has; a selective build
    leaves ops out, and their fake kernels are then plain functions."""
    if not registered(op):
        return lambda fn: fn
    register: Callable[[F], F] = torch.library.register_fake(op)
    return register


def check_dtype(op: str, name: str, t: torch.Tensor, allowed: tuple[torch.dtype, ...], names: str) -> None:
    """`t`'s dtype is one of the declared dtypes."""
    _check(t.dtype in allowed, lambda: f"{op}: argument '{name}' has dtype {t.dtype}, but expected one of: {names}")


def check_like(op: str, name: str, t: torch.Tensor | None, first_name: str, first: torch.Tensor) -> None:
    """`t` (when given) has the dtype and device of the first tensor input."""
    if t is None:
        return
    _check(t.dtype == first.dtype, lambda: f"{op}: argument '{name}' has dtype {t.dtype}, but expected "
           f"{first.dtype} (the dtype of '{first_name}')")
    _check(t.device == first.device, lambda: f"{op}: argument '{name}' is on {t.device}, but '{first_name}' "
           f"is on {first.device}")


def check_device(op: str, name: str, t: torch.Tensor | None, first_name: str, first: torch.Tensor) -> None:
    """`t` (when given) is on the device of the tensor the op dispatches on."""
    if t is not None:
        _check(t.device == first.device, lambda: f"{op}: argument '{name}' is on {t.device}, but "
               f"'{first_name}' is on {first.device}")


def check_list(op: str, name: str, ts: Sequence[torch.Tensor | None], allowed: tuple[torch.dtype, ...], names: str,
               ref_name: str, ref: torch.Tensor | None, first_name: str = "", first: torch.Tensor | None = None) -> None:
    """Every given element of a tensor list has one of the declared dtypes, and the dtype of
    `ref` (else of the list's first element); and, where `first` is given, its device."""
    given = [t for t in ts if t is not None]
    for i, t in enumerate(ts):
        if t is None:
            continue
        _check(t.dtype in allowed, lambda: f"{op}: argument '{name}[{i}]' has dtype {t.dtype}, but expected "
               f"one of: {names}")
        expected, source = (ref.dtype, ref_name) if ref is not None else (given[0].dtype, f"{name}[0]")
        _check(t.dtype == expected, lambda: f"{op}: argument '{name}[{i}]' has dtype {t.dtype}, but expected "
               f"{expected} (the dtype of '{source}')")
        if first is not None:
            _check(t.device == first.device, lambda: f"{op}: argument '{name}[{i}]' is on {t.device}, but "
                   f"'{first_name}' is on {first.device}")


def check_list_input_length(op: str, name: str, ts: Sequence[Any], expected: Any, what: str, rule: str) -> None:
    """An input tensor list whose shape rule gives one shape per element of another list
    (`grads: "[p.shape for p in params]"`) holds as many tensors as that rule's length
    (opwrap::rt::check_list_input_length's message)."""
    n = len(ts)
    shown = what if what == str(expected) else f"{what} = {expected}"
    _check(n == expected, lambda: f"{op}: argument '{name}' holds {n} tensor{'' if n == 1 else 's'}, but expected "
           f"{shown} (its shape is {rule})")


def first_named(names: Sequence[str], tensors: Sequence[Any]) -> tuple[torch.Tensor | None, str]:
    """The first tensor given among tensors, optional tensors and lists, and its name as the
    real wrapper gives it (the argument's, or the list's and the element's: `xs[2]`); None
    and "" when none is."""
    for name, t in zip(names, tensors):
        if isinstance(t, (list, tuple)):
            for i, x in enumerate(t):
                if isinstance(x, torch.Tensor):
                    return x, f"{name}[{i}]"
        elif isinstance(t, torch.Tensor):
            return t, name
    return None, ""


def first_given(tensors: Sequence[Any]) -> torch.Tensor:
    """The first tensor given among tensors, optional tensors and lists: the one an op whose
    tensors are all optional or lists dispatches on."""
    for t in tensors:
        for x in (t if isinstance(t, (list, tuple)) else [t]):
            if isinstance(x, torch.Tensor):
                return x
    raise RuntimeError("expected at least one tensor argument to dispatch on, but none was given")


def check_output_dtype(op: str, name: str, dtype: torch.dtype, allowed: tuple[torch.dtype, ...], names: str,
                       rule: str) -> None:
    """The dtype a return's rule gives is among the return's declared dtypes."""
    _check(dtype in allowed, lambda: f"{op}: output '{name}' would have dtype {dtype} (dtype: {rule}), but "
           f"expected one of: {names}")


def promote_integers(dtype: torch.dtype) -> torch.dtype:
    """The dtype rule `promote_integers(x)`: an integral or bool dtype is int64 (aten's
    promote_integers, as torch.sum takes it), any other is itself."""
    return dtype if dtype.is_floating_point or dtype.is_complex else torch.int64


def reduced_dims(op: str, name: str, tensor: str, rank: int, dims: int | Sequence[int] | None) -> list[int]:
    """`reduce(self, dim, keepdim)`'s dimensions, as aten's reductions over dims
    (sum.dim_IntList) take them: wrapped (-1 the last; a 0-d tensor takes -1 and 0), in the
    order given; None or an empty list is every dimension.  A dimension out of range or named
    twice is an error naming the op and the argument, as the C++ wrapper's
    (opwrap::rt::reduced_dims, runtime/include/opwrap/runtime/shape_checks.h)."""
    if dims is None or (not isinstance(dims, int) and len(dims) == 0):
        return list(range(rank))
    given = [dims] if isinstance(dims, int) else list(dims)
    n = max(rank, 1)
    out: list[int] = []
    for d in given:
        _check(-n <= d < n, lambda: f"{op}: argument '{name}' holds {d}, out of range: expected a dimension of "
               f"'{tensor}' in [{-n}, {n - 1}] ('{tensor}' has {rank} dimension{'' if rank == 1 else 's'})")
        w = d + n if d < 0 else d
        _check(w not in out, lambda: f"{op}: argument '{name}' holds {given}: dim {w} appears multiple times in the "
               "list of dims")
        out.append(w)
    return out if rank else []


def reduced_shape(op: str, name: str, tensor: str, t: torch.Tensor, dims: int | Sequence[int] | None,
                  keepdim: bool) -> list[Any]:
    """The shape of `reduce(<tensor>, <name>, keepdim)`: `t`'s, each reduced dimension 1 when
    `keepdim`, else left out (SymInt-safe: only the rank, always known, decides)."""
    reduced = reduced_dims(op, name, tensor, t.dim(), dims)
    return [1 if i in reduced else n for i, n in enumerate(t.shape) if keepdim or i not in reduced]


def new_output(op: str, name: str, shape: Sequence[Any], dtype: torch.dtype, device: Any) -> torch.Tensor:
    """An output of the shape its rule gives (checked non-negative, SymInt-safe)."""
    shape = list(shape)
    for size in shape:
        _check(size >= 0, lambda: f"{op}: output '{name}' would have negative size {size} (shape {shape})")
    return torch.empty(shape, dtype=dtype, device=device)


def resize_out(op: str, name: str, out: torch.Tensor, shape: Sequence[Any] | None, dtype: torch.dtype,
               device: Any) -> None:
    """An out= argument of the fake kernel: it must have the result's dtype and device, and is
    resized to the result's shape (None: no rule, left as it is) as
    `at::native::resize_output` does it, with aten's warning when it held elements."""
    _check(out.dtype == dtype, lambda: f"{op}: out= argument '{name}' has dtype {out.dtype}, but the result "
           f"has dtype {dtype}")
    _check(out.device == torch.device(device), lambda: f"{op}: out= argument '{name}' is on {out.device}, but "
           f"the result is on {device}")
    if shape is None:
        return
    shape = list(shape)
    for size in shape:
        _check(size >= 0, lambda: f"{op}: output '{name}' would have negative size {size} (shape {shape})")
    if list(out.shape) == shape:
        return
    if out.numel() != 0:
        warnings.warn(f"An output with one or more elements was resized since it had shape {list(out.shape)}, which "
                      f"does not match the required output shape {shape}. This behavior is deprecated, and in a future "
                      "PyTorch release outputs will not be resized unless they have zero elements. You can explicitly "
                      "reuse an out tensor t by resizing it, inplace, to zero elements with t.resize_(0).",
                      UserWarning, stacklevel=2)
    out.resize_(shape)


def pointwise_out(op: str, name: str, out: torch.Tensor, result: torch.Tensor) -> torch.Tensor:
    """The out= argument of a pointwise op's fake kernel, as TensorIterator treats it: the
    result type must cast safely to its dtype; it is resized to the result's shape (aten's
    warning when it held elements) and then takes the result's strides."""
    _check(torch.can_cast(result.dtype, out.dtype), lambda: f"{op}: result type {result.dtype} can't be cast "
           f"to the desired output type {out.dtype} of out= argument '{name}'")
    _check(out.device == result.device, lambda: f"{op}: argument '{name}' is on {out.device}, but expected "
           f"{result.device} (the device of the result)")
    if list(out.shape) != list(result.shape):
        resize_out(op, name, out, result.shape, out.dtype, out.device)
        out.as_strided_(result.shape, result.stride())
    return out


def dynamic_size() -> torch.SymInt:
    """A data-dependent output size (`?name` in a shape rule)."""
    return torch.library.get_ctx().new_dynamic_size()


def data_dependent_int(op: str) -> torch.SymInt:
    """A `SymInt` return that the kernel computes from the data: an unbacked symbol, as
    torch's fake tensors make for `Tensor.item()`.  Where the trace does not take
    data-dependent scalars (torch.compile without `torch._dynamo.config.capture_scalar_outputs`),
    torch's DataDependentOutputException, on which torch.compile breaks the graph and calls
    the op eagerly.  (An `int` or `float` return cannot be symbolic: torch turns the fake
    kernel's value into a plain number, which a data-dependent one has not.)"""
    from torch._subclasses.fake_tensor import DataDependentOutputException

    ctx = torch.library.get_ctx()
    env = getattr(ctx, "_shape_env", None)
    if env is None or not env.allow_scalar_outputs:
        overload: Any = getattr(ctx, "_op", op)
        raise DataDependentOutputException(overload)
    value: torch.SymInt = env.create_unbacked_symint()
    return value


def no_fake(op: str, name: str, why: str) -> NoReturn:
    """The fake kernel of an op with a return `name` that nothing but the kernel can make
    (`why` says what it is and what to declare instead)."""
    raise NotImplementedError(f"{op}: torch.compile and torch.export cannot trace this op: its return '{name}' is {why}")


def pointwise_output(op: str, names: Sequence[str], tensors: Sequence[torch.Tensor], allowed: tuple[torch.dtype, ...],
                     allowed_names: str, float_op: bool) -> torch.Tensor:
    """The output of a pointwise expression, as the TensorIterator of its kernel makes it:
    the broadcast shape, the promoted dtype and aten's elementwise output strides."""
    from torch._prims_common import (ELEMENTWISE_TYPE_PROMOTION_KIND, compute_elementwise_output_strides,
                                     elementwise_dtypes)

    first = tensors[0]
    for name, t in zip(names[1:], tensors[1:]):
        _check(t.device == first.device, lambda: f"{op}: argument '{name}' is on {t.device}, but "
               f"'{names[0]}' is on {first.device}")
    broadcast_shapes: Callable[..., torch.Size] = torch.broadcast_shapes
    try:
        shape = broadcast_shapes(*(t.shape for t in tensors))
    except RuntimeError as e:
        shapes = ", ".join(f"'{n}' {list(t.shape)}" for n, t in zip(names, tensors))
        raise RuntimeError(f"{op}: the shapes of {shapes} do not broadcast") from e
    kind = ELEMENTWISE_TYPE_PROMOTION_KIND.INT_TO_FLOAT if float_op else ELEMENTWISE_TYPE_PROMOTION_KIND.DEFAULT
    _, dtype = elementwise_dtypes(*tensors, type_promotion_kind=kind)
    _check(dtype in allowed, lambda: f"{op}: the inputs compute in dtype {dtype}, which is not supported; "
           f"expected one of: {allowed_names}")
    strides = compute_elementwise_output_strides(*(t.expand(shape) for t in tensors))
    return torch.empty_strided(shape, strides, dtype=dtype, device=first.device)


# ----------------------------------------------------------------------------- fake classes


class FakeClass:
    """Base of a generated fake class: its state is the `__obj_flatten__` of the real
    object, by name (`_state` lists the names), as attributes."""

    _state: tuple[str, ...] = ()

    def __init__(self, *values: Any, **state: Any) -> None:
        if len(values) > len(self._state):
            raise TypeError(f"{type(self).__name__}: {len(values)} values for the state {list(self._state)}")
        state = {**dict(zip(self._state, values)), **state}
        if set(state) != set(self._state):
            raise TypeError(f"{type(self).__name__}: expected the state {list(self._state)}, got {sorted(state)}")
        for name in self._state:
            setattr(self, name, state[name])

    @classmethod
    def __obj_unflatten__(cls, flattened: Iterable[tuple[str, Any]]) -> FakeClass:
        return cls(**dict(flattened))


C = TypeVar("C", bound=type[FakeClass])


def register_fake_class(qualname: str) -> Callable[[C], C]:
    """`torch._library.register_fake_class(qualname)` for a FakeClass subclass: torch looks
    for `__obj_unflatten__` in the class's own namespace, so the inherited one is put there."""

    from torch._library.fake_class_registry import register_fake_class as register_with_torch

    def register(cls: C) -> C:
        if "__obj_unflatten__" not in cls.__dict__:
            setattr(cls, "__obj_unflatten__", FakeClass.__dict__["__obj_unflatten__"])
        register_with_torch(qualname)(cls)
        return cls

    return register


# ----------------------------------------------------------------------------- batching rules

BatchingRule = Callable[..., tuple[Any, Any]]


def register_vmap(op: str, rule: BatchingRule) -> None:
    """`torch.library.register_vmap` for an op the loaded library has."""
    if registered(op):
        torch.library.register_vmap(op, rule)


def register_batched(op: str, kernel: Callable[..., Any]) -> None:
    """A Python kernel at the FuncTorchBatched key of `op` ("ns::name.overload"), for an op
    with keyword-only tensors (out= overloads), which `torch.library.register_vmap` refuses.
    The kernel receives the batched tensors themselves and calls other ops on them, which
    vmap batches with their own rules."""
    if not registered(op):
        return
    impl(op, kernel, "FuncTorchBatched")


def out_rule(op: str, functional: Callable[..., Any], outs: Sequence[str]) -> Callable[..., Any]:
    """vmap over an out= overload: its functional op on the batched inputs (batched by that
    op's own rule), copied into the out= arguments, which must be batched like the results
    and have their shape (a batched tensor cannot be resized), dtype and device.  aten's
    out= ops have no batching rule at all."""

    def kernel(*args: Any, **kwargs: Any) -> Any:
        buffers = [kwargs.pop(name) for name in outs]
        result = functional(*args, **kwargs)
        results = tuple(result) if isinstance(result, tuple) else (result,)
        for name, buffer, value in zip(outs, buffers, results):
            if buffer.dtype != value.dtype or buffer.device != value.device:
                raise RuntimeError(f"{op}: argument '{name}' is {buffer.dtype} on {buffer.device}, but expected "
                                   f"{value.dtype} on {value.device} (the result's)")
            if buffer.shape != value.shape:
                raise RuntimeError(f"{op}: under torch.vmap, argument '{name}' must have the result's shape "
                                   f"{list(value.shape)} per example (a batched tensor cannot be resized), but got "
                                   f"{list(buffer.shape)}")
            buffer.copy_(value)
        return buffers[0] if len(buffers) == 1 else tuple(buffers)

    return kernel


def no_out_rule(op: str) -> Callable[..., Any]:
    """vmap over an op with keyword-only tensors and no functional op to batch: a clear error."""

    def kernel(*args: Any, **kwargs: Any) -> NoReturn:
        raise RuntimeError(f"{op}: no batching rule for torch.vmap: an op with keyword-only tensor arguments takes "
                           "no 'vmap' rule, and an out= overload is batched through its functional op (the same name, "
                           "its arguments without the out= ones), which is not declared")

    return kernel


def batch_first(t: torch.Tensor, in_dim: int | None, batch_size: int) -> torch.Tensor:
    """`t` with its batch dimension first; an unbatched `t` expanded to the batch."""
    return t.movedim(in_dim, 0) if in_dim is not None else t.expand(batch_size, *t.shape)


def pointwise_rule(op: Callable[..., Any], n_out: int, broadcasts: bool) -> BatchingRule:
    """Elementwise ops, one call on the batch: batch dims to the front.  Ops that need
    same-shaped inputs get unbatched tensors expanded to the batch; broadcasting ops get
    batched tensors padded with size-1 dims to the largest logical rank instead."""

    def rule(info: Any, in_dims: Sequence[int | None], *args: Any, **kwargs: Any) -> tuple[Any, Any]:
        tensors = [(a, d) for a, d in zip(args, in_dims) if isinstance(a, torch.Tensor)]
        rank = max(a.dim() - (d is not None) for a, d in tensors)
        moved = []
        for a, d in zip(args, in_dims):
            if isinstance(a, torch.Tensor):
                if not broadcasts:
                    a = batch_first(a, d, info.batch_size)
                elif d is not None:
                    a = a.movedim(d, 0)
                    a = a.reshape(a.shape[:1] + (1,) * (rank + 1 - a.dim()) + a.shape[1:])
            moved.append(a)
        return op(*moved, **kwargs), ((0,) * n_out if n_out > 1 else 0)

    return rule


def sample(arg: Any, in_dim: Any, i: int) -> Any:
    """Sample `i` of an argument that `register_vmap` hands a rule with its `in_dim` (None:
    not batched); a list of tensors (`Tensor[]`) comes with a list of dims, one per element."""
    if isinstance(arg, (list, tuple)) and isinstance(in_dim, (list, tuple)):
        return type(arg)(sample(a, d, i) for a, d in zip(arg, in_dim))
    return arg if in_dim is None else arg.select(in_dim, i)


def per_sample(op: Callable[..., Any], batch_size: int, in_dims: Sequence[Any], args: Sequence[Any],
               kwargs: dict[str, Any]) -> tuple[Any, Any]:
    """One call of `op` per sample, the results stacked along dim 0: what a rule does for the
    arguments it cannot fold into one call on the whole batch.  (A rule's `args` are the
    op's positional arguments, those left at their defaults at the end omitted.)"""
    if batch_size == 0:  # no sample to call the op on: its results' shapes from its fake kernel
        return _no_samples(op, in_dims, args, kwargs)
    results = [op(*(sample(a, d, i) for a, d in zip(args, in_dims)), **kwargs) for i in range(batch_size)]
    if isinstance(results[0], (tuple, list)):
        return tuple(torch.stack(r) for r in zip(*results)), (0,) * len(results[0])
    return torch.stack(results), 0


def _no_samples(op: Callable[..., Any], in_dims: Sequence[Any], args: Sequence[Any],
                kwargs: dict[str, Any]) -> tuple[Any, Any]:
    """`per_sample` over an empty batch: empty results of the shapes and dtypes a sample's
    would have, from a call on meta tensors of a sample's shape."""
    device = next((a.device for a in args if isinstance(a, torch.Tensor)), torch.device("cpu"))

    def meta(a: Any, d: Any) -> Any:
        if isinstance(a, (list, tuple)) and isinstance(d, (list, tuple)):
            return type(a)(meta(x, e) for x, e in zip(a, d))
        if not isinstance(a, torch.Tensor):
            return a
        shape = list(a.shape)
        if d is not None:
            del shape[d]
        return torch.empty(shape, dtype=a.dtype, device="meta")

    result = op(*(meta(a, d) for a, d in zip(args, in_dims)), **kwargs)

    def empty(r: torch.Tensor) -> torch.Tensor:
        return torch.empty((0, *r.shape), dtype=r.dtype, device=device)

    if isinstance(result, (tuple, list)):
        return tuple(empty(r) for r in result), (0,) * len(result)
    return empty(result), 0


def rowwise_rule(op: Callable[..., Any], roles: Sequence[str | None], n_out: int) -> BatchingRule:
    """Row-wise ops (`rowwise:`), from their shape rule.  `roles` has one entry per positional
    argument: "rows" for a tensor whose shape begins with the run of rows (`["*B", D]` and
    the per-row `["*B"]`), "column" for one without it (`[D]`: the same for every row), None
    for other arguments.  The batch is one more leading dimension of the run of rows, so while
    no column is batched one call on the whole batch is the batched result: batch dims to the
    front, unbatched row tensors expanded to the batch; every return is rows or per-row, so
    batched at 0.  A batched column has no such form: one call per sample, stacked."""

    def rule(info: Any, in_dims: Sequence[int | None], *args: Any, **kwargs: Any) -> tuple[Any, Any]:
        if any(d is not None and r == "column" for d, r in zip(in_dims, roles)):
            return per_sample(op, info.batch_size, in_dims, args, kwargs)
        moved = []
        for a, d, r in zip(args, in_dims, roles):
            if r == "rows" and isinstance(a, torch.Tensor):
                a = batch_first(a, d, info.batch_size)
            moved.append(a)
        return op(*moved, **kwargs), ((0,) * n_out if n_out > 1 else 0)

    return rule


def load_rule(module: str, function: str) -> BatchingRule:
    """A hand-written batching rule, `vmap: module:function`."""
    rule: BatchingRule = load_function(module, function)
    return rule


def load_function(module: str, function: str) -> Callable[..., Any]:
    """`module:function`, imported (a declared fake kernel, `fake:`, when first called)."""
    found: Callable[..., Any] = getattr(importlib.import_module(module), function)
    return found


def no_rule(op: str) -> BatchingRule:
    """The rule of an op with none: a clear error rather than a slow per-example loop."""

    def rule(info: Any, in_dims: Sequence[int | None], *args: Any, **kwargs: Any) -> NoReturn:
        raise RuntimeError(f"{op}: no batching rule for torch.vmap; declare 'pointwise: true' if the op is "
                           "elementwise, or 'vmap: module:function' naming a rule")

    return rule


# ----------------------------------------------------------------------------- autograd

def register_autograd(op: str, backward: Callable[..., Any], setup_context: Callable[..., Any],
                      jvp: Callable[..., Any] | None = None) -> None:
    """The stable target's autograd of `op` ("ns::name").  With forward formulas (`jvp`): an
    autograd.Function of the op at the Autograd key (_function_kernel).  Without: torch.library.
    register_autograd's kernel (torch._library.autograd.make_autograd_impl, which it registers),
    behind a check that forward-mode AD raises.  register_autograd registers no forward formula,
    and its kernel, called with a dual tensor that does not require grad, returns results
    without a tangent; here that is a NotImplementedError naming the op, as the full target's
    ops without a forward formula raise.  Where torch lacks make_autograd_impl (a release after
    those claimed), register_autograd itself.  The typed wrappers call the op through the
    same formulas under torch.func's transforms (func_call)."""
    _PYTHON_AUTOGRAD[op] = (backward, setup_context, jvp)
    if jvp is not None:
        impl(op, _function_kernel(op, backward, setup_context, jvp), "Autograd", with_keyset=True)
        return
    autograd = getattr(getattr(torch, "_library", None), "autograd", None)
    make, info = getattr(autograd, "make_autograd_impl", None), getattr(autograd, "Info", None)
    if make is None or info is None:
        torch.library.register_autograd(op, backward, setup_context=setup_context)
        return
    torch_kernel = make(overload(op), info(backward, setup_context))
    from torch.autograd import forward_ad

    def kernel(keyset: Any, *args: Any, **kwargs: Any) -> Any:
        if forward_ad._current_level >= 0 and _has_tangent(args):
            raise NotImplementedError(
                f"{op}: forward-mode AD is not implemented in the stable-ABI target for an op without "
                "forward formulas: declare one for each differentiable return ('result:' in its derivatives, "
                "or derived from a pointwise op's), or build the library in the full ATen target")
        return torch_kernel(keyset, *args, **kwargs)

    impl(op, kernel, "Autograd", with_keyset=True)


class _CallInfo:
    """What the Autograd kernel passes its Function beside the op's arguments: the dispatch keys
    to redispatch with, and the keyword-only arguments (the dispatcher passes them by name)."""

    __slots__ = ("keyset", "kwargs")

    def __init__(self, keyset: Any, kwargs: dict[str, Any]) -> None:
        self.keyset, self.kwargs = keyset, kwargs


def _function_kernel(op: str, backward: Callable[..., Any], setup_context: Callable[..., Any],
                     jvp: Callable[..., Any]) -> Callable[..., Any]:
    """The Autograd kernel of an op with forward formulas: a torch.autograd.Function whose
    forward redispatches below autograd, with setup_context, backward (the formulas, as
    register_autograd registers them) and jvp (the forward formulas).  register_autograd takes no
    jvp, so this is its kernel (make_autograd_impl) with one: the same redispatch, defaults
    filled in for setup_context, and needs_input_grad of the op's arguments alone.  Functional ops
    without a Tensor[] argument only (the generator refuses the rest: codegen/plugins/stable.py)."""
    from torch.autograd import forward_ad
    op_overload = overload(op)

    def forward(*args: Any) -> Any:
        info: _CallInfo = args[-1]
        with torch._C._AutoDispatchBelowAutograd():
            return op_overload.redispatch(info.keyset & torch._C._after_autograd_keyset, *args[:-1], **info.kwargs)

    function = _autograd_function(op, "ForwardAndBackwardOf", forward, backward, setup_context, jvp)

    def kernel(keyset: Any, *args: Any, **kwargs: Any) -> Any:
        if (torch.is_grad_enabled() and torch._C._any_requires_grad(*args, **kwargs)) or (
                forward_ad._current_level >= 0 and _has_tangent(args)):
            return function.apply(*args, _CallInfo(keyset, kwargs))
        with torch._C._AutoDispatchBelowAutograd():
            return op_overload.redispatch(keyset & torch._C._after_autograd_keyset, *args, **kwargs)

    return kernel


def _autograd_function(op: str, prefix: str, forward: Callable[..., Any], backward: Callable[..., Any],
                       setup_context: Callable[..., Any], jvp: Callable[..., Any] | None,
                       generate_vmap_rule: bool = False) -> Any:
    """A torch.autograd.Function of `op` (in setup_context style, as torch.func requires) whose
    `forward(*args, info)` computes it: the op's arguments, then a _CallInfo.  The formulas are
    the op's, as register_autograd takes them: setup_context sees the arguments with their
    defaults filled in, backward the needs_input_grad of the op's arguments alone.
    `generate_vmap_rule`: torch.func's vmap of the Function (vmap over grad) runs its forward,
    and so the op's own vmap rule, and its backward batched."""
    from torch._library.utils import fill_defaults
    op_overload = overload(op)
    schema = op_overload._schema

    def setup(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
        info: _CallInfo = inputs[-1]
        # the dispatcher drops arguments equal to their defaults (fill_defaults is untyped)
        args, _ = fill_defaults(schema, inputs[:-1], info.kwargs)  # type: ignore[no-untyped-call]
        setup_context(ctx, tuple(args), output)

    def backward_(ctx: Any, *grads: Any) -> Any:
        needs = ctx.needs_input_grad
        ctx.needs_input_grad = needs[:-1]
        try:
            result = backward(ctx, *grads)
        finally:
            ctx.needs_input_grad = needs
        return (*(result if isinstance(result, tuple) else (result,)), None)

    # Function.apply binds the forward's arguments to its signature on every call (setup_context
    # style: torch.autograd.function._bind_default_args), and inspect.signature reads a
    # function's code each time unless the function carries its own `__signature__`: 31.8 ->
    # 23.0 us a call of a stable-target op with grad (mul_constant, 8 elements).
    forward.__signature__ = inspect.signature(forward)  # type: ignore[attr-defined]
    methods: dict[str, Any] = {"forward": staticmethod(forward), "setup_context": staticmethod(setup),
                               "backward": staticmethod(backward_), "generate_vmap_rule": generate_vmap_rule}
    if jvp is not None:
        methods["jvp"] = staticmethod(lambda ctx, *tangents: jvp(ctx, *tangents[:-1]))
    name = f"{prefix}_{op_overload._namespace}_{op_overload._opname}_{op_overload._overloadname}"
    return type(name, (torch.autograd.Function,), methods)


# What each op's register_autograd registered, for func_call: op -> (backward, setup_context, jvp).
_PYTHON_AUTOGRAD: dict[str, tuple[Callable[..., Any], Callable[..., Any], Callable[..., Any] | None]] = {}
_FUNC_FUNCTIONS: dict[str, Any] = {}  # op -> its autograd.Function for torch.func (func_call)


def func_transform_active() -> bool:
    """Whether a torch.func transform that differentiates (grad, vjp, jacrev, jvp, jacfwd, ...)
    is running, outside torch.compile's tracing: then the stable target's typed wrappers call
    their op through func_call."""
    if not torch._C._are_functorch_transforms_active() or torch.compiler.is_compiling():  # the cheaper first
        return False
    from torch._C._functorch import TransformType
    from torch._functorch.pyfunctorch import retrieve_all_functorch_interpreters
    return any(i.key() in (TransformType.Grad, TransformType.Jvp) for i in retrieve_all_functorch_interpreters())


def autograd_not_needed(*args: Any, **kwargs: Any) -> bool:
    """Whether a call of a stable-target op with Python autograd (register_autograd) needs no
    autograd: grad mode off or no argument requiring grad, no forward-mode AD level, and nothing
    that sees the call in a way that could (a torch.func transform, vmap included: it unwraps to
    tensors that may require grad; a TorchDispatchMode; torch.compile's tracing, which cannot
    trace the guard).  Then the typed wrapper calls the op below the Autograd key
    (torch._C._AutoDispatchBelowAutograd), as the Python autograd kernel would after the same
    checks (torch._library.autograd's autograd_impl): the same result without the dispatcher's
    round trip into Python and back (a call of mul_constant: 7.4 us through it, 5.0 us so,
    these checks and the guard included).  A __torch_function__ argument or mode has been
    handed its call before this."""
    return not (_functorch_active() or _is_compiling() or _forward_ad._current_level >= 0 or _dispatch_modes()
                or (_grad_enabled() and _any_requires_grad(*args, **kwargs)))


# autograd_not_needed's checks, bound once: each attribute lookup on the way (torch._C...) cost
# about 0.1 us of a check that took 0.8 us.
_functorch_active = torch._C._are_functorch_transforms_active
_is_compiling = torch.compiler.is_compiling
_forward_ad = torch.autograd.forward_ad
_dispatch_modes = torch._C._len_torch_dispatch_stack
_grad_enabled = torch._C.is_grad_enabled
_any_requires_grad = torch._C._any_requires_grad


def func_call(op: str, *args: Any, **kwargs: Any) -> Any:
    """`op` ("ns::name") called from its typed wrapper under a torch.func transform
    (func_transform_active), in the stable target: its formulas as a torch.autograd.Function
    applied here, above the dispatcher, whose forward calls the op.  torch.func cannot
    differentiate the Function that register_autograd's kernel applies at the Autograd key
    (it finds no kernel of the custom_function_call operator there: pytorch#170834); one
    applied before the op is dispatched it can, as any autograd.Function in setup_context
    style.  `args` and `kwargs` as the op takes them; an op without formulas is called as it
    is."""
    op_overload = overload(op)
    function = _FUNC_FUNCTIONS.get(op)
    if function is None:
        rules = _PYTHON_AUTOGRAD.get(op)
        if rules is None:
            return op_overload(*args, **kwargs)

        def forward(*call: Any) -> Any:
            info: _CallInfo = call[-1]
            return op_overload(*call[:-1], **info.kwargs)

        function = _FUNC_FUNCTIONS[op] = _autograd_function(op, "FuncTransformOf", forward, *rules,
                                                            generate_vmap_rule=True)
    # the Function's inputs: every positional argument (a formula may leave out defaulted ones,
    # or name them), then the keyword-only ones, by name, beside them
    kwargs = dict(kwargs)
    positional = [a for a in op_overload._schema.arguments if not a.kwarg_only]
    args = (*args, *(kwargs.pop(a.name) if a.name in kwargs else a.default_value for a in positional[len(args):]))
    return function.apply(*args, _CallInfo(None, kwargs))


_FORMULA_OPS: dict[str, Callable[..., Any]] = {}  # op -> formula_op's caller


def formula_op(op: str) -> Callable[..., Any]:
    """The library's op `op` ("ns::name") as the derivative formulas call it: through
    torch.ops, or, under a torch.func transform, through func_call, so that torch.func also
    differentiates a backward that calls the library's ops (grad of grad, hessian)."""
    caller = _FORMULA_OPS.get(op)
    if caller is None:
        namespace, _, name = op.partition("::")
        packet = getattr(getattr(torch.ops, namespace), name)

        def call(*args: Any, **kwargs: Any) -> Any:
            if func_transform_active():
                return func_call(op, *args, **kwargs)
            return packet(*args, **kwargs)

        caller = _FORMULA_OPS[op] = call
    return caller


def forward_tangent(op: str, name: str, tangent: Any, result: torch.Tensor) -> torch.Tensor | None:
    """Return `name`'s tangent from its forward formula's value, as the full target sets it: in
    the return's dtype, expanded to its shape where it broadcasts; any other shape is an error
    naming the op and the return."""
    if tangent is None:
        return None
    if not isinstance(tangent, torch.Tensor):
        tangent = torch.full_like(result, tangent)
    if tangent.shape != result.shape:
        try:
            fits = torch.broadcast_shapes(tangent.shape, result.shape) == result.shape  # type: ignore[no-untyped-call]
        except RuntimeError:
            fits = False
        if not fits:
            raise RuntimeError(f"{op}: the forward-derivative formula of '{name}' gives a tangent of shape "
                               f"{list(tangent.shape)}, but the return has shape {list(result.shape)}")
        tangent = tangent.expand(result.shape)
    converted: torch.Tensor = tangent.to(result.dtype)
    return converted


def _has_tangent(values: Iterable[Any]) -> bool:
    """Whether a tensor among `values` (or in a list among them) carries a forward-mode tangent
    at the current dual level."""
    from torch.autograd import forward_ad
    for v in values:
        if isinstance(v, torch.Tensor):
            if forward_ad.unpack_dual(v).tangent is not None:  # type: ignore[no-untyped-call]
                return True
        elif isinstance(v, (list, tuple)) and _has_tangent(v):
            return True
    return False


# ----------------------------------------------------------------------------- autocast

# Whether a tensor is on the device of an autocast device type (at::autocast::is_autocast_eligible):
# Tensor.is_cpu and .is_cuda, which cost a fifth of Tensor.device.type.
_AUTOCAST_ON_DEVICE: dict[str, Callable[[torch.Tensor], bool]] = {
    "cpu": lambda t: t.is_cpu, "cuda": lambda t: t.is_cuda or t.device.type == "xla"}


def register_autocast(op: str, policy: str, cast: Sequence[tuple[int, str]],
                      promote: Sequence[tuple[int, str]]) -> None:
    """Python kernels at the AutocastCPU and AutocastCUDA keys of `op` ("ns::name" or
    "ns::name.overload"), the stable target's autocast (its C++ API registers no kernel at an
    autocast key), with the full target's C++ kernels' semantics (codegen/api/autocast.py):
    exclude the device's autocast key, cast the arguments `cast` names ((position, name) each:
    the dispatcher passes keyword-only arguments by name) to `policy`'s dtype, call the op.
    Registered as torch.library.register_autocast registers one (a Library kernel, and
    `py_impl` for the Python dispatcher of torch.compile's tracing), which takes only a fixed
    dtype.  Casts are not cached as at::autocast::cached_cast caches a leaf weight's."""
    if not registered(op):
        return
    op_overload = overload(op)
    for device_type in ("cpu", "cuda"):
        key = "Autocast" + torch._C._dispatch_key_for_device(device_type)
        dispatch_key = getattr(torch._C.DispatchKey, key)
        kernel = _autocast_kernel(op, op_overload, device_type, dispatch_key, policy, cast, promote)
        op_overload.py_kernels.pop(dispatch_key, None)
        op_overload.py_impl(dispatch_key)(kernel)
        impl(op, kernel, key)


def _autocast_kernel(op: str, op_overload: Any, device_type: str, dispatch_key: Any, policy: str,
                     cast: Sequence[tuple[int, str]], promote: Sequence[tuple[int, str]]) -> Callable[..., Any]:
    on_device = _AUTOCAST_ON_DEVICE[device_type]
    excluded = torch._C.DispatchKeySet(dispatch_key)

    def dtype(args: Sequence[Any], kwargs: dict[str, Any]) -> torch.dtype:
        if policy == "fp32":
            return torch.float32
        lower = torch.get_autocast_dtype(device_type)
        if policy == "lower_precision":
            return lower
        given = [(n, args[i] if i < len(args) else kwargs.get(n)) for i, n in promote]
        return _autocast_promote(op, lower, on_device, given)

    def kernel(*args: Any, **kwargs: Any) -> Any:
        with torch._C._ExcludeDispatchKeyGuard(excluded):
            to = dtype(args, kwargs)
            given = list(args)
            for i, n in cast:
                if i < len(given):
                    given[i] = _autocast_cast(given[i], to, on_device)
                elif n in kwargs:
                    kwargs[n] = _autocast_cast(kwargs[n], to, on_device)
            return op_overload(*given, **kwargs)

    return kernel


def _autocast_eligible(t: Any, on_device: Callable[[torch.Tensor], bool]) -> bool:
    """at::autocast::is_eligible: a tensor on the autocast device, floating point, not float64."""
    return isinstance(t, torch.Tensor) and t.is_floating_point() and t.dtype != torch.float64 and on_device(t)


def _autocast_cast(value: Any, to: torch.dtype, on_device: Callable[[torch.Tensor], bool]) -> Any:
    """at::autocast::cached_cast of a Tensor, a Tensor? (None passes) or a Tensor[] (each element)."""
    if isinstance(value, (list, tuple)):
        return type(value)(_autocast_cast(v, to, on_device) for v in value)
    return value.to(to) if _autocast_eligible(value, on_device) and value.dtype != to else value


def _autocast_promote(op: str, lower: torch.dtype, on_device: Callable[[torch.Tensor], bool],
                      tensors: Sequence[tuple[str, Any]]) -> torch.dtype:
    """at::autocast::promote_type from the autocast dtype `lower`: float32 if an eligible tensor
    is float32, else `lower`; float64 ignored; another floating dtype (float16 under a bfloat16
    autocast) is refused, as at::autocast::prioritize refuses it."""
    current = lower
    for name, t in tensors:
        if not _autocast_eligible(t, on_device):
            continue
        if current == torch.float32 or t.dtype == torch.float32:
            current = torch.float32
        elif t.dtype != lower:
            raise RuntimeError(f"{op}: argument '{name}' has dtype {t.dtype}, but under autocast (promote) the "
                               f"op takes float32 or the autocast dtype {lower} (Unexpected floating ScalarType "
                               "in at::autocast::prioritize)")
    return current
