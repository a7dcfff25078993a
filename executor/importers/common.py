"""File reading shared by the importers: bounded size, one-line errors naming the file."""

from __future__ import annotations

import contextlib
import gzip
import json
import zlib
from pathlib import Path

from planner.core.errors import InputError
from planner.core.names import no_such_file

DEFAULT_MAX_TRACE_BYTES = 512 * 1024 * 1024
MAX_TRACE_BYTES = DEFAULT_MAX_TRACE_BYTES
MAX_DURATION_US = 3.6e9  # one hour: no operator of one inference run takes longer
MAX_DURATION_MS = MAX_DURATION_US / 1000.0
# Profiler events are tens to hundreds of bytes of JSON each; a file with a container
# (object or array) every few bytes is not a trace, and parsed whole it would take
# tens of times its size in memory. Refused before parsing, so memory stays bounded by
# a small multiple of the file (the text, and Python objects of real events).
MIN_BYTES_PER_CONTAINER = 16


HEAD_BYTES = 64 * 1024  # where a file's format must show: the first bytes, whitespace skipped


@contextlib.contextmanager
def max_bytes(limit: int):  # noqa: ANN201
    """The largest trace file (after gunzip) the importers read, while the block runs
    (`planner import --max-file-mb`); the default again after it."""
    global MAX_TRACE_BYTES
    before, MAX_TRACE_BYTES = MAX_TRACE_BYTES, int(limit)
    try:
        yield
    finally:
        MAX_TRACE_BYTES = before


def read_text(path: str) -> str:
    return read_bytes(path, "text").decode("utf-8", errors="replace")


def _check_start(head: bytes, path: str, kind: str) -> None:
    """Refuse at the first bytes a file of `kind` cannot start with (before reading on:
    /dev/zero or /dev/urandom would otherwise be read to the size limit, or forever)."""
    if kind == "json":
        body = head.lstrip(b" \t\r\n")
        body = body[3:] if body.startswith(b"\xef\xbb\xbf") else body
        if not body and len(head) >= HEAD_BYTES:
            raise InputError(path, f"{len(head)} bytes of whitespace and no JSON: not a profiler trace")
        if body and body[:1] not in (b"{", b"["):
            raise InputError(path, f"starts with byte 0x{body[0]:02x} at offset {len(head) - len(body)}: not JSON (a "
                                   "profiler trace starts with [ or {)")
    elif kind == "text":
        nul = head.find(b"\x00")
        if nul >= 0:
            raise InputError(path, f"binary data (a NUL byte at offset {nul}): not a profiler's text output")


def _bounded(f, path: str, kind: str, limit: int, what: str, prefix: bytes = b"") -> bytearray:  # noqa: ANN001
    head = prefix + f.read(HEAD_BYTES - len(prefix))
    _check_start(head, path, kind)
    data = bytearray(head)
    while chunk := f.read(1 << 20):  # in pieces: read(limit) would allocate the whole limit up front
        data += chunk
        if len(data) > limit:
            raise InputError(path, f"over the {limit} byte limit{what} (--max-file-mb raises it)")
    return data


def read_bytes(path: str, kind: str = "json") -> bytearray:
    """The file's bytes (gunzipped when it is gzip), bounded by MAX_TRACE_BYTES however big
    the file claims to be (a device or a pipe claims 0 bytes), and refused at its first
    bytes when they cannot start a file of `kind` ("json" or "text")."""
    p = Path(path)
    try:
        size = p.stat().st_size
    except FileNotFoundError:
        raise InputError(path, no_such_file(path)) from None
    except OSError as exc:
        raise InputError(path, f"cannot read: {exc.strerror}") from None
    if size > MAX_TRACE_BYTES:
        raise InputError(path, f"{size} bytes, over the {MAX_TRACE_BYTES} byte limit (--max-file-mb raises it)")
    try:
        with p.open("rb") as f:
            first = f.read(2)
            if first != b"\x1f\x8b":
                return _bounded(f, path, kind, MAX_TRACE_BYTES, "", first)
        with gzip.open(p, "rb") as g:  # torch.profiler's tensorboard handler writes .json.gz
            return _bounded(g, path, kind, MAX_TRACE_BYTES, " once decompressed")
    except OSError as exc:
        if isinstance(exc, gzip.BadGzipFile):
            raise InputError(path, f"not a readable gzip file: {exc}"[:200]) from None
        raise InputError(path, f"cannot read: {exc.strerror or exc}"[:200]) from None
    except (EOFError, zlib.error) as exc:
        raise InputError(path, f"not a readable gzip file: {exc}"[:200]) from None


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
