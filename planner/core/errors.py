"""Errors the edges (CLI, API) turn into one-line messages or 422 responses.

Every error names the JSON path of the offending input and the reason, so a user
can fix a 5,000-line profile without reading a traceback.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence


def format_path(loc: Sequence[str | int]) -> str:
    """('layers', 3, 'measurements', 0, 'time_ms') -> 'layers[3].measurements[0].time_ms'."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out or "<root>"


@dataclass(frozen=True)
class Issue:
    path: str
    reason: str

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"


ONE_LINE_MAX = 5  # problems a CLI error keeps on one line (PlannerError.text)


class PlannerError(Exception):
    """Base class: input or request the planner refuses, with where and why."""

    status = "invalid"

    def __init__(self, issues: Iterable[Issue] | str, reason: str | None = None):
        if isinstance(issues, str):
            issues = [Issue(issues, reason or "invalid")]
        self.issues: list[Issue] = list(issues)
        super().__init__(self.one_line())

    def one_line(self) -> str:
        """Every issue, `; `-separated: the second one is often the real clue (a
        misspelled field), so none is held back."""
        if not self.issues:
            return "invalid input"
        if len(self.issues) == 1:
            return str(self.issues[0])
        return f"{len(self.issues)} problems: " + "; ".join(str(i) for i in self.issues)

    def text(self) -> str:
        """For a terminal: one line, or, past ONE_LINE_MAX problems (an import whose
        devices do not match, layer by layer), one problem per line under a count."""
        if len(self.issues) <= ONE_LINE_MAX:
            return self.one_line()
        return f"{len(self.issues)} problems:\n" + "\n".join(f"  {i}" for i in self.issues)


class InputError(PlannerError):
    """A document (platform, profile, request) is malformed or inconsistent."""


class InfeasibleError(PlannerError):
    """A well-formed request that no plan can satisfy (proven, not guessed)."""

    status = "infeasible"


class NoPlanFound(PlannerError):
    """The solver stopped (time limit) without a plan; infeasibility is NOT proven."""

    status = "not_found"


class UnsupportedRequest(PlannerError):
    """A solver was asked for something it cannot honour; never approximated silently."""

    status = "unsupported"


def from_pydantic(exc, prefix: Sequence[str | int] = (), model=None) -> InputError:  # noqa: ANN001
    """Turn a pydantic ValidationError into an InputError with JSON paths; a misspelled
    field or value names the nearest known one (`model`: what was validated)."""
    from planner.core.names import field_hint

    issues = []
    for err in exc.errors():
        loc = [p for p in (*prefix, *err.get("loc", ())) if p not in ("__root__",)]
        msg = err.get("msg", "invalid")
        if msg.startswith("Value error, "):
            msg = msg[len("Value error, "):]
        issues.append(Issue(format_path(loc), msg + field_hint(err, model)))
    return InputError(issues)
