"""Positioned errors and warnings, collected rather than raised one at a time."""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field


@dataclass(frozen=True, order=True)
class Loc:
    """A 1-based source position."""

    path: str
    line: int
    col: int

    def __str__(self) -> str:
        return f"{self.path}:{self.line}:{self.col}"

    def shifted(self, columns: int) -> "Loc":
        return Loc(self.path, self.line, self.col + columns)


@dataclass(frozen=True, order=True)
class Diagnostic:
    loc: Loc
    message: str
    hint: str = ""
    severity: str = "error"  # or "warning": printed, and the run goes on

    def __str__(self) -> str:
        text = f"{self.loc}: {self.severity}: {self.message}"
        return text + (f"\n{self.loc}: note: {self.hint}" if self.hint else "")


@dataclass
class Diagnostics:
    """Collects every error and warning of a run; passed to each pass, never global.  Only
    errors stop a run (its truth value)."""

    errors: list[Diagnostic] = field(default_factory=list)
    warnings: list[Diagnostic] = field(default_factory=list)

    def error(self, loc: Loc, message: str, hint: str = "") -> None:
        self.errors.append(Diagnostic(loc, message, hint))

    def warning(self, loc: Loc, message: str, hint: str = "") -> None:
        """Something torch accepts but that is likely a mistake (a convention of torchgen's)."""
        self.warnings.append(Diagnostic(loc, message, hint, "warning"))

    def __bool__(self) -> bool:
        return bool(self.errors)

    def sorted(self) -> list[Diagnostic]:
        return sorted(set(self.errors))


class CodegenError(Exception):
    """Raised to stop a run that produced errors; the CLI prints them and exits 2."""

    def __init__(self, diagnostics: list[Diagnostic]):
        self.diagnostics = diagnostics
        super().__init__("\n".join(map(str, diagnostics)))


def did_you_mean(word: str, choices) -> str:
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f"did you mean '{close[0]}'?" if close else ""
