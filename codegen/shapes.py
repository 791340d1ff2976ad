"""Compatibility name: the shape language lives in `opwrap_codegen.lang.shapes`.  Kept
because `opwrap_codegen.shapes` is public (users' code imports it); this name is that very
module, so attributes set on one are set on the other.  Nothing in the toolchain imports it."""

import sys

from .lang import shapes as _shapes

sys.modules[__name__] = _shapes
