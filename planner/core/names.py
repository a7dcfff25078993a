"""The nearest known name to a misspelled one ("did you mean"), shared by every edge that
refuses a name: device spec keys, commands, device ids, objectives, JSON fields in 422
bodies, file names. A typo is refused naming what was meant, never taken in silence."""

from __future__ import annotations

import difflib
import os
import re
from pathlib import Path
from typing import Annotated, Any, Iterable, Sequence, get_args, get_origin


def nearest(name: str, known: Iterable[str], cutoff: float = 0.6) -> str | None:
    """The known name closest to `name` (difflib's ratio at least `cutoff`), or None."""
    close = difflib.get_close_matches(str(name), [str(k) for k in known], n=1, cutoff=cutoff)
    return close[0] if close else None


def did_you_mean(name: str, known: Iterable[str], cutoff: float = 0.6) -> str:
    """"did you mean 'x'? " for the nearest known name, or "" (to prefix a list of the known)."""
    close = nearest(name, known, cutoff)
    return f"did you mean '{close}'? " if close else ""


def no_such_file(path: str | os.PathLike) -> str:
    """"no such file: PATH", with the nearest name in its folder (a typo in a file name)."""
    p = Path(path)
    try:
        with os.scandir(p.parent if str(p.parent) else ".") as entries:
            names = [e.name for _, e in zip(range(2000), entries)]  # bounded: a huge folder is not read whole
    except OSError:
        names = []
    close = nearest(p.name, names)
    return f"no such file: {path}" + (f" (did you mean {p.parent / close if str(p.parent) != '.' else close}?)"
                                      if close else "")


def fields_at(model: Any, loc: Sequence[Any]) -> list[str] | None:
    """The field names (aliases where set) of the model at `loc` inside `model`, following
    nested models, lists and dicts; None where the path leaves what can be followed."""
    from pydantic import BaseModel

    current = model
    for part in loc:
        current = _model_in(current)
        if current is None:
            return None
        if isinstance(part, int) or part not in current.model_fields:
            return None
        current = current.model_fields[part].annotation
    target = _model_in(current)
    if target is None or not (isinstance(target, type) and issubclass(target, BaseModel)):
        return None
    return [f.alias or name for name, f in target.model_fields.items()]


def _unwrap(tp: Any) -> Any:
    while get_origin(tp) is Annotated:
        tp = get_args(tp)[0]
    return tp


def _model_in(tp: Any) -> Any:
    """The pydantic model a type holds: itself, an Optional's, a list's or dict's items'."""
    from pydantic import BaseModel

    tp = _unwrap(tp)
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return tp
    for arg in get_args(tp):
        found = _model_in(arg)
        if found is not None:
            return found
    return None


def field_hint(err: dict, model: Any = None, skip: int = 0) -> str:
    """What to add to a pydantic error's message: for a field the model does not have,
    the nearest one it has and its fields; for a value outside a fixed set (an
    objective, a mode), the nearest allowed one. `skip`: leading loc parts that are not
    the model's (FastAPI's "body")."""
    kind, loc = err.get("type"), list(err.get("loc", ()))[skip:]
    if kind == "extra_forbidden" and model is not None and loc:
        known = fields_at(model, [p for p in loc[:-1] if not isinstance(p, int)])
        if known:
            shown = ", ".join(known[:24]) + (", ..." if len(known) > 24 else "")
            return f" ({did_you_mean(str(loc[-1]), known)}fields here: {shown})"
    if kind == "literal_error" and isinstance(err.get("input"), str):
        hint = did_you_mean(err["input"], re.findall(r"'([^']*)'", str((err.get("ctx") or {}).get("expected", ""))))
        return f" ({hint.strip()})" if hint else ""
    return ""
