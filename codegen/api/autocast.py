"""Autocast (`autocast: lower_precision | fp32 | promote`), what both targets share: the field,
its validation, and which arguments a kernel casts and which decide `promote`'s dtype.  The
full target's kernels are C++ (plugins/autocast.py), the stable target's Python
(plugins/stable_autocast.py), with the same semantics, torch's `at::autocast`:

- an argument is cast as `at::autocast::cached_cast` casts it: a `Tensor`, a `Tensor?` given,
  each element of a `Tensor[]` (torch has no `cached_cast` for a `Tensor?[]`: passed as it is),
  when it is on the autocast device, floating point and not float64, to the policy's dtype;
- `lower_precision`: the autocast dtype of the device (`torch.autocast(dtype=...)`);
- `fp32`: float32;
- `promote`: `at::autocast::promote_type` over the required `Tensor` arguments: float32 if an
  eligible one is float32, else the autocast dtype (float64 ignored)."""

from __future__ import annotations

from ..front.fields import Enum, Field
from ..lang.schema import ListType, is_tensor, unwrap_optional

POLICIES = ("lower_precision", "fp32", "promote")

FIELD = Field(Enum(*POLICIES, what="autocast policy"),
              "`lower_precision` (float inputs to the autocast dtype), `fp32` (to float32) or `promote` (to the "
              "widest input type): `AutocastCPU`/`AutocastCUDA` kernels that exclude the autocast key, cast the "
              "eligible inputs by torch's rules (`at::autocast::cached_cast`) and redispatch; C++ in the full "
              "target, Python (`torch.library`) in the stable one.")


def validate(decl, diag) -> None:
    """A declaration that autocast cannot serve: one that writes its arguments (a cast one would be
    a copy), or has no tensor to cast."""
    if decl.extra_field("autocast") is None:
        return
    loc = decl.field_loc("autocast")
    if decl.schema.is_mutable:
        diag.error(loc, f"{decl.name} writes its arguments in place; casting them under autocast would "
                   "write to a copy")
    elif not decl.tensor_inputs:
        diag.error(loc, f"{decl.name} has no Tensor input to cast")


def cast_arguments(schema) -> list:
    """The arguments a kernel casts: `Tensor`, `Tensor?` and `Tensor[]` (cached_cast's overloads)."""
    return [a for a in schema.arguments if is_tensor(unwrap_optional(a.type))
            or (isinstance(a.type, ListType) and is_tensor(a.type.elem))]


def promote_arguments(schema) -> list:
    """The arguments `promote` takes the dtype from: the required `Tensor`s."""
    return [a for a in schema.arguments if is_tensor(a.type)]
