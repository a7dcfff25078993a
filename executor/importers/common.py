"""File reading shared by the importers: bounded size, one-line errors naming the file."""

from __future__ import annotations

import gzip
import json
import zlib
from pathlib import Path

from planner.core.errors import InputError
from planner.core.names import no_such_file

MAX_TRACE_BYTES = 512 * 1024 * 1024
MAX_DURATION_US = 3.6e9  # one hour: no operator of one inference run takes longer
MAX_DURATION_MS = MAX_DURATION_US / 1000.0
# Profiler events are tens to hundreds of bytes of JSON each; a file with a container
# (object or array) every few bytes is not a trace, and parsed whole it would take
# tens of times its size in memory. Refused before parsing, so memory stays bounded by
# a small multiple of the file (the text, and Python objects of real events).
MIN_BYTES_PER_CONTAINER = 16


def read_text(path: str) -> str:
    return read_bytes(path).decode("utf-8", errors="replace")


def read_bytes(path: str) -> bytes:
    """The file's bytes (gunzipped when it is gzip), bounded by MAX_TRACE_BYTES."""
    p = Path(path)
    try:
        size = p.stat().st_size
    except FileNotFoundError:
        raise InputError(path, no_such_file(path)) from None
    except OSError as exc:
        raise InputError(path, f"cannot read: {exc.strerror}") from None
    if size > MAX_TRACE_BYTES:
        raise InputError(path, f"{size} bytes, over the {MAX_TRACE_BYTES} byte limit")
    try:
        with p.open("rb") as f:
            gzipped = f.read(2) == b"\x1f\x8b"
        if not gzipped:
            return p.read_bytes()
        with gzip.open(p, "rb") as g:  # torch.profiler's tensorboard handler writes .json.gz
            data = g.read(MAX_TRACE_BYTES + 1)
    except OSError as exc:
        if isinstance(exc, gzip.BadGzipFile):
            raise InputError(path, f"not a readable gzip file: {exc}"[:200]) from None
        raise InputError(path, f"cannot read: {exc.strerror or exc}"[:200]) from None
    except (EOFError, zlib.error) as exc:
        raise InputError(path, f"not a readable gzip file: {exc}"[:200]) from None
    if len(data) > MAX_TRACE_BYTES:
        raise InputError(path, f"over the {MAX_TRACE_BYTES} byte limit once decompressed")
    return data


def load_json_file(path: str):  # noqa: ANN201
    data = read_bytes(path)
    containers = data.count(b"{") + data.count(b"[")  # an upper bound: brackets inside strings count too
    if containers > len(data) // MIN_BYTES_PER_CONTAINER + 1000:
        raise InputError(path, f"{containers} JSON objects/arrays in {len(data)} bytes: not a profiler trace (its events "
                               f"are tens to hundreds of bytes each); refused before parsing")
    text = data.decode("utf-8", errors="replace")
    del data  # the text alone while parsing
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(path, f"not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except RecursionError:
        raise InputError(path, "JSON nested too deeply to read (a profiler trace is a few levels deep)") from None
