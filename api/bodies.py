"""JSON request bodies, checked before any model sees them: nesting depth, string
sizes, NaN/Infinity (Python's json accepts them; JSON does not), NUL characters
(PostgreSQL text cannot hold them) and lone UTF-16 surrogates (not Unicode: they
break every encoder downstream). Each refusal is a 422 naming the JSON path.

`JsonRoute` is the route class of every router: it parses a request body (at most
PLANNER_MAX_REQUEST_BYTES) once with these checks and hands FastAPI the parsed value.
Uploaded documents (up to PLANNER_MAX_BODY_BYTES) are parsed with the same checks by a
plan worker process (api.fastplans.Planner.document), never on the event loop."""

from __future__ import annotations

import functools
import json
import re
from typing import Any, Callable

import numpy as np
from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from api.problems import ApiError
from planner.core.errors import Issue, format_path
from planner.core.schema import text_issue

INLINE_BYTES = 64 * 1024  # smaller bodies are parsed on the loop (a thread hop costs more)
BODY_METHODS = {"POST", "PUT", "PATCH"}
# \u0000, or a UTF-16 surrogate escape that is not part of a high+low pair
_SUSPECT = re.compile(rb"\\u0000|\\u[dD][89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F])|"
                      rb"(?<!\\u[dD][89abAB][0-9a-fA-F]{2})\\u[dD][c-fC-F][0-9a-fA-F]{2}")
_OPEN = np.zeros(256, np.int8)
_OPEN[[ord("["), ord("{")]] = 1
_OPEN[[ord("]"), ord("}")]] = -1


def _refuse(path: str, reason: str) -> ApiError:
    return ApiError(422, f"{path}: {reason}", errors=[Issue(path, reason)], title="Invalid input", kind="invalid-input")


def _first_bad(value: Any, test: Callable[[Any], str | None]) -> tuple[str, str] | None:
    """(JSON path, reason) of the first key or value `test` objects to."""
    stack: list[tuple[Any, tuple]] = [(value, ())]
    while stack:
        v, at = stack.pop()
        why = test(v)
        if why:
            return format_path(list(at)) or "<body>", why
        if isinstance(v, dict):
            for k, item in v.items():
                why = test(k)
                if why:
                    return format_path([*at, k]) or "<body>", f"a key {why}"
                stack.append((item, (*at, k)))
        elif isinstance(v, list):
            stack.extend((item, (*at, i)) for i, item in enumerate(v))
    return None


class _NonFinite(float):
    """NaN or +-Infinity as Python's json reads it, marked so the walk can find it."""


def _non_finite(v: Any) -> str | None:
    return f"{float(v)} is not a JSON number; give a finite number" if isinstance(v, _NonFinite) else None


def _bad_text(v: Any) -> str | None:
    return text_issue(v) if isinstance(v, str) else None


@functools.lru_cache(maxsize=8)
def _short_strings(max_bytes: int) -> re.Pattern:
    return re.compile(rb'"(?:[^"\\]|\\.){0,%d}"' % max_bytes, re.S)


def scan(body: bytes, max_string_bytes: int) -> tuple[int, bool]:
    """(deepest [ / { nesting, whether a string is longer than max_string_bytes) of a
    JSON text, by one C regex pass and numpy: strings up to the limit are removed left
    to right (each match starts outside a string and ends at its closing quote), so a
    quote left over is the opening quote of a longer one."""
    bare = _short_strings(max_string_bytes).sub(b"", body)
    if b'"' in bare:
        return 0, True
    if not bare:
        return 0, False
    steps = _OPEN[np.frombuffer(bare, np.uint8)].astype(np.int32)
    return int(np.cumsum(steps).max(initial=0)), False


