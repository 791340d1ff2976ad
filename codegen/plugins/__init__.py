"""Plugin discovery: the built-in plugins, then the ones a project names explicitly.

``[tool.codegen] plugins`` lists third-party plugins, each either ``"module:attr"`` (the
project root is importable while loading) or the name of an entry point in the
``opwrap_codegen.plugins`` group.  Nothing installed is loaded unless it is named.
"""

from __future__ import annotations

import importlib
import sys
from importlib.metadata import entry_points

from ..core.config import Config
from ..core.diagnostics import Diagnostics, Loc
from ..core.targets import ATEN, DEVICES, STABLE, Target, target_named
from .base import Output, Plugin
from .abi import AbiBindings
from .autocast import Autocast
from .autograd import Autograd
from .classes import Classes
from .cuda_archs import CudaArchs
from .kernels import DeviceKernels
from .fake import FakeKernels
from .pointwise import PointwiseKernels
from .rowwise import RowwiseKernels
from .python_loader import PythonLoader
from .python_fast import PythonFast
from .python_ops import PythonOps
from .vmap import Vmap
from .registration import SchemaRegistration
from .stable import StableAutograd, StableChecks, StableKernels, StableRegistration
from .stable_autocast import StableAutocast
from .stable_pointwise import StablePointwise
from .stable_rowwise import StableRowwise

# What a third-party plugin needs, from one module (docs/plugins.md): the base class, its
# outputs, the typed fields, and a device row with the kernel plugin that serves it.
from ..core.targets import Device  # noqa: E402
from ..front.fields import (Any, Bool, CppExpr, Enum, Field, FieldType, Identifier, Int, ListOf,  # noqa: E402
                            MappingOf, OneOf, Pattern, PyTarget, RelativePath, Schema, String, TorchTag)

__all__ = ["Plugin", "Output", "builtin_plugins", "load_plugins", "Device", "DeviceKernels",
           "Field", "FieldType", "Any", "Bool", "CppExpr", "Enum", "Identifier", "Int", "ListOf", "MappingOf",
           "OneOf", "Pattern", "PyTarget", "RelativePath", "Schema", "String", "TorchTag"]


def builtin_plugins(target: Target = ATEN) -> list[Plugin]:
    """The built-in emitters of a build target (codegen/core/targets.py), in pipeline order."""
    if target == STABLE:
        return stable_plugins()
    return [*(DeviceKernels(device) for device in DEVICES), AbiBindings(), PointwiseKernels(), RowwiseKernels(), Autograd(), Autocast(), Classes(), CudaArchs(), FakeKernels(), PythonLoader(), PythonOps(), PythonFast(), Vmap()]


def stable_plugins() -> list[Plugin]:
    """The stable-ABI target's emitters (plugins/stable.py), then the full target's Python and
    C ABI plugins, which serve both.  The fields of the full target's other plugins stay
    declared (by StableChecks), so that a declaration using one gets the error naming what the
    stable target lacks."""
    shared = [AbiBindings(), StableAutograd(), StableAutocast(), FakeKernels(), PythonLoader(), PythonOps(), Vmap()]
    kept = {type(p) for p in shared}
    own = {name for p in shared for name in p.fields}  # `autocast`: the stable target's own plugin declares it
    fields = {name: f for p in builtin_plugins(ATEN) if type(p) not in kept for name, f in p.fields.items()
              if name not in own}
    return [*(StableKernels(STABLE, device) for device in DEVICES), StablePointwise(STABLE), StableRowwise(STABLE),
            StableChecks(fields), *shared]


def load_plugins(config: Config, diag: Diagnostics) -> list[Plugin]:
    target = target_named(config.target)
    plugins = builtin_plugins(target)
    loc = Loc(str(config.root / "pyproject.toml"), 1, 1)
    for spec in config.plugins:
        obj = _resolve(spec, config, diag, loc)
        if obj is None:
            continue
        plugin = obj() if isinstance(obj, type) else obj
        if not isinstance(plugin, Plugin) or not plugin.name:
            diag.error(loc, f"plugin '{spec}' is not an opwrap_codegen.plugins.Plugin with a name")
            continue
        if any(p.name == plugin.name for p in plugins):
            diag.error(loc, f"plugin '{spec}' reuses the name '{plugin.name}'")
            continue
        plugins.append(plugin)
    # The registration plugin collects `library_block` statements from all the others.
    registration = StableRegistration(target) if target == STABLE else SchemaRegistration(tuple(plugins))
    return [registration] + plugins


def _resolve(spec: str, config: Config, diag: Diagnostics, loc: Loc):
    if ":" in spec:
        module, _, attr = spec.partition(":")
        root = str(config.root)
        added = root not in sys.path
        if added:
            sys.path.insert(0, root)
        try:
            return getattr(importlib.import_module(module), attr)
        except (ImportError, AttributeError) as e:
            diag.error(loc, f"cannot load plugin '{spec}': {e}")
            return None
        finally:
            if added:
                sys.path.remove(root)
    matches = [ep for ep in entry_points(group="opwrap_codegen.plugins") if ep.name == spec]
    if not matches:
        diag.error(loc, f"no plugin '{spec}': not 'module:attr' and no 'opwrap_codegen.plugins' entry point of that name")
        return None
    try:
        return matches[0].load()
    except Exception as e:  # a broken third-party package; report it as bad configuration
        diag.error(loc, f"cannot load plugin entry point '{spec}': {e}")
        return None
