"""File reading shared by the importers: bounded size, one-line errors naming the file."""

from __future__ import annotations

import json
from pathlib import Path

from planner.core.errors import InputError

MAX_TRACE_BYTES = 512 * 1024 * 1024


def read_text(path: str) -> str:
    p = Path(path)
    try:
        size = p.stat().st_size
    except FileNotFoundError:
        raise InputError(path, "no such file") from None
    except OSError as exc:
        raise InputError(path, f"cannot read: {exc.strerror}") from None
    if size > MAX_TRACE_BYTES:
        raise InputError(path, f"{size} bytes, over the {MAX_TRACE_BYTES} byte limit")
    try:
        return p.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise InputError(path, f"cannot read: {exc.strerror}") from None


def load_json_file(path: str):  # noqa: ANN201
    text = read_text(path)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(path, f"not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