def _deep_path(body: bytes, max_depth: int) -> str:
    """Where a too-deep body goes deep: its path down to the first run of list
    indices (options.x for {"options": {"x": [[[...]]]}}), or <body>."""
    try:
        value = json.loads(body)
    except (ValueError, RecursionError):
        return "<body>"
    at: tuple = ()
    stack: list[tuple[Any, tuple]] = [(value, ())]
    while stack:  # the path to the first node below the limit
        v, path = stack.pop()
        if len(path) > max_depth:
            at = path
            break
        if isinstance(v, dict):
            stack.extend((item, (*path, k)) for k, item in reversed(v.items()))
        elif isinstance(v, list):
            stack.extend((item, (*path, i)) for i, item in reversed(list(enumerate(v))))
    at = list(at)
    while at and isinstance(at[-1], int):
        at.pop()
    return format_path(at) or "<body>"


def parse_json(body: bytes, max_depth: int, max_string_bytes: int) -> Any:
    """The body's JSON value, or ApiError 422 naming the path and the reason."""
    if len(body) <= max_string_bytes and body.count(b"[") + body.count(b"{") <= max_depth:
        # no string can be over the limit, nor the nesting deeper than all its brackets:
        # the scan (a regex pass and numpy, ~35 us) is for bodies where it can (a plan
        # request's body is a few hundred bytes; issue 21, bench/service.py)
        depth, long = 0, False
    else:
        depth, long = scan(body, max_string_bytes)
    if long:
        raise _refuse("<body>", f"a string is longer than the service's limit of {max_string_bytes} bytes")
    if depth > max_depth:
        raise _refuse(_deep_path(body, max_depth), f"JSON nested {depth} levels deep; the service's limit is {max_depth}")
    marked = []

    def constant(name: str) -> float:
        marked.append(name)
        return _NonFinite(name)

    try:
        value = json.loads(body, parse_constant=constant)
    except RecursionError:
        raise _refuse("<body>", "JSON nested too deep") from None
    except (ValueError, UnicodeDecodeError) as exc:  # JSONDecodeError is a ValueError
        pos = getattr(exc, "pos", None)
        where = f" at byte {pos}" if pos is not None else ""
        raise _refuse("<body>", f"not valid JSON{where}: {getattr(exc, 'msg', None) or exc}") from None
    if marked:
        found = _first_bad(value, _non_finite)
        if found:
            raise _refuse(*found)
    if b"\\u" in body and _SUSPECT.search(body):  # every suspect is a \u escape; the search costs ~30 us
        found = _first_bad(value, _bad_text)
        if found:
            raise _refuse(*found)
    return value


def _is_json(request: Request) -> bool:
    ctype = request.headers.get("content-type")
    if not ctype:
        return True
    main = ctype.split(";", 1)[0].strip().lower()
    return main == "application/json" or (main.startswith("application/") and main.endswith("+json"))


class JsonRoute(APIRoute):
    """A route whose JSON body is parsed by `parse_json` (large ones in a thread)."""

    defer_errors = False  # True: a bad body is refused only after the route's dependencies (its 403 comes first)

    def get_route_handler(self) -> Callable:
        handler = super().get_route_handler()
        if self.body_field is None:  # no body model (document uploads read their body themselves)
            return handler
        defer = self.defer_errors

        async def checked(request: Request) -> Response:
            refused = None
            if request.method in BODY_METHODS and _is_json(request):
                body = await request.body()
                if body:
                    settings = request.app.state.settings
                    args = (body, settings.limits.max_json_depth, settings.limits.max_string_bytes)
                    try:
                        request._json = (parse_json(*args) if len(body) <= INLINE_BYTES
                                         else await run_in_threadpool(parse_json, *args))
                    except ApiError as exc:
                        if not defer:
                            raise
                        refused, request._json = exc, None  # FastAPI runs the dependencies, then finds no body
            if refused is None:
                return await handler(request)
            try:
                return await handler(request)
            except RequestValidationError:
                raise refused from None

        return checked


class AuthFirstJsonRoute(JsonRoute):
    """JsonRoute whose body errors come after its dependencies: a caller who may not
    use the resource gets 403 whatever it posted."""

    defer_errors = True
