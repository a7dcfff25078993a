"""Reading documents from files with one-line errors that name the file and the place."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from planner.core.errors import InputError, Issue, from_pydantic
from planner.core.names import no_such_file

M = TypeVar("M", bound=BaseModel)

MAX_FILE_BYTES = 256 * 1024 * 1024


def read_json(path: str | Path, what: str) -> object:
    p = Path(path)
    try:
        size = p.stat().st_size
    except FileNotFoundError:
        raise InputError(f"--{what}", no_such_file(p)) from None
    except OSError as exc:
        raise InputError(f"--{what}", f"cannot read {p}: {exc.strerror}") from None
    if size > MAX_FILE_BYTES:
        raise InputError(f"--{what}", f"{p} is {size} bytes, over the {MAX_FILE_BYTES} byte limit")
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"--{what}", f"cannot read {p}: {exc}") from None
    if not text.strip():  # what `planner x > FILE` leaves when x fails: the shell made the file first
        raise InputError(f"{p.name}", "the file is empty: did the command that wrote it fail?")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{p.name}", f"not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None


def parse(model: type[M], data: object, source: str = "") -> M:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        err = from_pydantic(exc, model=model)
        if source:
            err = InputError([Issue(f"{source}: {i.path}", i.reason) for i in err.issues])
        raise err from None


def load(model: type[M], path: str | Path, what: str) -> M:
    return parse(model, read_json(path, what), Path(path).name)
