"""The torch releases opwrap supports, and what differs between them: the toolchain's side.

Every C++ difference (generated sources and runtime headers) lives in
`runtime/include/opwrap/runtime/torch_compat.h`, keyed on torch's own version macros; every
Python difference of the toolchain lives here.  A generated library's run-time module
(`pyruntime.py`, copied into each library) asks `torch_before` for the one run-time
difference it has.  The docs' table of torch releases is `feature_table()`, and the tests
expect, on each release, exactly what `FEATURES` says (tests/conftest.py, `torch_feature`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

# Every release claimed: built and tested by `make torch-matrix` (CI), the newest by the full
# suite.  The toolchain's requirement (toolchain/pyproject.toml) and `codegen init`'s
# scaffold state the same range.
RELEASES: tuple[tuple[int, int], ...] = ((2, 11), (2, 12), (2, 13), (2, 14), (2, 15))
OLDEST, NEWEST = RELEASES[0], RELEASES[-1]


def release_name(release: tuple[int, int]) -> str:
    return f"{release[0]}.{release[1]}"


def requirement() -> str:
    """The torch requirement of the toolchain, and of a library not yet compiled (an sdist, an
    editable install): every claimed release.  A built wheel pins the one it compiled against."""
    return f"torch>={release_name(OLDEST)},<{NEWEST[0]}.{NEWEST[1] + 1}"


def release_of(version: str) -> tuple[int, int]:
    """A torch version's release: '2.11.0+cu130' -> (2, 11).  The loader's rule
    (pyruntime.torch_release, which a generated library carries without the toolchain)."""
    major, minor = version.split("+")[0].split(".")[:2]
    return int(major), int(minor)


def installed_version() -> str:
    """The version of the torch that `import torch` loads here ('2.14.1+cu130'), without
    importing it where it can: from its distribution's metadata, when that distribution is the
    one on the import path (importing torch costs about 1.6 s of CPU, and a wheel build's
    metadata step needs only this).  A torch already imported, or one without metadata of its
    own (a source tree on the path), answers by import."""
    import importlib.metadata
    import importlib.util
    import sys
    if "torch" not in sys.modules:
        spec = importlib.util.find_spec("torch")
        try:
            dist = importlib.metadata.distribution("torch")
        except importlib.metadata.PackageNotFoundError:
            dist = None
        if dist is not None and spec is not None and spec.origin and \
                os.path.realpath(str(dist.locate_file("torch/__init__.py"))) == os.path.realpath(spec.origin):
            return dist.version
    import torch
    return torch.__version__


def installed_release() -> tuple[int, int]:
    """The running torch's release (2.11.0+cu130 is release 2.11), without importing torch
    where its metadata says (installed_version)."""
    return release_of(installed_version())


# at::Tag values that older supported releases lack: tag -> the macro of torch_compat.h that
# names the tag where it exists and is empty before.  A declaration may name them on every
# release; the op is then registered without the tag (see FEATURES, "mutable_returns").
VERSIONED_TAGS = {"inplace": "OPWRAP_TAG_INPLACE", "out": "OPWRAP_TAG_OUT"}


@dataclass(frozen=True)
class Feature:
    """Something opwrap relies on that torch has from release `since` on.  `what` says what
    works from then; `before`, what a user sees on an older release; `error`, a regular
    expression for the error torch raises there (None where nothing raises)."""

    name: str
    since: tuple[int, int]
    what: str
    before: str
    error: str | None = None


FEATURES: tuple[Feature, ...] = (
    Feature(
        "inplace_out_tags", (2, 13),
        "the `inplace` and `out` tags (`torch.Tag`) on in-place ops and out= overloads, derived or declared",
        "the ops are registered without them, as torch has no such tags; the next row says what that costs"),
    Feature(
        "mutable_returns", (2, 13),
        "`torch.compile` (every backend) and opcheck's `test_aot_dispatch_dynamic` of ops that "
        "return a written argument: in-place ops (`addmv_`) and out= overloads (`myadd.out`), which the generator "
        "tags `inplace` and `out`",
        "torch refuses to trace them (\"Found a custom (non-ATen) operator whose output has alias annotations\"); "
        "eager calls, autograd, vmap, `torch.export` and opcheck's other checks work, and ops that write "
        "arguments and return nothing (`-> ()`) compile as on every release",
        r"operator whose output has alias annotations"),
    Feature(
        "python_warnings_from_ops", (2, 15),
        "a kernel's C++ warning (`TORCH_WARN`: an out= argument resized, say) reaches a call through `torch.ops` "
        "as a Python `UserWarning`, as it does for aten's functions",
        "torch prints it on stderr (the same text; Python's warning filters do not see it)"),
    Feature(
        "out_variant_lowering", (2, 13),
        "inductor lowers a functional op to its out= overload (`torch._library._out_variant`), where that is "
        "correct (one result, torch >= 2.14)",
        "inductor calls the functional op, which allocates its own results: the same values"),
)
FEATURE = {f.name: f for f in FEATURES}


def supports(name: str, release: tuple[int, int] | None = None) -> bool:
    """Whether `release` (the installed torch's by default) has feature `name`."""
    return (release or installed_release()) >= FEATURE[name].since


def feature_table() -> str:
    """The docs' table (torch-releases.md): each feature against each claimed release."""
    head = "| feature | " + " | ".join(release_name(r) for r in RELEASES) + " |"
    rule = "|---|" + "---|" * len(RELEASES)
    rows = [f"| {f.what} | " + " | ".join("yes" if r >= f.since else "no" for r in RELEASES) + " |"
            for f in FEATURES]
    notes = [f"- before {release_name(f.since)}, {f.name.replace('_', ' ')}: {f.before}." for f in FEATURES]
    return "\n".join([head, rule, *rows, "", *notes])
