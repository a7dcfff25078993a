"""The nearest known name to a misspelled one ("did you mean"), shared by every edge that
refuses a name: device spec keys, commands, device ids, objectives, JSON fields in 422
bodies, file names. A typo is refused naming what was meant, never taken in silence."""

from __future__ import annotations

import difflib
from typing import Iterable


def nearest(name: str, known: Iterable[str], cutoff: float = 0.6) -> str | None:
    """The known name closest to `name` (difflib's ratio at least `cutoff`), or None."""
    close = difflib.get_close_matches(str(name), [str(k) for k in known], n=1, cutoff=cutoff)
    return close[0] if close else None


def did_you_mean(name: str, known: Iterable[str], cutoff: float = 0.6) -> str:
    """"did you mean 'x'? " for the nearest known name, or "" (to prefix a list of the known)."""
    close = nearest(name, known, cutoff)
    return f"did you mean '{close}'? " if close else ""
