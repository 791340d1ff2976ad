"""Write pass: deterministic, write-if-changed, atomic; stale files removed; drift check."""

from __future__ import annotations

import difflib
import os
import re
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class WriteReport:
    written: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    unchanged: int = 0


_SAFE_PATH = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]*(/[A-Za-z0-9_][A-Za-z0-9_.+-]*)*\Z")


def unsafe_path(rel: str) -> str:
    """Why `rel` may not be written under the generated directory ("" when it may): only
    relative paths of plain names (letters, digits, _ . + -, no leading dot), so nothing
    generated can land outside the directory or hide in it."""
    if not _SAFE_PATH.match(rel):
        return "only relative paths of letters, digits, '_', '.', '+' and '-' are allowed, not starting with '.'"
    if any(part in (".", "..") or part.endswith(".tmp") for part in rel.split("/")):
        return "'.' and '..' components and '.tmp' names are not allowed"
    return ""


def existing_files(root: Path) -> dict[str, Path]:
    """Every file under `root` except Python's bytecode caches (*.pyc in __pycache__).
    Anything else there, hidden files and leftovers of a killed write included, counts."""
    if not root.is_dir():
        return {}
    return {p.relative_to(root).as_posix(): p for p in sorted(root.rglob("*"))
            if (p.is_file() or p.is_symlink()) and not (p.parent.name == "__pycache__" and p.suffix == ".pyc")}


def write_tree(root: Path, files: dict[str, str]) -> WriteReport:
    """Make `root` hold exactly `files` (relative path -> text), touching only what differs."""
    report = WriteReport()
    real_root = root.resolve()
    for rel in sorted(files):  # every path is checked before anything is written
        why = unsafe_path(rel)
        if why:
            raise ValueError(f"refusing to write '{rel}' under {root}: {why}")
        parent = (root / rel).parent
        while not parent.exists() and parent != root:
            parent = parent.parent
        if not parent.resolve().is_relative_to(real_root):
            raise ValueError(f"refusing to write '{rel}': {parent} leads outside {root} (a symbolic link)")
    old = existing_files(root)
    for rel in sorted(files):
        data = files[rel].encode("utf-8")
        target = root / rel
        if rel in old and not old[rel].is_symlink() and old[rel].read_bytes() == data:
            report.unchanged += 1
            continue
        _atomic_write(target, data)
        report.written.append(rel)
    for rel in sorted(set(old) - set(files)):
        old[rel].unlink()
        report.removed.append(rel)
    for d in sorted((p for p in root.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True) if root.is_dir() else []:
        if d.name == "__pycache__":
            continue
        if not any(d.iterdir()):
            d.rmdir()
    return report


def _atomic_write(target: Path, data: bytes) -> None:
    """Write to a temporary file beside the target, then rename it over: readers see the old
    or the new file, never a partial one, even if the process is killed.  The temporary name
    is unique to this process (one writer per process writes each target once), which spares
    mkstemp's retries; and no fsync: that would only add crash durability, and generated files
    are regenerated at will (it cost more than the rest of `generate` for a thousand
    declarations)."""
    tmp = target.parent / f".{target.name}.{os.getpid()}.tmp"
    try:
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, target)
    except FileNotFoundError:
        if tmp.parent.is_dir():
            raise
        target.parent.mkdir(parents=True, exist_ok=True)
        _atomic_write(target, data)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def diff_tree(root: Path, files: dict[str, str], label: str) -> list[str]:
    """A unified diff per drifted, missing or extra file (empty when `root` matches)."""
    out: list[str] = []
    old = existing_files(root)
    for rel in sorted(set(old) | set(files)):
        a_path, b_path = f"a/{label}/{rel}", f"b/{label}/{rel}"
        if rel not in files:
            out.append(f"extra file {label}/{rel}: not produced by any plugin\n")
            a = _read_lines(old[rel])
            out.extend(difflib.unified_diff(a, [], a_path, "/dev/null"))
            continue
        b = files[rel].splitlines(keepends=True)
        if rel not in old:
            out.append(f"missing file {label}/{rel}\n")
            out.extend(difflib.unified_diff([], b, "/dev/null", b_path))
            continue
        if old[rel].is_symlink():
            out.append(f"drifted file {label}/{rel}: a symbolic link where a generated file belongs\n")
            continue
        if old[rel].read_bytes() != files[rel].encode("utf-8"):
            a = _read_lines(old[rel])
            d = list(difflib.unified_diff(a, b, a_path, b_path))
            out.extend(d if d else [f"drifted file {label}/{rel}: differs in bytes not shown as text (encoding or line ends)\n"])
    return out


def write_tree_locked(root: Path, files: dict[str, str], log=lambda m: None) -> WriteReport:
    """`write_tree` holding the tree's lock: two writers at once would race on removals."""
    from .locking import locked
    with locked(root, log):
        return write_tree(root, files)


def diff_tree_locked(root: Path, files: dict[str, str], label: str, log=lambda m: None) -> list[str]:
    """`diff_tree` holding the tree's lock shared: not while a writer is midway."""
    from .locking import locked
    with locked(root, log, shared=True, create=False):
        return diff_tree(root, files, label)


def _read_lines(p: Path) -> list[str]:
    return p.read_bytes().decode("utf-8", errors="replace").splitlines(keepends=True)
